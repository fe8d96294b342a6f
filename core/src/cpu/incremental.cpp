// Incremental recompute of the fast CPU path: compare the input with the snapshot the result keeps, and
// update only what the changed cells reach.
//   X row i (Self)          → Q, K, V row i; in every head: score row i and column i, the softmax of every
//                             row that sees key i, output rows by a rank-|R| correction (below); W^O product.
//   W^Q/W^K/W^V/bias column → that head's Q/K/V columns, then the whole head (its scores all change); a
//                             W^K/W^V/b^K/b^V column of a KV head shared by a group (grouped-query
//                             attention) reaches every query head of the group.
//   W^O, b^O                → the final product only.
// Anything else (sizes, config, masks, additive parameters, too many rows, every head) → a full compute.
//
// A row whose scores changed only at the changed keys R is renormalised without a pass of exp over it:
// from its old stats (m, z) and the new scores at R alone, m' and z' follow, every unchanged weight scales
// by c = z·e^(m−m')/z' (one streaming multiply over the head's weights), and the output row is corrected
//     o'_r = c·(o_r − Σ_{j∈R} w_rj·v_j) + Σ_{j∈R} w'_rj·v'_j
// in O(|R|·d_v) instead of O(S·d_v). Rows where the changed keys carried most of the weight
// (Σ_R w_rj > 1/2, where the subtraction would cancel), rows of changed queries and fully masked rows are
// recomputed from their scores instead.
#include "fast_path.h"

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace attn::cpu::fast {
namespace {

bool sameShape(const Matrix& a, const Matrix& b) { return a.rows() == b.rows() && a.cols() == b.cols(); }
bool sameBits(const Matrix& a, const Matrix& b)
{
    return sameShape(a, b) && (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}
bool sameBits(const Vector& a, const Vector& b)
{
    return a.size() == b.size() && (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}

bool sameMask(const MaskSpec& a, const MaskSpec& b)
{
    return a.causal == b.causal && a.keyPadding == b.keyPadding && a.validLens == b.validLens &&
           a.custom.rows() == b.custom.rows() && a.custom.cols() == b.custom.cols() &&
           (a.custom.size() == 0 || std::memcmp(a.custom.data(), b.custom.data(), a.custom.size()) == 0) &&
           std::memcmp(&a.fill, &b.fill, sizeof(float)) == 0;
}

bool sameConfig(const AttentionConfig& a, const AttentionConfig& b)
{
    return a.layout == b.layout && a.mode == b.mode && a.heads == b.heads && a.kvHeads == b.kvHeads &&
           a.score == b.score && a.scale == b.scale && a.skipCausalMaskedScores == b.skipCausalMaskedScores;
}

bool sameDims(const Dims& a, const Dims& b)
{
    return a.T == b.T && a.S == b.S && a.M == b.M && a.H == b.H && a.kvHeads() == b.kvHeads() && a.dq == b.dq &&
           a.dk == b.dk && a.dv == b.dv && a.O == b.O && a.A == b.A;
}

// Marks in `flags` the indices along one axis of the stored matrix where now and was differ: the storage rows
// (byStorageRow) or the storage columns. Same shapes assumed.
void markChanged(const Matrix& now, const Matrix& was, bool byStorageRow, std::vector<char>& flags)
{
    if (sameBits(now, was)) return;
    const Eigen::Index cols = now.cols();
    for (Eigen::Index r = 0; r < now.rows(); ++r) {
        const float* a = now.data() + r * cols;
        const float* b = was.data() + r * cols;
        if (std::memcmp(a, b, sizeof(float) * std::size_t(cols)) == 0) continue;
        if (byStorageRow) {
            flags[std::size_t(r)] = 1;
            continue;
        }
        for (Eigen::Index c = 0; c < cols; ++c)
            if (std::memcmp(a + c, b + c, sizeof(float)) != 0) flags[std::size_t(c)] = 1;
    }
}

// Tokens (rows in row semantics) of a stored matrix whose values changed.
void changedTokens(const Matrix& now, const Matrix& was, Layout l, std::vector<char>& flags)
{
    markChanged(now, was, l == Layout::Row, flags);
}
// Features (columns in row semantics, e.g. the outputs of W^Q) of a stored matrix whose values changed.
void changedFeatures(const Matrix& now, const Matrix& was, Layout l, std::vector<char>& flags)
{
    markChanged(now, was, l == Layout::Column, flags);
}
void changedEntries(const Vector& now, const Vector& was, std::vector<char>& flags)
{
    if (sameBits(now, was)) return;
    for (Eigen::Index i = 0; i < now.size(); ++i)
        if (std::memcmp(now.data() + i, was.data() + i, sizeof(float)) != 0) flags[std::size_t(i)] = 1;
}

std::vector<int> indicesOf(const std::vector<char>& flags)
{
    std::vector<int> v;
    for (std::size_t i = 0; i < flags.size(); ++i)
        if (flags[i]) v.push_back(int(i));
    return v;
}

struct Change {
    std::vector<int> rowsQ;   // queries whose Q row changed
    std::vector<int> rowsKV;  // keys whose K or V row changed
    std::vector<char> headDirty;  // per query head: its scores all change
    std::vector<char> kvDirty;    // per KV head: its K or V columns change (its whole group is headDirty)
    bool wo = false;
    bool any() const
    {
        return !rowsQ.empty() || !rowsKV.empty() || wo ||
               std::find(headDirty.begin(), headDirty.end(), 1) != headDirty.end();
    }
};

// Returns false when the change is not one the incremental update serves.
bool diff(const AttentionInput& in, const IncrementalState& st, const AttentionConfig& cfg, const Dims& d, Change& ch)
{
    const AttentionInput& was = st.in;
    const Layout l = cfg.layout;
    // Shapes, including which optional fields are present: validate() fixed the sizes, not the presence.
    if (!sameShape(in.X, was.X) || !sameShape(in.Xkv, was.Xkv) || !sameShape(in.Wq, was.Wq) ||
        !sameShape(in.Wk, was.Wk) || !sameShape(in.Wv, was.Wv) || !sameShape(in.Wo, was.Wo) ||
        !sameShape(in.Q, was.Q) || !sameShape(in.K, was.K) || !sameShape(in.V, was.V) ||
        in.bq.size() != was.bq.size() || in.bk.size() != was.bk.size() || in.bv.size() != was.bv.size() ||
        in.bo.size() != was.bo.size())
        return false;
    if (!sameMask(in.mask, was.mask)) return false;
    ch.headDirty.assign(std::size_t(d.H), 0);
    ch.kvDirty.assign(std::size_t(d.kvHeads()), 0);
    std::vector<char> q(std::size_t(d.T), 0), kv(std::size_t(d.S), 0);
    if (cfg.mode == Mode::Direct) {
        changedTokens(in.Q, was.Q, l, q);
        changedTokens(in.K, was.K, l, kv);
        changedTokens(in.V, was.V, l, kv);
    } else {
        changedTokens(in.X, was.X, l, q);
        if (cfg.mode == Mode::Self) changedTokens(in.X, was.X, l, kv);
        else changedTokens(in.Xkv, was.Xkv, l, kv);
        const std::size_t Hkv = std::size_t(d.kvHeads());
        std::vector<char> fq(std::size_t(d.H) * d.dq, 0), fk(Hkv * d.dk, 0), fv(Hkv * d.dv, 0);
        changedFeatures(in.Wq, was.Wq, l, fq);
        changedFeatures(in.Wk, was.Wk, l, fk);
        changedFeatures(in.Wv, was.Wv, l, fv);
        changedEntries(in.bq, was.bq, fq);
        changedEntries(in.bk, was.bk, fk);
        changedEntries(in.bv, was.bv, fv);
        for (int c : indicesOf(fq)) ch.headDirty[std::size_t(c / d.dq)] = 1;
        for (int c : indicesOf(fk)) ch.kvDirty[std::size_t(c / d.dk)] = 1;
        for (int c : indicesOf(fv)) ch.kvDirty[std::size_t(c / d.dv)] = 1;
        for (int h = 0; h < d.H; ++h)
            if (ch.kvDirty[std::size_t(d.kvHead(h))]) ch.headDirty[std::size_t(h)] = 1;
    }
    ch.rowsQ = indicesOf(q);
    ch.rowsKV = indicesOf(kv);
    ch.wo = !sameBits(in.Wo, was.Wo) || !sameBits(in.bo, was.bo);
    // Changed rows each cost O(T·d) per head and their softmax rows a pass each; past 1/16 of the tokens a
    // full compute (GEMMs at full speed) is as fast. Every head dirty is a full compute minus nothing.
    const std::size_t maxRows = std::max<std::size_t>(8, std::size_t(std::min(d.T, d.S)) / 16);
    if (ch.rowsQ.size() > maxRows || ch.rowsKV.size() > maxRows) return false;
    if (std::count(ch.headDirty.begin(), ch.headDirty.end(), 1) == d.H) return false;
    return true;
}

template <int Order>
void updateProjections(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, const Change& ch,
                       AttentionResult& out)
{
    View<Order> Q = rview<Order>(out.Q), K = rview<Order>(out.K), V = rview<Order>(out.V);
    if (cfg.mode == Mode::Direct) {
        for (int i : ch.rowsQ) Q.row(i) = cview<Order>(in.Q).row(i);
        for (int j : ch.rowsKV) {
            K.row(j) = cview<Order>(in.K).row(j);
            V.row(j) = cview<Order>(in.V).row(j);
        }
        return;
    }
    const CView<Order> X = cview<Order>(in.X);
    const CView<Order> Xkv = cview<Order>(cfg.mode == Mode::Cross ? in.Xkv : in.X);
    const CView<Order> Wq = cview<Order>(in.Wq), Wk = cview<Order>(in.Wk), Wv = cview<Order>(in.Wv);
    for (int i : ch.rowsQ) {
        Q.row(i).noalias() = X.row(i) * Wq;
        if (in.bq.size()) Q.row(i) += in.bq.transpose();
    }
    for (int j : ch.rowsKV) {
        K.row(j).noalias() = Xkv.row(j) * Wk;
        V.row(j).noalias() = Xkv.row(j) * Wv;
        if (in.bk.size()) K.row(j) += in.bk.transpose();
        if (in.bv.size()) V.row(j) += in.bv.transpose();
    }
    // A dirty query head's Q columns, and the K and V columns of its KV head (once per KV head).
    std::vector<char> kvDone(std::size_t(d.kvHeads()), 0);
    for (int h = 0; h < d.H; ++h) {
        if (!ch.headDirty[std::size_t(h)]) continue;
        auto q = Q.middleCols(h * d.dq, d.dq);
        q.noalias() = X * Wq.middleCols(h * d.dq, d.dq);
        if (in.bq.size()) q.rowwise() += in.bq.segment(h * d.dq, d.dq).transpose();
        const int g = d.kvHead(h);
        if (kvDone[std::size_t(g)]) continue;
        kvDone[std::size_t(g)] = 1;
        auto k = K.middleCols(g * d.dk, d.dk);
        auto v = V.middleCols(g * d.dv, d.dv);
        k.noalias() = Xkv * Wk.middleCols(g * d.dk, d.dk);
        v.noalias() = Xkv * Wv.middleCols(g * d.dv, d.dv);
        if (in.bk.size()) k.rowwise() += in.bk.segment(g * d.dk, d.dk).transpose();
        if (in.bv.size()) v.rowwise() += in.bv.segment(g * d.dv, d.dv).transpose();
    }
}

// One clean head (its W columns unchanged) after rows R of Q/K/V changed. Returns false on a score overflow.
template <int Order>
bool updateHead(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, const Change& ch,
                const Mat<Eigen::RowMajor>& oldV, const MaskDesc& md, int h, AttentionResult& out,
                IncrementalState& st, double& tScores, double& tSoftmax, double& tPv)
{
    HeadResult& r = out.heads[h];
    const int T = d.T, S = d.S;
    const int g = d.kvHead(h);  // the KV head this query head reads
    const auto Q = cview<Order>(out.Q).middleCols(h * d.dq, d.dq);
    const auto K = cview<Order>(out.K).middleCols(g * d.dk, d.dk);
    const auto V = cview<Order>(out.V).middleCols(g * d.dv, d.dv);
    View<Order> Sc(r.scores.data(), T, S), W(r.weights.data(), T, S), O(r.output.data(), T, d.dv);
    View<Order> concat(out.concat.data(), T, d.H * d.dv);
    const bool skip = skipsCausal(cfg, in.mask);
    const float scale = out.scale;

    // The head's copies of its Q, K, V rows.
    for (int i : ch.rowsQ) View<Order>(r.Q.data(), T, d.dq).row(i) = Q.row(i);
    for (int j : ch.rowsKV) {
        View<Order>(r.K.data(), S, d.dk).row(j) = K.row(j);
        View<Order>(r.V.data(), S, d.dv).row(j) = V.row(j);
    }

    auto t = Clock::now();
    for (int i : ch.rowsQ) {
        const int kE = keyEnd(cfg, in.mask, S, i + 1);
        Sc.row(i).head(kE).noalias() = (Q.row(i) * scale) * K.topRows(kE).transpose();
        if (!Sc.row(i).head(kE).allFinite()) return false;
    }
    for (int j : ch.rowsKV) {
        const int r0 = skip ? std::min(j, T) : 0;  // queries before key j don't compute its (masked) score
        if (r0 < T) {
            Sc.col(j).segment(r0, T - r0).noalias() = (Q.middleRows(r0, T - r0) * scale) * K.row(j).transpose();
            if (!Sc.col(j).segment(r0, T - r0).allFinite()) return false;
        }
    }
    tScores += msSince(t);

    // Rows to renormalise: changed queries, and every query that sees a changed key.
    t = Clock::now();
    const std::size_t R = ch.rowsKV.size();
    // Per row: 0 untouched, 1 rescaled (only scores at R changed), 2 recomputed from its scores.
    std::vector<char> how(std::size_t(T), 0);
    for (int i : ch.rowsQ) how[std::size_t(i)] = 2;
    float* rowMax = st.rowMax.data() + std::ptrdiff_t(h) * T;
    float* rowSum = st.rowSum.data() + std::ptrdiff_t(h) * T;
    // The rescaled rows: every unchanged weight times c (1 elsewhere), and the rows' old weights at R.
    Eigen::Matrix<float, Eigen::Dynamic, 1> scaleOf = Eigen::Matrix<float, Eigen::Dynamic, 1>::Ones(T);
    Mat<Eigen::RowMajor> oldW(T, static_cast<Eigen::Index>(R));
    int first = T;
    for (int i = 0; i < T; ++i) {
        if (!how[std::size_t(i)]) {
            for (int j : ch.rowsKV)
                if (!md.masked(i, j) || !md.negInfFill) {
                    how[std::size_t(i)] = 1;
                    break;
                }
            if (!how[std::size_t(i)]) continue;
        }
        first = std::min(first, i);
        double oldSum = 0;
        for (std::size_t k = 0; k < R; ++k) oldSum += (oldW(i, Eigen::Index(k)) = W(i, ch.rowsKV[k]));
        if (how[std::size_t(i)] == 2) continue;
        // New stats from the old ones and the changed keys alone (no pass over the row):
        //   z' = z·e^(m−m')·(1 − Σ_R w) + Σ_R e^(s'_j − m'),  m' = max(m, s'_R),  c = z·e^(m−m') / z'.
        // Where the changed keys carried much of the old weight the subtraction would cancel, and a fully
        // masked row has no stats to start from: those rows are recomputed.
        const float m0 = rowMax[i], z0 = rowSum[i];
        if (z0 == 0 || oldSum > 0.5) {
            how[std::size_t(i)] = 2;
            continue;
        }
        double m1 = m0;
        for (int j : ch.rowsKV)
            if (!md.masked(i, j)) m1 = std::max(m1, double(Sc(i, j)));
        const double e = std::exp(double(m0) - m1);
        double z1 = double(z0) * e * (1.0 - oldSum);
        for (int j : ch.rowsKV)
            z1 += std::exp((md.masked(i, j) ? double(md.fill) : double(Sc(i, j))) - m1);
        rowMax[i] = float(m1);
        rowSum[i] = float(z1);
        scaleOf[i] = float(double(z0) * e / z1);
    }
    float* rowScale = st.change.rowScale.data() + std::ptrdiff_t(h) * T;  // for attn::resultChange
    for (int i = first; i < T; ++i)
        if (how[std::size_t(i)]) rowScale[i] = how[std::size_t(i)] == 1 ? scaleOf[i] : std::numeric_limits<float>::quiet_NaN();
    // In storage order: a Row session scales each row (contiguous), a Column session each key's line of
    // queries by the vector of row scales (contiguous too).
    if constexpr (Order == Eigen::RowMajor) {
        for (int i = first; i < T; ++i)
            if (how[std::size_t(i)] == 1) W.row(i) *= scaleOf[i];
    } else if (first < T) {
        W.middleRows(first, T - first).array().colwise() *= scaleOf.segment(first, T - first).array();
    }
    Eigen::Matrix<float, 1, Eigen::Dynamic> sRow(S), wRow(S), corr(d.dv);
    double tOut = 0;
    for (int i = first; i < T; ++i) {
        if (!how[std::size_t(i)]) continue;
        if (how[std::size_t(i)] == 2) {
            bool finite;
            if constexpr (Order == Eigen::RowMajor) {
                finite = softmaxRow(md, i, &Sc(i, 0), &W(i, 0), nullptr, rowMax[i], rowSum[i]);
            } else {
                sRow = Sc.row(i);
                finite = softmaxRow(md, i, sRow.data(), wRow.data(), nullptr, rowMax[i], rowSum[i]);
                W.row(i) = wRow;
            }
            if (!finite) return false;
        } else {
            for (int j : ch.rowsKV) {
                if (!std::isfinite(Sc(i, j))) return false;
                const double x = (md.masked(i, j) ? double(md.fill) : double(Sc(i, j))) - double(rowMax[i]);
                const float wNew = float(std::exp(x) / double(rowSum[i]));
                W(i, j) = wNew < std::numeric_limits<float>::min() ? 0.0f : wNew;  // as softmaxRow flushes
            }
        }
        const auto t2 = Clock::now();
        const int kLive = in.mask.causal && md.negInfFill ? std::min(S, i + 1) : S;
        if (how[std::size_t(i)] == 2) {
            O.row(i).noalias() = W.row(i).head(kLive) * V.topRows(kLive);
        } else {
            corr.setZero();
            for (std::size_t k = 0; k < R; ++k) corr += oldW(i, Eigen::Index(k)) * oldV.row(Eigen::Index(k)).segment(g * d.dv, d.dv);
            O.row(i) = scaleOf[i] * (O.row(i) - corr);
            for (int j : ch.rowsKV) O.row(i) += W(i, j) * V.row(j);
        }
        concat.row(i).segment(h * d.dv, d.dv) = O.row(i);
        tOut += msSince(t2);
    }
    tSoftmax += msSince(t) - tOut;
    tPv += tOut;
    r.fullyMaskedQueries.clear();
    if (in.mask.any())
        for (int i = 0; i < T; ++i)
            if (rowSum[i] == 0) r.fullyMaskedQueries.push_back(i);
    return true;
}

template <int Order>
bool tryIncrementalT(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out,
                     Status& status)
{
    IncrementalState& st = *out.cache.state;
    Change ch;
    if (!diff(in, st, cfg, d, ch)) return false;
    out.incremental = true;
    st.change.rowScale.assign(std::size_t(d.H) * std::size_t(d.T), 1.0f);  // updateHead writes its rows'
    auto tell = [&] {  // what changed, for the caller (attn::resultChange)
        ResultChange& c = st.change;
        c.all = false;
        c.base = c.serial;
        c.serial = nextResultSerial();
        c.queries = ch.rowsQ;
        c.keys = ch.rowsKV;
        c.headAll = ch.headDirty;
    };
    if (!ch.any()) {
        tell();
        return true;
    }

    auto t0 = Clock::now();
    // Old V rows of the changed keys (all KV heads), for the output correction.
    Mat<Eigen::RowMajor> oldV(static_cast<Eigen::Index>(ch.rowsKV.size()), d.kvHeads() * d.dv);
    for (std::size_t k = 0; k < ch.rowsKV.size(); ++k)
        oldV.row(Eigen::Index(k)) = cview<Order>(out.V).row(ch.rowsKV[k]);
    updateProjections<Order>(in, cfg, d, ch, out);
    out.timings.projections = msSince(t0);
    for (auto [m, what] : {std::pair{&out.Q, "Q"}, {&out.K, "K"}, {&out.V, "V"}})
        if (!allFinite(*m)) return false;  // let the full compute locate and report it

    std::vector<int> dirty, clean;
    for (int h = 0; h < d.H; ++h) (ch.headDirty[std::size_t(h)] ? dirty : clean).push_back(h);
    if (!dirty.empty())
        if (Status s = computeHeads(in, cfg, d, dirty, false, out, st); !s.ok()) {
            status = s;
            return true;
        }
    if (!ch.rowsQ.empty() || !ch.rowsKV.empty()) {
        const MaskDesc md = describeMask(in.mask, cfg.layout, d.T, d.S);
        int badHead = -1;
        double tS = 0, tM = 0, tP = 0;
        const int n = int(clean.size());
        // Heads are independent (each writes its own rows of its own buffers and concat block).
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : tS, tM, tP) if (n > 1 && std::size_t(d.T) * d.S >= (1u << 16))
        for (int k = 0; k < n; ++k)
            if (!updateHead<Order>(in, cfg, d, ch, oldV, md, clean[std::size_t(k)], out, st, tS, tM, tP)) {
#pragma omp critical(attnscope_bad_head_incremental)
                if (badHead < 0 || clean[std::size_t(k)] < badHead) badHead = clean[std::size_t(k)];
            }
        out.timings.scores += tS;
        out.timings.softmax += tM;
        out.timings.pv += tP;
        if (badHead >= 0) {
            status = scoresOverflow(out, badHead);
            return true;
        }
    }
    t0 = Clock::now();
    outputProjection(in, cfg, d, out);
    out.timings.output = msSince(t0);
    if (!allFinite(out.output)) return false;  // the full compute reports where
    snapshot(in, cfg, d, st);
    tell();
    return true;
}

} // namespace

bool tryIncremental(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out,
                    Status& status)
{
    IncrementalState* st = out.cache.state.get();
    if (!st || !st->valid || cfg.cpuPath != CpuPath::Fast || out.backend != Backend::Cpu) return false;
    if (!sameConfig(st->cfg, cfg) || !sameDims(st->d, d) || int(out.heads.size()) != d.H) return false;
    if (cfg.score == Score::Additive) return false;  // not served: its scores need the tanh of every pair
    if (cfg.layout == Layout::Row) return tryIncrementalT<Eigen::RowMajor>(in, cfg, d, out, status);
    return tryIncrementalT<Eigen::ColMajor>(in, cfg, d, out, status);
}

} // namespace attn::cpu::fast

namespace attn {

std::uint64_t nextResultSerial()
{
    static std::atomic<std::uint64_t> serials{0};
    return ++serials;
}

const ResultChange* resultChange(const AttentionResult& r)
{
    return r.cache.state && r.cache.state->valid ? &r.cache.state->change : nullptr;
}

void copyResult(const AttentionResult& from, AttentionResult& to)
{
    if (&from == &to) return;
    to = from;  // the matrices (their buffers reused when the shapes match); the cache is dropped
    if (from.cache.state) to.cache.state = std::make_shared<IncrementalState>(*from.cache.state);
}

} // namespace attn
