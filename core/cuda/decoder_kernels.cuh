// The decoder forward's own kernels (device code; the products are cuBLAS calls in decoder_device.cpp, but for the
// fused attention of a lazy run), each the twin of a CPU function of core (model/blocks.cpp, model/decoder.cpp,
// src/lazy_attention.cpp) named in its comment. Included by decoder.cu, which launches them, and by
// tests/parity/emulated, which runs this same source on the CPU (a fiber per CUDA thread), so CI without a GPU checks
// their indexing and reductions. Only CUDA built-ins the emulator provides are used (threadIdx, blockIdx, blockDim,
// gridDim, __shfl_xor_sync, __shared__, __syncthreads, expf, tanhf, erff, logf, sqrtf, cos, sin).
//
// Every kernel is grid-stride (rows or elements beyond the grid are looped over), so a grid only changes the
// scheduling: the emulator runs them on 2 blocks. Row kernels give each row one warp; a warp's sum or maximum is a
// fixed butterfly of shuffles, with no atomics, so results are bitwise the same from run to run.
//
// Storage: every matrix is row-major (the CPU path's Eigen order): a token's row of M, H·D, … values.
#pragma once

#include <vector_types.h>

#include "decoder_kernels.h"  // causalKeySpan

#include <cmath>
#include <cstdint>

namespace attn::cuda::dec {

constexpr unsigned kDecFullWarp = 0xffffffffu;
constexpr int kDecWarp = 32;
// Row kernels: 4 warps (128 threads) a block, one row a warp; element kernels: 256 threads a block.
constexpr int kDecRowWarps = 4;
constexpr int kDecThreads = 256;

__device__ __forceinline__ float warpSum(float v)
{
    for (int o = kDecWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kDecFullWarp, v, o);
    return v;
}

__device__ __forceinline__ float warpMax(float v)
{
    for (int o = kDecWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kDecFullWarp, v, o));
    return v;
}

// A lane's running log-sum-exp over the values it reads (m: their maximum, l: Σ exp(x − m)), rescaled when the
// maximum grows: one read of each value. A value of −inf adds nothing (and never makes exp(−inf − (−inf))).
__device__ __forceinline__ void lseStep(float x, float& m, float& l)
{
    if (x > m) {
        l = l * expf(m - x) + 1.0f;  // expf(-inf) = 0 before the first value
        m = x;
    } else if (x != -INFINITY) {
        l += expf(x - m);  // (a NaN makes the sum NaN, as the CPU's)
    }
}

// The lanes' running pairs merged into the warp's (every lane gets it): the largest maximum, each sum rescaled to it.
__device__ __forceinline__ void warpLse(float& m, float& l)
{
    const float mw = warpMax(m);
    l = warpSum(m == -INFINITY ? 0.0f : l * expf(m - mw));
    m = mw;
}

__device__ __forceinline__ long long firstElement() { return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long elementStep() { return static_cast<long long>(gridDim.x) * blockDim.x; }
__device__ __forceinline__ long long firstRow() { return static_cast<long long>(blockIdx.x) * kDecRowWarps + threadIdx.x / kDecWarp; }
__device__ __forceinline__ long long rowStep() { return static_cast<long long>(gridDim.x) * kDecRowWarps; }

// runDecoder's embedding loop: x[i] = E[:, ids[i]]·scale (+ positions[pos0 + i]). E is M×V (x·E form, the token's
// embedding a column), positions maxPositions×M or null.
__global__ void embedKernel(const int* ids, const float* E, int V, const float* positions, int pos0, float scale, float* x,
                            int n, int M)
{
    const long long total = static_cast<long long>(n) * M;
    for (long long e = firstElement(); e < total; e += elementStep()) {
        const long long i = e / M, k = e % M;
        float v = E[k * V + ids[i]];
        if (scale != 1.0f) v *= scale;
        if (positions) v += positions[(pos0 + i) * M + k];
        x[e] = v;
    }
}

// normRows / rmsNormRows / layerNormRows (and qkNormRows: a head's D values are a row of width D): every row of
// `in` (rows × width) normed into `out` (which may be `in`), plus `residual` (may be `out`; null = none).
// RMS: x / sqrt(mean(x²) + eps) · γ; LayerNorm: (x − μ) · γ / sqrt(var + eps) + β (β may be null).
__global__ void normRowsKernel(const float* in, const float* residual, const float* gamma, const float* beta, float* out,
                               long long rows, int width, float eps, bool layerNorm)
{
    const int lane = threadIdx.x % kDecWarp;
    const float inv = 1.0f / static_cast<float>(width);
    for (long long r = firstRow(); r < rows; r += rowStep()) {
        const float* x = in + r * width;
        float* y = out + r * width;
        const float* res = residual ? residual + r * width : nullptr;
        if (layerNorm) {
            float s = 0.0f;
            for (int j = lane; j < width; j += kDecWarp) s += x[j];
            const float mean = warpSum(s) * inv;
            float v = 0.0f;
            for (int j = lane; j < width; j += kDecWarp) v += (x[j] - mean) * (x[j] - mean);
            const float rstd = 1.0f / sqrtf(warpSum(v) * inv + eps);
            for (int j = lane; j < width; j += kDecWarp) {
                float o = (x[j] - mean) * (gamma[j] * rstd) + (beta ? beta[j] : 0.0f);
                if (res) o += res[j];
                y[j] = o;
            }
        } else {
            float s = 0.0f;
            for (int j = lane; j < width; j += kDecWarp) s += x[j] * x[j];
            const float rinv = 1.0f / sqrtf(warpSum(s) * inv + eps);
            for (int j = lane; j < width; j += kDecWarp) {
                float o = x[j] * gamma[j] * rinv;
                if (res) o += res[j];
                y[j] = o;
            }
        }
    }
}

// x.rowwise() += bias (rows × width).
__global__ void addBiasRowsKernel(float* x, const float* bias, long long rows, int width)
{
    const long long total = rows * width;
    for (long long e = firstElement(); e < total; e += elementStep()) x[e] += bias[e % width];
}

// out = a + b, element by element (the residual adds; out may be a or b).
__global__ void addKernel(float* out, const float* a, const float* b, long long count)
{
    for (long long e = firstElement(); e < count; e += elementStep()) out[e] = a[e] + b[e];
}

// Columns col0 … col0+width−1 of a rows × stride matrix set to 0 (projectOut: an ablated head's context).
__global__ void zeroColumnsKernel(float* x, long long rows, int stride, int col0, int width)
{
    const long long total = rows * width;
    for (long long e = firstElement(); e < total; e += elementStep()) x[(e / width) * stride + col0 + e % width] = 0.0f;
}

// ropeRows: each head's dimension i paired with i + R/2 (Hugging Face's pairing), i < R/2, rotated by
// position · invFreq[i]; dimensions R… of a head pass through. Rows are positions pos0… (or blocks of `period`).
// The angle is float, its cosine and sine taken in double and rounded, as the CPU does.
__global__ void ropeKernel(float* x, long long rows, int heads, int D, int half, const float* invFreq, int pos0, int period)
{
    const long long total = rows * heads * half;
    for (long long e = firstElement(); e < total; e += elementStep()) {
        const int i = static_cast<int>(e % half);
        const long long rh = e / half;
        const int h = static_cast<int>(rh % heads);
        const long long r = rh / heads;
        const float pos = static_cast<float>(pos0 + (period > 0 ? r % period : r));
        const float angle = pos * invFreq[i];
        const float cs = static_cast<float>(cos(static_cast<double>(angle)));
        const float sn = static_cast<float>(sin(static_cast<double>(angle)));
        float* v = x + r * static_cast<long long>(heads) * D + static_cast<long long>(h) * D;
        const float a = v[i], b = v[i + half];
        v[i] = a * cs - b * sn;
        v[i + half] = b * cs + a * sn;
    }
}

// The attention core's mask + softmax of a decoder layer (attention_ref.cpp's rule, lazyAttention's statistics):
// H blocks of T×S scaled scores (query i at position pos0 + i, key j at position j), in place into weights.
// Key j is visible to query i when j ≤ pos0 + i and, with a window, pos0 + i − j < window. With softcap > 0 the
// score is cap·tanh(s / cap) first (Gemma 2). Masked keys get weight 0: every other cell of the row with
// rowBlock 0, else those of the row's block's key span (causalKeySpan), the only cells computed and read then.
// lse (T × H, may be null) receives log Σ exp(score) over the visible keys (−inf when none, whose row is 0).
__global__ void causalSoftmaxKernel(float* scores, float* lse, int H, int T, int S, int pos0, int window, float softcap,
                                    int rowBlock)
{
    const int lane = threadIdx.x % kDecWarp;
    const long long rows = static_cast<long long>(H) * T;
    for (long long r = firstRow(); r < rows; r += rowStep()) {
        const int h = static_cast<int>(r / T), i = static_cast<int>(r % T);
        float* row = scores + r * S;
        const int pos = pos0 + i;
        const int last = pos < S - 1 ? pos : S - 1;
        const int first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
        int z0 = 0, z1 = S;  // the cells written
        if (rowBlock > 0) {
            const int r0 = i - i % rowBlock, r1 = r0 + rowBlock < T ? r0 + rowBlock : T;
            const attn::cuda::KeySpan span = attn::cuda::causalKeySpan(r0, r1, pos0, S, window);
            z0 = span.k0;
            z1 = span.k1;
        }
        // One pass for the maximum and the sum (each lane's own running pair, rescaled when its maximum grows, then
        // the lanes' pairs merged to the warp's), one writing the weights: the visible scores read twice, not three
        // times (a lazy 8192-token run's are 1.2 GB a layer for SmolLM2).
        float m = -INFINITY, l = 0.0f;
        for (int j = first + lane; j <= last; j += kDecWarp) {
            float s = row[j];
            if (softcap > 0) {
                s = tanhf(s * (1.0f / softcap)) * softcap;
                row[j] = s;
            }
            lseStep(s, m, l);
        }
        warpLse(m, l);
        const float invL = m == -INFINITY ? 0.0f : 1.0f / l;
        for (int j = z0 + lane; j < z1; j += kDecWarp) row[j] = (j >= first && j <= last) ? expf(row[j] - m) * invL : 0.0f;
        if (lse && lane == 0) lse[static_cast<long long>(i) * H + h] = m == -INFINITY ? -INFINITY : m + logf(l);
    }
}

// feedForward's activations. Gated (SwiGLU, GeGLU tanh): a = act(a) ⊙ b. Ungated (GELU tanh, GELU erf):
// a = act(a + bias) (bias may be null), rows × width. kind: 0 SwiGLU, 1 GeGLU tanh, 2 GELU tanh, 3 GELU erf
// (FfnKind's order).
__device__ __forceinline__ float geluTanh(float a)
{
    const float k = 0.7978845608028654f;  // √(2/π)
    return 0.5f * a * (1.0f + tanhf(k * (a + 0.044715f * (a * a * a))));
}

__global__ void activationKernel(float* a, const float* b, const float* bias, long long rows, int width, int kind)
{
    const long long total = rows * width;
    for (long long e = firstElement(); e < total; e += elementStep()) {
        float v = a[e];
        switch (kind) {
        case 0: v = v / (1.0f + expf(-v)) * b[e]; break;
        case 1: v = geluTanh(v) * b[e]; break;
        case 2:
            if (bias) v += bias[e % width];
            v = geluTanh(v);
            break;
        default:
            if (bias) v += bias[e % width];
            v = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
            break;
        }
        a[e] = v;
    }
}

// finalSoftcap: x = cap·tanh(x / cap).
__global__ void softcapKernel(float* x, long long count, float cap)
{
    const float inv = 1.0f / cap;
    for (long long e = firstElement(); e < count; e += elementStep()) x[e] = tanhf(x[e] * inv) * cap;
}

// logProbability's log-sum-exp, first pass: chunk c of row r (logits [c·chunk, (c+1)·chunk) ∩ [0, V)) by one warp, each
// lane's running maximum and sum (lseStep), merged across the lanes (warpLse) into partials[2·(r·chunks + c)], +1.
__global__ void lsePartialsKernel(const float* logits, float* partials, int rows, int V, int chunks, int chunk)
{
    const int lane = threadIdx.x % kDecWarp;
    const long long units = static_cast<long long>(rows) * chunks;
    for (long long u = firstRow(); u < units; u += rowStep()) {
        const float* x = logits + (u / chunks) * V;
        const int j0 = static_cast<int>(u % chunks) * chunk, j1 = j0 + chunk < V ? j0 + chunk : V;
        float m = -INFINITY, s = 0.0f;
        for (int j = j0 + lane; j < j1; j += kDecWarp) lseStep(x[j], m, s);
        warpLse(m, s);
        if (lane == 0) {
            partials[2 * u] = m;
            partials[2 * u + 1] = s;
        }
    }
}

// logProbability per row, second pass: out[r] = −(logits[r, targets[r]] − log Σ_v exp(logits[r, v])) (the surprise of
// the next token) from the row's `chunks` partials (≤ kDecWarp: one a lane). A target outside 0…V−1 gives +inf (the
// CPU's −log p of −inf).
__global__ void surpriseKernel(const float* logits, const float* partials, const int* targets, float* out, int rows, int V, int chunks)
{
    const int lane = threadIdx.x % kDecWarp;
    for (long long r = firstRow(); r < rows; r += rowStep()) {
        float m = -INFINITY, s = 0.0f;
        if (lane < chunks) {
            m = partials[2 * (r * chunks + lane)];
            s = partials[2 * (r * chunks + lane) + 1];
        }
        warpLse(m, s);
        if (lane == 0) {
            const int t = targets[r];
            out[r] = t < 0 || t >= V ? INFINITY : -(logits[r * V + t] - m - logf(s));
        }
    }
}

// ---- A lazy run's maps, rebuilt from its Q, K and log-sum-exp where they were computed (LazyMaps' rules) ----------

// The geometry is decoder_kernels.h's LazyMapsArgs: Q (n × H·D, after RoPE), K (n × H_kv·D), lse (n × H) of one layer,
// query i and key j at positions i and j. The head's score of query i and key j: scale·q·k, soft-capped (as
// scoresTile: before masking).
__device__ __forceinline__ float lazyScore(const LazyMapsArgs& g, int i, int j)
{
    const float* q = g.Q + static_cast<long long>(i) * g.H * g.D + static_cast<long long>(g.head) * g.D;
    const float* k = g.K + static_cast<long long>(j) * g.Hkv * g.D + static_cast<long long>(g.head / (g.H / g.Hkv)) * g.D;
    float dot = 0.0f;
    for (int d = 0; d < g.D; ++d) dot += q[d] * k[d];
    const float s = dot * g.scale;
    return g.softcap > 0 ? g.softcap * tanhf(s / g.softcap) : s;
}

// LazyMaps::tile: g.rows × g.cols cells from (g.r0, g.c0), row-major into out: the scores, or the weights exp(score − lse)
// (0 where masked, and on a row whose lse is −inf).
__global__ void lazyTileKernel(LazyMapsArgs g, float* out)
{
    const long long total = static_cast<long long>(g.rows) * g.cols;
    for (long long e = firstElement(); e < total; e += elementStep()) {
        const int i = g.r0 + static_cast<int>(e / g.cols), j = g.c0 + static_cast<int>(e % g.cols);
        float v = lazyScore(g, i, j);
        if (g.weights) {
            const float shift = g.lse[static_cast<long long>(i) * g.H + g.head];
            const bool masked = (g.causal && j > i) || (g.window > 0 && j <= i - g.window);
            v = masked || shift == -INFINITY ? 0.0f : expf(v - shift);
        }
        out[e] = v;
    }
}

// LazyMaps::pooled (and the default pooled() of the scores) over scores a GEMM already made: `strip` holds the map rows
// [a0, a0 + its rows) × the read's g.cols columns from g.c0 (row-major, g.cols apart), each scale·q·k before the
// soft-cap. Cell (p, c) of outRows × outCols, for the pooled rows [p0, p1) whose blocks lie in the strip, is the
// largest value over the rect's block rows [p·R/outRows, (p+1)·R/outRows) × cols [c·C/outCols, …)
// (AttentionMaps::blockStart). The weights' block maximum is exp(max(score − lse)) over the visible cells (0 when
// none); the scores' the largest score (all finite). One warp per pooled cell.
__global__ void lazyPoolStripKernel(LazyMapsArgs g, const float* strip, int a0, int outRows, int outCols, int p0, int p1, float* out)
{
    const int r0 = g.r0, c0 = g.c0, rows = g.rows, cols = g.cols;
    const bool weights = g.weights;
    const int lane = threadIdx.x % kDecWarp;
    const long long cells = static_cast<long long>(p1 - p0) * outCols;
    for (long long e = firstRow(); e < cells; e += rowStep()) {
        const int p = p0 + static_cast<int>(e / outCols), c = static_cast<int>(e % outCols);
        const int i0 = static_cast<int>(static_cast<long long>(p) * rows / outRows), i1 = static_cast<int>(static_cast<long long>(p + 1) * rows / outRows);
        const int j0 = static_cast<int>(static_cast<long long>(c) * cols / outCols), j1 = static_cast<int>(static_cast<long long>(c + 1) * cols / outCols);
        const int w = j1 - j0;
        float best = -INFINITY;
        for (long long k = lane; k < static_cast<long long>(i1 - i0) * w; k += kDecWarp) {
            const int i = r0 + i0 + static_cast<int>(k / w), j = c0 + j0 + static_cast<int>(k % w);
            float v = strip[static_cast<long long>(i - a0) * cols + (j - c0)];
            if (g.softcap > 0) v = g.softcap * tanhf(v / g.softcap);
            if (!weights) {
                best = fmaxf(best, v);
                continue;
            }
            const float shift = g.lse[static_cast<long long>(i) * g.H + g.head];
            if (shift == -INFINITY || (g.causal && j > i) || (g.window > 0 && j <= i - g.window)) continue;
            best = fmaxf(best, v - shift);
        }
        best = warpMax(best);
        if (lane == 0) out[static_cast<long long>(p) * outCols + c] = weights ? expf(best) : best;
    }
}

// ---- A lazy run's attention core, fused (FlashArgs, decoder_kernels.h) ----------------------------------------------

static_assert(kFlashSide <= kDecWarp && kDecWarp % kFlashSide == 0, "a row of the thread square lies in one warp");
constexpr int kFlashThreads = kFlashSide * kFlashSide;
constexpr int kFlashPitch = kFlashTile + 4;  // the transposed tiles' rows: 16-byte aligned, fewer bank clashes

// The maximum and the sum over the kFlashSide threads of a row of the square (lanes tx of one warp).
__device__ __forceinline__ float sideMax(float v)
{
    for (int o = kFlashSide / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kDecFullWarp, v, o));
    return v;
}
__device__ __forceinline__ float sideSum(float v)
{
    for (int o = kFlashSide / 2; o > 0; o /= 2) v += __shfl_xor_sync(kDecFullWarp, v, o);
    return v;
}

// acc[i][j] += Σ_k a[k][ty·μ + i] · b[k][tx·μ + j] over k < n: the thread's μ × μ cells of a product of two tiles in
// shared memory, each stored k-major (a row of a the k-th dimension of the tile's queries, or the k-th key's weights
// for them; a row of b the same for the keys, or the k-th key's values), so that a thread reads μ consecutive floats.
template <int PA, int PB>
__device__ __forceinline__ void tileProducts(const float (*a)[PA], const float (*b)[PB], int n, int ty, int tx,
                                             float (&acc)[kFlashMicro][kFlashMicro])
{
    constexpr int mu = kFlashMicro;
    for (int k = 0; k < n; ++k) {
        float x[mu], y[mu];
        for (int i = 0; i < mu; ++i) {
            x[i] = a[k][ty * mu + i];
            y[i] = b[k][tx * mu + i];
        }
        for (int i = 0; i < mu; ++i)
            for (int j = 0; j < mu; ++j) acc[i][j] += x[i] * y[j];
    }
}

// lazyAttention's twin (attnscope/lazy_attention.h, also an online softmax over blocks of keys), a tile at a time.
// One block per (query tile, head) work item, heaviest first (the causal tiles of the last queries see the most keys),
// grid-stride. Thread (ty, tx) of the square holds the scores of the tile's rows ty·μ… and keys tx·μ… (μ =
// kFlashMicro), and the context of those rows in the columns tx·μ… of each of the NC chunks of kFlashTile columns of
// the head (NC·kFlashTile ≥ D, the rest zero). Per key tile: q·k over the head's dimensions kFlashDepth at a time
// (both tiles' chunks in shared memory, dimension-major), masked and soft-capped as causalSoftmaxKernel; each row's
// maximum and sum merged across its kFlashSide threads (sideMax, sideSum: every thread of the row gets the same
// values), the kept context and sum rescaled by exp(old maximum − new); the tile's weights (P, key-major) and V chunk
// by chunk in shared memory for the product.
template <int NC>
__global__ void flashAttentionKernel(FlashArgs a)
{
    constexpr int mu = kFlashMicro;
    __shared__ __align__(16) float qs[kFlashDepth][kFlashPitch];
    __shared__ __align__(16) float ks[kFlashDepth][kFlashPitch];
    __shared__ __align__(16) float ps[kFlashTile][kFlashPitch];  // ps[key][row]
    __shared__ __align__(16) float vs[kFlashTile][kFlashTile];
    const int tid = static_cast<int>(threadIdx.x), tx = tid % kFlashSide, ty = tid / kFlashSide;
    const long long qw = static_cast<long long>(a.H) * a.D, kw = static_cast<long long>(a.Hkv) * a.D;
    const int group = a.H / a.Hkv;
    const int tiles = (a.T + kFlashTile - 1) / kFlashTile;
    const long long items = static_cast<long long>(tiles) * a.H;
    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        const int h = static_cast<int>(item % a.H), r0 = (tiles - 1 - static_cast<int>(item / a.H)) * kFlashTile;
        const int r1 = r0 + kFlashTile < a.T ? r0 + kFlashTile : a.T;
        const attn::cuda::KeySpan span = attn::cuda::causalKeySpan(r0, r1, a.pos0, a.S, a.window);
        const float* Q = a.Q + static_cast<long long>(h) * a.D;
        const float* K = a.K + static_cast<long long>(h / group) * a.D;
        const float* V = a.V + static_cast<long long>(h / group) * a.D;
        float o[NC][mu][mu];
        float m[mu], l[mu];
        for (int i = 0; i < mu; ++i) {
            m[i] = -INFINITY;
            l[i] = 0.0f;
            for (int c = 0; c < NC; ++c)
                for (int j = 0; j < mu; ++j) o[c][i][j] = 0.0f;
        }
        for (int c0 = span.k0; c0 < span.k1; c0 += kFlashTile) {
            float s[mu][mu];
            for (int i = 0; i < mu; ++i)
                for (int j = 0; j < mu; ++j) s[i][j] = 0.0f;
            for (int d0 = 0; d0 < a.D; d0 += kFlashDepth) {
                for (int e = tid; e < kFlashTile * kFlashDepth; e += kFlashThreads) {
                    const int d = e % kFlashDepth, r = e / kFlashDepth;
                    const bool inD = d0 + d < a.D;
                    qs[d][r] = inD && r0 + r < a.T ? Q[(r0 + r) * qw + d0 + d] : 0.0f;
                    ks[d][r] = inD && c0 + r < span.k1 ? K[(c0 + r) * kw + d0 + d] : 0.0f;
                }
                __syncthreads();
                tileProducts(qs, ks, kFlashDepth, ty, tx, s);
                __syncthreads();
            }
            for (int i = 0; i < mu; ++i) {
                const int row = r0 + ty * mu + i, pos = a.pos0 + row;
                float tileMax = -INFINITY;
                for (int j = 0; j < mu; ++j) {
                    const int key = c0 + tx * mu + j;
                    float x = s[i][j] * a.scale;
                    if (a.softcap > 0) x = tanhf(x * (1.0f / a.softcap)) * a.softcap;
                    const bool visible = row < a.T && key < span.k1 && key <= pos && (a.window <= 0 || pos - key < a.window);
                    s[i][j] = visible ? x : -INFINITY;
                    tileMax = fmaxf(tileMax, s[i][j]);
                }
                const float mNew = fmaxf(m[i], sideMax(tileMax));
                float sum = 0.0f;
                for (int j = 0; j < mu; ++j) {
                    const float p = mNew == -INFINITY ? 0.0f : expf(s[i][j] - mNew);
                    ps[tx * mu + j][ty * mu + i] = p;
                    sum += p;
                }
                sum = sideSum(sum);
                const float alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - mNew);
                l[i] = l[i] * alpha + sum;
                m[i] = mNew;
                for (int c = 0; c < NC; ++c)
                    for (int j = 0; j < mu; ++j) o[c][i][j] *= alpha;
            }
            for (int c = 0; c < NC; ++c) {
                const int col0 = c * kFlashTile;
                if (col0 >= a.D) break;  // the same for every thread
                for (int e = tid; e < kFlashTile * kFlashTile; e += kFlashThreads) {
                    const int col = e % kFlashTile, k = e / kFlashTile;
                    vs[k][col] = col0 + col < a.D && c0 + k < span.k1 ? V[(c0 + k) * kw + col0 + col] : 0.0f;
                }
                __syncthreads();  // (the first also publishes ps)
                tileProducts(ps, vs, kFlashTile, ty, tx, o[c]);
                __syncthreads();
            }
        }
        for (int i = 0; i < mu; ++i) {
            const int row = r0 + ty * mu + i;
            if (row >= a.T) continue;
            const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;  // a row without a visible key: zeros, as the softmax's
            float* out = a.out + row * qw + static_cast<long long>(h) * a.D;
            for (int c = 0; c < NC; ++c)
                for (int j = 0; j < mu; ++j) {
                    const int col = c * kFlashTile + tx * mu + j;
                    if (col < a.D) out[col] = o[c][i][j] * inv;
                }
            if (a.lse && tx == 0) a.lse[static_cast<long long>(row) * a.H + h] = m[i] == -INFINITY ? -INFINITY : m[i] + logf(l[i]);
        }
    }
}

// ---- Launch shapes ---------------------------------------------------------------------------------------------

struct DecShape {
    dim3 grid;
    dim3 block;
};

// Grid-stride kernels: up to 65535 blocks saturate any current GPU; `cap` lowers it (the emulator: 2).
inline unsigned decBlocks(long long work, long long perBlock, long long cap)
{
    const long long b = (work + perBlock - 1) / perBlock;
    return static_cast<unsigned>(b < 1 ? 1 : (b < cap ? b : cap));
}
inline DecShape elementShape(long long count, long long cap = 65535)
{
    return {dim3(decBlocks(count, kDecThreads, cap)), dim3(kDecThreads)};
}
inline DecShape rowShape(long long rows, long long cap = 65535)
{
    return {dim3(decBlocks(rows, kDecRowWarps, cap)), dim3(kDecRowWarps * kDecWarp)};
}

} // namespace attn::cuda::dec
