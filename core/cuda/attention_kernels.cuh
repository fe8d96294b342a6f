// The backend's kernels (device code) and their launch shapes, included by attention.cu, which launches
// them, and by tests/parity/emulated, which runs this same source on the CPU (a fiber per CUDA thread) so CI
// without a GPU still checks their indexing and reductions. Only CUDA built-ins are used (threadIdx,
// __shared__, __syncthreads, __shfl_xor_sync, atomicMin, expf, tanhf, fmaxf, fabsf, min) so the emulator can
// provide them.
//
// Determinism: every reduction below runs in a fixed order (a fixed butterfly across a warp, a fixed loop
// over shared memory), with no atomics, so the same input gives bitwise the same output run after run.
#pragma once

#include <vector_types.h>

#include <cmath>
#include <cstdint>

namespace attn::cuda::detail {


constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kWarpSize = 32;
// Row softmax: one warp per query row, 4 warps (128 threads) per block, a common occupancy sweet spot for
// memory-bound row kernels; rows are independent so the block size only affects scheduling.
constexpr int kRowsPerBlock = 4;
// Column softmax: a tile of 32 queries (one warp-wide, so loads along the contiguous query index coalesce)
// × 8 slices of the keys, merged through shared memory.
constexpr int kColQueries = 32;
constexpr int kColSlices = 8;
// Additive scores: 16×16 (query, key) tiles, hidden width loaded 32 at a time into shared memory.
constexpr int kAddTile = 16;
constexpr int kAddChunk = 32;
// Grid dimensions y and z are limited to 65535; more heads or query tiles are looped over in the kernel.
constexpr int kMaxGridYZ = 65535;

// Online softmax state for a set of values: m = their maximum, l = Σ exp(v − m). Masked keys with fill
// -inf are skipped (they contribute exp(-inf) = 0); while nothing has been seen, m = -inf and l = 0.
__device__ __forceinline__ void pushValue(float& m, float& l, float x)
{
    if (x == -INFINITY) return;
    if (x > m) {
        l = l * expf(m - x) + 1.0f;  // rescale the old sum to the new maximum (expf(-inf) = 0 at the start)
        m = x;
    } else {
        l += expf(x - m);
    }
}

// Merges another state into (m, l). Commutative bit for bit (IEEE + and * are), so every lane of a
// butterfly reduction ends with the same value.
__device__ __forceinline__ void mergeState(float& m, float& l, float m2, float l2)
{
    const float mx = fmaxf(m, m2);
    if (mx == -INFINITY) return;  // both empty
    l = l * expf(m - mx) + l2 * expf(m2 - mx);
    m = mx;
}

// The weight of a value x given the final state; a query whose every key was masked with fill -inf
// (m = -inf) gets 0 everywhere, as attention_ref.cpp does.
__device__ __forceinline__ float weightOf(float x, float m, float l)
{
    return m == -INFINITY ? 0.0f : expf(x - m) / l;
}

__global__ void addBiasKernel(float* c, const float* bias, long long n, int tokens, int features, bool columnMajor)
{
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += step) {
        const int f = columnMajor ? static_cast<int>(idx / tokens) : static_cast<int>(idx % features);
        c[idx] += bias[f];
    }
}

// The finiteness check of the scores, folded into the softmax that reads them anyway (firstBad may be null): the
// stored index of the first non-finite score (every cell, masked or not, as firstNonFiniteKernel checks it) is
// atomicMin'd into *firstBad, once per thread that saw one. Order-independent, like the rest of the kernel.
__device__ __forceinline__ void noteNonFinite(unsigned long long& mine, float x, long long idx)
{
    if (!(fabsf(x) <= 3.402823466e38f) && static_cast<unsigned long long>(idx) < mine) mine = static_cast<unsigned long long>(idx);
}

// Row-major scores: rows = H·T rows of S, contiguous. One warp per row: one pass for (max, sum) and the check,
// one pass writing the weights.
__global__ void softmaxRowsKernel(const float* scores, const std::uint8_t* mask, float fill, float* weights,
                                  long long rows, int T, int S, unsigned long long* firstBad)
{
    const long long row = static_cast<long long>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
    if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full-warp
    const int lane = threadIdx.x % kWarpSize;
    const float* in = scores + row * S;
    float* out = weights + row * S;
    const std::uint8_t* mk = mask ? mask + (row % T) * static_cast<long long>(S) : nullptr;

    float m = -INFINITY, l = 0.0f;
    unsigned long long bad = ~0ull;
    for (int j = lane; j < S; j += kWarpSize) {
        const float x = in[j];
        if (firstBad) noteNonFinite(bad, x, row * S + j);
        pushValue(m, l, (mk && mk[j]) ? fill : x);
    }
    if (bad != ~0ull) atomicMin(firstBad, bad);
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        const float m2 = __shfl_xor_sync(kFullWarp, m, offset);
        const float l2 = __shfl_xor_sync(kFullWarp, l, offset);
        mergeState(m, l, m2, l2);
    }
    for (int j = lane; j < S; j += kWarpSize) out[j] = weightOf((mk && mk[j]) ? fill : in[j], m, l);
}

// Column-major scores: per head an S×T row-major block (key j, query i at j·T + i). A block handles 32
// queries; its 8 thread rows each scan every 8th key, then thread row 0 merges the 8 partial states.
__global__ void softmaxColsKernel(const float* scores, const std::uint8_t* mask, float fill, float* weights, int H,
                                  int T, int S, unsigned long long* firstBad)
{
    __shared__ float sm[kColSlices][kColQueries];
    __shared__ float sl[kColSlices][kColQueries];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.x * kColQueries + tx;
    const bool active = i < T;
    for (int h = blockIdx.y; h < H; h += gridDim.y) {
        const float* in = scores + static_cast<long long>(h) * T * S;
        float* out = weights + static_cast<long long>(h) * T * S;
        float m = -INFINITY, l = 0.0f;
        unsigned long long bad = ~0ull;
        if (active)
            for (int j = ty; j < S; j += kColSlices) {
                const long long at = static_cast<long long>(j) * T + i;
                const float x = in[at];
                if (firstBad) noteNonFinite(bad, x, static_cast<long long>(h) * T * S + at);
                pushValue(m, l, (mask && mask[at]) ? fill : x);
            }
        if (bad != ~0ull) atomicMin(firstBad, bad);
        sm[ty][tx] = m;
        sl[ty][tx] = l;
        __syncthreads();
        if (ty == 0) {
            for (int k = 1; k < kColSlices; ++k) mergeState(m, l, sm[k][tx], sl[k][tx]);
            sm[0][tx] = m;
            sl[0][tx] = l;
        }
        __syncthreads();
        m = sm[0][tx];
        l = sl[0][tx];
        if (active)
            for (int j = ty; j < S; j += kColSlices) {
                const long long at = static_cast<long long>(j) * T + i;
                out[at] = weightOf((mask && mask[at]) ? fill : in[at], m, l);
            }
        __syncthreads();  // sm/sl are reused by the next head
    }
}

// Element (r, a) of a rows×A matrix in the given storage order.
__device__ __forceinline__ long long at2(int r, int a, int rows, int A, bool columnMajor)
{
    return columnMajor ? static_cast<long long>(a) * rows + r : static_cast<long long>(r) * A + a;
}

// One 16×16 tile of (query i = tile row, key j = tile column) scores per block. Heads (z) and query tiles
// (y) beyond the grid's 65535 limit are looped over. Query head h reads the keys of KV head h / group.
__global__ void additiveScoresKernel(const float* qa, const float* ka, const float* wv, float* scores, int H, int group,
                                     int T, int S, int A, bool columnMajor)
{
    __shared__ float qs[kAddTile][kAddChunk + 1];  // +1: threads of a warp read different rows, no bank clash
    __shared__ float ks[kAddTile][kAddChunk + 1];
    __shared__ float ws[kAddChunk];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * kAddTile + tx;
    const int j0 = blockIdx.x * kAddTile, j = j0 + tx;
    const int tilesT = (T + kAddTile - 1) / kAddTile;
    for (int h = blockIdx.z; h < H; h += gridDim.z)
        for (int tile = blockIdx.y; tile < tilesT; tile += gridDim.y) {
            const int i0 = tile * kAddTile, i = i0 + ty;
            const float* q = qa + static_cast<long long>(h) * T * A;
            const float* k = ka + static_cast<long long>(h / group) * S * A;
            float acc = 0.0f;
            for (int a0 = 0; a0 < A; a0 += kAddChunk) {
                for (int e = tid; e < kAddTile * kAddChunk; e += kAddTile * kAddTile) {
                    const int r = e / kAddChunk, c = e % kAddChunk, a = a0 + c;
                    qs[r][c] = (i0 + r < T && a < A) ? q[at2(i0 + r, a, T, A, columnMajor)] : 0.0f;
                    ks[r][c] = (j0 + r < S && a < A) ? k[at2(j0 + r, a, S, A, columnMajor)] : 0.0f;
                }
                if (tid < kAddChunk) ws[tid] = a0 + tid < A ? wv[a0 + tid] : 0.0f;
                __syncthreads();
                const int n = min(kAddChunk, A - a0);
                for (int c = 0; c < n; ++c) acc += ws[c] * tanhf(qs[ty][c] + ks[tx][c]);
                __syncthreads();
            }
            if (i < T && j < S) {
                float* out = scores + static_cast<long long>(h) * T * S;
                out[columnMajor ? static_cast<long long>(j) * T + i : static_cast<long long>(i) * S + j] = acc;
            }
        }
}

// ---- Checks and views of a result that stays on the device -----------------------------------------------------

// Largest finite float; |x| ≤ it is false for ±inf and NaN (written so because isfinite is not the same name in
// device and host code).
constexpr float kMaxFinite = 3.402823466e38f;

// The ordering key of element `idx` of a stored buffer for "the first non-finite value": its own index, except in a
// row-major concat (blockCols > 0: `rows` rows of `cols` floats, heads side by side in column blocks of blockCols),
// whose key orders head by head, then row by row within the head's block (HeadResult::output's order), so the
// smallest key names the first head whose output went wrong and its first cell.
__device__ __forceinline__ unsigned long long finiteKey(long long idx, int cols, int rows, int blockCols)
{
    if (blockCols <= 0) return static_cast<unsigned long long>(idx);
    const long long r = idx / cols, c = idx % cols, h = c / blockCols;
    return static_cast<unsigned long long>((h * rows + r) * blockCols + c % blockCols);
}

// *first = min(*first, the key of every non-finite element of x[0, n)). *first starts at ~0 (nothing found).
// Grid-stride; each thread reports its own smallest key once. atomicMin is order-independent, so the result is
// the same whatever order the threads run in.
__global__ void firstNonFiniteKernel(const float* x, long long n, int cols, int rows, int blockCols,
                                     unsigned long long* first)
{
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    unsigned long long mine = ~0ull;
    for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += step)
        if (!(fabsf(x[idx]) <= kMaxFinite)) {
            const unsigned long long k = finiteKey(idx, cols, rows, blockCols);
            if (k < mine) mine = k;
        }
    if (mine != ~0ull) atomicMin(first, mine);
}

// Where block b of `blocks` near-equal blocks of n cells starts: attn::AttentionMaps::blockStart, poolMax's blocks.
__device__ __forceinline__ int poolBlockStart(int n, int blocks, int b)
{
    return static_cast<int>(static_cast<long long>(b) * n / blocks);
}

// The max-pooled overview of the rect (r0, c0, rows, cols) of one T×S map (query i, key j at i·S + j, or at
// j·T + i when column-major) into outRows × outCols (row-major): cell (p, q) is the largest finite value of its
// block, NaN when the block holds none. One thread per cell scans its block query by query, key by key, with
// AttentionMaps::pooled's comparison, so the result is exactly the host's (even which of ±0 wins).
__global__ void poolMaxKernel(const float* map, int T, int S, bool columnMajor, int r0, int c0, int rows, int cols,
                              int outRows, int outCols, float* out)
{
    const long long cells = static_cast<long long>(outRows) * outCols;
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long cell = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; cell < cells; cell += step) {
        const int p = static_cast<int>(cell / outCols), q = static_cast<int>(cell % outCols);
        const int i0 = r0 + poolBlockStart(rows, outRows, p), i1 = r0 + poolBlockStart(rows, outRows, p + 1);
        const int j0 = c0 + poolBlockStart(cols, outCols, q), j1 = c0 + poolBlockStart(cols, outCols, q + 1);
        float d = NAN;
        for (int i = i0; i < i1; ++i)
            for (int j = j0; j < j1; ++j) {
                const float v = map[columnMajor ? static_cast<long long>(j) * T + i : static_cast<long long>(i) * S + j];
                if (fabsf(v) <= kMaxFinite && !(v <= d)) d = v;
            }
        out[cell] = d;
    }
}

// Block size of the range kernels (a power of two: their shared-memory reductions halve it).
constexpr int kRangeThreads = 256;

// The order the ranges' ends are taken in: the float order with -0 below +0, a total order on finite values, so a
// map's min and max (and which zero they are) do not depend on how the cells are split among threads. The host's
// attn::displayRange picks among ±0 by where Eigen's SIMD lanes put them; the two are equal (==) either way.
__device__ __forceinline__ bool rangeBelow(float a, float b)
{
    return a < b || (a == b && copysignf(1.0f, a) < copysignf(1.0f, b));
}

// Folds (lo2, hi2, bad2) into (lo, hi, bad).
__device__ __forceinline__ void mergeRange(float& lo, float& hi, unsigned long long& bad, float lo2, float hi2,
                                           unsigned long long bad2)
{
    if (rangeBelow(lo2, lo)) lo = lo2;
    if (rangeBelow(hi, hi2)) hi = hi2;
    bad += bad2;
}

// attn::displayRange's scan, first half, for `count` maps of `cells` cells each (one after another, as the heads'
// scores or weights lie in the workspace): block (x, m) takes slice x of `parts` contiguous slices of map m and
// writes the min and max of its finite cells that `mask` (one map's cells, 1 = masked; null: none) leaves open,
// and how many open cells are not finite, to part m·parts + x. Empty slices give (+inf, -inf, 0). Maps beyond
// the grid's y are looped over. The block's threads are merged by a fixed tree in shared memory (no atomics).
__global__ void mapRangeKernel(const float* maps, const std::uint8_t* mask, int count, long long cells, int parts,
                               float* partLo, float* partHi, unsigned long long* partBad)
{
    __shared__ float slo[kRangeThreads];
    __shared__ float shi[kRangeThreads];
    __shared__ unsigned long long sbad[kRangeThreads];
    const int t = threadIdx.x;
    const long long per = (cells + parts - 1) / parts;
    const long long c0 = static_cast<long long>(blockIdx.x) * per;
    const long long c1 = c0 + per < cells ? c0 + per : cells;
    for (int m = blockIdx.y; m < count; m += gridDim.y) {
        const float* map = maps + static_cast<long long>(m) * cells;
        float lo = INFINITY, hi = -INFINITY;
        unsigned long long bad = 0;
        for (long long c = c0 + t; c < c1; c += blockDim.x) {
            if (mask && mask[c]) continue;
            const float v = map[c];
            if (!(fabsf(v) <= kMaxFinite)) {
                ++bad;
                continue;
            }
            mergeRange(lo, hi, bad, v, v, 0);
        }
        slo[t] = lo;
        shi[t] = hi;
        sbad[t] = bad;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (t < half) {
                mergeRange(lo, hi, bad, slo[t + half], shi[t + half], sbad[t + half]);
                slo[t] = lo;
                shi[t] = hi;
                sbad[t] = bad;
            }
            __syncthreads();
        }
        if (t == 0) {
            const long long at = static_cast<long long>(m) * parts + blockIdx.x;
            partLo[at] = lo;
            partHi[at] = hi;
            partBad[at] = bad;
        }
        __syncthreads();  // the shared arrays are reused by the next map
    }
}

// The second half: map m's `parts` parts folded in order into lo[m], hi[m], bad[m] (one thread per map).
__global__ void mapRangeMergeKernel(int count, int parts, const float* partLo, const float* partHi,
                                    const unsigned long long* partBad, float* lo, float* hi, unsigned long long* bad)
{
    const int step = gridDim.x * blockDim.x;
    for (int m = blockIdx.x * blockDim.x + threadIdx.x; m < count; m += step) {
        float l = INFINITY, h = -INFINITY;
        unsigned long long b = 0;
        for (int k = 0; k < parts; ++k) {
            const long long at = static_cast<long long>(m) * parts + k;
            mergeRange(l, h, b, partLo[at], partHi[at], partBad[at]);
        }
        lo[m] = l;
        hi[m] = h;
        bad[m] = b;
    }
}

// The mask of attn::buildMaskRowMajor (core/src/mask.cpp) built on the device, in the scores' storage order (query
// i, key j at i·S + j, or at j·T + i when column-major), 1 = masked: key j is masked for query i when causal and
// j > i, when keyPadding[j] (null = none), when j ≥ validLens[i] (null = none; T values), or when custom's cell is
// set (null = none; the caller's custom mask, already in this storage order). keyOpen[i] is set to 1 for every
// query with at least one unmasked key (the caller clears it first); concurrent stores all write the same 1.
__global__ void buildMaskKernel(std::uint8_t* mask, int T, int S, bool columnMajor, bool causal,
                                const std::uint8_t* keyPadding, const int* validLens, const std::uint8_t* custom,
                                int* keyOpen)
{
    const long long n = static_cast<long long>(T) * S;
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += step) {
        const int i = static_cast<int>(columnMajor ? idx % T : idx / S);
        const int j = static_cast<int>(columnMajor ? idx / T : idx % S);
        const bool off = (causal && j > i) || (keyPadding && keyPadding[j]) || (validLens && j >= validLens[i]) ||
                         (custom && custom[idx]);
        mask[idx] = off ? 1 : 0;
        if (!off) keyOpen[i] = 1;
    }
}

// ---- Launch shapes ---------------------------------------------------------------------------------------------
// Grids loop over what does not fit (kernels above are written so), so a cap only changes scheduling; the
// emulator lowers the y/z caps to make those loops run on small problems.

struct LaunchShape {
    dim3 grid;
    dim3 block;
};

inline unsigned blocksFor(long long n, int perBlock, long long cap)
{
    const long long b = (n + perBlock - 1) / perBlock;
    return static_cast<unsigned>(b < cap ? (b > 0 ? b : 1) : cap);
}

// Grid-stride kernels over n elements (the checks, the pooled overview): 256 threads, at most 65535 blocks.
inline LaunchShape gridStrideShape(long long n)
{
    constexpr int kThreads = 256;
    return {dim3(blocksFor(n, kThreads, kMaxGridYZ)), dim3(kThreads)};
}

// The range kernels: parts (contiguous slices) of a map of `cells` cells, about 8192 cells (32 a thread) each and
// at most kRangeMaxParts (kernels.h), so that a map of 67 M cells (n = 8192) runs 1024 blocks of 256 threads.
inline int rangeParts(long long cells, int maxParts)
{
    const long long p = (cells + 8191) / 8192;
    return static_cast<int>(p < 1 ? 1 : p < maxParts ? p : maxParts);
}

inline LaunchShape rangeShape(int count, int parts, int maxGridYZ = kMaxGridYZ)
{
    return {dim3(static_cast<unsigned>(parts), count < maxGridYZ ? count : maxGridYZ), dim3(kRangeThreads)};
}

// Bias add is grid-stride: 65535 blocks of 256 threads saturate any current GPU.
inline LaunchShape addBiasShape(long long n)
{
    constexpr int kThreads = 256;
    return {dim3(blocksFor(n, kThreads, kMaxGridYZ)), dim3(kThreads)};
}

// gridDim.x may go up to 2^31 − 1, far above H·T/4 rows for any problem that fits in memory.
inline LaunchShape softmaxRowsShape(long long rows)
{
    return {dim3(blocksFor(rows, kRowsPerBlock, 0x7fffffffLL)), dim3(kRowsPerBlock * kWarpSize)};
}

inline LaunchShape softmaxColsShape(int H, int T, int maxGridYZ = kMaxGridYZ)
{
    return {dim3(blocksFor(T, kColQueries, 0x7fffffffLL), H < maxGridYZ ? H : maxGridYZ), dim3(kColQueries, kColSlices)};
}

inline LaunchShape additiveShape(int H, int T, int S, int maxGridYZ = kMaxGridYZ)
{
    return {dim3(blocksFor(S, kAddTile, 0x7fffffffLL), blocksFor(T, kAddTile, maxGridYZ), H < maxGridYZ ? H : maxGridYZ),
            dim3(kAddTile, kAddTile)};
}

} // namespace attn::cuda::detail
