// Heatmap textures filled straight from device memory (CUDA-OpenGL interop): after a compute on the CUDA
// backend, the window copies a head's scores, weights or output from the backend's device buffers into an
// OpenGL texture, so the values never cross back to the host and up again for display.
//
// Plain C++ API: GL textures are named by their id (a GLuint passed as unsigned), results by
// AttentionResult::deviceGeneration. No CUDA or GL headers here; core implements it in core/cuda/gl_interop.cpp
// when built with CUDA, and as "Unavailable" otherwise. Every function needs the GL context that owns the
// textures to be current on the calling thread, and never throws or aborts: failures are Statuses.
//
// Contract of a texture: GL_TEXTURE_2D, internal format GL_R32F, level 0 of width × height texels equal to the
// host matrix's cols × rows (row r of the matrix is texture row r), storage specified before registration.
// Respecifying the storage (glTexImage2D with another size) or deleting the texture needs an
// unregisterGlTexture first.
#pragma once

#include "attnscope/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// A per-head matrix of the last result, as HeadResult stores it (in the session's layout).
enum class DeviceMatrix {
    Scores,   // HeadResult::scores: Row T×S, Column S×T
    Weights,  // HeadResult::weights: same shape
    Output,   // HeadResult::output: Row T×d_v, Column d_v×T
};
const char* toString(DeviceMatrix m);

// True when textures of the GL context current on this thread can be filled from the CUDA device: this build
// has the CUDA backend, a device is usable, and the GL context runs on that device (cudaGLGetDevices).
// `why` (optional) receives the device, or why not, e.g. "no CUDA device (cudaErrorNoDevice)" or "the
// current OpenGL context is not on a CUDA device (e.g. Mesa software rendering)". Not cached.
bool deviceInteropAvailable(std::string* why = nullptr);

// True when the device still holds the result with this deviceGeneration (non-zero, and no compute on the
// device has started since). A false result is not an error: the host copy of the result is still valid.
bool deviceResultCurrent(std::uint64_t deviceGeneration);

// Registers GL texture `texture` for writes from the device (replacing an earlier registration of the
// same id). Returns Unavailable (no CUDA build or device), InvalidArgument (texture 0), Internal (the
// CUDA call failed, e.g. the context is not on a CUDA device or the format is not supported).
Status registerGlTexture(unsigned texture);

// Releases the registration of `texture`; unknown ids are ignored (ok). Internal when the CUDA call fails.
Status unregisterGlTexture(unsigned texture);

// Copies matrix `which` of head `head` (0 ≤ head < H) of the result with `deviceGeneration` from device
// memory into the registered `texture` (device to device: map, copy, unmap on the backend's stream; GL
// commands issued after the call see the new texels). Returns:
//   Unavailable      no CUDA build/device; or deviceGeneration 0 (computed on the CPU); or the device no
//                    longer holds that result (a later compute started): use the host matrix then
//   InvalidArgument  texture not registered; head out of range; texture size is not the matrix's cols × rows
//                    or not 32-bit float (the message names expected vs actual)
//   Internal         a CUDA error (the message names the call)
Status fillGlTexture(unsigned texture, std::uint64_t deviceGeneration, DeviceMatrix which, int head);

// One registered texture of a batch (fillGlTextures): its width × height texels take the cells of matrix `which` of
// head `head` whose top-left is (row0, col0), as a tile of the window's tiled heatmaps does. The texture need not
// cover the matrix; it must lie inside it.
struct GlTextureFill {
    unsigned texture = 0;
    DeviceMatrix which = DeviceMatrix::Scores;
    int head = 0;
    int row0 = 0, col0 = 0;
};

// Fills every texture of `fills` from the result with `deviceGeneration`: all mapped in one call, each filled by a
// device-to-device copy of its part, all unmapped in one call (a map and an unmap cost a synchronisation with GL
// each, so a frame's tiles share them). Statuses as fillGlTexture's, the messages naming the texture; besides,
// InvalidArgument when a part reaches past the matrix (expected vs actual) or a texture comes twice. On any error
// no texture is written. An empty batch is ok.
Status fillGlTextures(std::uint64_t deviceGeneration, const std::vector<GlTextureFill>& fills);

} // namespace attn
