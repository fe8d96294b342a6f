// Why 1/√d_k (seeds 002/003): sampled q·k statistics against the predicted mean and variance, one
// softmax row with and without scaling, the naive softmax overflowing, and the split q/d^¼·k/d^¼ form.
#pragma once

#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstdint>
#include <vector>

namespace attn {

// Equal-width histogram over [lo, hi); values outside are counted in below/above, NaN in nonFinite.
struct Histogram {
    float lo = 0.0f;
    float hi = 1.0f;
    std::vector<int> counts;
    int below = 0, above = 0, nonFinite = 0;
    float binWidth() const { return counts.empty() ? 0.0f : (hi - lo) / float(counts.size()); }
};
// Errors (InvalidArgument): bins < 1, lo ≥ hi or not finite.
Expected<Histogram> histogram(const std::vector<float>& values, float lo, float hi, int bins);

// Expected count per bin of `samples` draws from N(mean, var): samples·∫bin pdf. The normal shape is the
// central-limit approximation of q·k (exact mean and variance, approximate shape for small d_k).
std::vector<float> normalBinCounts(const Histogram& h, double mean, double var, int samples);

struct ScalingSampleConfig {
    double mu = 0.0;          // mean of every q and k entry; default 0 (the seed's case)
    double sigma = 1.0;       // standard deviation of every entry; default 1
    std::vector<int> dks = {1, 4, 16, 64, 256};  // the d_k values to sample; default as shown
    int samples = 20000;      // q·k samples per d_k; default 20000 (variance within ~2% at d_k ≥ 16)
    int bins = 60;            // histogram bins; default 60
    std::uint64_t seed = 1;   // RNG seed; same seed, same samples on every platform
};

// Theory (seed 003, with σ² the variance of each entry; the seed writes σ for the variance):
//   E(q·k) = d_k·μ²,   Var(q·k) = d_k·(σ⁴ + 2μ²σ²)
//   E(q·k/√d_k) = √d_k·μ²,  Var(q·k/√d_k) = σ⁴ + 2μ²σ²  (independent of d_k: the point of scaling)
struct DotProductStats {
    int dk = 0;
    double predictedMean = 0, predictedVar = 0;              // of q·k
    double predictedScaledMean = 0, predictedScaledVar = 0;  // of q·k/√d_k
    double mean = 0, var = 0;                                // empirical, of q·k (unbiased variance)
    double scaledMean = 0, scaledVar = 0;                    // empirical, of q·k/√d_k
    double fourthCentralMoment = 0;                          // empirical, of q·k (for standard errors)
    std::vector<float> dots;        // the samples of q·k
    std::vector<float> scaledDots;  // the same samples divided by √d_k
    Histogram hist;                 // of dots; hist and scaledHist share one range so widths compare
    Histogram scaledHist;           // of scaledDots
};

// Predicted mean and variance of q·k for given d_k, μ, σ (formula above).
double predictedDotMean(int dk, double mu, double sigma);
double predictedDotVariance(int dk, double mu, double sigma);

// Samples q, k ~ N(μ, σ²)^d_k independently, `samples` times per d_k (own Box–Muller on mt19937_64, so
// the numbers do not depend on the standard library). Errors (InvalidArgument): empty dks, a d_k < 1 or
// > 65536, samples < 2 or > 10⁷, bins < 1 or > 10000, σ < 0, μ or σ not finite.
Expected<std::vector<DotProductStats>> sampleDotProducts(const ScalingSampleConfig& cfg);

// Draws one query q (d_k) and S keys (S×d_k) from N(μ, σ²), for the softmax demonstrations.
// Errors (InvalidArgument): d_k or S < 1 or > 65536, σ < 0, non-finite μ or σ.
struct QueryKeys {
    Vector q;
    Matrix K;
};
Expected<QueryKeys> sampleQueryKeys(int dk, int S, double mu, double sigma, std::uint64_t seed);

// Softmax of one row and what it says: how peaked it is.
struct SoftmaxSummary {
    Vector weights;          // stable softmax (max subtracted, accumulated in double)
    float maxWeight = 0.0f;
    int argmax = -1;
    float entropy = 0.0f;    // −Σ w·ln w in nats; ln S for uniform, 0 for one-hot
    float maxEntropy = 0.0f; // ln S
};
// Stable softmax; an empty row gives empty weights. Non-finite inputs propagate (caller validates).
SoftmaxSummary summarizeSoftmax(const Vector& scores);

// Naive softmax exactly as seed 002 warns against: exp(x)/Σexp(x) in float with no max subtraction.
// Overflows to inf (and inf/inf = NaN) once a score exceeds ln(FLT_MAX) ≈ 88.72.
struct NaiveSoftmax {
    Vector exps;             // exp(x) in float: inf where x > 88.72
    float sum = 0.0f;        // Σ exps in float (inf once any term is)
    Vector weights;          // exps / sum: NaN where inf/inf, 0 where finite/inf
    int infCount = 0;        // entries of exps that are inf
    int nanCount = 0;        // entries of weights that are NaN
    bool overflowed = false; // infCount > 0 or the sum overflowed
};
NaiveSoftmax naiveSoftmax(const Vector& scores);

// One row shown with and without scaling, with the naive softmax beside the stable one.
struct ScalingRowDemo {
    int dk = 0;
    float scale = 1.0f;          // 1/√d_k
    Vector rawScores;            // S: q·k_j
    Vector scaledScores;         // S: q·k_j/√d_k
    Vector splitScores;          // S: (q/d_k^¼)·(k_j/d_k^¼), seed 002's split form
    float maxAbsSplitDiff = 0;   // max |splitScores − scaledScores|: float rounding only
    SoftmaxSummary unscaled;     // softmax(raw)
    SoftmaxSummary scaled;       // softmax(scaled)
    NaiveSoftmax naiveUnscaled;  // naive softmax of raw
    NaiveSoftmax naiveScaled;    // naive softmax of scaled
};
// q: d_k; K: S×d_k (rows are keys). Errors (InvalidArgument): empty q or K, K.cols() ≠ q.size()
// ("K: expected S×4 (d_k = 4), got 3×5"), non-finite entries.
Expected<ScalingRowDemo> scalingRowDemo(const Vector& q, const Matrix& K);

// Scores of all queries against all keys computed the split way: (Q/d^¼)·(K/d^¼)ᵀ with d = Q.cols(),
// and the usual way (Q·Kᵀ)/√d; rows are queries. Same value up to float rounding.
struct SplitFormComparison {
    Matrix split;     // T×S
    Matrix scaled;    // T×S
    float maxAbsDiff = 0.0f;
    float maxAbsValue = 0.0f;        // max |scaled|, to judge maxAbsDiff against
    float maxAbsWeightDiff = 0.0f;   // max |softmax(split) − softmax(scaled)| over rows: the toggle changes nothing
};
// Q: T×d, K: S×d. Errors (InvalidArgument): empty, or K.cols() ≠ Q.cols().
Expected<SplitFormComparison> compareSplitForm(const Matrix& Q, const Matrix& K);

} // namespace attn
