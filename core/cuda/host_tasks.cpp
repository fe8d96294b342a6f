#include "host_tasks.h"

#include <algorithm>
#include <system_error>

namespace attn::cuda {

HostTasks& HostTasks::instance()
{
    static HostTasks* pool = new HostTasks;  // never deleted: see the header
    return *pool;
}

void HostTasks::start()
{
    // Under m_mutex, once.
    m_started = true;
    const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
    try {
        for (unsigned t = 0; t < n; ++t) m_threads.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
        // Fewer threads than asked (none: submit() says so, and tasks run where they are submitted).
    }
}

int HostTasks::threads()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_started) start();
    return static_cast<int>(m_threads.size());
}

bool HostTasks::submit(std::function<void()> task)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_started) start();
        if (m_threads.empty()) return false;
        m_queue.push_back(std::move(task));
    }
    m_wake.notify_one();
    return true;
}

void HostTasks::work()
{
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_wake.wait(lock, [&] { return !m_queue.empty(); });
            task = std::move(m_queue.front());
            m_queue.pop_front();
        }
        task();  // TaskGroup's wrapper: never throws
    }
}

void TaskGroup::run(std::function<void()> task)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_pending;
    }
    auto wrapped = [this, task = std::move(task)] {
        std::exception_ptr error;
        try {
            task();
        } catch (...) {
            error = std::current_exception();
        }
        // Notified under the lock: the group may be destroyed as soon as wait() sees m_pending reach 0.
        std::lock_guard<std::mutex> lock(m_mutex);
        if (error && !m_error) m_error = error;
        --m_pending;
        m_done.notify_all();
    };
    // When the pool has no thread, submit() leaves `wrapped` where it was: it runs here.
    std::function<void()> job(std::move(wrapped));
    if (!m_pool.submit(job)) job();
}

void TaskGroup::finish()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    m_done.wait(lock, [&] { return m_pending == 0; });
}

void TaskGroup::wait()
{
    finish();
    std::exception_ptr error;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        std::swap(error, m_error);
    }
    if (error) std::rethrow_exception(error);
}

void forEachOnPool(int count, const std::function<void(int)>& fn)
{
    TaskGroup group;
    for (int i = 0; i < count; ++i) group.run([&fn, i] { fn(i); });
    group.wait();
}

} // namespace attn::cuda
