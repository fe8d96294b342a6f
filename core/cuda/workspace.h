// The backend's persistent device state: a cuBLAS handle, a stream, timing events, and device buffers that
// are allocated on first use, grown when a larger problem arrives and otherwise reused, so a recompute of
// the same size (the window's case) allocates nothing on the device.
//
// Thread safety: there is one Workspace per process. compute() holds its mutex for the whole call, so
// concurrent callers are safe but run one at a time (the GPU work of one call would serialise anyway).
#pragma once

#include "cuda_status.h"
#include "staged_copy.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <mutex>
#include <string>

namespace attn::cuda {

enum class Buf {
    X, Xkv, Wq, Wk, Wv, Wo, Bq, Bk, Bv, Bo,  // inputs
    Aq, Ak, Wvec,                           // additive score parameters
    Q, K, V,                                // projections, all heads side by side
    Qa, Ka,                                 // additive: Q_h·A_q and K_h·A_k per head
    Mask, Scores, Weights, Concat, Output,  // mask (one for all heads), per-head T×S blocks, outputs
    KeyPadding, ValidLens, Custom, KeyOpen, // the mask's parts when it is built on the device (mapsOnDevice)
    Flags,                                  // the finiteness check's first bad keys (a few 64-bit words)
    Pooled,                                 // a pooled overview on its way to the host (DeviceMaps)
    RangeLo, RangeHi, RangeBad,             // the maps' ranges: per-slice parts, then one value a map (DeviceMaps)
    Count
};

// Where the last successful compute left its per-head matrices in the workspace's buffers (Scores, Weights,
// Concat), so that gl_interop.cpp can copy them out while they are still there. generation 0 = none.
struct DeviceResult {
    std::uint64_t generation = 0;
    bool columnMajor = false;  // Layout::Column storage (see kernels.h)
    int T = 0, S = 0, H = 0, dv = 0;
    bool hasMask = false;      // the Mask buffer holds this result's mask (one for all heads)
};

class Workspace {
public:
    // Phase boundaries recorded on the stream; elapsed times between them become PhaseTimings.
    static constexpr int kEvents = 10;

    // The process-wide workspace. Deliberately never destroyed: freeing device memory from a static
    // destructor races the CUDA runtime's own teardown at exit, and the driver releases it all anyway.
    static Workspace& instance();

    std::mutex& mutex() { return m_mutex; }

    // compute() counts itself here (in_flight.h): from its start the last result is being replaced (it forgets it
    // first). A read of a result (a frame filling a texture, the window's worker asking for ranges, a tile) checks
    // this before taking the mutex and gives up at once, never waiting for that compute.
    std::atomic<int>& computesInFlight() { return m_computes; }
    bool beingReplaced() const { return m_computes.load() > 0; }

    // Creates the handle, stream and events on first call; later calls are free. A failed attempt is
    // retried next time.
    Status init();

    // A device buffer of at least `count` elements of T for `b`, reallocated only when it must grow.
    // Out of device memory gives ResourceExhausted naming the buffer and size.
    template <class T>
    Status get(Buf b, std::size_t count, T*& ptr)
    {
        void* p = nullptr;
        Status s = reserve(b, count * sizeof(T), p);
        ptr = static_cast<T*>(p);
        return s;
    }

    // Fails with ResourceExhausted, before anything is allocated, when `bytes` in all cannot fit in what
    // this workspace holds plus the device's free memory. `what` describes the problem for the message.
    Status checkFits(std::size_t bytes, const std::string& what) const;

    // The device pointer of `b` as the last compute left it (null when never allocated).
    void* buffer(Buf b) const { return m_buffers[static_cast<std::size_t>(b)].ptr; }

    // The last result held on the device. compute() calls forgetResult() before it touches any buffer and
    // publishResult() once it has succeeded, which returns the result's new generation (unique in the process).
    const DeviceResult& result() const { return m_result; }
    void forgetResult() { m_result = {}; }
    std::uint64_t publishResult(DeviceResult r)
    {
        r.generation = ++m_lastGeneration;
        m_result = r;
        return r.generation;
    }

    // Page-locked host memory for whole maps on their way to the host (backend.cpp, downloadStaged; staged_copy.h),
    // allocated on first use and kept.
    PinnedStaging& staging() { return m_staging; }

    cublasHandle_t blas() const { return m_blas; }
    cudaStream_t stream() const { return m_stream; }
    // The result's copies to the host run here, so that Q, K and V cross the link while the attention kernels still
    // compute on stream() (backend.cpp, run()).
    cudaStream_t copyStream() const { return m_copyStream; }
    cudaEvent_t event(int k) const { return m_events[k]; }

private:
    struct DeviceBuffer {
        void* ptr = nullptr;
        std::size_t capacity = 0;  // bytes
    };

    Status reserve(Buf b, std::size_t bytes, void*& ptr);

    std::mutex m_mutex;
    std::atomic<int> m_computes{0};
    bool m_ready = false;
    cublasHandle_t m_blas = nullptr;
    cudaStream_t m_stream = nullptr;
    cudaStream_t m_copyStream = nullptr;
    std::array<cudaEvent_t, kEvents> m_events{};
    PinnedStaging m_staging;
    std::array<DeviceBuffer, static_cast<std::size_t>(Buf::Count)> m_buffers{};
    DeviceResult m_result;
    std::uint64_t m_lastGeneration = 0;
};

} // namespace attn::cuda
