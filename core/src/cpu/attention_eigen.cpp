// The fast CPU path: Eigen products and vectorised softmax, writing into the result's existing buffers
// (Eigen's resize() is a no-op when the shape is unchanged, so a recompute of the same size allocates
// nothing but a few per-head temporaries). Checked against attention_ref.cpp by tests/unit/test_attention.cpp.
#include "attnscope/attention.h"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <limits>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn::cpu {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using ColVec = Eigen::Matrix<float, Eigen::Dynamic, 1>;

// Eigen's vectorised exp clamps its argument at about -88.4, so exp(-inf) (a masked entry) and any
// argument below that give ~1e-39 instead of 0. Flush those to exactly 0, as std::exp does in float
// (exp(-88) = 6e-39 is already subnormal): masked weights must be exactly 0.
template <class ArrayExpr>
auto expFlushed(const ArrayExpr& x)
{
    return (x < -88.0f).select(0.0f, x.exp());
}

// Row-wise stable softmax of `scores` with masked entries set to `fill`, into `weights` (T×S).
// Returns the rows whose every key was masked with fill = -inf; those rows are all zero.
void softmaxRows(const Matrix& scores, const MaskMatrix& masked, bool anyMask, float fill, Matrix& weights,
                 std::vector<int>& fullyMasked)
{
    fullyMasked.clear();
    const bool negInf = std::isinf(fill);
    if (anyMask)
        weights = masked.cast<bool>().select(Matrix::Constant(scores.rows(), scores.cols(), fill), scores);
    else
        weights = scores;
    for (Eigen::Index i = 0; i < weights.rows(); ++i) {
        auto row = weights.row(i);
        const float mx = row.maxCoeff();
        if (negInf && mx == -std::numeric_limits<float>::infinity()) {  // every key masked
            row.setZero();
            fullyMasked.push_back(static_cast<int>(i));
            continue;
        }
        row = expFlushed(row.array() - mx);
        row /= row.sum();
    }
}

// Column-wise variant for the column layout (scores S×T, one query per column).
void softmaxCols(const Matrix& scores, const MaskMatrix& masked, bool anyMask, float fill, Matrix& weights,
                 std::vector<int>& fullyMasked)
{
    fullyMasked.clear();
    const bool negInf = std::isinf(fill);
    if (anyMask)
        weights = masked.cast<bool>().select(Matrix::Constant(scores.rows(), scores.cols(), fill), scores);
    else
        weights = scores;
    // Reductions along columns of a row-major matrix: compute max and sum as row vectors, which Eigen
    // vectorises across the contiguous query dimension.
    RowVec mx = weights.colwise().maxCoeff();
    for (Eigen::Index i = 0; i < weights.cols(); ++i)
        if (negInf && mx[i] == -std::numeric_limits<float>::infinity()) {
            fullyMasked.push_back(static_cast<int>(i));
            mx[i] = 0;  // the column is all -inf: exp gives 0, then it is zeroed below
        }
    weights = expFlushed((weights.rowwise() - mx).array());
    RowVec sum = weights.colwise().sum();
    for (int i : fullyMasked) sum[i] = 1;
    weights.array().rowwise() /= sum.array();
    for (int i : fullyMasked) weights.col(i).setZero();
}

// Starting a thread team costs tens of microseconds, and after each region the idle threads spin for a
// while (libgomp's default wait policy), taking a core from the window's render thread. Below ~1M
// multiply-adds per head (about 0.3 ms on one core, e.g. the window's examples) one thread is better:
// `attnscope bench --gui` at n=64, h=4 ran at 63 frames/s with a team per recompute and 81 with one thread.
bool worthParallelHeads(const Dims& d)
{
    return d.H > 1 && std::size_t(d.T) * std::size_t(d.S) * std::size_t(std::max(d.dk, d.dv)) >= (std::size_t(1) << 20);
}

// Per-phase times of the head loop: thread time summed over heads (with several threads the sum can
// exceed the wall time of the loop; timings.total is wall time).
void addHeadTimings(const std::vector<PhaseTimings>& perHead, PhaseTimings& total)
{
    for (const PhaseTimings& p : perHead) {
        total.scores += p.scores;
        total.softmax += p.softmax;
        total.pv += p.pv;
    }
}

void additiveScoresRow(const AdditiveParams& p, const Matrix& Qh, const Matrix& Kh, Matrix& scores)
{
    const Matrix qa = Qh * p.Aq;  // T×A
    const Matrix ka = Kh * p.Ak;  // S×A
    scores.resize(Qh.rows(), Kh.rows());
    Matrix tmp(Kh.rows(), p.wv.size());
    for (Eigen::Index i = 0; i < Qh.rows(); ++i) {
        tmp = (ka.rowwise() + qa.row(i)).array().tanh();
        scores.row(i) = (tmp * p.wv).transpose();
    }
}

void additiveScoresCol(const AdditiveParams& p, const Matrix& Qh, const Matrix& Kh, Matrix& scores)
{
    const Matrix qa = p.Aq * Qh;  // A×T
    const Matrix ka = p.Ak * Kh;  // A×S
    scores.resize(Kh.cols(), Qh.cols());
    Matrix tmp(p.wv.size(), Kh.cols());
    for (Eigen::Index i = 0; i < Qh.cols(); ++i) {
        tmp = (ka.colwise() + qa.col(i)).array().tanh();
        scores.col(i) = (p.wv.transpose() * tmp).transpose();
    }
}

void computeRow(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    auto t0 = Clock::now();
    if (cfg.mode == Mode::Direct) {
        out.Q = in.Q;
        out.K = in.K;
        out.V = in.V;
    } else {
        const Matrix& Xkv = cfg.mode == Mode::Cross ? in.Xkv : in.X;
        out.Q.noalias() = in.X * in.Wq;
        out.K.noalias() = Xkv * in.Wk;
        out.V.noalias() = Xkv * in.Wv;
        if (in.bq.size()) out.Q.rowwise() += in.bq.transpose();
        if (in.bk.size()) out.K.rowwise() += in.bk.transpose();
        if (in.bv.size()) out.V.rowwise() += in.bv.transpose();
    }
    out.timings.projections = msSince(t0);

    const bool anyMask = in.mask.any();
    MaskMatrix masked;
    if (anyMask) buildMaskRowMajor(in.mask, in.mask.custom, d.T, d.S, masked);
    else masked.setZero(d.T, d.S);

    out.concat.resize(d.T, d.H * d.dv);
    std::vector<PhaseTimings> perHead(d.H);
    const bool parallel = worthParallelHeads(d);
    // Heads are independent: one thread each (OpenMP when built with it). Each head writes only its own
    // HeadResult, its own column block of concat and its own timing slot, so there is no sharing.
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int h = 0; h < d.H; ++h) {
        HeadResult& r = out.heads[h];
        PhaseTimings& ph = perHead[h];
        r.Q = out.Q.middleCols(h * d.dq, d.dq);
        r.K = out.K.middleCols(h * d.dk, d.dk);
        r.V = out.V.middleCols(h * d.dv, d.dv);
        auto t = Clock::now();
        if (cfg.score == Score::Additive) {
            additiveScoresRow(in.additive, r.Q, r.K, r.scores);
        } else {
            r.scores.noalias() = r.Q * r.K.transpose();
            if (out.scale != 1.0f) r.scores *= out.scale;
        }
        ph.scores = msSince(t);
        t = Clock::now();
        r.masked = masked;
        softmaxRows(r.scores, masked, anyMask, in.mask.fill, r.weights, r.fullyMaskedQueries);
        ph.softmax = msSince(t);
        t = Clock::now();
        r.output.noalias() = r.weights * r.V;
        out.concat.middleCols(h * d.dv, d.dv) = r.output;
        ph.pv = msSince(t);
    }
    addHeadTimings(perHead, out.timings);
    t0 = Clock::now();
    if (in.Wo.size() > 0) {
        out.output.noalias() = out.concat * in.Wo;
        if (in.bo.size()) out.output.rowwise() += in.bo.transpose();
    } else {
        out.output = out.concat;
    }
    out.timings.output = msSince(t0);
}

void computeColumn(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    auto t0 = Clock::now();
    if (cfg.mode == Mode::Direct) {
        out.Q = in.Q;
        out.K = in.K;
        out.V = in.V;
    } else {
        const Matrix& Xkv = cfg.mode == Mode::Cross ? in.Xkv : in.X;
        out.Q.noalias() = in.Wq * in.X;
        out.K.noalias() = in.Wk * Xkv;
        out.V.noalias() = in.Wv * Xkv;
        if (in.bq.size()) out.Q.colwise() += in.bq;
        if (in.bk.size()) out.K.colwise() += in.bk;
        if (in.bv.size()) out.V.colwise() += in.bv;
    }
    out.timings.projections = msSince(t0);

    const bool anyMask = in.mask.any();
    MaskMatrix masked;  // S×T: key j, query i
    if (anyMask) {
        MaskMatrix rowOriented;
        const MaskMatrix customRow = in.mask.custom.transpose();
        buildMaskRowMajor(in.mask, customRow, d.T, d.S, rowOriented);
        masked = rowOriented.transpose();
    } else {
        masked.setZero(d.S, d.T);
    }

    out.concat.resize(d.H * d.dv, d.T);
    std::vector<PhaseTimings> perHead(d.H);
    const bool parallel = worthParallelHeads(d);
    // As in computeRow: one head per thread, each writing only its own outputs.
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int h = 0; h < d.H; ++h) {
        HeadResult& r = out.heads[h];
        PhaseTimings& ph = perHead[h];
        r.Q = out.Q.middleRows(h * d.dq, d.dq);
        r.K = out.K.middleRows(h * d.dk, d.dk);
        r.V = out.V.middleRows(h * d.dv, d.dv);
        auto t = Clock::now();
        if (cfg.score == Score::Additive) {
            additiveScoresCol(in.additive, r.Q, r.K, r.scores);
        } else {
            r.scores.noalias() = r.K.transpose() * r.Q;
            if (out.scale != 1.0f) r.scores *= out.scale;
        }
        ph.scores = msSince(t);
        t = Clock::now();
        r.masked = masked;
        softmaxCols(r.scores, masked, anyMask, in.mask.fill, r.weights, r.fullyMaskedQueries);
        ph.softmax = msSince(t);
        t = Clock::now();
        r.output.noalias() = r.V * r.weights;
        out.concat.middleRows(h * d.dv, d.dv) = r.output;
        ph.pv = msSince(t);
    }
    addHeadTimings(perHead, out.timings);
    t0 = Clock::now();
    if (in.Wo.size() > 0) {
        out.output.noalias() = in.Wo * out.concat;
        if (in.bo.size()) out.output.colwise() += in.bo;
    } else {
        out.output = out.concat;
    }
    out.timings.output = msSince(t0);
}

// Eigen's products start an OpenMP team once a product has more than ~100k multiply-adds, which the
// window's small examples pass (64×64·64×64); like the head loop above, such teams cost more than they
// save and their spinning threads slow the render thread. Small problems therefore run on one thread.
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

} // namespace

void computeEigen(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    const SmallProblemOneThread threads(d);
    out.layout = cfg.layout;
    out.scale = effectiveScale(cfg, d);
    out.heads.resize(d.H);
    out.timings = {};
    if (cfg.layout == Layout::Row)
        computeRow(in, cfg, d, out);
    else
        computeColumn(in, cfg, d, out);
}

} // namespace attn::cpu
