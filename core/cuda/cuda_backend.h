// Internal interface between core and the optional CUDA backend (attnscope_cuda). Plain C++: no CUDA
// types, so core's .cpp files include it without nvcc. Only compiled in when ATTNSCOPE_WITH_CUDA is set.
#pragma once

#include "attnscope/attention.h"
#include "attnscope/attention_maps.h"
#include "attnscope/device_interop.h"
#include "attnscope/gpu_bounds.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
// On success out.deviceGeneration names this result in the workspace, which keeps its scores, weights and
// concat on the device until the next call starts (that call sets it to 0 first, also when it fails).
Status compute(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out);

// The GPU's bounds (gpu_bounds.cpp): the implementation of attn::measureGpuBounds, same contract.
Expected<GpuBounds> measureGpuBounds(const GpuBoundsOptions& options);

// attn::DeviceMaps's reads (device_maps.cpp): whether the device still holds the result with `generation`;
// then of the result with `generation`, whose maps are T × S (queries ×
// keys); head and rect are already checked against those. Unavailable when the device no longer holds that result
// (or generation is 0), Internal for a CUDA error.
bool mapsCurrent(std::uint64_t generation);
Status mapTile(std::uint64_t generation, int T, int S, MapKind kind, int head, const MapRect& rect, Matrix& out);
// hasMask = false (and `out` untouched) when the result was computed without a mask.
Status mapMaskTile(std::uint64_t generation, int T, int S, int head, const MapRect& rect, MaskMatrix& out, bool& hasMask);
// 1 ≤ outRows ≤ rect.rows, 1 ≤ outCols ≤ rect.cols (AttentionMaps::preparePooled clamps them). With `stored`, rect and
// blocks are in the rows and columns of the map as the result stores it (keys × queries in Column layout), scanned
// in that order (attn::poolMax of HeadResult's matrix); the caller checked rect against those.
Status mapPooled(std::uint64_t generation, int T, int S, MapKind kind, int head, const MapRect& rect, int outRows,
                 int outCols, Matrix& out, bool stored = false);
// Every head's map of `kind` at once (one launch, three small copies): lo[h], hi[h] = the min and max of head h's
// finite unmasked cells (-0 below +0; +inf, -inf when none) and bad[h] = how many unmasked cells are not finite.
Status mapRanges(std::uint64_t generation, int T, int S, MapKind kind, std::vector<float>& lo, std::vector<float>& hi,
                 std::vector<unsigned long long>& bad);
// attn::fetchDeviceMaps (backend.cpp): every head's scores, weights and mask of `out` (a mapsOnDevice result the
// device still holds) into its HeadResults, as the copied path brings them, one map at a time (the lock released
// between them, `carryOn` asked before each: false stops it, Cancelled); out.mapsOnDevice becomes false.
Status fetchMaps(AttentionResult& out, const std::function<bool()>& carryOn);

// CUDA-OpenGL interop (gl_interop.cpp): the implementations of attnscope/device_interop.h, same contracts.
bool glInteropAvailable(std::string* why);
bool resultCurrent(std::uint64_t deviceGeneration);
Status registerGlTexture(unsigned texture);
Status unregisterGlTexture(unsigned texture);
Status fillGlTexture(unsigned texture, std::uint64_t deviceGeneration, DeviceMatrix which, int head);
Status fillGlTextures(std::uint64_t deviceGeneration, const std::vector<GlTextureFill>& fills);

} // namespace attn::cuda
