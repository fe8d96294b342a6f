// CUDA-OpenGL interop for the window's heatmaps (attnscope/device_interop.h): a registered GL texture is
// mapped as a CUDA array and filled with cudaMemcpy2DToArrayAsync straight from the workspace's Scores,
// Weights or Concat buffer, then unmapped; the values never go through host memory.
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

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

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

// Maps `res` on `stream` for the lifetime of the guard; the unmap (which orders the copy before later GL
// work) runs on every return path, and its error is reported unless an earlier one already was.
class MappedResource {
public:
    MappedResource(cudaGraphicsResource_t res, cudaStream_t stream) : m_res(res), m_stream(stream)
    {
        m_err = cudaGraphicsMapResources(1, &m_res, m_stream);
    }
    ~MappedResource()
    {
        if (m_err == cudaSuccess) (void)cudaGraphicsUnmapResources(1, &m_res, m_stream);
    }
    cudaError_t mapError() const { return m_err; }
    // Unmaps now, so that its error can be returned; the destructor then does nothing.
    cudaError_t unmap()
    {
        if (m_err != cudaSuccess) return cudaSuccess;
        m_err = cudaErrorNotMapped;  // nothing left for the destructor
        return cudaGraphicsUnmapResources(1, &m_res, m_stream);
    }
    MappedResource(const MappedResource&) = delete;
    MappedResource& operator=(const MappedResource&) = delete;

private:
    cudaGraphicsResource_t m_res;
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

// fillGlTexture with the workspace's mutex held.
Status fillLocked(Workspace& ws, unsigned texture, std::uint64_t deviceGeneration, DeviceMatrix which, int head)
{
    const auto it = registry().find(texture);
    if (it == registry().end())
        return invalidArgument("fillGlTexture: GL texture " + std::to_string(texture) +
                               " is not registered for device writes (call registerGlTexture first)");
    const DeviceResult r = ws.result();
    if (deviceGeneration == 0)
        return makeError(StatusCode::Unavailable, "fillGlTexture: the result was not computed on the device "
                                                  "(deviceGeneration 0); upload its host matrices instead");
    if (r.generation != deviceGeneration)
        return makeError(StatusCode::Unavailable,
                         "fillGlTexture: the device no longer holds result generation " + std::to_string(deviceGeneration) +
                             (r.generation ? " (it holds generation " + std::to_string(r.generation) + ")"
                                           : std::string(" (a later compute replaced it)")) +
                             "; upload its host matrices instead");
    if (head < 0 || head >= r.H)
        return invalidArgument("fillGlTexture: head: expected 0…" + std::to_string(r.H - 1) + ", got " + std::to_string(head));
    const Region g = regionOf(ws, r, which, head);
    const std::string what = std::string("head ") + std::to_string(head) + " " + toString(which);

    MappedResource mapped(it->second, ws.stream());
    if (mapped.mapError() != cudaSuccess)
        return fromCudaError(mapped.mapError(), "cudaGraphicsMapResources(1, &res, stream)", __FILE__, __LINE__);
    cudaArray_t array = nullptr;
    ATTNSCOPE_CUDA_TRY(cudaGraphicsSubResourceGetMappedArray(&array, it->second, 0, 0));
    cudaChannelFormatDesc desc{};
    cudaExtent extent{};
    unsigned flags = 0;
    ATTNSCOPE_CUDA_TRY(cudaArrayGetInfo(&desc, &extent, &flags, array));
    const bool r32f = desc.f == cudaChannelFormatKindFloat && desc.x == 32 && desc.y == 0 && desc.z == 0 && desc.w == 0;
    if (!r32f || extent.width != g.width || extent.height != g.height)
        return invalidArgument("fillGlTexture: texture " + std::to_string(texture) + " for " + what + ": expected " +
                               std::to_string(g.width) + "×" + std::to_string(g.height) +
                               " (cols × rows) single-channel 32-bit float texels, got " + std::to_string(extent.width) +
                               "×" + std::to_string(extent.height) + (r32f ? "" : " of another format"));
    ATTNSCOPE_CUDA_TRY(cudaMemcpy2DToArrayAsync(array, 0, 0, g.ptr, g.pitch * sizeof(float), g.width * sizeof(float),
                                                g.height, cudaMemcpyDeviceToDevice, ws.stream()));
    ATTNSCOPE_CUDA_TRY(mapped.unmap());
    return {};
}

} // namespace

Status fillGlTexture(unsigned texture, std::uint64_t deviceGeneration, DeviceMatrix which, int head)
{
    Workspace& ws = Workspace::instance();
    if (ws.beingReplaced())
        return makeError(StatusCode::Unavailable, "device interop: a compute on the device is replacing this result");
    std::lock_guard<std::mutex> lock(ws.mutex());
    Status s = fillLocked(ws, texture, deviceGeneration, which, head);
    // A failed runtime call is also returned by the next cudaGetLastError, which the next compute checks:
    // clear it here, where it was reported.
    if (!s.ok()) (void)cudaGetLastError();
    return s;
}

#endif

} // namespace attn::cuda
