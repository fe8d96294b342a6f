// A lazy run's maps read where the run computed them (issue 34: "tile rebuilding on the device"): decoderMaps() of a
// lazy run of the CUDA backend makes its tiles and pooled overviews by kernels from the Q, K and log-sum-exp the
// device still holds, and only those cross the bus. The oracle is the same run's maps read on the host (LazyMaps
// over the same Q, K and lse, which test_lazy_golden checks against the dense core): decoderMaps(…, false). Layers
// the device no longer holds (a later call on the device, a layer recomputed on the CPU) are read on the host, with
// the same values.
//
// Built twice, as test_decoder_device.cpp: over the emulated CUDA runtime (label unit) and against the real backend
// (label gpu, 77 without a device).
//
// Tolerances: the device sums q·k in order over the head's width, Eigen in its vectorised order, both float32: the
// scores of these tiny models (a few units) agree to ~1e-6, so 1e-5 relative to the largest is an order of margin;
// weights (≤ 1) are exp of those scores less the same log-sum-exp: 1e-5 absolute, as test_decoder_device's kWeightTol.
#include "cuda/cuda_backend.h"
#include "device_test_main.h"

#include <attnscope/decoder.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace {

constexpr double kScoreTol = 1e-5;   // relative to max(1, the largest |score|)
constexpr double kWeightTol = 1e-5;  // absolute

double maxAbsDiff(const attn::Matrix& a, const attn::Matrix& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols()) return INFINITY;
    if (a.size() == 0) return 0;
    return (a - b).cwiseAbs().maxCoeff();
}

double tolFor(attn::MapKind kind, const attn::Matrix& oracle)
{
    if (kind == attn::MapKind::Weights) return kWeightTol;
    return kScoreTol * std::max(1.0, oracle.size() ? double(oracle.cwiseAbs().maxCoeff()) : 0.0);
}

// 23 tokens: several of the emulated build's row blocks of 3, and past the tiny Gemmas' window of 4.
std::vector<int> textIds(int n, int salt)
{
    std::vector<int> ids;
    for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 5 + salt * 11) % 300);
    return ids;
}

// The run's maps read on the host only.
std::shared_ptr<const attn::AttentionMaps> hostMaps(const attn::DecoderModel& model, const attn::DecoderRun& run)
{
    return attn::decoderMaps(model, run, false);
}

struct Read {
    attn::MapRect rect;
    int outRows = 0, outCols = 0;  // 0: a tile
};

// Every read of `reads` of every layer in `layers`, heads 0 and H−1, both kinds: `maps` equals `oracle`.
void expectSameReads(const attn::AttentionMaps& maps, const attn::AttentionMaps& oracle, const std::vector<int>& layers,
                     const std::vector<Read>& reads, const std::string& what)
{
    for (int l : layers)
        for (int h : {0, maps.heads() - 1})
            for (attn::MapKind kind : {attn::MapKind::Weights, attn::MapKind::Scores})
                for (const Read& r : reads) {
                    attn::Matrix a, b;
                    const bool pooled = r.outRows > 0;
                    const attn::Status sa = pooled ? maps.pooled(kind, l, h, r.rect, r.outRows, r.outCols, a) : maps.tile(kind, l, h, r.rect, a);
                    const attn::Status sb =
                        pooled ? oracle.pooled(kind, l, h, r.rect, r.outRows, r.outCols, b) : oracle.tile(kind, l, h, r.rect, b);
                    const std::string at = what + " layer " + std::to_string(l) + " head " + std::to_string(h) + " " +
                                           attn::toString(kind) + " rect " + std::to_string(r.rect.r0) + "," + std::to_string(r.rect.c0) +
                                           "+" + std::to_string(r.rect.rows) + "x" + std::to_string(r.rect.cols) +
                                           (pooled ? " pooled " + std::to_string(r.outRows) + "x" + std::to_string(r.outCols) : "");
                    ASSERT_TRUE(sa.ok()) << at << ": " << sa.message;
                    ASSERT_TRUE(sb.ok()) << at << ": " << sb.message;
                    EXPECT_LE(maxAbsDiff(a, b), tolFor(kind, b)) << at;
                }
}

std::vector<Read> readsOf(int n)
{
    return {
        {{0, 0, n, n}},                 // the whole map
        {{5, 3, 11, 9}},                // inside
        {{n - 4, n - 6, 4, 6}},         // the last rows' corner
        {{n - 1, 0, 1, 1}},             // one cell
        {{0, 0, n, n}, n, n},           // pooled to its own size
        {{0, 0, n, n}, 3, 5},           // pooled
        {{0, 0, n, n}, 7, 2},
        {{0, 0, n, n}, 1, 1},
        {{5, 3, 11, 9}, 2, 4},          // an inner rect pooled
        {{2, 9, 12, 5}, 50, 50},        // asked larger than the rect: clamped
    };
}

struct Case {
    std::string name;
    std::string path;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DeviceLazyMaps : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override
    {
        auto loaded = attn::loadDecoder(GetParam().path);
        ASSERT_TRUE(loaded.ok()) << loaded.status().message;
        model = std::move(*loaded);
        opts.backend = attn::Backend::Cuda;
        opts.lazy = true;
    }
    attn::DecoderModel model;
    attn::DecoderOptions opts;
};

TEST_P(DeviceLazyMaps, TilesAndOverviewsEqualTheHostsWhileTheDeviceHoldsTheRun)
{
    const std::string name = GetParam().name;
    const int n = 23, L = model.config.layers;
    auto run = attn::runDecoder(model, textIds(n, 0), opts);
    ASSERT_TRUE(run.ok()) << name << ": " << run.status().message;
    ASSERT_EQ(run->backend, attn::Backend::Cuda) << name;
    ASSERT_TRUE(run->lazy);
    ASSERT_NE(run->deviceMapsGeneration, 0u) << name << ": a lazy run on the device leaves its maps there";
    ASSERT_EQ(run->deviceLayers.size(), std::size_t(L));

    const auto dev = attn::decoderMaps(model, *run);
    const auto host = hostMaps(model, *run);
    std::vector<int> all;
    for (int l = 0; l < L; ++l) all.push_back(l);
    const std::vector<Read> reads = readsOf(n);
    expectSameReads(*dev, *host, all, reads, name);
    // Every read was the device's (2 heads × 2 kinds per read and layer), none the host's.
    EXPECT_EQ(attn::decoderMapsDeviceReads(*dev), long(L) * 2 * 2 * long(reads.size())) << name;
    EXPECT_EQ(attn::decoderMapsDeviceReads(*host), 0) << name;

    // Reads outside the maps are the seam's errors, as on the host.
    attn::Matrix out;
    const attn::Status bad = dev->tile(attn::MapKind::Weights, 0, 0, attn::MapRect{n - 2, 0, 3, 1}, out);
    EXPECT_EQ(bad.code, attn::StatusCode::InvalidArgument) << name;
    EXPECT_EQ(bad.message, host->tile(attn::MapKind::Weights, 0, 0, attn::MapRect{n - 2, 0, 3, 1}, out).message);
    EXPECT_EQ(dev->pooled(attn::MapKind::Scores, L, 0, attn::MapRect{0, 0, 1, 1}, 1, 1, out).code, attn::StatusCode::InvalidArgument);
}

TEST_P(DeviceLazyMaps, LayersTheDeviceNoLongerHoldsAreReadOnTheHost)
{
    const std::string name = GetParam().name;
    const int n = 23, L = model.config.layers;
    auto run = attn::runDecoder(model, textIds(n, 0), opts);
    ASSERT_TRUE(run.ok()) << name << ": " << run.status().message;
    const std::vector<Read> reads = {{{0, 0, n, n}}, {{0, 0, n, n}, 4, 3}};

    // Its last layer recomputed on the CPU (a head ablated): that layer is another now, read on the host; the layers
    // below are still the device's.
    attn::DecoderRun cpuTop = *run;
    cpuTop.ablated = {{L - 1, 1}};
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, L - 1, cpuTop, attn::Backend::Cpu).ok());
    {
        const auto dev = attn::decoderMaps(model, cpuTop);
        expectSameReads(*dev, *hostMaps(model, cpuTop), {L - 1}, reads, name + " recomputed on the CPU");
        EXPECT_EQ(attn::decoderMapsDeviceReads(*dev), 0) << name << ": the recomputed layer is not the device's";
        expectSameReads(*dev, *hostMaps(model, cpuTop), {0}, reads, name + " below the recomputed layer");
        EXPECT_EQ(attn::decoderMapsDeviceReads(*dev), 2 * 2 * long(reads.size())) << name;
    }

    // A later call on the device (another text) replaces its activations: every read of the first run is the host's,
    // with the first run's values.
    auto other = attn::runDecoder(model, textIds(n, 1), opts);
    ASSERT_TRUE(other.ok()) << other.status().message;
    ASSERT_NE(other->deviceMapsGeneration, run->deviceMapsGeneration);
    const auto stale = attn::decoderMaps(model, *run);
    std::vector<int> all;
    for (int l = 0; l < L; ++l) all.push_back(l);
    expectSameReads(*stale, *hostMaps(model, *run), all, reads, name + " after another run");
    EXPECT_EQ(attn::decoderMapsDeviceReads(*stale), 0) << name;
    // The other run is the device's now.
    const auto fresh = attn::decoderMaps(model, *other);
    expectSameReads(*fresh, *hostMaps(model, *other), all, reads, name + " the other run");
    EXPECT_GT(attn::decoderMapsDeviceReads(*fresh), 0) << name;

    // A dense run keeps its maps on the host: no device record.
    attn::DecoderOptions dense = opts;
    dense.lazy = false;
    auto d = attn::runDecoder(model, textIds(n, 2), dense);
    ASSERT_TRUE(d.ok()) << d.status().message;
    EXPECT_EQ(d->deviceMapsGeneration, 0u);
    EXPECT_TRUE(d->deviceLayers.empty());
}

std::vector<Case> cases()
{
    std::vector<Case> out;
    // Grouped-query (llama, qwen2: one KV head), a soft-cap and a window (gemma2), windows on most layers (gemma3),
    // plain multi-head (gpt2).
    for (const char* family : {"tiny_llama", "tiny_qwen2", "tiny_gemma2", "tiny_gemma3", "tiny_gpt2"})
        out.push_back({family, std::string(ATTNSCOPE_DECODER_DATA) + "/" + family});
    return out;
}

INSTANTIATE_TEST_SUITE_P(Families, DeviceLazyMaps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

} // namespace

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    if (!attn::test::deviceForTests("a lazy run's maps on the device", false)) return attn::test::kSkipped;
    return RUN_ALL_TESTS();
}
