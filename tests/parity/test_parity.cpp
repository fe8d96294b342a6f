// Parity: the CUDA backend (attn::cuda::compute) against the naive CPU reference (attn::cpu::computeReference)
// on every combination of layout × mode × heads × score × mask (× biases/W^O), on larger random problems,
// and run twice for bitwise determinism. Needs a GPU: without a usable device main() returns 77, which
// CTest reports as skipped.
#include "cuda/cuda_backend.h"
#include "cuda/host_tasks.h"
#include "cuda/kernels.h"
#include "cuda/staged_copy.h"
#include "device_result_cases.h"
#include "device_test_main.h"
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/attention_maps.h>
#include <attnscope/colormap.h>
#include <attnscope/device_maps.h>
#include <attnscope/gpu_bounds.h>
#include <attnscope/result_change.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace attn {
namespace {

using test::makeProblem;
using test::ProblemSpec;

// ---- Tolerances ------------------------------------------------------------------------------------------
// Normalised mean squared error, Σ(a−b)²/Σb², per op as ggml's test-backend-ops does; 1e-7 is its default
// threshold for float32 ops. The reference accumulates in double and rounds once; the GPU works in float32
// (cuBLAS in pedantic FP32, expf/tanhf). A float dot product of length k is off by about 6e-8·√k of the
// result's rms (random rounding), so for the largest k here (1024) NMSE ≈ 4e-12 for the products. Softmax
// turns an absolute score error δ into a relative weight error δ, so weights inherit the scores' error
// scaled by their magnitude (|scores| ≲ 10 here): NMSE ≲ 1e-9. 1e-7 keeps a ≥ 100× margin over these
// estimates and still catches a wrong axis, mask, head block or scale (each changes values by > 1%,
// NMSE > 1e-4), or a single wrong entry among ~1000. Measured: ≤ 1.1e-12 for every matrix over this suite
// under the CPU emulation (test_parity_emulated, whose GEMM accumulates naively in float); the program
// prints the largest NMSE per matrix at the end of each run.
constexpr double kMaxNmse = 1e-7;
// Softmax weights are in [0, 1]; besides the NMSE no single weight may be off by more than 1e-5: a score
// error of ~1e-6 (above) plus float epsilon 1.2e-7 × the ~S/32 + 5 roundings of the sum for S ≤ 1024.
constexpr float kMaxWeightDiff = 1e-5f;

double nmse(const Matrix& a, const Matrix& b)
{
    double err = 0, ref = 0;
    for (Eigen::Index i = 0; i < a.size(); ++i) {
        const double d = double(a.data()[i]) - double(b.data()[i]);
        err += d * d;
        ref += double(b.data()[i]) * double(b.data()[i]);
    }
    return ref > 0 ? err / ref : err;  // an all-zero reference (e.g. a fully masked head) needs exact zeros
}

// The largest NMSE seen per kind of matrix over the whole run, printed at the end: the measured margin
// under kMaxNmse.
std::map<std::string, double>& worstNmse()
{
    static std::map<std::string, double> worst;
    return worst;
}

::testing::AssertionResult closeNmse(const Matrix& gpu, const Matrix& ref, const std::string& what, const std::string& kind)
{
    if (gpu.rows() != ref.rows() || gpu.cols() != ref.cols())
        return ::testing::AssertionFailure() << what << ": shape " << gpu.rows() << "×" << gpu.cols() << ", expected "
                                             << ref.rows() << "×" << ref.cols();
    const double e = nmse(gpu, ref);
    double& worstSeen = worstNmse()[kind];
    worstSeen = std::max(worstSeen, e);
    if (e <= kMaxNmse) return ::testing::AssertionSuccess();
    Eigen::Index worst = 0;
    for (Eigen::Index i = 1; i < gpu.size(); ++i)
        if (std::fabs(gpu.data()[i] - ref.data()[i]) > std::fabs(gpu.data()[worst] - ref.data()[worst])) worst = i;
    return ::testing::AssertionFailure() << what << ": NMSE " << e << " > " << kMaxNmse << "; worst entry #" << worst
                                         << " gpu " << gpu.data()[worst] << " ref " << ref.data()[worst];
}

// Everything the two results must share, with the reason for the first difference.
::testing::AssertionResult sameResult(const AttentionResult& gpu, const AttentionResult& ref, float fill)
{
    if (gpu.layout != ref.layout) return ::testing::AssertionFailure() << "layout differs";
    if (gpu.scale != ref.scale) return ::testing::AssertionFailure() << "scale " << gpu.scale << " vs " << ref.scale;
    if (gpu.heads.size() != ref.heads.size()) return ::testing::AssertionFailure() << "number of heads differs";
    // In data-flow order, so the first failure points at the phase that went wrong.
    for (auto [g, r, name] : {std::tuple{&gpu.Q, &ref.Q, "Q"}, {&gpu.K, &ref.K, "K"}, {&gpu.V, &ref.V, "V"}})
        if (auto ok = closeNmse(*g, *r, name, name); !ok) return ok;
    for (std::size_t h = 0; h < ref.heads.size(); ++h) {
        const HeadResult& g = gpu.heads[h];
        const HeadResult& r = ref.heads[h];
        const std::string head = "head " + std::to_string(h) + " ";
        for (auto [a, b, name] : {std::tuple{&g.Q, &r.Q, "Q"}, {&g.K, &r.K, "K"}, {&g.V, &r.V, "V"},
                                  {&g.scores, &r.scores, "scores"}, {&g.weights, &r.weights, "weights"},
                                  {&g.output, &r.output, "output"}})
            if (auto ok = closeNmse(*a, *b, head + name, std::string("head ") + name); !ok) return ok;
        if (g.masked != r.masked) return ::testing::AssertionFailure() << head << "masked flags differ";
        if (g.fullyMaskedQueries != r.fullyMaskedQueries)
            return ::testing::AssertionFailure() << head << "fullyMaskedQueries differ";
        const float maxDiff = (g.weights - r.weights).cwiseAbs().maxCoeff();
        if (maxDiff > kMaxWeightDiff)
            return ::testing::AssertionFailure() << head << "weights: max |diff| " << maxDiff << " > " << kMaxWeightDiff;
        // With fill -inf a masked key must get exactly 0 (not a tiny exp), as in the reference.
        if (std::isinf(fill))
            for (Eigen::Index i = 0; i < g.weights.size(); ++i)
                if (g.masked.data()[i] && g.weights.data()[i] != 0.0f)
                    return ::testing::AssertionFailure() << head << "masked weight #" << i << " is "
                                                         << g.weights.data()[i] << ", expected exactly 0";
    }
    for (auto [g, r, name] : {std::tuple{&gpu.concat, &ref.concat, "concat"}, {&gpu.output, &ref.output, "output"}})
        if (auto ok = closeNmse(*g, *r, name, name); !ok) return ok;
    return ::testing::AssertionSuccess();
}

AttentionResult runGpu(const AttentionInput& in, const AttentionConfig& cfg)
{
    AttentionResult out;
    Expected<Dims> d = validate(in, cfg);
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.status().message);
    if (!d) return out;
    Status s = cuda::compute(in, cfg, *d, out);
    EXPECT_TRUE(s.ok()) << s.message;
    return out;
}

AttentionResult runRef(const AttentionInput& in, const AttentionConfig& cfg)
{
    AttentionResult out;
    Expected<Dims> d = validate(in, cfg);
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.status().message);
    if (d) cpu::computeReference(in, cfg, *d, out);
    return out;
}

// The problem in the requested layout (makeProblem builds Row; Column stores every matrix transposed).
void makeInLayout(const ProblemSpec& p, Layout layout, AttentionInput& in, AttentionConfig& cfg)
{
    makeProblem(p, in, cfg);
    cfg.layout = layout;
    if (layout == Layout::Column) in = test::transposed(in);
}

std::string describe(const ProblemSpec& p, Layout layout)
{
    std::ostringstream s;
    s << toString(layout) << " " << toString(p.mode) << " H=" << p.heads << " H_kv=" << (p.kvHeads ? p.kvHeads : p.heads)
      << " " << toString(p.score) << " T=" << p.T
      << " S=" << p.S << " causal=" << p.causal << " keypad=" << p.keyPadding << " validlens=" << p.validLens
      << " custom=" << p.custom << " fill=" << p.fill << " biases=" << p.biases << " Wo=" << p.wo;
    return s.str();
}

// ---- Every combination, small sizes -------------------------------------------------------------------------

TEST(Parity, EveryCombinationMatchesTheReference)
{
    int count = 0;
    for (Layout layout : {Layout::Row, Layout::Column})
        for (Mode mode : {Mode::Self, Mode::Cross, Mode::Direct})
            for (int heads : {1, 3})
                for (Score score : {Score::ScaledDot, Score::Dot, Score::Additive})
                    for (int maskKind = 0; maskKind < 7; ++maskKind) {  // none, 4 single kinds, all, all+finite fill
                        ProblemSpec p;
                        p.mode = mode;
                        p.heads = heads;
                        p.score = score;
                        p.T = 6;
                        p.S = mode == Mode::Self ? 6 : 9;
                        p.causal = maskKind == 1 || maskKind >= 5;
                        p.keyPadding = maskKind == 2 || maskKind >= 5;
                        p.validLens = maskKind == 3 || maskKind >= 5;
                        p.custom = maskKind == 4 || maskKind >= 5;
                        if (maskKind == 6) p.fill = -1e4f;
                        p.biases = p.wo = (count % 2) == 1;
                        p.seed = 100 + count;
                        ++count;
                        AttentionInput in;
                        AttentionConfig cfg;
                        makeInLayout(p, layout, in, cfg);
                        SCOPED_TRACE(describe(p, layout));
                        EXPECT_TRUE(sameResult(runGpu(in, cfg), runRef(in, cfg), p.fill));
                    }
    EXPECT_EQ(count, 2 * 3 * 2 * 3 * 7);
}

// Grouped-query attention: H query heads over H_kv key/value heads (multi-query at H_kv = 1). Checks that
// the per-KV-head GEMMs and the additive kernel read each query head's KV head, and that the concat and W^O
// keep H heads.
TEST(Parity, GroupedQueryAttentionMatchesTheReference)
{
    int count = 0;
    for (Layout layout : {Layout::Row, Layout::Column})
        for (Mode mode : {Mode::Self, Mode::Cross, Mode::Direct})
            for (auto [heads, kvHeads] : {std::pair{4, 1}, std::pair{6, 2}, std::pair{6, 3}})
                for (Score score : {Score::ScaledDot, Score::Additive})
                    for (bool masks : {false, true}) {
                        ProblemSpec p;
                        p.mode = mode;
                        p.heads = heads;
                        p.kvHeads = kvHeads;
                        p.score = score;
                        p.T = 7;
                        p.S = mode == Mode::Self ? 7 : 10;
                        p.causal = p.keyPadding = p.custom = masks;
                        p.biases = mode != Mode::Direct;
                        p.wo = true;  // the decoder's case: direct Q/K/V, a causal mask and W^O
                        p.seed = 400 + count;
                        ++count;
                        AttentionInput in;
                        AttentionConfig cfg;
                        makeInLayout(p, layout, in, cfg);
                        SCOPED_TRACE(describe(p, layout));
                        EXPECT_TRUE(sameResult(runGpu(in, cfg), runRef(in, cfg), p.fill));
                    }
    EXPECT_EQ(count, 2 * 3 * 3 * 2 * 2);
    // A larger grouped problem: many blocks per head, a SmolLM2-like 9 query heads over 3 KV heads.
    for (Layout layout : {Layout::Row, Layout::Column}) {
        ProblemSpec p;
        p.mode = Mode::Direct;
        p.heads = 9;
        p.kvHeads = 3;
        p.T = p.S = 300;
        p.dk = p.dv = 64;
        p.causal = true;
        p.wo = true;
        p.seed = 499;
        AttentionInput in;
        AttentionConfig cfg;
        makeInLayout(p, layout, in, cfg);
        // Scores O(1) at d_k = 64, as a model's would be (see LargeRandomProblems).
        in.Q *= 1.0f / std::sqrt(8.0f);
        in.Wo *= 1.0f / std::sqrt(float(p.heads * p.dv));
        SCOPED_TRACE(describe(p, layout));
        EXPECT_TRUE(sameResult(runGpu(in, cfg), runRef(in, cfg), p.fill));
    }
}

TEST(Parity, ScaleOverrideAndFullyMaskedQueries)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        ProblemSpec p;
        p.heads = 2;
        p.validLens = true;  // query 0 has no key: the fully masked rule
        AttentionInput in;
        AttentionConfig cfg;
        makeInLayout(p, layout, in, cfg);
        cfg.scale = 0.37f;
        SCOPED_TRACE(describe(p, layout));
        const AttentionResult gpu = runGpu(in, cfg);
        EXPECT_TRUE(sameResult(gpu, runRef(in, cfg), p.fill));
        ASSERT_EQ(gpu.heads.size(), 2u);
        EXPECT_EQ(gpu.heads[1].fullyMaskedQueries, std::vector<int>{0});
        EXPECT_FLOAT_EQ(gpu.scale, 0.37f);
        // The fully masked query's output is zero in the per-head output (row 0, or column 0 in Column).
        const Matrix& o = gpu.heads[1].output;
        EXPECT_EQ((layout == Layout::Row ? Matrix(o.row(0)) : Matrix(o.col(0))).cwiseAbs().maxCoeff(), 0.0f);
    }
}

// ---- Larger random problems ---------------------------------------------------------------------------------

struct Large {
    Layout layout;
    Mode mode;
    Score score;
    int heads, T, S, M, dk, dv;
    bool causal, custom;
};

TEST(Parity, LargeRandomProblems)
{
    // Sizes that exercise many warps/blocks, odd sizes (tails of every tile) and S > T, within a few seconds
    // of the double-precision reference on 2 cores.
    const Large cases[] = {
        {Layout::Row, Mode::Self, Score::ScaledDot, 8, 512, 512, 256, 32, 32, true, false},
        {Layout::Column, Mode::Self, Score::ScaledDot, 8, 512, 512, 256, 32, 32, true, false},
        {Layout::Row, Mode::Cross, Score::Dot, 4, 300, 1024, 128, 24, 40, false, true},
        {Layout::Column, Mode::Cross, Score::ScaledDot, 4, 1024, 301, 128, 24, 40, false, true},
        {Layout::Row, Mode::Self, Score::Additive, 2, 200, 200, 64, 16, 16, true, false},
        {Layout::Column, Mode::Direct, Score::Additive, 3, 129, 257, 0, 20, 12, false, true},
    };
    unsigned seed = 7;
    for (const Large& c : cases) {
        ProblemSpec p;
        p.mode = c.mode;
        p.score = c.score;
        p.heads = c.heads;
        p.T = c.T;
        p.S = c.S;
        p.M = c.M ? c.M : 6;
        p.dk = c.dk;
        p.dv = c.dv;
        p.dqAdditive = c.dk + 4;
        p.A = 40;  // > the kernel's 32-wide chunk: exercises the chunk loop and its tail
        p.causal = c.causal;
        p.custom = c.custom;
        p.biases = p.wo = true;
        p.seed = seed++;
        AttentionInput in;
        AttentionConfig cfg;
        makeInLayout(p, c.layout, in, cfg);
        // Xavier scaling (as `attnscope bench` does) keeps scores O(1), as in real models; makeProblem's
        // σ = 0.5 weights are meant for M = 6 and would make softmax one-hot at M = 256.
        const float wScale = 1.0f / std::sqrt(float(p.M));
        for (Matrix* w : {&in.Wq, &in.Wk, &in.Wv, &in.Wo}) *w *= wScale;
        SCOPED_TRACE(describe(p, c.layout));
        EXPECT_TRUE(sameResult(runGpu(in, cfg), runRef(in, cfg), p.fill));
    }
}

// ---- Determinism and buffer reuse ---------------------------------------------------------------------------

bool bitwiseEqual(const Matrix& a, const Matrix& b)
{
    return a.rows() == b.rows() && a.cols() == b.cols() &&
           std::memcmp(a.data(), b.data(), sizeof(float) * std::size_t(a.size())) == 0;
}

::testing::AssertionResult identical(const AttentionResult& a, const AttentionResult& b)
{
    if (!bitwiseEqual(a.Q, b.Q) || !bitwiseEqual(a.K, b.K) || !bitwiseEqual(a.V, b.V) ||
        !bitwiseEqual(a.concat, b.concat) || !bitwiseEqual(a.output, b.output))
        return ::testing::AssertionFailure() << "projections or outputs differ between runs";
    for (std::size_t h = 0; h < a.heads.size(); ++h)
        if (!bitwiseEqual(a.heads[h].scores, b.heads[h].scores) || !bitwiseEqual(a.heads[h].weights, b.heads[h].weights) ||
            !bitwiseEqual(a.heads[h].output, b.heads[h].output))
            return ::testing::AssertionFailure() << "head " << h << " differs between runs";
    return ::testing::AssertionSuccess();
}

TEST(Parity, RunsAreBitwiseDeterministicAcrossBufferReuseAndGrowth)
{
    for (Layout layout : {Layout::Row, Layout::Column})
        for (Score score : {Score::ScaledDot, Score::Additive}) {
            ProblemSpec p;
            p.heads = 4;
            p.score = score;
            p.T = p.S = 200;
            p.M = 64;
            p.dk = p.dv = 16;
            p.causal = true;
            p.biases = p.wo = true;
            AttentionInput in;
            AttentionConfig cfg;
            makeInLayout(p, layout, in, cfg);
            SCOPED_TRACE(describe(p, layout));
            const AttentionResult first = runGpu(in, cfg);
            AttentionResult again = runGpu(in, cfg);
            EXPECT_TRUE(identical(first, again));

            // A larger problem in between makes the workspace grow (reallocate); the recompute into the same
            // result must still be bitwise the same.
            ProblemSpec big = p;
            big.T = big.S = 450;
            AttentionInput bigIn;
            AttentionConfig bigCfg;
            makeInLayout(big, layout, bigIn, bigCfg);
            (void)runGpu(bigIn, bigCfg);
            Expected<Dims> d = validate(in, cfg);
            ASSERT_TRUE(d.ok());
            ASSERT_TRUE(cuda::compute(in, cfg, *d, again).ok());
            EXPECT_TRUE(identical(first, again));
        }
}

// ---- Too large for the device ---------------------------------------------------------------------------------

TEST(Parity, ProblemTooLargeForTheDeviceIsRefusedBeforeAllocating)
{
    // 16 heads × 65536² scores and weights need 512 GiB of device memory, more than any GPU has; the inputs
    // are small (head width 1), so only the device check can refuse it.
    constexpr int kN = 65536, kH = 16;
    std::mt19937 rng(3);
    AttentionInput in;
    in.Q = test::randomMatrix(rng, kN, kH);
    in.K = test::randomMatrix(rng, kN, kH);
    in.V = test::randomMatrix(rng, kN, kH);
    AttentionConfig cfg;
    cfg.mode = Mode::Direct;
    cfg.heads = kH;
    Expected<Dims> d = validate(in, cfg);
    ASSERT_TRUE(d.ok()) << d.status().message;
    AttentionResult out;
    const Status s = cuda::compute(in, cfg, *d, out);
    EXPECT_EQ(s.code, StatusCode::ResourceExhausted);
    EXPECT_EQ(s.message.rfind("CUDA device memory: 16 head(s) × 65536 queries × 65536 keys needs ", 0), 0u) << s.message;
    // The workspace is still usable afterwards.
    ProblemSpec p;
    AttentionInput small;
    AttentionConfig smallCfg;
    makeProblem(p, small, smallCfg);
    EXPECT_TRUE(sameResult(runGpu(small, smallCfg), runRef(small, smallCfg), p.fill));
}

// ---- Through the public API ----------------------------------------------------------------------------------

TEST(Parity, PublicComputeUsesTheGpuWithTheSameWarningsAndTimings)
{
    ProblemSpec p;
    p.heads = 2;
    p.validLens = true;
    p.T = p.S = 64;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    cfg.backend = Backend::Cuda;
    Expected<AttentionResult> gpu = compute(in, cfg);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message;
    EXPECT_EQ(gpu->backend, Backend::Cuda);
    cfg.backend = Backend::Cpu;
    cfg.cpuPath = CpuPath::Reference;
    Expected<AttentionResult> ref = compute(in, cfg);
    ASSERT_TRUE(ref.ok());
    EXPECT_EQ(gpu->warnings, ref->warnings);  // one per fully masked query and head
    EXPECT_TRUE(sameResult(*gpu, *ref, p.fill));
    const PhaseTimings& t = gpu->timings;
    // Every phase that ran is timed by CUDA events (resolution ~0.5 µs; each phase launches at least one
    // kernel, which takes longer than that).
    EXPECT_GT(t.projections, 0);
    EXPECT_GT(t.scores, 0);
    EXPECT_GT(t.softmax, 0);
    EXPECT_GT(t.pv, 0);
    EXPECT_GT(t.copies, 0);
    EXPECT_GE(t.total, t.projections + t.scores + t.softmax + t.pv);
    // The copies in parts (bench's copies_parts_ms): they add up to the phase, the maps and the mask came back,
    // and a result whose maps stay on the device brings none back.
    const PhaseTimings::CopyParts& c = t.copyParts;
    EXPECT_DOUBLE_EQ(t.copies, c.upload + c.download + c.maps + c.host);
    EXPECT_GT(c.upload, 0);
    EXPECT_GT(c.download, 0);
    EXPECT_GT(c.maps, 0);
    cfg.backend = Backend::Cuda;
    cfg.mapsOnDevice = true;
    Expected<AttentionResult> kept = compute(in, cfg);
    ASSERT_TRUE(kept.ok()) << kept.status().message;
    ASSERT_TRUE(kept->mapsOnDevice);
    EXPECT_EQ(kept->timings.copyParts.maps, 0.0);
    EXPECT_GT(kept->timings.copyParts.download, 0);
}

// ---- Maps kept on the device (AttentionConfig::mapsOnDevice, attnscope/device_maps.h) -------------------------

// Equal bit for bit, NaN included (the pooled overview's empty blocks).
::testing::AssertionResult sameBits(const Matrix& a, const Matrix& b, const std::string& what)
{
    if (a.rows() != b.rows() || a.cols() != b.cols())
        return ::testing::AssertionFailure() << what << ": shape " << a.rows() << "×" << a.cols() << ", expected "
                                             << b.rows() << "×" << b.cols();
    for (Eigen::Index i = 0; i < a.size(); ++i) {
        const float x = a.data()[i], y = b.data()[i];
        if (std::isnan(x) && std::isnan(y)) continue;
        if (std::memcmp(&x, &y, sizeof x) != 0)
            return ::testing::AssertionFailure() << what << ": cell #" << i << " is " << x << ", expected " << y;
    }
    return ::testing::AssertionSuccess();
}

AttentionResult runGpuMapsOnDevice(const AttentionInput& in, AttentionConfig cfg)
{
    cfg.mapsOnDevice = true;
    return runGpu(in, cfg);
}

// Tiles, mask tiles and pooled overviews of the device against the same result downloaded whole (DenseMaps, the
// seam's host source): bitwise, for rects at the corners, odd inner rects, single cells, empty rects, and pooled
// sizes from 1×1 to larger than the rect (clamped).
::testing::AssertionResult sameMaps(const AttentionMaps& device, const AttentionMaps& host)
{
    if (device.heads() != host.heads() || device.queries() != host.queries() || device.keys() != host.keys())
        return ::testing::AssertionFailure() << "sizes differ: " << device.heads() << " heads of " << device.queries()
                                             << "×" << device.keys() << " vs " << host.heads() << " of " << host.queries()
                                             << "×" << host.keys();
    const int T = host.queries(), S = host.keys();
    const MapRect rects[] = {{0, 0, T, S}, {1, 2, T - 3, S - 5}, {T - 1, S - 1, 1, 1}, {2, 0, 0, S}, {0, 3, T, 4}};
    const std::pair<int, int> pools[] = {{1, 1}, {3, 5}, {5, 3}, {7, 11}, {1000, 1000}};
    for (int h = 0; h < host.heads(); ++h)
        for (MapKind kind : {MapKind::Scores, MapKind::Weights})
            for (const MapRect& r : rects) {
                const std::string what = std::string(toString(kind)) + " head " + std::to_string(h) + " rect " +
                                         std::to_string(r.r0) + "," + std::to_string(r.c0) + " " + std::to_string(r.rows) +
                                         "×" + std::to_string(r.cols);
                Matrix a, b;
                Status sa = device.tile(kind, 0, h, r, a), sb = host.tile(kind, 0, h, r, b);
                if (!sa.ok() || !sb.ok()) return ::testing::AssertionFailure() << what << ": " << sa.message << sb.message;
                if (auto ok = sameBits(a, b, what + " tile"); !ok) return ok;
                MaskMatrix ma, mb;
                sa = device.maskTile(0, h, r, ma);
                sb = host.maskTile(0, h, r, mb);
                if (!sa.ok() || !sb.ok()) return ::testing::AssertionFailure() << what << ": " << sa.message << sb.message;
                if (ma != mb) return ::testing::AssertionFailure() << what << ": mask tiles differ";
                for (auto [pr, pc] : pools) {
                    sa = device.pooled(kind, 0, h, r, pr, pc, a);
                    sb = host.pooled(kind, 0, h, r, pr, pc, b);
                    if (!sa.ok() || !sb.ok())
                        return ::testing::AssertionFailure() << what << ": " << sa.message << sb.message;
                    if (auto ok = sameBits(a, b, what + " pooled " + std::to_string(pr) + "×" + std::to_string(pc)); !ok)
                        return ok;
                }
            }
    return ::testing::AssertionSuccess();
}

TEST(MapsOnDevice, TilesPooledOverviewsAndMasksEqualTheDownloadedMaps)
{
    for (const auto& [p, layout] : test::deviceResultCases(700)) {
        AttentionInput in;
        AttentionConfig cfg;
        makeInLayout(p, layout, in, cfg);
        SCOPED_TRACE(describe(p, layout));
        const std::vector<AttentionResult> host{runGpu(in, cfg)};
        const AttentionResult dev = runGpuMapsOnDevice(in, cfg);
        ASSERT_NE(dev.deviceGeneration, 0u);
        EXPECT_TRUE(dev.mapsOnDevice);
        EXPECT_FALSE(host[0].mapsOnDevice);
        // The small matrices are those of the normal path, bit for bit; the maps are not on the host.
        EXPECT_TRUE(sameBits(dev.Q, host[0].Q, "Q") && sameBits(dev.K, host[0].K, "K") && sameBits(dev.V, host[0].V, "V") &&
                    sameBits(dev.concat, host[0].concat, "concat") && sameBits(dev.output, host[0].output, "output"));
        ASSERT_EQ(dev.heads.size(), host[0].heads.size());
        for (std::size_t h = 0; h < dev.heads.size(); ++h) {
            const HeadResult& d = dev.heads[h];
            EXPECT_EQ(d.scores.size(), 0);
            EXPECT_EQ(d.weights.size(), 0);
            EXPECT_EQ(d.masked.size(), 0);
            EXPECT_TRUE(sameBits(d.Q, host[0].heads[h].Q, "head Q") && sameBits(d.output, host[0].heads[h].output, "head output"));
            EXPECT_EQ(d.fullyMaskedQueries, host[0].heads[h].fullyMaskedQueries);
        }
        const DeviceMaps onDevice(dev);
        EXPECT_TRUE(onDevice.current());
        EXPECT_TRUE(sameMaps(onDevice, DenseMaps(host)));
    }
}

TEST(MapsOnDevice, AResultTheDeviceNoLongerHoldsIsRefused)
{
    ProblemSpec p;
    p.heads = 2;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    const AttentionResult first = runGpuMapsOnDevice(in, cfg);
    const DeviceMaps maps(first);
    Matrix m;
    ASSERT_TRUE(maps.tile(MapKind::Weights, 0, 1, MapRect{0, 0, 2, 2}, m).ok());
    // Outside the maps: the seam's own messages.
    Status s = maps.tile(MapKind::Weights, 0, 2, MapRect{0, 0, 2, 2}, m);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "head 2 is outside 0..1");
    s = maps.pooled(MapKind::Scores, 0, 0, MapRect{0, 0, 6, 1}, 2, 2, m);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_EQ(s.message, "tile rows 0+6, cols 0+1 is outside the 5×5 map");

    (void)runGpu(in, cfg);  // a later compute on the device replaces the result
    EXPECT_FALSE(maps.current());
    for (Status stale : {maps.tile(MapKind::Weights, 0, 1, MapRect{0, 0, 2, 2}, m),
                         maps.pooled(MapKind::Scores, 0, 0, MapRect{0, 0, 5, 5}, 2, 2, m)}) {
        EXPECT_EQ(stale.code, StatusCode::Unavailable);
        EXPECT_NE(stale.message.find("the device no longer holds this result"), std::string::npos) << stale.message;
    }
    MaskMatrix mk;
    EXPECT_EQ(maps.maskTile(0, 0, MapRect{0, 0, 1, 1}, mk).code, StatusCode::Unavailable);

    // A CPU result has no device maps.
    AttentionConfig cpu = cfg;
    cpu.backend = Backend::Cpu;
    cpu.mapsOnDevice = true;  // ignored by the CPU: its maps are on the host
    Expected<AttentionResult> onCpu = compute(in, cpu);
    ASSERT_TRUE(onCpu.ok());
    EXPECT_FALSE(onCpu->mapsOnDevice);
    EXPECT_EQ(onCpu->heads[0].weights.rows(), 5);
    s = DeviceMaps(*onCpu).tile(MapKind::Weights, 0, 0, MapRect{0, 0, 1, 1}, m);
    EXPECT_EQ(s.code, StatusCode::Unavailable);
    EXPECT_EQ(s.message, "device maps: the result was not computed on the CUDA device");
}

TEST(MapsOnDevice, ThePublicComputeKeepsTheMapsOnTheDeviceWithTheSameOutputs)
{
    ProblemSpec p;
    p.heads = 2;
    p.validLens = true;
    p.T = p.S = 40;
    p.wo = true;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    cfg.backend = Backend::Cuda;
    Expected<AttentionResult> whole = compute(in, cfg);
    ASSERT_TRUE(whole.ok()) << whole.status().message;
    cfg.mapsOnDevice = true;
    Expected<AttentionResult> kept = compute(in, cfg);
    ASSERT_TRUE(kept.ok()) << kept.status().message;
    EXPECT_EQ(kept->backend, Backend::Cuda);
    EXPECT_TRUE(kept->mapsOnDevice);
    EXPECT_TRUE(sameBits(kept->output, whole->output, "output"));
    EXPECT_EQ(kept->warnings, whole->warnings);  // the fully masked query's, per head
    EXPECT_EQ(kept->heads[0].weights.size(), 0);
}

// The device's finiteness check says what the host's did: the same first matrix, head and [r][c] as
// checkResultFinite on the reference path, for overflows planted in the projections, one head's scores and the
// output, in both layouts.
TEST(MapsOnDevice, TheDeviceFinitenessCheckNamesTheFirstOverflowAsTheHostDoes)
{
    enum class Plant { Q, Scores, Output };
    for (Layout layout : {Layout::Row, Layout::Column})
        for (Plant plant : {Plant::Q, Plant::Scores, Plant::Output})
            for (bool onDevice : {false, true}) {
                ProblemSpec p;
                p.heads = 3;
                p.T = 6;
                p.S = 7;
                p.mode = plant == Plant::Scores ? Mode::Direct : Mode::Cross;
                p.wo = true;
                p.seed = 900;
                AttentionInput in;
                AttentionConfig cfg;
                makeProblem(p, in, cfg);
                switch (plant) {
                case Plant::Q: in.Wq(1, 4) = 3e38f, in.X(2, 1) = 3e38f; break;   // Q[2][4] (and more) overflow
                case Plant::Scores: in.Q(4, 3 * 1 + 2) = 2e20f, in.K(5, 3 * 1 + 2) = 3e20f; break;  // head 1, q 4, k 5
                case Plant::Output: {
                    // output[0][1] = Σ_k concat[0][k]·Wo[k][1] with every term ±3e38·|concat[0][k]| of one sign:
                    // past float's range once Σ|concat[0][k]| > 1.13 (about 3 here).
                    AttentionConfig ref = cfg;
                    ref.cpuPath = CpuPath::Reference;
                    Expected<AttentionResult> clean = compute(in, ref);
                    ASSERT_TRUE(clean.ok()) << clean.status().message;
                    for (Eigen::Index k = 0; k < in.Wo.rows(); ++k) in.Wo(k, 1) = std::copysign(3e38f, clean->concat(0, k));
                    break;
                }
                }
                if (layout == Layout::Column) in = test::transposed(in);
                cfg.layout = layout;
                cfg.mapsOnDevice = onDevice;
                cfg.backend = Backend::Cuda;
                Expected<AttentionResult> gpu = compute(in, cfg);
                cfg.backend = Backend::Cpu;
                cfg.cpuPath = CpuPath::Reference;
                Expected<AttentionResult> ref = compute(in, cfg);
                SCOPED_TRACE(std::string(toString(layout)) + " plant " + std::to_string(int(plant)) +
                             (onDevice ? " maps on device" : ""));
                ASSERT_FALSE(ref.ok()) << "the planted values did not overflow on the CPU";
                ASSERT_FALSE(gpu.ok());
                EXPECT_EQ(gpu.status().code, StatusCode::InvalidArgument);
                EXPECT_EQ(gpu.status().message, ref.status().message);
            }
}

// The check's kernel on its own: in a row-major concat the first bad value is the first head's, not the first in
// memory (head h's output is the column block h, HeadResult::output's rows within it).
TEST(MapsOnDevice, TheFinitenessKernelOrdersARowMajorConcatHeadByHead)
{
    // T = 3 rows of 2 heads × d_v = 2: head 1's row 0 (index 2) is before head 0's row 2 (index 9) in memory.
    std::vector<float> concat(12, 1.0f);
    concat[2] = std::numeric_limits<float>::quiet_NaN();
    concat[9] = std::numeric_limits<float>::infinity();
    float* dev = nullptr;
    unsigned long long* first = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), concat.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&first), 2 * sizeof(unsigned long long)), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dev, concat.data(), concat.size() * sizeof(float), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(first, 0xff, 2 * sizeof(unsigned long long), nullptr), cudaSuccess);
    ASSERT_EQ(cuda::launchFirstNonFinite(dev, 12, 4, 3, 2, first, nullptr), cudaSuccess);      // head by head
    ASSERT_EQ(cuda::launchFirstNonFinite(dev, 12, 4, 3, 0, first + 1, nullptr), cudaSuccess);  // memory order
    unsigned long long keys[2] = {0, 0};
    ASSERT_EQ(cudaMemcpyAsync(keys, first, sizeof keys, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    EXPECT_EQ(keys[0], 5u);  // head 0, row 2, column 1: (0·3 + 2)·2 + 1
    EXPECT_EQ(keys[1], 2u);
    (void)cudaFree(dev);
    (void)cudaFree(first);
}

// ---- Work on a device result's maps as kernels: ranges, stored-order pools, whole maps on demand ----------------

// DeviceMaps::ranges of every head, both kinds, symmetric and not, against attn::displayRange of `host`'s maps (the
// same result downloaded): bit for bit.
::testing::AssertionResult rangesMatch(const DeviceMaps& maps, const AttentionResult& host)
{
    for (MapKind kind : {MapKind::Scores, MapKind::Weights})
        for (bool symmetric : {false, true}) {
            std::vector<DisplayRange> got;
            const Status s = maps.ranges(kind, 0, symmetric, got);
            if (!s.ok()) return ::testing::AssertionFailure() << toString(kind) << ": " << s.message;
            if (got.size() != host.heads.size())
                return ::testing::AssertionFailure() << got.size() << " ranges for " << host.heads.size() << " heads";
            for (std::size_t h = 0; h < got.size(); ++h) {
                const HeadResult& r = host.heads[h];
                const DisplayRange want = displayRange(kind == MapKind::Scores ? r.scores : r.weights, &r.masked, symmetric);
                const std::string what = std::string(toString(kind)) + " head " + std::to_string(h) +
                                         (symmetric ? " symmetric" : "");
                if (auto ok = test::sameRangeBits(got[h], want, what); !ok) return ok;
            }
        }
    return ::testing::AssertionSuccess();
}

// The problem of a case; `allMasked`: every cell masked by the custom mask (every query fully masked).
void makeCase(const ProblemSpec& p, Layout layout, bool allMasked, AttentionInput& in, AttentionConfig& cfg)
{
    makeInLayout(p, layout, in, cfg);
    if (allMasked) {
        in.mask.custom.resize(layout == Layout::Row ? p.T : p.S, layout == Layout::Row ? p.S : p.T);
        in.mask.custom.setOnes();
    }
}

TEST(MapsOnDevice, RangesArePerHeadDisplayRangesOfTheDownloadedMaps)
{
    const auto cases = test::deviceResultCases(900);
    for (std::size_t c = 0; c <= cases.size(); ++c) {
        const bool allMasked = c == cases.size();  // the last: the first case with every cell masked
        const auto& [p, layout] = cases[allMasked ? 0 : c];
        AttentionInput in;
        AttentionConfig cfg;
        makeCase(p, layout, allMasked, in, cfg);
        SCOPED_TRACE(describe(p, layout) + (allMasked ? " every cell masked" : ""));
        const AttentionResult host = runGpu(in, cfg);
        // The copied path's result still lies on the device: its ranges come from there too.
        EXPECT_TRUE(rangesMatch(DeviceMaps(host), host));
        const AttentionResult dev = runGpuMapsOnDevice(in, cfg);
        EXPECT_TRUE(rangesMatch(DeviceMaps(dev), host));
        if (allMasked) {
            std::vector<DisplayRange> r;
            ASSERT_TRUE(DeviceMaps(dev).ranges(MapKind::Weights, 0, false, r).ok());
            EXPECT_EQ(r[0].lo, 0.0f);  // nothing open: displayRange's [0, 1]
            EXPECT_EQ(r[0].hi, 1.0f);
        }
    }
}

// The kernel itself on planted cells a successful compute never leaves (non-finite values, both zeros), against a
// naive scan: masked cells skipped, ±inf and NaN counted, -0 taken below +0, maps with nothing open.
TEST(MapsOnDevice, TheRangeKernelSkipsMaskedCellsCountsNonFiniteOnesAndOrdersTheZeros)
{
    constexpr int kMaps = 4;
    constexpr long long kCells = 150;
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> maps(std::size_t(kMaps * kCells));
    std::vector<std::uint8_t> mask(std::size_t(kCells), 0);
    std::mt19937 rng(4242);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    for (float& v : maps) v = u(rng);
    for (long long c = 0; c < kCells; c += 7) mask[std::size_t(c)] = 1;
    float* m0 = maps.data();
    m0[3] = nan, m0[50] = inf, m0[149] = -inf;  // open: counted
    m0[7] = 1e30f, m0[14] = nan;                // masked: neither counted nor in the range
    float* m1 = m0 + kCells;                    // non-negative, its smallest both zeros: -0
    float* m2 = m1 + kCells;                    // non-positive, its largest both zeros: +0
    for (long long c = 0; c < kCells; ++c) m1[c] = std::fabs(m1[c]) + 0.5f, m2[c] = -std::fabs(m2[c]) - 0.5f;
    m1[20] = 0.0f, m1[100] = -0.0f, m1[101] = 0.0f;
    m2[22] = -0.0f, m2[60] = 0.0f, m2[130] = -0.0f;
    float* m3 = m2 + kCells;  // every open cell non-finite: no range
    for (long long c = 0; c < kCells; ++c) m3[c] = c % 2 ? inf : nan;

    auto below = [](float a, float b) { return a < b || (a == b && std::signbit(a) && !std::signbit(b)); };
    for (bool masked : {true, false}) {
        SCOPED_TRACE(masked ? "with a mask" : "no mask");
        float *dMaps = nullptr, *parts = nullptr, *ends = nullptr;
        std::uint8_t* dMask = nullptr;
        unsigned long long *bads = nullptr, *bad = nullptr;
        const std::size_t nParts = std::size_t(kMaps) * cuda::kRangeMaxParts;
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dMaps), maps.size() * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dMask), mask.size()), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&parts), 2 * nParts * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&ends), 2 * kMaps * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&bads), (nParts + kMaps) * sizeof(unsigned long long)), cudaSuccess);
        bad = bads + nParts;
        ASSERT_EQ(cudaMemcpyAsync(dMaps, maps.data(), maps.size() * sizeof(float), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
        ASSERT_EQ(cudaMemcpyAsync(dMask, mask.data(), mask.size(), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
        ASSERT_EQ(cuda::launchMapRanges(dMaps, masked ? dMask : nullptr, kMaps, kCells, parts, parts + nParts, bads, ends,
                                        ends + kMaps, bad, nullptr),
                  cudaSuccess);
        float got[2 * kMaps];
        unsigned long long gotBad[kMaps];
        ASSERT_EQ(cudaMemcpyAsync(got, ends, sizeof got, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
        ASSERT_EQ(cudaMemcpyAsync(gotBad, bad, sizeof gotBad, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
        for (int m = 0; m < kMaps; ++m) {
            SCOPED_TRACE("map " + std::to_string(m));
            float lo = inf, hi = -inf;
            unsigned long long nonFinite = 0;
            for (long long c = 0; c < kCells; ++c) {
                const float v = maps[std::size_t(m * kCells + c)];
                if (masked && mask[std::size_t(c)]) continue;
                if (!std::isfinite(v)) {
                    ++nonFinite;
                    continue;
                }
                if (below(v, lo)) lo = v;
                if (below(hi, v)) hi = v;
            }
            EXPECT_EQ(std::memcmp(&got[m], &lo, sizeof lo), 0) << got[m] << " vs " << lo;
            EXPECT_EQ(std::memcmp(&got[kMaps + m], &hi, sizeof hi), 0) << got[kMaps + m] << " vs " << hi;
            EXPECT_EQ(gotBad[m], nonFinite);
            // The host's displayRange of the same map: the same values (== : its pick among ±0 follows Eigen's lanes).
            Matrix one = Eigen::Map<const Matrix>(maps.data() + m * kCells, 1, kCells);
            MaskMatrix flags = Eigen::Map<const MaskMatrix>(mask.data(), 1, kCells);
            const DisplayRange host = displayRange(one, masked ? &flags : nullptr, false);
            const DisplayRange dev = rangeFromMinMax(got[m], got[kMaps + m], int(gotBad[m]), false);
            EXPECT_EQ(dev.lo, host.lo);
            EXPECT_EQ(dev.hi, host.hi);
            EXPECT_EQ(dev.nonFinite, host.nonFinite);
        }
        EXPECT_TRUE(std::signbit(got[1]) && got[1] == 0.0f);                 // -0 below +0
        EXPECT_TRUE(!std::signbit(got[kMaps + 2]) && got[kMaps + 2] == 0.0f);  // +0 above -0
        EXPECT_EQ(got[3], inf);  // nothing finite: the empty range
        EXPECT_EQ(got[kMaps + 3], -inf);
        for (void* p : {static_cast<void*>(dMaps), static_cast<void*>(dMask), static_cast<void*>(parts),
                        static_cast<void*>(ends), static_cast<void*>(bads)})
            (void)cudaFree(p);
    }
}

// pooledStored: the parts the window names in stored rows and columns, pooled on the device, against attn::poolMax of
// the downloaded map's block: bit for bit, whole maps, inner and single-cell parts, sizes from 1×1 to clamped.
TEST(MapsOnDevice, PooledStoredPartsArePoolMaxOfTheStoredMaps)
{
    for (const auto& [p, layout] : test::deviceResultCases(920)) {
        AttentionInput in;
        AttentionConfig cfg;
        makeInLayout(p, layout, in, cfg);
        SCOPED_TRACE(describe(p, layout));
        const AttentionResult host = runGpu(in, cfg);
        const AttentionResult dev = runGpuMapsOnDevice(in, cfg);
        const DeviceMaps maps(dev);
        const int R = int(host.heads[0].scores.rows()), C = int(host.heads[0].scores.cols());
        const MapRect rects[] = {{0, 0, R, C}, {1, 2, R - 3, C - 5}, {R - 1, C - 1, 1, 1}, {0, 3, R, 4}};
        const std::pair<int, int> pools[] = {{1, 1}, {3, 5}, {5, 3}, {R, C}, {1000, 1000}};
        for (std::size_t h = 0; h < host.heads.size(); ++h)
            for (MapKind kind : {MapKind::Scores, MapKind::Weights}) {
                const Matrix& m = kind == MapKind::Scores ? host.heads[h].scores : host.heads[h].weights;
                for (const MapRect& r : rects)
                    for (auto [pr, pc] : pools) {
                        Matrix got;
                        const Status s = maps.pooledStored(kind, 0, int(h), r, pr, pc, got);
                        ASSERT_TRUE(s.ok()) << s.message;
                        EXPECT_TRUE(sameBits(got, poolMax(m.block(r.r0, r.c0, r.rows, r.cols), pr, pc),
                                             std::string(toString(kind)) + " head " + std::to_string(h) + " rect " +
                                                 std::to_string(r.r0) + "," + std::to_string(r.c0) + " " +
                                                 std::to_string(r.rows) + "×" + std::to_string(r.cols) + " pooled " +
                                                 std::to_string(pr) + "×" + std::to_string(pc)));
                    }
            }
        Matrix none;
        ASSERT_TRUE(maps.pooledStored(MapKind::Weights, 0, 0, MapRect{1, 1, 0, 3}, 2, 2, none).ok());
        EXPECT_EQ(none.size(), 0);
        // Outside the stored map: the seam's message, in query × key terms.
        const Status s = maps.pooledStored(MapKind::Weights, 0, 0, MapRect{0, 0, R + 1, C}, 2, 2, none);
        EXPECT_EQ(s.code, StatusCode::InvalidArgument);
        EXPECT_NE(s.message.find("is outside the " + std::to_string(p.T) + "×" + std::to_string(p.S) + " map"),
                  std::string::npos)
            << s.message;
    }
}

// Everything a result holds, bit for bit: what fetchDeviceMaps must give back.
::testing::AssertionResult sameWholeResult(const AttentionResult& a, const AttentionResult& b)
{
    if (a.layout != b.layout || a.mapsOnDevice != b.mapsOnDevice || a.heads.size() != b.heads.size() || a.scale != b.scale)
        return ::testing::AssertionFailure() << "layout, scale, heads or mapsOnDevice differ";
    for (auto [x, y, name] : {std::tuple{&a.Q, &b.Q, "Q"}, {&a.K, &b.K, "K"}, {&a.V, &b.V, "V"},
                              {&a.concat, &b.concat, "concat"}, {&a.output, &b.output, "output"}})
        if (auto ok = sameBits(*x, *y, name); !ok) return ok;
    for (std::size_t h = 0; h < a.heads.size(); ++h) {
        const HeadResult &x = a.heads[h], &y = b.heads[h];
        const std::string head = "head " + std::to_string(h) + " ";
        for (auto [u, v, name] : {std::tuple{&x.Q, &y.Q, "Q"}, {&x.K, &y.K, "K"}, {&x.V, &y.V, "V"},
                                  {&x.scores, &y.scores, "scores"}, {&x.weights, &y.weights, "weights"},
                                  {&x.output, &y.output, "output"}})
            if (auto ok = sameBits(*u, *v, head + name); !ok) return ok;
        if (x.masked.rows() != y.masked.rows() || x.masked.cols() != y.masked.cols() || x.masked != y.masked)
            return ::testing::AssertionFailure() << head << "masked differs";
        if (x.fullyMaskedQueries != y.fullyMaskedQueries) return ::testing::AssertionFailure() << head << "fully masked queries differ";
    }
    return ::testing::AssertionSuccess();
}

TEST(MapsOnDevice, FetchingTheMapsGivesTheCopiedPathsResult)
{
    auto cases = test::deviceResultCases(940);
    // Large enough (2·8·256² floats: 4 MiB) for the pinned staging of downloadMaps.
    ProblemSpec big;
    big.heads = 8;
    big.T = big.S = 256;
    big.causal = true;
    big.seed = 990;
    cases.push_back({big, Layout::Row});
    for (const auto& [p, layout] : cases) {
        AttentionInput in;
        AttentionConfig cfg;
        makeInLayout(p, layout, in, cfg);
        SCOPED_TRACE(describe(p, layout));
        const AttentionResult copied = runGpu(in, cfg);
        AttentionResult kept = runGpuMapsOnDevice(in, cfg);
        ASSERT_TRUE(kept.mapsOnDevice);
        const Status s = fetchDeviceMaps(kept);
        ASSERT_TRUE(s.ok()) << s.message;
        EXPECT_FALSE(kept.mapsOnDevice);
        EXPECT_TRUE(sameWholeResult(kept, copied));
        const Status again = fetchDeviceMaps(kept);  // on the host now: nothing to do
        EXPECT_TRUE(again.ok()) << again.message;
        EXPECT_TRUE(sameWholeResult(kept, copied));
    }
}

TEST(MapsOnDevice, FetchingTheMapsOfAReplacedResultIsRefusedAndACpuResultIsLeftAsItIs)
{
    ProblemSpec p;
    p.heads = 2;
    p.causal = true;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    AttentionResult kept = runGpuMapsOnDevice(in, cfg);
    (void)runGpu(in, cfg);  // a later compute on the device replaces it
    const Status s = fetchDeviceMaps(kept);
    EXPECT_EQ(s.code, StatusCode::Unavailable);
    EXPECT_NE(s.message.find("the device no longer holds this result"), std::string::npos) << s.message;
    EXPECT_NE(s.message.find("compute it again"), std::string::npos) << s.message;
    EXPECT_TRUE(kept.mapsOnDevice);  // untouched
    EXPECT_EQ(kept.heads[0].weights.size(), 0);
    std::vector<DisplayRange> r;
    const Status stale = DeviceMaps(kept).ranges(MapKind::Scores, 0, true, r);
    EXPECT_EQ(stale.code, StatusCode::Unavailable);
    EXPECT_NE(stale.message.find("the device no longer holds this result"), std::string::npos) << stale.message;
    EXPECT_EQ(DeviceMaps(kept).ranges(MapKind::Scores, 1, true, r).code, StatusCode::InvalidArgument);  // layer 1

    AttentionConfig onCpu = cfg;
    onCpu.backend = Backend::Cpu;
    Expected<AttentionResult> cpu = compute(in, onCpu);
    ASSERT_TRUE(cpu.ok());
    AttentionResult same = *cpu;
    EXPECT_TRUE(fetchDeviceMaps(same).ok());  // its maps are on the host: a no-op
    EXPECT_TRUE(sameWholeResult(same, *cpu));
    const Status noRange = DeviceMaps(*cpu).ranges(MapKind::Weights, 0, false, r);
    EXPECT_EQ(noRange.code, StatusCode::Unavailable);
    EXPECT_EQ(noRange.message, "device maps: the result was not computed on the CUDA device");
}

// ---- The GPU's bounds (attnscope/gpu_bounds.h) ---------------------------------------------------------------

TEST(GpuBounds, MeasuresEveryBoundWithSmallSizes)
{
    // Small sizes: the emulated SGEMM is a plain loop. Every figure must be positive and finite; their values are
    // the device's (on the emulation, CUDA events report a fixed 1 µs).
    GpuBoundsOptions o;
    o.sgemmN = 64;
    o.copyBytes = std::size_t(1) << 20;
    o.repeats = 2;
    Expected<GpuBounds> b = measureGpuBounds(o);
    ASSERT_TRUE(b.ok()) << b.status().message;
    EXPECT_FALSE(b->device.empty());
    EXPECT_GE(b->hostThreads, 1);
    for (double v : {b->sgemmGflops, b->deviceMemoryGBs, b->hostToDeviceGBs, b->deviceToHostGBs, b->pageableDeviceToHostGBs,
                     b->hostMemcpyGBs, b->hostRegisterGBs}) {
        EXPECT_GT(v, 0);
        EXPECT_TRUE(std::isfinite(v));
    }
    EXPECT_EQ(b->sgemmN, 64);
    EXPECT_EQ(b->copyBytes, o.copyBytes);
    // The backend still computes afterwards (the measurement used and left its stream and handle).
    ProblemSpec p;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    EXPECT_TRUE(sameResult(runGpu(in, cfg), runRef(in, cfg), p.fill));
}

TEST(GpuBounds, RefusesBadSizesWithTheirValues)
{
    GpuBoundsOptions o;
    o.sgemmN = 0;
    Expected<GpuBounds> b = measureGpuBounds(o);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code, StatusCode::InvalidArgument);
    EXPECT_NE(b.status().message.find("expected sgemmN ≥ 1, copyBytes ≥ 4 and repeats ≥ 1, got 0, "), std::string::npos)
        << b.status().message;
    o.sgemmN = 1 << 20;  // 3 × 4 TiB of matrices: more than any device holds
    b = measureGpuBounds(o);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code, StatusCode::ResourceExhausted) << b.status().message;
}

// The host pool under the staged copies and the per-head views (core/cuda/host_tasks.h): a group's wait() returns once
// every task ran, rethrows the first exception after the others finished, and groups used at once from several
// threads each see only their own tasks.
TEST(HostTasks, AGroupWaitsForEveryTaskAndRethrowsTheFirstError)
{
    std::vector<int> ran(1000, 0);
    cuda::forEachOnPool(1000, [&](int i) { ran[std::size_t(i)] += i; });
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(ran[std::size_t(i)], i) << "task " << i;

    std::atomic<int> finished{0};
    {
        cuda::TaskGroup group;
        for (int i = 0; i < 64; ++i)
            group.run([&finished, i] {
                if (i == 7) throw std::runtime_error("task 7 failed");
                ++finished;
            });
        EXPECT_THROW(
            {
                try {
                    group.wait();
                } catch (const std::runtime_error& e) {
                    EXPECT_STREQ(e.what(), "task 7 failed");
                    throw;
                }
            },
            std::runtime_error);
        EXPECT_EQ(finished.load(), 63);
    }

    std::vector<std::thread> users;
    std::vector<long long> sums(4, 0);
    for (int u = 0; u < 4; ++u)
        users.emplace_back([&sums, u] {
            std::vector<long long> parts(200, 0);
            cuda::forEachOnPool(200, [&](int i) { parts[std::size_t(i)] = (u + 1) * i; });
            for (long long p : parts) sums[std::size_t(u)] += p;
        });
    for (std::thread& t : users) t.join();
    for (int u = 0; u < 4; ++u) EXPECT_EQ(sums[std::size_t(u)], (u + 1) * 199LL * 200 / 2) << "user " << u;
}

// The staged copies themselves (core/cuda/staged_copy.h), both ways, with slots of 4 KiB: pieces of odd sizes in
// either direction land whole, in order, whatever the chunks (small totals are cut finer than a slot, large ones
// take whole slots, reused many times over), and the upload's spans on the pool put every byte where it belongs.
TEST(StagedCopy, PiecesOfAnySizeLandWholeThroughFewSmallSlots)
{
    cuda::PinnedStaging staging(3, 4096);  // 1024 floats a slot
    ASSERT_TRUE(staging.ensure().ok());
    for (std::size_t total : {std::size_t(700), std::size_t(3000), std::size_t(50000)}) {
        // Three pieces: a third, a single float, the rest.
        const std::vector<std::size_t> sizes = {total / 3, 1, total - total / 3 - 1};
        std::vector<std::vector<float>> host(sizes.size()), back(sizes.size());
        std::vector<float*> dev(sizes.size(), nullptr);
        std::vector<cuda::DevicePiece> up;
        std::vector<cuda::HostPiece> down;
        float value = 1.0f;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            host[i].resize(sizes[i]);
            for (float& v : host[i]) v = value++;
            back[i].assign(sizes[i], -1.0f);
            ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev[i]), sizes[i] * sizeof(float)), cudaSuccess);
            up.push_back({dev[i], host[i].data(), sizes[i] * sizeof(float)});
            down.push_back({back[i].data(), dev[i], sizes[i]});
        }
        ASSERT_TRUE(cuda::stagedUpload(nullptr, staging, up).ok()) << total;
        ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
        ASSERT_TRUE(cuda::stagedDownload(nullptr, staging, down).ok()) << total;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            EXPECT_EQ(back[i], host[i]) << "piece " << i << " of " << total << " floats";
            (void)cudaFree(dev[i]);
        }
    }
}

} // namespace
} // namespace attn

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    if (!attn::test::deviceForTests("the CUDA parity tests", false)) return attn::test::kSkipped;
    const int result = RUN_ALL_TESTS();
    std::printf("largest NMSE per matrix (threshold %.0e):\n", attn::kMaxNmse);
    for (const auto& [kind, worst] : attn::worstNmse()) std::printf("  %-14s %.3e\n", kind.c_str(), worst);
    return result;
}

