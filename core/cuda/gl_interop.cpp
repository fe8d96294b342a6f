// CUDA-OpenGL interop for the window's heatmaps (attnscope/device_interop.h): registered GL textures (a whole
// matrix, or the window's tiles of one) are mapped as CUDA arrays, a batch in one call, and filled with
// cudaMemcpy2DToArrayAsync straight from the workspace's Scores, Weights or Concat buffer, then unmapped; the
// values never go through host memory.
//
// This is the only file of core that sees OpenGL: cuda_gl_interop.h needs GL's types (GLuint, GLenum) and on
// x86 includes <GL/gl.h> itself (Debian: libgl-dev). No GL function is called and none is linked: the CUDA
// runtime talks to the GL driver. Without GL headers (ATTNSCOPE_NO_GL_HEADERS, set by CMakeLists.txt) every
// call is Unavailable.
//
// Locking: the registry and the copies hold the workspace's mutex, so a copy never overlaps a compute that is
// rewriting the buffers (compute() holds the same mutex for its whole call).
#include "cuda_backend.h"
#include "cuda_status.h"
#include "workspace.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#ifndef ATTNSCOPE_NO_GL_HEADERS
#include <cuda_gl_interop.h>
#endif

namespace attn::cuda {

#ifdef ATTNSCOPE_NO_GL_HEADERS

namespace {
constexpr const char* kNoGl = "device interop: built without OpenGL headers (install libgl-dev and reconfigure)";
}
bool glInteropAvailable(std::string* why)
{
    if (why) *why = kNoGl;
    return false;
}
bool resultCurrent(std::uint64_t deviceGeneration)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return false;  // a frame never waits for a compute (Workspace::beingReplaced)
    std::lock_guard<std::mutex> lock(ws.mutex());
    return deviceGeneration != 0 && ws.result().generation == deviceGeneration;
}
Status registerGlTexture(unsigned) { return makeError(StatusCode::Unavailable, kNoGl); }
Status unregisterGlTexture(unsigned) { return {}; }
Status fillGlTexture(unsigned, std::uint64_t, DeviceMatrix, int) { return makeError(StatusCode::Unavailable, kNoGl); }
Status fillGlTextures(std::uint64_t, const std::vector<GlTextureFill>& fills)
{
    return fills.empty() ? Status{} : makeError(StatusCode::Unavailable, kNoGl);
}

#else

namespace {

// Registered textures by GL id. Guarded by the workspace's mutex. Entries of a GL context that was destroyed
// without unregistering are left as they are (the process is ending; the driver frees them).
std::map<unsigned, cudaGraphicsResource_t>& registry()
{
    static auto* r = new std::map<unsigned, cudaGraphicsResource_t>;  // never destroyed, as the Workspace
    return *r;
}

std::string errorText(cudaError_t err) { return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")"; }

// One head's matrix in a workspace buffer: `height` rows of `width` floats, `pitch` floats apart.
struct Region {
    const float* ptr = nullptr;
    std::size_t width = 0, height = 0, pitch = 0;
};

// Where matrix `which` of head h lies in the buffers of result r (storage convention of kernels.h):
// scores and weights are H contiguous blocks of T·S floats (rows × cols = T×S, or S×T when column-major);
// head h's output is the column block h of the concat: T rows of d_v floats, H·d_v apart (row-major), or
// d_v contiguous rows of T floats (column-major, where the concat is stored H·d_v × T).
Region regionOf(const Workspace& ws, const DeviceResult& r, DeviceMatrix which, int h)
{
    const std::size_t T = std::size_t(r.T), S = std::size_t(r.S), dv = std::size_t(r.dv), H = std::size_t(r.H);
    Region g;
    if (which == DeviceMatrix::Output) {
        const float* concat = static_cast<const float*>(ws.buffer(Buf::Concat));
        if (r.columnMajor) {
            g = {concat + std::size_t(h) * dv * T, T, dv, T};
        } else {
            g = {concat + std::size_t(h) * dv, dv, T, H * dv};
        }
    } else {
        const float* base = static_cast<const float*>(ws.buffer(which == DeviceMatrix::Scores ? Buf::Scores : Buf::Weights));
        g.ptr = base + std::size_t(h) * T * S;
        g.width = r.columnMajor ? T : S;
        g.height = r.columnMajor ? S : T;
        g.pitch = g.width;
    }
    return g;
}

// Maps `resources` on `stream` (one call for all) for the lifetime of the guard; the unmap (one call, which
// orders the copies before later GL work) runs on every return path, and its error is reported unless an earlier
// one already was.
class MappedResources {
public:
    MappedResources(std::vector<cudaGraphicsResource_t>& resources, cudaStream_t stream) : m_res(resources), m_stream(stream)
    {
        m_err = cudaGraphicsMapResources(static_cast<int>(m_res.size()), m_res.data(), m_stream);
    }
    ~MappedResources()
    {
        if (m_err == cudaSuccess) (void)cudaGraphicsUnmapResources(static_cast<int>(m_res.size()), m_res.data(), m_stream);
    }
    cudaError_t mapError() const { return m_err; }
    // Unmaps now, so that its error can be returned; the destructor then does nothing.
    cudaError_t unmap()
    {
        if (m_err != cudaSuccess) return cudaSuccess;
        m_err = cudaErrorNotMapped;  // nothing left for the destructor
        return cudaGraphicsUnmapResources(static_cast<int>(m_res.size()), m_res.data(), m_stream);
    }
    MappedResources(const MappedResources&) = delete;
    MappedResources& operator=(const MappedResources&) = delete;

private:
    std::vector<cudaGraphicsResource_t>& m_res;
    cudaStream_t m_stream;
    cudaError_t m_err;
};

} // namespace

bool glInteropAvailable(std::string* why)
{
    std::string device;
    if (!deviceAvailable(&device)) {
        if (why) *why = device;
        return false;
    }
    // The CUDA devices that drive the current GL context: none when it runs elsewhere (another vendor's GPU,
    // Mesa's software rasteriser) or when no context is current.
    unsigned count = 0;
    int devices[4] = {};
    const cudaError_t err = cudaGLGetDevices(&count, devices, 4, cudaGLDeviceListAll);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) *why = "the current OpenGL context is not on a CUDA device (cudaGLGetDevices: " + errorText(err) + ")";
        return false;
    }
    int current = 0;
    if (const cudaError_t e = cudaGetDevice(&current); e != cudaSuccess) {
        if (why) *why = "cudaGetDevice failed: " + errorText(e);
        return false;
    }
    for (unsigned i = 0; i < count && i < 4; ++i)
        if (devices[i] == current) {
            if (why) *why = device;
            return true;
        }
    if (why)
        *why = "the current OpenGL context is not on CUDA device " + std::to_string(current) + " (" + device +
               "): it runs on " + (count ? "another CUDA device" : "no CUDA device");
    return false;
}

bool resultCurrent(std::uint64_t deviceGeneration)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced()) return false;  // a frame never waits for a compute (Workspace::beingReplaced)
    std::lock_guard<std::mutex> lock(ws.mutex());
    return deviceGeneration != 0 && ws.result().generation == deviceGeneration;
}

Status registerGlTexture(unsigned texture)
{
    if (texture == 0) return invalidArgument("registerGlTexture: texture 0 is not a GL texture");
    std::string why;
    if (!deviceAvailable(&why)) return makeError(StatusCode::Unavailable, "device interop: " + why);
    Workspace& ws = Workspace::instance();
    std::lock_guard<std::mutex> lock(ws.mutex());
    auto& reg = registry();
    if (auto it = reg.find(texture); it != reg.end()) {
        cudaGraphicsResource_t old = it->second;
        reg.erase(it);
        if (const cudaError_t e = cudaGraphicsUnregisterResource(old); e != cudaSuccess) {
            (void)cudaGetLastError();
            return fromCudaError(e, "cudaGraphicsUnregisterResource(old)", __FILE__, __LINE__);
        }
    }
    cudaGraphicsResource_t res = nullptr;
    // WriteDiscard: CUDA never reads the texture and every fill overwrites all of it (fillGlTexture checks
    // that the copy covers the whole level), so the driver need not preserve the old contents.
    const cudaError_t err =
        cudaGraphicsGLRegisterImage(&res, GLuint(texture), GL_TEXTURE_2D, cudaGraphicsRegisterFlagsWriteDiscard);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return fromCudaError(err, "cudaGraphicsGLRegisterImage(&res, texture, GL_TEXTURE_2D, WriteDiscard)", __FILE__,
                             __LINE__);
    }
    reg[texture] = res;
    return {};
}

Status unregisterGlTexture(unsigned texture)
{
    Workspace& ws = Workspace::instance();
    std::lock_guard<std::mutex> lock(ws.mutex());
    auto& reg = registry();
    const auto it = reg.find(texture);
    if (it == reg.end()) return {};
    cudaGraphicsResource_t res = it->second;
    reg.erase(it);
    if (const cudaError_t e = cudaGraphicsUnregisterResource(res); e != cudaSuccess) {
        (void)cudaGetLastError();
        return fromCudaError(e, "cudaGraphicsUnregisterResource(res)", __FILE__, __LINE__);
    }
    return {};
}

namespace {

// fillGlTexture(s) with the workspace's mutex held. `caller` names the function in messages; `whole`: each texture
// must be its whole matrix (fillGlTexture's contract), else the part of it at the fill's row0, col0.
Status fillLocked(Workspace& ws, std::uint64_t deviceGeneration, const std::vector<GlTextureFill>& fills, const std::string& caller,
                  bool whole)
{
    if (fills.empty()) return {};
    std::vector<cudaGraphicsResource_t> resources;
    resources.reserve(fills.size());
    for (const GlTextureFill& f : fills) {
        const auto it = registry().find(f.texture);
        if (it == registry().end())
            return invalidArgument(caller + ": GL texture " + std::to_string(f.texture) +
                                   " is not registered for device writes (call registerGlTexture first)");
        // Mapping one resource twice in a call is an error of the runtime's; named here instead.
        if (std::find(resources.begin(), resources.end(), it->second) != resources.end())
            return invalidArgument(caller + ": GL texture " + std::to_string(f.texture) +
                                   " comes twice in one batch (each texture takes one part)");
        resources.push_back(it->second);
    }
    const DeviceResult r = ws.result();
    if (deviceGeneration == 0)
        return makeError(StatusCode::Unavailable, caller + ": the result was not computed on the device "
                                                           "(deviceGeneration 0); upload its host matrices instead");
    if (r.generation != deviceGeneration)
        return makeError(StatusCode::Unavailable,
                         caller + ": the device no longer holds result generation " + std::to_string(deviceGeneration) +
                             (r.generation ? " (it holds generation " + std::to_string(r.generation) + ")"
                                           : std::string(" (a later compute replaced it)")) +
                             "; upload its host matrices instead");
    for (const GlTextureFill& f : fills) {
        if (f.head < 0 || f.head >= r.H)
            return invalidArgument(caller + ": head: expected 0…" + std::to_string(r.H - 1) + ", got " + std::to_string(f.head));
        if (f.row0 < 0 || f.col0 < 0)
            return invalidArgument(caller + ": texture " + std::to_string(f.texture) + ": a part's top-left cell must be in the "
                                   "matrix, got (row " + std::to_string(f.row0) + ", col " + std::to_string(f.col0) + ")");
    }

    MappedResources mapped(resources, ws.stream());
    if (mapped.mapError() != cudaSuccess)
        return fromCudaError(mapped.mapError(), "cudaGraphicsMapResources(count, resources, stream)", __FILE__, __LINE__);
    // Every texture checked before the first copy, so that a refused batch writes nothing.
    struct Copy {
        cudaArray_t array = nullptr;
        const float* src = nullptr;
        std::size_t pitch = 0, width = 0, height = 0;
    };
    std::vector<Copy> copies(fills.size());
    for (std::size_t i = 0; i < fills.size(); ++i) {
        const GlTextureFill& f = fills[i];
        const Region g = regionOf(ws, r, f.which, f.head);
        const std::string what = "texture " + std::to_string(f.texture) + " for head " + std::to_string(f.head) + " " + toString(f.which);
        cudaArray_t array = nullptr;
        ATTNSCOPE_CUDA_TRY(cudaGraphicsSubResourceGetMappedArray(&array, resources[i], 0, 0));
        cudaChannelFormatDesc desc{};
        cudaExtent extent{};
        unsigned flags = 0;
        ATTNSCOPE_CUDA_TRY(cudaArrayGetInfo(&desc, &extent, &flags, array));
        const bool r32f = desc.f == cudaChannelFormatKindFloat && desc.x == 32 && desc.y == 0 && desc.z == 0 && desc.w == 0;
        const std::string texels = std::to_string(extent.width) + "×" + std::to_string(extent.height);
        if (whole) {
            if (!r32f || extent.width != g.width || extent.height != g.height)
                return invalidArgument(caller + ": " + what + ": expected " + std::to_string(g.width) + "×" + std::to_string(g.height) +
                                       " (cols × rows) single-channel 32-bit float texels, got " + texels +
                                       (r32f ? "" : " of another format"));
        } else {
            if (!r32f)
                return invalidArgument(caller + ": " + what + ": expected single-channel 32-bit float texels, got " + texels +
                                       " of another format");
            const std::size_t row0 = std::size_t(f.row0), col0 = std::size_t(f.col0);
            if (col0 + extent.width > g.width || row0 + extent.height > g.height)
                return invalidArgument(caller + ": " + what + ": its " + texels + " texels (cols × rows) from (row " +
                                       std::to_string(f.row0) + ", col " + std::to_string(f.col0) + ") reach past the " +
                                       std::to_string(g.width) + "×" + std::to_string(g.height) + " matrix");
        }
        copies[i] = {array, g.ptr + std::size_t(f.row0) * g.pitch + std::size_t(f.col0), g.pitch, extent.width, extent.height};
    }
    for (const Copy& c : copies)
        ATTNSCOPE_CUDA_TRY(cudaMemcpy2DToArrayAsync(c.array, 0, 0, c.src, c.pitch * sizeof(float), c.width * sizeof(float), c.height,
                                                    cudaMemcpyDeviceToDevice, ws.stream()));
    ATTNSCOPE_CUDA_TRY(mapped.unmap());
    return {};
}

// The public entry points: never while a compute replaces the result (a frame does not wait for one).
Status fillChecked(std::uint64_t deviceGeneration, const std::vector<GlTextureFill>& fills, const std::string& caller, bool whole)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced())
        return makeError(StatusCode::Unavailable, "device interop: a compute on the device is replacing this result");
    std::lock_guard<std::mutex> lock(ws.mutex());
    Status s = fillLocked(ws, deviceGeneration, fills, caller, whole);
    // A failed runtime call is also returned by the next cudaGetLastError, which the next compute checks:
    // clear it here, where it was reported.
    if (!s.ok()) (void)cudaGetLastError();
    return s;
}

} // namespace

Status fillGlTexture(unsigned texture, std::uint64_t deviceGeneration, DeviceMatrix which, int head)
{
    return fillChecked(deviceGeneration, {GlTextureFill{texture, which, head, 0, 0}}, "fillGlTexture", true);
}

Status fillGlTextures(std::uint64_t deviceGeneration, const std::vector<GlTextureFill>& fills)
{
    return fillChecked(deviceGeneration, fills, "fillGlTextures", false);
}

#endif

} // namespace attn::cuda
