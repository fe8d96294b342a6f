#include "workspace.h"

#include <cstdio>
#include <string>

namespace attn::cuda {
namespace {

const char* bufferName(Buf b)
{
    constexpr const char* kNames[] = {"X", "X_kv", "Wq", "Wk", "Wv", "Wo", "bq", "bk", "bv", "bo", "A_q", "A_k", "w_v",
                                      "Q", "K", "V", "Q·A_q", "K·A_k", "mask", "scores", "weights", "concat", "output",
                                      "key padding", "valid lengths", "custom mask", "queries with an open key",
                                      "finiteness flags", "pooled overview", "range minima", "range maxima",
                                      "range non-finite counts"};
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<std::size_t>(Buf::Count));
    return kNames[static_cast<int>(b)];
}

std::string mib(std::size_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}

} // namespace

Workspace& Workspace::instance()
{
    static Workspace* ws = new Workspace;  // never deleted: see the header
    return *ws;
}

Status Workspace::init()
{
    if (m_ready) return {};
    if (!m_stream) ATTNSCOPE_CUDA_TRY(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
    if (!m_copyStream) ATTNSCOPE_CUDA_TRY(cudaStreamCreateWithFlags(&m_copyStream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : m_events)
        if (!e) ATTNSCOPE_CUDA_TRY(cudaEventCreate(&e));
    if (!m_blas) {
        ATTNSCOPE_CUBLAS_TRY(cublasCreate(&m_blas));
        // CUBLAS_DEFAULT_MATH: SGEMM in plain FP32 with FMA; TF32 tensor cores (10-bit mantissa, ~1e-3
        // relative error) are only used when asked for with CUBLAS_TF32_TENSOR_OP_MATH, which would break
        // parity with the CPU reference (tests/parity). Set explicitly so a changed library default cannot
        // slip in. Atomics stay off (the default), which keeps cuBLAS bitwise deterministic run to run.
        ATTNSCOPE_CUBLAS_TRY(cublasSetMathMode(m_blas, CUBLAS_DEFAULT_MATH));
    }
    ATTNSCOPE_CUBLAS_TRY(cublasSetStream(m_blas, m_stream));
    m_ready = true;
    return {};
}

Status Workspace::checkFits(std::size_t bytes, const std::string& what) const
{
    std::size_t held = 0;
    for (const DeviceBuffer& b : m_buffers) held += b.capacity;
    std::size_t freeBytes = 0, totalBytes = 0;
    ATTNSCOPE_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
    if (bytes <= held + freeBytes) return {};
    return makeError(StatusCode::ResourceExhausted, "CUDA device memory: " + what + " needs " + mib(bytes) +
                                                        " on the device, " + mib(held + freeBytes) + " of " +
                                                        mib(totalBytes) + " available; reduce n or heads");
}

Status Workspace::reserve(Buf b, std::size_t bytes, void*& ptr)
{
    DeviceBuffer& buf = m_buffers[static_cast<std::size_t>(b)];
    if (bytes <= buf.capacity) {
        ptr = buf.ptr;
        return {};
    }
    if (buf.ptr) {
        // cudaFree waits for the device, so no queued kernel still uses the old buffer.
        ATTNSCOPE_CUDA_TRY(cudaFree(buf.ptr));
        buf = {};
    }
    const cudaError_t err = cudaMalloc(&buf.ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // out of memory is not sticky: clear it so later calls can still work
        buf = {};
        std::size_t freeBytes = 0, totalBytes = 0;
        (void)cudaMemGetInfo(&freeBytes, &totalBytes);
        return makeError(StatusCode::ResourceExhausted,
                         std::string("CUDA device memory: cannot allocate ") + mib(bytes) + " for " + bufferName(b) +
                             " (" + mib(freeBytes) + " free of " + mib(totalBytes) + "); reduce n or heads");
    }
    if (err != cudaSuccess) {
        buf = {};
        return fromCudaError(err, "cudaMalloc(&buf.ptr, bytes)", __FILE__, __LINE__);
    }
    buf.capacity = bytes;
    ptr = buf.ptr;
    return {};
}

} // namespace attn::cuda
