// Thread teams sized for the load of the machine, shared by the model families' forwards (core/model/).
#pragma once

#include "burst_team.h"

#include <Eigen/Core>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn {

// The forward's thread teams leave out the cores that other processes keep busy. On this 2-core machine,
// shared with builds, a 2-thread team whose other thread is descheduled waits a scheduler slice at every
// barrier: with one core kept busy by another process the forward at 128 tokens took 65 ms with 2 threads and
// 24 ms with one (`attnscope model --bench`); on an idle machine 2 threads take 15 ms. The load is what the
// whole machine used minus what this process used (/proc/stat and /proc/self/stat) over the last quarter
// second or more, so the forward's own threads never count as load (libgomp's OMP_DYNAMIC used the 15-minute
// load average, which the forward itself raised: after a few minutes of editing it ran on one thread on an
// idle machine). Scoped to the forward, the attention core's teams inside it included; the caller's thread
// count is restored. OMP_NUM_THREADS or OMP_DYNAMIC set in the environment is a user's choice and stands.
class TeamsForTheLoad {
public:
    TeamsForTheLoad()
    {
#ifdef _OPENMP
        if (std::getenv("OMP_NUM_THREADS") != nullptr || std::getenv("OMP_DYNAMIC") != nullptr) return;
        m_saved = omp_get_max_threads();
        omp_set_num_threads(threadsForTheLoad(m_saved));
#endif
    }
    ~TeamsForTheLoad()
    {
#ifdef _OPENMP
        if (m_saved > 0) omp_set_num_threads(m_saved);
#endif
    }
    TeamsForTheLoad(const TeamsForTheLoad&) = delete;
    TeamsForTheLoad& operator=(const TeamsForTheLoad&) = delete;

private:
#ifdef _OPENMP
    // Clock ticks: the machine's busy and total time summed over its CPUs, and this process's CPU time.
    struct Sample {
        bool ok = false;
        double busy = 0, total = 0, self = 0;
    };
    static Sample sample()
    {
        Sample s;
        if (FILE* f = std::fopen("/proc/stat", "r")) {
            unsigned long long v[8] = {};  // user nice system idle iowait irq softirq steal
            if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                            &v[6], &v[7]) == 8) {
                s.busy = double(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
                s.total = s.busy + double(v[3] + v[4]);
                s.ok = true;
            }
            std::fclose(f);
        }
        if (!s.ok) return s;
        s.ok = false;
        if (FILE* f = std::fopen("/proc/self/stat", "r")) {
            // pid (comm) state ... : comm may hold spaces and parentheses, so fields are counted after the last ')'.
            char buf[1024];
            const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
            buf[n] = 0;
            if (const char* p = std::strrchr(buf, ')')) {
                unsigned long long utime = 0, stime = 0;
                // After ')': state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
                if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2) {
                    s.self = double(utime + stime);
                    s.ok = true;
                }
            }
            std::fclose(f);
        }
        return s;
    }
    static int threadsForTheLoad(int maxThreads)
    {
        static std::mutex mutex;
        static Sample last;
        static int decided = 0;
        const std::lock_guard<std::mutex> lock(mutex);
        if (decided == 0) decided = maxThreads;
        const Sample now = sample();
        const int cpus = std::max(1, omp_get_num_procs());
        // 25 clock ticks per CPU: a quarter second at the usual 100 Hz, enough ticks for a load to show.
        if (now.ok && last.ok && now.total - last.total >= 25.0 * cpus) {
            const double elapsedPerCpu = (now.total - last.total) / cpus;
            const double others = std::max(0.0, (now.busy - last.busy) - (now.self - last.self)) / elapsedPerCpu;
            decided = std::clamp(cpus - static_cast<int>(others + 0.5), 1, maxThreads);
            last = now;
        } else if (now.ok && !last.ok) {
            last = now;
        }
        return decided;
    }
#endif

    int m_saved = 0;
};

namespace detail {

// How the products split over a team (decoder.cpp's product, weight_matrix.cpp's quantized products).
// Columns per task of a product: wide enough that each task's packing of the left operand pays off (at 128, packing
// was 15 % of a SmolLM2 forward), split evenly; a function of the sizes only, so that the sums (and so the bits)
// do not depend on the number of threads.
// The count of tasks is even: with 3 tasks (SmolLM2's 1536-wide gate and up) two cores did two rounds, one of them
// alone (75 % of the team's time), and a 192-wide K or V was one task on one core; even counts keep both busy.
inline constexpr Eigen::Index kProductCols = 512;
inline Eigen::Index taskCols(Eigen::Index cols)
{
    Eigen::Index tasks = (cols + kProductCols - 1) / kProductCols;
    if (cols >= 64) tasks += tasks % 2;
    return ((cols + tasks - 1) / tasks + 15) / 16 * 16;
}
// Below this many multiply-adds one thread does the product (a team costs more than it saves).
inline constexpr double kTeamWork = double(1 << 22);
// A team also when the right operand is large: a one-token step streams the weights, and one core alone does not
// reach the machine's memory bandwidth.
inline constexpr double kTeamBytes = double(1 << 20);
inline bool worthTeam(Eigen::Index rows, Eigen::Index inner, Eigen::Index cols)
{
    return double(rows) * double(inner) * double(cols) >= kTeamWork || double(inner) * double(cols) * 4 >= kTeamBytes;
}

// The threads a team started now would have (the TeamsForTheLoad in force, or OpenMP's setting).
inline int teamThreads()
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Runs body(t) for t in 0…tasks−1: on the thread's BurstTeam when it is in a BurstScope (an appended token: no
// region to open, so any product of more than one task is split), else on an OpenMP team when `team`
// (worthTeam), else on this thread. Tasks are scheduled dynamically; their results depend on t alone.
template <class Body>
void forTasks(Eigen::Index tasks, bool team, const Body& body)
{
    if (BurstTeam* burst = BurstScope::team()) {
        burst->run(tasks, [&body](std::int64_t t) { body(static_cast<Eigen::Index>(t)); });
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) if (team && tasks > 1)
    for (Eigen::Index t = 0; t < tasks; ++t) body(t);
}

} // namespace detail

} // namespace attn
