// Launchers of the decoder forward's kernels (decoder_kernels.cuh), the device twins of core/model/blocks.cpp's
// functions. Plain pointers to device memory, row-major storage; each enqueues on `stream` and returns the launch
// error (execution errors surface at the next synchronisation). Defined once in decoder_launchers.inl, compiled by
// nvcc in decoder.cu and as host C++ over the emulator in tests/parity/emulated/emulated_decoder_kernels.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>

namespace attn::cuda {

// x (n × M) = columns ids[i] of E (M × V), times scale, plus rows pos0 + i of positions (maxPositions × M, or null).
cudaError_t launchEmbed(const int* ids, const float* E, int V, const float* positions, int pos0, float scale, float* x,
                        int n, int M, cudaStream_t stream);
// Every row of in (rows × width) normed into out (may be in): RMSNorm, or LayerNorm with layerNorm (beta may be
// null); plus residual (may be null, may be out).
cudaError_t launchNormRows(const float* in, const float* residual, const float* gamma, const float* beta, float* out,
                           long long rows, int width, float eps, bool layerNorm, cudaStream_t stream);
cudaError_t launchAddBiasRows(float* x, const float* bias, long long rows, int width, cudaStream_t stream);
cudaError_t launchAdd(float* out, const float* a, const float* b, long long count, cudaStream_t stream);
cudaError_t launchZeroColumns(float* x, long long rows, int stride, int col0, int width, cudaStream_t stream);
// RoPE in place on `heads` heads of D of rows × heads·D (positions pos0…, or blocks of period), half = R / 2.
cudaError_t launchRope(float* x, long long rows, int heads, int D, int half, const float* invFreq, int pos0, int period,
                       cudaStream_t stream);
// The keys a block of queries can see: queries r0 … r1−1 (at positions pos0 + r0 …) see at most keys k0 … k1−1 of S
// (causal: up to the block's last position; with a window > 0, from the block's first position − window + 1). The
// attention of a long text is computed in row blocks of this span only (decoder_device.cpp), and the softmax kernel
// finds a row's block by the same rule.
struct KeySpan {
    int k0, k1;
};
#ifdef __CUDACC__
__host__ __device__
#endif
inline KeySpan causalKeySpan(int r0, int r1, int pos0, int S, int window)
{
    const int last = pos0 + r1 - 1;  // the block's last query position
    const int k1 = last + 1 < S ? last + 1 : S;
    const int first = pos0 + r0 - window + 1;
    const int k0 = window > 0 && first > 0 ? (first < k1 ? first : k1) : 0;
    return {k0, k1};
}

// Causal (and sliding-window) soft-capped softmax of H blocks of T×S scores in place; lse T × H or null. Only the
// visible keys of a row are read. rowBlock 0: every other cell of the row is written 0 (whole maps, as the views
// read them); rowBlock > 0: the row's scores were computed in blocks of rowBlock queries (causalKeySpan), and only
// its block's span is written (0 where masked), which is all that weights·V then reads.
cudaError_t launchCausalSoftmax(float* scores, float* lse, int H, int T, int S, int pos0, int window, float softcap,
                                int rowBlock, cudaStream_t stream);
// A lazy run's attention core in one kernel (flashAttentionKernel), the products-and-softmax path above fused: for
// T queries at positions pos0… (Q: T rows of H·D) against keys 0…S−1 (K, V: rows of H_kv·D, query head h reads KV head
// h / (H / H_kv)), the scores scale·q·k soft-capped and masked as launchCausalSoftmax's, their softmax, its weights times
// V into out (T × H·D, the concat) and log Σ exp into lse (T × H). Tiles of kFlashTile queries against tiles of as many
// keys of their span (causalKeySpan), an online softmax (a running maximum and sum per row, the partial context rescaled
// when the maximum grows): no score is written to memory. Heads of up to kFlashMaxChunks·kFlashTile dimensions.
struct FlashArgs {
    const float* Q;
    const float* K;
    const float* V;
    float* out;
    float* lse;
    int T, S, pos0, H, Hkv, D, window;
    float scale, softcap;
};
// Threads per side of a block's square (kFlashSide², one thread per kFlashMicro² cells of a tile's scores), the
// dimensions of the q·k products loaded at a time, and the V columns per chunk (a tile's width). The emulated tests
// build with small tiles, so that their short texts cross several.
#ifndef ATTNSCOPE_DECODER_FLASH_SIDE
#define ATTNSCOPE_DECODER_FLASH_SIDE 16
#endif
#ifndef ATTNSCOPE_DECODER_FLASH_MICRO
#define ATTNSCOPE_DECODER_FLASH_MICRO 4
#endif
#ifndef ATTNSCOPE_DECODER_FLASH_DEPTH
#define ATTNSCOPE_DECODER_FLASH_DEPTH 16
#endif
constexpr int kFlashSide = ATTNSCOPE_DECODER_FLASH_SIDE;
constexpr int kFlashMicro = ATTNSCOPE_DECODER_FLASH_MICRO;
constexpr int kFlashTile = kFlashSide * kFlashMicro;
constexpr int kFlashDepth = ATTNSCOPE_DECODER_FLASH_DEPTH;
constexpr int kFlashMaxChunks = 4;
inline bool flashAttentionFits(int D) { return D >= 1 && D <= kFlashMaxChunks * kFlashTile; }
// cudaErrorInvalidValue for a head wider than flashAttentionFits allows, or shapes that are not positive.
cudaError_t launchFlashAttention(const FlashArgs& a, cudaStream_t stream);
// A lazy run's maps (LazyMaps' rules) from its Q (n × H·D), K (n × H_kv·D) and lse (n × H) on the device, head `head`:
// the tile rows × cols from (r0, c0) (scores, or weights), or that rect max-pooled to outRows × outCols
// (AttentionMaps::pooled's blocks), row-major into out.
struct LazyMapsArgs {
    const float* Q;
    const float* K;
    const float* lse;
    int H, Hkv, D, head;
    float scale, softcap;
    int window;
    bool causal, weights;
    int r0, c0, rows, cols;
};
cudaError_t launchLazyTile(const LazyMapsArgs& a, float* out, cudaStream_t stream);
// The pooled rows [p0, p1) of the read's outRows × outCols (into out, row-major) from `strip`: the scale·q·k of the map
// rows a0… (those rows' blocks) × the read's columns, row-major, a.cols apart (a GEMM's, in lazyMapsRead).
cudaError_t launchLazyPoolStrip(const LazyMapsArgs& a, const float* strip, int a0, int outRows, int outCols, int p0, int p1, float* out,
                                cudaStream_t stream);
// kind: FfnKind's order (0 SwiGLU, 1 GeGLU tanh: a = act(a)·b; 2 GELU tanh, 3 GELU erf: a = act(a + bias)).
cudaError_t launchActivation(float* a, const float* b, const float* bias, long long rows, int width, int kind,
                             cudaStream_t stream);
cudaError_t launchSoftcap(float* x, long long count, float cap, cudaStream_t stream);
// out[r] = −log softmax(logits[r])[targets[r]] for rows × V logits. In two passes, neither reading a logit twice:
// each row's chunks of kSurpriseChunk logits (at most kSurpriseMaxChunks of them, longer when V needs) each reduced by a
// warp to a maximum and a sum of exponentials (`partials`: 2·kSurpriseMaxChunks floats a row), then each row's chunks
// merged and its target's logit read. One warp a row, two passes over the row (loans 1-3's kernel), held 512 warps on
// the H100's 132 SMs, about 0.3 TB/s: 40 of Gemma 3's 95 ms of LM head at 8192 tokens (262144 logits a row).
#ifndef ATTNSCOPE_DECODER_SURPRISE_CHUNK  // the emulated tests' build: a few logits, so that their 320 take many chunks
#define ATTNSCOPE_DECODER_SURPRISE_CHUNK 2048
#endif
constexpr int kSurpriseChunk = ATTNSCOPE_DECODER_SURPRISE_CHUNK;
constexpr int kSurpriseMaxChunks = 32;  // one a lane of the merging warp
inline int surpriseChunks(int V) { return std::clamp((V + kSurpriseChunk - 1) / kSurpriseChunk, 1, kSurpriseMaxChunks); }
cudaError_t launchSurprise(const float* logits, const int* targets, float* out, int rows, int V, float* partials, cudaStream_t stream);

} // namespace attn::cuda
