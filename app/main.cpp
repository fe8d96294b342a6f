// attnscope entry point: everything happens in the command-line dispatcher.
#include "cli/cli.h"

#include <cstdlib>

#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace {

// OpenMP threads that wait for work sleep instead of spinning (OMP_WAIT_POLICY=passive), unless the user chose.
// libgomp reads the policy from the environment once, when it is loaded, before main: so the program sets it
// and starts itself again (same process id, same arguments). Measured with `attnscope model --bench` on the
// 2-core machine (docs/performance.md): 128 tokens took 62 ms with spinning threads and 15 ms with sleeping
// ones, two threads each; the window's render thread also keeps its core while a compute's team waits.
// If the restart fails the program simply goes on with the library's default policy.
void preferSleepingOpenMpThreads(char** argv)
{
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

// Buffers under 8 MiB (Eigen's packing blocks and temporaries, a model run's matrices up to ~1000 tokens) come
// from the heap, and up to 256 MiB of freed ones stay there for the next compute instead of a fresh mmap (zeroed
// pages, a fault per 4 KiB) each time: glibc's default threshold adapts only up to the sizes freed so far and
// gives memory back above twice that. `attnscope model --bench`, 4 runs each: 128 tokens 18.3 → 15.7 ms median,
// 512 tokens into a fresh run 115 → 64 ms (page faults were 12% of a `perf` profile).
// Larger buffers are mapped, so that they grow in place: appending a token to a long text adds a row to every
// layer's residual stream, context and values (SmolLM2 at 4096 tokens: 61 matrices of 4096 × 576 floats, 30 of
// 4096 × 192), and glibc grows a mapped buffer by remapping its pages, where a heap buffer is copied whole:
// appending one token to 4096 took 185 ms with the copies and 66 ms without (mean of 5, the same minutes); freed,
// mapped buffers go back to the system at once. The forward at 4096 tokens took as long with 8 as with 64 MiB
// (31.0 and 34.8 s, the same minutes).
void keepComputeBuffers()
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 8 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

} // namespace

int main(int argc, char** argv)
{
    preferSleepingOpenMpThreads(argv);
    keepComputeBuffers();
    return app::runCli(argc, argv);
}
