// A CPU emulation of the few CUDA device built-ins the backend's kernels use, so that
// core/cuda/attention_kernels.cuh compiles as host C++ and runs here. Each CUDA thread of a block is a
// fiber (ucontext) on one OS thread; blocks run one after another; __syncthreads and warp shuffles are
// cooperative barriers. Slow (a context switch per barrier) but exact about the order of operations, so
// results are bitwise what the kernels' code computes in float. Test-only.
#pragma once

#include <vector_types.h>

#include <algorithm>
#include <functional>

// The CUDA built-in index variables, set for the running fiber.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

namespace emu {
void syncThreads();
float shuffleXor(float v, int laneMask);
// Runs `body` once per thread of every block of `grid`.
void launch(dim3 grid, dim3 block, const std::function<void()>& body);
// Tests: called at the start of every launch from then on (empty: none), on the launching thread; e.g. to hold a
// compute inside the backend while the test calls in from another thread. Set and cleared while no launch runs.
void setLaunchHook(std::function<void()> hook);
} // namespace emu

// The CUDA headers define these as compiler attributes; here they mean plain host code.
#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#define __global__
#define __device__
#define __forceinline__ inline
// Blocks run one at a time, so one static instance per kernel is exactly "one per block".
#define __shared__ static
#define __syncthreads() ::emu::syncThreads()
#define __shfl_xor_sync(mask, v, laneMask) ::emu::shuffleXor((v), (laneMask))
using std::min;
// Fibers run one at a time and never switch inside this call, so a plain read-compare-write is atomic here.
inline unsigned long long atomicMin(unsigned long long* address, unsigned long long value)
{
    const unsigned long long old = *address;
    if (value < old) *address = value;
    return old;
}
