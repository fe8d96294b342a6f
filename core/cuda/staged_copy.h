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

// `slots` chunks of `chunkBytes` of pinned host memory and an event per slot, allocated on first use and kept for
// the process (never freed: see Workspace). Not thread-safe: its owner's lock guards it.
class PinnedStaging {
public:
    PinnedStaging(int slots, std::size_t chunkBytes) : m_slots(slots), m_chunkBytes(chunkBytes) {}
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

// Straight copies of every piece on `stream` (each after its `ready` event), for when no pinned memory is to be
// had or the pieces are small; returns with the copies still in flight (synchronise the stream).
Status directDownload(cudaStream_t stream, const std::vector<HostPiece>& pieces);

} // namespace attn::cuda
