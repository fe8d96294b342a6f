// Internal to the fast CPU path (attention_eigen.cpp, incremental.cpp): the pieces the full compute and the
// incremental update share, so that both produce the same numbers from the same code.
//
// One computation, two layouts: a Row session's row-major T×S matrix and a Column session's row-major S×T
// matrix hold the same numbers at transposed places, i.e. the Column buffer IS a column-major T×S matrix.
// The fast path therefore works on "row-semantics" views (tokens are rows, query i / key j) mapped over the
// session's buffers with the storage order as a template argument: RowMajor for Row, ColMajor for Column.
#pragma once

#include "attnscope/attention.h"
#include "attnscope/result_change.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// Everything the next compute into the same result needs to find and apply an edit (see types.h).
struct IncrementalState {
    bool valid = false;
    AttentionInput in;       // snapshot of the input the result was computed from
    AttentionConfig cfg;     // and of the config
    Dims d;
    // Per head h and query i (index h·T + i): weights = exp(score − rowMax) / rowSum over the row's
    // scores (masked ones taking the fill). rowMax is the row's maximum after a full compute and at least
    // every live score after an incremental one. rowSum = 0 marks a fully masked row (all weights 0).
    std::vector<float> rowMax, rowSum;
    ResultChange change;  // what the last compute changed (attn::resultChange)
};

// A fresh AttentionResult serial (ResultChange::serial) for each compute on the fast path.
std::uint64_t nextResultSerial();

namespace cpu::fast {

using Clock = std::chrono::steady_clock;
inline double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Row-semantics views (see the top of this file): a session buffer m read as a rows×cols matrix of storage
// order Order (m itself is rows×cols for Row, cols×rows for Column).
template <int Order>
using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Order>;
template <int Order>
using View = Eigen::Map<Mat<Order>>;
template <int Order>
using CView = Eigen::Map<const Mat<Order>>;
template <int Order>
View<Order> rview(Matrix& m)
{
    if constexpr (Order == Eigen::RowMajor) return View<Order>(m.data(), m.rows(), m.cols());
    else return View<Order>(m.data(), m.cols(), m.rows());
}
template <int Order>
CView<Order> cview(const Matrix& m)
{
    if constexpr (Order == Eigen::RowMajor) return CView<Order>(m.data(), m.rows(), m.cols());
    else return CView<Order>(m.data(), m.cols(), m.rows());
}

// True when every one of the n values is finite. One vectorised pass: x·0 is 0 for a finite x and NaN
// for ±inf or NaN, and a sum with a NaN in it is NaN. (Eigen 3.4's allFinite() compares element by
// element, which it does not vectorise: 3% of a bench run by `perf`.)
inline bool allFinite(const float* p, std::ptrdiff_t n)
{
    return (Eigen::Map<const Eigen::ArrayXf>(p, n) * 0.0f).sum() == 0.0f;
}
inline bool allFinite(const Matrix& m) { return allFinite(m.data(), m.size()); }

// Masks from their compact description, in row semantics (query i, key j). Key j of query i is masked
// when j ≥ limit(i) (causal, valid lengths) or flag(i, j) (key padding, custom).
struct MaskDesc {
    int S = 0;
    bool causal = false;
    const std::uint8_t* keyPadding = nullptr;  // S flags or null
    const int* validLens = nullptr;            // 1 or T values, or null
    int validCount = 0;
    const std::uint8_t* custom = nullptr;      // custom(i, j) = custom[i·customRowStride + j·customColStride]
    std::ptrdiff_t customRowStride = 0, customColStride = 0;
    float fill = 0;
    bool negInfFill = true;

    bool hasFlags() const { return keyPadding || custom; }
    int limit(int i) const
    {
        int l = S;
        if (causal && i + 1 < l) l = i + 1;
        if (validLens) {
            const int v = validCount == 1 ? validLens[0] : validLens[i];
            if (v < l) l = v < 0 ? 0 : v;
        }
        return l;
    }
    bool flag(int i, int j) const
    {
        return (keyPadding && keyPadding[j]) || (custom && custom[i * customRowStride + j * customColStride]);
    }
    bool masked(int i, int j) const { return j >= limit(i) || flag(i, j); }
};

MaskDesc describeMask(const MaskSpec& m, Layout layout, int T, int S);

// Softmax of query i's row of scores `s` (S values, scaled) into `w`, masked keys taking the fill; writes
// the row's mask flags into `mk` when it is not null. rowMax/rowSum as in IncrementalState.
// Returns false (and leaves w unspecified) when a score is not finite (float32 overflow of q·k).
bool softmaxRow(const MaskDesc& md, int i, const float* s, float* w, std::uint8_t* mk, float& rowMax,
                float& rowSum);

// The keys whose scores the full compute computes for queries [i0, i1): [0, keyEnd).
int keyEnd(const AttentionConfig& cfg, const MaskSpec& m, int S, int i1);
// True when the scores of causally masked keys are left at 0 rather than computed.
bool skipsCausal(const AttentionConfig& cfg, const MaskSpec& m);

// Computes heads `heads` (all rows) of out from out.Q/K/V, which must be filled: scores, mask, softmax,
// PV, the head's output and its concat block, per-row stats into st. Runs on a thread team when worth it.
// Returns an error naming the first overflowed score. Adds phase times to out.timings.
Status computeHeads(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, const std::vector<int>& heads,
                    bool writeMask, AttentionResult& out, IncrementalState& st);

// concat·Wo + bo (or a copy of concat) into out.output.
void outputProjection(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out);

// "head 2 scores[3][4] overflowed float32 ..." for the first non-finite entry of a head's scores.
Status scoresOverflow(const AttentionResult& out, int h);

// Incremental update (incremental.cpp). Returns true when it served the call (out then holds the result);
// false when the change is beyond it and the caller must compute everything.
bool tryIncremental(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out,
                    Status& status);

// Snapshot of in/cfg/d for the next incremental call (full copy).
void snapshot(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, IncrementalState& st);

} // namespace cpu::fast
} // namespace attn
