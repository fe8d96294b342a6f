// The window's colour ranges (state/result_ranges.h): after an incremental compute the scores' range of a head
// is updated from the previous ranges and the changed rows and columns alone (the weights' from the rows'
// scales and the changed keys, in Row layout); each must equal the full scan of
// the result (the oracle) after any edit, with masks, in both layouts, and wherever the old min or max sat.
#include "state/result_ranges.h"

#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/result_change.h>

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

namespace {

using attn::AttentionConfig;
using attn::AttentionInput;
using attn::AttentionResult;
using attn::DisplayRange;
using attn::Layout;
using attn::Mode;

::testing::AssertionResult sameRange(const DisplayRange& a, const DisplayRange& b, const std::string& what)
{
    if (a.lo == b.lo && a.hi == b.hi && a.nonFinite == b.nonFinite && a.scale == b.scale) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": [" << a.lo << ", " << a.hi << "] (" << a.nonFinite
                                         << " non-finite) against the full scan's [" << b.lo << ", " << b.hi << "] ("
                                         << b.nonFinite << ")";
}

::testing::AssertionResult sameRanges(const app::ResultRanges& a, const app::ResultRanges& b)
{
    if (a.scores.size() != b.scores.size()) return ::testing::AssertionFailure() << "head count differs";
    for (std::size_t h = 0; h < a.scores.size(); ++h) {
        const std::string hs = "head " + std::to_string(h);
        for (auto r : {sameRange(a.scores[h], b.scores[h], hs + " scores"), sameRange(a.weights[h], b.weights[h], hs + " weights"),
                       sameRange(a.headOut[h], b.headOut[h], hs + " output")})
            if (!r) return r;
    }
    return sameRange(a.output, b.output, "output");
}

// The token (row semantics) holding head h's largest unmasked score, as query (first) and key (second).
std::pair<int, int> argMaxScore(const AttentionResult& r, std::size_t h)
{
    const attn::HeadResult& hr = r.heads[h];
    float best = -INFINITY;
    std::pair<int, int> at{0, 0};
    for (Eigen::Index i = 0; i < hr.scores.rows(); ++i)
        for (Eigen::Index j = 0; j < hr.scores.cols(); ++j)
            if ((hr.masked.size() == 0 || !hr.masked(i, j)) && hr.scores(i, j) > best) {
                best = hr.scores(i, j);
                at = r.layout == Layout::Row ? std::pair{int(i), int(j)} : std::pair{int(j), int(i)};
            }
    return at;
}

// layout, mask kind (0 causal + key padding + valid lengths, 1 key padding with a finite fill, 2 none), mode
class IncrementalRanges : public ::testing::TestWithParam<std::tuple<Layout, int, Mode>> {};

TEST_P(IncrementalRanges, EqualFullScanAfterRandomEdits)
{
    const auto [layout, maskKind, mode] = GetParam();
    attn::test::ProblemSpec p;
    p.mode = mode;
    p.heads = 3;
    p.T = 24;
    p.S = mode == Mode::Self ? 24 : 19;
    p.M = 10;
    p.dk = 4;
    p.dv = 3;
    p.biases = true;
    p.wo = true;
    p.causal = maskKind == 0;
    p.keyPadding = maskKind <= 1;
    p.validLens = maskKind == 0;
    if (maskKind == 1) p.fill = -1e4f;
    p.seed = 9;
    AttentionInput in;
    AttentionConfig cfg;
    attn::test::makeProblem(p, in, cfg);
    if (layout == Layout::Column) {
        in = attn::test::transposed(in);
        cfg.layout = Layout::Column;
    }
    const bool col = layout == Layout::Column;
    app::RangeOptions o;
    o.shared = false;  // per head, so that each head's range is compared
    o.scores = false;  // the raw min and max
    // Two buffers computed alternately (each two edits behind, as in test_incremental), each with the ranges
    // it had; every step also tries the other buffer's ranges, which describe another result (a full scan).
    AttentionResult buffers[2];
    app::ResultRanges ranges[2];
    for (int b = 0; b < 2; ++b) {
        ASSERT_TRUE(attn::compute(in, cfg, buffers[b]).ok());
        ranges[b] = app::computeResultRanges(buffers[b], o);
    }
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int updated = 0, weightsUpdated = 0, inward = 0;
    const int edits = 300;
    for (int e = 0; e < edits; ++e) {
        const int kind = std::uniform_int_distribution<int>(0, 7)(rng);
        attn::Matrix& X = mode == Mode::Cross && kind % 2 ? in.Xkv : in.X;
        std::string what;
        if (kind <= 2) {  // one cell
            const Eigen::Index t = std::uniform_int_distribution<Eigen::Index>(0, (col ? X.cols() : X.rows()) - 1)(rng);
            const Eigen::Index f = std::uniform_int_distribution<Eigen::Index>(0, (col ? X.rows() : X.cols()) - 1)(rng);
            (col ? X(f, t) : X(t, f)) += nd(rng);
            what = "a cell of X";
        } else if (kind <= 4) {  // the token of head 0's largest score scaled down: the max moves inward
            const auto [qi, kj] = argMaxScore(buffers[(e + 1) % 2], 0);
            const int t = mode == Mode::Cross ? (&X == &in.X ? qi : kj) : (kind == 3 ? qi : kj);
            if (col) X.col(t) *= 0.1f; else X.row(t) *= 0.1f;
            ++inward;
            what = "the max's token scaled by 0.1";
        } else if (kind == 5) {  // a token made large: the extremes move outward
            const Eigen::Index t = std::uniform_int_distribution<Eigen::Index>(0, (col ? X.cols() : X.rows()) - 1)(rng);
            if (col) X.col(t) *= 3.0f; else X.row(t) *= 3.0f;
            what = "a token scaled by 3";
        } else if (kind == 6) {  // a W^Q cell: its head changes whole
            in.Wq(std::uniform_int_distribution<Eigen::Index>(0, in.Wq.rows() - 1)(rng),
                  std::uniform_int_distribution<Eigen::Index>(0, in.Wq.cols() - 1)(rng)) += nd(rng);
            what = "a W^Q cell";
        } else {
            what = "nothing";
        }
        const int b = e % 2;
        ASSERT_TRUE(attn::compute(in, cfg, buffers[b]).ok()) << "edit " << e;
        const app::ResultRanges oracle = app::computeResultRanges(buffers[b], o);
        const app::ResultRanges other = app::computeResultRanges(buffers[b], o, &ranges[1 - b]);
        EXPECT_EQ(other.scoresUpdated, 0) << "edit " << e << ": ranges of another result were used";
        ASSERT_TRUE(sameRanges(other, oracle)) << "edit " << e << " (" << what << "), the other buffer's ranges";
        app::ResultRanges next = app::computeResultRanges(buffers[b], o, &ranges[b]);
        ASSERT_TRUE(sameRanges(next, oracle)) << "edit " << e << " (" << what << "), incremental: "
                                              << next.scoresUpdated << " heads updated";
        // The shared options too (the window's default): the union over heads of the same ranges.
        ASSERT_TRUE(sameRanges(app::computeResultRanges(buffers[b], app::RangeOptions{}, &ranges[b]),
                               app::computeResultRanges(buffers[b], app::RangeOptions{})))
            << "edit " << e << " (" << what << "), shared";
        updated += next.scoresUpdated;
        weightsUpdated += next.weightsUpdated;
        ranges[b] = std::move(next);
    }
    EXPECT_GT(inward, 0);
    // Most edits leave some head clean (a W^Q cell dirties one of 3), so most heads' ranges were updated.
    EXPECT_GT(updated, edits);
    // The weights' range is updated in both layouts (per query: a row in Row layout, a column in Column layout).
    EXPECT_GT(weightsUpdated, edits);
}

INSTANTIATE_TEST_SUITE_P(LayoutsMasksModes, IncrementalRanges,
                         ::testing::Combine(::testing::Values(Layout::Row, Layout::Column), ::testing::Values(0, 1, 2),
                                            ::testing::Values(Mode::Self, Mode::Cross)));

// A result computed whole (not from an edit) or a range without a base is scanned whole, and says so.
TEST(IncrementalRanges, FullComputeScansWhole)
{
    attn::test::ProblemSpec p;
    p.heads = 2;
    p.T = p.S = 12;
    p.causal = true;
    AttentionInput in;
    AttentionConfig cfg;
    attn::test::makeProblem(p, in, cfg);
    AttentionResult r;
    ASSERT_TRUE(attn::compute(in, cfg, r).ok());
    const app::ResultRanges first = app::computeResultRanges(r, {});
    EXPECT_EQ(first.scoresUpdated, 0);
    ASSERT_NE(attn::resultChange(r), nullptr);
    EXPECT_EQ(first.serial, attn::resultChange(r)->serial);
    // A mask changed: a full compute, which says everything changed.
    in.mask.causal = false;
    in.X(3, 1) += 1.0f;
    ASSERT_TRUE(attn::compute(in, cfg, r).ok());
    ASSERT_FALSE(r.incremental);
    ASSERT_NE(attn::resultChange(r), nullptr);
    EXPECT_TRUE(attn::resultChange(r)->all);
    EXPECT_EQ(attn::resultChange(r)->base, first.serial);
    const app::ResultRanges second = app::computeResultRanges(r, {}, &first);
    EXPECT_EQ(second.scoresUpdated, 0);
    EXPECT_TRUE(sameRanges(second, app::computeResultRanges(r, {})));
    // Without the incremental path there is no account at all (null: everything changed).
    cfg.incremental = false;
    in.X(2, 0) += 1.0f;
    ASSERT_TRUE(attn::compute(in, cfg, r).ok());
    EXPECT_EQ(attn::resultChange(r), nullptr);
    const app::ResultRanges third = app::computeResultRanges(r, {}, &second);
    EXPECT_EQ(third.scoresUpdated, 0);
    EXPECT_TRUE(sameRanges(third, app::computeResultRanges(r, {})));
}

} // namespace
