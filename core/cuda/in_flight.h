// A call that rewrites the device's buffers (the attention core's compute, the decoder's forward and scan) counts
// itself while it holds them; a read of an earlier result checks the count first and gives up at once, since that
// call replaces what it asks about, instead of waiting for the call (a frame must never wait for a compute).
// Internal to attnscope_cuda.
#pragma once

#include <atomic>

namespace attn::cuda {

// Counts the scope in `calls` (counted before the caller takes its lock, so that readers stop waiting for it, and
// until after it let go).
class InFlight {
public:
    explicit InFlight(std::atomic<int>& calls) : m_calls(calls) { ++m_calls; }
    ~InFlight() { --m_calls; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

private:
    std::atomic<int>& m_calls;
};

} // namespace attn::cuda
