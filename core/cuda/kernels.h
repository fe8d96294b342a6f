// Launchers of the backend's own kernels (attention.cu). Plain pointers to device memory, no Eigen, so
// the .cu file compiles without the core headers. Each launcher enqueues on `stream` and returns the
// launch error (cudaSuccess when the launch was accepted; execution errors surface at the next sync).
//
// Storage convention shared with backend.cpp: a logical matrix (Row-layout meaning, see types.h) is stored
// in the session's layout order: row-major for Layout::Row, column-major for Layout::Column (which is the
// Column layout's own transposed matrix, row-major). `columnMajor` below selects the second.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace attn::cuda {

// C (tokens × features, `tokens`×`features`) += bias per feature.
cudaError_t launchAddBias(float* c, const float* bias, int tokens, int features, bool columnMajor, cudaStream_t stream);

// Masked, stable softmax over the keys of every query, for H heads of T×S scores stored one head after
// another (head stride T·S). Row-major storage (query i, key j at i·S + j): softmax along rows.
// Column-major (at j·T + i): softmax down columns. `mask` (may be null = nothing masked) has the same
// storage as one head, 1 = masked; masked entries take `fill`. When fill is -inf and every key of a query
// is masked, that query's weights are all 0 (the rule of attention_ref.cpp). firstBad (null: no check): the smallest
// stored index (head·T·S + the cell's index in its head) of a non-finite score is atomicMin'd into it.
cudaError_t launchMaskedSoftmax(const float* scores, const std::uint8_t* mask, float fill, float* weights, int H,
                                int T, int S, bool columnMajor, unsigned long long* firstBad, cudaStream_t stream);

// Additive (Bahdanau) scores: scores_h(i, j) = Σ_a wv[a]·tanh(qa_h(i, a) + ka_g(j, a)) for H heads, where
// g = h / group is the KV head of query head h (group = H / H_kv; 1 without grouped-query attention).
// qa: H blocks of T×A, ka: H / group blocks of S×A, scores: H blocks of T×S, all in the given storage order.
cudaError_t launchAdditiveScores(const float* qa, const float* ka, const float* wv, float* scores, int H, int group,
                                 int T, int S, int A, bool columnMajor, cudaStream_t stream);

// *first = the smallest ordering key of a non-finite element of x[0, n) (±inf or NaN), left as it was (~0 when
// the caller cleared it to 0xff bytes) when there is none. blockCols = 0: the key is the element's index;
// blockCols > 0: x is a row-major `rows` × `cols` concat of heads blockCols wide, and the key is
// head·rows·blockCols + row·blockCols + column within the head (the order of the heads' own outputs).
cudaError_t launchFirstNonFinite(const float* x, long long n, int cols, int rows, int blockCols, unsigned long long* first,
                                 cudaStream_t stream);

// The max-pooled overview (attn::AttentionMaps::pooled's blocks and NaN rule) of the rect r0, c0, rows × cols
// (queries × keys) of one T×S map in the given storage order, into `out` (outRows × outCols, row-major, on the
// device). 1 ≤ outRows ≤ rows and 1 ≤ outCols ≤ cols.
cudaError_t launchPoolMax(const float* map, int T, int S, bool columnMajor, int r0, int c0, int rows, int cols,
                          int outRows, int outCols, float* out, cudaStream_t stream);

// The most parts launchMapRanges splits a map into: the caller's part buffers hold count × kRangeMaxParts values.
constexpr int kRangeMaxParts = 1024;

// Per map m of `count` maps of `cells` floats each (one after another from `maps`, in their storage order): lo[m] and
// hi[m] = the min and max of its finite cells left open by `mask` (`cells` flags in the same order, 1 = masked;
// null = none), -0 taken below +0, and bad[m] = how many open cells are ±inf or NaN; (+inf, -inf) when there is
// none. partLo/partHi/partBad: scratch for count × kRangeMaxParts values. Two kernels (slices, then their fold);
// only lo, hi and bad (a few values a map) need come back.
cudaError_t launchMapRanges(const float* maps, const std::uint8_t* mask, int count, long long cells, float* partLo,
                            float* partHi, unsigned long long* partBad, float* lo, float* hi, unsigned long long* bad,
                            cudaStream_t stream);

// The mask of attn::buildMaskRowMajor for T queries × S keys, built on the device in the given storage order (see
// buildMaskKernel in attention_kernels.cuh): keyPadding (S flags), validLens (T values) and custom (T·S flags in
// the storage order) may each be null; keyOpen (T ints, cleared by the caller) gets 1 for every query with an
// unmasked key.
cudaError_t launchBuildMask(std::uint8_t* mask, int T, int S, bool columnMajor, bool causal, const std::uint8_t* keyPadding,
                            const int* validLens, const std::uint8_t* custom, int* keyOpen, cudaStream_t stream);

// Checks that this binary holds kernels the current device can run (cudaErrorNoKernelImageForDevice when
// it was built for other architectures).
cudaError_t probeKernelImage();

} // namespace attn::cuda
