#include "cuda_status.h"

#include <cstring>
#include <string>

namespace attn::cuda {
namespace {

// __FILE__ is an absolute path on most builds; keep it from "core/" on so messages stay short and stable.
const char* shortPath(const char* file)
{
    const char* p = std::strstr(file, "core/cuda/");
    return p ? p : file;
}

std::string where(const char* call, const char* file, int line)
{
    return std::string(" in ") + call + " at " + shortPath(file) + ":" + std::to_string(line);
}

} // namespace

Status fromCudaError(cudaError_t err, const char* call, const char* file, int line)
{
    const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::ResourceExhausted : StatusCode::Internal;
    return makeError(code, std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")" +
                               where(call, file, line));
}

Status fromCublasError(cublasStatus_t err, const char* call, const char* file, int line)
{
    const StatusCode code = err == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::ResourceExhausted : StatusCode::Internal;
    return makeError(code, std::string("cuBLAS error ") + cublasGetStatusName(err) + " (" +
                               cublasGetStatusString(err) + ")" + where(call, file, line));
}

} // namespace attn::cuda
