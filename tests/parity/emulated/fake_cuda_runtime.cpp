// Host stand-ins for the CUDA runtime and cuBLAS calls the backend's host code makes (backend.cpp,
// workspace.cpp, cuda_status.cpp), for the emulated parity test: "device" memory is host memory, the stream
// runs everything immediately, and the GEMM is a plain column-major loop with cuBLAS's argument checks.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>

// The emulated device's memory: 16 GiB, a common size; tests shrink it to make the device run out.
namespace emu {
size_t deviceBytes = size_t(16) << 30;
// The times cudaEventElapsedTime gives, in the order asked, for a test that needs some (e.g. DeviceAttention::Auto's
// choice); once empty, a fixed stand-in.
std::deque<float> elapsedMs;
}

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned)
{
    static int token;
    *stream = reinterpret_cast<cudaStream_t>(&token);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
// Work runs when it is issued, so an event has always happened by the time a stream could wait for it.
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* event)
{
    static int token;
    *event = reinterpret_cast<cudaEvent_t>(&token);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned)
{
    static int token;
    *event = reinterpret_cast<cudaEvent_t>(&token);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
// The emulation has no meaningful GPU time: what a test queued (emu::elapsedMs), else a fixed, positive stand-in.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t)
{
    *ms = 0.001f;
    if (!emu::elapsedMs.empty()) {
        *ms = emu::elapsedMs.front();
        emu::elapsedMs.pop_front();
    }
    return cudaSuccess;
}
// Fresh "device" memory is filled with NaN bytes, so any read of an element the backend never wrote
// shows up as NaN in the results.
cudaError_t cudaMalloc(void** ptr, size_t bytes)
{
    *ptr = std::malloc(bytes ? bytes : 1);
    if (!*ptr) return cudaErrorMemoryAllocation;
    std::memset(*ptr, 0xff, bytes);
    return cudaSuccess;
}
cudaError_t cudaFree(void* ptr)
{
    std::free(ptr);
    return cudaSuccess;
}
// Reports a 16 GiB device with 16 GiB free: more than the suite needs, so the up-front fit check passes.
cudaError_t cudaMemGetInfo(size_t* freeBytes, size_t* totalBytes)
{
    *freeBytes = *totalBytes = emu::deviceBytes;
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t)
{
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
}
// Row by row, with cudaMemcpy2D's argument checks (a pitch below the width is cudaErrorInvalidPitchValue).
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind, cudaStream_t)
{
    if (dpitch < width || spitch < width) return cudaErrorInvalidPitchValue;
    for (size_t r = 0; r < height; ++r)
        std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t)
{
    std::memset(dst, value, bytes);
    return cudaSuccess;
}
// Page-locked host memory is ordinary host memory here; NaN bytes like cudaMalloc's, so a read of what was never
// copied in shows.
cudaError_t cudaMallocHost(void** ptr, size_t bytes)
{
    *ptr = std::malloc(bytes ? bytes : 1);
    if (!*ptr) return cudaErrorMemoryAllocation;
    std::memset(*ptr, 0xff, bytes);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr)
{
    std::free(ptr);
    return cudaSuccess;
}
// Page-locking is a no-op here (there is no DMA); a null pointer or zero size is the runtime's invalid value.
cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned int)
{
    return ptr && bytes ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaHostUnregister(void* ptr) { return ptr ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle)
{
    static int token;
    *handle = reinterpret_cast<cublasHandle_t>(&token);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_EMULATED"; }
const char* cublasGetStatusString(cublasStatus_t) { return "emulated error"; }

// cuBLAS semantics: column-major, C_b = alpha·op(A_b)·op(B_b) + beta·C_b, A_b = A + b·strideA, etc.
// Rejects leading dimensions below the stored rows as cuBLAS does (CUBLAS_STATUS_INVALID_VALUE).
// Accumulates in float like a GPU GEMM.
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m,
                                         int n, int k, const float* alpha, const float* A, int lda, long long strideA,
                                         const float* B, int ldb, long long strideB, const float* beta, float* C,
                                         int ldc, long long strideC, int batchCount)
{
    const int storedRowsA = transa == CUBLAS_OP_N ? m : k;
    const int storedRowsB = transb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batchCount < 0 || lda < std::max(1, storedRowsA) || ldb < std::max(1, storedRowsB) ||
        ldc < std::max(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int b = 0; b < batchCount; ++b) {
        const float* a = A + b * strideA;
        const float* bb = B + b * strideB;
        float* c = C + b * strideC;
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                float acc = 0;
                for (int p = 0; p < k; ++p) {
                    const float x = transa == CUBLAS_OP_N ? a[i + (long long)p * lda] : a[p + (long long)i * lda];
                    const float y = transb == CUBLAS_OP_N ? bb[p + (long long)j * ldb] : bb[j + (long long)p * ldb];
                    acc += x * y;
                }
                float& out = c[i + (long long)j * ldc];
                out = *beta == 0.0f ? *alpha * acc : *alpha * acc + *beta * out;  // beta 0: C is not read (may be NaN)
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
