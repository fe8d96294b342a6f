// BackgroundSaver: writes session files on its own thread, so that the autosave of a large session
// (n=4096, d_model=512: 2M numbers, tens of MB of JSON, about a second) never stalls a frame.
// One write at a time; a session handed over while another waits replaces it (the latest wins).
#pragma once

#include <attnscope/preset_io.h>
#include <attnscope/status.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace app {

class BackgroundSaver {
public:
    BackgroundSaver() = default;
    ~BackgroundSaver();  // finishes the write in progress and the one waiting
    BackgroundSaver(const BackgroundSaver&) = delete;
    BackgroundSaver& operator=(const BackgroundSaver&) = delete;

    // Queues attn::saveSession(path, s); `revision` tags it. The thread starts on the first call.
    void save(std::string path, attn::Session s, std::uint64_t revision);
    struct Outcome {
        attn::Status status;
        std::uint64_t revision = 0;
    };
    // The outcome of the last write finished since the previous call, if any. Never waits.
    std::optional<Outcome> take();
    // Blocks until no write waits or runs.
    void flush();

private:
    struct Job {
        std::string path;
        attn::Session session;
        std::uint64_t revision = 0;
    };
    void run();

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::optional<Job> m_pending;
    bool m_writing = false;
    bool m_stop = false;
    std::optional<Outcome> m_done;
    std::thread m_thread;
};

} // namespace app
