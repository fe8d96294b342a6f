// The attention computation: validation, the reference and fast CPU paths, and backend dispatch.
#pragma once

#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace attn {

// Problem sizes derived from a validated input (Row-layout meaning, whatever the layout).
struct Dims {
    int T = 0;   // queries
    int S = 0;   // keys / values
    int M = 0;   // d_model (0 in Direct mode)
    int H = 1;   // heads
    int Hkv = 0; // key/value heads, dividing H (H / Hkv query heads share each); validate() sets it, 0 = H
    int dq = 0;  // per-head query width
    int dk = 0;  // per-head key width
    int dv = 0;  // per-head value width
    int O = 0;   // output width (H·d_v when there is no Wo)
    int A = 0;   // additive hidden width (0 unless Score::Additive)

    // H_kv (H when Hkv is 0), the query heads per KV head, and the KV head that query head h reads.
    int kvHeads() const { return Hkv > 0 ? Hkv : H; }
    int group() const { return H / kvHeads(); }
    int kvHead(int h) const { return h / group(); }
};

// Checks every field needed by cfg.mode / cfg.score against the others and returns the sizes.
// Errors (InvalidArgument) name the field with expected vs actual, e.g.
//   "Wk: expected 4×3 (d_model × H·d_k), got 4×2"; "heads: 2 does not divide H·d_k = 3";
//   "kv_heads: 4 does not divide heads = 6"; "Wk: expected 4×2 (d_model × H_kv·d_k), got 4×6";
//   "X[1][2]: value is NaN"; "mask.valid_lens: expected 1 or T = 4 values, got 3".
Expected<Dims> validate(const AttentionInput& in, const AttentionConfig& cfg);

// Bytes of the buffers a computation of these sizes allocates (scores, mask, weights, projections, outputs).
std::size_t estimateBytes(const Dims& d);

// Half the physical RAM of this machine: the default memory budget.
std::size_t defaultMemoryBudget();

// Computes attention into `out`, reusing its buffers when the shapes did not change (no allocation on a
// recompute of the same size). On error `out` is left in an unspecified but valid state.
// Incremental (fast CPU path, cfg.incremental): when `out` holds a fast-path result of the same config and
// sizes, compute() compares `in` with the snapshot that result keeps and updates only what the changed cells
// reach (an X row: that token's Q/K/V, its score row and column in every head, the rows' softmax, the
// outputs; a W^Q/W^K/W^V/bias cell: its head; W^O/b^O: the last product); anything else (other sizes, config,
// masks, the additive score, many rows) is a full compute. out.incremental says which it was. Any number of
// edits since that result is handled (a result may be several edits behind).
// Returns InvalidArgument (bad input), ResourceExhausted (over cfg.memoryBudgetBytes),
// Unavailable (cfg.backend == Cuda but CUDA is not built / no device), Internal (a backend failure).
// With Backend::Auto it uses CUDA when built and a device is present, else the CPU (out.backend says which;
// callers say so once, e.g. the command line on stderr).
Status compute(const AttentionInput& in, const AttentionConfig& cfg, AttentionResult& out);

// Convenience: a fresh result.
Expected<AttentionResult> compute(const AttentionInput& in, const AttentionConfig& cfg);

// Copies `from` into `to` (reusing to's buffers where the shapes match), with the snapshot of the inputs the
// fast CPU path keeps: the next incremental compute into `to` updates it as it would have updated `from`. (A
// plain copy drops the snapshot, so that two results never share one: its next compute is a full one.)
void copyResult(const AttentionResult& from, AttentionResult& to);

// Backends ---------------------------------------------------------------------------------------------

// Backends built into this binary and usable now (Cpu always; Cuda when built and a device is present).
std::vector<Backend> availableBackends();
// True when this binary was built with the CUDA backend (a device may still be absent).
bool cudaBuilt();
// A one-line description of the backend, e.g. "CPU (Eigen 3.4, 2 threads)" or "CUDA: NVIDIA H100 (sm_90)".
std::string backendDescription(Backend b);

namespace cpu {
// The two CPU paths, called by compute() after validation; `d` must come from validate(in, cfg).
void computeReference(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out);
// The fast path returns InvalidArgument when a value overflowed float32 (checked inside its own passes).
Status computeEigen(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out);
} // namespace cpu

// Shared helpers (used by every path so that they agree exactly on these definitions) ------------------

// The scale applied to q·k: cfg.scale if set, else 1/√d_k for ScaledDot, 1 for Dot and Additive.
float effectiveScale(const AttentionConfig& cfg, const Dims& d);

// Fills `masked` (T×S in Row orientation: query i, key j) from the spec. Layout-independent: callers
// transpose for Column. `custom` must be given in Row orientation here.
void buildMaskRowMajor(const MaskSpec& m, const MaskMatrix& customRowOriented, int T, int S, MaskMatrix& masked);

// The softmax of one line of scores (one query over its keys), as the reference path and the lessons compute
// it: the maximum subtracted, exponentials and their sum in double. scores: n values; masked: n flags (1: the
// entry takes `fill` instead of its score) or empty for none; weights: n outputs. Returns false, with every
// weight 0, when all n entries are masked with an infinite fill (a query with no key has no distribution).
bool softmaxLine(std::span<const double> scores, std::span<const std::uint8_t> masked, float fill,
                 std::span<double> weights);

} // namespace attn
