// The decoder forward's kernel launchers on the GPU (decoder_launchers.inl over decoder_kernels.cuh). The products
// are cuBLAS calls in decoder_device.cpp.
#define ATTNSCOPE_DECODER_GRID_CAP 65535
#define ATTNSCOPE_DECODER_LAUNCH(kernel, shape, stream, ...)                 \
    kernel<<<(shape).grid, (shape).block, 0, (stream)>>>(__VA_ARGS__);      \
    return cudaGetLastError()

#include "decoder_launchers.inl"
