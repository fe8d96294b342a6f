// The backend's launchers (as in core/cuda/attention.cu) over the emulator: the same kernel source and the
// same launch shapes, except that grid y/z are capped at 2 so the kernels' loops over heads and query tiles
// run on small problems too. deviceAvailable reports the emulator.
#include "cuda_emulator.h"

#include "attention_kernels.cuh"
#include "cuda_backend.h"
#include "kernels.h"

namespace attn::cuda {

using namespace detail;

namespace {
constexpr int kEmulatedGridCap = 2;
}

cudaError_t launchAddBias(float* c, const float* bias, int tokens, int features, bool columnMajor, cudaStream_t)
{
    const long long n = static_cast<long long>(tokens) * features;
    LaunchShape s = addBiasShape(n);
    s.grid.x = std::min(s.grid.x, 2u);  // exercise the grid-stride loop
    emu::launch(s.grid, s.block, [&] { addBiasKernel(c, bias, n, tokens, features, columnMajor); });
    return cudaSuccess;
}

cudaError_t launchMaskedSoftmax(const float* scores, const std::uint8_t* mask, float fill, float* weights, int H,
                                int T, int S, bool columnMajor, unsigned long long* firstBad, cudaStream_t)
{
    if (!columnMajor) {
        const long long rows = static_cast<long long>(H) * T;
        const LaunchShape s = softmaxRowsShape(rows);
        emu::launch(s.grid, s.block, [&] { softmaxRowsKernel(scores, mask, fill, weights, rows, T, S, firstBad); });
    } else {
        const LaunchShape s = softmaxColsShape(H, T, kEmulatedGridCap);
        emu::launch(s.grid, s.block, [&] { softmaxColsKernel(scores, mask, fill, weights, H, T, S, firstBad); });
    }
    return cudaSuccess;
}

cudaError_t launchAdditiveScores(const float* qa, const float* ka, const float* wv, float* scores, int H, int group,
                                 int T, int S, int A, bool columnMajor, cudaStream_t)
{
    const LaunchShape s = additiveShape(H, T, S, kEmulatedGridCap);
    emu::launch(s.grid, s.block, [&] { additiveScoresKernel(qa, ka, wv, scores, H, group, T, S, A, columnMajor); });
    return cudaSuccess;
}

cudaError_t launchFirstNonFinite(const float* x, long long n, int cols, int rows, int blockCols, unsigned long long* first,
                                 cudaStream_t)
{
    if (n <= 0) return cudaSuccess;
    LaunchShape s = gridStrideShape(n);
    s.grid.x = std::min(s.grid.x, 2u);  // exercise the grid-stride loop
    emu::launch(s.grid, s.block, [&] { firstNonFiniteKernel(x, n, cols, rows, blockCols, first); });
    return cudaSuccess;
}

cudaError_t launchPoolMax(const float* map, int T, int S, bool columnMajor, int r0, int c0, int rows, int cols,
                          int outRows, int outCols, float* out, cudaStream_t)
{
    LaunchShape s = gridStrideShape(static_cast<long long>(outRows) * outCols);
    s.grid.x = std::min(s.grid.x, 2u);
    emu::launch(s.grid, s.block, [&] { poolMaxKernel(map, T, S, columnMajor, r0, c0, rows, cols, outRows, outCols, out); });
    return cudaSuccess;
}

cudaError_t launchMapRanges(const float* maps, const std::uint8_t* mask, int count, long long cells, float* partLo,
                            float* partHi, unsigned long long* partBad, float* lo, float* hi, unsigned long long* bad,
                            cudaStream_t)
{
    if (count <= 0) return cudaSuccess;
    // Small slices (about 40 cells), so that the tests' small maps are split into several parts (the last one
    // shorter), and the loop over maps runs past the capped grid.
    const int parts = std::min(kRangeMaxParts, static_cast<int>((cells + 39) / 40));
    const LaunchShape s = rangeShape(count, std::max(parts, 1), kEmulatedGridCap);
    emu::launch(s.grid, s.block, [&] { mapRangeKernel(maps, mask, count, cells, std::max(parts, 1), partLo, partHi, partBad); });
    LaunchShape f = gridStrideShape(count);
    f.block.x = 2;  // exercise the grid-stride loop over maps
    f.grid.x = 1;
    emu::launch(f.grid, f.block, [&] { mapRangeMergeKernel(count, std::max(parts, 1), partLo, partHi, partBad, lo, hi, bad); });
    return cudaSuccess;
}

cudaError_t launchBuildMask(std::uint8_t* mask, int T, int S, bool columnMajor, bool causal, const std::uint8_t* keyPadding,
                            const int* validLens, const std::uint8_t* custom, int* keyOpen, cudaStream_t)
{
    LaunchShape s = gridStrideShape(static_cast<long long>(T) * S);
    s.grid.x = std::min(s.grid.x, 2u);
    emu::launch(s.grid, s.block, [&] { buildMaskKernel(mask, T, S, columnMajor, causal, keyPadding, validLens, custom, keyOpen); });
    return cudaSuccess;
}

cudaError_t probeKernelImage() { return cudaSuccess; }

bool deviceAvailable(std::string* description)
{
    if (description) *description = "CPU emulation of the CUDA kernels (tests/parity/emulated)";
    return true;
}

} // namespace attn::cuda
