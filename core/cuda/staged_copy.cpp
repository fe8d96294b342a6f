#include "staged_copy.h"

#include "host_tasks.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace attn::cuda {

Status PinnedStaging::ensure()
{
    if (m_memory) return {};
    if (m_events.empty()) {
        m_events.assign(std::size_t(m_slots), nullptr);
        // Staging events only order copies (cudaEventSynchronize): no timing, so the cheaper kind.
        for (cudaEvent_t& e : m_events) {
            if (const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); err != cudaSuccess) {
                m_events.clear();
                return fromCudaError(err, "cudaEventCreateWithFlags(&e, cudaEventDisableTiming)", __FILE__, __LINE__);
            }
        }
    }
    void* p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, bytes());
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        char mib[32];
        std::snprintf(mib, sizeof mib, "%.1f MiB", double(bytes()) / double(1 << 20));
        return makeError(StatusCode::ResourceExhausted, std::string("pinned host memory: cannot allocate ") + mib + " of staging");
    }
    if (err != cudaSuccess) return fromCudaError(err, "cudaMallocHost(&p, staging)", __FILE__, __LINE__);
    m_memory = static_cast<float*>(p);
    return {};
}

Status directDownload(cudaStream_t stream, const std::vector<HostPiece>& pieces)
{
    for (const HostPiece& p : pieces) {
        if (p.ready) ATTNSCOPE_CUDA_TRY(cudaStreamWaitEvent(stream, p.ready, 0));
        if (p.count) ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(p.host, p.dev, p.count * sizeof(float), cudaMemcpyDeviceToHost, stream));
    }
    return {};
}

// The device copies chunk k into slot k mod slots while the host pool's threads (host_tasks.h) move the chunks before
// it out; a slot is refilled once its chunk was moved out. The first version started a thread per chunk and waited
// for the slots in order: 6 GB/s on the H100's host.
Status stagedDownload(cudaStream_t stream, PinnedStaging& staging, const std::vector<HostPiece>& pieces)
{
    // Chunks of a whole slot for large copies; smaller for a few tens of MB (a result's Q, K, V, concat and output),
    // so that every pool thread moves a share: one thread moves 8 MiB in about 3 ms on the H100's host, where the
    // link brings it in 0.15 ms. At least 2 chunks a thread, and at least 1/32 of a slot.
    std::size_t total = 0;
    for (const HostPiece& p : pieces) total += p.count;
    const std::size_t threads = std::size_t(std::max(1, HostTasks::instance().threads()));
    const std::size_t chunk =
        std::clamp((total + 2 * threads - 1) / (2 * threads), std::max<std::size_t>(1, staging.chunkFloats() / 32), staging.chunkFloats());
    const int slots = staging.slots();
    std::mutex mutex;
    std::condition_variable freed;
    std::vector<bool> busy(std::size_t(slots), false);
    cudaError_t moveError = cudaSuccess;
    Status failed;
    {
        // Declared after what its tasks use, so that it is waited for (destroyed) first on every way out.
        TaskGroup moves;
        int k = 0;
        for (const HostPiece& p : pieces) {
            if (p.ready && p.count) {
                if (const cudaError_t e = cudaStreamWaitEvent(stream, p.ready, 0); e != cudaSuccess) {
                    failed = fromCudaError(e, "cudaStreamWaitEvent(stream, piece.ready)", __FILE__, __LINE__);
                    break;
                }
            }
            for (std::size_t at = 0; at < p.count && failed.ok(); at += chunk, ++k) {
                const int s = k % slots;
                const std::size_t n = std::min(chunk, p.count - at);
                float* slot = staging.slot(s);
                {
                    std::unique_lock<std::mutex> lock(mutex);
                    freed.wait(lock, [&] { return !busy[std::size_t(s)] || moveError != cudaSuccess; });
                    if (moveError != cudaSuccess) break;
                    busy[std::size_t(s)] = true;
                }
                cudaEvent_t copied = staging.event(s);
                const cudaError_t e1 = cudaMemcpyAsync(slot, p.dev + at, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
                const cudaError_t e2 = e1 == cudaSuccess ? cudaEventRecord(copied, stream) : e1;
                if (e2 != cudaSuccess) {
                    failed = fromCudaError(e2, "cudaMemcpyAsync(staging slot)", __FILE__, __LINE__);
                    std::lock_guard<std::mutex> lock(mutex);
                    busy[std::size_t(s)] = false;
                    break;
                }
                // Moved out by a pool thread once the copy is done (here, at once, when the pool has no thread).
                moves.run([&, dst = p.host + at, slot, n, s, copied] {
                    const cudaError_t e = cudaEventSynchronize(copied);
                    if (e == cudaSuccess) std::memcpy(dst, slot, n * sizeof(float));
                    {
                        std::lock_guard<std::mutex> lock(mutex);
                        if (e != cudaSuccess && moveError == cudaSuccess) moveError = e;
                        busy[std::size_t(s)] = false;
                    }
                    freed.notify_all();
                });
            }
            if (!failed.ok()) break;
            std::lock_guard<std::mutex> lock(mutex);
            if (moveError != cudaSuccess) break;
        }
        moves.wait();
    }
    if (failed.ok() && moveError != cudaSuccess) failed = fromCudaError(moveError, "cudaEventSynchronize(staging)", __FILE__, __LINE__);
    return failed;
}

Status stagedUpload(cudaStream_t stream, PinnedStaging& staging, const std::vector<DevicePiece>& pieces)
{
    std::size_t total = 0;
    for (const DevicePiece& p : pieces) total += p.bytes;
    bool staged = total >= kStagedUploadFromBytes && total <= staging.bytes();
    if (staged) {
        const Status s = staging.ensure();
        if (!s.ok() && s.code != StatusCode::ResourceExhausted) return s;
        staged = s.ok();
    }
    if (!staged) {
        for (const DevicePiece& p : pieces)
            if (p.bytes) ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(p.dev, p.host, p.bytes, cudaMemcpyHostToDevice, stream));
        return {};
    }
    // The staging's last readers (an earlier call's uploads that an error left in flight) ran on this stream.
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(stream));
    // The pieces' bytes side by side in the pinned buffer, cut into near-equal spans of at least an eighth of a slot
    // (1 MiB), one per pool thread.
    char* pinned = reinterpret_cast<char*>(staging.slot(0));
    const std::size_t minSpan = std::max<std::size_t>(1, staging.chunkFloats() * sizeof(float) / 8);
    const std::size_t threads = std::max<std::size_t>(
        1, std::min<std::size_t>(std::max(1, HostTasks::instance().threads()), total / minSpan));
    auto copySpan = [&](std::size_t from, std::size_t to) {  // bytes [from, to) of the pieces laid end to end
        std::size_t base = 0;
        for (const DevicePiece& p : pieces) {
            const std::size_t a = std::max(from, base), b = std::min(to, base + p.bytes);
            if (a < b) std::memcpy(pinned + a, static_cast<const char*>(p.host) + (a - base), b - a);
            base += p.bytes;
        }
    };
    const std::size_t share = (total + threads - 1) / threads;
    forEachOnPool(static_cast<int>(threads), [&](int t) {
        copySpan(share * std::size_t(t), std::min(total, share * (std::size_t(t) + 1)));
    });
    std::size_t at = 0;
    for (const DevicePiece& p : pieces) {
        if (p.bytes) ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(p.dev, pinned + at, p.bytes, cudaMemcpyHostToDevice, stream));
        at += p.bytes;
    }
    return {};
}

} // namespace attn::cuda
