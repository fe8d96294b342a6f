// attention.h: the reference and Eigen paths agree, layouts are transposes, and softmax/mask properties hold.
#include "test_util.h"

#include <attnscope/attention.h>

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

namespace attn {
namespace {

using test::makeProblem;
using test::near;
using test::ProblemSpec;

// Seed 000 ("Scaled Dot-Product Attention: from Vector to Matrix") worked example.
AttentionInput seed000()
{
    AttentionInput in;
    in.X = Matrix{{1, 1, 1, 0}, {1, 2, 1, 0}, {0, 1, 0, 1}, {0, 1, 1, 0}};
    in.Wq = Matrix{{1, 0, 1}, {1, 1, 1}, {0, 0, 1}, {1, 0, 0}};
    in.Wk = Matrix{{1, 0, 0}, {1, 1, 1}, {1, 0, 1}, {0, 1, 0}};
    in.Wv = Matrix{{1, 2, 0}, {1, 3, 1}, {1, 0, 2}, {1, 1, 0}};
    return in;
}

const Matrix kSeed000Output{{3.9492f, 7.8588f, 3.9577f},
                            {3.9924f, 7.9784f, 3.9934f},
                            {3.8407f, 7.5669f, 3.8595f},
                            {3.7902f, 7.4482f, 3.8228f}};

AttentionResult run(const AttentionInput& in, AttentionConfig cfg, CpuPath path)
{
    cfg.cpuPath = path;
    Expected<AttentionResult> r = compute(in, cfg);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message);
    return r.ok() ? std::move(r).value() : AttentionResult{};
}

TEST(Seed000, BothPathsBothLayoutsGiveThePublishedNumbers)
{
    // The seed prints 4 decimals: anything within half a unit of the last digit (5e-5) matches.
    for (CpuPath path : {CpuPath::Reference, CpuPath::Fast}) {
        AttentionConfig cfg;
        AttentionResult row = run(seed000(), cfg, path);
        EXPECT_TRUE(near(row.output, kSeed000Output, 5e-5f, 0, "row output"));
        cfg.layout = Layout::Column;
        AttentionResult col = run(test::transposed(seed000()), cfg, path);
        EXPECT_TRUE(near(col.output, kSeed000Output.transpose(), 5e-5f, 0, "column output"));
        EXPECT_FLOAT_EQ(row.scale, 1.0f / std::sqrt(3.0f));
    }
}

// ---- The full sweep: every combination of layout × mode × heads × score × mask, plus biases and Wo ----

struct Combo {
    Layout layout;
    Mode mode;
    int heads;
    Score score;
    int maskKind;  // 0 none, 1 causal, 2 key padding, 3 valid lens, 4 custom, 5 all, 6 all with fill -1e6
    bool extras;   // biases + Wo (+ bo)
};

std::string comboName(const ::testing::TestParamInfo<Combo>& info)
{
    const Combo& c = info.param;
    static const char* masks[] = {"nomask", "causal", "keypad", "validlens", "custom", "all", "allfinite"};
    return std::string(toString(c.layout)) + "_" + toString(c.mode) + "_h" + std::to_string(c.heads) + "_" +
           toString(c.score) + "_" + masks[c.maskKind] + (c.extras ? "_extras" : "");
}

ProblemSpec specOf(const Combo& c, unsigned seed)
{
    ProblemSpec p;
    p.mode = c.mode;
    p.score = c.score;
    p.heads = c.heads;
    p.T = 5;
    p.S = c.mode == Mode::Self ? 5 : 7;  // cross/direct: n_q ≠ n_k
    p.biases = c.extras && c.mode != Mode::Direct;
    p.wo = c.extras;
    p.causal = c.maskKind == 1 || c.maskKind >= 5;
    p.keyPadding = c.maskKind == 2 || c.maskKind >= 5;
    p.validLens = c.maskKind == 3 || c.maskKind >= 5;
    p.custom = c.maskKind == 4 || c.maskKind >= 5;
    if (c.maskKind == 6) p.fill = -1e6f;
    p.seed = seed;
    return p;
}

class Sweep : public ::testing::TestWithParam<Combo> {};

TEST_P(Sweep, EigenMatchesReference)
{
    const Combo c = GetParam();
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(specOf(c, 7 + c.heads), in, cfg);
    if (c.layout == Layout::Column) {
        in = test::transposed(in);
        cfg.layout = Layout::Column;
    }
    const AttentionResult ref = run(in, cfg, CpuPath::Reference);
    const AttentionResult fast = run(in, cfg, CpuPath::Fast);
    AttentionConfig skipCfg = cfg;
    skipCfg.skipCausalMaskedScores = true;
    const AttentionResult fastSkip = run(in, skipCfg, CpuPath::Fast);
    ASSERT_EQ(ref.heads.size(), size_t(c.heads));
    ASSERT_EQ(fast.heads.size(), size_t(c.heads));
    ASSERT_EQ(fastSkip.heads.size(), size_t(c.heads));
    // Float32 Eigen sums vs double-accumulated reference over at most ~12 terms of O(1) values: the
    // difference is a few float ulps (~1e-6 relative); 1e-5 abs + 1e-4 rel leaves room without hiding bugs
    // (a wrong mask, axis or head block changes values by > 1e-2).
    const float atol = 1e-5f, rtol = 1e-4f;
    for (int h = 0; h < c.heads; ++h) {
        const std::string hs = "head " + std::to_string(h) + " ";
        EXPECT_TRUE(near(fast.heads[h].Q, ref.heads[h].Q, atol, rtol, hs + "Q"));
        EXPECT_TRUE(near(fast.heads[h].scores, ref.heads[h].scores, atol, rtol, hs + "scores"));
        // Told to, the fast path skips the scores the causal mask hides (key j > query i) and leaves them 0;
        // nothing else changes.
        Matrix expected = ref.heads[h].scores;
        if (in.mask.causal)
            for (Eigen::Index i = 0; i < expected.rows(); ++i)
                for (Eigen::Index j = 0; j < expected.cols(); ++j) {
                    const Eigen::Index q = c.layout == Layout::Row ? i : j, k = c.layout == Layout::Row ? j : i;
                    if (k > q) expected(i, j) = 0;
                }
        EXPECT_TRUE(near(fastSkip.heads[h].scores, expected, atol, rtol, hs + "scores (causal skipped)"));
        EXPECT_TRUE(near(fastSkip.heads[h].weights, ref.heads[h].weights, atol, rtol, hs + "weights (causal skipped)"));
        EXPECT_TRUE(near(fastSkip.heads[h].output, ref.heads[h].output, atol, rtol, hs + "output (causal skipped)"));
        EXPECT_EQ(fastSkip.heads[h].masked, ref.heads[h].masked) << hs << "masked (causal skipped)";
        EXPECT_EQ(fast.heads[h].masked, ref.heads[h].masked) << hs << "masked";
        EXPECT_TRUE(near(fast.heads[h].weights, ref.heads[h].weights, atol, rtol, hs + "weights"));
        EXPECT_TRUE(near(fast.heads[h].output, ref.heads[h].output, atol, rtol, hs + "output"));
        EXPECT_EQ(fast.heads[h].fullyMaskedQueries, ref.heads[h].fullyMaskedQueries) << hs;
    }
    EXPECT_TRUE(near(fast.concat, ref.concat, atol, rtol, "concat"));
    EXPECT_TRUE(near(fast.output, ref.output, atol, rtol, "output"));
    EXPECT_EQ(fast.warnings, ref.warnings);
}

class RowVsColumn : public ::testing::TestWithParam<Combo> {};

TEST_P(RowVsColumn, ColumnLayoutIsTheTransposeOfRowLayout)
{
    const Combo c = GetParam();
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(specOf(c, 11), in, cfg);
    AttentionConfig colCfg = cfg;
    colCfg.layout = Layout::Column;
    const AttentionInput colIn = test::transposed(in);
    for (CpuPath path : {CpuPath::Reference, CpuPath::Fast}) {
        const AttentionResult row = run(in, cfg, path);
        const AttentionResult col = run(colIn, colCfg, path);
        ASSERT_EQ(row.heads.size(), col.heads.size());
        if (path == CpuPath::Reference) {
            // The reference sums in the same order in both layouts, so the transpose is exact.
            for (size_t h = 0; h < row.heads.size(); ++h) {
                EXPECT_EQ(Matrix(col.heads[h].weights.transpose()), row.heads[h].weights);
                EXPECT_EQ(Matrix(col.heads[h].output.transpose()), row.heads[h].output);
                EXPECT_EQ(Matrix(col.heads[h].scores.transpose()), row.heads[h].scores);
                EXPECT_EQ(MaskMatrix(col.heads[h].masked.transpose()), row.heads[h].masked);
            }
            EXPECT_EQ(Matrix(col.output.transpose()), row.output);
        } else {
            // One computation over two storage orders (the same kernels over mapped buffers). Masks are exact;
            // values agree to float rounding: Eigen's small products are coefficient-based and split each
            // inner product into vector lanes along whichever operand is contiguous, which the storage
            // order decides (see Sweep for the tolerance).
            for (size_t h = 0; h < row.heads.size(); ++h) {
                EXPECT_TRUE(near(col.heads[h].Q.transpose(), row.heads[h].Q, 1e-5f, 1e-4f, "Qᵀ"));
                EXPECT_TRUE(near(col.heads[h].scores.transpose(), row.heads[h].scores, 1e-5f, 1e-4f, "scoresᵀ"));
                EXPECT_EQ(MaskMatrix(col.heads[h].masked.transpose()), row.heads[h].masked);
                EXPECT_TRUE(near(col.heads[h].weights.transpose(), row.heads[h].weights, 1e-5f, 1e-4f, "weightsᵀ"));
                EXPECT_TRUE(near(col.heads[h].output.transpose(), row.heads[h].output, 1e-5f, 1e-4f, "outputᵀ"));
                EXPECT_EQ(col.heads[h].fullyMaskedQueries, row.heads[h].fullyMaskedQueries);
            }
            EXPECT_TRUE(near(col.concat.transpose(), row.concat, 1e-5f, 1e-4f, "concatᵀ"));
            EXPECT_TRUE(near(col.output.transpose(), row.output, 1e-5f, 1e-4f, "outputᵀ"));
        }
    }
}

TEST_P(Sweep, SoftmaxAndMaskProperties)
{
    const Combo c = GetParam();
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(specOf(c, 23), in, cfg);
    if (c.layout == Layout::Column) {
        in = test::transposed(in);
        cfg.layout = Layout::Column;
    }
    const AttentionResult r = run(in, cfg, CpuPath::Fast);
    for (const HeadResult& h : r.heads) {
        // Work in query-major orientation whatever the layout.
        const Matrix W = c.layout == Layout::Row ? h.weights : Matrix(h.weights.transpose());
        const MaskMatrix Mk = c.layout == Layout::Row ? h.masked : MaskMatrix(h.masked.transpose());
        for (Eigen::Index i = 0; i < W.rows(); ++i) {
            const bool fully = std::find(h.fullyMaskedQueries.begin(), h.fullyMaskedQueries.end(), int(i)) !=
                               h.fullyMaskedQueries.end();
            // A sum of ≤ 7 float weights: rounding error ≤ 7 ulp(1) ≈ 1e-6.
            EXPECT_NEAR(W.row(i).sum(), fully ? 0.0f : 1.0f, 2e-6f) << "query " << i;
            for (Eigen::Index j = 0; j < W.cols(); ++j) {
                EXPECT_GE(W(i, j), 0.0f);
                // -inf fill: masked weights are exactly 0. Finite fill: exp(-1e6 - max) underflows to 0 too,
                // unless the whole row is masked (then softmax is uniform over the fill values).
                const bool rowAllMasked = Mk.row(i).cast<int>().sum() == Mk.cols();
                if (Mk(i, j) && !rowAllMasked) EXPECT_EQ(W(i, j), 0.0f) << "query " << i << " key " << j;
                if (Mk(i, j) && rowAllMasked && c.maskKind == 6)
                    EXPECT_NEAR(W(i, j), 1.0f / float(Mk.cols()), 1e-6f);
            }
        }
    }
}

std::vector<Combo> allCombos()
{
    std::vector<Combo> v;
    for (Layout l : {Layout::Row, Layout::Column})
        for (Mode m : {Mode::Self, Mode::Cross, Mode::Direct})
            for (int h : {1, 2})
                for (Score s : {Score::ScaledDot, Score::Dot, Score::Additive})
                    for (int mk = 0; mk <= 6; ++mk) v.push_back({l, m, h, s, mk, (mk + h) % 2 == 0});
    return v;
}

std::vector<Combo> rowCombos()
{
    std::vector<Combo> v;
    for (const Combo& c : allCombos())
        if (c.layout == Layout::Row) v.push_back(c);
    return v;
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, Sweep, ::testing::ValuesIn(allCombos()), comboName);
INSTANTIATE_TEST_SUITE_P(AllCombinations, RowVsColumn, ::testing::ValuesIn(rowCombos()), comboName);

// ---- Targeted behaviour ----

TEST(Softmax, FullyMaskedQueryGetsZerosAndAWarningNamingIt)
{
    AttentionInput in = seed000();
    in.mask.validLens = {2, 0, 3, 4};  // query 1 may see no key
    for (CpuPath path : {CpuPath::Reference, CpuPath::Fast}) {
        AttentionResult r = run(in, AttentionConfig{}, path);
        ASSERT_EQ(r.heads[0].fullyMaskedQueries, std::vector<int>{1});
        EXPECT_TRUE(r.heads[0].weights.row(1).isZero(0));
        EXPECT_TRUE(r.output.row(1).isZero(0));
        ASSERT_EQ(r.warnings.size(), 1u);
        EXPECT_NE(r.warnings[0].find("query 1"), std::string::npos) << r.warnings[0];
        EXPECT_TRUE(r.output.allFinite());
        // valid_lens masks keys ≥ len and renormalises the rest (d2l's masked_softmax).
        EXPECT_EQ(r.heads[0].weights(0, 2), 0.0f);
        EXPECT_NEAR(r.heads[0].weights(0, 0) + r.heads[0].weights(0, 1), 1.0f, 1e-6f);
    }
}

TEST(Softmax, HugeUnscaledScoresStayFinite)
{
    // Scores of order 1e6 with the plain dot score: exp would overflow without max subtraction.
    AttentionInput in = seed000();
    in.X *= 500.0f;
    AttentionConfig cfg;
    cfg.score = Score::Dot;
    for (CpuPath path : {CpuPath::Reference, CpuPath::Fast}) {
        AttentionResult r = run(in, cfg, path);
        EXPECT_GT(r.heads[0].scores.maxCoeff(), 1e5f);
        EXPECT_TRUE(r.heads[0].weights.allFinite());
        EXPECT_TRUE(r.output.allFinite());
        for (Eigen::Index i = 0; i < 4; ++i) EXPECT_NEAR(r.heads[0].weights.row(i).sum(), 1.0f, 1e-6f);
    }
}

TEST(Softmax, Float32OverflowIsRefusedWithAMessage)
{
    AttentionInput in = seed000();
    in.X *= 1e19f;  // X·W is finite (~1e19) but q·k ~ 1e38·3 overflows float32
    Expected<AttentionResult> r = compute(in, AttentionConfig{});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code, StatusCode::InvalidArgument);
    EXPECT_NE(r.status().message.find("overflowed float32"), std::string::npos) << r.status().message;
}

TEST(Masks, CausalWithMoreKeysThanQueriesMasksKeysAfterTheQueryIndex)
{
    ProblemSpec p;
    p.mode = Mode::Cross;
    p.T = 3;
    p.S = 5;
    p.causal = true;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    AttentionResult r = run(in, cfg, CpuPath::Fast);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 5; ++j) EXPECT_EQ(r.heads[0].masked(i, j), j > i ? 1 : 0) << i << "," << j;
}

TEST(Masks, FiniteFillIsWhatMaskedScoresTake)
{
    AttentionInput in = seed000();
    in.mask.causal = true;
    in.mask.fill = -1e6f;
    AttentionResult r = run(in, AttentionConfig{}, CpuPath::Fast);
    // Scores are reported before masking; the mask flags say which were replaced.
    EXPECT_EQ(r.heads[0].masked(0, 1), 1);
    EXPECT_NE(r.heads[0].scores(0, 1), -1e6f);
    EXPECT_EQ(r.heads[0].weights(0, 1), 0.0f);
    EXPECT_FLOAT_EQ(r.heads[0].weights(0, 0), 1.0f);
}

TEST(Heads, EachHeadUsesItsColumnBlock)
{
    // Block-identity projections (seed 003): with Wq = Wk = Wv = I and 2 heads, head h sees columns
    // [2h, 2h+2) of X, so its Q is exactly that block of X.
    AttentionInput in;
    std::mt19937 rng(3);
    in.X = test::randomMatrix(rng, 3, 4);
    in.Wq = in.Wk = in.Wv = Matrix::Identity(4, 4);
    AttentionConfig cfg;
    cfg.heads = 2;
    AttentionResult r = run(in, cfg, CpuPath::Fast);
    EXPECT_EQ(r.heads[1].Q, Matrix(in.X.middleCols(2, 2)));
    EXPECT_EQ(r.heads[0].K, Matrix(in.X.middleCols(0, 2)));
    EXPECT_FLOAT_EQ(r.scale, 1.0f / std::sqrt(2.0f));  // 1/√d_k of the head, not of d_model
    EXPECT_EQ(Matrix(r.concat.middleCols(2, 2)), r.heads[1].output);
}

TEST(Scale, ExplicitScaleOverridesTheDefault)
{
    AttentionConfig cfg;
    cfg.scale = 0.5f;
    AttentionResult a = run(seed000(), cfg, CpuPath::Fast);
    cfg.scale.reset();
    cfg.score = Score::Dot;
    AttentionResult dot = run(seed000(), cfg, CpuPath::Fast);
    EXPECT_TRUE(near(a.heads[0].scores, dot.heads[0].scores * 0.5f, 1e-6f, 0, "scores"));
}

TEST(Buffers, SameSizeRecomputeReusesTheResultBuffers)
{
    ProblemSpec p;
    p.heads = 2;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    AttentionResult r;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    const float* scores = r.heads[1].scores.data();
    const float* weights = r.heads[1].weights.data();
    const float* output = r.output.data();
    in.X(0, 0) += 1.0f;
    ASSERT_TRUE(compute(in, cfg, r).ok());
    EXPECT_EQ(r.heads[1].scores.data(), scores);
    EXPECT_EQ(r.heads[1].weights.data(), weights);
    EXPECT_EQ(r.output.data(), output);
}

TEST(Budget, ProblemsOverTheMemoryBudgetAreRefusedNotAttempted)
{
    AttentionInput in;
    in.Q = Matrix::Zero(1, 8);
    in.K = Matrix::Zero(1, 8);
    in.V = Matrix::Zero(1, 8);
    AttentionConfig cfg;
    cfg.mode = Mode::Direct;
    cfg.memoryBudgetBytes = 100;
    Expected<AttentionResult> r = compute(in, cfg);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code, StatusCode::ResourceExhausted);
    EXPECT_NE(r.status().message.find("memory budget"), std::string::npos) << r.status().message;
    EXPECT_GT(defaultMemoryBudget(), std::size_t(1) << 20);
}

TEST(Backends, CpuIsAlwaysAvailableAndCudaIsRefusedClearlyWhenAbsent)
{
    auto v = availableBackends();
    ASSERT_FALSE(v.empty());
    EXPECT_EQ(v.front(), Backend::Cpu);
    AttentionConfig cfg;
    cfg.backend = Backend::Auto;
    AttentionResult r = run(seed000(), cfg, CpuPath::Fast);
    if (std::find(v.begin(), v.end(), Backend::Cuda) == v.end()) {
        EXPECT_EQ(r.backend, Backend::Cpu);
        cfg.backend = Backend::Cuda;
        Expected<AttentionResult> c = compute(seed000(), cfg);
        ASSERT_FALSE(c.ok());
        EXPECT_EQ(c.status().code, StatusCode::Unavailable);
        EXPECT_NE(c.status().message.find("cuda"), std::string::npos);
    }
}

} // namespace
} // namespace attn
