// Input validation: every field needed by the configuration is checked against the others, and every
// message names the field with expected vs actual, in the session's own layout.
#include "attnscope/attention.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace attn {
namespace {

// Largest size of any single dimension; beyond this the problem is absurd for an interactive tool and
// products like T·S·H could overflow 64-bit byte counts long before (2^20 × 2^20 × 4 B = 4 TiB).
constexpr long kMaxDim = 1 << 20;

std::string shapeStr(long r, long c) { return std::to_string(r) + "×" + std::to_string(c); }

// Expected shape given in Row orientation with its meaning, e.g. (4, 3, "d_model", "H·d_k").
// In Column layout the stored matrix is the transpose, and so is the message.
Status checkShape(const char* name, const Matrix& m, long rows, long cols, const char* rowMeaning,
                  const char* colMeaning, Layout layout)
{
    long er = rows, ec = cols;
    const char* rm = rowMeaning;
    const char* cm = colMeaning;
    if (layout == Layout::Column) {
        std::swap(er, ec);
        std::swap(rm, cm);
    }
    if (m.rows() == er && m.cols() == ec) return {};
    return invalidArgument(std::string(name) + ": expected " + shapeStr(er, ec) + " (" + rm + " × " + cm +
                           "), got " + shapeStr(m.rows(), m.cols()));
}

Status checkVector(const char* name, const Vector& v, long n, const char* meaning)
{
    if (v.size() == 0 || v.size() == n) return {};
    return invalidArgument(std::string(name) + ": expected " + std::to_string(n) + " values (" + meaning +
                           "), got " + std::to_string(v.size()));
}

template <class M>
Status checkFinite(const char* name, const M& m)
{
    // One vectorised pass (x·0 is NaN exactly for ±inf and NaN); the loop below only locates the culprit.
    if ((m.array() * 0.0f).sum() == 0.0f) return {};
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c) {
            const float v = m(r, c);
            if (!std::isfinite(v)) {
                std::string what = std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
                std::string idx = "[" + std::to_string(r) + "]";
                if constexpr (M::ColsAtCompileTime != 1) idx += "[" + std::to_string(c) + "]";
                return invalidArgument(std::string(name) + idx + ": value is " + what +
                                       "; every input must be a finite number");
            }
        }
    return {};
}

Status requireNonEmpty(const char* name, const Matrix& m, const char* why)
{
    if (m.size() > 0) return {};
    return invalidArgument(std::string(name) + ": required " + why + ", but it is missing or empty");
}

Status checkDim(const char* name, long v)
{
    if (v > kMaxDim)
        return invalidArgument(std::string(name) + ": " + std::to_string(v) + " is too large (at most " +
                               std::to_string(kMaxDim) + ")");
    return {};
}

// Row-orientation accessors: the logical (tokens-as-rows) shape of a stored matrix.
long lrows(const Matrix& m, Layout l) { return l == Layout::Row ? m.rows() : m.cols(); }
long lcols(const Matrix& m, Layout l) { return l == Layout::Row ? m.cols() : m.rows(); }

Status validateInto(const AttentionInput& in, const AttentionConfig& cfg, Dims& d)
{
    const Layout L = cfg.layout;
    if (cfg.heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(cfg.heads));
    ATTNSCOPE_RETURN_IF_ERROR(checkDim("heads", cfg.heads));
    d.H = cfg.heads;
    if (cfg.kvHeads < 0)
        return invalidArgument("kv_heads: expected at least 1 (or 0 for as many as heads), got " +
                               std::to_string(cfg.kvHeads));
    d.Hkv = cfg.kvHeads == 0 ? d.H : cfg.kvHeads;
    if (d.Hkv > d.H)
        return invalidArgument("kv_heads: expected at most heads = " + std::to_string(d.H) + ", got " +
                               std::to_string(d.Hkv));
    if (d.H % d.Hkv != 0)
        return invalidArgument("kv_heads: " + std::to_string(d.Hkv) + " does not divide heads = " +
                               std::to_string(d.H));
    // With grouped-query attention the key/value widths count H_kv heads; messages say which.
    const bool grouped = d.Hkv != d.H;
    const char* kWidth = grouped ? "H_kv·d_k" : "H·d_k";
    const char* vWidth = grouped ? "H_kv·d_v" : "H·d_v";

    long wq = 0, wk = 0, wv = 0;  // projected widths H·d_q, H_kv·d_k, H_kv·d_v
    if (cfg.mode == Mode::Direct) {
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("Q", in.Q, "in direct mode"));
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("K", in.K, "in direct mode"));
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("V", in.V, "in direct mode"));
        d.T = static_cast<int>(lrows(in.Q, L));
        d.S = static_cast<int>(lrows(in.K, L));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("Q", std::max(in.Q.rows(), in.Q.cols())));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("K", std::max(in.K.rows(), in.K.cols())));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("V", std::max(in.V.rows(), in.V.cols())));
        wq = lcols(in.Q, L);
        wk = lcols(in.K, L);
        wv = lcols(in.V, L);
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("V", in.V, d.S, wv, "n_k", vWidth, L));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("Q", in.Q));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("K", in.K));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("V", in.V));
    } else {
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("X", in.X, cfg.mode == Mode::Self ? "in self mode" : "in cross mode"));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("X", std::max(in.X.rows(), in.X.cols())));
        d.T = static_cast<int>(lrows(in.X, L));
        d.M = static_cast<int>(lcols(in.X, L));
        d.S = d.T;
        if (cfg.mode == Mode::Cross) {
            ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("X_kv", in.Xkv, "in cross mode"));
            ATTNSCOPE_RETURN_IF_ERROR(checkDim("X_kv", std::max(in.Xkv.rows(), in.Xkv.cols())));
            d.S = static_cast<int>(lrows(in.Xkv, L));
            ATTNSCOPE_RETURN_IF_ERROR(checkShape("X_kv", in.Xkv, d.S, d.M, "n_kv", "d_model", L));
        }
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("Wq", in.Wq, "unless mode is direct"));
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("Wk", in.Wk, "unless mode is direct"));
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("Wv", in.Wv, "unless mode is direct"));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("Wq", std::max(in.Wq.rows(), in.Wq.cols())));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("Wk", std::max(in.Wk.rows(), in.Wk.cols())));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("Wv", std::max(in.Wv.rows(), in.Wv.cols())));
        wq = lcols(in.Wq, L);
        wk = lcols(in.Wk, L);
        wv = lcols(in.Wv, L);
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("Wq", in.Wq, d.M, wq, "d_model", "H·d_k", L));
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("Wk", in.Wk, d.M, wk, "d_model", kWidth, L));
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("Wv", in.Wv, d.M, wv, "d_model", vWidth, L));
        ATTNSCOPE_RETURN_IF_ERROR(checkVector("bq", in.bq, wq, "H·d_k"));
        ATTNSCOPE_RETURN_IF_ERROR(checkVector("bk", in.bk, wk, kWidth));
        ATTNSCOPE_RETURN_IF_ERROR(checkVector("bv", in.bv, wv, vWidth));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("X", in.X));
        if (cfg.mode == Mode::Cross) ATTNSCOPE_RETURN_IF_ERROR(checkFinite("X_kv", in.Xkv));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("Wq", in.Wq));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("Wk", in.Wk));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("Wv", in.Wv));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("bq", in.bq));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("bk", in.bk));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("bv", in.bv));
    }

    // Queries and keys must have the same width for dot products; the additive score maps both to A.
    if (cfg.score != Score::Additive && !grouped && wq != wk) {
        const char* kName = cfg.mode == Mode::Direct ? "K" : "Wk";
        return invalidArgument(std::string(kName) + ": expected width H·d_k = " + std::to_string(wq) +
                               " (the width of " + (cfg.mode == Mode::Direct ? "Q" : "Wq") +
                               ") for a dot-product score, got " + std::to_string(wk));
    }
    const char* qSrc = cfg.mode == Mode::Direct ? "Q" : "Wq";
    const char* kSrc = cfg.mode == Mode::Direct ? "K" : "Wk";
    const char* vSrc = cfg.mode == Mode::Direct ? "V" : "Wv";
    auto divides = [&](long width, const char* what, const char* src) -> Status {
        if (width % d.H == 0) return {};
        return invalidArgument("heads: " + std::to_string(d.H) + " does not divide " + what + " = " +
                               std::to_string(width) + " (the width of " + src + ")");
    };
    auto kvDivides = [&](long width, const char* what, const char* src) -> Status {
        if (width % d.Hkv == 0) return {};
        return invalidArgument("kv_heads: " + std::to_string(d.Hkv) + " does not divide " + what + " = " +
                               std::to_string(width) + " (the width of " + src + ")");
    };
    ATTNSCOPE_RETURN_IF_ERROR(divides(wq, "H·d_q", qSrc));
    if (grouped && cfg.score != Score::Additive && wk != d.Hkv * (wq / d.H)) {
        // Each KV head is as wide as a query head: K (or Wk) must be H_kv·d_q wide.
        const long want = d.Hkv * (wq / d.H);
        if (cfg.mode == Mode::Direct) return checkShape("K", in.K, d.S, want, "n_k", kWidth, L);
        return checkShape("Wk", in.Wk, d.M, want, "d_model", kWidth, L);
    }
    if (grouped) {
        ATTNSCOPE_RETURN_IF_ERROR(kvDivides(wk, kWidth, kSrc));
        ATTNSCOPE_RETURN_IF_ERROR(kvDivides(wv, vWidth, vSrc));
    } else {
        ATTNSCOPE_RETURN_IF_ERROR(divides(wk, "H·d_k", kSrc));
        ATTNSCOPE_RETURN_IF_ERROR(divides(wv, "H·d_v", vSrc));
    }
    d.dq = static_cast<int>(wq / d.H);
    d.dk = static_cast<int>(wk / d.Hkv);
    d.dv = static_cast<int>(wv / d.Hkv);

    // Output projection: it reads the concatenation of the H query heads' outputs, H·d_v wide.
    const long wConcat = long(d.H) * d.dv;
    ATTNSCOPE_RETURN_IF_ERROR(checkDim("H·d_v", wConcat));
    d.O = static_cast<int>(wConcat);
    if (in.Wo.size() > 0) {
        d.O = static_cast<int>(lcols(in.Wo, L));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("Wo", std::max(in.Wo.rows(), in.Wo.cols())));
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("Wo", in.Wo, wConcat, d.O, "H·d_v", "d_out", L));
        ATTNSCOPE_RETURN_IF_ERROR(checkVector("bo", in.bo, d.O, "d_out"));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("Wo", in.Wo));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("bo", in.bo));
    } else if (in.bo.size() > 0) {
        return invalidArgument("bo: given without Wo; bo is added after the output projection Wo");
    }

    if (!(std::isfinite(cfg.softcap) && cfg.softcap >= 0))
        return invalidArgument("softcap: expected 0 (none) or a positive number, got " + std::to_string(cfg.softcap));
    if (cfg.softcap > 0 && cfg.score == Score::Additive)
        return invalidArgument("softcap: only for the dot-product scores, not the additive score");
    // Additive (Bahdanau) parameters.
    if (cfg.score == Score::Additive) {
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("additive.Wq", in.additive.Aq, "for the additive score"));
        ATTNSCOPE_RETURN_IF_ERROR(requireNonEmpty("additive.Wk", in.additive.Ak, "for the additive score"));
        d.A = static_cast<int>(lcols(in.additive.Aq, L));
        ATTNSCOPE_RETURN_IF_ERROR(checkDim("additive.Wq", std::max(in.additive.Aq.rows(), in.additive.Aq.cols())));
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("additive.Wq", in.additive.Aq, d.dq, d.A, "d_q", "hidden", L));
        ATTNSCOPE_RETURN_IF_ERROR(checkShape("additive.Wk", in.additive.Ak, d.dk, d.A, "d_k", "hidden", L));
        if (in.additive.wv.size() != d.A)
            return invalidArgument("additive.wv: expected " + std::to_string(d.A) +
                                   " values (hidden, the width of additive.Wq), got " +
                                   std::to_string(in.additive.wv.size()));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("additive.Wq", in.additive.Aq));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("additive.Wk", in.additive.Ak));
        ATTNSCOPE_RETURN_IF_ERROR(checkFinite("additive.wv", in.additive.wv));
    }

    if (cfg.scale) {
        if (cfg.score != Score::ScaledDot && cfg.score != Score::Dot)
            return invalidArgument("scale: only applies to the scaled_dot and dot scores, not additive");
        if (!std::isfinite(*cfg.scale))
            return invalidArgument("scale: expected a finite number, got " + std::to_string(*cfg.scale));
    }

    // Masks.
    const MaskSpec& m = in.mask;
    if (!m.keyPadding.empty() && static_cast<long>(m.keyPadding.size()) != d.S)
        return invalidArgument("mask.key_padding: expected " + std::to_string(d.S) + " flags (one per key), got " +
                               std::to_string(m.keyPadding.size()));
    if (!m.validLens.empty()) {
        if (m.validLens.size() != 1 && static_cast<long>(m.validLens.size()) != d.T)
            return invalidArgument("mask.valid_lens: expected 1 or T = " + std::to_string(d.T) +
                                   " values (one per query), got " + std::to_string(m.validLens.size()));
        for (std::size_t i = 0; i < m.validLens.size(); ++i)
            if (m.validLens[i] < 0)
                return invalidArgument("mask.valid_lens[" + std::to_string(i) + "]: expected a length ≥ 0, got " +
                                       std::to_string(m.validLens[i]));
    }
    if (m.custom.size() > 0) {
        const long er = L == Layout::Row ? d.T : d.S, ec = L == Layout::Row ? d.S : d.T;
        if (m.custom.rows() != er || m.custom.cols() != ec)
            return invalidArgument("mask.custom: expected " + shapeStr(er, ec) + " (" +
                                   (L == Layout::Row ? "n_q × n_k" : "n_k × n_q") + "), got " +
                                   shapeStr(m.custom.rows(), m.custom.cols()));
    }
    if (std::isnan(m.fill) || m.fill == std::numeric_limits<float>::infinity())
        return invalidArgument("mask.fill: expected -inf or a finite number, got " +
                               std::string(std::isnan(m.fill) ? "NaN" : "inf"));
    return {};
}

} // namespace

Expected<Dims> validate(const AttentionInput& in, const AttentionConfig& cfg)
{
    Dims d;
    ATTNSCOPE_RETURN_IF_ERROR(validateInto(in, cfg, d));
    return d;
}

std::size_t estimateBytes(const Dims& d)
{
    using Z = std::size_t;
    const Z T = d.T, S = d.S, H = d.H;
    // Per head: scores, weights (float) and the mask (1 byte) of T×S, plus a T×S float temporary in softmax.
    const Z perHeadTS = T * S * (4 + 4 + 1);
    const Z shared = T * S * (4 + 1);
    // Full projections plus the per-head copies; every query head keeps a copy of its KV head's K and V.
    const Z Hkv = Z(d.kvHeads());
    const Z proj = 4 * (T * H * d.dq + S * Hkv * d.dk + S * Hkv * d.dv) + 4 * (T * H * d.dq + S * H * d.dk + S * H * d.dv);
    const Z outs = 4 * (2 * T * H * d.dv + T * Z(d.O) + 2 * T * H * d.dv);
    const Z additive = d.A > 0 ? 4 * (T + S) * Z(d.A) + 4 * S * Z(d.A) : 0;
    return H * perHeadTS + shared + proj + outs + additive;
}

} // namespace attn
