// The fused attention kernel of a lazy run on the device (launchFlashAttention, decoder_kernels.cuh) against a naive
// reference in double: every query's context and log-sum-exp, for forwards (queries = keys) and appends (a few
// queries at the end of a longer text), grouped-query heads, a sliding window, a soft-cap, and head widths that do
// and do not fill the kernel's column chunks. Rows and columns the kernel must not write keep a sentinel, and a second
// run gives the same bits.
//
// Built twice: over the emulated runtime (label unit, small tiles: ATTNSCOPE_DECODER_FLASH_* in CMakeLists.txt, so
// that these texts cross several tiles of queries and keys), and against a GPU (label gpu; 77 without a device).
//
// Tolerance: float32 sums of up to 64 products and of up to 40 exponentials, in other orders than the reference's,
// against values of order 1: 1e-5 absolute leaves about two orders of margin over float rounding.
#include "cuda/decoder_kernels.h"
#include "device_test_main.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr double kTol = 1e-5;
constexpr float kSentinel = 12345.0f;

struct Shape {
    int T, S, pos0, H, Hkv, D, window;
    float softcap;
};

std::string nameOf(const Shape& s)
{
    return "T=" + std::to_string(s.T) + " S=" + std::to_string(s.S) + " pos0=" + std::to_string(s.pos0) + " H=" + std::to_string(s.H) +
           "/" + std::to_string(s.Hkv) + " D=" + std::to_string(s.D) + " window=" + std::to_string(s.window) +
           " softcap=" + std::to_string(s.softcap);
}

// The rule of attention_ref.cpp and LazyMaps: query i (position pos0 + i) sees key j when j ≤ pos0 + i and, with a
// window, pos0 + i − j < window; scores scale·q·k, soft-capped; out = softmax · V, lse = log Σ exp.
void reference(const Shape& s, float scale, const std::vector<float>& Q, const std::vector<float>& K, const std::vector<float>& V,
               std::vector<double>& out, std::vector<double>& lse)
{
    const int qw = s.H * s.D, kw = s.Hkv * s.D, group = s.H / s.Hkv;
    out.assign(std::size_t(s.T) * qw, 0.0);
    lse.assign(std::size_t(s.T) * s.H, -std::numeric_limits<double>::infinity());
    for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < s.T; ++i) {
            const int pos = s.pos0 + i, g = h / group;
            std::vector<double> score(std::size_t(s.S), -std::numeric_limits<double>::infinity());
            double mx = -std::numeric_limits<double>::infinity();
            for (int j = 0; j < s.S; ++j) {
                if (j > pos || (s.window > 0 && pos - j >= s.window)) continue;
                double dot = 0;
                for (int d = 0; d < s.D; ++d) dot += double(Q[std::size_t(i) * qw + h * s.D + d]) * K[std::size_t(j) * kw + g * s.D + d];
                double x = dot * scale;
                if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
                score[std::size_t(j)] = x;
                mx = std::max(mx, x);
            }
            if (mx == -std::numeric_limits<double>::infinity()) continue;
            double sum = 0;
            for (double x : score) sum += std::exp(x - mx);
            lse[std::size_t(i) * s.H + h] = mx + std::log(sum);
            for (int j = 0; j < s.S; ++j) {
                const double p = std::exp(score[std::size_t(j)] - mx) / sum;
                for (int d = 0; d < s.D; ++d) out[std::size_t(i) * qw + h * s.D + d] += p * V[std::size_t(j) * kw + g * s.D + d];
            }
        }
}

float* upload(const std::vector<float>& host)
{
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    return static_cast<float*>(p);
}

std::vector<float> download(const float* dev, std::size_t count)
{
    std::vector<float> host(count);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    return host;
}

// Runs the kernel on random Q, K, V (the Q rows of the queries only, as an append's) and compares; the output
// buffers have a row more than T, which must keep its sentinel, as must nothing else be left unwritten.
void expectMatchesTheReference(const Shape& s, unsigned seed)
{
    const std::string what = nameOf(s);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int qw = s.H * s.D, kw = s.Hkv * s.D;
    auto random = [&](std::size_t n) {
        std::vector<float> v(n);
        for (float& x : v) x = normal(rng);
        return v;
    };
    const std::vector<float> Q = random(std::size_t(s.T) * qw), K = random(std::size_t(s.S) * kw), V = random(std::size_t(s.S) * kw);
    const float scale = 1.0f / std::sqrt(float(s.D));
    std::vector<double> wantOut, wantLse;
    reference(s, scale, Q, K, V, wantOut, wantLse);

    float *dQ = upload(Q), *dK = upload(K), *dV = upload(V);
    float* dOut = upload(std::vector<float>(std::size_t(s.T + 1) * qw, kSentinel));
    float* dLse = upload(std::vector<float>(std::size_t(s.T + 1) * s.H, kSentinel));
    const attn::cuda::FlashArgs a{dQ, dK, dV, dOut, dLse, s.T, s.S, s.pos0, s.H, s.Hkv, s.D, s.window, scale, s.softcap};
    ASSERT_EQ(attn::cuda::launchFlashAttention(a, nullptr), cudaSuccess) << what;
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess) << what;
    const std::vector<float> out = download(dOut, std::size_t(s.T + 1) * qw), lse = download(dLse, std::size_t(s.T + 1) * s.H);
    double worstOut = 0, worstLse = 0;
    for (std::size_t e = 0; e < wantOut.size(); ++e) worstOut = std::max(worstOut, std::abs(double(out[e]) - wantOut[e]));
    for (std::size_t e = 0; e < wantLse.size(); ++e) worstLse = std::max(worstLse, std::abs(double(lse[e]) - wantLse[e]));
    EXPECT_LE(worstOut, kTol) << what << ": contexts";
    EXPECT_LE(worstLse, kTol) << what << ": log-sum-exps";
    for (std::size_t e = wantOut.size(); e < out.size(); ++e) EXPECT_EQ(out[e], kSentinel) << what << ": wrote past the queries";
    for (std::size_t e = wantLse.size(); e < lse.size(); ++e) EXPECT_EQ(lse[e], kSentinel) << what << ": wrote past the queries' lse";
    // Again: the same bits (no atomics; each row's reductions in a fixed order).
    ASSERT_EQ(attn::cuda::launchFlashAttention(a, nullptr), cudaSuccess) << what;
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess) << what;
    EXPECT_EQ(download(dOut, out.size()), out) << what << ": a second run differs";
    EXPECT_EQ(download(dLse, lse.size()), lse) << what << ": a second run's lse differs";
    for (float* p : {dQ, dK, dV, dOut, dLse}) EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST(FlashAttention, ForwardsEqualTheReference)
{
    unsigned seed = 1;
    for (int D : {5, 8, 16, 20, 37})
        for (int window : {0, 6})
            for (float softcap : {0.0f, 3.0f}) {
                expectMatchesTheReference({37, 37, 0, 4, 2, D, window, softcap}, seed++);
                expectMatchesTheReference({21, 21, 0, 3, 3, D, window, softcap}, seed++);
            }
}

TEST(FlashAttention, AppendedRowsEqualTheReference)
{
    unsigned seed = 100;
    for (int D : {8, 16, 37})
        for (int window : {0, 6}) {
            expectMatchesTheReference({5, 40, 35, 4, 1, D, window, 0.0f}, seed++);   // rows across a tile edge
            expectMatchesTheReference({1, 40, 39, 4, 2, D, window, 2.5f}, seed++);   // one token
            expectMatchesTheReference({17, 20, 3, 2, 1, D, window, 0.0f}, seed++);  // most of the text new
        }
}

TEST(FlashAttention, TheWidestHeadsFitAndWiderAreRefused)
{
    const int widest = attn::cuda::kFlashMaxChunks * attn::cuda::kFlashTile;
    EXPECT_TRUE(attn::cuda::flashAttentionFits(widest));
    EXPECT_FALSE(attn::cuda::flashAttentionFits(widest + 1));
    EXPECT_FALSE(attn::cuda::flashAttentionFits(0));
    expectMatchesTheReference({19, 19, 0, 2, 1, widest, 0, 0.0f}, 7);
    const attn::cuda::FlashArgs wide{nullptr, nullptr, nullptr, nullptr, nullptr, 4, 4, 0, 2, 1, widest + 1, 0, 1.0f, 0.0f};
    EXPECT_EQ(attn::cuda::launchFlashAttention(wide, nullptr), cudaErrorInvalidValue);
    const attn::cuda::FlashArgs badGroups{nullptr, nullptr, nullptr, nullptr, nullptr, 4, 4, 0, 3, 2, 8, 0, 1.0f, 0.0f};
    EXPECT_EQ(attn::cuda::launchFlashAttention(badGroups, nullptr), cudaErrorInvalidValue);
}

} // namespace

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    if (!attn::test::deviceForTests("the fused attention kernel")) return attn::test::kSkipped;
    return RUN_ALL_TESTS();
}
