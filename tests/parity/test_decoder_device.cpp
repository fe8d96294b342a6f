// The decoder forward on the device (issue 34: every layer on the GPU) against the CPU path, for the tiny model of
// every family in tests/model/data, as a Hugging Face directory and as GGUF: the residual streams, Q, K, V, the
// heads' contexts and kept weights, the final norm, the surprise, the last logits; an ablation recomputed from a
// layer, pinned Q/K/V, tokens appended, a deferred surprise, a lazy (long-text) run's Q, K and log-sum-exp, Auto;
// the scans (head importance, activation patching) of a run on the device, batched there, against the CPU's.
// Every run must report the GPU (no silent fallback).
//
// Built twice: over the emulated CUDA runtime (test_decoder_device_emulated, label unit: the kernels' source runs
// on the CPU, a fiber per GPU thread; cuBLAS is a plain loop), and against the real backend (test_decoder_device,
// label gpu), which exits 77 (skipped) without a usable device.
//
// Tolerances: both sides are float32 and sum in other orders (cuBLAS's or the emulator's products against Eigen's,
// warp butterflies against sequential loops, expf/tanhf/erff against Eigen's vectorised ones), about 1e-7 relative
// per operation. Through 2–6 layers of products of width ≤ 64 the residual streams of these models (values of a few
// units) agree to ~1e-6; 1e-4 relative to the largest value leaves two orders of margin, as test_decoder_cuda's
// kHiddenTol does for the attention core. Weights are probabilities (≤ 1): 1e-5 absolute. Logits and surprise
// are log-sum-exps over 320 tokens of values ~10: 1e-3, as test_decoder_cuda.
#include "cuda/cuda_backend.h"
#include "device_test_main.h"

#include <attnscope/decoder.h>
#include <attnscope/interp.h>
#include <attnscope/recycled_buffers.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr double kHiddenTol = 1e-4;  // relative to max(1, the largest |value|)
constexpr double kWeightTol = 1e-5;
constexpr double kLogitTol = 1e-3;   // relative to max(1, the largest |logit|)
constexpr double kSurpriseTol = 1e-3;

double maxAbsDiff(const attn::Matrix& a, const attn::Matrix& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols()) return INFINITY;
    if (a.size() == 0) return 0;
    return (a - b).cwiseAbs().maxCoeff();
}

double scaleOf(const attn::Matrix& m) { return std::max(1.0, m.size() ? double(m.cwiseAbs().maxCoeff()) : 0.0); }

#define EXPECT_CLOSE(a, b, tol, what) EXPECT_LE(maxAbsDiff((a), (b)), (tol) * scaleOf(b)) << what

// Ablates head 1 of the last layer in the device run d and recomputes that layer on the device; returns the CPU's
// forward over `ids` with the same ablation (options `cpu`).
attn::Expected<attn::DecoderRun> ablateLastLayer(attn::DecoderModel& model, attn::DecoderRun& d, const std::vector<int>& ids,
                                                 attn::DecoderOptions cpu)
{
    const int L = model.config.layers;
    d.ablated = {{L - 1, 1}};
    ATTNSCOPE_RETURN_IF_ERROR(attn::recomputeDecoderFrom(model, L - 1, d, attn::Backend::Cuda));
    cpu.ablate = d.ablated;
    return attn::runDecoder(model, ids, cpu);
}

void expectOnTheDevice(const attn::DecoderRun& run, const std::string& what)
{
    EXPECT_EQ(run.backend, attn::Backend::Cuda) << what;
    EXPECT_TRUE(run.warnings.empty()) << what << ": " << (run.warnings.empty() ? "" : run.warnings.front());
    for (std::size_t l = 0; l < run.attention.size(); ++l) EXPECT_EQ(run.attention[l].backend, attn::Backend::Cuda) << what << " layer " << l;
}

void expectSamePredictions(const attn::DecoderRun& dev, const attn::DecoderRun& cpu, const std::string& what)
{
    EXPECT_CLOSE(dev.finalHidden, cpu.finalHidden, kHiddenTol, what + " final norm");
    ASSERT_EQ(dev.lastLogits.size(), cpu.lastLogits.size()) << what;
    EXPECT_CLOSE(attn::Matrix(dev.lastLogits), attn::Matrix(cpu.lastLogits), kLogitTol, what + " last logits");
    ASSERT_EQ(dev.surprise.size(), cpu.surprise.size()) << what;
    EXPECT_TRUE(std::isnan(dev.surprise[0])) << what;
    for (std::size_t i = 1; i < dev.surprise.size(); ++i) EXPECT_NEAR(dev.surprise[i], cpu.surprise[i], kSurpriseTol) << what << " token " << i;
    EXPECT_EQ(dev.surpriseStale, cpu.surpriseStale) << what;
}

// A dense run: every stream, Q/K/V, context and head's weights.
void expectSameDenseRun(const attn::DecoderModel& model, const attn::DecoderRun& dev, const attn::DecoderRun& cpu, const std::string& what)
{
    ASSERT_EQ(dev.encoding.ids, cpu.encoding.ids) << what;
    ASSERT_EQ(dev.hidden.size(), cpu.hidden.size()) << what;
    for (std::size_t l = 0; l < dev.hidden.size(); ++l) EXPECT_CLOSE(dev.hidden[l], cpu.hidden[l], kHiddenTol, what + " hidden " + std::to_string(l));
    ASSERT_EQ(dev.weights.size(), cpu.weights.size()) << what;
    for (int l = 0; l < model.config.layers; ++l) {
        const attn::AttentionResult &a = dev.attention[std::size_t(l)], &b = cpu.attention[std::size_t(l)];
        const std::string at = what + " layer " + std::to_string(l);
        EXPECT_CLOSE(a.Q, b.Q, kHiddenTol, at + " Q");
        EXPECT_CLOSE(a.K, b.K, kHiddenTol, at + " K");
        EXPECT_CLOSE(a.V, b.V, kHiddenTol, at + " V");
        EXPECT_CLOSE(a.concat, b.concat, kHiddenTol, at + " concat");
        EXPECT_EQ(a.heads.size(), b.heads.size()) << at;
        EXPECT_FLOAT_EQ(a.scale, b.scale) << at;
        ASSERT_EQ(dev.weights[std::size_t(l)].size(), std::size_t(model.config.heads)) << at;
        for (int h = 0; h < model.config.heads; ++h)
            EXPECT_LE(maxAbsDiff(dev.weights[std::size_t(l)][std::size_t(h)].toMatrix(), cpu.weights[std::size_t(l)][std::size_t(h)].toMatrix()),
                      kWeightTol)
                << at << " head " << h << " weights";
    }
    expectSamePredictions(dev, cpu, what);
    // The maps through the tile seam (scores from the kept Q and K, the mask rule) agree as well.
    const auto a = attn::decoderMaps(model, dev), b = attn::decoderMaps(model, cpu);
    attn::Matrix x, y;
    ASSERT_TRUE(a->whole(attn::MapKind::Scores, model.config.layers - 1, 0, x).ok());
    ASSERT_TRUE(b->whole(attn::MapKind::Scores, model.config.layers - 1, 0, y).ok());
    EXPECT_CLOSE(x, y, kHiddenTol, what + " scores");
}

struct Case {
    std::string name;
    std::string path;
    bool full;  // every check (the Hugging Face directories); GGUF: forward, ablation and append
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases()
{
    std::vector<Case> out;
    for (const char* family : {"tiny_llama", "tiny_qwen2", "tiny_qwen3", "tiny_gpt2", "tiny_gemma2", "tiny_gemma3", "tiny_gptneox",
                               "tiny_phi3", "tiny_olmo2"}) {
        const std::string dir = std::string(ATTNSCOPE_DECODER_DATA) + "/" + family;
        out.push_back({family, dir, true});
        out.push_back({std::string(family) + ".gguf", dir + ".gguf", false});
    }
    return out;
}

// Each case's model (a load that fails fails the test) and the options of both paths.
class DecoderDevice : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override
    {
        auto loaded = attn::loadDecoder(GetParam().path);
        ASSERT_TRUE(loaded.ok()) << loaded.status().message;
        model = std::move(*loaded);
        L = model.config.layers;
        dev.backend = attn::Backend::Cuda;
    }
    attn::DecoderModel model;
    int L = 0;
    attn::DecoderOptions dev, cpu;
};

// 9 tokens: past the tiny Gemmas' window of 4, so their sliding layers mask.
const std::vector<int> kIds = {5, 17, 42, 99, 3, 250, 7, 64, 128};

TEST_P(DecoderDevice, EqualsTheCpu)
{
    const Case& tc = GetParam();

    // A whole forward.
    auto d = attn::runDecoder(model, kIds, dev);
    auto c = attn::runDecoder(model, kIds, cpu);
    ASSERT_TRUE(d.ok()) << tc.name << ": " << d.status().message;
    ASSERT_TRUE(c.ok()) << tc.name << ": " << c.status().message;
    expectOnTheDevice(*d, tc.name + " forward");
    EXPECT_EQ(c->backend, attn::Backend::Cpu);
    EXPECT_GT(d->deviceTimings.bytesBack, 0.0);
    expectSameDenseRun(model, *d, *c, tc.name + " forward");

    // An ablation recomputed from the last layer (its head 1 zeroed), against a CPU forward with it.
    auto ca = ablateLastLayer(model, *d, kIds, cpu);
    ASSERT_TRUE(ca.ok()) << ca.status().message;
    expectOnTheDevice(*d, tc.name + " ablated");
    expectSameDenseRun(model, *d, *ca, tc.name + " ablated");
    EXPECT_GT((d->lastLogits - c->lastLogits).cwiseAbs().maxCoeff(), 1e-5) << tc.name << ": the ablation changed nothing";

    // Tokens appended on the device (one, then two) equal a whole CPU forward over the longer text.
    auto g = attn::runDecoder(model, std::vector<int>(kIds.begin(), kIds.begin() + 6), dev);
    ASSERT_TRUE(g.ok()) << g.status().message;
    ASSERT_TRUE(attn::appendTokens(model, {kIds[6]}, *g, attn::Backend::Cuda).ok());
    ASSERT_TRUE(attn::appendTokens(model, {kIds[7], kIds[8]}, *g, attn::Backend::Cuda).ok());
    expectOnTheDevice(*g, tc.name + " appended");
    expectSameDenseRun(model, *g, *c, tc.name + " appended");
    if (!tc.full) return;

    // Recompute from layer 0 with the surprise deferred, then its second phase (on the CPU).
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *g, attn::Backend::Cuda, attn::SurpriseUpdate::Deferred).ok());
    EXPECT_TRUE(g->surpriseStale);
    ASSERT_TRUE(attn::updateDecoderSurprise(model, *g).ok());
    expectSameDenseRun(model, *g, *c, tc.name + " deferred surprise");

    // Pinned Q, K, V (the chain view's edit): layer 0's halved, on both paths.
    for (attn::DecoderRun* r : {&*g, &*c}) {
        r->pinned.layer = 0;
        r->pinned.Q = c->attention[0].Q * 0.5f;
        r->pinned.K = c->attention[0].K;
        r->pinned.V = c->attention[0].V * 0.5f;
    }
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *g, attn::Backend::Cuda).ok());
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *c, attn::Backend::Cpu).ok());
    expectOnTheDevice(*g, tc.name + " pinned");
    expectSameDenseRun(model, *g, *c, tc.name + " pinned");

    // Auto uses the device when there is one.
    attn::DecoderOptions autoOptions;
    autoOptions.backend = attn::Backend::Auto;
    auto au = attn::runDecoder(model, kIds, autoOptions);
    ASSERT_TRUE(au.ok()) << au.status().message;
    expectOnTheDevice(*au, tc.name + " auto");

    // A lazy run: Q, K, V and the log-sum-exp per layer (what LazyMaps rebuilds tiles from), no maps.
    attn::DecoderOptions lazyDev = dev, lazyCpu = cpu;
    lazyDev.lazy = lazyCpu.lazy = true;
    auto ld = attn::runDecoder(model, kIds, lazyDev);
    auto lc = attn::runDecoder(model, kIds, lazyCpu);
    ASSERT_TRUE(ld.ok()) << ld.status().message;
    ASSERT_TRUE(lc.ok()) << lc.status().message;
    expectOnTheDevice(*ld, tc.name + " lazy");
    ASSERT_EQ(ld->lazyLayers.size(), std::size_t(L));
    EXPECT_TRUE(ld->weights.empty());
    for (int l = 0; l < L; ++l) {
        const attn::LazyLayer &a = *ld->lazyLayers[std::size_t(l)], &b = *lc->lazyLayers[std::size_t(l)];
        const std::string at = tc.name + " lazy layer " + std::to_string(l);
        EXPECT_CLOSE(attn::Matrix(a.Q), attn::Matrix(b.Q), kHiddenTol, at + " Q");
        EXPECT_CLOSE(attn::Matrix(a.K), attn::Matrix(b.K), kHiddenTol, at + " K");
        EXPECT_CLOSE(attn::Matrix(a.V), attn::Matrix(b.V), kHiddenTol, at + " V");
        EXPECT_CLOSE(attn::Matrix(a.lse), attn::Matrix(b.lse), kHiddenTol, at + " lse");
        EXPECT_CLOSE(ld->hidden[std::size_t(l) + 1], lc->hidden[std::size_t(l) + 1], kHiddenTol, at + " hidden");
    }
    expectSamePredictions(*ld, *lc, tc.name + " lazy");
    // The lazy maps rebuilt from the device's statistics equal the dense CPU run's weights.
    const auto maps = attn::decoderMaps(model, *ld);
    auto dense = attn::runDecoder(model, kIds, cpu);
    ASSERT_TRUE(dense.ok());
    for (int h = 0; h < model.config.heads; ++h) {
        attn::Matrix w;
        ASSERT_TRUE(maps->whole(attn::MapKind::Weights, L - 1, h, w).ok());
        EXPECT_LE(maxAbsDiff(w, dense->weights[std::size_t(L - 1)][std::size_t(h)].toMatrix()), kWeightTol) << tc.name << " lazy weights head " << h;
    }
    // An append to the lazy run on the device.
    ASSERT_TRUE(attn::appendTokens(model, {11}, *ld, attn::Backend::Cuda).ok());
    std::vector<int> longer = kIds;
    longer.push_back(11);
    auto lc2 = attn::runDecoder(model, longer, lazyCpu);
    ASSERT_TRUE(lc2.ok());
    expectSamePredictions(*ld, *lc2, tc.name + " lazy appended");
    // And one on the CPU, into the spare rows the device's lazy layers came back with (LazyLayer::adopt).
    auto lp = attn::runDecoder(model, kIds, lazyDev);
    ASSERT_TRUE(lp.ok()) << lp.status().message;
    ASSERT_TRUE(attn::appendTokens(model, {11}, *lp, attn::Backend::Cpu).ok());
    expectSamePredictions(*lp, *lc2, tc.name + " lazy appended on the CPU");
    for (int l = 0; l < L; ++l) {
        const attn::LazyLayer &a = *lp->lazyLayers[std::size_t(l)], &b = *lc2->lazyLayers[std::size_t(l)];
        EXPECT_CLOSE(attn::Matrix(a.K), attn::Matrix(b.K), kHiddenTol, tc.name + " lazy appended on the CPU, K of layer " + std::to_string(l));
    }
}

// The scans of a run on the device (every layer's heads stacked as variants in one batched recompute) against the
// CPU's scans of a CPU run: head importance with an ablation already in the run and a pinned layer above the
// scanned ones (both held in every variant), and activation patching. Each cell is a difference of log-probabilities
// or a ratio of logit differences: kLogitTol, the logits' tolerance, relative to the largest cell.
TEST_P(DecoderDevice, ScansEqualTheCpu)
{
    const Case& tc = GetParam();
    dev.ablate = cpu.ablate = {{L - 1, 0}};
    auto d = attn::runDecoder(model, kIds, dev);
    auto c = attn::runDecoder(model, kIds, cpu);
    ASSERT_TRUE(d.ok()) << d.status().message;
    ASSERT_TRUE(c.ok()) << c.status().message;
    expectOnTheDevice(*d, tc.name + " scan run");
    Eigen::Index target = 0;
    c->lastLogits.maxCoeff(&target);
    attn::Matrix onDevice, onCpu;
    std::vector<int> order;
    ASSERT_TRUE(attn::headImportance(model, *d, int(target), onDevice, [&](int l) { order.push_back(l); return true; }).ok());
    ASSERT_TRUE(attn::headImportance(model, *c, int(target), onCpu).ok());
    EXPECT_FALSE(onDevice.hasNaN()) << tc.name;
    EXPECT_EQ(onDevice(L - 1, 0), 0.0f) << tc.name << ": the run's own ablation changes nothing";
    EXPECT_CLOSE(onDevice, onCpu, kLogitTol, tc.name + " head importance");
    EXPECT_GT(onCpu.cwiseAbs().maxCoeff(), 1e-4) << tc.name << ": the scan found no head that matters";
    ASSERT_EQ(order.size(), std::size_t(L));
    EXPECT_EQ(order.front(), L - 1) << "rows are reported from the top";

    // With layer L−1's Q, K, V pinned (halved Q): the variants started below it use the pinned ones.
    if (L >= 2) {
        for (attn::DecoderRun* r : {&*d, &*c}) {
            r->pinned.layer = L - 1;
            r->pinned.Q = c->attention[std::size_t(L - 1)].Q * 0.5f;
            r->pinned.K = c->attention[std::size_t(L - 1)].K;
            r->pinned.V = c->attention[std::size_t(L - 1)].V;
        }
        ASSERT_TRUE(attn::recomputeDecoderFrom(model, L - 1, *d, attn::Backend::Cuda).ok());
        ASSERT_TRUE(attn::recomputeDecoderFrom(model, L - 1, *c, attn::Backend::Cpu).ok());
        ASSERT_TRUE(attn::headImportance(model, *d, int(target), onDevice).ok());
        ASSERT_TRUE(attn::headImportance(model, *c, int(target), onCpu).ok());
        EXPECT_CLOSE(onDevice, onCpu, kLogitTol, tc.name + " head importance, pinned layer");
    }
    if (!tc.full) return;

    // Activation patching: a corrupted text (token 2 changed) patched head by head from the clean run.
    std::vector<int> corruptIds = kIds;
    corruptIds[2] = 77;
    dev.ablate.clear();
    cpu.ablate.clear();
    auto dClean = attn::runDecoder(model, kIds, dev), dCorrupt = attn::runDecoder(model, corruptIds, dev);
    auto cClean = attn::runDecoder(model, kIds, cpu), cCorrupt = attn::runDecoder(model, corruptIds, cpu);
    ASSERT_TRUE(dClean.ok() && dCorrupt.ok() && cClean.ok() && cCorrupt.ok());
    Eigen::Index a = 0, b = 0;
    cClean->lastLogits.maxCoeff(&a);
    cCorrupt->lastLogits.maxCoeff(&b);
    if (a == b) b = (a + 1) % cClean->lastLogits.size();
    ASSERT_TRUE(attn::activationPatching(model, *dClean, *dCorrupt, int(a), int(b), onDevice).ok());
    ASSERT_TRUE(attn::activationPatching(model, *cClean, *cCorrupt, int(a), int(b), onCpu).ok());
    EXPECT_FALSE(onDevice.hasNaN()) << tc.name;
    EXPECT_CLOSE(onDevice, onCpu, kLogitTol, tc.name + " activation patching");
}

// A lazy run: every stream, each layer's Q, K, V and log-sum-exp, the predictions.
void expectSameLazyRun(const attn::DecoderModel& model, const attn::DecoderRun& dev, const attn::DecoderRun& cpu, const std::string& what)
{
    ASSERT_EQ(dev.encoding.ids, cpu.encoding.ids) << what;
    ASSERT_EQ(dev.lazyLayers.size(), std::size_t(model.config.layers)) << what;
    ASSERT_EQ(cpu.lazyLayers.size(), std::size_t(model.config.layers)) << what;
    EXPECT_TRUE(dev.weights.empty()) << what;
    for (std::size_t l = 0; l < dev.hidden.size(); ++l) EXPECT_CLOSE(dev.hidden[l], cpu.hidden[l], kHiddenTol, what + " hidden " + std::to_string(l));
    for (int l = 0; l < model.config.layers; ++l) {
        const attn::LazyLayer &a = *dev.lazyLayers[std::size_t(l)], &b = *cpu.lazyLayers[std::size_t(l)];
        const std::string at = what + " lazy layer " + std::to_string(l);
        EXPECT_CLOSE(attn::Matrix(a.Q), attn::Matrix(b.Q), kHiddenTol, at + " Q");
        EXPECT_CLOSE(attn::Matrix(a.K), attn::Matrix(b.K), kHiddenTol, at + " K");
        EXPECT_CLOSE(attn::Matrix(a.V), attn::Matrix(b.V), kHiddenTol, at + " V");
        EXPECT_CLOSE(attn::Matrix(a.lse), attn::Matrix(b.lse), kHiddenTol, at + " lse");
    }
    expectSamePredictions(dev, cpu, what);
}

// The bytes of every layer's K and V of a run of n tokens: what an append uploads when the device no longer holds
// them.
double keptBytes(const attn::DecoderConfig& c, int n) { return 2.0 * c.layers * n * c.kvHeads * c.headDim * sizeof(float); }

// What the last append of m tokens to n uploaded: in place, only the new ids (and their targets) and position n−1's
// row of the final norm; else every layer's kept K and V besides.
double appendUpload(const attn::DecoderConfig& c, int m) { return 2.0 * m * sizeof(int) + double(c.hidden) * sizeof(float); }
void expectInPlace(const attn::DecoderModel& model, const attn::DecoderRun& run, int m, const std::string& what)
{
    EXPECT_EQ(run.deviceTimings.bytesUp, appendUpload(model.config, m)) << what << ": the append uploaded the kept K and V";
    EXPECT_NE(run.deviceKVGeneration, 0u) << what;
}
void expectUploaded(const attn::DecoderModel& model, const attn::DecoderRun& run, int n, int m, const std::string& what)
{
    EXPECT_EQ(run.deviceTimings.bytesUp, appendUpload(model.config, m) + keptBytes(model.config, n)) << what << ": not the kept K and V uploaded";
    EXPECT_NE(run.deviceKVGeneration, 0u) << what;
}

// 12 tokens: an append's new rows cross the emulated build's row blocks of 3 and the tiny Gemmas' window of 4.
const std::vector<int> kLong = {5, 17, 42, 99, 3, 250, 7, 64, 128, 11, 200, 31};
std::vector<int> firstOf(int n) { return std::vector<int>(kLong.begin(), kLong.begin() + n); }
std::vector<int> between(int a, int b) { return std::vector<int>(kLong.begin() + a, kLong.begin() + b); }

// Appends on the device (cuda::decoderAppend: the new rows only) against the CPU's append of the same run and a whole
// CPU forward over the longer text: one token, then four (two of the emulated row blocks, past the window), in place;
// with ablations; after a pinned layer (cleared by an append, as on the CPU); after a recompute on the device (the
// layers below kept), after one on the CPU and after another text on the device (the kept K and V uploaded).
TEST_P(DecoderDevice, AppendsEqualTheCpuAppendAndAForward)
{
    const Case& tc = GetParam();
    if (!tc.full) return;  // the GGUF twins append in EqualsTheCpu
    const int n0 = 6;
    auto d = attn::runDecoder(model, firstOf(n0), dev);
    auto c = attn::runDecoder(model, firstOf(n0), cpu);
    ASSERT_TRUE(d.ok()) << d.status().message;
    ASSERT_TRUE(c.ok()) << c.status().message;
    ASSERT_NE(d->deviceKVGeneration, 0u) << tc.name << ": a forward leaves every layer's K and V on the device";
    ASSERT_TRUE(attn::appendTokens(model, between(n0, n0 + 1), *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 1, tc.name + " one token");
    ASSERT_TRUE(attn::appendTokens(model, between(n0, n0 + 1), *c, attn::Backend::Cpu).ok());
    expectOnTheDevice(*d, tc.name + " one token");
    expectSameDenseRun(model, *d, *c, tc.name + " one token against the CPU's append");
    ASSERT_TRUE(attn::appendTokens(model, between(n0 + 1, n0 + 5), *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 4, tc.name + " four tokens");
    ASSERT_TRUE(attn::appendTokens(model, between(n0 + 1, n0 + 5), *c, attn::Backend::Cpu).ok());
    expectSameDenseRun(model, *d, *c, tc.name + " four tokens against the CPU's append");
    auto whole = attn::runDecoder(model, firstOf(n0 + 5), cpu);
    ASSERT_TRUE(whole.ok());
    expectSameDenseRun(model, *d, *whole, tc.name + " four tokens against a forward");

    // Ablations (the first layer's head 0, the last layer's head 1), recomputed on the device (from layer 0: every
    // layer's K and V change) and appended to.
    const std::vector<std::pair<int, int>> ablate = {{0, 0}, {L - 1, 1}};
    d->ablated = ablate;
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *d, attn::Backend::Cuda).ok());
    ASSERT_TRUE(attn::appendTokens(model, between(n0 + 5, n0 + 6), *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 1, tc.name + " ablated");
    attn::DecoderOptions ablatedCpu = cpu;
    ablatedCpu.ablate = ablate;
    auto ca = attn::runDecoder(model, firstOf(n0 + 6), ablatedCpu);
    ASSERT_TRUE(ca.ok());
    expectSameDenseRun(model, *d, *ca, tc.name + " appended after an ablation");

    // A recompute on the device from the last layer keeps the layers below in place: the append that follows is in
    // place too.
    d->ablated = {{0, 0}};
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, L - 1, *d, attn::Backend::Cuda).ok());
    ASSERT_NE(d->deviceKVGeneration, 0u) << tc.name;
    // (Layer L−1's head 1 ablated no more: a CPU run ablating only layer 0's head 0 is the same run.)
    std::vector<int> extra = {77, 150};
    ASSERT_TRUE(attn::appendTokens(model, extra, *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 2, tc.name + " after a recompute from the last layer");
    attn::DecoderOptions firstAblated = cpu;
    firstAblated.ablate = {{0, 0}};
    std::vector<int> all = firstOf(n0 + 6);
    all.insert(all.end(), extra.begin(), extra.end());
    auto cf = attn::runDecoder(model, all, firstAblated);
    ASSERT_TRUE(cf.ok());
    expectSameDenseRun(model, *d, *cf, tc.name + " appended after a recompute from the last layer");

    // A recompute on the CPU (the ablation gone: every layer's K and V differ from those the device holds): the next
    // append on the device uploads the run's.
    d->ablated.clear();
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *d, attn::Backend::Cpu).ok());
    EXPECT_EQ(d->deviceKVGeneration, 0u) << tc.name;
    const int nd = static_cast<int>(d->encoding.ids.size());
    ASSERT_TRUE(attn::appendTokens(model, {9}, *d, attn::Backend::Cuda).ok());
    expectUploaded(model, *d, nd, 1, tc.name + " after a recompute on the CPU");
    expectOnTheDevice(*d, tc.name + " after a recompute on the CPU");
    all.push_back(9);
    auto plain = attn::runDecoder(model, all, cpu);
    ASSERT_TRUE(plain.ok());
    expectSameDenseRun(model, *d, *plain, tc.name + " appended after a recompute on the CPU");

    // Another text on the device between: uploaded again, then in place again.
    auto other = attn::runDecoder(model, firstOf(8), dev);
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE(attn::appendTokens(model, {21, 22}, *d, attn::Backend::Cuda).ok());
    expectUploaded(model, *d, nd + 1, 2, tc.name + " after another text");
    ASSERT_TRUE(attn::appendTokens(model, {23}, *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 1, tc.name + " after another text, again");
    for (int id : {21, 22, 23}) all.push_back(id);
    auto plain2 = attn::runDecoder(model, all, cpu);
    ASSERT_TRUE(plain2.ok());
    expectSameDenseRun(model, *d, *plain2, tc.name + " appended after another text");
    // The other run's append finds its K and V replaced: uploaded, and right.
    ASSERT_TRUE(attn::appendTokens(model, {5}, *other, attn::Backend::Cuda).ok());
    expectUploaded(model, *other, 8, 1, tc.name + " the other run");
    std::vector<int> otherIds = firstOf(8);
    otherIds.push_back(5);
    auto po = attn::runDecoder(model, otherIds, cpu);
    ASSERT_TRUE(po.ok());
    expectSameDenseRun(model, *other, *po, tc.name + " the other run appended");

    // A pinned layer: an append clears it on both paths (the pinned rows stay the kept K and V of that layer).
    auto pd = attn::runDecoder(model, firstOf(n0), dev);
    auto pc = attn::runDecoder(model, firstOf(n0), cpu);
    ASSERT_TRUE(pd.ok() && pc.ok());
    for (attn::DecoderRun* r : {&*pd, &*pc}) {
        r->pinned.layer = L - 1;
        r->pinned.Q = pc->attention[std::size_t(L - 1)].Q * 0.5f;
        r->pinned.K = pc->attention[std::size_t(L - 1)].K * 0.5f;
        r->pinned.V = pc->attention[std::size_t(L - 1)].V;
    }
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, L - 1, *pd, attn::Backend::Cuda).ok());
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, L - 1, *pc, attn::Backend::Cpu).ok());
    ASSERT_TRUE(attn::appendTokens(model, between(n0, n0 + 4), *pd, attn::Backend::Cuda).ok());
    ASSERT_TRUE(attn::appendTokens(model, between(n0, n0 + 4), *pc, attn::Backend::Cpu).ok());
    EXPECT_EQ(pd->pinned.layer, -1);
    expectInPlace(model, *pd, 4, tc.name + " pinned");
    expectSameDenseRun(model, *pd, *pc, tc.name + " appended after a pinned layer");
}

// A lazy run's appends on the device: its lazy layers grow as LazyLayer::appended does on the CPU, and its maps stay
// on the device while the append was in place (the new rows' Q, K and lse written behind the kept ones there): every
// tile equals the host's read of the same run and the dense CPU forward's weights. Maps made before an append read
// nothing stale: the device refuses them, and the host gives the shorter run's. After another text on the device, an
// append uploads the kept K and V and the maps are read on the host.
TEST_P(DecoderDevice, LazyAppendsEqualTheCpuAndKeepTheirMapsCurrent)
{
    const Case& tc = GetParam();
    if (!tc.full) return;
    attn::DecoderOptions lazyDev = dev, lazyCpu = cpu;
    lazyDev.lazy = lazyCpu.lazy = true;
    const int n0 = 6;
    auto d = attn::runDecoder(model, firstOf(n0), lazyDev);
    auto c = attn::runDecoder(model, firstOf(n0), lazyCpu);
    ASSERT_TRUE(d.ok()) << d.status().message;
    ASSERT_TRUE(c.ok()) << c.status().message;
    const auto before = attn::decoderMaps(model, *d), beforeHost = attn::decoderMaps(model, *d, false);
    attn::Matrix was;
    ASSERT_TRUE(before->whole(attn::MapKind::Weights, L - 1, 0, was).ok());
    EXPECT_GT(attn::decoderMapsDeviceReads(*before), 0) << tc.name;

    ASSERT_TRUE(attn::appendTokens(model, between(n0, n0 + 1), *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 1, tc.name + " lazy one token");
    ASSERT_TRUE(attn::appendTokens(model, between(n0 + 1, n0 + 5), *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 4, tc.name + " lazy four tokens");
    expectOnTheDevice(*d, tc.name + " lazy appended");
    for (const auto& ids : {between(n0, n0 + 1), between(n0 + 1, n0 + 5)})
        ASSERT_TRUE(attn::appendTokens(model, ids, *c, attn::Backend::Cpu).ok());
    expectSameLazyRun(model, *d, *c, tc.name + " lazy appended against the CPU's append");
    auto whole = attn::runDecoder(model, firstOf(n0 + 5), lazyCpu);
    ASSERT_TRUE(whole.ok());
    expectSameLazyRun(model, *d, *whole, tc.name + " lazy appended against a forward");

    // Its maps, on the device (every layer: the append was in place), equal the host's read of the run and the dense
    // CPU forward's weights.
    auto dense = attn::runDecoder(model, firstOf(n0 + 5), cpu);
    ASSERT_TRUE(dense.ok());
    ASSERT_NE(d->deviceMapsGeneration, 0u) << tc.name;
    const auto maps = attn::decoderMaps(model, *d), host = attn::decoderMaps(model, *d, false);
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < model.config.heads; ++h) {
            attn::Matrix a, b, sa, sb;
            ASSERT_TRUE(maps->whole(attn::MapKind::Weights, l, h, a).ok());
            ASSERT_TRUE(host->whole(attn::MapKind::Weights, l, h, b).ok());
            ASSERT_TRUE(maps->whole(attn::MapKind::Scores, l, h, sa).ok());
            ASSERT_TRUE(host->whole(attn::MapKind::Scores, l, h, sb).ok());
            const std::string at = tc.name + " lazy maps layer " + std::to_string(l) + " head " + std::to_string(h);
            EXPECT_LE(maxAbsDiff(a, b), kWeightTol) << at;
            EXPECT_CLOSE(sa, sb, kHiddenTol, at + " scores");
            EXPECT_LE(maxAbsDiff(a, dense->weights[std::size_t(l)][std::size_t(h)].toMatrix()), kWeightTol) << at << " against the dense CPU run";
            // An overview of the new rows' corner (their keys and the kept ones in the window).
            const int T = n0 + 5;
            const attn::MapRect corner{n0 - 2, 2, T - n0 + 2, T - 2};
            ASSERT_TRUE(maps->pooled(attn::MapKind::Weights, l, h, corner, 3, 4, a).ok());
            ASSERT_TRUE(host->pooled(attn::MapKind::Weights, l, h, corner, 3, 4, b).ok());
            EXPECT_LE(maxAbsDiff(a, b), kWeightTol) << at << " pooled";
        }
    EXPECT_EQ(attn::decoderMapsDeviceReads(*maps), long(L) * model.config.heads * 3) << tc.name << ": every read on the device";
    // The maps made before the appends: the device's rows are another call's now, so they are read on the host, with
    // the shorter run's values.
    const long readsBefore = attn::decoderMapsDeviceReads(*before);
    attn::Matrix still;
    ASSERT_TRUE(before->whole(attn::MapKind::Weights, L - 1, 0, still).ok());
    EXPECT_EQ(attn::decoderMapsDeviceReads(*before), readsBefore) << tc.name << ": a stale read on the device";
    attn::Matrix hostWas;
    ASSERT_TRUE(beforeHost->whole(attn::MapKind::Weights, L - 1, 0, hostWas).ok());
    EXPECT_LE(maxAbsDiff(still, hostWas), 0.0) << tc.name;
    EXPECT_LE(maxAbsDiff(still, was), kWeightTol) << tc.name;

    // Another text on the device between: the append uploads the kept K and V, its maps are the host's.
    auto other = attn::runDecoder(model, firstOf(5), lazyDev);
    ASSERT_TRUE(other.ok());
    const int n1 = n0 + 5;
    ASSERT_TRUE(attn::appendTokens(model, {77, 150}, *d, attn::Backend::Cuda).ok());
    expectUploaded(model, *d, n1, 2, tc.name + " lazy after another text");
    EXPECT_EQ(d->deviceMapsGeneration, 0u) << tc.name;
    std::vector<int> all = firstOf(n1);
    all.insert(all.end(), {77, 150});
    auto c2 = attn::runDecoder(model, all, lazyCpu);
    ASSERT_TRUE(c2.ok());
    expectSameLazyRun(model, *d, *c2, tc.name + " lazy appended after another text");
    const auto hostOnly = attn::decoderMaps(model, *d), oracle = attn::decoderMaps(model, *d, false);
    attn::Matrix x, y;
    ASSERT_TRUE(hostOnly->whole(attn::MapKind::Weights, L - 1, 1, x).ok());
    ASSERT_TRUE(oracle->whole(attn::MapKind::Weights, L - 1, 1, y).ok());
    EXPECT_LE(maxAbsDiff(x, y), 0.0) << tc.name;
    EXPECT_EQ(attn::decoderMapsDeviceReads(*hostOnly), 0) << tc.name;
    // The next append is in place again (the device holds its K and V), but the old rows' Q and lse never went up:
    // the maps stay the host's.
    ASSERT_TRUE(attn::appendTokens(model, {3}, *d, attn::Backend::Cuda).ok());
    expectInPlace(model, *d, 1, tc.name + " lazy after the upload");
    EXPECT_EQ(d->deviceMapsGeneration, 0u) << tc.name;
    all.push_back(3);
    auto c3 = attn::runDecoder(model, all, lazyCpu);
    ASSERT_TRUE(c3.ok());
    expectSameLazyRun(model, *d, *c3, tc.name + " lazy appended in place after the upload");
}

// A lazy run whose attention is the fused kernel (DeviceAttention::Fused: no score written) against the
// CPU's lazy run: a forward, an ablation recomputed from the last layer, appends in place (one token, then four:
// across the emulated build's tiles of 16 rows and the tiny Gemmas' window of 4), and its maps, rebuilt on the device
// from the lse the kernel wrote, against the dense CPU run's weights.
TEST_P(DecoderDevice, FusedLazyRunsEqualTheCpu)
{
    const Case& tc = GetParam();
    attn::DecoderOptions fused = dev, lazyCpu = cpu;
    fused.lazy = lazyCpu.lazy = true;
    fused.deviceAttention = attn::DeviceAttention::Fused;
    auto d = attn::runDecoder(model, kLong, fused);
    auto c = attn::runDecoder(model, kLong, lazyCpu);
    ASSERT_TRUE(d.ok()) << tc.name << ": " << d.status().message;
    ASSERT_TRUE(c.ok()) << c.status().message;
    expectOnTheDevice(*d, tc.name + " fused");
    EXPECT_EQ(d->deviceAttention, attn::DeviceAttention::Fused);
    expectSameLazyRun(model, *d, *c, tc.name + " fused");
    const auto maps = attn::decoderMaps(model, *d);
    auto dense = attn::runDecoder(model, kLong, cpu);
    ASSERT_TRUE(dense.ok());
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < model.config.heads; ++h) {
            attn::Matrix w;
            ASSERT_TRUE(maps->whole(attn::MapKind::Weights, l, h, w).ok());
            EXPECT_LE(maxAbsDiff(w, dense->weights[std::size_t(l)][std::size_t(h)].toMatrix()), kWeightTol)
                << tc.name << " fused maps layer " << l << " head " << h;
        }
    EXPECT_GT(attn::decoderMapsDeviceReads(*maps), 0) << tc.name;

    auto ca = ablateLastLayer(model, *d, kLong, lazyCpu);
    ASSERT_TRUE(ca.ok()) << ca.status().message;
    expectSameLazyRun(model, *d, *ca, tc.name + " fused ablated");
    EXPECT_GT((d->lastLogits - c->lastLogits).cwiseAbs().maxCoeff(), 1e-5) << tc.name << ": the ablation changed nothing";

    const int n0 = 6;
    auto g = attn::runDecoder(model, firstOf(n0), fused);
    auto gc = attn::runDecoder(model, firstOf(n0), lazyCpu);
    ASSERT_TRUE(g.ok()) << g.status().message;
    ASSERT_TRUE(gc.ok());
    for (const auto& ids : {between(n0, n0 + 1), between(n0 + 1, n0 + 5)}) {
        ASSERT_TRUE(attn::appendTokens(model, ids, *g, attn::Backend::Cuda).ok());
        expectInPlace(model, *g, int(ids.size()), tc.name + " fused append");
        ASSERT_TRUE(attn::appendTokens(model, ids, *gc, attn::Backend::Cpu).ok());
    }
    expectOnTheDevice(*g, tc.name + " fused appended");
    expectSameLazyRun(model, *g, *gc, tc.name + " fused appended");

    // The fused forward allocates no scores: its buffers on the device are the products' less H·n² floats.
    attn::DecoderOptions products = fused;
    products.deviceAttention = attn::DeviceAttention::Products;
    auto f = attn::runDecoder(model, kLong, fused);
    auto p = attn::runDecoder(model, kLong, products);
    ASSERT_TRUE(f.ok() && p.ok());
    const double n = double(kLong.size());
    EXPECT_GT(f->deviceTimings.deviceBytes, 0.0) << tc.name;
    EXPECT_EQ(p->deviceTimings.deviceBytes - f->deviceTimings.deviceBytes, model.config.heads * n * n * sizeof(float)) << tc.name;
}

INSTANTIATE_TEST_SUITE_P(Families, DecoderDevice, ::testing::ValuesIn(cases()), [](const auto& info) {
    std::string s = info.param.name;
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
});

TEST(DecoderDeviceErrors, BadInputIsAStatus)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama");
    ASSERT_TRUE(model.ok());
    attn::DecoderOptions dev;
    dev.backend = attn::Backend::Cuda;
    EXPECT_EQ(attn::runDecoder(*model, {}, dev).status().code, attn::StatusCode::InvalidArgument);
    EXPECT_EQ(attn::runDecoder(*model, {1, 100000}, dev).status().code, attn::StatusCode::InvalidArgument);
    dev.ablate = {{0, 99}};
    EXPECT_EQ(attn::runDecoder(*model, {1, 2}, dev).status().code, attn::StatusCode::InvalidArgument);
    dev.ablate.clear();
    auto run = attn::runDecoder(*model, {1, 2, 3}, dev);
    ASSERT_TRUE(run.ok());
    EXPECT_EQ(attn::recomputeDecoderFrom(*model, 7, *run, attn::Backend::Cuda).code, attn::StatusCode::InvalidArgument);
    run->pinned.layer = 0;
    run->pinned.Q = attn::Matrix::Zero(2, 2);
    const attn::Status s = attn::recomputeDecoderFrom(*model, 0, *run, attn::Backend::Cuda);
    EXPECT_EQ(s.code, attn::StatusCode::InvalidArgument);
    EXPECT_NE(s.message.find("pinned"), std::string::npos) << s.message;
}

// A copy of a model does not share the original's device weights (an edit of the copy's W^O must not reach the
// original's runs), and an edit of W^O followed by a recompute from its layer is seen.
TEST(DecoderDeviceWeights, EditsOfWoAreUploaded)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_qwen2");
    ASSERT_TRUE(model.ok());
    attn::DecoderOptions dev, cpu;
    dev.backend = attn::Backend::Cuda;
    auto d = attn::runDecoder(*model, kIds, dev);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(model->device.weights);
    attn::DecoderModel copy = *model;
    EXPECT_FALSE(copy.device.weights);
    attn::Matrix wo = model->layers[1].Wo.toMatrix();
    wo *= 0.25f;
    model->layers[1].Wo = attn::WeightMatrix(wo);
    ASSERT_TRUE(attn::recomputeDecoderFrom(*model, 1, *d, attn::Backend::Cuda).ok());
    auto c = attn::runDecoder(*model, kIds, cpu);
    ASSERT_TRUE(c.ok());
    expectSameDenseRun(*model, *d, *c, "edited W^O");
}

#ifdef ATTNSCOPE_EMULATED_DEVICE
} // namespace
namespace emu {
extern size_t deviceBytes;             // the emulated device's memory (fake_cuda_runtime.cpp)
extern std::deque<float> elapsedMs;    // the times its events give, in the order asked
}
namespace {

// A device too small for the weights: Cuda is ResourceExhausted naming the sizes; Auto falls back to the CPU and
// says so in the run.
TEST(DecoderDeviceMemory, TooSmallIsAClearErrorAndAutoFallsBack)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_gpt2");
    ASSERT_TRUE(model.ok());
    const size_t saved = emu::deviceBytes;
    emu::deviceBytes = 4096;
    attn::DecoderOptions o;
    o.backend = attn::Backend::Cuda;
    auto dev = attn::runDecoder(*model, kIds, o);
    EXPECT_EQ(dev.status().code, attn::StatusCode::ResourceExhausted);
    EXPECT_NE(dev.status().message.find("MiB"), std::string::npos) << dev.status().message;
    o.backend = attn::Backend::Auto;
    auto fallback = attn::runDecoder(*model, kIds, o);
    emu::deviceBytes = saved;
    ASSERT_TRUE(fallback.ok()) << fallback.status().message;
    EXPECT_EQ(fallback->backend, attn::Backend::Cpu);
    ASSERT_EQ(fallback->warnings.size(), 1u);
    EXPECT_NE(fallback->warnings[0].find("computed on the CPU instead"), std::string::npos) << fallback->warnings[0];
    auto cpu = attn::runDecoder(*model, kIds, {});
    ASSERT_TRUE(cpu.ok());
    EXPECT_CLOSE(fallback->hidden.back(), cpu->hidden.back(), 0.0, "fallback");
}

// An append the device cannot take (its upload needs new slots, and the device is full): Cuda is ResourceExhausted
// and leaves the run as it was; Auto recomputes the whole text instead (here on the CPU: the forward does not fit
// either) and says so.
TEST(DecoderDeviceMemory, AnAppendThatDoesNotFitIsAnErrorOrAutoRecomputes)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama");
    ASSERT_TRUE(model.ok());
    attn::DecoderOptions o;
    o.backend = attn::Backend::Cuda;
    auto run = attn::runDecoder(*model, kIds, o);
    auto other = attn::runDecoder(*model, {1, 2, 3}, o);  // replaces its K and V, in slots no larger
    ASSERT_TRUE(run.ok() && other.ok());
    const size_t saved = emu::deviceBytes;
    emu::deviceBytes = 0;
    const attn::Status s = attn::appendTokens(*model, {11}, *run, attn::Backend::Cuda);
    EXPECT_EQ(s.code, attn::StatusCode::ResourceExhausted) << s.message;
    EXPECT_EQ(run->encoding.ids, kIds);
    EXPECT_EQ(run->hidden.back().rows(), Eigen::Index(kIds.size()));
    const attn::Status a = attn::appendTokens(*model, {11}, *run, attn::Backend::Auto);
    emu::deviceBytes = saved;
    ASSERT_TRUE(a.ok()) << a.message;
    ASSERT_FALSE(run->warnings.empty());
    EXPECT_NE(run->warnings[0].find("the whole text recomputed instead"), std::string::npos) << run->warnings[0];
    std::vector<int> longer = kIds;
    longer.push_back(11);
    auto cpu = attn::runDecoder(*model, longer, {});
    ASSERT_TRUE(cpu.ok());
    EXPECT_CLOSE(run->hidden.back(), cpu->hidden.back(), kHiddenTol, "the recompute after the failed append");
    EXPECT_CLOSE(attn::Matrix(run->lastLogits), attn::Matrix(cpu->lastLogits), kLogitTol, "the recompute's last logits");
}

// A lazy run whose scores do not fit the device takes the fused kernel, which needs none: with the buffers of a
// fused run held and no memory free, the products' run of the same text (its scores would grow a buffer) runs
// fused, on the device, with the CPU's results, and so does an append in place; a dense run, which needs its maps,
// is refused.
TEST(DecoderDeviceMemory, ALazyRunWhoseScoresDoNotFitIsFused)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama");
    ASSERT_TRUE(model.ok());
    attn::DecoderOptions o, cpu;
    o.backend = attn::Backend::Cuda;
    o.lazy = cpu.lazy = true;
    o.deviceAttention = attn::DeviceAttention::Fused;
    // 120 tokens: their scores (4 heads × 120², 230 KB) are more than any test here leaves held, whichever ran
    // before in the same program, so the products' forward needs its scores buffer to grow.
    std::vector<int> ids;
    for (int i = 0; i < 120; ++i) ids.push_back((i * 37 + 5) % 250);
    auto fused = attn::runDecoder(*model, ids, o);
    ASSERT_TRUE(fused.ok()) << fused.status().message;
    const size_t saved = emu::deviceBytes;
    emu::deviceBytes = 0;
    o.deviceAttention = attn::DeviceAttention::Products;
    auto products = attn::runDecoder(*model, ids, o);
    attn::Status appended = attn::Status::success();
    const double forwardBytes = products.ok() ? products->deviceTimings.deviceBytes : 0.0;
    if (products.ok()) appended = attn::appendTokens(*model, {11}, *products, attn::Backend::Cuda);
    attn::DecoderOptions dense = o;
    dense.lazy = false;
    auto denseRun = attn::runDecoder(*model, ids, dense);
    const attn::Status refused = denseRun.ok() ? attn::Status::success() : denseRun.status();
    emu::deviceBytes = saved;
    ASSERT_TRUE(products.ok()) << products.status().message;
    ASSERT_TRUE(appended.ok()) << appended.message;
    expectOnTheDevice(*products, "scores that do not fit");
    expectInPlace(*model, *products, 1, "scores that do not fit, appended");
    EXPECT_EQ(products->deviceAttention, attn::DeviceAttention::Products);  // the run asked for the products; the device chose
    EXPECT_EQ(forwardBytes, fused->deviceTimings.deviceBytes) << "no scores allocated";
    std::vector<int> longer = ids;
    longer.push_back(11);
    auto c = attn::runDecoder(*model, longer, cpu);
    ASSERT_TRUE(c.ok());
    expectSameLazyRun(*model, *products, *c, "scores that do not fit, appended");
    EXPECT_EQ(refused.code, attn::StatusCode::ResourceExhausted) << refused.message;
}

// DeviceAttention::Auto (the default): a lazy call of a shape not seen before times the products and the fused
// kernel on its first layer of that shape (the products then the fused kernel, twice; the second pair counts: the
// emulated events give the times queued here, and then the stand-in, which is what the call's phases get) and keeps the fused kernel for that shape only under 0.9 of the
// products' time. Every call's results are the CPU's; a forward whose every shape chose the fused kernel allocates
// no scores (its device buffers are the explicitly fused forward's), one that chose the products does; a near tie
// stays with the products; an append is a shape of its own (1 query); texts of fewer keys than the build's
// threshold (64 here, 1024 on a device) are not timed; a model with a sliding window has a shape per kind of layer.
TEST(DecoderDeviceAttention, AutoTimesBothOnceAndKeepsTheFaster)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama");
    ASSERT_TRUE(model.ok());
    const attn::DecoderConfig& c = model->config;
    attn::DecoderOptions o, cpu, fusedOpt, productsOpt;
    o.backend = fusedOpt.backend = productsOpt.backend = attn::Backend::Cuda;
    o.lazy = cpu.lazy = fusedOpt.lazy = productsOpt.lazy = true;
    ASSERT_EQ(o.deviceAttention, attn::DeviceAttention::Auto);
    fusedOpt.deviceAttention = attn::DeviceAttention::Fused;
    productsOpt.deviceAttention = attn::DeviceAttention::Products;
    auto text = [](int n) {
        std::vector<int> ids;
        for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 5) % 250);
        return ids;
    };
    auto sameAsCpu = [&](const attn::DecoderRun& d, const std::vector<int>& ids, const std::string& what) {
        auto cr = attn::runDecoder(*model, ids, cpu);
        ASSERT_TRUE(cr.ok());
        expectOnTheDevice(d, what);
        expectSameLazyRun(*model, d, *cr, what);
    };
    // A forward of `ids` on the device, its events giving `times` (then the stand-in), against the CPU's.
    auto timedRun = [&](const std::vector<int>& ids, std::deque<float> times, const std::string& what) {
        emu::elapsedMs = std::move(times);
        auto d = attn::runDecoder(*model, ids, o);
        emu::elapsedMs.clear();
        if (d.ok()) sameAsCpu(*d, ids, what);
        else ADD_FAILURE() << what << ": " << d.status().message;
        return d;
    };
    attn::forgetDeviceAttentionChoices();
    EXPECT_TRUE(attn::deviceAttentionChoices().empty());

    // 100 tokens (the shape of 128 queries and keys): the fused kernel is timed faster, 1 ms against 4.
    const auto ids = text(100);
    ASSERT_TRUE(timedRun(ids, {9, 9, 4, 1}, "the call that timed both").ok());
    auto choices = attn::deviceAttentionChoices();
    ASSERT_EQ(choices.size(), 1u);
    EXPECT_EQ(choices[0].queries, 128);
    EXPECT_EQ(choices[0].keys, 128);
    EXPECT_EQ(choices[0].heads, c.heads);
    EXPECT_EQ(choices[0].kvHeads, c.kvHeads);
    EXPECT_EQ(choices[0].headDim, c.headDim);
    EXPECT_EQ(choices[0].window, 0);
    EXPECT_EQ(choices[0].productsMs, 4.0);
    EXPECT_EQ(choices[0].fusedMs, 1.0);
    EXPECT_TRUE(choices[0].fused);
    // The next forwards of that shape (100 and 90 tokens) take the fused kernel without timing: no scores.
    for (int n : {100, 90}) {
        auto again = attn::runDecoder(*model, text(n), o);
        auto fused = attn::runDecoder(*model, text(n), fusedOpt);
        ASSERT_TRUE(again.ok() && fused.ok());
        sameAsCpu(*again, text(n), "fused by the choice, " + std::to_string(n) + " tokens");
        EXPECT_EQ(again->deviceTimings.deviceBytes, fused->deviceTimings.deviceBytes) << n << " tokens: scores allocated";
    }
    EXPECT_EQ(attn::deviceAttentionChoices().size(), 1u);

    // 64 tokens (64 queries and keys; the model's context is 128): a near tie (0.95 of the products' time) stays with
    // the products, whose scores are allocated.
    auto choiceOf = [](int queries, int keys) {
        for (const attn::DeviceAttentionChoice& ch : attn::deviceAttentionChoices())
            if (ch.queries == queries && ch.keys == keys) return ch;
        return attn::DeviceAttentionChoice{};
    };
    const auto shorter = text(64);
    ASSERT_TRUE(timedRun(shorter, {9, 9, 2, 1.9f}, "the call that timed a near tie").ok());
    auto products = attn::runDecoder(*model, shorter, productsOpt);
    auto tieAgain = attn::runDecoder(*model, shorter, o);
    ASSERT_TRUE(products.ok() && tieAgain.ok());
    EXPECT_EQ(tieAgain->deviceTimings.deviceBytes, products->deviceTimings.deviceBytes);
    EXPECT_EQ(attn::deviceAttentionChoices().size(), 2u);
    EXPECT_EQ(choiceOf(64, 64).keys, 64) << "the near tie was not kept";
    EXPECT_FALSE(choiceOf(64, 64).fused);
    EXPECT_TRUE(choiceOf(128, 128).fused);

    // An appended token to the 100-token run: 1 query against 101 keys, a shape of its own, timed; the products win.
    auto grown = attn::runDecoder(*model, ids, o);
    ASSERT_TRUE(grown.ok());
    emu::elapsedMs = {9, 9, 1, 3};
    ASSERT_TRUE(attn::appendTokens(*model, {11}, *grown, attn::Backend::Cuda).ok());
    emu::elapsedMs.clear();
    expectInPlace(*model, *grown, 1, "an append timed by Auto");
    std::vector<int> appended = ids;
    appended.push_back(11);
    sameAsCpu(*grown, appended, "an append timed by Auto");
    EXPECT_EQ(attn::deviceAttentionChoices().size(), 3u);
    EXPECT_EQ(choiceOf(1, 128).productsMs, 1.0);
    EXPECT_EQ(choiceOf(1, 128).fusedMs, 3.0);
    EXPECT_FALSE(choiceOf(1, 128).fused);

    // 30 tokens (a shape of 32, not seen): under the threshold, not timed (the products).
    auto shortRun = attn::runDecoder(*model, text(30), o);
    ASSERT_TRUE(shortRun.ok());
    EXPECT_EQ(attn::deviceAttentionChoices().size(), 3u) << "a text under the threshold was timed";

    // Gemma 3's local (window) and global layers: two shapes, each timed at its first layer.
    auto gemma = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_gemma3");
    ASSERT_TRUE(gemma.ok());
    attn::forgetDeviceAttentionChoices();
    emu::elapsedMs = {9, 9, 4, 1, 9, 9, 4, 1};
    auto g = attn::runDecoder(*gemma, ids, o);
    ASSERT_TRUE(g.ok()) << g.status().message;
    emu::elapsedMs.clear();
    choices = attn::deviceAttentionChoices();
    ASSERT_EQ(choices.size(), 2u);
    EXPECT_NE(choices[0].window, choices[1].window);
    for (const attn::DeviceAttentionChoice& ch : choices) EXPECT_TRUE(ch.fused && ch.productsMs == 4.0 && ch.fusedMs == 1.0) << ch.window;
    auto gc = attn::runDecoder(*gemma, ids, cpu);
    auto gf = attn::runDecoder(*gemma, ids, fusedOpt);
    auto g2 = attn::runDecoder(*gemma, ids, o);
    ASSERT_TRUE(gc.ok() && gf.ok() && g2.ok());
    expectSameLazyRun(*gemma, *g, *gc, "Gemma 3 timed by Auto");
    expectSameLazyRun(*gemma, *g2, *gc, "Gemma 3 fused by the choices");
    EXPECT_EQ(g2->deviceTimings.deviceBytes, gf->deviceTimings.deviceBytes);
    attn::forgetDeviceAttentionChoices();
    EXPECT_TRUE(attn::deviceAttentionChoices().empty());
}
#endif

// The buffers of a replaced run, recycled (attnscope/recycled_buffers.h): a recompute on the device copies into the
// host buffers of the run replaced before it (every residual stream, the final norm, each lazy layer's Q, K, V and
// lse), with the results of copies into fresh ones; a layer someone still holds is not written while held; a forward
// of another length takes none, and what the pool held for the old length is dropped.
TEST(DecoderDeviceRecycling, ARecomputeCopiesIntoTheReplacedRunsBuffers)
{
    attn::RecycledBuffers& pool = attn::RecycledBuffers::instance();
    const std::size_t savedMin = pool.minBytes();
    pool.setMinBytes(0);  // the tiny model's buffers are a few hundred bytes (a GPU's run: 1 MiB and more each)
    (void)pool.clear();
    auto loaded = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama");
    ASSERT_TRUE(loaded.ok()) << loaded.status().message;
    attn::DecoderModel model = std::move(*loaded);
    const int L = model.config.layers;
    attn::DecoderOptions dev, cpu;
    dev.backend = attn::Backend::Cuda;
    dev.lazy = cpu.lazy = true;
    const auto buffers = [](const attn::DecoderRun& r) {
        std::multiset<const float*> p;
        for (const attn::Matrix& h : r.hidden) p.insert(h.data());
        p.insert(r.finalHidden.data());
        for (const auto& layer : r.lazyLayers)
            for (const float* d : {layer->Q.data(), layer->K.data(), layer->V.data(), layer->lse.data()}) p.insert(d);
        return p;
    };
    auto run = attn::runDecoder(model, kIds, dev);
    ASSERT_TRUE(run.ok()) << run.status().message;
    const auto first = buffers(*run);
    ASSERT_EQ(first.size(), std::size_t(L + 2 + 4 * L));
    EXPECT_EQ(std::set<const float*>(first.begin(), first.end()).size(), first.size()) << "every buffer its own";

    run->ablated = {{L - 1, 0}};
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *run, attn::Backend::Cuda).ok());
    const auto second = buffers(*run);
    for (const float* p : second) EXPECT_EQ(first.count(p), 0u) << "the first run's buffers were in use during the second forward";
    EXPECT_EQ(pool.count(), first.size()) << "the first run's buffers, kept";

    const long takenBefore = pool.taken();
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *run, attn::Backend::Cuda).ok());
    EXPECT_EQ(buffers(*run), first) << "the third forward copied into the first run's buffers";
    EXPECT_EQ(pool.taken() - takenBefore, long(first.size()));
    expectOnTheDevice(*run, "recycled");
    attn::DecoderOptions ablated = cpu;
    ablated.ablate = {{L - 1, 0}};
    auto c = attn::runDecoder(model, kIds, ablated);
    ASSERT_TRUE(c.ok()) << c.status().message;
    for (int l = 0; l <= L; ++l) EXPECT_CLOSE(run->hidden[std::size_t(l)], c->hidden[std::size_t(l)], kHiddenTol, "recycled hidden " + std::to_string(l));
    for (int l = 0; l < L; ++l) {
        const attn::LazyLayer &a = *run->lazyLayers[std::size_t(l)], &b = *c->lazyLayers[std::size_t(l)];
        const std::string at = "recycled layer " + std::to_string(l);
        EXPECT_CLOSE(attn::Matrix(a.Q), attn::Matrix(b.Q), kHiddenTol, at + " Q");
        EXPECT_CLOSE(attn::Matrix(a.K), attn::Matrix(b.K), kHiddenTol, at + " K");
        EXPECT_CLOSE(attn::Matrix(a.V), attn::Matrix(b.V), kHiddenTol, at + " V");
        EXPECT_CLOSE(attn::Matrix(a.lse), attn::Matrix(b.lse), kHiddenTol, at + " lse");
    }
    expectSamePredictions(*run, *c, "recycled");

    // Layer 0 held (as the window's views hold the layers they show): its buffers stay as they are through two more
    // recomputes, which take other buffers.
    const std::shared_ptr<const attn::LazyLayer> held = run->lazyLayers[0];
    const attn::Matrix heldQ = held->Q, heldLse = held->lse;
    run->ablated.clear();
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *run, attn::Backend::Cuda).ok());
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *run, attn::Backend::Cuda).ok());
    EXPECT_EQ(buffers(*run).count(held->Q.data()), 0u) << "a held layer's buffer was taken";
    EXPECT_EQ(maxAbsDiff(attn::Matrix(held->Q), heldQ), 0.0) << "a held layer was written";
    EXPECT_EQ(maxAbsDiff(attn::Matrix(held->lse), heldLse), 0.0) << "a held layer was written";

    // Another length: nothing of the old one is taken, and the pool keeps only the run this forward replaced.
    const std::vector<int> shorter(kIds.begin(), kIds.end() - 1);
    const long takenBeforeShorter = pool.taken();
    ASSERT_TRUE(attn::runDecoder(model, shorter, dev, *run).ok());
    EXPECT_EQ(pool.taken(), takenBeforeShorter);
    EXPECT_EQ(pool.count(), first.size()) << "the replaced run's buffers, and none of the run before it";
    (void)pool.clear();
    pool.setMinBytes(savedMin);
}

// A text longer than a warp: the softmax's 32 lanes each see several of a row's keys (every test above has fewer
// than 32 tokens, one key a lane), so each lane's running maximum and sum are rescaled as they go and merged
// across the lanes. Dense and lazy, against the CPU, for a model with a soft-cap and one with a sliding window.
// Last in the file: its longer buffers would otherwise be in place for the memory tests above when the whole
// program runs (ctest runs each test alone).
TEST(DecoderDeviceLongText, RowsOfManyKeysEqualTheCpu)
{
    std::vector<int> ids;
    for (int i = 0; i < 75; ++i) ids.push_back((i * 37 + 5) % 250);
    for (const char* family : {"tiny_llama", "tiny_gemma2", "tiny_gemma3"}) {
        auto loaded = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/" + family);
        ASSERT_TRUE(loaded.ok()) << loaded.status().message;
        attn::DecoderModel model = std::move(*loaded);
        const int L = model.config.layers;
        attn::DecoderOptions dev, cpu;
        dev.backend = attn::Backend::Cuda;
        auto d = attn::runDecoder(model, ids, dev);
        auto c = attn::runDecoder(model, ids, cpu);
        ASSERT_TRUE(d.ok()) << family << ": " << d.status().message;
        ASSERT_TRUE(c.ok()) << family << ": " << c.status().message;
        expectOnTheDevice(*d, std::string(family) + " long");
        expectSameDenseRun(model, *d, *c, std::string(family) + " long");
        dev.lazy = cpu.lazy = true;
        auto ld = attn::runDecoder(model, ids, dev);
        auto lc = attn::runDecoder(model, ids, cpu);
        ASSERT_TRUE(ld.ok()) << ld.status().message;
        ASSERT_TRUE(lc.ok()) << lc.status().message;
        for (int l = 0; l < L; ++l)
            EXPECT_CLOSE(attn::Matrix(ld->lazyLayers[std::size_t(l)]->lse), attn::Matrix(lc->lazyLayers[std::size_t(l)]->lse), kHiddenTol,
                         std::string(family) + " long lazy lse of layer " + std::to_string(l));
        expectSamePredictions(*ld, *lc, std::string(family) + " long lazy");
        // The fused kernel's online softmax across several tiles of keys (16 in the emulated build).
        dev.deviceAttention = attn::DeviceAttention::Fused;
        auto fd = attn::runDecoder(model, ids, dev);
        ASSERT_TRUE(fd.ok()) << fd.status().message;
        expectOnTheDevice(*fd, std::string(family) + " long fused");
        expectSameLazyRun(model, *fd, *lc, std::string(family) + " long fused");
    }
}

} // namespace

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    if (!attn::test::deviceForTests("the decoder forward on the device")) return attn::test::kSkipped;
    return RUN_ALL_TESTS();
}
