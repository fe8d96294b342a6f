#include "cuda_emulator.h"

#include <ucontext.h>

#include <cassert>
#include <memory>
#include <vector>

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace emu {
namespace {

// 64 KiB per fiber: the kernels keep a few scalars on the stack; std::function and the test's lambdas add
// little. 256 fibers (the largest block here) take 16 MiB.
constexpr std::size_t kStackBytes = 64 * 1024;
constexpr int kWarp = 32;

struct Fiber {
    ucontext_t context{};
    std::unique_ptr<char[]> stack;
    uint3 index{};
    bool done = false;
};

struct Barrier {
    int expected = 0;
    int arrived = 0;
    unsigned generation = 0;
};

ucontext_t g_scheduler;
std::vector<Fiber> g_fibers;
int g_current = 0;
const std::function<void()>* g_body = nullptr;
Barrier g_block;
std::vector<Barrier> g_warps;
std::vector<float> g_exchange;

void yieldToScheduler() { swapcontext(&g_fibers[g_current].context, &g_scheduler); }

void wait(Barrier& b)
{
    const unsigned generation = b.generation;
    if (++b.arrived == b.expected) {
        b.arrived = 0;
        ++b.generation;
        return;
    }
    while (b.generation == generation) yieldToScheduler();
}

void fiberEntry()
{
    (*g_body)();
    g_fibers[g_current].done = true;  // returning resumes uc_link, the scheduler
}

} // namespace

void syncThreads() { wait(g_block); }

float shuffleXor(float v, int laneMask)
{
    const int warp = g_current / kWarp, lane = g_current % kWarp;
    g_exchange[g_current] = v;
    wait(g_warps[warp]);
    const float r = g_exchange[warp * kWarp + (lane ^ laneMask)];
    wait(g_warps[warp]);  // nobody overwrites its slot before everyone has read
    return r;
}

namespace {
std::function<void()> g_launchHook;
} // namespace

void setLaunchHook(std::function<void()> hook) { g_launchHook = std::move(hook); }

void launch(dim3 grid, dim3 block, const std::function<void()>& body)
{
    if (g_launchHook) g_launchHook();
    gridDim = grid;
    blockDim = block;
    g_body = &body;
    const int n = int(block.x * block.y * block.z);
    assert(n % kWarp == 0 && "the backend's blocks are whole warps");
    g_fibers.resize(n);
    for (Fiber& f : g_fibers)
        if (!f.stack) f.stack.reset(new char[kStackBytes]);
    g_exchange.assign(n, 0.0f);
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                g_block = {n, 0, 0};
                g_warps.assign(n / kWarp, Barrier{kWarp, 0, 0});
                for (int t = 0; t < n; ++t) {
                    Fiber& f = g_fibers[t];
                    f.index = {unsigned(t) % block.x, unsigned(t) / block.x % block.y, unsigned(t) / (block.x * block.y)};
                    f.done = false;
                    getcontext(&f.context);
                    f.context.uc_stack.ss_sp = f.stack.get();
                    f.context.uc_stack.ss_size = kStackBytes;
                    f.context.uc_link = &g_scheduler;
                    makecontext(&f.context, fiberEntry, 0);
                }
                // Round robin until every thread of the block has returned.
                for (int remaining = n; remaining > 0;)
                    for (int t = 0; t < n; ++t) {
                        if (g_fibers[t].done) continue;
                        g_current = t;
                        threadIdx = g_fibers[t].index;
                        swapcontext(&g_scheduler, &g_fibers[t].context);
                        if (g_fibers[t].done) --remaining;
                    }
            }
}

} // namespace emu
