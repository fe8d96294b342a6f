#include "state/compute_worker.h"

#include <utility>

namespace app {

ComputeWorker::ComputeWorker(ComputeFn fn)
    : m_fn(fn ? std::move(fn)
              : ComputeFn([](attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out) {
                    return attn::compute(in, cfg, out);
                })),
      m_thread([this] { run(); })
{
}

ComputeWorker::~ComputeWorker()
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
        m_pending.reset();
    }
    m_cv.notify_all();
    m_thread.join();
}

void ComputeWorker::submit(attn::AttentionInput in, attn::AttentionConfig cfg, std::uint64_t revision)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending = Job{std::move(in), std::move(cfg), revision};
    }
    m_cv.notify_all();
}

std::optional<ComputeWorker::Finished> ComputeWorker::take(attn::AttentionResult& shown)
{
    std::optional<Finished> f;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_finished) return std::nullopt;
        f = std::move(m_finished);
        m_finished.reset();
        // The worker waits while m_finished is set, so it does not touch m_buffer now.
        if (f->status.ok()) std::swap(shown, m_buffer);
    }
    m_cv.notify_all();  // the worker may start the next job
    return f;
}

bool ComputeWorker::busy() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_running || m_pending.has_value();
}

double ComputeWorker::runningMs() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_running) return 0;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count();
}

void ComputeWorker::waitUntilDone()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    // A waiting job cannot start while a finished one is untaken: then it does not count as waiting here.
    m_cv.wait(lock, [this] { return !m_running && (!m_pending || m_finished); });
}

long ComputeWorker::jobsStarted() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_jobsStarted;
}

void ComputeWorker::run()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [this] { return m_stop || (m_pending && !m_finished); });
        if (m_stop) return;
        Job job = std::move(*m_pending);
        m_pending.reset();
        m_running = true;
        m_started = std::chrono::steady_clock::now();
        ++m_jobsStarted;
        lock.unlock();

        attn::Status st = m_fn(job.in, job.cfg, m_buffer);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count();

        lock.lock();
        m_running = false;
        m_finished = Finished{std::move(st), job.revision, ms};
        m_cv.notify_all();
    }
}

} // namespace app
