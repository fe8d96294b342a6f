// attnscope/gpu_bounds.h: forwards to the CUDA backend (core/cuda/gpu_bounds.cpp) when it is built; without it the
// bounds are Unavailable.
#include "attnscope/gpu_bounds.h"

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#endif

namespace attn {

Expected<GpuBounds> measureGpuBounds(const GpuBoundsOptions& options)
{
#ifdef ATTNSCOPE_WITH_CUDA
    return cuda::measureGpuBounds(options);
#else
    (void)options;
    return makeError(StatusCode::Unavailable, "GPU bounds: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)");
#endif
}

} // namespace attn
