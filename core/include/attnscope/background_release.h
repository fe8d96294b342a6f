// Freeing large host buffers off the caller's thread.
//
// Handing a GB of pages back to the kernel takes 60-90 ms on one thread (1.5 GB: 92 ms on the development machine).
// A call that replaces a large result (a decoder run on the GPU, the window's maps of a device result) gives what it
// replaced to a BackgroundRelease and goes on; the batch is destroyed on a thread of its own.
#pragma once

#include <future>
#include <mutex>
#include <system_error>
#include <utility>

namespace attn {

class BackgroundRelease {
public:
    BackgroundRelease() = default;
    BackgroundRelease(const BackgroundRelease&) = delete;
    BackgroundRelease& operator=(const BackgroundRelease&) = delete;
    // Waits for the last batch (a std::async future's destructor does).
    ~BackgroundRelease() = default;

    // Destroys `batch` on a thread of its own, after the batch before it is gone (so at most two are ever held), or
    // here when no thread is to be had.
    template <class T>
    void release(T&& batch)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_last.valid()) m_last.wait();
        try {
            m_last = std::async(std::launch::async, [held = std::forward<T>(batch)]() mutable { auto freedHere = std::move(held); });
        } catch (const std::system_error&) {
            // No thread: the batch is freed here, with the lambda that held it.
        }
    }

private:
    std::mutex m_mutex;
    std::future<void> m_last;
};

} // namespace attn
