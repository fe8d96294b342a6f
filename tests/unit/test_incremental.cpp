// attention.h, incremental recompute: compute() into a result that already holds a fast-path result updates
// only what the edit reaches, and must equal a full recompute of the edited input; everything it cannot
// serve falls back to a full compute (AttentionResult::incremental says which happened).
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/layout.h>

#include <gtest/gtest.h>

#include <random>

namespace attn {
namespace {

using test::makeProblem;
using test::near;
using test::ProblemSpec;

// Incremental and full differ only by float rounding: a score row/column recomputed as a vector product
// instead of inside a blocked GEMM (~1e-7 relative), and output rows corrected by a rank-|R| update
// instead of recomputed (a few ulps per edit, random-walking over the edits). 1e-5 of the matrix's scale
// plus 1e-5 relative (the bound) leaves room for that without hiding a wrong row, column or head,
// which moves values by > 1e-2.
::testing::AssertionResult close(const Matrix& actual, const Matrix& expected, const std::string& what)
{
    const float scale = std::max(1.0f, expected.size() ? expected.cwiseAbs().maxCoeff() : 0.0f);
    return near(actual, expected, 1e-5f * scale, 1e-5f, what);
}

::testing::AssertionResult sameResult(const AttentionResult& a, const AttentionResult& full)
{
    if (a.heads.size() != full.heads.size()) return ::testing::AssertionFailure() << "head count differs";
    for (auto r : {close(a.Q, full.Q, "Q"), close(a.K, full.K, "K"), close(a.V, full.V, "V"),
                   close(a.concat, full.concat, "concat"), close(a.output, full.output, "output")})
        if (!r) return r;
    for (std::size_t h = 0; h < a.heads.size(); ++h) {
        const HeadResult& x = a.heads[h];
        const HeadResult& y = full.heads[h];
        const std::string hs = "head " + std::to_string(h) + " ";
        for (auto r : {close(x.Q, y.Q, hs + "Q"), close(x.K, y.K, hs + "K"), close(x.V, y.V, hs + "V"),
                       close(x.scores, y.scores, hs + "scores"), close(x.weights, y.weights, hs + "weights"),
                       close(x.output, y.output, hs + "output")})
            if (!r) return r;
        if (x.masked != y.masked) return ::testing::AssertionFailure() << hs << "mask differs";
        if (x.fullyMaskedQueries != y.fullyMaskedQueries) return ::testing::AssertionFailure() << hs << "fully masked rows differ";
    }
    return ::testing::AssertionSuccess();
}

AttentionResult full(const AttentionInput& in, AttentionConfig cfg)
{
    cfg.incremental = false;
    Expected<AttentionResult> r = compute(in, cfg);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message);
    EXPECT_FALSE(r.ok() && r->incremental);
    return r.ok() ? std::move(r).value() : AttentionResult{};
}

void editCell(std::mt19937& rng, Matrix& m)
{
    std::uniform_int_distribution<Eigen::Index> r(0, m.rows() - 1), c(0, m.cols() - 1);
    std::normal_distribution<float> v(0.0f, 1.0f);
    m(r(rng), c(rng)) += v(rng);
}
void editCell(std::mt19937& rng, Vector& b)
{
    std::uniform_int_distribution<Eigen::Index> i(0, b.size() - 1);
    std::normal_distribution<float> v(0.0f, 1.0f);
    b[i(rng)] += v(rng);
}

struct Case {
    Layout layout;
    Mode mode;
    int maskKind;  // 0 causal + key padding + valid lengths, 1 key padding + finite fill, 2 none
    bool skipCausal = false;  // AttentionConfig::skipCausalMaskedScores
    // 0: 3 heads (multi-head); else 6 query heads sharing kvHeads KV heads. With 3 KV heads the two edits a
    // result is behind dirty at most 4 of the 6 heads, so every edit stays incremental.
    int kvHeads = 0;
};

class RandomEdits : public ::testing::TestWithParam<Case> {};

// Random single- and multi-cell edits of every input a mode has; two results computed alternately, as the
// window's worker does, so each is two edits behind the input it is given.
TEST_P(RandomEdits, IncrementalEqualsFullRecompute)
{
    const Case c = GetParam();
    ProblemSpec p;
    p.mode = c.mode;
    p.heads = c.kvHeads ? 6 : 3;
    p.kvHeads = c.kvHeads;
    p.T = 24;
    p.S = c.mode == Mode::Self ? 24 : 19;
    p.M = 10;
    p.dk = 4;
    p.dv = 3;
    p.biases = c.mode != Mode::Direct;
    p.wo = true;
    p.causal = c.maskKind == 0;
    p.keyPadding = c.maskKind <= 1;
    p.validLens = c.maskKind == 0;
    if (c.maskKind == 1) p.fill = -1e4f;
    p.seed = 5;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    if (c.layout == Layout::Column) {
        in = test::transposed(in);
        cfg.layout = Layout::Column;
    }
    cfg.skipCausalMaskedScores = c.skipCausal;
    std::mt19937 rng(17);
    AttentionResult buffers[2];
    ASSERT_TRUE(compute(in, cfg, buffers[0]).ok());
    ASSERT_TRUE(compute(in, cfg, buffers[1]).ok());
    int served = 0;
    const int edits = 400;  // × 10 cases = 4000 edits
    for (int e = 0; e < edits; ++e) {
        const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
        std::string what;
        if (c.mode == Mode::Direct) {
            Matrix* m[] = {&in.Q, &in.K, &in.V};
            editCell(rng, *m[kind % 3]);
            if (kind == 9) editCell(rng, in.Wo);
            what = "Q/K/V cell";
        } else if (kind <= 3) {
            editCell(rng, in.X);
            what = "X cell";
        } else if (kind == 4) {
            for (int k = 0; k < 3; ++k) editCell(rng, c.mode == Mode::Cross ? in.Xkv : in.X);
            what = "3 cells of X (or X_kv)";
        } else if (kind == 5) {
            Matrix* m[] = {&in.Wq, &in.Wk, &in.Wv};
            editCell(rng, *m[std::uniform_int_distribution<int>(0, 2)(rng)]);
            what = "W^Q/W^K/W^V cell";
        } else if (kind == 6) {
            editCell(rng, in.Wo);
            what = "W^O cell";
        } else if (kind == 7) {
            Vector* b[] = {&in.bq, &in.bk, &in.bv, &in.bo};
            editCell(rng, *b[std::uniform_int_distribution<int>(0, 3)(rng)]);
            what = "bias cell";
        } else if (kind == 8) {
            editCell(rng, in.X);
            editCell(rng, in.Wk);
            what = "X cell + W^K cell";
        } else {
            what = "nothing";
        }
        AttentionResult& r = buffers[e % 2];
        ASSERT_TRUE(compute(in, cfg, r).ok());
        served += r.incremental;
        ASSERT_TRUE(sameResult(r, full(in, cfg))) << "edit " << e << ": " << what;
    }
    // Everything above is within what the incremental path serves (few rows, not every head).
    EXPECT_EQ(served, edits);
}

std::string caseName(const ::testing::TestParamInfo<Case>& info)
{
    static const char* masks[] = {"causal_keypad_validlens", "keypad_finitefill", "nomask"};
    return std::string(toString(info.param.layout)) + "_" + toString(info.param.mode) + "_" + masks[info.param.maskKind] +
           (info.param.skipCausal ? "_skipcausal" : "") +
           (info.param.kvHeads ? "_kv" + std::to_string(info.param.kvHeads) : "");
}

INSTANTIATE_TEST_SUITE_P(Cases, RandomEdits,
                         ::testing::Values(Case{Layout::Row, Mode::Self, 0}, Case{Layout::Column, Mode::Self, 0, true},
                                           Case{Layout::Row, Mode::Self, 0, true}, Case{Layout::Row, Mode::Cross, 1},
                                           Case{Layout::Column, Mode::Cross, 1}, Case{Layout::Row, Mode::Direct, 2},
                                           Case{Layout::Column, Mode::Direct, 0},
                                           // Grouped-query attention: a W^K/W^V/b^K/b^V edit reaches both
                                           // query heads of its KV head.
                                           Case{Layout::Row, Mode::Self, 0, false, 3},
                                           Case{Layout::Column, Mode::Cross, 1, false, 3},
                                           Case{Layout::Row, Mode::Direct, 0, false, 3}),
                         caseName);

// ---- Fallbacks: what incremental can't serve is a full compute, with the right result ----

struct Computed {
    AttentionInput in;
    AttentionConfig cfg;
    AttentionResult r;
};

Computed computed(int T = 20)
{
    Computed s;
    ProblemSpec p;
    p.heads = 2;
    p.T = p.S = T;
    p.wo = true;
    p.biases = true;
    p.causal = true;
    makeProblem(p, s.in, s.cfg);
    EXPECT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    return s;
}

TEST(Fallback, OneCellEditIsIncrementalAndTheFlagTurnsItOff)
{
    Computed s = computed();
    s.in.X(3, 1) += 0.5f;
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_TRUE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(s.in, s.cfg)));
    s.cfg.incremental = false;
    s.in.X(4, 1) += 0.5f;
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
}

TEST(Fallback, MaskChangeIsAFullCompute)
{
    Computed s = computed();
    s.in.mask.keyPadding.assign(20, 0);
    s.in.mask.keyPadding[5] = 1;
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(s.in, s.cfg)));
    s.in.mask.causal = false;
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(s.in, s.cfg)));
}

TEST(Fallback, SizeHeadsAndScoreChangesAreFullComputes)
{
    Computed s = computed();
    // More tokens.
    Computed bigger = computed(28);
    ASSERT_TRUE(compute(bigger.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(bigger.in, s.cfg)));
    // Other head count on the same input.
    AttentionConfig one = bigger.cfg;
    one.heads = 1;
    ASSERT_TRUE(compute(bigger.in, one, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(bigger.in, one)));
    // Another scale.
    one.scale = 0.25f;
    ASSERT_TRUE(compute(bigger.in, one, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(bigger.in, one)));
}

TEST(Fallback, ManyRowsOrEveryHeadIsAFullCompute)
{
    Computed s = computed(64);
    for (int i = 0; i < 40; ++i) s.in.X(i, 0) += 0.1f;  // 40 of 64 tokens
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(s.in, s.cfg)));
    s.in.Wq(0, 0) += 0.1f;  // head 0
    s.in.Wq(0, s.in.Wq.cols() - 1) += 0.1f;  // head 1
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(s.in, s.cfg)));
}

TEST(Fallback, AReferenceOrCopiedResultStartsOver)
{
    Computed s = computed();
    AttentionResult copy = s.r;  // a copy carries no snapshot
    s.in.X(1, 1) += 1.0f;
    ASSERT_TRUE(compute(s.in, s.cfg, copy).ok());
    EXPECT_FALSE(copy.incremental);
    AttentionConfig ref = s.cfg;
    ref.cpuPath = CpuPath::Reference;
    ASSERT_TRUE(compute(s.in, ref, s.r).ok());
    s.in.X(2, 1) += 1.0f;
    ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
    EXPECT_FALSE(s.r.incremental);
    EXPECT_TRUE(sameResult(s.r, full(s.in, s.cfg)));
}

// copyResult carries the snapshot: the copy's next compute is incremental and exact, the original and the copy
// then go their own ways (no shared state), in both layouts with a causal mask and key padding.
TEST(Fallback, CopyResultKeepsTheSnapshot)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Computed s = computed();
        if (layout == Layout::Column) {
            s.cfg.layout = Layout::Column;
            restateInput(s.in, Layout::Row, Layout::Column);
            ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
        }
        s.in.mask.keyPadding.assign(20, 0);
        s.in.mask.keyPadding[7] = 1;
        ASSERT_TRUE(compute(s.in, s.cfg, s.r).ok());
        AttentionResult copy;
        copyResult(s.r, copy);
        ASSERT_TRUE(sameResult(copy, s.r));
        AttentionInput a = s.in, b = s.in;
        // One token's cell each (Column: tokens are columns of X).
        (layout == Layout::Row ? a.X(2, 3) : a.X(3, 2)) += 0.75f;
        (layout == Layout::Row ? b.X(5, 1) : b.X(1, 5)) -= 0.5f;
        ASSERT_TRUE(compute(a, s.cfg, copy).ok());
        EXPECT_TRUE(copy.incremental) << toString(layout);
        EXPECT_TRUE(sameResult(copy, full(a, s.cfg))) << toString(layout);
        ASSERT_TRUE(compute(b, s.cfg, s.r).ok());
        EXPECT_TRUE(s.r.incremental) << toString(layout);
        EXPECT_TRUE(sameResult(s.r, full(b, s.cfg))) << toString(layout);
        // The copy, several edits behind b now, catches up from its own snapshot.
        ASSERT_TRUE(compute(b, s.cfg, copy).ok());
        EXPECT_TRUE(copy.incremental) << toString(layout);
        EXPECT_TRUE(sameResult(copy, full(b, s.cfg))) << toString(layout);
        copyResult(copy, copy);  // onto itself: nothing changes
        EXPECT_TRUE(sameResult(copy, full(b, s.cfg)));
    }
}

TEST(Fallback, AdditiveScoreIsAlwaysFull)
{
    ProblemSpec p;
    p.score = Score::Additive;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    AttentionResult r;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    in.X(0, 0) += 1.0f;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_FALSE(r.incremental);
    EXPECT_TRUE(sameResult(r, full(in, cfg)));
}

} // namespace
} // namespace attn
