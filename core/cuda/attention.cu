// Launchers of the backend's kernels (attention_kernels.cuh); contracts in kernels.h. The products
// (projections, QKᵀ, PV, W^O) are cuBLAS calls in backend.cpp. Kernels are kept few and small: the default
// build compiles each for 5 architectures.
#include "attention_kernels.cuh"
#include "kernels.h"

namespace attn::cuda {

using namespace detail;

cudaError_t launchAddBias(float* c, const float* bias, int tokens, int features, bool columnMajor, cudaStream_t stream)
{
    const long long n = static_cast<long long>(tokens) * features;
    const LaunchShape s = addBiasShape(n);
    addBiasKernel<<<s.grid, s.block, 0, stream>>>(c, bias, n, tokens, features, columnMajor);
    return cudaGetLastError();
}

cudaError_t launchMaskedSoftmax(const float* scores, const std::uint8_t* mask, float fill, float* weights, int H,
                                int T, int S, bool columnMajor, unsigned long long* firstBad, cudaStream_t stream)
{
    if (!columnMajor) {
        const long long rows = static_cast<long long>(H) * T;
        const LaunchShape s = softmaxRowsShape(rows);
        softmaxRowsKernel<<<s.grid, s.block, 0, stream>>>(scores, mask, fill, weights, rows, T, S, firstBad);
    } else {
        const LaunchShape s = softmaxColsShape(H, T);
        softmaxColsKernel<<<s.grid, s.block, 0, stream>>>(scores, mask, fill, weights, H, T, S, firstBad);
    }
    return cudaGetLastError();
}

cudaError_t launchAdditiveScores(const float* qa, const float* ka, const float* wv, float* scores, int H, int group,
                                 int T, int S, int A, bool columnMajor, cudaStream_t stream)
{
    const LaunchShape s = additiveShape(H, T, S);
    additiveScoresKernel<<<s.grid, s.block, 0, stream>>>(qa, ka, wv, scores, H, group, T, S, A, columnMajor);
    return cudaGetLastError();
}

cudaError_t launchFirstNonFinite(const float* x, long long n, int cols, int rows, int blockCols, unsigned long long* first,
                                 cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    const LaunchShape s = gridStrideShape(n);
    firstNonFiniteKernel<<<s.grid, s.block, 0, stream>>>(x, n, cols, rows, blockCols, first);
    return cudaGetLastError();
}

cudaError_t launchPoolMax(const float* map, int T, int S, bool columnMajor, int r0, int c0, int rows, int cols,
                          int outRows, int outCols, float* out, cudaStream_t stream)
{
    const LaunchShape s = gridStrideShape(static_cast<long long>(outRows) * outCols);
    poolMaxKernel<<<s.grid, s.block, 0, stream>>>(map, T, S, columnMajor, r0, c0, rows, cols, outRows, outCols, out);
    return cudaGetLastError();
}

cudaError_t launchMapRanges(const float* maps, const std::uint8_t* mask, int count, long long cells, float* partLo,
                            float* partHi, unsigned long long* partBad, float* lo, float* hi, unsigned long long* bad,
                            cudaStream_t stream)
{
    if (count <= 0) return cudaSuccess;
    const int parts = rangeParts(cells, kRangeMaxParts);
    const LaunchShape s = rangeShape(count, parts);
    mapRangeKernel<<<s.grid, s.block, 0, stream>>>(maps, mask, count, cells, parts, partLo, partHi, partBad);
    const LaunchShape f = gridStrideShape(count);
    mapRangeMergeKernel<<<f.grid, f.block, 0, stream>>>(count, parts, partLo, partHi, partBad, lo, hi, bad);
    return cudaGetLastError();
}

cudaError_t launchBuildMask(std::uint8_t* mask, int T, int S, bool columnMajor, bool causal, const std::uint8_t* keyPadding,
                            const int* validLens, const std::uint8_t* custom, int* keyOpen, cudaStream_t stream)
{
    const LaunchShape s = gridStrideShape(static_cast<long long>(T) * S);
    buildMaskKernel<<<s.grid, s.block, 0, stream>>>(mask, T, S, columnMajor, causal, keyPadding, validLens, custom, keyOpen);
    return cudaGetLastError();
}

cudaError_t probeKernelImage()
{
    cudaFuncAttributes attr{};
    return cudaFuncGetAttributes(&attr, softmaxRowsKernel);
}

} // namespace attn::cuda
