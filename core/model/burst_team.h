// A thread team for a burst of short parallel loops (internal to core/model): one appended token runs some 250
// products of a few hundred microseconds each, one after another.
//
// Why not OpenMP's team: the program runs libgomp with sleeping waiters (OMP_WAIT_POLICY=passive, app/main.cpp;
// spinning waiters cost the window's frames and the session computes far more, docs/performance.md), and a
// sleeping waiter is woken through the kernel at every parallel region: 75–120 µs a region on this virtual machine
// against ~5 µs for one that spins. Those wake-ups were half of an append's products. A BurstTeam's helpers spin
// between the loops of one burst (a scope: BurstScope), and sleep once no loop has come for kSpinMicros, so the
// team costs the machine nothing outside its burst.
//
// Each loop's tasks are taken one at a time from a shared counter by the caller and the helpers (dynamic
// scheduling); what a task computes depends on its index alone, so the results are the same bits whatever the
// number of threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attn::detail {

class BurstTeam {
public:
    // threads − 1 helpers (threads ≤ 1: none, every loop runs on the caller).
    explicit BurstTeam(int threads);
    ~BurstTeam();
    BurstTeam(const BurstTeam&) = delete;
    BurstTeam& operator=(const BurstTeam&) = delete;

    int threads() const { return static_cast<int>(m_helpers.size()) + 1; }

    // body(t) for every t in 0…tasks−1, on the caller and the helpers; returns when every task is done. Called by
    // the thread that made the team only (one loop at a time), never from inside a body.
    void run(std::int64_t tasks, const std::function<void(std::int64_t)>& body);

    // The helpers sleep at once instead of spinning for the next loop: before work that opens OpenMP regions of its
    // own (a long text's attention), whose threads would share the cores with spinning helpers. The next run wakes
    // them. Called by the thread that made the team, between loops.
    void rest();

    // A helper spins this long for the next loop before it sleeps.
    static constexpr int kSpinMicros = 300;

private:
    void helper();
    // Until the next loop (true; `seen` becomes its number) or the team's end (false): spinning, then asleep.
    bool waitForLoop(std::uint64_t& seen);
    void work();

    std::vector<std::thread> m_helpers;
    std::mutex m_mutex;                      // guards the sleep and wake of helpers
    std::condition_variable m_wake;
    int m_sleeping = 0;                      // helpers asleep on m_wake (under m_mutex)
    std::atomic<std::uint64_t> m_loop{0};    // the count of loops posted; a change means a new loop
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_rest{false};         // sleep without spinning (rest) until the next loop
    std::atomic<std::int64_t> m_next{0};     // the next task of the current loop
    std::atomic<int> m_finished{0};          // helpers done with the current loop
    std::int64_t m_tasks = 0;                // the current loop (written before m_loop changes)
    const std::function<void(std::int64_t)>* m_body = nullptr;
};

// Makes a BurstTeam the current thread's team for its lifetime (BurstScope::team()): the core/model products called
// in the scope run their tasks on it instead of opening an OpenMP region each. Scopes nest (the inner one wins).
class BurstScope {
public:
    explicit BurstScope(int threads);
    ~BurstScope();
    BurstScope(const BurstScope&) = delete;
    BurstScope& operator=(const BurstScope&) = delete;

    // The current thread's team, or nullptr outside a scope.
    static BurstTeam* team();
    // This scope's own team.
    BurstTeam& own() { return m_team; }

private:
    BurstTeam m_team;
    BurstTeam* m_outer = nullptr;
};

} // namespace attn::detail
