// attn::cuda::deviceAvailable: is there a CUDA device this build can run on?
#include "cuda_backend.h"
#include "kernels.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

namespace attn::cuda {
namespace {

struct Probe {
    bool usable = false;
    std::string description;
};

std::string errorText(cudaError_t err)
{
    return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

Probe runProbe()
{
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (err == cudaErrorInsufficientDriver) {
            // cudart reports this both when libcuda is missing (no NVIDIA driver) and when it is too old.
            int runtime = 0;
            (void)cudaRuntimeGetVersion(&runtime);
            return {false, "no NVIDIA driver, or one too old for this build's CUDA " + std::to_string(runtime / 1000) +
                               "." + std::to_string(runtime % 1000 / 10) + " runtime (cudaErrorInsufficientDriver)"};
        }
        if (err == cudaErrorNoDevice) return {false, "no CUDA device (cudaErrorNoDevice)"};
        return {false, "CUDA initialisation failed: " + errorText(err)};
    }
    if (count == 0) return {false, "no CUDA device (device count 0)"};
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return {false, "cudaGetDevice failed: " + errorText(e)};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess)
        return {false, "cudaGetDeviceProperties failed: " + errorText(e)};
    const std::string arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
    if (cudaError_t e = probeKernelImage(); e != cudaSuccess) {
        (void)cudaGetLastError();
        return {false, std::string(prop.name) + " (" + arch + ") cannot run this build's kernels: " + errorText(e) +
                           "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(prop.major) +
                           std::to_string(prop.minor)};
    }
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB", double(prop.totalGlobalMem) / double(1ull << 30));
    return {true, std::string(prop.name) + " (" + arch + ", " + mem + ")"};
}

} // namespace

bool deviceAvailable(std::string* description)
{
    // Probed once per process (the first CUDA call initialises the driver, ~0.1–1 s); thread-safe static init.
    static const Probe probe = runProbe();
    if (description) *description = probe.description;
    return probe.usable;
}

} // namespace attn::cuda
