// The fast CPU path: Eigen products over row-semantics views of the result's buffers (both layouts, see
// fast_path.h), and a fused per-block kernel (scores → mask → softmax → PV for a block of queries of one
// head, while the block is still in cache). Checked against attention_ref.cpp by tests/unit/test_attention.cpp.
//
// [SECTION] Views and masks          row-semantics maps; masks from their compact description
// [SECTION] Softmax of one row       shared with the incremental update
// [SECTION] The block kernel         one head × a block of queries
// [SECTION] Heads and the output     the thread team over (head, block) tasks; row-block products (X·W, concat·W^O)
// [SECTION] computeEigen             projections, heads, output; the snapshot for the next incremental call
#include "fast_path.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn::cpu {
namespace fast {
namespace {

using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using RowBlock = Eigen::Map<Matrix, 0, Eigen::OuterStride<>>;
template <int Order>
using MaskView = Eigen::Map<Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Order>>;

// A session buffer holding a row-semantics rows×cols matrix: resized to rows×cols (Row) or cols×rows (Column),
// which is a no-op when the shape did not change.
template <int Order, class M>
auto view(M& m, Eigen::Index rows, Eigen::Index cols)
{
    if constexpr (Order == Eigen::RowMajor) m.resize(rows, cols);
    else m.resize(cols, rows);
    using Scalar = typename M::Scalar;
    return Eigen::Map<Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Order>>(m.data(), rows, cols);
}

// w[j] = exp(x[j] - mx) for j < n, vectorised, and returns their sum; x may be w. Eigen's vectorised exp
// clamps its argument at about -88.4, so exp(-inf) (a masked entry) and any argument below that give
// ~6e-39 instead of 0. Results below FLT_MIN (arguments below -87.3, already subnormal in float) are
// flushed to exactly 0: masked weights must be exactly 0. (Eigen 3.4's select() is not vectorised: with
// it every exp was a scalar libm call, 14% of a bench run by `perf`; the plain flush loop below is
// vectorised by the compiler.)
float expShiftedSum(const float* x, float mx, float* w, int n)
{
    Eigen::Map<Eigen::ArrayXf> wa(w, n);
    wa = (Eigen::Map<const Eigen::ArrayXf>(x, n) - mx).exp();
    constexpr float kTiny = std::numeric_limits<float>::min();
    for (int j = 0; j < n; ++j) w[j] = w[j] < kTiny ? 0.0f : w[j];
    return wa.sum();
}

} // namespace

// [SECTION] Views and masks ----------------------------------------------------------------------------

MaskDesc describeMask(const MaskSpec& m, Layout layout, int T, int S)
{
    MaskDesc md;
    md.S = S;
    md.causal = m.causal;
    if (!m.keyPadding.empty()) md.keyPadding = m.keyPadding.data();
    if (!m.validLens.empty()) {
        md.validLens = m.validLens.data();
        md.validCount = int(m.validLens.size());
    }
    if (m.custom.size() > 0) {
        md.custom = m.custom.data();
        // Row: custom is T×S row-major; Column: S×T row-major, i.e. (i, j) at j·T + i.
        md.customRowStride = layout == Layout::Row ? S : 1;
        md.customColStride = layout == Layout::Row ? 1 : T;
    }
    md.fill = m.fill;
    md.negInfFill = std::isinf(m.fill) && m.fill < 0;
    return md;
}

bool skipsCausal(const AttentionConfig& cfg, const MaskSpec& m) { return m.causal && cfg.skipCausalMaskedScores; }

int keyEnd(const AttentionConfig& cfg, const MaskSpec& m, int S, int i1)
{
    return skipsCausal(cfg, m) ? std::min(S, i1) : S;
}

// [SECTION] Softmax of one row -------------------------------------------------------------------------

bool softmaxRow(const MaskDesc& md, int i, const float* s, float* w, std::uint8_t* mk, float& rowMax, float& rowSum)
{
    const int S = md.S;
    Eigen::Map<const RowVec> sr(s, S);
    Eigen::Map<RowVec> wr(w, S);
    // The finite check of the scores, folded into this pass (the row is in cache): a product q·k of finite
    // inputs can still overflow float32.
    if (!allFinite(s, S)) return false;
    const int lim = md.limit(i);
    if (mk) {
        std::memset(mk, 0, std::size_t(lim));
        std::memset(mk + lim, 1, std::size_t(S - lim));
        if (md.hasFlags())
            for (int j = 0; j < lim; ++j)
                if (md.flag(i, j)) mk[j] = 1;
    }
    if (!md.hasFlags() && (md.negInfFill || lim == S)) {
        // The live keys are exactly [0, lim): no per-entry select; the rest of the row is 0.
        if (lim == 0) {  // every key masked with -inf
            wr.setZero();
            rowMax = 0;
            rowSum = 0;
            return true;
        }
        const float mx = sr.head(lim).maxCoeff();
        const float sum = expShiftedSum(s, mx, w, lim);
        wr.head(lim) *= 1.0f / sum;
        wr.tail(S - lim).setZero();
        rowMax = mx;
        rowSum = sum;
        return true;
    }
    // General case (key padding, custom flags, or a finite fill that masked keys take into the softmax).
    for (int j = 0; j < S; ++j) w[j] = (j >= lim || md.flag(i, j)) ? md.fill : s[j];
    const float mx = wr.maxCoeff();
    if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked with -inf
        wr.setZero();
        rowMax = 0;
        rowSum = 0;
        return true;
    }
    const float sum = expShiftedSum(w, mx, w, S);
    wr *= 1.0f / sum;
    rowMax = mx;
    rowSum = sum;
    return true;
}

Status scoresOverflow(const AttentionResult& out, int h)
{
    const Matrix& m = out.heads[h].scores;
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c)
            if (!std::isfinite(m(r, c)))
                return invalidArgument("head " + std::to_string(h) + " scores[" + std::to_string(r) + "][" +
                                       std::to_string(c) + "] overflowed float32 (|value| > 3.4e38); scale the inputs down");
    return invalidArgument("head " + std::to_string(h) + " scores overflowed float32; scale the inputs down");
}

namespace {

// [SECTION] The block kernel ---------------------------------------------------------------------------

constexpr int kKeyChunk = 512;

struct Scratch {
    Matrix scores, weights;  // Column sessions: the block in row-major form before it is stored transposed
    MaskMatrix mask;
    Matrix qa;               // additive score: the block's queries times A_q
    Matrix tanhTmp;
};

struct HeadJob {
    const AttentionInput* in;
    const AttentionConfig* cfg;
    const Dims* d;
    MaskDesc md;
    float scale;
    bool writeMask;
    const std::vector<Matrix>* keysA;  // additive: per KV head K_h·A_k (S×A), else empty
    IncrementalState* st;
};

template <int Order>
bool runBlock(const HeadJob& job, AttentionResult& out, int h, int i0, int i1, Scratch& sc, double& tScores,
              double& tSoftmax, double& tPv)
{
    const Dims& d = *job.d;
    const int rows = i1 - i0;
    const int S = d.S;
    const int kEnd = keyEnd(*job.cfg, job.in->mask, S, i1);
    // Keys beyond this one have weight 0 for every query of the block (causal with fill -inf), whether or
    // not their scores were computed: PV skips them. (A finite fill gives masked keys a weight.)
    const int kLive = job.in->mask.causal && job.md.negInfFill ? std::min(S, i1) : S;
    HeadResult& r = out.heads[h];
    const CView<Order> Q = cview<Order>(out.Q), K = cview<Order>(out.K), V = cview<Order>(out.V);

    auto t = Clock::now();
    // The block's scores and weights, row-major rows×S: in the result itself for Row sessions, in scratch for
    // Column sessions (stored transposed below).
    float* sPtr;
    float* wPtr;
    std::uint8_t* mPtr = nullptr;
    if constexpr (Order == Eigen::RowMajor) {
        sPtr = r.scores.data() + std::ptrdiff_t(i0) * S;
        wPtr = r.weights.data() + std::ptrdiff_t(i0) * S;
        if (job.writeMask) mPtr = r.masked.data() + std::ptrdiff_t(i0) * S;
    } else {
        sc.scores.resize(rows, S);
        sc.weights.resize(rows, S);
        sPtr = sc.scores.data();
        wPtr = sc.weights.data();
        if (job.writeMask) {
            sc.mask.resize(rows, S);
            mPtr = sc.mask.data();
        }
    }
    RowBlock sb(sPtr, rows, S, Eigen::OuterStride<>(S));
    RowBlock wb(wPtr, rows, S, Eigen::OuterStride<>(S));
    // Grouped-query attention: the head reads its KV head's columns of the shared K and V (no copies).
    const int kv = d.kvHead(h);
    const auto Qb = Q.block(i0, h * d.dq, rows, d.dq);
    const auto Kh = K.block(0, kv * d.dk, kEnd, d.dk);
    if (job.cfg->score == Score::Additive) {
        const AdditiveParams& p = job.in->additive;
        const Matrix& ka = (*job.keysA)[kv];
        if constexpr (Order == Eigen::RowMajor) sc.qa.noalias() = Qb * p.Aq;
        else sc.qa.noalias() = Qb * p.Aq.transpose();  // Column stores A_q transposed (A×d_q)
        for (int i = 0; i < rows; ++i) {
            sc.tanhTmp = (ka.topRows(kEnd).rowwise() + sc.qa.row(i)).array().tanh();
            sb.row(i).head(kEnd).noalias() = (sc.tanhTmp * p.wv).transpose();
        }
    } else {
        // In chunks of keys: Eigen zeroes a product's destination and then accumulates into it, so the
        // destination should stay in L2 (128 queries × 512 keys = 256 KiB) rather than stream 2 MiB per
        // block through memory three times at S = 4096. Each score is the same dot product either way.
        for (int k0 = 0; k0 < kEnd; k0 += kKeyChunk) {
            const int kn = std::min(kKeyChunk, kEnd - k0);
            sb.middleCols(k0, kn).noalias() = (Qb * job.scale) * Kh.middleRows(k0, kn).transpose();
        }
        if (const float cap = job.cfg->softcap; cap > 0)
            sb.leftCols(kEnd).array() = (sb.leftCols(kEnd).array() * (1.0f / cap)).tanh() * cap;
    }
    if (kEnd < S) sb.rightCols(S - kEnd).setZero();
    if (skipsCausal(*job.cfg, job.in->mask))  // the diagonal block computed a few masked scores: same rule for all
        for (int i = 0; i < rows; ++i) {
            const int first = i0 + i + 1;
            if (first < kEnd) sb.row(i).segment(first, kEnd - first).setZero();
        }
    tScores += msSince(t);

    t = Clock::now();
    bool finite = true;
    float* rowMax = job.st->rowMax.data() + std::ptrdiff_t(h) * d.T;
    float* rowSum = job.st->rowSum.data() + std::ptrdiff_t(h) * d.T;
    for (int i = 0; i < rows; ++i)
        finite &= softmaxRow(job.md, i0 + i, sPtr + std::ptrdiff_t(i) * S, wPtr + std::ptrdiff_t(i) * S,
                             mPtr ? mPtr + std::ptrdiff_t(i) * S : nullptr, rowMax[i0 + i], rowSum[i0 + i]);
    tSoftmax += msSince(t);
    if (!finite) return false;

    t = Clock::now();
    View<Order> Oh(r.output.data(), d.T, d.dv);
    View<Order> concat(out.concat.data(), d.T, d.H * d.dv);
    auto ob = Oh.middleRows(i0, rows);
    ob.noalias() = wb.leftCols(kLive) * V.block(0, kv * d.dv, kLive, d.dv);
    concat.block(i0, h * d.dv, rows, d.dv) = ob;
    if constexpr (Order == Eigen::ColMajor) {
        View<Order>(r.scores.data(), d.T, S).middleRows(i0, rows) = sb;
        View<Order>(r.weights.data(), d.T, S).middleRows(i0, rows) = wb;
        if (job.writeMask) MaskView<Order>(r.masked.data(), d.T, S).middleRows(i0, rows) = sc.mask;
    }
    tPv += msSince(t);
    return true;
}

// Queries per task. Eigen packs the block's K_h (and V_h) once per product, so the products need enough
// rows to amortise that: 2·rows multiply-adds per packed value. Measured with `attnscope bench --n 4096`
// on one thread (task-clock, under load): 16 rows 1580 ms, 64 rows 1150 ms, 128 rows 987 ms; on two idle
// threads, 3 runs each alternating: 128 rows 217 ms median, 256 rows 200 ms (scores 84 → 72 ms, PV 74 → 69).
// At n=1024, 256 rows leave 4 blocks a head, too few tasks to even out two threads (24 ms against 20), so
// blocks grow to 256 rows only from 2048 queries on.
int blockRows(const Dims& d) { return d.T >= 2048 ? 256 : 128; }

// A thread team costs tens of microseconds to start, and its idle threads then spin for a while (libgomp's
// default wait policy), taking a core from the window's render thread. Below ~1M multiply-adds (about
// 0.3 ms on one core, e.g. the window's examples) one thread is better: `attnscope bench --gui` at n=64,
// h=4 ran at 63 frames/s with a team per recompute and 81 with one thread.
bool worthTeam(const Dims& d, std::size_t heads)
{
    return std::size_t(heads) * std::size_t(d.T) * std::size_t(d.S) * std::size_t(std::max(d.dk, d.dv)) >=
           (std::size_t(1) << 20);
}

template <int Order>
Status computeHeadsT(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, const std::vector<int>& heads,
                     bool writeMask, AttentionResult& out, IncrementalState& st)
{
    HeadJob job{&in, &cfg, &d, describeMask(in.mask, cfg.layout, d.T, d.S), out.scale, writeMask, nullptr, &st};
    std::vector<Matrix> keysA;
    if (cfg.score == Score::Additive) {
        keysA.resize(std::size_t(d.kvHeads()));
        std::vector<char> done(keysA.size(), 0);
        const CView<Order> K = cview<Order>(out.K);
        for (int h : heads) {
            const int kv = d.kvHead(h);  // once per KV head, shared by its group
            if (done[std::size_t(kv)]) continue;
            done[std::size_t(kv)] = 1;
            if constexpr (Order == Eigen::RowMajor) keysA[kv].noalias() = K.middleCols(kv * d.dk, d.dk) * in.additive.Ak;
            else keysA[kv].noalias() = K.middleCols(kv * d.dk, d.dk) * in.additive.Ak.transpose();
        }
        job.keysA = &keysA;
    }
    for (int h : heads) {
        HeadResult& r = out.heads[h];
        view<Order>(r.scores, d.T, d.S);
        view<Order>(r.weights, d.T, d.S);
        if (writeMask) view<Order>(r.masked, d.T, d.S);
        view<Order>(r.output, d.T, d.dv);
        // The head's Q, K, V (kept in the result for the views) are column blocks of the full projections;
        // K and V are those of its KV head.
        view<Order>(r.Q, d.T, d.dq) = cview<Order>(out.Q).middleCols(h * d.dq, d.dq);
        view<Order>(r.K, d.S, d.dk) = cview<Order>(out.K).middleCols(d.kvHead(h) * d.dk, d.dk);
        view<Order>(r.V, d.S, d.dv) = cview<Order>(out.V).middleCols(d.kvHead(h) * d.dv, d.dv);
    }
    const int br = blockRows(d);
    const int blocks = (d.T + br - 1) / br;
    const int tasks = int(heads.size()) * blocks;
    // Causal blocks late in the sequence have the most keys: hand them out first so the team ends together.
    auto taskOf = [&](int k, int& h, int& i0, int& i1) {
        const int b = blocks - 1 - k / int(heads.size());
        h = heads[k % heads.size()];
        i0 = b * br;
        i1 = std::min(d.T, i0 + br);
    };
    int badHead = -1;
    double sumScores = 0, sumSoftmax = 0, sumPv = 0;
    int team = 1;
    // One team for every phase of every head: each task writes only its own rows of its own head and its own
    // block of concat. Eigen's products inside see a running team and stay single-threaded (no nesting).
#pragma omp parallel if (worthTeam(d, heads.size()) && tasks > 1) reduction(+ : sumScores, sumSoftmax, sumPv)
    {
#ifdef _OPENMP
#pragma omp single
        team = omp_get_num_threads();
#endif
        Scratch sc;
#pragma omp for schedule(dynamic, 1)
        for (int k = 0; k < tasks; ++k) {
            int h = 0, i0 = 0, i1 = 0;
            taskOf(k, h, i0, i1);
            if (!runBlock<Order>(job, out, h, i0, i1, sc, sumScores, sumSoftmax, sumPv)) {
#pragma omp critical(attnscope_bad_head)
                if (badHead < 0 || h < badHead) badHead = h;
            }
        }
    }
    out.timings.scores += sumScores / team;
    out.timings.softmax += sumSoftmax / team;
    out.timings.pv += sumPv / team;
    if (badHead >= 0) return scoresOverflow(out, badHead);
    for (int h : heads) {
        HeadResult& r = out.heads[h];
        r.fullyMaskedQueries.clear();
        const float* rowSum = st.rowSum.data() + std::ptrdiff_t(h) * d.T;
        if (in.mask.any())
            for (int i = 0; i < d.T; ++i)
                if (rowSum[i] == 0) r.fullyMaskedQueries.push_back(i);
    }
    return {};
}

// Products of the projections and W^O as independent row-block tasks on one team with dynamic scheduling,
// instead of Eigen's internal parallel GEMM: that one splits the work statically and synchronises its
// threads, so on a loaded machine (other processes on the cores) a descheduled thread stalls the other
// (measured under load 5 on 2 cores: projections 84 ms instead of ~6 ms at n=1024). Each task packs its
// W once per block of rows, 2·rows multiply-adds per packed value: ~1% of the task at 256 rows.
// Shorter inputs get two blocks (of at least 32 rows), so that both threads work: at 128 tokens (the model's
// layers) 256 rows made one task per product, and W^O ran on one thread. The blocks depend on the rows alone,
// never on the team's size, so every run sums in the same order.
int projectionRows(int rows) { return rows >= 512 ? 256 : std::max(32, (rows / 2 + 15) / 16 * 16); }

// dst.row(i) = a.row(i)·b (+ bias) for every i, as tasks of row blocks; `tasks` lists the products.
template <int Order>
struct RowProduct {
    CView<Order> a;
    CView<Order> b;
    View<Order> dst;
    const Vector* bias;
};

template <int Order>
void runRowProducts(const std::vector<RowProduct<Order>>& products, bool team)
{
    std::vector<std::pair<int, int>> tasks;  // (product, first row)
    for (int p = 0; p < int(products.size()); ++p)
        for (int r = 0, step = projectionRows(int(products[p].a.rows())); r < products[p].a.rows(); r += step)
            tasks.emplace_back(p, r);
#pragma omp parallel for schedule(dynamic, 1) if (team && tasks.size() > 1)
    for (int k = 0; k < int(tasks.size()); ++k) {
        const RowProduct<Order>& p = products[std::size_t(tasks[std::size_t(k)].first)];
        const int r0 = tasks[std::size_t(k)].second;
        const int n = std::min<int>(projectionRows(int(p.a.rows())), int(p.a.rows()) - r0);
        View<Order> whole = p.dst;  // a Map is a view: copying it copies no values
        auto dst = whole.middleRows(r0, n);
        dst.noalias() = p.a.middleRows(r0, n) * p.b;
        if (p.bias && p.bias->size()) dst.rowwise() += p.bias->transpose();
    }
}

template <int Order>
void outputProjectionT(const AttentionInput& in, const Dims& d, AttentionResult& out)
{
    if (in.Wo.size() > 0) {
        View<Order> o = view<Order>(out.output, d.T, d.O);
        runRowProducts<Order>({{cview<Order>(out.concat), cview<Order>(in.Wo), o, &in.bo}},
                              std::size_t(d.T) * std::size_t(d.H * d.dv) * std::size_t(d.O) >= (std::size_t(1) << 20));
    } else {
        out.output = out.concat;
    }
}

template <int Order>
void projectionsT(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    if (cfg.mode == Mode::Direct) {
        out.Q = in.Q;
        out.K = in.K;
        out.V = in.V;
        return;
    }
    const CView<Order> X = cview<Order>(in.X);
    const CView<Order> Xkv = cview<Order>(cfg.mode == Mode::Cross ? in.Xkv : in.X);
    View<Order> Q = view<Order>(out.Q, d.T, d.H * d.dq);
    View<Order> K = view<Order>(out.K, d.S, d.kvHeads() * d.dk);
    View<Order> V = view<Order>(out.V, d.S, d.kvHeads() * d.dv);
    const std::size_t work = std::size_t(std::max(d.T, d.S)) * std::size_t(d.M) * std::size_t(d.H * std::max(d.dk, d.dv));
    runRowProducts<Order>({{X, cview<Order>(in.Wq), Q, &in.bq},
                           {Xkv, cview<Order>(in.Wk), K, &in.bk},
                           {Xkv, cview<Order>(in.Wv), V, &in.bv}},
                          work >= (std::size_t(1) << 20));
}

// Eigen's products start an OpenMP team once a product has more than ~100k multiply-adds (outside our
// teams), which the window's small examples pass (64×64·64×64); like our own teams, such teams cost more
// than they save there and their spinning threads slow the render thread. Small problems therefore run on one thread.
// omp_set_num_threads changes only the calling thread's setting, so concurrent computes do not interfere.
class SmallProblemOneThread {
public:
    explicit SmallProblemOneThread(const Dims& d)
    {
#ifdef _OPENMP
        const std::size_t widths = std::size_t(d.H) * std::size_t(std::max(d.dk, d.dv));
        const std::size_t work = std::size_t(std::max(d.T, d.S)) * std::size_t(std::max(d.M, 1)) * widths +
                                 std::size_t(d.H) * std::size_t(d.T) * std::size_t(d.S) * std::size_t(std::max(d.dk, d.dv));
        if (work < (std::size_t(1) << 22)) {  // ~4M multiply-adds: about 1 ms on one core
            m_saved = omp_get_max_threads();
            omp_set_num_threads(1);
        }
#else
        (void)d;
#endif
    }
    ~SmallProblemOneThread()
    {
#ifdef _OPENMP
        if (m_saved > 0) omp_set_num_threads(m_saved);
#endif
    }
    SmallProblemOneThread(const SmallProblemOneThread&) = delete;
    SmallProblemOneThread& operator=(const SmallProblemOneThread&) = delete;

private:
    int m_saved = 0;
};

Status firstNonFinite(const Matrix& m, const char* what)
{
    if (allFinite(m)) return {};
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c)
            if (!std::isfinite(m(r, c)))
                return invalidArgument(std::string(what) + "[" + std::to_string(r) + "][" + std::to_string(c) +
                                       "] overflowed float32 (|value| > 3.4e38); scale the inputs down");
    return {};
}

} // namespace

// [SECTION] Heads and the output -----------------------------------------------------------------------

Status computeHeads(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, const std::vector<int>& heads,
                    bool writeMask, AttentionResult& out, IncrementalState& st)
{
    if (cfg.layout == Layout::Row) return computeHeadsT<Eigen::RowMajor>(in, cfg, d, heads, writeMask, out, st);
    return computeHeadsT<Eigen::ColMajor>(in, cfg, d, heads, writeMask, out, st);
}

void outputProjection(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    if (cfg.layout == Layout::Row) outputProjectionT<Eigen::RowMajor>(in, d, out);
    else outputProjectionT<Eigen::ColMajor>(in, d, out);
}

void snapshot(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, IncrementalState& st)
{
    st.in = in;  // Eigen's assignment reuses the snapshot's buffers when the shapes did not change
    st.cfg = cfg;
    st.d = d;
    st.valid = true;
}

} // namespace fast

// [SECTION] computeEigen -------------------------------------------------------------------------------

Status computeEigen(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    using namespace fast;
    const SmallProblemOneThread threads(d);
    out.timings = {};
    out.incremental = false;
    if (cfg.incremental && cfg.softcap <= 0) {  // the incremental update knows no soft-cap: a whole recompute
        Status s;
        if (tryIncremental(in, cfg, d, out, s)) {
            if (!s.ok()) out.cache.state.reset();
            return s;
        }
    }
    out.layout = cfg.layout;
    out.scale = effectiveScale(cfg, d);
    out.heads.resize(d.H);
    if (!out.cache.state) out.cache.state = std::make_shared<IncrementalState>();
    IncrementalState& st = *out.cache.state;
    st.valid = false;
    const std::uint64_t base = st.change.serial;
    st.change = ResultChange{};  // everything
    st.change.base = base;
    st.change.serial = nextResultSerial();
    st.rowMax.resize(std::size_t(d.H) * std::size_t(d.T));
    st.rowSum.resize(std::size_t(d.H) * std::size_t(d.T));

    auto t0 = Clock::now();
    if (cfg.layout == Layout::Row) projectionsT<Eigen::RowMajor>(in, cfg, d, out);
    else projectionsT<Eigen::ColMajor>(in, cfg, d, out);
    out.timings.projections = msSince(t0);
    for (auto [m, what] : {std::pair{&out.Q, "Q"}, {&out.K, "K"}, {&out.V, "V"}})
        ATTNSCOPE_RETURN_IF_ERROR(firstNonFinite(*m, what));

    if (cfg.layout == Layout::Row) out.concat.resize(d.T, d.H * d.dv);
    else out.concat.resize(d.H * d.dv, d.T);
    std::vector<int> all(d.H);
    for (int h = 0; h < d.H; ++h) all[h] = h;
    ATTNSCOPE_RETURN_IF_ERROR(computeHeads(in, cfg, d, all, true, out, st));

    t0 = Clock::now();
    outputProjection(in, cfg, d, out);
    out.timings.output = msSince(t0);
    ATTNSCOPE_RETURN_IF_ERROR(firstNonFinite(out.output, "output"));
    if (cfg.incremental) snapshot(in, cfg, d, st);
    return {};
}

} // namespace attn::cpu
