// Device → host copies through page-locked staging slots, for the attention core's result (backend.cpp) and the
// decoder's forward (decoder_device.cpp).
//
// Why: a copy into pageable memory runs at the driver's one-thread rate (pageable_device_to_host_gbs in the GPU
// bounds: 11-14 GB/s on the H100's host), and waits for the stream. Copied into pinned slots instead, the link
// runs at its pinned rate (55 GB/s there) and a pool of host threads moves each chunk out into its destination
// while the link fills the next slots (the host's memcpy on 16 threads: 38 GB/s). A slot is refilled only once
// its chunk was moved out. Registering the destinations (cudaHostRegister) instead was measured slower than the
// pageable copy (13-20 GB/s), and they are Eigen buffers that move behind the caller's back.
#pragma once

#include "cuda_status.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace attn::cuda {

// `count` floats at `dev` bound for `host`. With `ready` set, the copy stream waits for that event first (it is
// recorded where the data is complete, e.g. after a layer on the computing stream), so that the copies of early
// pieces run while later work still computes.
struct HostPiece {
    float* host = nullptr;
    const float* dev = nullptr;
    std::size_t count = 0;
    cudaEvent_t ready = nullptr;
};

// (Namespace-scope constexpr: internal linkage, so that the emulated tests' two libraries may each set their own.)
// The staging both users hold: 16 slots of 8 MiB (128 MiB of pinned memory each). An 8 MiB chunk crosses the link in
// ~0.16 ms at 55 GB/s but takes one host thread ~3 ms to move out (the H100 host's memcpy: 38 GB/s on 16 threads,
// ~2.5 GB/s each), so 16 slots keep 16 threads moving while the link fills the next ones.
constexpr int kStagingSlots = 16;
#ifdef ATTNSCOPE_STAGING_CHUNK_BYTES  // the emulated tests: small chunks, so that small copies reuse every slot
constexpr std::size_t kStagingChunkBytes = ATTNSCOPE_STAGING_CHUNK_BYTES;
#else
constexpr std::size_t kStagingChunkBytes = std::size_t(8) << 20;
#endif
// Copies of fewer bytes in all go straight into their (pageable) destinations: the driver's own staging is as fast
// for them, and no pinned memory is held for them.
#ifdef ATTNSCOPE_STAGED_FROM_BYTES  // the emulated tests: their small problems go through the slots too
constexpr std::size_t kStagedFromBytes = ATTNSCOPE_STAGED_FROM_BYTES;
#else
constexpr std::size_t kStagedFromBytes = std::size_t(4) << 20;
#endif

// Uploads of fewer bytes in all go straight (stagedUpload): a call's inputs at a window's sizes.
#ifdef ATTNSCOPE_STAGED_UPLOAD_FROM_BYTES  // the emulated tests: their inputs of a few KiB go through the staging
constexpr std::size_t kStagedUploadFromBytes = ATTNSCOPE_STAGED_UPLOAD_FROM_BYTES;
#else
constexpr std::size_t kStagedUploadFromBytes = kStagedFromBytes;
#endif

// `slots` chunks of `chunkBytes` of pinned host memory and an event per slot, allocated on first use and kept for
// the process (never freed: see Workspace). Not thread-safe: its owner's lock guards it.
class PinnedStaging {
public:
    explicit PinnedStaging(int slots = kStagingSlots, std::size_t chunkBytes = kStagingChunkBytes)
        : m_slots(slots), m_chunkBytes(chunkBytes)
    {
    }
    // Allocates the slots and events once. ResourceExhausted when the pinned memory cannot be had (callers then
    // copy straight into pageable memory), Internal for another CUDA error.
    Status ensure();
    int slots() const { return m_slots; }
    std::size_t chunkFloats() const { return m_chunkBytes / sizeof(float); }
    float* slot(int s) const { return m_memory + std::size_t(s) * chunkFloats(); }
    cudaEvent_t event(int s) const { return m_events[std::size_t(s)]; }
    std::size_t bytes() const { return std::size_t(m_slots) * m_chunkBytes; }

private:
    int m_slots;
    std::size_t m_chunkBytes;
    float* m_memory = nullptr;
    std::vector<cudaEvent_t> m_events;
};

// Copies every piece on `stream` through `staging` (which ensure() must have allocated), in order, and returns
// once every chunk is in its destination. The destinations need not be touched beforehand: the pool's threads
// fault their pages in, in parallel.
Status stagedDownload(cudaStream_t stream, PinnedStaging& staging, const std::vector<HostPiece>& pieces);

// `bytes` at `host` bound for `dev` (host → device).
struct DevicePiece {
    void* dev = nullptr;
    const void* host = nullptr;
    std::size_t bytes = 0;
};

// Uploads every piece on `stream` through `staging`'s memory, seen as one pinned buffer: host threads copy the pieces
// into it side by side (a pageable upload runs at the driver's one-thread rate, 8-9 GB/s on the H100's host, and
// returns only once its source was staged), then each crosses at the pinned rate. Returns with the copies in flight:
// the staging must not be written again before they are done (the caller's stream orders that, e.g. a copy stream
// made to wait for an event after them). Pieces larger in all than the staging go straight, as does everything
// when ensure() fails for want of pinned memory.
Status stagedUpload(cudaStream_t stream, PinnedStaging& staging, const std::vector<DevicePiece>& pieces);

// Straight copies of every piece on `stream` (each after its `ready` event), for when no pinned memory is to be
// had or the pieces are small; returns with the copies still in flight (synchronise the stream).
Status directDownload(cudaStream_t stream, const std::vector<HostPiece>& pieces);

} // namespace attn::cuda
