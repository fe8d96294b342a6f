// attention.h, grouped-query attention (AttentionConfig::kvHeads): H query heads share H_kv key/value heads.
// H_kv = H is multi-head attention exactly as without the field; any other H_kv equals multi-head attention
// with each KV head's K and V (W^K, W^V and biases, or K and V in direct mode) repeated for every query head
// of its group, through the reference, the fast path and the incremental update, in both layouts.
#include "test_util.h"

#include <attnscope/attention.h>

#include <gtest/gtest.h>

#include <string>

namespace attn {
namespace {

using test::makeProblem;
using test::near;
using test::ProblemSpec;

AttentionResult run(const AttentionInput& in, AttentionConfig cfg, CpuPath path)
{
    cfg.cpuPath = path;
    Expected<AttentionResult> r = compute(in, cfg);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message);
    return r.ok() ? std::move(r).value() : AttentionResult{};
}

// Row layout: the columns of head block g (of width w) of m, repeated so that query head h gets block h / group.
Matrix repeatBlocks(const Matrix& m, int H, int Hkv, int w)
{
    Matrix out(m.rows(), Eigen::Index(H) * w);
    for (int h = 0; h < H; ++h) out.middleCols(Eigen::Index(h) * w, w) = m.middleCols(Eigen::Index(h / (H / Hkv)) * w, w);
    return out;
}
Vector repeatBlocks(const Vector& v, int H, int Hkv, int w)
{
    if (v.size() == 0) return v;
    Vector out(Eigen::Index(H) * w);
    for (int h = 0; h < H; ++h) out.segment(Eigen::Index(h) * w, w) = v.segment(Eigen::Index(h / (H / Hkv)) * w, w);
    return out;
}

// The multi-head problem equal to a grouped-query one (Row layout): K/V and their weights repeated per group.
void expandToMultiHead(const AttentionInput& in, const AttentionConfig& cfg, const ProblemSpec& p,
                       AttentionInput& mha, AttentionConfig& mhaCfg)
{
    const int H = p.heads, Hkv = p.kvHeads;
    mha = in;
    mhaCfg = cfg;
    mhaCfg.kvHeads = 0;
    if (cfg.mode == Mode::Direct) {
        mha.K = repeatBlocks(in.K, H, Hkv, p.dk);
        mha.V = repeatBlocks(in.V, H, Hkv, p.dv);
    } else {
        mha.Wk = repeatBlocks(in.Wk, H, Hkv, p.dk);
        mha.Wv = repeatBlocks(in.Wv, H, Hkv, p.dv);
        mha.bk = repeatBlocks(in.bk, H, Hkv, p.dk);
        mha.bv = repeatBlocks(in.bv, H, Hkv, p.dv);
    }
}

struct Combo {
    Layout layout;
    Mode mode;
    int heads, kvHeads;
    Score score;
    bool masks;   // causal + key padding + valid lengths + custom
    bool extras;  // biases (not in direct mode) + Wo (+ bo)
};

std::string comboName(const ::testing::TestParamInfo<Combo>& info)
{
    const Combo& c = info.param;
    return std::string(toString(c.layout)) + "_" + toString(c.mode) + "_h" + std::to_string(c.heads) + "kv" +
           std::to_string(c.kvHeads) + "_" + toString(c.score) + (c.masks ? "_masks" : "") + (c.extras ? "_extras" : "");
}

ProblemSpec specOf(const Combo& c)
{
    ProblemSpec p;
    p.mode = c.mode;
    p.score = c.score;
    p.heads = c.heads;
    p.kvHeads = c.kvHeads;
    p.T = 6;
    p.S = c.mode == Mode::Self ? 6 : 8;
    p.dqAdditive = 3;  // direct mode's additive queries: as wide as the keys (d_k = 3), to repeat K as is
    p.biases = c.extras && c.mode != Mode::Direct;
    p.wo = c.extras;
    p.causal = p.keyPadding = p.validLens = p.custom = c.masks;
    p.seed = 31u + unsigned(c.heads * 7 + c.kvHeads);
    return p;
}

// Every value a head shows, and the outputs: equal exactly (reference) or within the fast path's tolerance.
void expectSameHeads(const AttentionResult& gqa, const AttentionResult& mha, bool exact, const std::string& what)
{
    ASSERT_EQ(gqa.heads.size(), mha.heads.size()) << what;
    // Float32 products whose width differs (H_kv·d against H·d columns) may be blocked differently by Eigen:
    // a few ulps, as in test_attention's Sweep; a wrong KV head moves values by > 1e-2.
    const float atol = exact ? 0.0f : 1e-5f, rtol = exact ? 0.0f : 1e-4f;
    for (std::size_t h = 0; h < gqa.heads.size(); ++h) {
        const std::string hs = what + " head " + std::to_string(h) + " ";
        const HeadResult& a = gqa.heads[h];
        const HeadResult& b = mha.heads[h];
        EXPECT_TRUE(near(a.Q, b.Q, atol, rtol, hs + "Q"));
        EXPECT_TRUE(near(a.K, b.K, atol, rtol, hs + "K"));
        EXPECT_TRUE(near(a.V, b.V, atol, rtol, hs + "V"));
        EXPECT_TRUE(near(a.scores, b.scores, atol, rtol, hs + "scores"));
        EXPECT_EQ(a.masked, b.masked) << hs << "masked";
        EXPECT_TRUE(near(a.weights, b.weights, atol, rtol, hs + "weights"));
        EXPECT_TRUE(near(a.output, b.output, atol, rtol, hs + "output"));
        EXPECT_EQ(a.fullyMaskedQueries, b.fullyMaskedQueries) << hs;
    }
    EXPECT_TRUE(near(gqa.concat, mha.concat, atol, rtol, what + " concat"));
    EXPECT_TRUE(near(gqa.output, mha.output, atol, rtol, what + " output"));
    EXPECT_EQ(gqa.warnings, mha.warnings) << what;
}

class Grouped : public ::testing::TestWithParam<Combo> {};

TEST_P(Grouped, EqualsMultiHeadWithKeysAndValuesRepeatedPerGroup)
{
    const Combo c = GetParam();
    const ProblemSpec p = specOf(c);
    AttentionInput in, mha;
    AttentionConfig cfg, mhaCfg;
    makeProblem(p, in, cfg);
    expandToMultiHead(in, cfg, p, mha, mhaCfg);
    if (c.layout == Layout::Column) {
        in = test::transposed(in);
        mha = test::transposed(mha);
        cfg.layout = mhaCfg.layout = Layout::Column;
    }
    const Expected<Dims> d = validate(in, cfg);
    ASSERT_TRUE(d.ok()) << d.status().message;
    EXPECT_EQ(d->H, c.heads);
    EXPECT_EQ(d->Hkv, c.kvHeads);
    EXPECT_EQ(d->dk, p.dk);
    EXPECT_EQ(d->dv, p.dv);
    for (CpuPath path : {CpuPath::Reference, CpuPath::Fast}) {
        const std::string what = path == CpuPath::Reference ? "reference" : "fast";
        const AttentionResult g = run(in, cfg, path);
        const AttentionResult m = run(mha, mhaCfg, path);
        // The reference computes every entry on its own, in double: repeating columns changes no bit.
        expectSameHeads(g, m, path == CpuPath::Reference, what);
        // The result's K and V are the H_kv-wide projections; each head's are its KV head's slice.
        const Eigen::Index kvWidthK = Eigen::Index(c.kvHeads) * p.dk, kvWidthV = Eigen::Index(c.kvHeads) * p.dv;
        const bool row = c.layout == Layout::Row;
        EXPECT_EQ(row ? g.K.cols() : g.K.rows(), kvWidthK) << what;
        EXPECT_EQ(row ? g.V.cols() : g.V.rows(), kvWidthV) << what;
        EXPECT_EQ(row ? g.Q.cols() : g.Q.rows(), Eigen::Index(c.heads) * p.dk) << what;
        for (int h = 0; h < c.heads; ++h) {
            const int kv = h / (c.heads / c.kvHeads);
            EXPECT_EQ(d->kvHead(h), kv);
            const Matrix k = row ? Matrix(g.K.middleCols(kv * p.dk, p.dk)) : Matrix(g.K.middleRows(kv * p.dk, p.dk));
            const Matrix v = row ? Matrix(g.V.middleCols(kv * p.dv, p.dv)) : Matrix(g.V.middleRows(kv * p.dv, p.dv));
            EXPECT_EQ(g.heads[h].K, k) << what << " head " << h;
            EXPECT_EQ(g.heads[h].V, v) << what << " head " << h;
        }
    }
    // And the two paths agree on the grouped problem itself (test_attention's Sweep tolerance).
    expectSameHeads(run(in, cfg, CpuPath::Fast), run(in, cfg, CpuPath::Reference), false, "fast vs reference");
}

std::vector<Combo> combos()
{
    std::vector<Combo> v;
    for (Layout l : {Layout::Row, Layout::Column})
        for (Mode m : {Mode::Self, Mode::Cross, Mode::Direct})
            for (auto [h, kv] : {std::pair{4, 1}, std::pair{4, 2}, std::pair{6, 3}})
                for (bool masks : {false, true}) v.push_back({l, m, h, kv, Score::ScaledDot, masks, masks});
    for (Layout l : {Layout::Row, Layout::Column})
        for (Mode m : {Mode::Self, Mode::Direct}) {
            v.push_back({l, m, 4, 2, Score::Additive, true, true});
            v.push_back({l, m, 3, 1, Score::Dot, true, false});
        }
    return v;
}

INSTANTIATE_TEST_SUITE_P(All, Grouped, ::testing::ValuesIn(combos()), comboName);

TEST(Grouped, KvHeadsEqualToHeadsIsTodaysMultiHeadExactly)
{
    for (Mode mode : {Mode::Self, Mode::Cross, Mode::Direct})
        for (Layout layout : {Layout::Row, Layout::Column}) {
            ProblemSpec p;
            p.mode = mode;
            p.heads = 3;
            p.S = 7;
            p.biases = mode != Mode::Direct;
            p.wo = true;
            p.causal = p.keyPadding = true;
            AttentionInput in;
            AttentionConfig cfg;
            makeProblem(p, in, cfg);
            if (layout == Layout::Column) {
                in = test::transposed(in);
                cfg.layout = layout;
            }
            AttentionConfig explicitCfg = cfg;
            explicitCfg.kvHeads = 3;
            for (CpuPath path : {CpuPath::Reference, CpuPath::Fast})
                expectSameHeads(run(in, explicitCfg, path), run(in, cfg, path), true,
                                std::string(toString(mode)) + " " + toString(layout));
        }
}

// ---- Incremental updates: an edit of a KV head's weights reaches every query head of its group ----

::testing::AssertionResult sameAsFull(const AttentionResult& a, const AttentionInput& in, AttentionConfig cfg)
{
    cfg.incremental = false;
    Expected<AttentionResult> f = compute(in, cfg);
    if (!f.ok()) return ::testing::AssertionFailure() << f.status().message;
    // test_incremental's tolerance: rounding of a vector product against a blocked GEMM and of the rank-|R|
    // output correction, scaled to the matrix.
    auto close = [](const Matrix& x, const Matrix& y, const std::string& what) {
        const float scale = std::max(1.0f, y.size() ? y.cwiseAbs().maxCoeff() : 0.0f);
        return near(x, y, 1e-5f * scale, 1e-5f, what);
    };
    for (auto r : {close(a.K, f->K, "K"), close(a.V, f->V, "V"), close(a.output, f->output, "output")})
        if (!r) return r;
    for (std::size_t h = 0; h < a.heads.size(); ++h)
        for (auto r : {close(a.heads[h].K, f->heads[h].K, "head K"), close(a.heads[h].scores, f->heads[h].scores, "scores"),
                       close(a.heads[h].weights, f->heads[h].weights, "weights"),
                       close(a.heads[h].output, f->heads[h].output, "head output")})
            if (!r) return r << " (head " << h << ")";
    return ::testing::AssertionSuccess();
}

class GroupedIncremental : public ::testing::TestWithParam<std::tuple<Layout, Mode>> {};

TEST_P(GroupedIncremental, EditsReachTheirGroupAndEqualAFullCompute)
{
    const auto [layout, mode] = GetParam();
    ProblemSpec p;
    p.mode = mode;
    p.heads = 6;
    p.kvHeads = 3;  // groups {0,1} {2,3} {4,5}
    p.T = 20;
    p.S = mode == Mode::Self ? 20 : 17;
    p.biases = mode != Mode::Direct;
    p.wo = true;
    p.causal = true;
    p.keyPadding = true;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    if (layout == Layout::Column) {
        in = test::transposed(in);
        cfg.layout = layout;
    }
    AttentionResult r;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    auto cell = [&](Matrix& m, int token, int feature) -> float& {
        return layout == Layout::Row ? m(token, feature) : m(feature, token);
    };
    auto weightCell = [&](Matrix& m, int feature) -> float& {
        return layout == Layout::Row ? m(1, feature) : m(feature, 1);
    };

    // A cell of KV head 1's keys: W^K (or K itself in direct mode) column d_k + 1.
    const std::vector<Matrix> before = [&] {
        std::vector<Matrix> s;
        for (const HeadResult& h : r.heads) s.push_back(h.scores);
        return s;
    }();
    if (mode == Mode::Direct) cell(in.K, 2, p.dk + 1) += 0.75f;
    else weightCell(in.Wk, p.dk + 1) += 0.75f;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_TRUE(r.incremental);
    EXPECT_TRUE(sameAsFull(r, in, cfg));
    for (int h = 0; h < p.heads; ++h) {
        const bool inGroup = h == 2 || h == 3;
        if (inGroup) EXPECT_NE(r.heads[h].scores, before[std::size_t(h)]) << "head " << h << " of KV head 1 kept its scores";
        else EXPECT_EQ(r.heads[h].scores, before[std::size_t(h)]) << "head " << h << " outside KV head 1 changed";
    }

    // A value cell of KV head 2 (W^V, b^V, or V), then a token's row, then a W^Q cell of query head 0 alone.
    if (mode == Mode::Direct) cell(in.V, 4, 2 * p.dv) -= 0.5f;
    else in.bv[2 * p.dv + 1] -= 0.5f;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_TRUE(r.incremental);
    EXPECT_TRUE(sameAsFull(r, in, cfg)) << "after a value edit";

    Matrix& tokens = mode == Mode::Direct ? in.Q : in.X;
    cell(tokens, 5, 0) += 1.0f;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_TRUE(r.incremental);
    EXPECT_TRUE(sameAsFull(r, in, cfg)) << "after a token edit";

    if (mode != Mode::Direct) {
        weightCell(in.Wq, 0) += 0.5f;
        ASSERT_TRUE(compute(in, cfg, r).ok());
        EXPECT_TRUE(r.incremental);
        EXPECT_TRUE(sameAsFull(r, in, cfg)) << "after a W^Q edit";
    }
}

INSTANTIATE_TEST_SUITE_P(All, GroupedIncremental,
                         ::testing::Combine(::testing::Values(Layout::Row, Layout::Column),
                                            ::testing::Values(Mode::Self, Mode::Cross, Mode::Direct)),
                         [](const auto& info) {
                             return std::string(toString(std::get<0>(info.param))) + "_" +
                                    toString(std::get<1>(info.param));
                         });

TEST(GroupedIncremental, MultiQueryKeyEditTouchesEveryHeadAndIsAFullCompute)
{
    ProblemSpec p;
    p.heads = 4;
    p.kvHeads = 1;
    p.T = p.S = 16;
    p.causal = true;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    AttentionResult r;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    in.Wk(0, 1) += 0.5f;  // the one KV head: every query head changes
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_FALSE(r.incremental);
    EXPECT_TRUE(sameAsFull(r, in, cfg));
    in.X(3, 2) += 0.5f;  // a token: served
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_TRUE(r.incremental);
    EXPECT_TRUE(sameAsFull(r, in, cfg));
}

TEST(GroupedIncremental, ChangingKvHeadsIsAFullCompute)
{
    ProblemSpec p;
    p.heads = 4;
    p.kvHeads = 2;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    AttentionResult r;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    // The same input read as 2 query heads of width 6 sharing one KV head (W^Q 12 wide, W^K 6 wide).
    AttentionConfig two = cfg;
    two.heads = 2;
    two.kvHeads = 1;
    const AttentionInput& in2 = in;
    ASSERT_TRUE(compute(in2, two, r).ok());
    EXPECT_FALSE(r.incremental);
    EXPECT_TRUE(sameAsFull(r, in2, two));
}

} // namespace
} // namespace attn
