// The run-time backend choice of a CUDA build, on whatever machine runs it: without a usable device,
// Backend::Cuda is refused with a message saying why and Backend::Auto computes on the CPU; with one,
// Auto uses it. Runs everywhere (label unit), so CI without a GPU checks the fallback for real. Also the
// translation of CUDA/cuBLAS errors into Status (cuda_status.h).
#include "cuda/cuda_backend.h"
#include "cuda/cuda_status.h"
#include "test_util.h"

#include <attnscope/attention.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace attn {
namespace {

void smallProblem(AttentionInput& in, AttentionConfig& cfg)
{
    test::ProblemSpec p;
    p.heads = 2;
    p.causal = true;
    test::makeProblem(p, in, cfg);
}

TEST(CudaFallback, BuiltAndDescribed)
{
    EXPECT_TRUE(cudaBuilt());
    std::string why;
    const bool usable = cuda::deviceAvailable(&why);
    EXPECT_FALSE(why.empty());
    const std::string description = backendDescription(Backend::Cuda);
    if (usable) EXPECT_EQ(description, "CUDA: " + why);
    else EXPECT_EQ(description, "CUDA unavailable: " + why);
    const auto avail = availableBackends();
    EXPECT_EQ(std::find(avail.begin(), avail.end(), Backend::Cuda) != avail.end(), usable);
    // The probe is cached: a second call gives the same answer without touching the driver again.
    std::string again;
    EXPECT_EQ(cuda::deviceAvailable(&again), usable);
    EXPECT_EQ(again, why);
}

TEST(CudaFallback, CudaWithoutDeviceIsUnavailableWithTheReason)
{
    std::string why;
    if (cuda::deviceAvailable(&why)) GTEST_SKIP() << "a GPU is present (" << why << "); tested by the parity tests";
    AttentionInput in;
    AttentionConfig cfg;
    smallProblem(in, cfg);
    cfg.backend = Backend::Cuda;
    Expected<AttentionResult> r = compute(in, cfg);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code, StatusCode::Unavailable);
    EXPECT_EQ(r.status().message, "backend cuda: " + why);
}

TEST(CudaFallback, AutoUsesTheGpuWhenPresentElseTheCpuWithTheSameResult)
{
    AttentionInput in;
    AttentionConfig cfg;
    smallProblem(in, cfg);
    cfg.backend = Backend::Cpu;
    Expected<AttentionResult> cpu = compute(in, cfg);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message;
    cfg.backend = Backend::Auto;
    Expected<AttentionResult> autoResult = compute(in, cfg);
    ASSERT_TRUE(autoResult.ok()) << autoResult.status().message;
    if (cuda::deviceAvailable(nullptr)) {
        EXPECT_EQ(autoResult->backend, Backend::Cuda);
        // Float32 on both sides; parity tests bound the difference, here it only has to be the same answer.
        EXPECT_TRUE(test::near(autoResult->output, cpu->output, 1e-5f, 1e-4f, "output"));
    } else {
        EXPECT_EQ(autoResult->backend, Backend::Cpu);
        // The same CPU path on the same input: bitwise the same output.
        ASSERT_EQ(autoResult->output.size(), cpu->output.size());
        EXPECT_EQ(std::memcmp(autoResult->output.data(), cpu->output.data(), sizeof(float) * cpu->output.size()), 0);
    }
}

// ---- CUDA errors as Status (no device needed: the name/description functions are plain tables) ---------------

Status failingCudaCall()
{
    ATTNSCOPE_CUDA_TRY(cudaErrorIllegalAddress);
    return {};
}

Status failingCublasCall()
{
    ATTNSCOPE_CUBLAS_TRY(CUBLAS_STATUS_ALLOC_FAILED);
    return {};
}

Status succeedingCalls()
{
    ATTNSCOPE_CUDA_TRY(cudaSuccess);
    ATTNSCOPE_CUBLAS_TRY(CUBLAS_STATUS_SUCCESS);
    return {};
}

TEST(CudaStatus, ErrorsNameTheErrorTheCallAndWhere)
{
    const Status s = cuda::fromCudaError(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)",
                                         "/home/ci/attnscope/core/cuda/workspace.cpp", 31);
    EXPECT_EQ(s.code, StatusCode::ResourceExhausted);
    EXPECT_EQ(s.message, "CUDA error cudaErrorMemoryAllocation (out of memory) in cudaMalloc(&p, bytes) at "
                         "core/cuda/workspace.cpp:31");
    const Status b = cuda::fromCublasError(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm(...)", "backend.cpp", 7);
    EXPECT_EQ(b.code, StatusCode::Internal);
    EXPECT_EQ(b.message.rfind("cuBLAS error CUBLAS_STATUS_INVALID_VALUE (", 0), 0u) << b.message;
    EXPECT_NE(b.message.find(") in cublasSgemm(...) at backend.cpp:7"), std::string::npos) << b.message;
}

TEST(CudaStatus, TryMacrosReturnTheErrorAndPassSuccessThrough)
{
    const Status cudaErr = failingCudaCall();
    EXPECT_EQ(cudaErr.code, StatusCode::Internal);
    EXPECT_NE(cudaErr.message.find("cudaErrorIllegalAddress"), std::string::npos) << cudaErr.message;
    EXPECT_NE(cudaErr.message.find("in cudaErrorIllegalAddress at"), std::string::npos) << cudaErr.message;
    const Status blasErr = failingCublasCall();
    EXPECT_EQ(blasErr.code, StatusCode::ResourceExhausted);
    EXPECT_NE(blasErr.message.find("CUBLAS_STATUS_ALLOC_FAILED"), std::string::npos) << blasErr.message;
    EXPECT_TRUE(succeedingCalls().ok());
}

} // namespace
} // namespace attn
