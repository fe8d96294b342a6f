// attn::measureGpuBounds (attnscope/gpu_bounds.h) on the CUDA device: an SGEMM, a device-to-device copy and
// pinned host↔device copies, each timed with CUDA events on the backend's stream (best of `repeats` after one
// untimed warm-up, which takes clocks and lazy module loading out of the figures).
//
// The buffers are allocated for the measurement and freed after it: the workspace keeps only what compute() needs.
#include "cuda_backend.h"
#include "cuda_status.h"
#include "workspace.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace attn::cuda {
namespace {

// Frees what the measurement allocated, whatever way it returns.
struct Allocations {
    float* a = nullptr;
    float* b = nullptr;
    float* c = nullptr;
    void* src = nullptr;
    void* dst = nullptr;
    void* pinned = nullptr;
    ~Allocations()
    {
        for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c), src, dst})
            if (p) (void)cudaFree(p);
        if (pinned) (void)cudaFreeHost(pinned);
    }
};

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Best time in ms of `repeats` runs of `body` (each enqueues work on the stream), after one untimed run.
template <class Body>
Status bestOf(Workspace& ws, int repeats, double& bestMs, Body body)
{
    ATTNSCOPE_RETURN_IF_ERROR(body());
    bestMs = 0;
    for (int r = 0; r < repeats; ++r) {
        ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(0), ws.stream()));
        ATTNSCOPE_RETURN_IF_ERROR(body());
        ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(1), ws.stream()));
        ATTNSCOPE_CUDA_TRY(cudaEventSynchronize(ws.event(1)));
        float ms = 0;
        ATTNSCOPE_CUDA_TRY(cudaEventElapsedTime(&ms, ws.event(0), ws.event(1)));
        if (r == 0 || double(ms) < bestMs) bestMs = double(ms);
    }
    return {};
}

Status measure(Workspace& ws, const GpuBoundsOptions& o, GpuBounds& b)
{
    const std::size_t n = std::size_t(o.sgemmN), matBytes = n * n * sizeof(float);
    std::size_t freeBytes = 0, totalBytes = 0;
    ATTNSCOPE_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
    const std::size_t need = 3 * matBytes + 2 * o.copyBytes;
    if (need > freeBytes)
        return makeError(StatusCode::ResourceExhausted, "GPU bounds: need " + mib(need) + " of device memory (SGEMM " +
                                                            std::to_string(n) + "², copies of " + mib(o.copyBytes) +
                                                            "), " + mib(freeBytes) + " free; use smaller sizes");
    Allocations m;
    cudaStream_t stream = ws.stream();
    ATTNSCOPE_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m.a), matBytes));
    ATTNSCOPE_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m.b), matBytes));
    ATTNSCOPE_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m.c), matBytes));
    ATTNSCOPE_CUDA_TRY(cudaMalloc(&m.src, o.copyBytes));
    ATTNSCOPE_CUDA_TRY(cudaMalloc(&m.dst, o.copyBytes));
    ATTNSCOPE_CUDA_TRY(cudaMallocHost(&m.pinned, o.copyBytes));
    // Byte 0x3c everywhere: every float is 0.0115 (finite, normal), so the product runs on ordinary numbers.
    ATTNSCOPE_CUDA_TRY(cudaMemsetAsync(m.a, 0x3c, matBytes, stream));
    ATTNSCOPE_CUDA_TRY(cudaMemsetAsync(m.b, 0x3c, matBytes, stream));
    ATTNSCOPE_CUDA_TRY(cudaMemsetAsync(m.src, 0x3c, o.copyBytes, stream));

    // The backend's handle: CUBLAS_DEFAULT_MATH (plain FP32, no TF32), the mode compute() runs its products in.
    double ms = 0;
    const int ni = o.sgemmN;
    ATTNSCOPE_RETURN_IF_ERROR(bestOf(ws, o.repeats, ms, [&]() -> Status {
        const float alpha = 1.0f, beta = 0.0f;
        ATTNSCOPE_CUBLAS_TRY(cublasSgemmStridedBatched(ws.blas(), CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &alpha, m.a, ni,
                                                       0, m.b, ni, 0, &beta, m.c, ni, 0, 1));
        return {};
    }));
    b.sgemmGflops = ms > 0 ? 2.0 * double(n) * double(n) * double(n) / (ms * 1e6) : 0;

    ATTNSCOPE_RETURN_IF_ERROR(bestOf(ws, o.repeats, ms, [&]() -> Status {
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(m.dst, m.src, o.copyBytes, cudaMemcpyDeviceToDevice, stream));
        return {};
    }));
    b.deviceMemoryGBs = ms > 0 ? 2.0 * double(o.copyBytes) / (ms * 1e6) : 0;  // each byte read once, written once

    ATTNSCOPE_RETURN_IF_ERROR(bestOf(ws, o.repeats, ms, [&]() -> Status {
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(m.dst, m.pinned, o.copyBytes, cudaMemcpyHostToDevice, stream));
        return {};
    }));
    b.hostToDeviceGBs = ms > 0 ? double(o.copyBytes) / (ms * 1e6) : 0;

    ATTNSCOPE_RETURN_IF_ERROR(bestOf(ws, o.repeats, ms, [&]() -> Status {
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(m.pinned, m.src, o.copyBytes, cudaMemcpyDeviceToHost, stream));
        return {};
    }));
    b.deviceToHostGBs = ms > 0 ? double(o.copyBytes) / (ms * 1e6) : 0;

    // Pageable host memory, touched before the timings (as a reused result's maps are).
    std::vector<float> pageable(o.copyBytes / sizeof(float), 1.0f);
    const std::size_t pageableBytes = pageable.size() * sizeof(float);
    ATTNSCOPE_RETURN_IF_ERROR(bestOf(ws, o.repeats, ms, [&]() -> Status {
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(pageable.data(), m.src, pageableBytes, cudaMemcpyDeviceToHost, stream));
        return {};
    }));
    b.pageableDeviceToHostGBs = ms > 0 ? double(pageableBytes) / (ms * 1e6) : 0;

    using Clock = std::chrono::steady_clock;
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    b.hostThreads = threads;
    double best = 0;
    for (int r = 0; r <= o.repeats; ++r) {
        const auto t0 = Clock::now();
        std::vector<std::future<void>> parts;
        const std::size_t share = (pageableBytes + std::size_t(threads) - 1) / std::size_t(threads);
        for (int t = 0; t < threads; ++t) {
            const std::size_t at = std::min(pageableBytes, share * std::size_t(t)), len = std::min(share, pageableBytes - at);
            auto* dst = reinterpret_cast<char*>(pageable.data()) + at;
            const auto* src = static_cast<const char*>(m.pinned) + at;
            parts.push_back(std::async(std::launch::async, [dst, src, len] { std::memcpy(dst, src, len); }));
        }
        for (auto& p : parts) p.get();
        const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (r > 0 && (best == 0 || t < best)) best = t;  // run 0 is the warm-up
    }
    b.hostMemcpyGBs = best > 0 ? double(pageableBytes) / (best * 1e6) : 0;

    best = 0;
    for (int r = 0; r < o.repeats; ++r) {
        const auto t0 = Clock::now();
        ATTNSCOPE_CUDA_TRY(cudaHostRegister(pageable.data(), pageableBytes, cudaHostRegisterDefault));
        ATTNSCOPE_CUDA_TRY(cudaHostUnregister(pageable.data()));
        const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (best == 0 || t < best) best = t;
    }
    b.hostRegisterGBs = best > 0 ? double(pageableBytes) / (best * 1e6) : 0;
    b.sgemmN = o.sgemmN;
    b.copyBytes = o.copyBytes;
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(stream));
    return {};
}

} // namespace

Expected<GpuBounds> measureGpuBounds(const GpuBoundsOptions& o)
{
    if (o.sgemmN < 1 || o.copyBytes < sizeof(float) || o.repeats < 1)
        return makeError(StatusCode::InvalidArgument,
                         "GPU bounds: expected sgemmN ≥ 1, copyBytes ≥ 4 and repeats ≥ 1, got " + std::to_string(o.sgemmN) +
                             ", " + std::to_string(o.copyBytes) + " and " + std::to_string(o.repeats));
    GpuBounds b;
    if (!deviceAvailable(&b.device)) return makeError(StatusCode::Unavailable, "GPU bounds: " + b.device);
    GpuBoundsOptions used = o;
#ifdef ATTNSCOPE_GPU_BOUNDS_MAX_SGEMM_N
    // The emulated command line (tests/parity/CMakeLists.txt: its bench tests), whose SGEMM is a plain loop: the
    // program's default sizes (an SGEMM of 4096²) would take it minutes. The sizes used are reported as always.
    used.sgemmN = std::min(used.sgemmN, ATTNSCOPE_GPU_BOUNDS_MAX_SGEMM_N);
    used.copyBytes = std::min<std::size_t>(used.copyBytes, ATTNSCOPE_GPU_BOUNDS_MAX_COPY_BYTES);
#endif
    Workspace& ws = Workspace::instance();
    std::lock_guard<std::mutex> lock(ws.mutex());
    ATTNSCOPE_RETURN_IF_ERROR(ws.init());
    Status s = measure(ws, used, b);
    if (!s.ok()) {
        (void)cudaStreamSynchronize(ws.stream());
        (void)cudaGetLastError();
        return s;
    }
    return b;
}

} // namespace attn::cuda
