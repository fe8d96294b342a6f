// The decoder kernels' launchers (contracts in decoder_kernels.h), written once for both compilations: the file
// that includes this defines ATTNSCOPE_DECODER_LAUNCH(kernel, shape, args...) (decoder.cu: kernel<<<…>>>(args);
// the emulator: emu::launch over the same kernel) and ATTNSCOPE_DECODER_GRID_CAP (the largest grid of a
// grid-stride kernel: 65535 on a GPU, 2 in the emulator so that the kernels' loops over rows run).
#include "decoder_kernels.cuh"
#include "decoder_kernels.h"

namespace attn::cuda {

using namespace dec;

cudaError_t launchEmbed(const int* ids, const float* E, int V, const float* positions, int pos0, float scale, float* x,
                        int n, int M, cudaStream_t stream)
{
    const DecShape s = elementShape(static_cast<long long>(n) * M, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(embedKernel, s, stream, ids, E, V, positions, pos0, scale, x, n, M);
}

cudaError_t launchNormRows(const float* in, const float* residual, const float* gamma, const float* beta, float* out,
                           long long rows, int width, float eps, bool layerNorm, cudaStream_t stream)
{
    const DecShape s = rowShape(rows, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(normRowsKernel, s, stream, in, residual, gamma, beta, out, rows, width, eps, layerNorm);
}

cudaError_t launchAddBiasRows(float* x, const float* bias, long long rows, int width, cudaStream_t stream)
{
    const DecShape s = elementShape(rows * width, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(addBiasRowsKernel, s, stream, x, bias, rows, width);
}

cudaError_t launchAdd(float* out, const float* a, const float* b, long long count, cudaStream_t stream)
{
    const DecShape s = elementShape(count, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(addKernel, s, stream, out, a, b, count);
}

cudaError_t launchZeroColumns(float* x, long long rows, int stride, int col0, int width, cudaStream_t stream)
{
    const DecShape s = elementShape(rows * width, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(zeroColumnsKernel, s, stream, x, rows, stride, col0, width);
}

cudaError_t launchRope(float* x, long long rows, int heads, int D, int half, const float* invFreq, int pos0, int period,
                       cudaStream_t stream)
{
    const DecShape s = elementShape(rows * heads * half, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(ropeKernel, s, stream, x, rows, heads, D, half, invFreq, pos0, period);
}

cudaError_t launchCausalSoftmax(float* scores, float* lse, int H, int T, int S, int pos0, int window, float softcap,
                                int rowBlock, cudaStream_t stream)
{
    const DecShape s = rowShape(static_cast<long long>(H) * T, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(causalSoftmaxKernel, s, stream, scores, lse, H, T, S, pos0, window, softcap, rowBlock);
}

cudaError_t launchActivation(float* a, const float* b, const float* bias, long long rows, int width, int kind,
                             cudaStream_t stream)
{
    const DecShape s = elementShape(rows * width, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(activationKernel, s, stream, a, b, bias, rows, width, kind);
}

cudaError_t launchSoftcap(float* x, long long count, float cap, cudaStream_t stream)
{
    const DecShape s = elementShape(count, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(softcapKernel, s, stream, x, count, cap);
}

namespace {

cudaError_t launchLsePartials(const float* logits, float* partials, int rows, int V, int chunks, int chunk, cudaStream_t stream)
{
    const DecShape s = rowShape(static_cast<long long>(rows) * chunks, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(lsePartialsKernel, s, stream, logits, partials, rows, V, chunks, chunk);
}

} // namespace

cudaError_t launchSurprise(const float* logits, const int* targets, float* out, int rows, int V, float* partials, cudaStream_t stream)
{
    const int chunks = surpriseChunks(V), chunk = (V + chunks - 1) / chunks;
    if (const cudaError_t err = launchLsePartials(logits, partials, rows, V, chunks, chunk, stream); err != cudaSuccess) return err;
    const DecShape s = rowShape(rows, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(surpriseKernel, s, stream, logits, partials, targets, out, rows, V, chunks);
}

namespace {

template <int NC>
cudaError_t launchFlash(const FlashArgs& a, cudaStream_t stream)
{
    const long long items = static_cast<long long>((a.T + kFlashTile - 1) / kFlashTile) * a.H;
    const DecShape s{dim3(decBlocks(items, 1, ATTNSCOPE_DECODER_GRID_CAP)), dim3(kFlashThreads)};
    ATTNSCOPE_DECODER_LAUNCH(flashAttentionKernel<NC>, s, stream, a);
}

} // namespace

cudaError_t launchFlashAttention(const FlashArgs& a, cudaStream_t stream)
{
    if (!flashAttentionFits(a.D) || a.T < 1 || a.S < 1 || a.pos0 < 0 || a.H < 1 || a.Hkv < 1 || a.H % a.Hkv != 0) return cudaErrorInvalidValue;
    switch ((a.D + kFlashTile - 1) / kFlashTile) {
    case 1: return launchFlash<1>(a, stream);
    case 2: return launchFlash<2>(a, stream);
    case 3: return launchFlash<3>(a, stream);
    default: return launchFlash<kFlashMaxChunks>(a, stream);
    }
}

cudaError_t launchLazyTile(const LazyMapsArgs& a, float* out, cudaStream_t stream)
{
    const DecShape s = elementShape(static_cast<long long>(a.rows) * a.cols, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(lazyTileKernel, s, stream, a, out);
}

cudaError_t launchLazyPoolStrip(const LazyMapsArgs& a, const float* strip, int a0, int outRows, int outCols, int p0, int p1, float* out,
                                cudaStream_t stream)
{
    const DecShape s = rowShape(static_cast<long long>(p1 - p0) * outCols, ATTNSCOPE_DECODER_GRID_CAP);
    ATTNSCOPE_DECODER_LAUNCH(lazyPoolStripKernel, s, stream, a, strip, a0, outRows, outCols, p0, p1, out);
}

} // namespace attn::cuda
