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

} // namespace

void lmHeadLogProbabilities(const DecoderConfig& c, const WeightMatrix& E, const MatrixCRef& h, const std::vector<int>& targets,
                            float* logProb, Eigen::Index keepRow, Vector* kept, const LmHeadSplit& split)
{
    const Eigen::Index n = h.rows(), V = E.outputs(), M = E.inputs();
    assert(h.cols() == M && targets.size() == static_cast<std::size_t>(n));
    assert(kept == nullptr || (keepRow >= 0 && keepRow < n));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (n == 0) return;
    if (n <= (split.wholeRows >= 0 ? split.wholeRows : kWholeRows)) {
        Matrix x = h, logits;
        attn::product(x, E, logits);
        finalSoftcap(c, logits);
        for (Eigen::Index r = 0; r < n; ++r) {
            const int id = targets[static_cast<std::size_t>(r)];
            logProb[r] = id < 0 ? nan : logProbability(logits.row(r).transpose(), id);
        }
        if (kept != nullptr) *kept = logits.row(keepRow).transpose();
        return;
    }
    const Eigen::Index width = split.columns > 0 ? split.columns : taskCols(V), tasks = (V + width - 1) / width;
    const Eigen::Index rowBlock = split.rows > 0 ? split.rows : kLmHeadRows;
    const Eigen::Index block = split.positions > 0 ? split.positions : std::max(kMinPositions, kLmHeadPartials / tasks);
    if (kept != nullptr) kept->resize(V);
    Matrix maxes, sums;  // tasks × positions: each task's largest logit of a position, and Σ exp(logit − largest)
    Eigen::VectorXf target;  // a position's target logit, from the one task that holds it
    for (Eigen::Index p0 = 0; p0 < n; p0 += block) {
        const Eigen::Index np = std::min(block, n - p0);
        maxes.resize(tasks, np);
        sums.resize(tasks, np);
        target.setConstant(np, -std::numeric_limits<float>::infinity());
        forTasks(tasks, worthTeam(np, M, V), [&](Eigen::Index t) {
            const Eigen::Index c0 = t * width, cols = std::min(width, V - c0);
            thread_local Matrix buffer, logits;
            const MatrixCMap panel = E.columnPanel(c0, cols, buffer);
            for (Eigen::Index r0 = 0; r0 < np; r0 += rowBlock) {
                const Eigen::Index rows = std::min(rowBlock, np - r0);
                logits.noalias() = h.middleRows(p0 + r0, rows) * panel.transpose();
                finalSoftcap(c, logits);
                for (Eigen::Index i = 0; i < rows; ++i) {
                    const Eigen::Index r = r0 + i, pos = p0 + r;
                    const auto row = logits.row(i).array();
                    const float mx = row.maxCoeff();
                    maxes(t, r) = mx;
                    sums(t, r) = (row - mx).exp().sum();
                    const int id = targets[static_cast<std::size_t>(pos)];
                    if (id >= c0 && id < c0 + cols) target[r] = logits(i, id - c0);
                    if (kept != nullptr && pos == keepRow) kept->segment(c0, cols) = logits.row(i).transpose();
                }
            }
        });
        // The tasks' sums rescaled to the largest maximum and added in task order, in double (as logProbability's
        // log of the sum); exp in float, vectorised, each term ≤ 1.
        const Eigen::RowVectorXf top = maxes.colwise().maxCoeff();
        Eigen::RowVectorXd total = Eigen::RowVectorXd::Zero(np);
        for (Eigen::Index t = 0; t < tasks; ++t)
            total += (sums.row(t).array() * (maxes.row(t).array() - top.array()).exp()).cast<double>().matrix();
        for (Eigen::Index r = 0; r < np; ++r) {
            const int id = targets[static_cast<std::size_t>(p0 + r)];
            logProb[p0 + r] = id < 0 ? nan : static_cast<float>(double(target[r]) - double(top[r]) - std::log(total[r]));
        }
    }
}

} // namespace attn::detail
