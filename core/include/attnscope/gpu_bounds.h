// The GPU's measured bounds, the figures every CUDA timing is reported against (`attnscope bench --backend cuda`,
// `attnscope model --backend cuda --bench`): what a float32 product, a pass over device memory and a copy over
// the host link can reach at best on this device, measured now (STYLE.md §9).
//
// Plain C++: no CUDA types. core implements it in core/cuda/gpu_bounds.cpp when built with CUDA, and answers
// Unavailable otherwise.
#pragma once

#include "attnscope/status.h"

#include <cstddef>
#include <string>

namespace attn {

// Sizes of the measurements; the defaults take about half a second on a current GPU (most of it allocating the
// pinned buffer) and use 192 MiB of device memory plus 2 × copyBytes on the device and copyBytes of pinned host
// memory. Tests use small ones.
struct GpuBoundsOptions {
    int sgemmN = 4096;                         // SGEMM of n×n·n×n (2n³ flop); default 4096, large enough to saturate
    std::size_t copyBytes = std::size_t(256) << 20;  // bytes per copy (device↔device and host↔device); default 256 MiB
    int repeats = 5;                           // timed repetitions of each; the best is kept; default 5
};

struct GpuBounds {
    std::string device;            // e.g. "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
    double sgemmGflops = 0;        // cuBLAS SGEMM, plain FP32 (TF32 off, as the backend runs it), GFLOP/s
    double deviceMemoryGBs = 0;    // a device-to-device cudaMemcpy: (read + write) bytes / s, GB/s (1e9)
    double hostToDeviceGBs = 0;    // cudaMemcpyAsync from page-locked (pinned) host memory, GB/s
    double deviceToHostGBs = 0;    // cudaMemcpyAsync to page-locked host memory, GB/s
    // What a copy into ordinary (pageable) host memory can reach, which is where results live: the driver's own
    // copy into a buffer already touched, the host's memcpy from pinned memory into one with every hardware thread
    // (what staging through pinned memory can reach at best), and cudaHostRegister's rate (page-locking a buffer in
    // place for a direct copy, then unlocking it).
    double pageableDeviceToHostGBs = 0;
    double hostMemcpyGBs = 0;
    double hostRegisterGBs = 0;
    int hostThreads = 0;
    int sgemmN = 0;                // the sizes measured (GpuBoundsOptions as used)
    std::size_t copyBytes = 0;
};

// Measures the bounds of the CUDA device the backend uses, with CUDA events on the backend's stream; runs while no
// compute() runs (it takes the backend's lock). Never throws.
// Returns Unavailable (no CUDA backend in this build, or no usable device: the message says why), InvalidArgument
// (sgemmN < 1, copyBytes < 4 or repeats < 1), ResourceExhausted (not enough device or pinned memory for the
// sizes asked), Internal (a CUDA or cuBLAS call failed; the message names it).
Expected<GpuBounds> measureGpuBounds(const GpuBoundsOptions& options = {});

} // namespace attn
