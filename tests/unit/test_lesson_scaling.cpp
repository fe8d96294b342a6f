// Tests of the scaling lesson (attnscope/lessons/scaling.h): sampled q·k moments against the seed's derivation, naive vs stable softmax, the split form.
#include "lesson_test_util.h"

#include "attnscope/lessons/scaling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

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

TEST(LessonScaling, EmpiricalMomentsMatchTheSeedsDerivation)
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

TEST(LessonScaling, NonZeroMeanUsesSigmaSquared)
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

TEST(LessonScaling, SamplingIsDeterministicPerSeed)
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

TEST(LessonScaling, RejectsBadConfigs)
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

TEST(LessonScaling, NormalCurveCountsAlmostAllSamples)
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

TEST(LessonScaling, NaiveSoftmaxOverflowsWhereStableDoesNot)
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

TEST(LessonScaling, ScalingRowDemoOverflowOnlyWithoutScaling)
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

TEST(LessonScaling, ScalingFlattensTheSoftmax)
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

TEST(LessonScaling, SplitFormEqualsScaledFormToRounding)
{
    const Matrix Q = uniformMatrix(6, 64, 11, 3.0f), K = uniformMatrix(9, 64, 12, 3.0f);
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

TEST(LessonScaling, RejectsMismatchedRow)
{
    auto d = scalingRowDemo(Vector::Ones(4), Matrix::Ones(3, 5));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().message, "K: expected S×4 (d_k = 4), got 3×5");
}
