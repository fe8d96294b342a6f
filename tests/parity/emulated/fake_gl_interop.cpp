// Host stand-ins for the CUDA graphics-interop calls of core/cuda/gl_interop.cpp (see fake_gl_interop.h).
// A cudaGraphicsResource is a handle on a FakeTexture; its mapped array is the texture itself. Errors follow
// the runtime's documentation: unknown texture or bad arguments cudaErrorInvalidValue, mapping twice
// cudaErrorAlreadyMapped, using an unmapped resource cudaErrorNotMapped, a copy outside the array
// cudaErrorInvalidValue.
#include "fake_gl_interop.h"

#include <cuda_gl_interop.h>

#include <cstring>
#include <limits>
#include <map>

struct cudaGraphicsResource {
    unsigned texture = 0;
};
struct cudaArray {
    unsigned texture = 0;
};

namespace emu {

bool glContextOnDevice = true;
cudaError_t failNextMap = cudaSuccess;
cudaMemcpyKind lastCopyKind = cudaMemcpyDefault;
int copiesToArrays = 0;
int mapCalls = 0;

namespace {

std::map<unsigned, FakeTexture>& textures()
{
    static std::map<unsigned, FakeTexture> t;
    return t;
}
// One cudaArray per texture, at a stable address (what cudaGraphicsSubResourceGetMappedArray returns).
std::map<unsigned, cudaArray>& arrays()
{
    static std::map<unsigned, cudaArray> a;
    return a;
}

FakeTexture* find(unsigned id)
{
    auto it = textures().find(id);
    return it == textures().end() ? nullptr : &it->second;
}

} // namespace

void createTexture(unsigned id, unsigned width, unsigned height, bool float32)
{
    FakeTexture& t = textures()[id];
    const int registrations = t.registrations;  // GL keeps registrations across a respecification
    t = {};
    t.width = width;
    t.height = height;
    t.float32 = float32;
    t.texels.assign(std::size_t(width) * height, std::numeric_limits<float>::quiet_NaN());
    t.registrations = registrations;
    arrays()[id].texture = id;
}

void deleteTexture(unsigned id)
{
    textures().erase(id);
    arrays().erase(id);
}

const FakeTexture* texture(unsigned id) { return find(id); }

} // namespace emu

extern "C" {

cudaError_t cudaGetDevice(int* device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGLGetDevices(unsigned* count, int* devices, unsigned capacity, cudaGLDeviceList)
{
    *count = 0;
    if (!emu::glContextOnDevice) return cudaErrorNoDevice;
    *count = 1;
    if (capacity > 0) devices[0] = 0;
    return cudaSuccess;
}

cudaError_t cudaGraphicsGLRegisterImage(cudaGraphicsResource** resource, GLuint image, GLenum target, unsigned)
{
    emu::FakeTexture* t = emu::find(image);
    if (!t || target != GL_TEXTURE_2D) return cudaErrorInvalidValue;
    ++t->registrations;
    *resource = new cudaGraphicsResource{image};
    return cudaSuccess;
}

cudaError_t cudaGraphicsUnregisterResource(cudaGraphicsResource_t resource)
{
    if (!resource) return cudaErrorInvalidResourceHandle;
    if (emu::FakeTexture* t = emu::find(resource->texture)) {
        --t->registrations;
        t->mapped = false;
    }
    delete resource;
    return cudaSuccess;
}

cudaError_t cudaGraphicsMapResources(int count, cudaGraphicsResource_t* resources, cudaStream_t)
{
    if (emu::failNextMap != cudaSuccess) {
        const cudaError_t e = emu::failNextMap;
        emu::failNextMap = cudaSuccess;
        return e;
    }
    for (int i = 0; i < count; ++i) {
        emu::FakeTexture* t = emu::find(resources[i]->texture);
        if (!t) return cudaErrorInvalidResourceHandle;
        if (t->mapped) return cudaErrorAlreadyMapped;
        t->mapped = true;
    }
    ++emu::mapCalls;
    return cudaSuccess;
}

cudaError_t cudaGraphicsUnmapResources(int count, cudaGraphicsResource_t* resources, cudaStream_t)
{
    for (int i = 0; i < count; ++i) {
        emu::FakeTexture* t = emu::find(resources[i]->texture);
        if (!t) return cudaErrorInvalidResourceHandle;
        if (!t->mapped) return cudaErrorNotMapped;
        t->mapped = false;
    }
    return cudaSuccess;
}

cudaError_t cudaGraphicsSubResourceGetMappedArray(cudaArray_t* array, cudaGraphicsResource_t resource, unsigned index,
                                                  unsigned level)
{
    emu::FakeTexture* t = emu::find(resource->texture);
    if (!t) return cudaErrorInvalidResourceHandle;
    if (!t->mapped) return cudaErrorNotMapped;
    if (index != 0 || level != 0) return cudaErrorInvalidValue;
    *array = &emu::arrays()[resource->texture];
    return cudaSuccess;
}

cudaError_t cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* extent, unsigned* flags, cudaArray_t array)
{
    const emu::FakeTexture* t = emu::find(array->texture);
    if (!t) return cudaErrorInvalidResourceHandle;
    *desc = t->float32 ? cudaChannelFormatDesc{32, 0, 0, 0, cudaChannelFormatKindFloat}
                       : cudaChannelFormatDesc{8, 8, 8, 8, cudaChannelFormatKindUnsigned};
    *extent = {t->width, t->height, 0};  // a 2D array has depth 0
    *flags = 0;
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                     size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t)
{
    emu::FakeTexture* t = emu::find(dst->texture);
    if (!t) return cudaErrorInvalidResourceHandle;
    if (!t->mapped) return cudaErrorNotMapped;  // the array is only valid while its resource is mapped
    constexpr std::size_t texel = 4;  // bytes of an R32F texel, and of an RGBA8 one
    const std::size_t rowBytes = std::size_t(t->width) * texel;
    if (width % texel || wOffset % texel || spitch < width || wOffset + width > rowBytes || hOffset + height > t->height)
        return cudaErrorInvalidValue;
    emu::lastCopyKind = kind;
    ++emu::copiesToArrays;
    // "Device" memory is host memory in the emulation, so device-to-device is a plain copy.
    auto* out = reinterpret_cast<unsigned char*>(t->texels.data());
    const auto* in = static_cast<const unsigned char*>(src);
    for (std::size_t r = 0; r < height; ++r)
        std::memcpy(out + (hOffset + r) * rowBytes + wOffset, in + r * spitch, width);
    return cudaSuccess;
}

} // extern "C"
