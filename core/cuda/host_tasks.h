// Host threads for the CUDA path's host-side work: moving staged chunks out of pinned memory (staged_copy.cpp),
// copying inputs into it, and cutting a result into its heads' views (backend.cpp).
//
// Why a pool: that work comes in batches of a few milliseconds, several per compute, and starting a thread per task
// and batch cost more than the work (on the H100's 16-core host, about 60 thread starts a call made the maps-kept
// path at n = 4096 slower than before the copies overlapped the kernels). The threads start once, on first use, and
// wait for tasks; a TaskGroup is one batch, waited for as a whole.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attn::cuda {

class HostTasks {
public:
    // The process-wide pool: one thread per hardware thread (at most 64). Never destroyed, like Workspace: its
    // threads wait for tasks until the process ends.
    static HostTasks& instance();

    // Threads started (0 when none could be: every task then runs on the thread that submits it).
    int threads();
    // Queues `task` for the next free thread; false (nothing queued) when the pool has no thread.
    bool submit(std::function<void()> task);

private:
    HostTasks() = default;
    void start();
    void work();

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<std::function<void()>> m_queue;
    std::vector<std::thread> m_threads;
    bool m_started = false;
};

// A batch of tasks on the pool. wait() returns once every task run() gave it has finished, and rethrows the first
// exception one threw; the destructor waits too (never rethrowing), so tasks never outlive what they reference.
class TaskGroup {
public:
    explicit TaskGroup(HostTasks& pool = HostTasks::instance()) : m_pool(pool) {}
    TaskGroup(const TaskGroup&) = delete;
    TaskGroup& operator=(const TaskGroup&) = delete;
    ~TaskGroup() { finish(); }

    // Runs `task` on a pool thread, or here at once when the pool has none.
    void run(std::function<void()> task);
    void wait();

private:
    void finish();

    HostTasks& m_pool;
    std::mutex m_mutex;
    std::condition_variable m_done;
    int m_pending = 0;
    std::exception_ptr m_error;
};

// fn(i) for every i in [0, count) as one batch on the pool; rethrows the first exception.
void forEachOnPool(int count, const std::function<void(int)>& fn);

} // namespace attn::cuda
