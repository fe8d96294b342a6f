// Which backends this binary has, and how to describe them.
#include "attnscope/attention.h"

#include <Eigen/Core>
#include <string>

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#endif

namespace attn {

bool cudaBuilt()
{
#ifdef ATTNSCOPE_WITH_CUDA
    return true;
#else
    return false;
#endif
}

std::vector<Backend> availableBackends()
{
    std::vector<Backend> v{Backend::Cpu};
#ifdef ATTNSCOPE_WITH_CUDA
    if (cuda::deviceAvailable(nullptr)) v.push_back(Backend::Cuda);
#endif
    return v;
}

std::string backendDescription(Backend b)
{
    switch (b) {
    case Backend::Cpu:
        return "CPU (Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
               std::to_string(EIGEN_MINOR_VERSION) + ")";
    case Backend::Cuda: {
#ifdef ATTNSCOPE_WITH_CUDA
        std::string d;
        const bool ok = cuda::deviceAvailable(&d);
        return ok ? "CUDA: " + d : "CUDA unavailable: " + d;
#else
        return "CUDA unavailable: not built";
#endif
    }
    case Backend::Auto: {
        const auto v = availableBackends();
        return backendDescription(v.back());
    }
    }
    return "?";
}

} // namespace attn
