// CUDA and cuBLAS errors as attn::Status: every runtime/cuBLAS call of the backend goes through one of the
// ATTNSCOPE_*_TRY macros, so a failure returns a Status naming the call and file:line instead of exiting.
// Internal to attnscope_cuda (includes CUDA headers; core's .cpp files never include it).
#pragma once

#include "attnscope/status.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace attn::cuda {

// A Status for a failed CUDA runtime call: ResourceExhausted for out-of-memory, Internal otherwise.
// `call` is the call's source text, `file`/`line` where it was made. Message example:
//   "CUDA error cudaErrorMemoryAllocation (out of memory) in cudaMalloc(&p, bytes) at core/cuda/workspace.cpp:31"
Status fromCudaError(cudaError_t err, const char* call, const char* file, int line);

// The same for cuBLAS (CUBLAS_STATUS_ALLOC_FAILED → ResourceExhausted, otherwise Internal).
Status fromCublasError(cublasStatus_t err, const char* call, const char* file, int line);

} // namespace attn::cuda

// Evaluates a cudaError_t expression; on failure returns the Status from the enclosing function.
#define ATTNSCOPE_CUDA_TRY(call)                                                                             \
    do {                                                                                                     \
        const cudaError_t attnscopeErr_ = (call);                                                            \
        if (attnscopeErr_ != cudaSuccess)                                                                    \
            return ::attn::cuda::fromCudaError(attnscopeErr_, #call, __FILE__, __LINE__);                    \
    } while (0)

// Evaluates a cublasStatus_t expression; on failure returns the Status from the enclosing function.
#define ATTNSCOPE_CUBLAS_TRY(call)                                                                           \
    do {                                                                                                     \
        const cublasStatus_t attnscopeErr_ = (call);                                                         \
        if (attnscopeErr_ != CUBLAS_STATUS_SUCCESS)                                                          \
            return ::attn::cuda::fromCublasError(attnscopeErr_, #call, __FILE__, __LINE__);                  \
    } while (0)
