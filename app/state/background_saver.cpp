#include "state/background_saver.h"

#include <utility>

namespace app {

BackgroundSaver::~BackgroundSaver()
{
    if (!m_thread.joinable()) return;
    flush();
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
}

void BackgroundSaver::save(std::string path, attn::Session s, std::uint64_t revision)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending = Job{std::move(path), std::move(s), revision};
        if (!m_thread.joinable()) m_thread = std::thread([this] { run(); });
    }
    m_cv.notify_all();
}

std::optional<BackgroundSaver::Outcome> BackgroundSaver::take()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    std::optional<Outcome> o = std::move(m_done);
    m_done.reset();
    return o;
}

void BackgroundSaver::flush()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [this] { return !m_pending && !m_writing; });
}

void BackgroundSaver::run()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [this] { return m_stop || m_pending; });
        if (!m_pending) return;  // stopping with nothing left to write
        Job job = std::move(*m_pending);
        m_pending.reset();
        m_writing = true;
        lock.unlock();
        attn::Status st = attn::saveSession(job.path, job.session);
        lock.lock();
        m_writing = false;
        m_done = Outcome{std::move(st), job.revision};
        m_cv.notify_all();
    }
}

} // namespace app
