// Scaling lesson (attnscope/lessons/scaling.h).
#include "attnscope/lessons/scaling.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

Expected<Histogram> histogram(const std::vector<float>& values, float lo, float hi, int bins)
{
    if (bins < 1) return invalidArgument("bins: expected at least 1, got " + std::to_string(bins));
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
        return invalidArgument("histogram range: expected finite lo < hi, got [" + formatValue(lo) + ", " +
                               formatValue(hi) + "]");
    Histogram h;
    h.lo = lo;
    h.hi = hi;
    h.counts.assign(bins, 0);
    const double width = (double(hi) - lo) / bins;
    for (float v : values) {
        if (!std::isfinite(v)) {
            ++h.nonFinite;
        } else if (v < lo) {
            ++h.below;
        } else if (v >= hi) {
            ++h.above;
        } else {
            const int b = std::min(bins - 1, int((double(v) - lo) / width));  // min: v just below hi rounding up
            ++h.counts[b];
        }
    }
    return h;
}

std::vector<float> normalBinCounts(const Histogram& h, double mean, double var, int samples)
{
    std::vector<float> out(h.counts.size(), 0.0f);
    if (h.counts.empty()) return out;
    const double width = (double(h.hi) - h.lo) / double(h.counts.size());
    if (!(var > 0)) {  // a point mass: all samples fall into the bin holding the mean
        const double pos = (mean - h.lo) / width;
        if (pos >= 0 && pos < double(h.counts.size())) out[std::size_t(pos)] = float(samples);
        return out;
    }
    const double sd = std::sqrt(var);
    auto cdf = [&](double x) { return 0.5 * std::erfc(-(x - mean) / (sd * std::numbers::sqrt2)); };
    for (std::size_t b = 0; b < out.size(); ++b) {
        const double a = h.lo + width * double(b);
        out[b] = float(samples * (cdf(a + width) - cdf(a)));
    }
    return out;
}

double predictedDotMean(int dk, double mu, double /*sigma*/) { return dk * mu * mu; }

double predictedDotVariance(int dk, double mu, double sigma)
{
    // Var(q_i·k_i) = Var q·Var k + Var q·(E k)² + (E q)²·Var k for independent q_i, k_i (seed 003), summed
    // over the d_k independent terms.
    const double s2 = sigma * sigma;
    return dk * (s2 * s2 + 2.0 * mu * mu * s2);
}

Expected<std::vector<DotProductStats>> sampleDotProducts(const ScalingSampleConfig& cfg)
{
    // Limits keep one call interactive: 10⁷ samples × d_k 65536 would be far too slow; the panel uses ~10⁵.
    constexpr int kMaxDk = 65536;
    constexpr int kMaxSamples = 10'000'000;
    constexpr int kMaxBins = 10'000;
    if (cfg.dks.empty()) return invalidArgument("dks: expected at least one d_k value, got none");
    for (int dk : cfg.dks)
        if (dk < 1 || dk > kMaxDk)
            return invalidArgument("dks: expected every d_k in [1, " + std::to_string(kMaxDk) + "], got " +
                                   std::to_string(dk));
    if (cfg.samples < 2 || cfg.samples > kMaxSamples)
        return invalidArgument("samples: expected 2 to " + std::to_string(kMaxSamples) + ", got " +
                               std::to_string(cfg.samples));
    if (cfg.bins < 1 || cfg.bins > kMaxBins)
        return invalidArgument("bins: expected 1 to " + std::to_string(kMaxBins) + ", got " + std::to_string(cfg.bins));
    if (!std::isfinite(cfg.mu) || !std::isfinite(cfg.sigma) || cfg.sigma < 0)
        return invalidArgument("mu, sigma: expected finite values with sigma ≥ 0, got mu = " + formatValue(float(cfg.mu)) +
                               ", sigma = " + formatValue(float(cfg.sigma)));

    std::vector<DotProductStats> all;
    NormalSampler rng(cfg.seed);
    const int n = cfg.samples;
    for (int dk : cfg.dks) {
        DotProductStats st;
        st.dk = dk;
        st.predictedMean = predictedDotMean(dk, cfg.mu, cfg.sigma);
        st.predictedVar = predictedDotVariance(dk, cfg.mu, cfg.sigma);
        const double root = std::sqrt(double(dk));
        st.predictedScaledMean = st.predictedMean / root;
        st.predictedScaledVar = st.predictedVar / dk;

        std::vector<double> dots(n);
        for (int s = 0; s < n; ++s) {
            double acc = 0;
            for (int i = 0; i < dk; ++i) {
                const double q = cfg.mu + cfg.sigma * rng.next();
                const double k = cfg.mu + cfg.sigma * rng.next();
                acc += q * k;
            }
            dots[s] = acc;
        }
        double mean = 0;
        for (double x : dots) mean += x;
        mean /= n;
        double m2 = 0, m4 = 0;
        for (double x : dots) {
            const double d2 = (x - mean) * (x - mean);
            m2 += d2;
            m4 += d2 * d2;
        }
        st.mean = mean;
        st.var = m2 / (n - 1);
        st.fourthCentralMoment = m4 / n;
        st.scaledMean = mean / root;
        st.scaledVar = st.var / dk;
        st.dots.resize(n);
        st.scaledDots.resize(n);
        for (int s = 0; s < n; ++s) {
            st.dots[s] = float(dots[s]);
            st.scaledDots[s] = float(dots[s] / root);
        }
        // One range for both histograms: ±4.5 predicted standard deviations around each mean (covers all
        // but ~1e-5 of a normal; the heavier-tailed d_k = 1 product loses a little more into below/above).
        const double sd = std::sqrt(st.predictedVar), ssd = std::sqrt(st.predictedScaledVar);
        double lo = std::min(st.predictedMean - 4.5 * sd, st.predictedScaledMean - 4.5 * ssd);
        double hi = std::max(st.predictedMean + 4.5 * sd, st.predictedScaledMean + 4.5 * ssd);
        if (!(hi > lo)) {  // σ = 0: every sample is the mean; a unit-wide range centred on it
            lo = std::min(st.predictedMean, st.predictedScaledMean) - 0.5;
            hi = std::max(st.predictedMean, st.predictedScaledMean) + 0.5;
        }
        st.hist = *histogram(st.dots, float(lo), float(hi), cfg.bins);
        st.scaledHist = *histogram(st.scaledDots, float(lo), float(hi), cfg.bins);
        all.push_back(std::move(st));
    }
    return all;
}

Expected<QueryKeys> sampleQueryKeys(int dk, int S, double mu, double sigma, std::uint64_t seed)
{
    constexpr int kMax = 65536;  // an interactive demonstration; also keeps S·d_k far from overflow
    if (dk < 1 || dk > kMax) return invalidArgument("d_k: expected 1 to 65536, got " + std::to_string(dk));
    if (S < 1 || S > kMax) return invalidArgument("S: expected 1 to 65536 keys, got " + std::to_string(S));
    if (!std::isfinite(mu) || !std::isfinite(sigma) || sigma < 0)
        return invalidArgument("mu, sigma: expected finite values with sigma ≥ 0, got mu = " + formatValue(float(mu)) +
                               ", sigma = " + formatValue(float(sigma)));
    NormalSampler rng(seed);
    QueryKeys qk;
    qk.q.resize(dk);
    for (int i = 0; i < dk; ++i) qk.q[i] = float(mu + sigma * rng.next());
    qk.K.resize(S, dk);
    for (int j = 0; j < S; ++j)
        for (int i = 0; i < dk; ++i) qk.K(j, i) = float(mu + sigma * rng.next());
    return qk;
}

SoftmaxSummary summarizeSoftmax(const Vector& scores)
{
    SoftmaxSummary s;
    const int n = int(scores.size());
    s.weights.resize(n);
    if (n == 0) return s;
    std::vector<double> v(scores.data(), scores.data() + n), w;
    softmaxInto(v, std::vector<std::uint8_t>(n, 0), kNegInf, w);
    double h = 0;
    for (int j = 0; j < n; ++j) {
        s.weights[j] = float(w[j]);
        if (w[j] > 0) h -= w[j] * std::log(w[j]);
        if (s.argmax < 0 || w[j] > w[s.argmax]) s.argmax = j;
    }
    s.maxWeight = s.weights[s.argmax];
    s.entropy = float(h);
    s.maxEntropy = float(std::log(double(n)));
    return s;
}

NaiveSoftmax naiveSoftmax(const Vector& scores)
{
    NaiveSoftmax r;
    const int n = int(scores.size());
    r.exps.resize(n);
    r.weights.resize(n);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
        r.exps[j] = std::exp(scores[j]);  // float exp on purpose: this is the overflow being demonstrated
        if (std::isinf(r.exps[j])) ++r.infCount;
        sum += r.exps[j];
    }
    r.sum = sum;
    for (int j = 0; j < n; ++j) {
        r.weights[j] = r.exps[j] / sum;
        if (std::isnan(r.weights[j])) ++r.nanCount;
    }
    r.overflowed = r.infCount > 0 || std::isinf(sum);
    return r;
}

Expected<ScalingRowDemo> scalingRowDemo(const Vector& q, const Matrix& K)
{
    if (q.size() == 0) return invalidArgument("q: expected at least one value, got none");
    if (K.rows() == 0 || K.cols() != q.size())
        return invalidArgument("K: expected S×" + std::to_string(q.size()) + " (d_k = " + std::to_string(q.size()) +
                               "), got " + shapeStr(K.rows(), K.cols()));
    ATTNSCOPE_RETURN_IF_ERROR(checkFiniteVector("q", q));
    ATTNSCOPE_RETURN_IF_ERROR(checkFiniteMatrix("K", K));

    const int dk = int(q.size()), S = int(K.rows());
    ScalingRowDemo d;
    d.dk = dk;
    // The same rounding as the compute paths: 1/√d_k in double, rounded to float (see effectiveScale).
    d.scale = float(1.0 / std::sqrt(double(dk)));
    const float quarter = float(std::pow(double(dk), -0.25));
    d.rawScores.resize(S);
    d.scaledScores.resize(S);
    d.splitScores.resize(S);
    for (int j = 0; j < S; ++j) {
        double dot = 0, split = 0;
        for (int i = 0; i < dk; ++i) {
            dot += double(q[i]) * K(j, i);
            split += double(q[i] * quarter) * double(K(j, i) * quarter);
        }
        d.rawScores[j] = float(dot);
        d.scaledScores[j] = float(dot * d.scale);
        d.splitScores[j] = float(split);
    }
    d.maxAbsSplitDiff = maxAbsDiff(d.splitScores, d.scaledScores);
    d.unscaled = summarizeSoftmax(d.rawScores);
    d.scaled = summarizeSoftmax(d.scaledScores);
    d.naiveUnscaled = naiveSoftmax(d.rawScores);
    d.naiveScaled = naiveSoftmax(d.scaledScores);
    return d;
}

Expected<SplitFormComparison> compareSplitForm(const Matrix& Q, const Matrix& K)
{
    if (Q.size() == 0 || K.size() == 0)
        return invalidArgument("Q, K: expected non-empty matrices, got " + shapeStr(Q.rows(), Q.cols()) + " and " +
                               shapeStr(K.rows(), K.cols()));
    if (K.cols() != Q.cols())
        return invalidArgument("K: expected S×" + std::to_string(Q.cols()) + " (the width d of Q), got " +
                               shapeStr(K.rows(), K.cols()));
    const double d = double(Q.cols());
    const float scale = float(1.0 / std::sqrt(d));
    const float quarter = float(std::pow(d, -0.25));
    SplitFormComparison c;
    const Matrix Qs = Q * quarter, Ks = K * quarter;  // float, as a model dividing its tensors would
    c.split = productDouble(Qs, Matrix(Ks.transpose()));
    Eigen::MatrixXd raw = Q.cast<double>() * K.cast<double>().transpose();
    c.scaled = (raw * double(scale)).cast<float>();
    c.maxAbsDiff = maxAbsDiff(c.split, c.scaled);
    c.maxAbsValue = c.scaled.cwiseAbs().maxCoeff();
    for (Eigen::Index i = 0; i < c.split.rows(); ++i) {
        const SoftmaxSummary a = summarizeSoftmax(c.split.row(i).transpose());
        const SoftmaxSummary b = summarizeSoftmax(c.scaled.row(i).transpose());
        c.maxAbsWeightDiff = std::max(c.maxAbsWeightDiff, maxAbsDiff(a.weights, b.weights));
    }
    return c;
}

} // namespace attn
