// Internal interface between core and the optional CUDA backend (attnscope_cuda). Plain C++: no CUDA
// types, so core's .cpp files include it without nvcc. Only compiled in when ATTNSCOPE_WITH_CUDA is set.
#pragma once

#include "attnscope/attention.h"

#include <string>

namespace attn::cuda {

// True when a CUDA device can be used now; `description` (optional) receives e.g. "NVIDIA H100 (sm_90)"
// or why none is usable ("no CUDA device (cudaErrorNoDevice)"). Probed once per process, then cached.
// Never throws or aborts.
bool deviceAvailable(std::string* description);

// Same contract as attn::cpu::computeEigen, on the GPU. `d` comes from attn::validate(in, cfg).
// Every CUDA failure becomes a Status (Internal/ResourceExhausted); fills out.timings per phase (GPU times
// from CUDA events; `copies` = host↔device transfers plus slicing the per-head views on the host).
// Device buffers live in one persistent per-process workspace, grown on demand and reused, so a recompute
// of the same size allocates nothing on the device. Thread-safe: concurrent calls are serialised by the
// workspace's mutex.
Status compute(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out);

} // namespace attn::cuda
