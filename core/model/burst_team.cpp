// See burst_team.h.
#include "burst_team.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace attn::detail {

namespace {

inline void relax()
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

thread_local BurstTeam* t_current = nullptr;

} // namespace

BurstTeam::BurstTeam(int threads)
{
    for (int i = 1; i < threads; ++i) m_helpers.emplace_back([this] { helper(); });
}

BurstTeam::~BurstTeam()
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop.store(true);
    }
    m_wake.notify_all();
    for (std::thread& t : m_helpers) t.join();
}

void BurstTeam::work()
{
    for (;;) {
        const std::int64_t t = m_next.fetch_add(1);
        if (t >= m_tasks) return;
        (*m_body)(t);
    }
}

void BurstTeam::run(std::int64_t tasks, const std::function<void(std::int64_t)>& body)
{
    if (m_helpers.empty() || tasks <= 1) {
        for (std::int64_t t = 0; t < tasks; ++t) body(t);
        return;
    }
    m_rest.store(false);
    m_body = &body;
    m_tasks = tasks;
    m_next.store(0);
    m_finished.store(0);
    bool wake = false;
    {
        // Under the mutex, so that a helper about to sleep either sees the new loop or is woken.
        std::lock_guard<std::mutex> lock(m_mutex);
        m_loop.fetch_add(1);
        wake = m_sleeping > 0;
    }
    if (wake) m_wake.notify_all();
    work();
    const int helpers = static_cast<int>(m_helpers.size());
    while (m_finished.load() < helpers) relax();
}

bool BurstTeam::waitForLoop(std::uint64_t& seen)
{
    using Clock = std::chrono::steady_clock;
    const Clock::time_point until = Clock::now() + std::chrono::microseconds(kSpinMicros);
    for (int i = 0; m_loop.load() == seen && !m_stop.load(); ++i) {
        relax();
        if (m_rest.load() || (i % 64 == 63 && Clock::now() > until)) {
            std::unique_lock<std::mutex> lock(m_mutex);
            ++m_sleeping;
            m_wake.wait(lock, [&] { return m_loop.load() != seen || m_stop.load(); });
            --m_sleeping;
        }
    }
    seen = m_loop.load();
    return !m_stop.load();
}

void BurstTeam::helper()
{
    std::uint64_t seen = 0;
    while (waitForLoop(seen)) {
        work();
        m_finished.fetch_add(1);
    }
}

void BurstTeam::rest() { m_rest.store(true); }

BurstScope::BurstScope(int threads) : m_team(threads), m_outer(t_current) { t_current = &m_team; }

BurstScope::~BurstScope() { t_current = m_outer; }

BurstTeam* BurstScope::team() { return t_current; }

} // namespace attn::detail
