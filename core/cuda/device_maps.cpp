// attn::DeviceMaps's reads (attnscope/device_maps.h) from the workspace's buffers: a tile is one 2D copy of the
// tile's cells, a pooled overview is the pool-max kernel then one copy of the overview, a mask tile a 2D copy of
// the result's mask (one byte a cell, one mask for all heads), the heads' colour ranges two small kernels and a few
// values a head. Nothing else of the map crosses the bus.
//
// Locking: every read holds the workspace's mutex, so it never overlaps a compute rewriting the buffers, and checks
// the generation under it. A read that comes while a compute is in flight gives up at once (that compute replaces
// the result): it never waits for one.
#include "cuda_backend.h"
#include "cuda_status.h"
#include "kernels.h"
#include "workspace.h"

#include <mutex>
#include <string>
#include <vector>

namespace attn::cuda {
namespace {

Status replacedNow()
{
    return makeError(StatusCode::Unavailable, "device maps: a compute on the device is replacing this result: compute it again");
}

// The result with `generation` if the device still holds it, with the sizes the maps were made for.
Status heldResult(const Workspace& ws, std::uint64_t generation, int T, int S, int head, DeviceResult& r)
{
    if (generation == 0)
        return makeError(StatusCode::Unavailable, "device maps: the result was not computed on the CUDA device");
    r = ws.result();
    if (r.generation != generation)
        return makeError(StatusCode::Unavailable,
                         "device maps: the device no longer holds this result (generation " + std::to_string(generation) +
                             "; a later compute on the device replaced it): compute it again");
    if (r.T != T || r.S != S || head >= r.H)
        return makeError(StatusCode::InvalidArgument,
                         "device maps: expected " + std::to_string(r.H) + " head(s) of " + std::to_string(r.T) + "×" +
                             std::to_string(r.S) + " maps, asked for head " + std::to_string(head) + " of " +
                             std::to_string(T) + "×" + std::to_string(S));
    return {};
}

// After a failed call: the stream left idle and the (non-sticky) error cleared for the next call.
Status settled(Workspace& ws, Status s)
{
    if (!s.ok()) {
        (void)cudaStreamSynchronize(ws.stream());
        (void)cudaGetLastError();
    }
    return s;
}

// Copies the rect's cells of one head's T×S map of `elem`-byte cells (stored as the result's layout says, from
// `base`) into `out`, rect.rows × rect.cols, query rows. Column storage (key j, query i at j·T + i) gives the
// rect transposed, which is put back in query rows on the host (the tile's cells only).
template <class Mat>
Status copyTile(Workspace& ws, const DeviceResult& r, const void* base, const MapRect& rect, Mat& out)
{
    using Scalar = typename Mat::Scalar;
    const std::size_t e = sizeof(Scalar), T = std::size_t(r.T), S = std::size_t(r.S);
    out.resize(rect.rows, rect.cols);
    if (rect.rows == 0 || rect.cols == 0) return {};
    const char* b = static_cast<const char*>(base);
    if (!r.columnMajor) {
        const char* src = b + (std::size_t(rect.r0) * S + std::size_t(rect.c0)) * e;
        ATTNSCOPE_CUDA_TRY(cudaMemcpy2DAsync(out.data(), std::size_t(rect.cols) * e, src, S * e, std::size_t(rect.cols) * e,
                                             std::size_t(rect.rows), cudaMemcpyDeviceToHost, ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ws.stream()));
        return {};
    }
    Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor> keysFirst(rect.rows, rect.cols);
    const char* src = b + (std::size_t(rect.c0) * T + std::size_t(rect.r0)) * e;
    ATTNSCOPE_CUDA_TRY(cudaMemcpy2DAsync(keysFirst.data(), std::size_t(rect.rows) * e, src, T * e, std::size_t(rect.rows) * e,
                                         std::size_t(rect.cols), cudaMemcpyDeviceToHost, ws.stream()));
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ws.stream()));
    out = keysFirst;
    return {};
}

const float* mapOf(const Workspace& ws, const DeviceResult& r, MapKind kind, int head)
{
    const float* base = static_cast<const float*>(ws.buffer(kind == MapKind::Scores ? Buf::Scores : Buf::Weights));
    return base + std::size_t(head) * std::size_t(r.T) * std::size_t(r.S);
}

} // namespace

bool mapsCurrent(std::uint64_t generation)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return false;
    std::lock_guard<std::mutex> lock(ws.mutex());
    return generation != 0 && ws.result().generation == generation;
}

Status mapTile(std::uint64_t generation, int T, int S, MapKind kind, int head, const MapRect& rect, Matrix& out)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return replacedNow();
    std::lock_guard<std::mutex> lock(ws.mutex());
    DeviceResult r;
    ATTNSCOPE_RETURN_IF_ERROR(heldResult(ws, generation, T, S, head, r));
    return settled(ws, copyTile(ws, r, mapOf(ws, r, kind, head), rect, out));
}

Status mapMaskTile(std::uint64_t generation, int T, int S, int head, const MapRect& rect, MaskMatrix& out, bool& hasMask)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return replacedNow();
    std::lock_guard<std::mutex> lock(ws.mutex());
    DeviceResult r;
    ATTNSCOPE_RETURN_IF_ERROR(heldResult(ws, generation, T, S, head, r));
    hasMask = r.hasMask;
    if (!hasMask) return {};
    return settled(ws, copyTile(ws, r, ws.buffer(Buf::Mask), rect, out));
}

Status mapPooled(std::uint64_t generation, int T, int S, MapKind kind, int head, const MapRect& rect, int outRows,
                 int outCols, Matrix& out, bool stored)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return replacedNow();
    std::lock_guard<std::mutex> lock(ws.mutex());
    DeviceResult r;
    ATTNSCOPE_RETURN_IF_ERROR(heldResult(ws, generation, T, S, head, r));
    if (outRows < 1 || outRows > rect.rows || outCols < 1 || outCols > rect.cols)
        return makeError(StatusCode::InvalidArgument, "device maps: pooled size " + std::to_string(outRows) + "×" +
                                                          std::to_string(outCols) + " outside 1…" + std::to_string(rect.rows) +
                                                          " × 1…" + std::to_string(rect.cols));
    auto run = [&]() -> Status {
        float* dOut = nullptr;
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Pooled, std::size_t(outRows) * std::size_t(outCols), dOut));
        // The stored matrix of a Column result is S × T, row-major: the kernel's row-major case over it scans it in
        // storage order, as the host's poolMax does.
        const bool transposed = stored && r.columnMajor;
        ATTNSCOPE_CUDA_TRY(launchPoolMax(mapOf(ws, r, kind, head), transposed ? r.S : r.T, transposed ? r.T : r.S,
                                         r.columnMajor && !transposed, rect.r0, rect.c0, rect.rows, rect.cols, outRows,
                                         outCols, dOut, ws.stream()));
        out.resize(outRows, outCols);
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(out.data(), dOut, sizeof(float) * std::size_t(out.size()), cudaMemcpyDeviceToHost,
                                           ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaGetLastError());
        return {};
    };
    return settled(ws, run());
}

Status mapRanges(std::uint64_t generation, int T, int S, MapKind kind, std::vector<float>& lo, std::vector<float>& hi,
                 std::vector<unsigned long long>& bad)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return replacedNow();
    std::lock_guard<std::mutex> lock(ws.mutex());
    DeviceResult r;
    ATTNSCOPE_RETURN_IF_ERROR(heldResult(ws, generation, T, S, 0, r));
    auto run = [&]() -> Status {
        // Each buffer: count × kRangeMaxParts parts, then the count results.
        const std::size_t count = std::size_t(r.H), parts = count * std::size_t(kRangeMaxParts);
        float *dLo = nullptr, *dHi = nullptr;
        unsigned long long* dBad = nullptr;
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::RangeLo, parts + count, dLo));
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::RangeHi, parts + count, dHi));
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::RangeBad, parts + count, dBad));
        const auto* mask = r.hasMask ? static_cast<const std::uint8_t*>(ws.buffer(Buf::Mask)) : nullptr;
        ATTNSCOPE_CUDA_TRY(launchMapRanges(mapOf(ws, r, kind, 0), mask, r.H, static_cast<long long>(r.T) * r.S, dLo, dHi,
                                           dBad, dLo + parts, dHi + parts, dBad + parts, ws.stream()));
        lo.resize(count);
        hi.resize(count);
        bad.resize(count);
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(lo.data(), dLo + parts, sizeof(float) * count, cudaMemcpyDeviceToHost, ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(hi.data(), dHi + parts, sizeof(float) * count, cudaMemcpyDeviceToHost, ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(bad.data(), dBad + parts, sizeof(unsigned long long) * count,
                                           cudaMemcpyDeviceToHost, ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaGetLastError());
        return {};
    };
    return settled(ws, run());
}

} // namespace attn::cuda
