// attnscope/device_interop.h: forwards to the CUDA backend (core/cuda/gl_interop.cpp) when it is built;
// without it every texture fill is Unavailable and the window uploads from host memory.
#include "attnscope/device_interop.h"

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#endif

namespace attn {

const char* toString(DeviceMatrix m)
{
    switch (m) {
    case DeviceMatrix::Scores: return "scores";
    case DeviceMatrix::Weights: return "weights";
    case DeviceMatrix::Output: return "output";
    }
    return "?";
}

#ifdef ATTNSCOPE_WITH_CUDA

bool deviceInteropAvailable(std::string* why) { return cuda::glInteropAvailable(why); }
bool deviceResultCurrent(std::uint64_t deviceGeneration) { return cuda::resultCurrent(deviceGeneration); }
Status registerGlTexture(unsigned texture) { return cuda::registerGlTexture(texture); }
Status unregisterGlTexture(unsigned texture) { return cuda::unregisterGlTexture(texture); }
Status fillGlTexture(unsigned texture, std::uint64_t deviceGeneration, DeviceMatrix which, int head)
{
    return cuda::fillGlTexture(texture, deviceGeneration, which, head);
}
Status fillGlTextures(std::uint64_t deviceGeneration, const std::vector<GlTextureFill>& fills)
{
    return cuda::fillGlTextures(deviceGeneration, fills);
}

#else

namespace {
constexpr const char* kNotBuilt = "device interop: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)";
}

bool deviceInteropAvailable(std::string* why)
{
    if (why) *why = kNotBuilt;
    return false;
}
bool deviceResultCurrent(std::uint64_t) { return false; }
Status registerGlTexture(unsigned) { return makeError(StatusCode::Unavailable, kNotBuilt); }
Status unregisterGlTexture(unsigned) { return {}; }
Status fillGlTexture(unsigned, std::uint64_t, DeviceMatrix, int) { return makeError(StatusCode::Unavailable, kNotBuilt); }
Status fillGlTextures(std::uint64_t, const std::vector<GlTextureFill>& fills)
{
    return fills.empty() ? Status{} : makeError(StatusCode::Unavailable, kNotBuilt);
}

#endif

} // namespace attn
