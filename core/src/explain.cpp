// The lessons of the seeds as values (see explain.h). Sums are accumulated in double, like the reference
// path, so that "the vector version equals the matrix version" differs only by float rounding.
//
// [SECTION] index
//   [0] Helpers: orientation, max-abs differences, masked softmax of one line, a portable normal sampler
//   [1] Vector view and product shapes
//   [2] The two formulas and the wrong softmax axis
//   [3] Why 1/√d_k
//   [4] Heads
//   [5] Additive attention
//   [6] Masks
//   [7] Image patches
#include "attnscope/explain.h"

#include "attnscope/colormap.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>

namespace attn {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// =====================================================================================================
// [0] Helpers
// =====================================================================================================

std::string shapeStr(long r, long c) { return std::to_string(r) + "×" + std::to_string(c); }
// Built by appending: GCC 12 warns falsely (-Wrestrict, GCC bug 105651) on "[" + std::to_string(...) chains.
std::string bracketShape(long r, long c)
{
    std::string s = "[";
    s.append(std::to_string(r)).append(", ").append(std::to_string(c)).append("]");
    return s;
}

// max |a − b|; +inf when the shapes differ (a caller bug this makes visible rather than hiding).
float maxAbsDiff(const Matrix& a, const Matrix& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols()) return std::numeric_limits<float>::infinity();
    if (a.size() == 0) return 0.0f;
    return (a - b).cwiseAbs().maxCoeff();
}
float maxAbsDiff(const Vector& a, const Vector& b)
{
    if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
    if (a.size() == 0) return 0.0f;
    return (a - b).cwiseAbs().maxCoeff();
}

// A·B accumulated in double, rounded to float once (the reference path's convention).
Matrix productDouble(const Matrix& A, const Matrix& B)
{
    assert(A.cols() == B.rows());
    Eigen::MatrixXd r = A.cast<double>() * B.cast<double>();
    return r.cast<float>();
}

// Stable softmax of n values with masked entries taking `fill`; the same definition as the compute paths
// (max subtracted, accumulated in double). Returns false, and all zeros, when every entry is masked with
// fill = -inf (a query with no keys has no distribution).
bool softmaxMaskedLine(const std::vector<double>& v, const std::vector<std::uint8_t>& masked, float fill,
                       std::vector<double>& out)
{
    const std::size_t n = v.size();
    out.assign(n, 0.0);
    const bool negInf = std::isinf(fill) && fill < 0;
    double mx = -std::numeric_limits<double>::infinity();
    std::size_t live = 0;
    for (std::size_t j = 0; j < n; ++j) {
        const double x = masked[j] ? double(fill) : v[j];
        if (!(masked[j] && negInf)) ++live;
        mx = std::max(mx, x);
    }
    if (live == 0) return false;
    double sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += std::exp((masked[j] ? double(fill) : v[j]) - mx);
    for (std::size_t j = 0; j < n; ++j) out[j] = std::exp((masked[j] ? double(fill) : v[j]) - mx) / sum;
    return true;
}

// Normal deviates from mt19937_64 through Box–Muller. std::normal_distribution is implementation-defined
// (libstdc++ and libc++ give different numbers for one seed); this gives the same samples everywhere.
class NormalSampler {
public:
    explicit NormalSampler(std::uint64_t seed) : m_rng(seed) {}

    double next()
    {
        if (m_hasSpare) {
            m_hasSpare = false;
            return m_spare;
        }
        // u1 in (0, 1] so that log(u1) is finite; 53 random bits give every double in the grid 2⁻⁵³.
        const double u1 = 1.0 - double(m_rng() >> 11) * 0x1.0p-53;
        const double u2 = double(m_rng() >> 11) * 0x1.0p-53;
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double t = 2.0 * std::numbers::pi * u2;
        m_spare = r * std::sin(t);
        m_hasSpare = true;
        return r * std::cos(t);
    }

private:
    std::mt19937_64 m_rng;
    double m_spare = 0;
    bool m_hasSpare = false;
};

Status checkIndex(const char* name, int v, int n, const char* what)
{
    if (v >= 0 && v < n) return {};
    return invalidArgument(std::string(name) + ": expected 0 ≤ " + name + " < " + what + " = " + std::to_string(n) +
                           ", got " + std::to_string(v));
}

Status checkFiniteVector(const char* name, const Vector& v)
{
    for (Eigen::Index i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
            return invalidArgument(std::string(name) + "[" + std::to_string(i) + "]: value is not finite");
    return {};
}
Status checkFiniteMatrix(const char* name, const Matrix& m)
{
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c)
            if (!std::isfinite(m(r, c)))
                return invalidArgument(std::string(name) + "[" + std::to_string(r) + "][" + std::to_string(c) +
                                       "]: value is not finite");
    return {};
}

ProductShape makeProduct(std::string label, std::string lhs, long lr, long lc, std::string rhs, long rr, long rc,
                         std::string out, long orows, long ocols)
{
    ProductShape p;
    p.label = std::move(label);
    p.lhsName = std::move(lhs);
    p.rhsName = std::move(rhs);
    p.outName = std::move(out);
    p.lhsRows = int(lr);
    p.lhsCols = int(lc);
    p.rhsRows = int(rr);
    p.rhsCols = int(rc);
    p.outRows = int(orows);
    p.outCols = int(ocols);
    if (p.rhsName.empty())
        p.text = p.label + ": " + bracketShape(lr, lc) + " → " + bracketShape(orows, ocols);
    else
        p.text = p.label + ": " + bracketShape(lr, lc) + "·" + bracketShape(rr, rc) + " → " + bracketShape(orows, ocols);
    return p;
}

} // namespace

// =====================================================================================================
// [1] Vector view and product shapes
// =====================================================================================================

Expected<VectorView> vectorView(const AttentionResult& result, Score score, int head, int query)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    const int H = int(result.heads.size());
    if (Status s = checkIndex("head", head, H, "H"); !s.ok()) return s;
    const HeadResult& hr = result.heads[head];
    const Layout L = result.layout;

    VectorView v;
    v.head = head;
    v.query = query;
    v.scale = result.scale;
    const Matrix Q = tokenRows(hr.Q, L), K = tokenRows(hr.K, L), V = tokenRows(hr.V, L);
    const Matrix scores = tokenRows(hr.scores, L), weights = tokenRows(hr.weights, L), out = tokenRows(hr.output, L);
    const MaskMatrix masked = tokenRows(hr.masked, L);
    const int T = int(Q.rows()), S = int(K.rows());
    if (Status s = checkIndex("query", query, T, "T"); !s.ok()) return s;
    if (scores.rows() != T || scores.cols() != S || weights.rows() != T || weights.cols() != S ||
        V.rows() != S || out.rows() != T || out.cols() != V.cols())
        return invalidArgument("result: head " + std::to_string(head) + " is inconsistent (scores " +
                               shapeStr(scores.rows(), scores.cols()) + ", expected T×S = " + shapeStr(T, S) + ")");

    v.q = Q.row(query).transpose();
    v.keys = K;
    v.values = V;
    v.rawScores.resize(S);
    v.scaledScores = scores.row(query).transpose();
    v.weights = weights.row(query).transpose();
    v.masked.assign(S, 0);
    for (int j = 0; j < S; ++j) {
        if (masked.size() > 0) v.masked[j] = masked(query, j);
        if (score == Score::Additive || Q.cols() != K.cols()) {
            v.rawScores[j] = v.scaledScores[j];
        } else {
            double dot = 0;
            for (Eigen::Index c = 0; c < Q.cols(); ++c) dot += double(Q(query, c)) * K(j, c);
            v.rawScores[j] = float(dot);
        }
    }
    const int dv = int(V.cols());
    v.weightedValues.resize(S, dv);
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(dv);
    double wsum = 0;
    for (int j = 0; j < S; ++j) {
        const double w = v.weights[j];
        wsum += w;
        for (int c = 0; c < dv; ++c) {
            v.weightedValues(j, c) = float(w * V(j, c));
            sum[c] += w * V(j, c);
        }
    }
    v.vectorSum = sum.cast<float>();
    v.matrixRow = out.row(query).transpose();
    v.maxAbsDiff = maxAbsDiff(v.vectorSum, v.matrixRow);
    v.weightSum = float(wsum);
    return v;
}

std::vector<ProductShape> productShapes(const Dims& d, Layout layout, Mode mode, bool hasWo, Score score)
{
    const bool additive = score == Score::Additive;
    std::vector<ProductShape> steps;
    const bool multi = d.H > 1;
    const std::string q = multi ? "Q_h" : "Q", k = multi ? "K_h" : "K", vv = multi ? "V_h" : "V";
    const long hq = long(d.H) * d.dq, hk = long(d.H) * d.dk, hv = long(d.H) * d.dv;
    const std::string kvIn = mode == Mode::Cross ? "X_kv" : "X";
    if (layout == Layout::Row) {
        if (mode != Mode::Direct) {
            steps.push_back(makeProduct("X·W^Q", "X", d.T, d.M, "W^Q", d.M, hq, "Q", d.T, hq));
            steps.push_back(makeProduct(kvIn + "·W^K", kvIn, d.S, d.M, "W^K", d.M, hk, "K", d.S, hk));
            steps.push_back(makeProduct(kvIn + "·W^V", kvIn, d.S, d.M, "W^V", d.M, hv, "V", d.S, hv));
        }
        if (additive) {
            steps.push_back(makeProduct(q + "·A_q", q, d.T, d.dq, "A_q", d.dq, d.A, q + "A_q", d.T, d.A));
            steps.push_back(makeProduct(k + "·A_k", k, d.S, d.dk, "A_k", d.dk, d.A, k + "A_k", d.S, d.A));
            steps.push_back(makeProduct("w_vᵀ·tanh(q_i·A_q + k_j·A_k) for every pair", q + "A_q", d.T, d.A, "", 0, 0,
                                        "scores", d.T, d.S));
        } else {
            steps.push_back(makeProduct(q + "·" + k + "ᵀ", q, d.T, d.dq, k + "ᵀ", d.dk, d.S, q + k + "ᵀ", d.T, d.S));
        }
        steps.push_back(makeProduct(additive ? "softmax(scores) along each row (over keys)"
                                             : "softmax(" + q + k + "ᵀ/√d_k) along each row (over keys)",
                                    additive ? "scores" : q + k + "ᵀ", d.T, d.S, "", 0, 0, "A", d.T, d.S));
        steps.push_back(makeProduct("A·" + vv, "A", d.T, d.S, vv, d.S, d.dv, "O_h", d.T, d.dv));
        if (multi) steps.push_back(makeProduct("concat(O_1 … O_H)", "O_h", d.T, d.dv, "", 0, 0, "concat", d.T, hv));
        if (hasWo) steps.push_back(makeProduct("concat·W^O", "concat", d.T, hv, "W^O", hv, d.O, "output", d.T, d.O));
    } else {
        if (mode != Mode::Direct) {
            steps.push_back(makeProduct("W^Q·X", "W^Q", hq, d.M, "X", d.M, d.T, "Q", hq, d.T));
            steps.push_back(makeProduct("W^K·" + kvIn, "W^K", hk, d.M, kvIn, d.M, d.S, "K", hk, d.S));
            steps.push_back(makeProduct("W^V·" + kvIn, "W^V", hv, d.M, kvIn, d.M, d.S, "V", hv, d.S));
        }
        if (additive) {
            steps.push_back(makeProduct("A_q·" + q, "A_q", d.A, d.dq, q, d.dq, d.T, "A_q" + q, d.A, d.T));
            steps.push_back(makeProduct("A_k·" + k, "A_k", d.A, d.dk, k, d.dk, d.S, "A_k" + k, d.A, d.S));
            steps.push_back(makeProduct("w_vᵀ·tanh(A_q·q_i + A_k·k_j) for every pair", "A_k" + k, d.A, d.S, "", 0, 0,
                                        "scores", d.S, d.T));
        } else {
            steps.push_back(makeProduct(k + "ᵀ·" + q, k + "ᵀ", d.S, d.dk, q, d.dq, d.T, k + "ᵀ" + q, d.S, d.T));
        }
        steps.push_back(makeProduct(additive ? "softmax(scores) down each column (over keys)"
                                             : "softmax(" + k + "ᵀ" + q + "/√d_k) down each column (over keys)",
                                    additive ? "scores" : k + "ᵀ" + q, d.S, d.T, "", 0, 0, "A", d.S, d.T));
        steps.push_back(makeProduct(vv + "·A", vv, d.dv, d.S, "A", d.S, d.T, "O_h", d.dv, d.T));
        if (multi) steps.push_back(makeProduct("concat(O_1 … O_H)", "O_h", d.dv, d.T, "", 0, 0, "concat", hv, d.T));
        if (hasWo) steps.push_back(makeProduct("W^O·concat", "W^O", d.O, hv, "concat", hv, d.T, "output", d.O, d.T));
    }
    return steps;
}

// =====================================================================================================
// [2] The two formulas
// =====================================================================================================

Expected<LayoutComparison> compareLayouts(const AttentionInput& in, const AttentionConfig& cfg)
{
    AttentionConfig other = cfg;
    other.layout = cfg.layout == Layout::Row ? Layout::Column : Layout::Row;
    const AttentionInput flipped = transposedInput(in);
    auto a = compute(in, cfg);
    if (!a) return a.status();
    auto b = compute(flipped, other);
    if (!b) return b.status();

    LayoutComparison c;
    c.row = cfg.layout == Layout::Row ? std::move(*a) : std::move(*b);
    c.column = cfg.layout == Layout::Row ? std::move(*b) : std::move(*a);
    c.maxAbsDiffOutput = maxAbsDiff(c.row.output, Matrix(c.column.output.transpose()));
    for (std::size_t h = 0; h < c.row.heads.size() && h < c.column.heads.size(); ++h)
        c.maxAbsDiffWeights = std::max(c.maxAbsDiffWeights, maxAbsDiff(c.row.heads[h].weights,
                                                                        Matrix(c.column.heads[h].weights.transpose())));
    return c;
}

namespace {

// Part (b) of the wrong-formula demonstration: the other formula applied to the stored head matrices.
void literalOtherFormula(const HeadResult& hr, Layout L, float scale, WrongFormulaDemo& demo)
{
    const Matrix& Q = hr.Q;
    const Matrix& K = hr.K;
    const Matrix& V = hr.V;
    std::ostringstream text;
    auto fail = [&](const ProductShape& p, long inner1, long inner2) {
        demo.literalSteps.push_back(p);
        text << p.label << ": " << bracketShape(p.lhsRows, p.lhsCols) << "·" << bracketShape(p.rhsRows, p.rhsCols)
             << ": the inner sizes " << inner1 << " and " << inner2
             << " differ, so the formula does not even apply to data laid out this way. Here the mistake is loud; "
                "with a square problem (n tokens = d features) it is silent.";
        demo.literalText = text.str();
        demo.literalApplies = false;
    };
    if (L == Layout::Column) {
        // Tokens are columns, but softmax(Q·Kᵀ)·V is written for tokens as rows.
        if (Q.cols() != K.cols()) {
            ProductShape p = makeProduct("Q·Kᵀ", "Q", Q.rows(), Q.cols(), "Kᵀ", K.cols(), K.rows(), "QKᵀ", 0, 0);
            return fail(p, Q.cols(), K.cols());
        }
        const Matrix scores = productDouble(Q, Matrix(K.transpose())) * scale;  // [d_q, d_k]: features × features
        demo.literalSteps.push_back(makeProduct("Q·Kᵀ", "Q", Q.rows(), Q.cols(), "Kᵀ", K.cols(), K.rows(), "QKᵀ",
                                                scores.rows(), scores.cols()));
        Matrix A(scores.rows(), scores.cols());
        std::vector<double> line, w;
        std::vector<std::uint8_t> none(scores.cols(), 0);
        for (Eigen::Index r = 0; r < scores.rows(); ++r) {
            line.assign(scores.row(r).data(), scores.row(r).data() + scores.cols());
            softmaxMaskedLine(line, none, kNegInf, w);
            for (Eigen::Index c = 0; c < scores.cols(); ++c) A(r, c) = float(w[c]);
        }
        demo.literalSteps.push_back(makeProduct("softmax along each row", "QKᵀ", A.rows(), A.cols(), "", 0, 0, "A",
                                                A.rows(), A.cols()));
        if (A.cols() != V.rows()) {
            ProductShape p = makeProduct("A·V", "A", A.rows(), A.cols(), "V", V.rows(), V.cols(), "", 0, 0);
            return fail(p, A.cols(), V.rows());
        }
        demo.literalOutput = productDouble(A, V);
        demo.literalSteps.push_back(makeProduct("A·V", "A", A.rows(), A.cols(), "V", V.rows(), V.cols(), "output",
                                                demo.literalOutput.rows(), demo.literalOutput.cols()));
        demo.literalApplies = true;
        text << "softmax(Q·Kᵀ/√d_k)·V on tokens-as-columns data: Q·Kᵀ is " << bracketShape(Q.rows(), Q.cols()) << "·"
             << bracketShape(K.cols(), K.rows()) << " → " << bracketShape(scores.rows(), scores.cols())
             << ", a score for every pair of FEATURES (it sums over the " << Q.cols()
             << " tokens), so the softmax weighs features, not tokens. The result "
             << bracketShape(demo.literalOutput.rows(), demo.literalOutput.cols())
             << " has the right size to be mistaken for the answer, but its numbers are not attention.";
    } else {
        // Tokens are rows, but V·softmax(Kᵀ·Q)  is written for tokens as columns.
        if (K.rows() != Q.rows()) {
            ProductShape p = makeProduct("Kᵀ·Q", "Kᵀ", K.cols(), K.rows(), "Q", Q.rows(), Q.cols(), "KᵀQ", 0, 0);
            return fail(p, K.rows(), Q.rows());
        }
        const Matrix scores = productDouble(Matrix(K.transpose()), Q) * scale;  // [d_k, d_q]
        demo.literalSteps.push_back(makeProduct("Kᵀ·Q", "Kᵀ", K.cols(), K.rows(), "Q", Q.rows(), Q.cols(), "KᵀQ",
                                                scores.rows(), scores.cols()));
        Matrix A(scores.rows(), scores.cols());
        std::vector<double> line(scores.rows()), w;
        std::vector<std::uint8_t> none(scores.rows(), 0);
        for (Eigen::Index c = 0; c < scores.cols(); ++c) {
            for (Eigen::Index r = 0; r < scores.rows(); ++r) line[r] = scores(r, c);
            softmaxMaskedLine(line, none, kNegInf, w);
            for (Eigen::Index r = 0; r < scores.rows(); ++r) A(r, c) = float(w[r]);
        }
        demo.literalSteps.push_back(makeProduct("softmax down each column", "KᵀQ", A.rows(), A.cols(), "", 0, 0, "A",
                                                A.rows(), A.cols()));
        if (V.cols() != A.rows()) {
            ProductShape p = makeProduct("V·A", "V", V.rows(), V.cols(), "A", A.rows(), A.cols(), "", 0, 0);
            return fail(p, V.cols(), A.rows());
        }
        demo.literalOutput = productDouble(V, A);
        demo.literalSteps.push_back(makeProduct("V·A", "V", V.rows(), V.cols(), "A", A.rows(), A.cols(), "output",
                                                demo.literalOutput.rows(), demo.literalOutput.cols()));
        demo.literalApplies = true;
        text << "V·softmax(Kᵀ·Q/√d_k) on tokens-as-rows data: Kᵀ·Q is " << bracketShape(K.cols(), K.rows()) << "·"
             << bracketShape(Q.rows(), Q.cols()) << " → " << bracketShape(scores.rows(), scores.cols())
             << ", a score for every pair of FEATURES (it sums over the " << Q.rows()
             << " tokens), so the softmax weighs features, not tokens. The result "
             << bracketShape(demo.literalOutput.rows(), demo.literalOutput.cols())
             << " has the right size to be mistaken for the answer, but its numbers are not attention.";
    }
    demo.literalText = text.str();
}

} // namespace

Expected<WrongFormulaDemo> wrongFormulaDemo(const AttentionInput& in, const AttentionConfig& cfg, int head)
{
    auto res = compute(in, cfg);
    if (!res) return res.status();
    const AttentionResult& r = *res;
    if (Status s = checkIndex("head", head, int(r.heads.size()), "H"); !s.ok()) return s;
    const HeadResult& hr = r.heads[head];
    const Layout L = cfg.layout;

    WrongFormulaDemo demo;
    demo.dataLayout = L;
    demo.head = head;
    demo.scoresInLayout = hr.scores;
    demo.rightWeightsInLayout = hr.weights;
    demo.rightOutputInLayout = hr.output;

    const Matrix scores = tokenRows(hr.scores, L), right = tokenRows(hr.weights, L), V = tokenRows(hr.V, L);
    const MaskMatrix masked = tokenRows(hr.masked, L);
    const int T = int(scores.rows()), S = int(scores.cols());

    // (a) softmax over the queries of each key (the column of the token-rows scores) instead of the keys.
    Matrix wrong(T, S);
    std::vector<double> line(T), w;
    std::vector<std::uint8_t> m(T);
    for (int j = 0; j < S; ++j) {
        for (int i = 0; i < T; ++i) {
            line[i] = scores(i, j);
            m[i] = masked.size() > 0 ? masked(i, j) : 0;
        }
        softmaxMaskedLine(line, m, in.mask.fill, w);
        for (int i = 0; i < T; ++i) wrong(i, j) = float(w[i]);
    }
    const Matrix wrongOut = productDouble(wrong, V);
    demo.wrongWeightsInLayout = inLayout(wrong, L);
    demo.wrongOutputInLayout = inLayout(wrongOut, L);
    demo.rightSumsOverKeys = right.cast<double>().rowwise().sum().cast<float>();
    demo.wrongSumsOverKeys = wrong.cast<double>().rowwise().sum().cast<float>();
    demo.wrongSumsOverQueries = wrong.cast<double>().colwise().sum().transpose().cast<float>();
    demo.maxAbsWeightDiff = maxAbsDiff(right, wrong);
    demo.maxAbsOutputDiff = maxAbsDiff(tokenRows(hr.output, L), wrongOut);

    const float lo = T ? demo.wrongSumsOverKeys.minCoeff() : 0.0f, hi = T ? demo.wrongSumsOverKeys.maxCoeff() : 0.0f;
    std::ostringstream a;
    if (L == Layout::Row) {
        a << "Tokens are rows: the scores QKᵀ are " << bracketShape(T, S)
          << " with query i in row i. The right softmax runs along each row, over the " << S
          << " keys (torch.softmax(dim=1)). The wrong one ran down each column, over the " << T
          << " queries (dim=0).";
    } else {
        a << "Tokens are columns: the scores KᵀQ are " << bracketShape(S, T)
          << " with query i in column i. The right softmax runs down each column, over the " << S
          << " keys (torch.softmax(dim=0)). The wrong one ran along each row, over the " << T
          << " queries (dim=1).";
    }
    a << " Every shape still fits, so nothing fails: each key's weights now sum to 1 over the queries, "
         "while each query's weights sum to between "
      << formatValue(lo) << " and " << formatValue(hi)
      << " instead of 1, so an output is no longer a weighted average of the values (largest weight change "
      << formatValue(demo.maxAbsWeightDiff) << ", largest output change " << formatValue(demo.maxAbsOutputDiff) << ").";
    demo.wrongAxisText = a.str();

    if (cfg.score == Score::Additive) {
        demo.literalApplies = false;
        demo.literalText = "The additive score has no QKᵀ product, so there is no literal other formula to misapply.";
    } else {
        literalOtherFormula(hr, L, r.scale, demo);
    }
    return demo;
}

// =====================================================================================================
// [3] Why 1/√d_k
// =====================================================================================================

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
    softmaxMaskedLine(v, std::vector<std::uint8_t>(n, 0), kNegInf, w);
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
    if (Status s = checkFiniteVector("q", q); !s.ok()) return s;
    if (Status s = checkFiniteMatrix("K", K); !s.ok()) return s;

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

// =====================================================================================================
// [4] Heads
// =====================================================================================================

std::vector<HeadBlock> headBlocks(const Dims& d)
{
    std::vector<HeadBlock> blocks;
    for (int h = 0; h < d.H; ++h)
        blocks.push_back({h, h * d.dq, (h + 1) * d.dq, h * d.dk, (h + 1) * d.dk, h * d.dv, (h + 1) * d.dv});
    return blocks;
}

Expected<Matrix> headSelector(int width, int heads, int head)
{
    if (width < 1) return invalidArgument("width: expected at least 1, got " + std::to_string(width));
    if (heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(heads));
    if (width % heads != 0)
        return invalidArgument("heads: " + std::to_string(heads) + " does not divide width " + std::to_string(width));
    if (Status s = checkIndex("head", head, heads, "heads"); !s.ok()) return s;
    const int w = width / heads;
    Matrix m = Matrix::Zero(width, w);
    m.middleRows(head * w, w).setIdentity();
    return m;
}

Expected<HeadContributions> headContributions(const AttentionInput& in, const AttentionResult& result)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    const Layout L = result.layout;
    const int H = int(result.heads.size());
    const Matrix concat = tokenRows(result.concat, L), output = tokenRows(result.output, L);
    const int T = int(concat.rows()), HV = int(concat.cols());
    if (HV % H != 0)
        return invalidArgument("result: concat width " + std::to_string(HV) + " is not divisible by H = " + std::to_string(H));
    const int dv = HV / H;

    HeadContributions c;
    std::vector<Matrix> perRows;
    Eigen::MatrixXd sum;
    if (in.Wo.size() > 0) {
        const Matrix Wo = tokenRows(in.Wo, L);  // (H·d_v) × O
        if (Wo.rows() != HV || Wo.cols() != output.cols()) {
            const long er = L == Layout::Row ? HV : output.cols(), ec = L == Layout::Row ? output.cols() : HV;
            return invalidArgument("Wo: expected " + shapeStr(er, ec) + " (H·d_v × O in the result's layout), got " +
                                   shapeStr(in.Wo.rows(), in.Wo.cols()));
        }
        sum = Eigen::MatrixXd::Zero(T, Wo.cols());
        for (int h = 0; h < H; ++h) {
            Eigen::MatrixXd p = concat.middleCols(h * dv, dv).cast<double>() * Wo.middleRows(h * dv, dv).cast<double>();
            sum += p;
            perRows.push_back(p.cast<float>());
        }
        if (in.bo.size() > 0) {
            if (in.bo.size() != Wo.cols())
                return invalidArgument("bo: expected " + std::to_string(Wo.cols()) + " values (O), got " +
                                       std::to_string(in.bo.size()));
            c.bias = in.bo;
        }
    } else {
        sum = Eigen::MatrixXd::Zero(T, HV);
        for (int h = 0; h < H; ++h) {
            Matrix p = Matrix::Zero(T, HV);
            p.middleCols(h * dv, dv) = concat.middleCols(h * dv, dv);
            sum += p.cast<double>();
            perRows.push_back(std::move(p));
        }
    }
    Eigen::MatrixXd withBias = sum;
    if (c.bias.size() > 0) withBias.rowwise() += c.bias.cast<double>().transpose();
    c.maxAbsDiff = maxAbsDiff(Matrix(withBias.cast<float>()), output);
    for (auto& p : perRows) {
        c.norms.push_back(p.norm());
        c.perHead.push_back(inLayout(p, L));
    }
    c.sum = inLayout(Matrix(sum.cast<float>()), L);
    return c;
}

Expected<HeadsComparison> compareHeadCounts(const AttentionInput& in, const AttentionConfig& cfg, int heads)
{
    if (heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(heads));
    if (cfg.score == Score::Additive)
        return invalidArgument("score: the one-vs-h-heads decomposition QKᵀ = Σ_h Q_h·K_hᵀ needs a dot-product "
                               "score, got additive");
    AttentionConfig one = cfg, many = cfg;
    one.heads = 1;
    many.heads = heads;
    auto a = compute(in, one);
    if (!a) return a.status();
    auto b = compute(in, many);
    if (!b) return b.status();

    HeadsComparison c;
    c.heads = heads;
    const Layout L = cfg.layout;
    const Matrix Q = tokenRows(a->Q, L), K = tokenRows(a->K, L);
    c.oneHeadRawScores = productDouble(Q, Matrix(K.transpose()));
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(Q.rows(), K.rows());
    for (const HeadResult& hr : b->heads) {
        const Matrix Qh = tokenRows(hr.Q, L), Kh = tokenRows(hr.K, L);
        Eigen::MatrixXd p = Qh.cast<double>() * Kh.cast<double>().transpose();
        sum += p;
        c.perHeadRawScores.push_back(p.cast<float>());
    }
    c.maxAbsDecompositionDiff = maxAbsDiff(c.oneHeadRawScores, Matrix(sum.cast<float>()));
    c.maxAbsOutputDiff = maxAbsDiff(a->output, b->output);
    c.oneHead = std::move(*a);
    c.multiHead = std::move(*b);
    return c;
}

// =====================================================================================================
// [5] Additive attention
// =====================================================================================================

Expected<AdditiveBreakdown> additiveBreakdown(const AttentionInput& in, const AttentionResult& result, int head,
                                              int query, int key)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    if (Status s = checkIndex("head", head, int(result.heads.size()), "H"); !s.ok()) return s;
    const Layout L = result.layout;
    const HeadResult& hr = result.heads[head];
    const Matrix Q = tokenRows(hr.Q, L), K = tokenRows(hr.K, L), scores = tokenRows(hr.scores, L);
    if (Status s = checkIndex("query", query, int(Q.rows()), "T"); !s.ok()) return s;
    if (Status s = checkIndex("key", key, int(K.rows()), "S"); !s.ok()) return s;
    const Matrix Aq = tokenRows(in.additive.Aq, L), Ak = tokenRows(in.additive.Ak, L);  // d_q×A, d_k×A
    const Vector& wv = in.additive.wv;
    const long A = wv.size();
    if (A == 0) return invalidArgument("w_v: required for the additive score, but it is missing or empty");
    auto expect = [&](const char* name, const Matrix& stored, long rows, const char* rowMeaning) -> Status {
        const Matrix view = tokenRows(stored, L);
        if (view.rows() == rows && view.cols() == A) return {};
        const long er = L == Layout::Row ? rows : A, ec = L == Layout::Row ? A : rows;
        const std::string meaning = L == Layout::Row ? std::string(rowMeaning) + " × A" : "A × " + std::string(rowMeaning);
        return invalidArgument(std::string(name) + ": expected " + shapeStr(er, ec) + " (" + meaning + "), got " +
                               shapeStr(stored.rows(), stored.cols()));
    };
    if (Status s = expect("Aq", in.additive.Aq, Q.cols(), "d_q"); !s.ok()) return s;
    if (Status s = expect("Ak", in.additive.Ak, K.cols(), "d_k"); !s.ok()) return s;

    AdditiveBreakdown b;
    b.head = head;
    b.query = query;
    b.key = key;
    b.q = Q.row(query).transpose();
    b.k = K.row(key).transpose();
    const Eigen::VectorXd qp = Aq.cast<double>().transpose() * b.q.cast<double>();
    const Eigen::VectorXd kp = Ak.cast<double>().transpose() * b.k.cast<double>();
    const Eigen::VectorXd hid = qp + kp;
    const Eigen::VectorXd act = hid.array().tanh();
    const Eigen::VectorXd prod = act.cwiseProduct(wv.cast<double>());
    b.qProjected = qp.cast<float>();
    b.kProjected = kp.cast<float>();
    b.hidden = hid.cast<float>();
    b.activated = act.cast<float>();
    b.products = prod.cast<float>();
    b.score = float(prod.sum());
    b.resultScore = scores(query, key);
    return b;
}

// =====================================================================================================
// [6] Masks
// =====================================================================================================

Expected<MaskedSoftmax> maskedSoftmax(const Matrix& scores, const MaskSpec& mask)
{
    if (scores.size() == 0)
        return invalidArgument("scores: expected a non-empty T×S matrix, got " + shapeStr(scores.rows(), scores.cols()));
    if (Status s = checkFiniteMatrix("scores", scores); !s.ok()) return s;
    const int T = int(scores.rows()), S = int(scores.cols());
    if (!mask.keyPadding.empty() && int(mask.keyPadding.size()) != S)
        return invalidArgument("mask.key_padding: expected " + std::to_string(S) + " flags (S), got " +
                               std::to_string(mask.keyPadding.size()));
    if (!mask.validLens.empty()) {
        if (mask.validLens.size() != 1 && int(mask.validLens.size()) != T)
            return invalidArgument("mask.valid_lens: expected 1 or T = " + std::to_string(T) + " values, got " +
                                   std::to_string(mask.validLens.size()));
        for (std::size_t i = 0; i < mask.validLens.size(); ++i)
            if (mask.validLens[i] < 0)
                return invalidArgument("mask.valid_lens[" + std::to_string(i) + "]: expected ≥ 0, got " +
                                       std::to_string(mask.validLens[i]));
    }
    if (mask.custom.size() > 0 && (mask.custom.rows() != T || mask.custom.cols() != S))
        return invalidArgument("mask.custom: expected " + shapeStr(T, S) + " (T × S), got " +
                               shapeStr(mask.custom.rows(), mask.custom.cols()));
    if (std::isnan(mask.fill) || (std::isinf(mask.fill) && mask.fill > 0))
        return invalidArgument("mask.fill: expected a finite number or -inf, got " + formatValue(mask.fill));

    MaskedSoftmax r;
    buildMaskRowMajor(mask, mask.custom, T, S, r.masked);
    r.weights.resize(T, S);
    r.rowSums.resize(T);
    std::vector<double> line(S), w;
    std::vector<std::uint8_t> m(S);
    for (int i = 0; i < T; ++i) {
        for (int j = 0; j < S; ++j) {
            line[j] = scores(i, j);
            m[j] = r.masked(i, j);
        }
        if (!softmaxMaskedLine(line, m, mask.fill, w)) r.fullyMaskedRows.push_back(i);
        double sum = 0;
        for (int j = 0; j < S; ++j) {
            r.weights(i, j) = float(w[j]);
            sum += w[j];
            if (m[j] && r.weights(i, j) != 0.0f) ++r.maskedNonZero;
        }
        r.rowSums[i] = float(sum);
    }
    return r;
}

// =====================================================================================================
// [7] Image patches
// =====================================================================================================

Expected<PatchGrid> patchify(const RgbImage& image, int patch, PatchFit fit)
{
    if (patch < 1) return invalidArgument("patch: expected a patch size of at least 1 pixel, got " + std::to_string(patch));
    if (image.width < 1 || image.height < 1)
        return invalidArgument("image: expected a non-empty image, got " + std::to_string(image.width) + "×" +
                               std::to_string(image.height));
    const std::size_t bytes = std::size_t(image.width) * std::size_t(image.height) * 3;
    if (image.rgb.size() != bytes)
        return invalidArgument("image: expected " + std::to_string(bytes) + " bytes (" + std::to_string(image.width) +
                               "×" + std::to_string(image.height) + "×3), got " + std::to_string(image.rgb.size()));
    const int cols = image.width / patch, rows = image.height / patch;
    const bool divisible = image.width % patch == 0 && image.height % patch == 0;
    if (fit == PatchFit::Refuse && !divisible)
        return invalidArgument("image: " + std::to_string(image.width) + "×" + std::to_string(image.height) +
                               " is not divisible into " + std::to_string(patch) + "×" + std::to_string(patch) +
                               " patches; crop to " + std::to_string(cols * patch) + "×" + std::to_string(rows * patch) +
                               " or choose a patch size dividing both");
    if (cols < 1 || rows < 1)
        return invalidArgument("patch: " + std::to_string(patch) + " is larger than the image (" +
                               std::to_string(image.width) + "×" + std::to_string(image.height) + ")");
    if (long(cols) * rows > kMaxPatchTokens)
        return invalidArgument("patch: " + std::to_string(cols) + "×" + std::to_string(rows) + " = " +
                               std::to_string(long(cols) * rows) + " patches, at most " + std::to_string(kMaxPatchTokens) +
                               " allowed; choose a larger patch size");

    PatchGrid g;
    g.patch = patch;
    g.cols = cols;
    g.rows = rows;
    g.usedWidth = cols * patch;
    g.usedHeight = rows * patch;
    g.originalWidth = image.width;
    g.originalHeight = image.height;
    const int D = 3 * patch * patch;
    g.tokens.resize(long(rows) * cols, D);
    for (int py = 0; py < rows; ++py)
        for (int px = 0; px < cols; ++px) {
            const long t = long(py) * cols + px;
            for (int y = 0; y < patch; ++y)
                for (int x = 0; x < patch; ++x) {
                    const std::size_t src = (std::size_t(py * patch + y) * image.width + std::size_t(px * patch + x)) * 3;
                    for (int c = 0; c < 3; ++c) g.tokens(t, (y * patch + x) * 3 + c) = float(image.rgb[src + c]) / 255.0f;
                }
        }
    return g;
}

Expected<RgbImage> unpatchify(const PatchGrid& g)
{
    const long D = 3L * g.patch * g.patch;
    if (g.patch < 1 || g.tokens.rows() != long(g.rows) * g.cols || g.tokens.cols() != D)
        return invalidArgument("tokens: expected " + shapeStr(long(g.rows) * g.cols, D) + " (patches × 3p²), got " +
                               shapeStr(g.tokens.rows(), g.tokens.cols()));
    RgbImage img;
    img.width = g.cols * g.patch;
    img.height = g.rows * g.patch;
    img.rgb.resize(std::size_t(img.width) * img.height * 3);
    for (int py = 0; py < g.rows; ++py)
        for (int px = 0; px < g.cols; ++px)
            for (int y = 0; y < g.patch; ++y)
                for (int x = 0; x < g.patch; ++x)
                    for (int c = 0; c < 3; ++c) {
                        const float v = g.tokens(long(py) * g.cols + px, (y * g.patch + x) * 3 + c);
                        const float b = std::clamp(std::round(v * 255.0f), 0.0f, 255.0f);
                        img.rgb[(std::size_t(py * g.patch + y) * img.width + std::size_t(px * g.patch + x)) * 3 + c] =
                            std::uint8_t(b);
                    }
    return img;
}

Expected<Session> patchSession(const PatchGrid& grid, const PatchSessionOptions& o)
{
    if (grid.tokens.size() == 0) return invalidArgument("grid: has no patches; patchify an image first");
    const int M = int(grid.tokens.cols());
    if (o.heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(o.heads));
    const int width = o.projection == PatchProjection::Identity ? M : o.dk;
    if (o.projection == PatchProjection::Random && (o.dk < 1 || o.dk > 4096))
        return invalidArgument("dk: expected 1 to 4096 for the random projection, got " + std::to_string(o.dk));
    if (width % o.heads != 0)
        return invalidArgument("heads: " + std::to_string(o.heads) + " does not divide the projected width " +
                               std::to_string(width));

    Session s;
    s.name = "Image patches";
    std::ostringstream desc;
    desc << grid.rows << "×" << grid.cols << " patches of " << grid.patch << "×" << grid.patch << " pixels; each is a token of "
         << M << " values (3·p², RGB in [0, 1]" << (o.centre ? " minus 0.5" : "") << "). W^Q = W^K = W^V = "
         << (o.projection == PatchProjection::Identity ? "identity" : "a seeded random projection to d_k = " + std::to_string(o.dk))
         << ".";
    s.description = desc.str();
    s.input.X = grid.tokens;
    if (o.centre) s.input.X.array() -= 0.5f;
    if (o.projection == PatchProjection::Identity) {
        s.input.Wq = Matrix::Identity(M, M);
        s.input.Wk = s.input.Wq;
        s.input.Wv = s.input.Wq;
    } else {
        // N(0, 1/d_k) entries preserve dot products in expectation, E[(x·W)·(y·W)] = x·y (the
        // Johnson–Lindenstrauss scaling), so the random projection attends like the identity, only noisier.
        NormalSampler rng(o.seed);
        const double sd = 1.0 / std::sqrt(double(o.dk));
        for (Matrix* W : {&s.input.Wq, &s.input.Wk, &s.input.Wv}) {
            W->resize(M, o.dk);
            for (int r = 0; r < M; ++r)
                for (int c = 0; c < o.dk; ++c) (*W)(r, c) = float(sd * rng.next());
        }
    }
    s.config.layout = Layout::Row;
    s.config.mode = Mode::Self;
    s.config.score = Score::ScaledDot;
    s.config.heads = o.heads;
    for (int r = 0; r < grid.rows; ++r)
        for (int c = 0; c < grid.cols; ++c) {
            std::string label = "r";  // appended, not "r" + ...: see bracketShape
            s.queryTokens.push_back(label.append(std::to_string(r)).append("c").append(std::to_string(c)));
        }
    s.keyTokens = s.queryTokens;
    return s;
}

Expected<Matrix> patchWeightsGrid(const AttentionResult& result, const PatchGrid& grid, int head, int query)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    if (Status s = checkIndex("head", head, int(result.heads.size()), "H"); !s.ok()) return s;
    const Matrix w = tokenRows(result.heads[head].weights, result.layout);
    const long n = long(grid.rows) * grid.cols;
    if (w.rows() != n || w.cols() != n)
        return invalidArgument("result: expected " + shapeStr(n, n) + " weights (one token per patch of the " +
                               std::to_string(grid.rows) + "×" + std::to_string(grid.cols) + " grid), got " +
                               shapeStr(w.rows(), w.cols()));
    if (Status s = checkIndex("query", query, int(n), "patches"); !s.ok()) return s;
    Matrix g(grid.rows, grid.cols);
    for (int r = 0; r < grid.rows; ++r)
        for (int c = 0; c < grid.cols; ++c) g(r, c) = w(query, long(r) * grid.cols + c);
    return g;
}

} // namespace attn
