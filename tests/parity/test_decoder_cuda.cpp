// Decoder models with the attention core on the CUDA backend (label gpu): the tiny random gpt2 / llama / qwen2
// directories (multi-head, two KV heads, one KV head) run, appended to and recomputed after an ablation with
// Backend::Cuda, against the same on the CPU. Every layer must say the GPU computed it (no silent fallback).
// Without a usable device the program exits 77, which CTest reports as skipped.
#include "cuda/cuda_backend.h"
#include "device_test_main.h"

#include <attnscope/decoder.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

double maxAbsDiff(const attn::Matrix& a, const attn::Matrix& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols()) return INFINITY;
    if (a.size() == 0) return 0;
    return (a - b).cwiseAbs().maxCoeff();
}

// Float32 on both sides, summed in other orders (cuBLAS, the kernels' reductions): the tolerances of the CUDA parity
// suite's problems of this size, on values of order 1 (residual streams of a few units).
constexpr double kHiddenTol = 1e-4, kWeightTol = 1e-5, kScoreTol = 1e-4, kLogitTol = 1e-3;

void expectSameRun(attn::DecoderModel& model, const attn::DecoderRun& gpu, const attn::DecoderRun& cpu, const std::string& what)
{
    ASSERT_EQ(gpu.encoding.ids, cpu.encoding.ids) << what;
    ASSERT_EQ(gpu.hidden.size(), cpu.hidden.size()) << what;
    for (std::size_t l = 0; l < gpu.hidden.size(); ++l)
        EXPECT_LE(maxAbsDiff(gpu.hidden[l], cpu.hidden[l]), kHiddenTol) << what << " hidden " << l;
    const auto a = attn::decoderMaps(model, gpu), b = attn::decoderMaps(model, cpu);
    ASSERT_EQ(a->queries(), b->queries()) << what;
    for (int l = 0; l < model.config.layers; ++l)
        for (int h = 0; h < model.config.heads; ++h) {
            attn::Matrix x, y;
            ASSERT_TRUE(a->whole(attn::MapKind::Weights, l, h, x).ok());
            ASSERT_TRUE(b->whole(attn::MapKind::Weights, l, h, y).ok());
            EXPECT_LE(maxAbsDiff(x, y), kWeightTol) << what << " weights L" << l << " H" << h;
            ASSERT_TRUE(a->whole(attn::MapKind::Scores, l, h, x).ok());
            ASSERT_TRUE(b->whole(attn::MapKind::Scores, l, h, y).ok());
            EXPECT_LE(maxAbsDiff(x, y), kScoreTol) << what << " scores L" << l << " H" << h;
            const auto& p = gpu.attention[std::size_t(l)].heads[std::size_t(h)];
            const auto& q = cpu.attention[std::size_t(l)].heads[std::size_t(h)];
            EXPECT_TRUE(p.masked == q.masked) << what << " mask L" << l << " H" << h;
        }
    const float scale = std::max(1.0f, cpu.lastLogits.cwiseAbs().maxCoeff());
    EXPECT_LE((gpu.lastLogits - cpu.lastLogits).cwiseAbs().maxCoeff(), kLogitTol * scale) << what;
    ASSERT_EQ(gpu.surprise.size(), cpu.surprise.size()) << what;
    for (std::size_t i = 1; i < gpu.surprise.size(); ++i) EXPECT_NEAR(gpu.surprise[i], cpu.surprise[i], 1e-3) << what << " token " << i;
}

void expectOnTheGpu(const attn::DecoderRun& run, const std::string& what)
{
    EXPECT_TRUE(run.warnings.empty()) << what << ": " << (run.warnings.empty() ? "" : run.warnings.front());
    for (std::size_t l = 0; l < run.attention.size(); ++l)
        EXPECT_EQ(run.attention[l].backend, attn::Backend::Cuda) << what << " layer " << l;
}

TEST(DecoderCuda, ForwardAppendAndAblationEqualTheCpu)
{
    const std::vector<int> ids = {5, 17, 42, 99, 3, 250, 7, 64, 128, 11, 200, 31};
    for (const char* family : {"tiny_gpt2", "tiny_llama", "tiny_qwen2"}) {
        auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/" + family);
        ASSERT_TRUE(model.ok()) << model.status().message;
        attn::DecoderOptions gpuOptions, cpuOptions;
        gpuOptions.backend = attn::Backend::Cuda;
        auto gpu = attn::runDecoder(*model, ids, gpuOptions);
        auto cpu = attn::runDecoder(*model, ids, cpuOptions);
        ASSERT_TRUE(gpu.ok()) << family << ": " << gpu.status().message;
        ASSERT_TRUE(cpu.ok()) << family << ": " << cpu.status().message;
        expectOnTheGpu(*gpu, std::string(family) + " forward");
        expectSameRun(*model, *gpu, *cpu, std::string(family) + " forward");

        // Appending one token, then three, through the core on the GPU (appendTokens' non-CPU path).
        auto grown = attn::runDecoder(*model, std::vector<int>(ids.begin(), ids.begin() + 8), gpuOptions);
        ASSERT_TRUE(grown.ok()) << grown.status().message;
        ASSERT_TRUE(attn::appendTokens(*model, {ids[8]}, *grown, attn::Backend::Cuda).ok());
        ASSERT_TRUE(attn::appendTokens(*model, std::vector<int>(ids.begin() + 9, ids.end()), *grown, attn::Backend::Cuda).ok());
        expectOnTheGpu(*grown, std::string(family) + " appended");
        expectSameRun(*model, *grown, *cpu, std::string(family) + " appended");

        // An ablation recomputed from layer 1 on the GPU.
        gpu->ablated = {{1, 1}};
        ASSERT_TRUE(attn::recomputeDecoderFrom(*model, 1, *gpu, attn::Backend::Cuda).ok());
        cpuOptions.ablate = {{1, 1}};
        auto ablated = attn::runDecoder(*model, ids, cpuOptions);
        ASSERT_TRUE(ablated.ok());
        expectOnTheGpu(*gpu, std::string(family) + " ablated");
        expectSameRun(*model, *gpu, *ablated, std::string(family) + " ablated");
        EXPECT_GT((gpu->lastLogits - cpu->lastLogits).cwiseAbs().maxCoeff(), 1e-4) << family << ": the ablation changed nothing";
    }
}

} // namespace

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    if (!attn::test::deviceForTests("the decoders on the CUDA backend")) return attn::test::kSkipped;
    return RUN_ALL_TESTS();
}
