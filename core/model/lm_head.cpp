// The LM head over many positions: see lm_head.h. Gemma 3's unembedding is its tied 262 144 × 640 quantized
// embedding, two thirds of a forward's multiply-adds at 128 tokens; made in blocks of 64 positions, each a whole
// product, it was dequantized again for every 64 positions (twice at 128 tokens, 128 times at 8192), and each
// block's 64 × 262 144 logits (64 MB) went through memory three times (the product, the maximum, the sum).
// Here the vocabulary is split into tasks of columns, each dequantizing its panel once and multiplying it with
// every position, the logits reduced while they are in cache.
#include "lm_head.h"

#include "decoder_family.h"  // finalSoftcap
#include "teams.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace attn::detail {

namespace {

// Up to this many positions (a token appended, the last position's logits), one product over the whole vocabulary:
// the matrix-vector path of a few rows (weight_matrix.cpp's kVectorRows) streams each quantized row once for
// all of them, with no float32 panel, and their n×V logits are a few MB at most.
constexpr Eigen::Index kWholeRows = 8;
// Positions per product inside a task: 128 × 512 logits (256 KB) and 128 rows of x (320 KB for Gemma 3) stay in
// a core's L2 while they are reduced, and the panel's packing by Eigen's GEMM is amortised over 128 rows.
constexpr Eigen::Index kLmHeadRows = 128;
// Each task keeps a maximum and a sum per position of a block (two floats): at most 2²² of each (32 MB in all),
// so that Gemma 3's 512 tasks take 8192 positions per read of the head; a longer text reads it once per block.
constexpr Eigen::Index kLmHeadPartials = Eigen::Index(1) << 22;
// Whatever the vocabulary, at least this many positions per read of the head.
constexpr Eigen::Index kMinPositions = 1024;

// How foldLogits splits n positions over a vocabulary of V: one product over the whole vocabulary (up to
// wholeRows positions), or tasks `width` columns wide over blocks of `block` positions, each task keeping
// `perPosition` floats a position (kLmHeadPartials in all). lmHeadTop sizes its buffer from the same plan.
struct Plan {
    bool whole = false;
    Eigen::Index width = 0, tasks = 1, block = 0;
};

Plan planOf(Eigen::Index n, Eigen::Index V, const LmHeadSplit& split, Eigen::Index perPosition)
{
    Plan p;
    p.whole = n <= (split.wholeRows >= 0 ? split.wholeRows : kWholeRows);
    if (p.whole) {
        p.width = V;
        p.block = n;
        return p;
    }
    p.width = split.columns > 0 ? split.columns : taskCols(V);
    p.tasks = (V + p.width - 1) / p.width;
    p.block = split.positions > 0 ? split.positions
                                  : std::max(kMinPositions, kLmHeadPartials / (p.tasks * std::max<Eigen::Index>(perPosition, 1)));
    return p;
}

// The loop both functions share. Positions in blocks; for each block, every task's logits (columns c0 … of E,
// rows r0 … of the block, soft-capped) reduced to the task's maximum and Σ exp(logit − maximum) per position, then
// given to visit(t, c0, p0, r0, logits) for what the caller keeps of them; then done(p0, np, top, total) with each
// position's largest logit and Σ exp(logit − top) over the whole vocabulary. `perPosition`: the floats a caller
// keeps per task and position (sizes the blocks). Up to wholeRows positions: one task, one product.
template <class Visit, class Done>
void foldLogits(const DecoderConfig& c, const WeightMatrix& E, const MatrixCRef& h, const LmHeadSplit& split, Eigen::Index perPosition,
                const Visit& visit, const Done& done)
{
    const Eigen::Index n = h.rows(), V = E.outputs(), M = E.inputs();
    assert(h.cols() == M);
    if (n == 0) return;
    Matrix maxes, sums;  // tasks × positions of a block: a task's largest logit of a position, Σ exp(logit − largest)
    auto reduce = [&](Eigen::Index t, Eigen::Index c0, Eigen::Index p0, Eigen::Index r0, const Matrix& logits) {
        for (Eigen::Index i = 0; i < logits.rows(); ++i) {
            const auto row = logits.row(i).array();
            const float mx = row.maxCoeff();
            maxes(t, r0 + i) = mx;
            sums(t, r0 + i) = (row - mx).exp().sum();
        }
        visit(t, c0, p0, r0, logits);
    };
    // The tasks' sums rescaled to the largest maximum and added in task order, in double (as logProbability's log
    // of the sum); exp in float, vectorised, each term ≤ 1. Task order: the same bits on any number of threads.
    auto combine = [&](Eigen::Index p0, Eigen::Index np) {
        const Eigen::VectorXf top = maxes.colwise().maxCoeff().transpose();
        Eigen::VectorXd total = Eigen::VectorXd::Zero(np);
        for (Eigen::Index t = 0; t < maxes.rows(); ++t)
            total += (sums.row(t).array() * (maxes.row(t).array() - top.transpose().array()).exp()).cast<double>().matrix().transpose();
        done(p0, np, top, total);
    };
    const Plan plan = planOf(n, V, split, perPosition);
    if (plan.whole) {
        Matrix x = h, logits;
        attn::product(x, E, logits);
        finalSoftcap(c, logits);
        maxes.resize(1, n);
        sums.resize(1, n);
        reduce(0, 0, 0, 0, logits);
        combine(0, n);
        return;
    }
    const Eigen::Index width = plan.width, tasks = plan.tasks, block = plan.block;
    const Eigen::Index rowBlock = split.rows > 0 ? split.rows : kLmHeadRows;
    for (Eigen::Index p0 = 0; p0 < n; p0 += block) {
        const Eigen::Index np = std::min(block, n - p0);
        maxes.resize(tasks, np);
        sums.resize(tasks, np);
        forTasks(tasks, worthTeam(np, M, V), [&](Eigen::Index t) {
            const Eigen::Index c0 = t * width, cols = std::min(width, V - c0);
            thread_local Matrix buffer, logits;
            const MatrixCMap panel = E.columnPanel(c0, cols, buffer);
            for (Eigen::Index r0 = 0; r0 < np; r0 += rowBlock) {
                logits.noalias() = h.middleRows(p0 + r0, std::min(rowBlock, np - r0)) * panel.transpose();
                finalSoftcap(c, logits);
                reduce(t, c0, p0, r0, logits);
            }
        });
        combine(p0, np);
    }
}

} // namespace

void lmHeadLogProbabilities(const DecoderConfig& c, const WeightMatrix& E, const MatrixCRef& h, const std::vector<int>& targets,
                            float* logProb, Eigen::Index keepRow, Vector* kept, const LmHeadSplit& split)
{
    assert(targets.size() == static_cast<std::size_t>(h.rows()));
    assert(kept == nullptr || (keepRow >= 0 && keepRow < h.rows()));
    if (kept != nullptr) kept->resize(E.outputs());
    Eigen::VectorXf target;  // a position's target logit, from the one task that holds it
    auto visit = [&](Eigen::Index, Eigen::Index c0, Eigen::Index p0, Eigen::Index r0, const Matrix& logits) {
        const Eigen::Index cols = logits.cols();
        for (Eigen::Index i = 0; i < logits.rows(); ++i) {
            const Eigen::Index pos = p0 + r0 + i;
            const int id = targets[static_cast<std::size_t>(pos)];
            if (id >= c0 && id < c0 + cols) target[r0 + i] = logits(i, id - c0);
            if (kept != nullptr && pos == keepRow) kept->segment(c0, cols) = logits.row(i).transpose();
        }
    };
    auto done = [&](Eigen::Index p0, Eigen::Index np, const Eigen::VectorXf& top, const Eigen::VectorXd& total) {
        for (Eigen::Index r = 0; r < np; ++r) {
            const int id = targets[static_cast<std::size_t>(p0 + r)];
            logProb[p0 + r] = id < 0 ? std::numeric_limits<float>::quiet_NaN()
                                     : static_cast<float>(double(target[r]) - double(top[r]) - std::log(total[r]));
            target[r] = -std::numeric_limits<float>::infinity();  // ready for the next block
        }
    };
    target.setConstant(h.rows(), -std::numeric_limits<float>::infinity());
    foldLogits(c, E, h, split, 1, visit, done);
}

void lmHeadTop(const DecoderConfig& c, const WeightMatrix& E, const MatrixCRef& h, int k, std::vector<std::vector<TopLogit>>& top,
               const LmHeadSplit& split)
{
    const Eigen::Index n = h.rows(), V = E.outputs();
    top.assign(static_cast<std::size_t>(n), {});
    if (k < 1 || V == 0) return;
    const Eigen::Index kk = std::min<Eigen::Index>(k, V);
    // One pass over the logits per task and a vectorised float sum (foldLogits): topTokens' sort of every id and
    // its double-precision exponentials had cost the lens more than its products (60 % of it, at V = 49 152).
    // Each task's kk largest (logit, id) of each position of a block, best first; fewer columns than kk leave
    // (−∞, −1) entries. Indexed (row × tasks + task) × kk, filled per block.
    std::vector<std::pair<float, int>> best;
    Eigen::Index tasksOfBlock = 0;
    auto better = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    auto visit = [&](Eigen::Index t, Eigen::Index c0, Eigen::Index, Eigen::Index r0, const Matrix& logits) {
        for (Eigen::Index i = 0; i < logits.rows(); ++i) {
            std::pair<float, int>* out = best.data() + ((r0 + i) * tasksOfBlock + t) * kk;
            Eigen::Index have = 0;
            for (Eigen::Index j = 0; j < logits.cols(); ++j) {
                const float v = logits(i, j);
                if (have == kk && v <= out[kk - 1].first) continue;
                // After every kept value ≥ v: an equal value of a higher id ranks below the one already kept.
                Eigen::Index at = have < kk ? have : kk - 1;
                while (at > 0 && out[at - 1].first < v) {
                    out[at] = out[at - 1];
                    --at;
                }
                out[at] = {v, static_cast<int>(c0 + j)};
                if (have < kk) ++have;
            }
            for (; have < kk; ++have) out[have] = {-std::numeric_limits<float>::infinity(), -1};
        }
    };
    auto done = [&](Eigen::Index p0, Eigen::Index np, const Eigen::VectorXf& mx, const Eigen::VectorXd& total) {
#pragma omp parallel for schedule(static) if (np * tasksOfBlock * kk >= 65536)
        for (Eigen::Index r = 0; r < np; ++r) {
            const auto first = best.begin() + r * tasksOfBlock * kk, last = first + tasksOfBlock * kk;
            std::partial_sort(first, first + kk, last, better);
            std::vector<TopLogit>& out = top[static_cast<std::size_t>(p0 + r)];
            for (auto it = first; it != first + kk; ++it)
                if (it->second >= 0)
                    out.push_back({it->second, it->first, static_cast<float>(std::exp(double(it->first) - double(mx[r])) / total[r])});
        }
    };
    // The buffer holds a block of foldLogits' plan for the same sizes.
    const Plan plan = planOf(n, V, split, 2 * kk);
    tasksOfBlock = plan.tasks;
    best.resize(static_cast<std::size_t>(std::min(plan.block, n) * tasksOfBlock * kk));
    foldLogits(c, E, h, split, 2 * kk, visit, done);
}

} // namespace attn::detail
