// Backend::Auto on a device that fails: the result comes from the CPU, with a warning that says why, and
// it equals the reference. Runs over the emulated CUDA runtime (label unit), whose device memory the test
// shrinks; on a real GPU the same path is taken when a problem does not fit in device memory.
#include "attnscope/attention.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>

namespace emu {
extern std::size_t deviceBytes;  // fake_cuda_runtime.cpp
}

namespace attn {
namespace {

struct DeviceMemory {
    explicit DeviceMemory(std::size_t bytes) : saved(emu::deviceBytes) { emu::deviceBytes = bytes; }
    ~DeviceMemory() { emu::deviceBytes = saved; }
    std::size_t saved;
};

void makeProblem(AttentionInput& in, AttentionConfig& cfg)
{
    std::mt19937 rng(11);
    // 2 heads × 128 × 128 scores and weights: about 0.5 MiB on the device, more than the 64 KiB below.
    in.Q = test::randomMatrix(rng, 128, 8);
    in.K = test::randomMatrix(rng, 128, 8);
    in.V = test::randomMatrix(rng, 128, 8);
    cfg.mode = Mode::Direct;
    cfg.heads = 2;
    in.mask.causal = true;
}

TEST(AutoBackend, DeviceOutOfMemoryFallsBackToTheCpuWithAWarning)
{
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(in, cfg);
    DeviceMemory small(std::size_t(64) << 10);
    cfg.backend = Backend::Auto;
    Expected<AttentionResult> got = compute(in, cfg);
    ASSERT_TRUE(got.ok()) << got.status().message;
    EXPECT_EQ(got->backend, Backend::Cpu);
    ASSERT_FALSE(got->warnings.empty());
    EXPECT_NE(got->warnings.front().find("CUDA failed (CUDA device memory: "), std::string::npos) << got->warnings.front();
    EXPECT_NE(got->warnings.front().find("computed on the CPU instead"), std::string::npos);

    // The fallback is the ordinary CPU computation: the same numbers, bit for bit, as asking for the CPU.
    cfg.backend = Backend::Cpu;
    Expected<AttentionResult> cpu = compute(in, cfg);
    ASSERT_TRUE(cpu.ok());
    EXPECT_TRUE((got->output.array() == cpu->output.array()).all());
    ASSERT_EQ(got->heads.size(), cpu->heads.size());
    for (std::size_t h = 0; h < got->heads.size(); ++h)
        EXPECT_TRUE((got->heads[h].weights.array() == cpu->heads[h].weights.array()).all()) << "head " << h;
}

TEST(AutoBackend, ExplicitCudaReportsTheDeviceErrorInstead)
{
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(in, cfg);
    DeviceMemory small(std::size_t(64) << 10);
    cfg.backend = Backend::Cuda;
    Expected<AttentionResult> got = compute(in, cfg);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code, StatusCode::ResourceExhausted);
    EXPECT_EQ(got.status().message.rfind("CUDA device memory: ", 0), 0u) << got.status().message;
}

TEST(AutoBackend, UsesTheDeviceWhenItFits)
{
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(in, cfg);
    cfg.backend = Backend::Auto;
    Expected<AttentionResult> got = compute(in, cfg);
    ASSERT_TRUE(got.ok()) << got.status().message;
    EXPECT_EQ(got->backend, Backend::Cuda);
    for (const std::string& w : got->warnings) EXPECT_EQ(w.find("CUDA failed"), std::string::npos) << w;
}

} // namespace
} // namespace attn
