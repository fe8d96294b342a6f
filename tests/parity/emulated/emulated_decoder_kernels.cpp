// The decoder kernels' launchers (core/cuda/decoder_launchers.inl, the same source as decoder.cu) over the CPU
// emulation of CUDA: the kernels run as host C++, a fiber per GPU thread, on grids of at most 2 blocks so that their
// grid-stride loops run even on the tiny models' few rows.
#include "cuda_emulator.h"

#define ATTNSCOPE_DECODER_GRID_CAP 2
#define ATTNSCOPE_DECODER_LAUNCH(kernel, shape, stream, ...)                  \
    (void)(stream);                                                           \
    ::emu::launch((shape).grid, (shape).block, [&] { kernel(__VA_ARGS__); }); \
    return cudaSuccess

#include "decoder_launchers.inl"
