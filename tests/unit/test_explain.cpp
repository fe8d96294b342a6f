// Tests of attnscope/explain.h: every lesson's claim checked as a property on real computations.
//
// [SECTION] index
//   [1] Vector view and product shapes      [5] Additive breakdown
//   [2] Two formulas, wrong softmax axis    [6] Masked softmax
//   [3] Scaling statistics and softmaxes    [7] Image patches
//   [4] Heads                               [8] Lesson presets
#include "attnscope/attention.h"
#include "attnscope/explain.h"
#include "attnscope/preset_io.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;

namespace {

// Tolerance for comparing two float computations of the same sum in different orders: float32 has
// ε = 1.2e-7; sums here have at most ~64 terms of magnitude ≤ ~50, so rounding stays far below 1e-4.
constexpr float kSumTol = 1e-4f;

Session seedExample(Layout layout = Layout::Row)
{
    Session s;
    AttentionInput& in = s.input;
    in.X = Matrix{{1, 1, 1, 0}, {1, 2, 1, 0}, {0, 1, 0, 1}, {0, 1, 1, 0}};
    in.Wq = Matrix{{1, 0, 1}, {1, 1, 1}, {0, 0, 1}, {1, 0, 0}};
    in.Wk = Matrix{{1, 0, 0}, {1, 1, 1}, {1, 0, 1}, {0, 1, 0}};
    in.Wv = Matrix{{1, 2, 0}, {1, 3, 1}, {1, 0, 2}, {1, 1, 0}};
    if (layout == Layout::Column) s.input = transposedInput(in);
    s.config.layout = layout;
    return s;
}

Matrix randomMatrix(int r, int c, std::uint32_t seed, float scale = 1.0f)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    Matrix m(r, c);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < c; ++j) m(i, j) = u(rng);
    return m;
}

AttentionResult mustCompute(const AttentionInput& in, const AttentionConfig& cfg)
{
    auto r = compute(in, cfg);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message);
    return r.ok() ? *r : AttentionResult{};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

} // namespace

// =====================================================================================================
// [1] Vector view and product shapes
// =====================================================================================================

TEST(ExplainVectorView, SumOfWeightedValuesIsTheMatrixRowForEveryQuery)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = seedExample(layout);
        AttentionResult r = mustCompute(s.input, s.config);
        for (int i = 0; i < 4; ++i) {
            auto v = vectorView(r, Score::ScaledDot, 0, i);
            ASSERT_TRUE(v.ok()) << v.status().message;
            EXPECT_LT(v->maxAbsDiff, kSumTol);
            EXPECT_NEAR(v->weightSum, 1.0f, 1e-6f);  // weights are a distribution
            for (int j = 0; j < 4; ++j)               // a_ij = q_i·k_j, scaled by 1/√3
                EXPECT_NEAR(v->rawScores[j] * v->scale, v->scaledScores[j], 1e-5f);
            // Each weighted v_j really is â_ij·v_j.
            for (int j = 0; j < 4; ++j)
                for (int c = 0; c < 3; ++c)
                    EXPECT_FLOAT_EQ(v->weightedValues(j, c), v->weights[j] * v->values(j, c));
        }
    }
}

TEST(ExplainVectorView, ReproducesTheSeedsFirstOutputRow)
{
    // Seed 000 prints o_1 = [3.9492, 7.8588, 3.9577] (4 decimals, so within 5e-5 plus float rounding).
    Session s = seedExample();
    AttentionResult r = mustCompute(s.input, s.config);
    auto v = vectorView(r, Score::ScaledDot, 0, 0);
    ASSERT_TRUE(v.ok());
    EXPECT_NEAR(v->vectorSum[0], 3.9492f, 1e-4f);
    EXPECT_NEAR(v->vectorSum[1], 7.8588f, 1e-4f);
    EXPECT_NEAR(v->vectorSum[2], 3.9577f, 1e-4f);
    // q_1 = x_1·W^Q = [2, 1, 3] and k_1 = x_1·W^K = [3, 1, 2]: a_11 = 6 + 1 + 6 = 13.
    EXPECT_FLOAT_EQ(v->rawScores[0], 13.0f);
}

TEST(ExplainVectorView, MaskedKeysHaveZeroWeight)
{
    Session s = seedExample();
    s.input.mask.causal = true;
    // The reference path: the Eigen path's vectorised exp clamps its input at about -88.4, so a masked
    // (-inf) score gets a weight of 2.9e-39 instead of 0 there (reported to core; see the report).
    s.config.cpuPath = CpuPath::Reference;
    AttentionResult r = mustCompute(s.input, s.config);
    auto v = vectorView(r, Score::ScaledDot, 0, 1);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->masked, (std::vector<std::uint8_t>{0, 0, 1, 1}));
    EXPECT_EQ(v->weights[2], 0.0f);
    EXPECT_EQ(v->weights[3], 0.0f);
    EXPECT_LT(v->maxAbsDiff, kSumTol);
}

TEST(ExplainVectorView, RejectsOutOfRangeIndices)
{
    Session s = seedExample();
    AttentionResult r = mustCompute(s.input, s.config);
    auto badHead = vectorView(r, Score::ScaledDot, 1, 0);
    ASSERT_FALSE(badHead.ok());
    EXPECT_EQ(badHead.status().message, "head: expected 0 ≤ head < H = 1, got 1");
    auto badQuery = vectorView(r, Score::ScaledDot, 0, -1);
    ASSERT_FALSE(badQuery.ok());
    EXPECT_EQ(badQuery.status().message, "query: expected 0 ≤ query < T = 4, got -1");
    EXPECT_FALSE(vectorView(AttentionResult{}, Score::ScaledDot, 0, 0).ok());
}

TEST(ExplainProductShapes, EveryProductsInnerSizesAgree)
{
    Dims d;
    d.T = 5; d.S = 7; d.M = 6; d.H = 2; d.dq = 3; d.dk = 3; d.dv = 4; d.O = 9;
    for (Layout layout : {Layout::Row, Layout::Column})
        for (Mode mode : {Mode::Self, Mode::Cross, Mode::Direct}) {
            if (mode == Mode::Self) d.S = d.T; else d.S = 7;
            auto steps = productShapes(d, layout, mode, true);
            ASSERT_FALSE(steps.empty());
            for (const ProductShape& p : steps) {
                if (p.rhsName.empty()) continue;  // element-wise (softmax) or concat
                EXPECT_EQ(p.lhsCols, p.rhsRows) << p.text;
                EXPECT_EQ(p.outRows, p.lhsRows) << p.text;
                EXPECT_EQ(p.outCols, p.rhsCols) << p.text;
            }
            // With the additive score the same steps hold, the score step being the two projections to A.
            d.A = 5;
            for (const ProductShape& p : productShapes(d, layout, mode, true, Score::Additive)) {
                if (p.rhsName.empty()) continue;
                EXPECT_EQ(p.lhsCols, p.rhsRows) << p.text;
            }
            // The last step gives the output: T×O in Row, O×T in Column.
            EXPECT_EQ(steps.back().outRows, layout == Layout::Row ? d.T : d.O);
            EXPECT_EQ(steps.back().outCols, layout == Layout::Row ? d.O : d.T);
        }
}

TEST(ExplainProductShapes, SeedExampleShapes)
{
    Session s = seedExample();
    auto d = validate(s.input, s.config);
    ASSERT_TRUE(d.ok());
    auto row = productShapes(*d, Layout::Row, Mode::Self, false);
    ASSERT_EQ(row.size(), 6u);
    EXPECT_EQ(row[3].text, "Q·Kᵀ: [4, 3]·[3, 4] → [4, 4]");
    EXPECT_EQ(row[5].text, "A·V: [4, 4]·[4, 3] → [4, 3]");
    auto col = productShapes(*d, Layout::Column, Mode::Self, false);
    EXPECT_EQ(col[3].text, "Kᵀ·Q: [4, 3]·[3, 4] → [4, 4]");
    EXPECT_EQ(col[5].text, "V·A: [3, 4]·[4, 4] → [3, 4]");
}

// =====================================================================================================
// [2] The two formulas
// =====================================================================================================

TEST(ExplainFormulas, TransposedInputTwiceIsTheInput)
{
    Session s = seedExample();
    s.input.mask.custom = MaskMatrix::Zero(4, 4);
    s.input.mask.custom(1, 2) = 1;
    AttentionInput twice = transposedInput(transposedInput(s.input));
    EXPECT_EQ(twice.X, s.input.X);
    EXPECT_EQ(twice.Wq, s.input.Wq);
    EXPECT_EQ(twice.mask.custom, s.input.mask.custom);
    EXPECT_EQ(transposedInput(s.input).Wq, Matrix(s.input.Wq.transpose()));
}

TEST(ExplainFormulas, BothFormulasGiveTransposedResults)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = seedExample(layout);
        s.input.Wo = randomMatrix(3, 5, 7);
        if (layout == Layout::Column) s.input.Wo.transposeInPlace();
        auto c = compareLayouts(s.input, s.config);
        ASSERT_TRUE(c.ok()) << c.status().message;
        EXPECT_EQ(c->row.output.rows(), 4);
        EXPECT_EQ(c->column.output.rows(), 5);  // O×T: tokens are columns
        EXPECT_LT(c->maxAbsDiffOutput, kSumTol);
        EXPECT_LT(c->maxAbsDiffWeights, 1e-6f);
    }
}

TEST(ExplainFormulas, WrongSoftmaxAxisNormalisesOverQueries)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = seedExample(layout);
        auto demo = wrongFormulaDemo(s.input, s.config, 0);
        ASSERT_TRUE(demo.ok()) << demo.status().message;
        for (int j = 0; j < 4; ++j) EXPECT_NEAR(demo->wrongSumsOverQueries[j], 1.0f, 1e-6f);
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(demo->rightSumsOverKeys[i], 1.0f, 1e-6f);
        float worst = 0;
        for (int i = 0; i < 4; ++i) worst = std::max(worst, std::abs(demo->wrongSumsOverKeys[i] - 1.0f));
        EXPECT_GT(worst, 0.05f) << "the seed example's wrong weights should not be a distribution per query";
        EXPECT_GT(demo->maxAbsOutputDiff, 0.1f);

        // Independent check of the wrong weights: exp(s_ij) / Σ_i exp(s_ij) over the queries of key j.
        const Matrix sc = layout == Layout::Row ? demo->scoresInLayout : Matrix(demo->scoresInLayout.transpose());
        const Matrix wr = layout == Layout::Row ? demo->wrongWeightsInLayout : Matrix(demo->wrongWeightsInLayout.transpose());
        for (int j = 0; j < 4; ++j) {
            double z = 0;
            for (int i = 0; i < 4; ++i) z += std::exp(double(sc(i, j)));
            for (int i = 0; i < 4; ++i) EXPECT_NEAR(wr(i, j), std::exp(double(sc(i, j))) / z, 1e-6);
        }
        EXPECT_TRUE(contains(demo->wrongAxisText, layout == Layout::Row ? "dim=0" : "dim=1"));
    }
}

TEST(ExplainFormulas, LiteralOtherFormulaOnSquareDataAppliesButIsWrong)
{
    // Seed 000 with tokens as columns and the row formula: Q [3, 4]·Kᵀ [4, 3] → [3, 3] over features.
    Session s = seedExample(Layout::Column);
    auto demo = wrongFormulaDemo(s.input, s.config, 0);
    ASSERT_TRUE(demo.ok());
    ASSERT_TRUE(demo->literalApplies) << demo->literalText;
    EXPECT_EQ(demo->literalSteps.front().text, "Q·Kᵀ: [3, 4]·[4, 3] → [3, 3]");
    ASSERT_EQ(demo->literalOutput.rows(), 3);
    ASSERT_EQ(demo->literalOutput.cols(), 4);
    // Same shape as the right answer (d_v × T), different numbers.
    EXPECT_GT((demo->literalOutput - demo->rightOutputInLayout).cwiseAbs().maxCoeff(), 0.1f);
}

TEST(ExplainFormulas, LiteralOtherFormulaReportsShapeMismatch)
{
    Session s;
    s.config.mode = Mode::Direct;
    s.input.Q = randomMatrix(3, 2, 1);
    s.input.K = randomMatrix(5, 2, 2);
    s.input.V = randomMatrix(5, 4, 3);
    auto demo = wrongFormulaDemo(s.input, s.config, 0);
    ASSERT_TRUE(demo.ok());
    EXPECT_FALSE(demo->literalApplies);
    EXPECT_TRUE(contains(demo->literalText, "does not even apply")) << demo->literalText;
    // Part (a) still works for T ≠ S: the wrong weights are S sums over T = 3 queries.
    EXPECT_EQ(demo->wrongSumsOverQueries.size(), 5);
}

TEST(ExplainFormulas, WrongAxisKeepsMaskedEntriesZero)
{
    Session s = seedExample();
    s.input.mask.keyPadding = {0, 0, 0, 1};
    auto demo = wrongFormulaDemo(s.input, s.config, 0);
    ASSERT_TRUE(demo.ok());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(demo->wrongWeightsInLayout(i, 3), 0.0f);
    EXPECT_EQ(demo->wrongSumsOverQueries[3], 0.0f);  // a key masked for every query has no distribution
}

// =====================================================================================================
// [3] Why 1/√d_k
// =====================================================================================================

// The empirical variance of n samples has standard error √((m4 − s⁴)/n) (m4: fourth central moment),
// and the mean √(s²/n). Allowing 5 standard errors makes a false failure a < 1e-6 event per check.
void expectMatchesTheory(const DotProductStats& st, int n)
{
    const double seVar = std::sqrt(std::max(0.0, st.fourthCentralMoment - st.var * st.var) / n);
    const double seMean = std::sqrt(st.var / n);
    EXPECT_NEAR(st.mean, st.predictedMean, 5 * seMean) << "d_k = " << st.dk;
    EXPECT_NEAR(st.var, st.predictedVar, 5 * seVar) << "d_k = " << st.dk;
    EXPECT_NEAR(st.scaledVar, st.predictedScaledVar, 5 * seVar / st.dk) << "d_k = " << st.dk;
}

TEST(ExplainScaling, EmpiricalMomentsMatchTheSeedsDerivation)
{
    ScalingSampleConfig cfg;
    cfg.dks = {1, 16, 64};
    cfg.samples = 20000;
    auto stats = sampleDotProducts(cfg);
    ASSERT_TRUE(stats.ok()) << stats.status().message;
    ASSERT_EQ(stats->size(), 3u);
    for (const auto& st : *stats) {
        EXPECT_DOUBLE_EQ(st.predictedVar, st.dk);         // μ = 0, σ = 1: Var(q·k) = d_k
        EXPECT_DOUBLE_EQ(st.predictedScaledVar, 1.0);     // and 1 after scaling, whatever d_k
        expectMatchesTheory(st, cfg.samples);
        int total = st.hist.below + st.hist.above + st.hist.nonFinite, scaledTotal = 0;
        for (int c : st.hist.counts) total += c;
        for (int c : st.scaledHist.counts) scaledTotal += c;
        EXPECT_EQ(total, cfg.samples);
        EXPECT_LE(scaledTotal, cfg.samples);
        EXPECT_EQ(st.hist.lo, st.scaledHist.lo);  // one axis for both
    }
}

TEST(ExplainScaling, NonZeroMeanUsesSigmaSquared)
{
    // μ = 0.5, σ = 1.5: Var = d_k(σ⁴ + 2μ²σ²) = d_k·(5.0625 + 1.125). Reading the seed's σ as the standard
    // deviation instead (σ² + 2μ²σ) would predict d_k·3.75, far outside the tolerance below.
    ScalingSampleConfig cfg;
    cfg.mu = 0.5;
    cfg.sigma = 1.5;
    cfg.dks = {8, 32};
    cfg.samples = 20000;
    auto stats = sampleDotProducts(cfg);
    ASSERT_TRUE(stats.ok());
    for (const auto& st : *stats) {
        EXPECT_DOUBLE_EQ(st.predictedVar, st.dk * 6.1875);
        EXPECT_DOUBLE_EQ(st.predictedMean, st.dk * 0.25);
        expectMatchesTheory(st, cfg.samples);
    }
}

TEST(ExplainScaling, SamplingIsDeterministicPerSeed)
{
    ScalingSampleConfig cfg;
    cfg.dks = {4};
    cfg.samples = 100;
    auto a = sampleDotProducts(cfg), b = sampleDotProducts(cfg);
    cfg.seed = 2;
    auto c = sampleDotProducts(cfg);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ((*a)[0].dots, (*b)[0].dots);
    EXPECT_NE((*a)[0].dots, (*c)[0].dots);
}

TEST(ExplainScaling, RejectsBadConfigs)
{
    ScalingSampleConfig cfg;
    cfg.dks = {0};
    EXPECT_EQ(sampleDotProducts(cfg).status().message, "dks: expected every d_k in [1, 65536], got 0");
    cfg.dks = {4};
    cfg.sigma = -1;
    EXPECT_FALSE(sampleDotProducts(cfg).ok());
    cfg.sigma = 1;
    cfg.samples = 1;
    EXPECT_FALSE(sampleDotProducts(cfg).ok());
    EXPECT_FALSE(histogram({1.0f}, 1.0f, 1.0f, 4).ok());
}

TEST(ExplainScaling, NormalCurveCountsAlmostAllSamples)
{
    ScalingSampleConfig cfg;
    cfg.dks = {64};
    cfg.samples = 1000;
    auto stats = sampleDotProducts(cfg);
    ASSERT_TRUE(stats.ok());
    const auto& st = (*stats)[0];
    auto curve = normalBinCounts(st.hist, st.predictedMean, st.predictedVar, cfg.samples);
    double total = 0;
    for (float c : curve) total += c;
    // The range is ±4.5 sd of the wider (raw) distribution: all but 7e-6 of the normal mass.
    EXPECT_NEAR(total, cfg.samples, 0.01 * cfg.samples);
}

TEST(ExplainScaling, NaiveSoftmaxOverflowsWhereStableDoesNot)
{
    Vector big(3);
    big << 100.0f, 90.0f, 0.0f;  // exp(100) > FLT_MAX ≈ exp(88.72)
    NaiveSoftmax naive = naiveSoftmax(big);
    EXPECT_TRUE(naive.overflowed);
    EXPECT_EQ(naive.infCount, 2);
    EXPECT_GE(naive.nanCount, 1);  // inf/inf
    SoftmaxSummary stable = summarizeSoftmax(big);
    EXPECT_TRUE(stable.weights.allFinite());
    EXPECT_NEAR(stable.weights.sum(), 1.0f, 1e-6f);
    EXPECT_NEAR(stable.maxWeight, 1.0 / (1.0 + std::exp(-10.0)), 1e-6);

    Vector small(2);
    small << 10.0f, 0.0f;  // well inside float range: both agree to float rounding
    NaiveSoftmax ok = naiveSoftmax(small);
    EXPECT_FALSE(ok.overflowed);
    EXPECT_NEAR(ok.weights[0], summarizeSoftmax(small).weights[0], 1e-6f);
}

TEST(ExplainScaling, ScalingRowDemoOverflowOnlyWithoutScaling)
{
    // μ = 1, σ = 1, d_k = 512: raw scores ≈ 512 ± 40 overflow float exp; scaled ≈ 22.6 ± 1.7 do not.
    auto qk = sampleQueryKeys(512, 8, 1.0, 1.0, 3);
    ASSERT_TRUE(qk.ok());
    auto d = scalingRowDemo(qk->q, qk->K);
    ASSERT_TRUE(d.ok()) << d.status().message;
    EXPECT_TRUE(d->naiveUnscaled.overflowed);
    EXPECT_FALSE(d->naiveScaled.overflowed);
    EXPECT_TRUE(d->unscaled.weights.allFinite());
    EXPECT_NEAR(d->unscaled.weights.sum(), 1.0f, 1e-5f);
}

TEST(ExplainScaling, ScalingFlattensTheSoftmax)
{
    // Softmax entropy is non-increasing in the inverse temperature; scaling by 1/√d_k < 1 lowers it.
    auto qk = sampleQueryKeys(64, 16, 0.0, 1.0, 5);
    ASSERT_TRUE(qk.ok());
    auto d = scalingRowDemo(qk->q, qk->K);
    ASSERT_TRUE(d.ok());
    EXPECT_GE(d->scaled.entropy, d->unscaled.entropy);
    EXPECT_LE(d->scaled.maxWeight, d->unscaled.maxWeight);
    EXPECT_EQ(d->scaled.argmax, d->unscaled.argmax);  // the order of the scores does not change
    EXPECT_NEAR(d->scaled.maxEntropy, std::log(16.0f), 1e-6f);
}

TEST(ExplainScaling, SplitFormEqualsScaledFormToRounding)
{
    const Matrix Q = randomMatrix(6, 64, 11, 3.0f), K = randomMatrix(9, 64, 12, 3.0f);
    auto c = compareSplitForm(Q, K);
    ASSERT_TRUE(c.ok());
    // Both are accumulated in double; they differ by the float roundings of q·d^-¼, k·d^-¼ and 1/√d
    // (≤ ε/2 relative each) and of the final result: under 4ε relative to Σ|q_i||k_i|/√d.
    const Matrix bound = (Q.cwiseAbs() * K.cwiseAbs().transpose()) * float(4 * FLT_EPSILON / std::sqrt(64.0));
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 9; ++j) EXPECT_LE(std::abs(c->split(i, j) - c->scaled(i, j)), bound(i, j));
    EXPECT_GT(c->maxAbsValue, 1.0f);
    // Weights: softmax's Jacobian diag(w) − wwᵀ has ∞-norm max_i 2w_i(1 − w_i) ≤ 1/2, so weights move by at
    // most half the largest score difference, plus the float rounding of the weights themselves (≤ ε).
    EXPECT_LE(c->maxAbsWeightDiff, 0.5f * c->maxAbsDiff + FLT_EPSILON);

    auto row = scalingRowDemo(Vector(Q.row(0).transpose()), K);
    ASSERT_TRUE(row.ok());
    for (int j = 0; j < 9; ++j) EXPECT_LE(std::abs(row->splitScores[j] - row->scaledScores[j]), bound(0, j));
}

TEST(ExplainScaling, RejectsMismatchedRow)
{
    auto d = scalingRowDemo(Vector::Ones(4), Matrix::Ones(3, 5));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().message, "K: expected S×4 (d_k = 4), got 3×5");
}

// =====================================================================================================
// [4] Heads
// =====================================================================================================

TEST(ExplainHeads, SelectorPicksTheHeadsColumns)
{
    const Matrix Q = randomMatrix(3, 8, 21);
    for (int h = 0; h < 4; ++h) {
        auto W = headSelector(8, 4, h);
        ASSERT_TRUE(W.ok());
        EXPECT_EQ(Matrix(Q * *W), Matrix(Q.middleCols(2 * h, 2)));
    }
    EXPECT_EQ(headSelector(8, 3, 0).status().message, "heads: 3 does not divide width 8");
}

TEST(ExplainHeads, BlockIdentityExampleSplitsQIntoHeads)
{
    // Seed 003: with W^Q = W^K = W^V = I, Q = X and head h sees exactly columns [h·d, (h+1)·d) of X.
    Session s;
    s.input.X = randomMatrix(5, 8, 31);
    s.input.Wq = Matrix::Identity(8, 8);
    s.input.Wk = s.input.Wq;
    s.input.Wv = s.input.Wq;
    s.config.heads = 2;
    AttentionResult r = mustCompute(s.input, s.config);
    auto d = validate(s.input, s.config);
    ASSERT_TRUE(d.ok());
    auto blocks = headBlocks(*d);
    ASSERT_EQ(blocks.size(), 2u);
    for (const HeadBlock& b : blocks) {
        EXPECT_EQ(b.qEnd - b.qBegin, 4);
        EXPECT_EQ(r.heads[b.head].Q, Matrix(s.input.X.middleCols(b.qBegin, 4)));
    }
}

TEST(ExplainHeads, ContributionsSumToOutputMinusBias)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s;
        s.input.X = randomMatrix(5, 6, 41);
        s.input.Wq = randomMatrix(6, 6, 42);
        s.input.Wk = randomMatrix(6, 6, 43);
        s.input.Wv = randomMatrix(6, 6, 44);
        s.input.Wo = randomMatrix(6, 4, 45);
        s.input.bo = Vector::LinSpaced(4, -1.0f, 2.0f);
        s.config.heads = 3;
        if (layout == Layout::Column) s.input = transposedInput(s.input);
        s.config.layout = layout;
        AttentionResult r = mustCompute(s.input, s.config);
        auto c = headContributions(s.input, r);
        ASSERT_TRUE(c.ok()) << c.status().message;
        ASSERT_EQ(c->perHead.size(), 3u);
        EXPECT_LT(c->maxAbsDiff, kSumTol);
        // The sum really is the sum of the parts, and the output is that sum plus b_o.
        Matrix sum = Matrix::Zero(r.output.rows(), r.output.cols());
        for (const Matrix& p : c->perHead) sum += p;
        EXPECT_LT((sum - c->sum).cwiseAbs().maxCoeff(), kSumTol);
        EXPECT_EQ(c->perHead[0].rows(), r.output.rows());
        for (float n : c->norms) EXPECT_GT(n, 0.0f);
    }
}

TEST(ExplainHeads, ContributionsWithoutWoAreConcatBlocks)
{
    Session s = seedExample();
    s.input.Wq = randomMatrix(4, 4, 51);
    s.input.Wk = randomMatrix(4, 4, 52);
    s.input.Wv = randomMatrix(4, 4, 53);
    s.config.heads = 2;
    AttentionResult r = mustCompute(s.input, s.config);
    auto c = headContributions(s.input, r);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->sum, r.concat);
    EXPECT_EQ(c->perHead[1].leftCols(2), Matrix::Zero(4, 2));
}

TEST(ExplainHeads, OneHeadScoresAreTheSumOfPerHeadScores)
{
    Session s;
    s.input.X = randomMatrix(4, 6, 61);
    s.input.Wq = randomMatrix(6, 6, 62);
    s.input.Wk = randomMatrix(6, 6, 63);
    s.input.Wv = randomMatrix(6, 6, 64);
    auto c = compareHeadCounts(s.input, s.config, 3);
    ASSERT_TRUE(c.ok()) << c.status().message;
    EXPECT_EQ(c->perHeadRawScores.size(), 3u);
    EXPECT_LT(c->maxAbsDecompositionDiff, kSumTol);
    EXPECT_GT(c->maxAbsOutputDiff, 1e-3f) << "three heads should attend differently from one";
    EXPECT_EQ(c->oneHead.heads.size(), 1u);
    EXPECT_EQ(c->multiHead.heads.size(), 3u);
    EXPECT_FALSE(compareHeadCounts(s.input, s.config, 4).ok());  // 4 does not divide 6
}

// =====================================================================================================
// [5] Additive attention
// =====================================================================================================

Session additiveSession(Layout layout)
{
    // Seed 004's sizes: query_size 4, key_size 3, hidden 5, value 2; 2 queries, 3 key-value pairs.
    Session s;
    s.config.mode = Mode::Direct;
    s.config.score = Score::Additive;
    s.input.Q = randomMatrix(2, 4, 71);
    s.input.K = randomMatrix(3, 3, 72);
    s.input.V = randomMatrix(3, 2, 73);
    s.input.additive.Aq = randomMatrix(4, 5, 74);
    s.input.additive.Ak = randomMatrix(3, 5, 75);
    s.input.additive.wv = Vector::LinSpaced(5, -1.0f, 1.5f);
    if (layout == Layout::Column) s.input = transposedInput(s.input);
    s.config.layout = layout;
    return s;
}

TEST(ExplainAdditive, BreakdownAddsUpToTheComputedScore)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = additiveSession(layout);
        AttentionResult r = mustCompute(s.input, s.config);
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j) {
                auto b = additiveBreakdown(s.input, r, 0, i, j);
                ASSERT_TRUE(b.ok()) << b.status().message;
                EXPECT_EQ(b->q.size(), 4);
                EXPECT_EQ(b->k.size(), 3);
                EXPECT_NEAR(b->score, b->resultScore, 1e-5f);
                EXPECT_LT((b->hidden - b->qProjected - b->kProjected).cwiseAbs().maxCoeff(), 1e-6f);
                for (int a = 0; a < 5; ++a) {
                    EXPECT_NEAR(b->activated[a], std::tanh(b->hidden[a]), 1e-6f);
                    EXPECT_LE(std::abs(b->activated[a]), 1.0f);
                }
                EXPECT_NEAR(b->products.sum(), b->score, 1e-5f);
            }
    }
}

TEST(ExplainAdditive, RejectsBadIndicesAndShapes)
{
    Session s = additiveSession(Layout::Row);
    AttentionResult r = mustCompute(s.input, s.config);
    EXPECT_EQ(additiveBreakdown(s.input, r, 0, 0, 3).status().message, "key: expected 0 ≤ key < S = 3, got 3");
    AttentionInput wrong = s.input;
    wrong.additive.Aq = randomMatrix(3, 5, 1);
    EXPECT_EQ(additiveBreakdown(wrong, r, 0, 0, 0).status().message, "Aq: expected 4×5 (d_q × A), got 3×5");
}

// =====================================================================================================
// [6] Masked softmax
// =====================================================================================================

TEST(ExplainMasks, ReproducesTheSeedsMaskedSoftmax)
{
    // Seed 004 prints masked_softmax(rand(2, 2, 4), [[1, 3], [2, 4]]); flattened, the rows have valid
    // lengths 1, 3, 2, 4 and these weights (4 decimals). Scores ln(w) reproduce them; the masked tail
    // gets junk scores that must not matter.
    const float w[4][4] = {{1.0f, 0, 0, 0}, {0.4125f, 0.3273f, 0.2602f, 0}, {0.5254f, 0.4746f, 0, 0},
                           {0.3117f, 0.2130f, 0.1801f, 0.2952f}};
    const int lens[4] = {1, 3, 2, 4};
    Matrix scores(4, 4);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) scores(i, j) = j < lens[i] ? std::log(w[i][j]) : 5.0f + float(i + j);
    for (float fill : {-std::numeric_limits<float>::infinity(), -1e6f}) {  // attnscope's default; d2l's value
        MaskSpec mask;
        mask.validLens = {1, 3, 2, 4};
        mask.fill = fill;
        auto m = maskedSoftmax(scores, mask);
        ASSERT_TRUE(m.ok()) << m.status().message;
        EXPECT_EQ(m->maskedNonZero, 0);
        for (int i = 0; i < 4; ++i) {
            EXPECT_NEAR(m->rowSums[i], 1.0f, 1e-6f);
            for (int j = 0; j < 4; ++j) {
                if (j >= lens[i]) {
                    EXPECT_EQ(m->weights(i, j), 0.0f);  // exactly 0, not merely small
                    EXPECT_EQ(m->masked(i, j), 1);
                } else {
                    EXPECT_NEAR(m->weights(i, j), w[i][j], 1e-4f);
                }
            }
        }
    }
}

TEST(ExplainMasks, AgreesWithComputeForCausalAndPadding)
{
    Session s;
    s.config.mode = Mode::Direct;
    s.input.Q = randomMatrix(5, 3, 81, 2.0f);
    s.input.K = randomMatrix(5, 3, 82, 2.0f);
    s.input.V = randomMatrix(5, 2, 83);
    s.input.mask.causal = true;
    s.input.mask.keyPadding = {0, 0, 0, 0, 1};
    AttentionResult r = mustCompute(s.input, s.config);
    auto m = maskedSoftmax(r.heads[0].scores, s.input.mask);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->masked, r.heads[0].masked);
    EXPECT_LT((m->weights - r.heads[0].weights).cwiseAbs().maxCoeff(), 1e-6f);
    EXPECT_TRUE(m->fullyMaskedRows.empty());
}

TEST(ExplainMasks, FullyMaskedRowIsZeroAndReported)
{
    MaskSpec mask;
    mask.validLens = {0, 2};
    auto m = maskedSoftmax(Matrix::Ones(2, 3), mask);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->fullyMaskedRows, std::vector<int>{0});
    EXPECT_EQ(m->rowSums[0], 0.0f);
    EXPECT_NEAR(m->weights(1, 0), 0.5f, 1e-7f);
}

TEST(ExplainMasks, ValidatesTheMask)
{
    MaskSpec mask;
    mask.validLens = {1, 2, 3};
    EXPECT_EQ(maskedSoftmax(Matrix::Ones(2, 3), mask).status().message,
              "mask.valid_lens: expected 1 or T = 2 values, got 3");
    mask.validLens.clear();
    mask.keyPadding = {1};
    EXPECT_EQ(maskedSoftmax(Matrix::Ones(2, 3), mask).status().message, "mask.key_padding: expected 3 flags (S), got 1");
    EXPECT_FALSE(maskedSoftmax(Matrix(), MaskSpec{}).ok());
}

// =====================================================================================================
// [7] Image patches
// =====================================================================================================

RgbImage randomImage(int w, int h, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    RgbImage img;
    img.width = w;
    img.height = h;
    img.rgb.resize(std::size_t(w) * h * 3);
    for (auto& b : img.rgb) b = std::uint8_t(rng() & 0xff);
    return img;
}

TEST(ExplainPatches, RoundTripAndDocumentedOrdering)
{
    const RgbImage img = randomImage(12, 8, 91);
    auto g = patchify(img, 4, PatchFit::Refuse);
    ASSERT_TRUE(g.ok()) << g.status().message;
    EXPECT_EQ(g->cols, 3);
    EXPECT_EQ(g->rows, 2);
    EXPECT_EQ(g->tokens.rows(), 6);
    EXPECT_EQ(g->tokens.cols(), 48);  // 4×4×3, as in the seed
    // Token 4 is patch (row 1, col 1); value (y·p + x)·3 + c is channel c of pixel (4 + x, 4 + y).
    const int x = 2, y = 3, c = 1;
    const std::size_t src = (std::size_t(4 + y) * 12 + (4 + x)) * 3 + c;
    EXPECT_FLOAT_EQ(g->tokens(4, (y * 4 + x) * 3 + c), img.rgb[src] / 255.0f);
    auto back = unpatchify(*g);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->rgb, img.rgb);
}

TEST(ExplainPatches, RefusesOrCropsNonDivisibleSizes)
{
    const RgbImage img = randomImage(10, 9, 92);
    auto refused = patchify(img, 4, PatchFit::Refuse);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().message,
              "image: 10×9 is not divisible into 4×4 patches; crop to 8×8 or choose a patch size dividing both");
    auto cropped = patchify(img, 4, PatchFit::Crop);
    ASSERT_TRUE(cropped.ok());
    EXPECT_EQ(cropped->usedWidth, 8);
    EXPECT_EQ(cropped->usedHeight, 8);
    EXPECT_FALSE(patchify(img, 11, PatchFit::Crop).ok());
    RgbImage broken = img;
    broken.rgb.resize(100);
    EXPECT_EQ(patchify(broken, 2, PatchFit::Crop).status().message, "image: expected 270 bytes (10×9×3), got 100");
}

TEST(ExplainPatches, IdenticalPatchesGetIdenticalWeights)
{
    RgbImage img = randomImage(8, 8, 93);  // 2×2 patches of 4×4
    // Copy patch (0, 0) onto patch (1, 1).
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x)
            for (int c = 0; c < 3; ++c) img.rgb[((4 + y) * 8 + 4 + x) * 3 + c] = img.rgb[(y * 8 + x) * 3 + c];
    auto g = patchify(img, 4, PatchFit::Refuse);
    ASSERT_TRUE(g.ok());
    for (PatchProjection proj : {PatchProjection::Identity, PatchProjection::Random}) {
        PatchSessionOptions o;
        o.projection = proj;
        auto s = patchSession(*g, o);
        ASSERT_TRUE(s.ok()) << s.status().message;
        AttentionResult r = mustCompute(s->input, s->config);
        for (int q = 0; q < 4; ++q) {
            auto grid = patchWeightsGrid(r, *g, 0, q);
            ASSERT_TRUE(grid.ok());
            EXPECT_NEAR(grid->sum(), 1.0f, 1e-6f);
            EXPECT_EQ((*grid)(0, 0), (*grid)(1, 1));  // same key vector, same score, same weight
        }
    }
}

TEST(ExplainPatches, SessionOptionsAreValidated)
{
    auto g = patchify(randomImage(4, 4, 94), 2, PatchFit::Refuse);
    ASSERT_TRUE(g.ok());
    PatchSessionOptions o;
    o.heads = 5;
    EXPECT_EQ(patchSession(*g, o).status().message, "heads: 5 does not divide the projected width 12");
    o.heads = 1;
    o.projection = PatchProjection::Random;
    o.dk = 0;
    EXPECT_FALSE(patchSession(*g, o).ok());
    o.dk = 6;
    auto a = patchSession(*g, o), b = patchSession(*g, o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->input.Wq, b->input.Wq);  // seeded: the same projection every time
    EXPECT_EQ(a->queryTokens[3], "r1c1");
}

// =====================================================================================================
// [8] Lesson presets
// =====================================================================================================

TEST(ExplainPresets, EveryLessonPresetLoadsAndComputes)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "presets";
    int found = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("lesson_", 0) != 0 || e.path().extension() != ".json") continue;
        ++found;
        auto s = loadSession(e.path().string());
        ASSERT_TRUE(s.ok()) << name << ": " << s.status().message;
        auto r = compute(s->input, s->config);
        EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.status().message);
    }
    EXPECT_GE(found, 1) << "no lesson_*.json presets in " << dir;
}

namespace {
Session lessonPreset(const std::string& name)
{
    auto s = loadSession(std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/presets/" + name);
    EXPECT_TRUE(s.ok()) << name << ": " << (s.ok() ? "" : s.status().message);
    return s.ok() ? *s : Session{};
}
} // namespace

TEST(ExplainPresets, LessonPresetsReproduceTheSeeds)
{
    // Seed 000's printed result (4 decimals): within 1e-4.
    const Matrix seedOut{{3.9492f, 7.8588f, 3.9577f}, {3.9924f, 7.9784f, 3.9934f},
                         {3.8407f, 7.5669f, 3.8595f}, {3.7902f, 7.4482f, 3.8228f}};
    Session row = lessonPreset("lesson_vector_to_matrix.json");
    EXPECT_LT((mustCompute(row.input, row.config).output - seedOut).cwiseAbs().maxCoeff(), 1e-4f);
    Session col = lessonPreset("lesson_two_formulas_column.json");
    ASSERT_EQ(col.config.layout, Layout::Column);
    EXPECT_LT((mustCompute(col.input, col.config).output.transpose() - seedOut).cwiseAbs().maxCoeff(), 1e-4f);

    // Seed 004's masked softmax: with V = I the output is the weights; printed to 4 decimals.
    const Matrix seedW{{1, 0, 0, 0}, {0.4125f, 0.3273f, 0.2602f, 0}, {0.5254f, 0.4746f, 0, 0},
                       {0.3117f, 0.2130f, 0.1801f, 0.2952f}};
    Session ms = lessonPreset("lesson_masked_softmax.json");
    ms.config.cpuPath = CpuPath::Reference;  // exact zeros (see MaskedKeysHaveZeroWeight)
    AttentionResult r = mustCompute(ms.input, ms.config);
    EXPECT_LT((r.output - seedW).cwiseAbs().maxCoeff(), 1e-4f);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            if (seedW(i, j) == 0.0f) {
                EXPECT_EQ(r.heads[0].weights(i, j), 0.0f);
            }

    // The scaling preset: every row's raw scores overflow a naive softmax; the scaled ones do not.
    Session sc = lessonPreset("lesson_scaling_overflow.json");
    for (int i = 0; i < sc.input.Q.rows(); ++i) {
        auto d = scalingRowDemo(Vector(sc.input.Q.row(i).transpose()), sc.input.K);
        ASSERT_TRUE(d.ok());
        EXPECT_TRUE(d->naiveUnscaled.overflowed) << "row " << i;
        EXPECT_FALSE(d->naiveScaled.overflowed) << "row " << i;
    }

    // The additive preset has queries and keys of different sizes (seed 004: 4 and 3).
    Session add = lessonPreset("lesson_additive.json");
    EXPECT_EQ(add.input.Q.cols(), 4);
    EXPECT_EQ(add.input.K.cols(), 3);
    AttentionResult ar = mustCompute(add.input, add.config);
    auto b = additiveBreakdown(add.input, ar, 0, 1, 2);
    ASSERT_TRUE(b.ok());
    EXPECT_NEAR(b->score, b->resultScore, 1e-5f);
    auto dims = validate(add.input, add.config);
    ASSERT_TRUE(dims.ok());
    const auto steps = productShapes(*dims, Layout::Row, Mode::Direct, false, Score::Additive);
    EXPECT_EQ(steps[0].text, "Q·A_q: [2, 4]·[4, 5] → [2, 5]");
    EXPECT_EQ(steps[1].text, "K·A_k: [3, 3]·[3, 5] → [3, 5]");
}
