// The reference implementation: plain loops that read like the formulas, accumulating in double.
// It is the oracle every fast path (Eigen, CUDA) is tested against, so clarity beats speed here.
// Row layout:    Q = X·Wq + bq,  scores = Q_h·K_hᵀ·s,  P = softmax over each row,     O_h = P·V_h
// Column layout: Q = Wq·X + bq,  scores = K_hᵀ·Q_h·s,  P = softmax over each column,  O_h = V_h·P
// Grouped-query attention: K_h and V_h are the slices of query head h's KV head, h / (H / H_kv).
#include "attnscope/attention.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace attn::cpu {
namespace {

// A scaled score, soft-capped when the config asks (cap·tanh(score / cap), in double here).
float softcapped(const AttentionConfig& cfg, double score)
{
    return static_cast<float>(cfg.softcap > 0 ? cfg.softcap * std::tanh(score / cfg.softcap) : score);
}

// out = A·B (+ bias per output feature). Row layout: tokens are rows of A, features are columns of B.
void projectRow(const Matrix& A, const Matrix& B, const Vector& bias, Matrix& out)
{
    out.resize(A.rows(), B.cols());
    for (Eigen::Index i = 0; i < A.rows(); ++i)
        for (Eigen::Index j = 0; j < B.cols(); ++j) {
            double acc = bias.size() ? bias[j] : 0.0;
            for (Eigen::Index k = 0; k < A.cols(); ++k) acc += double(A(i, k)) * B(k, j);
            out(i, j) = static_cast<float>(acc);
        }
}

// Column layout: out = W·A (+ bias per output feature); features are rows of W, tokens are columns of A.
void projectCol(const Matrix& W, const Matrix& A, const Vector& bias, Matrix& out)
{
    out.resize(W.rows(), A.cols());
    for (Eigen::Index i = 0; i < W.rows(); ++i)
        for (Eigen::Index j = 0; j < A.cols(); ++j) {
            double acc = bias.size() ? bias[i] : 0.0;
            for (Eigen::Index k = 0; k < W.cols(); ++k) acc += double(W(i, k)) * A(k, j);
            out(i, j) = static_cast<float>(acc);
        }
}

// Buffers for one softmax line, reused over the lines of a head (no allocation per query).
struct LineBuffers {
    std::vector<double> line, weights;
    std::vector<std::uint8_t> flags;
};

// The softmax of one line of n scores read with a stride (a row in Row layout, a column in Column layout),
// through the shared attn::softmaxLine. Returns false when every entry is masked with fill = -inf.
template <class Get, class Masked, class Put>
bool softmaxStrided(LineBuffers& b, int n, float fill, Get score, Masked masked, Put put)
{
    b.line.resize(std::size_t(n));
    b.weights.resize(std::size_t(n));
    b.flags.resize(std::size_t(n));
    for (int j = 0; j < n; ++j) {
        b.line[std::size_t(j)] = score(j);
        b.flags[std::size_t(j)] = masked(j) ? 1 : 0;
    }
    const bool ok = attn::softmaxLine(b.line, b.flags, fill, b.weights);
    for (int j = 0; j < n; ++j) put(j, static_cast<float>(b.weights[std::size_t(j)]));
    return ok;
}

double additiveScore(const AdditiveParams& p, const Matrix& Qh, int i, const Matrix& Kh, int j, bool column)
{
    // w_vᵀ · tanh(q·A_q + k·A_k); in column layout q, k are columns and A_q, A_k are stored transposed.
    double s = 0;
    const int A = static_cast<int>(p.wv.size());
    for (int a = 0; a < A; ++a) {
        double h = 0;
        if (!column) {
            for (Eigen::Index c = 0; c < Qh.cols(); ++c) h += double(Qh(i, c)) * p.Aq(c, a);
            for (Eigen::Index c = 0; c < Kh.cols(); ++c) h += double(Kh(j, c)) * p.Ak(c, a);
        } else {
            for (Eigen::Index c = 0; c < Qh.rows(); ++c) h += double(p.Aq(a, c)) * Qh(c, i);
            for (Eigen::Index c = 0; c < Kh.rows(); ++c) h += double(p.Ak(a, c)) * Kh(c, j);
        }
        s += p.wv[a] * std::tanh(h);
    }
    return s;
}

void computeRow(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    // Projections.
    if (cfg.mode == Mode::Direct) {
        out.Q = in.Q;
        out.K = in.K;
        out.V = in.V;
    } else {
        const Matrix& Xkv = cfg.mode == Mode::Cross ? in.Xkv : in.X;
        projectRow(in.X, in.Wq, in.bq, out.Q);
        projectRow(Xkv, in.Wk, in.bk, out.K);
        projectRow(Xkv, in.Wv, in.bv, out.V);
    }
    MaskMatrix masked;
    buildMaskRowMajor(in.mask, in.mask.custom, d.T, d.S, masked);
    const float s = out.scale;

    out.concat.resize(d.T, d.H * d.dv);
    for (int h = 0; h < d.H; ++h) {
        HeadResult& r = out.heads[h];
        r.Q = out.Q.middleCols(h * d.dq, d.dq);
        r.K = out.K.middleCols(d.kvHead(h) * d.dk, d.dk);
        r.V = out.V.middleCols(d.kvHead(h) * d.dv, d.dv);
        r.scores.resize(d.T, d.S);
        for (int i = 0; i < d.T; ++i)
            for (int j = 0; j < d.S; ++j) {
                if (cfg.score == Score::Additive) {
                    r.scores(i, j) = static_cast<float>(additiveScore(in.additive, r.Q, i, r.K, j, false));
                } else {
                    double dot = 0;
                    for (int c = 0; c < d.dk; ++c) dot += double(r.Q(i, c)) * r.K(j, c);
                    r.scores(i, j) = softcapped(cfg, dot * s);
                }
            }
        r.masked = masked;
        r.weights.resize(d.T, d.S);
        r.fullyMaskedQueries.clear();
        LineBuffers lb;
        for (int i = 0; i < d.T; ++i) {
            const bool ok = softmaxStrided(
                lb, d.S, in.mask.fill, [&](int j) { return double(r.scores(i, j)); },
                [&](int j) { return masked(i, j) != 0; }, [&](int j, float v) { r.weights(i, j) = v; });
            if (!ok) r.fullyMaskedQueries.push_back(i);
        }
        r.output.resize(d.T, d.dv);
        for (int i = 0; i < d.T; ++i)
            for (int c = 0; c < d.dv; ++c) {
                double acc = 0;
                for (int j = 0; j < d.S; ++j) acc += double(r.weights(i, j)) * r.V(j, c);
                r.output(i, c) = static_cast<float>(acc);
            }
        out.concat.middleCols(h * d.dv, d.dv) = r.output;
    }
    if (in.Wo.size() > 0)
        projectRow(out.concat, in.Wo, in.bo, out.output);
    else
        out.output = out.concat;
}

void computeColumn(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    if (cfg.mode == Mode::Direct) {
        out.Q = in.Q;
        out.K = in.K;
        out.V = in.V;
    } else {
        const Matrix& Xkv = cfg.mode == Mode::Cross ? in.Xkv : in.X;
        projectCol(in.Wq, in.X, in.bq, out.Q);
        projectCol(in.Wk, Xkv, in.bk, out.K);
        projectCol(in.Wv, Xkv, in.bv, out.V);
    }
    // The custom mask is stored S×T in this layout; the shared builder takes query-major flags.
    MaskMatrix customRow = in.mask.custom.transpose();
    MaskMatrix maskedRow;
    buildMaskRowMajor(in.mask, customRow, d.T, d.S, maskedRow);
    const float s = out.scale;

    out.concat.resize(d.H * d.dv, d.T);
    for (int h = 0; h < d.H; ++h) {
        HeadResult& r = out.heads[h];
        r.Q = out.Q.middleRows(h * d.dq, d.dq);
        r.K = out.K.middleRows(d.kvHead(h) * d.dk, d.dk);
        r.V = out.V.middleRows(d.kvHead(h) * d.dv, d.dv);
        // scores = K_hᵀ·Q_h: entry (j, i) pairs key j with query i.
        r.scores.resize(d.S, d.T);
        for (int j = 0; j < d.S; ++j)
            for (int i = 0; i < d.T; ++i) {
                if (cfg.score == Score::Additive) {
                    r.scores(j, i) = static_cast<float>(additiveScore(in.additive, r.Q, i, r.K, j, true));
                } else {
                    double dot = 0;
                    for (int c = 0; c < d.dk; ++c) dot += double(r.K(c, j)) * r.Q(c, i);
                    r.scores(j, i) = softcapped(cfg, dot * s);
                }
            }
        r.masked = maskedRow.transpose();
        r.weights.resize(d.S, d.T);
        r.fullyMaskedQueries.clear();
        LineBuffers lb;
        for (int i = 0; i < d.T; ++i) {  // softmax down each column: over the keys of query i
            const bool ok = softmaxStrided(
                lb, d.S, in.mask.fill, [&](int j) { return double(r.scores(j, i)); },
                [&](int j) { return r.masked(j, i) != 0; }, [&](int j, float v) { r.weights(j, i) = v; });
            if (!ok) r.fullyMaskedQueries.push_back(i);
        }
        // O_h = V_h·P: d_v × T.
        r.output.resize(d.dv, d.T);
        for (int c = 0; c < d.dv; ++c)
            for (int i = 0; i < d.T; ++i) {
                double acc = 0;
                for (int j = 0; j < d.S; ++j) acc += double(r.V(c, j)) * r.weights(j, i);
                r.output(c, i) = static_cast<float>(acc);
            }
        out.concat.middleRows(h * d.dv, d.dv) = r.output;
    }
    if (in.Wo.size() > 0)
        projectCol(in.Wo, out.concat, in.bo, out.output);
    else
        out.output = out.concat;
}

} // namespace

void computeReference(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    out.layout = cfg.layout;
    out.scale = effectiveScale(cfg, d);
    out.heads.resize(d.H);
    if (cfg.layout == Layout::Row)
        computeRow(in, cfg, d, out);
    else
        computeColumn(in, cfg, d, out);
}

} // namespace attn::cpu
