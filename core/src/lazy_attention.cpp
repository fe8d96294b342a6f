// Attention without an n×n matrix, and its maps rebuilt on demand: see attnscope/lazy_attention.h.
#include "attnscope/lazy_attention.h"

#include "attnscope/recycled_buffers.h"

#include <algorithm>
#include <cmath>
#include <cassert>
#include <limits>
#include <mutex>
#include <set>
#include <string>

namespace attn {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Query rows and keys per block: a 64 × 256 score block and its 64 × D output stay in L2 while the keys stream.
constexpr int kQueryBlock = 64;
constexpr int kKeyBlock = 256;
// A one-token step's keys split into chunks of at least this many keys (at most kMaxChunks), when there are fewer
// than kManyTasks (KV head, query block) tasks to share among the cores.
constexpr int kChunkKeys = 512;
constexpr int kMaxChunks = 16;
constexpr int kManyTasks = 8;
// Up to this many stacked query rows, matrix-vector products instead of GEMMs.
constexpr int kVectorRows = 4;

std::string dims(const Eigen::Ref<const Matrix>& m) { return std::to_string(m.rows()) + "×" + std::to_string(m.cols()); }

Status checkShapes(const Eigen::Ref<const Matrix>& Q, const Eigen::Ref<const Matrix>& K, const Eigen::Ref<const Matrix>& V, const LazyAttentionSpec& s, int pos0, int& D,
                   int& Dv)
{
    const int H = s.heads, Hkv = s.kvHeads > 0 ? s.kvHeads : s.heads;
    if (H < 1 || Hkv < 1 || H % Hkv != 0)
        return invalidArgument("lazy attention: H_kv (" + std::to_string(Hkv) + ") must divide H (" + std::to_string(H) + ")");
    if (Q.cols() % H != 0)
        return invalidArgument("lazy attention: Q is " + dims(Q) + ", whose width is not a multiple of H = " + std::to_string(H));
    D = static_cast<int>(Q.cols() / H);
    if (K.cols() != Eigen::Index(Hkv) * D)
        return invalidArgument("lazy attention: K is " + dims(K) + ", expected S×" + std::to_string(Hkv * D) + " (H_kv·D)");
    if (V.rows() != K.rows() || V.cols() % Hkv != 0)
        return invalidArgument("lazy attention: V is " + dims(V) + ", expected " + std::to_string(K.rows()) + "×(H_kv·D_v) like K");
    Dv = static_cast<int>(V.cols() / Hkv);
    if (pos0 < 0) return invalidArgument("lazy attention: the first query's position is " + std::to_string(pos0));
    if (!(std::isfinite(s.scale))) return invalidArgument("lazy attention: the scale is not finite");
    return Status::success();
}

} // namespace

double lazyLayerBytes(long n, int heads, int kvHeads, int headDim)
{
    const double Hkv = kvHeads > 0 ? kvHeads : heads;
    return 4.0 * double(n) * (double(heads) * headDim + 2 * Hkv * headDim + heads);
}

Status lazyAttention(const Eigen::Ref<const Matrix>& Q, const Eigen::Ref<const Matrix>& K, const Eigen::Ref<const Matrix>& V,
                     const LazyAttentionSpec& spec, int pos0, Matrix& context, Matrix& lse,
                     const std::vector<std::uint8_t>& ablated)
{
    int D = 0, Dv = 0;
    ATTNSCOPE_RETURN_IF_ERROR(checkShapes(Q, K, V, spec, pos0, D, Dv));
    const int H = spec.heads, Hkv = spec.kvHeads > 0 ? spec.kvHeads : spec.heads, group = H / Hkv;
    const int rows = static_cast<int>(Q.rows()), S = static_cast<int>(K.rows());
    context.setZero(rows, Eigen::Index(H) * Dv);
    lse.setConstant(rows, H, kNegInf);
    // Each task one KV head × one block of positions, with the query heads that read that KV head stacked (head
    // g's query i in row g·ib + i): each block of keys and values is read once for the whole group (a grouped-query
    // model's one-token step streams every layer's K and V: 3× less with SmolLM2's 3 query heads per KV head).
    // About kQueryBlock stacked rows per task, as before grouping; written to its own rows and columns: no sharing.
    const int positionsPerBlock = std::max(1, kQueryBlock / group);
    const int blocks = (rows + positionsPerBlock - 1) / positionsPerBlock;
    // A one-token step has one block per KV head (3 tasks for SmolLM2, on 2 cores) and streams every key and
    // value of the layer: its keys are split into chunks, each task one chunk, and the chunks' partial maxima,
    // sums and outputs merged after (the split-key form of the same recurrence). The number of chunks is a
    // function of the sizes only, so the bits do not depend on the number of threads.
    const int chunks = Hkv * blocks >= kManyTasks ? 1 : std::clamp((S + kChunkKeys - 1) / kChunkKeys, 1, kMaxChunks);
    const int tasks = Hkv * blocks * chunks;
    const int maxR = group * std::min(positionsPerBlock, rows);
    // Split: per task its partial state, running maximum m, sum l (maxR each) and output (maxR × Dv).
    Matrix partM, partL, partAcc;
    if (chunks > 1) {
        partM.resize(tasks, maxR);
        partL.resize(tasks, maxR);
        partAcc.resize(Eigen::Index(tasks) * maxR, Dv);
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < tasks; ++t) {
        const int kvh = t / (blocks * chunks), qb = (t / chunks) % blocks, chunk = t % chunks;
        const int i0 = qb * positionsPerBlock, ib = std::min(positionsPerBlock, rows - i0), R = group * ib;
        const int first = pos0 + i0, last = pos0 + i0 + ib - 1;  // positions of the block's queries
        const int lo0 = spec.window > 0 ? std::max(0, first - spec.window + 1) : 0;
        const int hi0 = spec.causal ? std::min(S, last + 1) : S;
        // This chunk's keys: an equal share of [lo0, hi0), a multiple of 16 keys.
        const int share = ((hi0 - lo0 + chunks - 1) / chunks + 15) / 16 * 16;
        const int lo = std::min(hi0, lo0 + chunk * share), hi = std::min(hi0, lo + share);
        Eigen::VectorXf m = Eigen::VectorXf::Constant(R, kNegInf), l = Eigen::VectorXf::Zero(R);
        Matrix acc = Matrix::Zero(R, Dv), s, p, q(R, D);
        for (int g = 0; g < group; ++g) q.middleRows(Eigen::Index(g) * ib, ib) = Q.block(i0, Eigen::Index(kvh * group + g) * D, ib, D);
        for (int j0 = lo; j0 < hi; j0 += kKeyBlock) {
            const int jb = std::min(kKeyBlock, hi - j0);
            const auto Kb = K.block(j0, Eigen::Index(kvh) * D, jb, D);
            const auto Vb = V.block(j0, Eigen::Index(kvh) * Dv, jb, Dv);
            // A few query rows (a one-token step): matrix-vector products over the block's contiguous key and
            // value rows; a GEMM would pack the 256 × D block for each of them.
            if (R <= kVectorRows) {
                s.resize(R, jb);
                for (int r = 0; r < R; ++r) s.row(r).noalias() = (Kb * q.row(r).transpose()).transpose();
            } else {
                s.noalias() = q * Kb.transpose();
            }
            s *= spec.scale;
            if (spec.softcap > 0) s.array() = (s.array() * (1.0f / spec.softcap)).tanh() * spec.softcap;
            // Masked cells only where the block reaches past the diagonal or below the window's edge.
            const bool causalEdge = spec.causal && j0 + jb - 1 > first;
            const bool windowEdge = spec.window > 0 && j0 <= last - spec.window;
            if (causalEdge || windowEdge)
                for (int r = 0; r < R; ++r) {
                    const int pos = first + r % ib;
                    for (int j = 0; j < jb; ++j) {
                        const int key = j0 + j;
                        if ((spec.causal && key > pos) || (spec.window > 0 && key <= pos - spec.window)) s(r, j) = kNegInf;
                    }
                }
            const Eigen::VectorXf bm = s.rowwise().maxCoeff();
            Eigen::VectorXf sub(R), alpha(R);
            for (int r = 0; r < R; ++r) {
                const float mNew = std::max(m[r], bm[r]);
                // Nothing unmasked so far (m = −inf): acc and l are 0, so alpha does not matter; and a row still
                // without a key subtracts 0 (exp(−inf − 0) = 0, where −inf − (−inf) would be NaN).
                alpha[r] = m[r] == kNegInf ? 0.0f : std::exp(m[r] - mNew);
                sub[r] = mNew == kNegInf ? 0.0f : mNew;
                m[r] = mNew;
            }
            // Row by row: a row-major row is contiguous, and Eigen's vectorised exp applies; the broadcast of
            // `s.colwise() - sub` has no packet access, which made every cell a scalar expf (18 % of a forward).
            p.resize(R, jb);
            for (int r = 0; r < R; ++r) p.row(r).array() = (s.row(r).array() - sub[r]).exp();
            l = l.cwiseProduct(alpha) + p.rowwise().sum();
            acc = alpha.asDiagonal() * acc;
            if (R <= kVectorRows) {
                for (int r = 0; r < R; ++r) acc.row(r).noalias() += p.row(r) * Vb;
            } else {
                acc.noalias() += p * Vb;
            }
        }
        if (chunks > 1) {
            partM.row(t).head(R) = m.transpose();
            partL.row(t).head(R) = l.transpose();
            partAcc.middleRows(Eigen::Index(t) * maxR, R) = acc;
            continue;
        }
        for (int r = 0; r < R; ++r) {
            const int h = kvh * group + r / ib, i = i0 + r % ib;
            if (!(l[r] > 0)) continue;  // no unmasked key: context 0, lse −inf
            lse(i, h) = m[r] + std::log(l[r]);
            const bool off = h < int(ablated.size()) && ablated[std::size_t(h)];
            if (!off) context.row(i).segment(Eigen::Index(h) * Dv, Dv) = acc.row(r) / l[r];
        }
    }
    if (chunks == 1) return Status::success();
    // Each (KV head, query block): its chunks merged in order, each rescaled to the common maximum.
    for (int kvh = 0; kvh < Hkv; ++kvh)
        for (int qb = 0; qb < blocks; ++qb) {
            const int i0 = qb * positionsPerBlock, ib = std::min(positionsPerBlock, rows - i0), R = group * ib;
            const int t0 = (kvh * blocks + qb) * chunks;
            for (int r = 0; r < R; ++r) {
                float mx = kNegInf;
                for (int c = 0; c < chunks; ++c) mx = std::max(mx, partM(t0 + c, r));
                const int h = kvh * group + r / ib, i = i0 + r % ib;
                if (mx == kNegInf) continue;  // no unmasked key: context 0, lse −inf
                float l = 0;
                Eigen::RowVectorXf acc = Eigen::RowVectorXf::Zero(Dv);
                for (int c = 0; c < chunks; ++c) {
                    const float mc = partM(t0 + c, r);
                    if (mc == kNegInf) continue;  // a chunk without an unmasked key adds nothing
                    const float w = std::exp(mc - mx);
                    l += w * partL(t0 + c, r);
                    acc += w * partAcc.row(Eigen::Index(t0 + c) * maxR + r);
                }
                if (!(l > 0)) continue;
                lse(i, h) = mx + std::log(l);
                const bool off = h < int(ablated.size()) && ablated[std::size_t(h)];
                if (!off) context.row(i).segment(Eigen::Index(h) * Dv, Dv) = acc / l;
            }
        }
    return Status::success();
}

// The buffer behind LazyLayers: capacity rows each, of which the living layers view their first n (`views`, one
// entry per layer). Rows at or past the largest view are free to write; the mutex guards `views` only (the rows a
// layer writes are reserved under it first, and no living layer reads them).
struct LazyLayer::Rows {
    Matrix Q, K, lse, V;  // capacity × H·D, H_kv·D, H, H_kv·D_v (or 0)
    std::mutex mutex;
    std::multiset<Eigen::Index> views;
    bool recycle = false;  // adopt(…, recycle): the buffers go to RecycledBuffers when the last view goes
    ~Rows()
    {
        if (!recycle) return;
        // What the pool pushes out (over its capacity) is freed here, as these would have been.
        for (Matrix* m : {&Q, &K, &lse, &V}) {
            std::vector<Matrix> pushedOut = RecycledBuffers::instance().give(*m);
            (void)pushedOut;
        }
    }
};

namespace {

template <class M>
Matrix withSpare(M&& rows, Eigen::Index spare)
{
    if (spare == 0) return Matrix(std::forward<M>(rows));
    Matrix out(rows.rows() + spare, rows.cols());
    out.topRows(rows.rows()) = rows;
    return out;
}

} // namespace

std::pair<std::shared_ptr<LazyLayer::Rows>, Eigen::Index> LazyLayer::own(Matrix Q, Matrix K, Matrix lse, Matrix V,
                                                                         Eigen::Index spareRows)
{
    const Eigen::Index n = Q.rows();
    if (V.size() == 0) V.resize(n, 0);
    assert(K.rows() == n && lse.rows() == n && V.rows() == n);
    if (spareRows < 0) spareRows = defaultSpareRows(n);
    auto rows = std::make_shared<Rows>();
    rows->Q = withSpare(std::move(Q), spareRows);
    rows->K = withSpare(std::move(K), spareRows);
    rows->lse = withSpare(std::move(lse), spareRows);
    rows->V = withSpare(std::move(V), spareRows);
    rows->views.insert(n);
    return {std::move(rows), n};
}

Eigen::Index LazyLayer::defaultSpareRows(Eigen::Index n) { return std::max<Eigen::Index>(64, n / 4); }

std::shared_ptr<const LazyLayer> LazyLayer::adopt(Matrix Q, Matrix K, Matrix lse, Matrix V, Eigen::Index n, bool recycle)
{
    const Eigen::Index capacity = Q.rows();
    if (V.size() == 0) V.resize(capacity, 0);
    assert(n >= 0 && n <= capacity && K.rows() == capacity && lse.rows() == capacity && V.rows() == capacity);
    auto rows = std::make_shared<Rows>();
    rows->Q = std::move(Q);
    rows->K = std::move(K);
    rows->lse = std::move(lse);
    rows->V = std::move(V);
    rows->views.insert(n);
    rows->recycle = recycle;
    return std::shared_ptr<const LazyLayer>(new LazyLayer(std::move(rows), n));
}

LazyLayer::LazyLayer(Matrix Q, Matrix K, Matrix lse, Eigen::Index spareRows, Matrix V)
    : LazyLayer(own(std::move(Q), std::move(K), std::move(lse), std::move(V), spareRows))
{
}

LazyLayer::LazyLayer(std::pair<std::shared_ptr<Rows>, Eigen::Index> owned) : LazyLayer(std::move(owned.first), owned.second) {}

LazyLayer::LazyLayer(std::shared_ptr<Rows> rows, Eigen::Index n)
    : Q(rows->Q.data(), n, rows->Q.cols()), K(rows->K.data(), n, rows->K.cols()), lse(rows->lse.data(), n, rows->lse.cols()),
      V(rows->V.data(), n, rows->V.cols()), m_rows(std::move(rows))
{
}

LazyLayer::~LazyLayer()
{
    if (!m_rows) return;
    std::lock_guard<std::mutex> lock(m_rows->mutex);
    auto it = m_rows->views.find(Q.rows());
    if (it != m_rows->views.end()) m_rows->views.erase(it);
}

std::shared_ptr<LazyLayer> LazyLayer::appended(const Matrix& q, const Matrix& k, const Matrix& v) const
{
    const Eigen::Index n = Q.rows(), m = q.rows();
    assert(m_rows && k.rows() == m && q.cols() == Q.cols() && k.cols() == K.cols());
    assert(V.cols() == 0 ? v.size() == 0 : v.rows() == m && v.cols() == V.cols());
    bool inPlace = false;
    {
        std::lock_guard<std::mutex> lock(m_rows->mutex);
        if (n + m <= m_rows->Q.rows() && *m_rows->views.rbegin() <= n) {
            m_rows->views.insert(n + m);  // reserved: the rows n… are this caller's to write
            inPlace = true;
        }
    }
    std::shared_ptr<Rows> rows = m_rows;
    if (!inPlace) {
        rows = std::make_shared<Rows>();
        const Eigen::Index capacity = n + m + defaultSpareRows(n + m);
        rows->Q.resize(capacity, q.cols());
        rows->K.resize(capacity, k.cols());
        rows->lse.resize(capacity, lse.cols());
        rows->V.resize(capacity, V.cols());
        if (n > 0) {
            rows->Q.topRows(n) = Q;
            rows->K.topRows(n) = K;
            rows->lse.topRows(n) = lse;
            rows->V.topRows(n) = V;
        }
        rows->views.insert(n + m);
    }
    rows->Q.middleRows(n, m) = q;
    rows->K.middleRows(n, m) = k;
    if (V.cols() > 0) rows->V.middleRows(n, m) = v;
    return std::shared_ptr<LazyLayer>(new LazyLayer(std::move(rows), n + m));
}

void LazyLayer::setLse(Eigen::Index row0, const Matrix& rows)
{
    assert(m_rows && row0 + rows.rows() <= lse.rows() && rows.cols() == lse.cols());
    m_rows->lse.middleRows(row0, rows.rows()) = rows;
}

std::shared_ptr<const LazyLayer> LazyLayer::truncated(Eigen::Index t) const
{
    t = std::min(t, Q.rows());
    {
        std::lock_guard<std::mutex> lock(m_rows->mutex);
        m_rows->views.insert(t);
    }
    return std::shared_ptr<const LazyLayer>(new LazyLayer(m_rows, t));
}

LazyMaps::LazyMaps(std::vector<std::shared_ptr<const LazyLayer>> layers, const LazyAttentionSpec& spec)
    : m_layers(std::move(layers)), m_spec(spec)
{
    if (m_spec.kvHeads <= 0) m_spec.kvHeads = m_spec.heads;
    if (!m_layers.empty()) {
        m_n = static_cast<int>(m_layers.front()->Q.rows());
        m_headDim = m_spec.heads > 0 ? static_cast<int>(m_layers.front()->Q.cols() / m_spec.heads) : 0;
    }
}

LazyMaps::LazyMaps(std::vector<std::shared_ptr<const LazyLayer>> layers, const std::vector<LazyAttentionSpec>& specs)
    : LazyMaps(std::move(layers), specs.empty() ? LazyAttentionSpec{} : specs.front())
{
    for (const LazyAttentionSpec& s : specs) m_windows.push_back(s.window);
}

Status LazyMaps::tile(MapKind kind, int layer, int head, const MapRect& r, Matrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
    const LazyLayer& L = *m_layers[static_cast<std::size_t>(layer)];
    scoresTile(L.Q, L.K, head, m_spec.heads, m_spec.kvHeads, m_spec.scale, r, out, m_spec.softcap);
    if (kind == MapKind::Scores) return Status::success();  // before masking, as the dense results keep them
    for (int i = 0; i < r.rows; ++i) {
        const float s = L.lse(r.r0 + i, head);
        float* row = out.row(i).data();
        if (s == kNegInf) {
            std::fill(row, row + r.cols, 0.0f);
            continue;
        }
        for (int j = 0; j < r.cols; ++j) row[j] = masked(layer, r.r0 + i, r.c0 + j) ? 0.0f : std::exp(row[j] - s);
    }
    return Status::success();
}

Status LazyMaps::pooled(MapKind kind, int layer, int head, const MapRect& r, int outRows, int outCols, Matrix& out) const
{
    if (kind == MapKind::Scores) return AttentionMaps::pooled(kind, layer, head, r, outRows, outCols, out);
    std::vector<int> colOf;
    const Expected<bool> any = preparePooled(kind, layer, head, r, outRows, outCols, colOf, out);
    if (!any || !*any) return any ? Status::success() : any.status();
    const LazyLayer& L = *m_layers[static_cast<std::size_t>(layer)];
    const int D = m_headDim, kvh = head / (m_spec.heads / m_spec.kvHeads), win = window(layer);
    // log-weights' block maxima; a block no query of which sees any key stays −inf and becomes weight 0, as the
    // dense maps' masked cells are.
    Matrix best = Matrix::Constant(outRows, outCols, kNegInf);
    const auto K = L.K.block(r.c0, Eigen::Index(kvh) * D, r.cols, D);
#pragma omp parallel for schedule(dynamic, 1)
    for (int p = 0; p < outRows; ++p) {
        const int i0 = blockStart(r.rows, outRows, p), i1 = blockStart(r.rows, outRows, p + 1);
        // Keys these queries can see: up to the last one's position (causal), from the first one's window start.
        const int firstPos = r.r0 + i0, lastPos = r.r0 + i1 - 1;
        const int jLo = win > 0 ? std::max(0, firstPos - win + 1 - r.c0) : 0;
        const int jHi = m_spec.causal ? std::min(r.cols, lastPos - r.c0 + 1) : r.cols;
        if (jHi <= jLo) continue;
        // In chunks of keys, so a band's scores stay in cache (≤ 64 K floats).
        const int chunk = std::max(256, (1 << 16) / std::max(1, i1 - i0));
        Matrix s;
        float* dst = best.row(p).data();
        for (int j0 = jLo; j0 < jHi; j0 += chunk) {
            const int jb = std::min(chunk, jHi - j0);
            s.noalias() = L.Q.block(r.r0 + i0, Eigen::Index(head) * D, i1 - i0, D) * K.middleRows(j0, jb).transpose();
            for (int i = 0; i < i1 - i0; ++i) {
                const int pos = r.r0 + i0 + i;
                const float shift = L.lse(pos, head);
                if (shift == kNegInf) continue;
                // This query's visible keys within the chunk.
                const int a = win > 0 ? std::max(j0, pos - win + 1 - r.c0) : j0;
                const int b = m_spec.causal ? std::min(j0 + jb, pos - r.c0 + 1) : j0 + jb;
                const float* row = s.row(i).data();
                if (a >= b) continue;
                // A soft-cap keeps the order of the scores (tanh grows): the cap of the largest is the largest capped.
                const float cap = m_spec.softcap;
                auto capped = [cap](float v) { return cap > 0 ? cap * std::tanh(v / cap) : v; };
                if (m_spec.scale > 0) {
                    // q·k·s − lse grows with q·k: each pooled column's largest q·k over its keys (a vectorised
                    // max over a contiguous run), then one subtraction, instead of a compare and store per cell.
                    for (int j = a; j < b;) {
                        const int c = colOf[std::size_t(j)];
                        const int e = std::min(b, blockStart(r.cols, outCols, c + 1));
                        const float v = capped(Eigen::Map<const Eigen::ArrayXf>(row + (j - j0), e - j).maxCoeff() * m_spec.scale) - shift;
                        if (v > dst[c]) dst[c] = v;
                        j = e;
                    }
                    continue;
                }
                for (int j = a; j < b; ++j) {
                    const float v = capped(row[j - j0] * m_spec.scale) - shift;
                    float& d = dst[colOf[std::size_t(j)]];
                    if (v > d) d = v;
                }
            }
        }
    }
    out = best.array().exp().matrix();
    return Status::success();
}

} // namespace attn
