// The emulated side of CUDA-OpenGL interop (fake_gl_interop.cpp): a few "GL textures" that are plain host
// arrays, which the CUDA graphics calls of core/cuda/gl_interop.cpp register, map and copy into as the
// runtime would, with the runtime's argument checks. Lets tests/parity/test_gl_interop_emulated.cpp check
// what lands in a texture without a GPU or a GL context. Test-only.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

namespace emu {

struct FakeTexture {
    unsigned width = 0, height = 0;
    bool float32 = true;           // GL_R32F; false: some other format (GL_RGBA8, 4 channels of 8 bits)
    std::vector<float> texels;     // width × height, row 0 first; NaN until written
    int registrations = 0;         // live cudaGraphicsResource handles on it
    bool mapped = false;
};

// Creates (or replaces) GL texture `id` of width × height texels.
void createTexture(unsigned id, unsigned width, unsigned height, bool float32 = true);
void deleteTexture(unsigned id);
// Null when there is no such texture.
const FakeTexture* texture(unsigned id);

// What cudaGLGetDevices reports: the current GL context runs on emulated device 0 (true), or on no CUDA
// device (false: cudaErrorNoDevice).
extern bool glContextOnDevice;
// The next cudaGraphicsMapResources fails with this error (then resets to cudaSuccess).
extern cudaError_t failNextMap;
// The kind of the last cudaMemcpy2DToArray(Async) call, and how many such copies ran.
extern cudaMemcpyKind lastCopyKind;
extern int copiesToArrays;
// How many cudaGraphicsMapResources calls succeeded (each maps a batch of resources).
extern int mapCalls;

} // namespace emu
