// The lazy decoder forward (DecoderOptions::lazy, issue 18) over 1500 tokens against Hugging Face transformers:
// SmolLM2-135M-Instruct Q4_1 from its GGUF, the golden goldens/smollm2_lazy_1500.json made by make_lazy_goldens.py
// (transformers' LlamaForCausalLM on the GGUF's dequantized weights, float32, eager attention). The test runs the
// golden's token ids directly (no tokenizer involved) and reads layer 14's maps back through the tile seam
// (decoderMaps → tile), as the views do. Tolerances are test_decoder_golden's for SmolLM2 (issue 17), each
// explained where it is checked. Skipped when SmolLM2 is not installed (scripts/setup.sh installs it).
#include <attnscope/decoder.h>
#include <attnscope/preset_io.h>

#include "golden_floats.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <unistd.h>

namespace {
using json = nlohmann::json;

using attn::testing::base64Floats;

double seconds(std::chrono::steady_clock::time_point since)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class LazyGolden : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        if (!std::filesystem::exists(ATTNSCOPE_SMOLLM2)) return;
        auto text = attn::readFile(ATTNSCOPE_LAZY_GOLDEN, 16u << 20);
        ASSERT_TRUE(text.ok()) << text.status().message;
        s_golden = new json(json::parse(*text));
        ASSERT_EQ((*s_golden)["format"], "attnscope-lazy-golden");
        ASSERT_EQ((*s_golden)["version"], 1) << "regenerate with tests/model/make_lazy_goldens.py";
        auto m = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
        ASSERT_TRUE(m.ok()) << m.status().message;
        s_model = new attn::DecoderModel(std::move(*m));
        const auto t0 = std::chrono::steady_clock::now();
        attn::DecoderOptions o;
        o.lazy = true;
        auto run = attn::runDecoder(*s_model, ids(), o);
        ASSERT_TRUE(run.ok()) << run.status().message;
        s_lazy = new attn::DecoderRun(std::move(*run));
        std::printf("lazy forward over %zu tokens: %.1f s\n", ids().size(), seconds(t0));
    }
    static void TearDownTestSuite()
    {
        delete s_lazy;
        delete s_model;
        delete s_golden;
        s_lazy = nullptr;
        s_model = nullptr;
        s_golden = nullptr;
    }
    void SetUp() override
    {
        if (s_model == nullptr) GTEST_SKIP() << ATTNSCOPE_SMOLLM2 << " is not installed (scripts/setup.sh installs it)";
        ASSERT_NE(s_lazy, nullptr);
    }
    static std::vector<int> ids() { return (*s_golden)["ids"].get<std::vector<int>>(); }
    static const json& golden() { return *s_golden; }

    static json* s_golden;
    static attn::DecoderModel* s_model;
    static attn::DecoderRun* s_lazy;
};
json* LazyGolden::s_golden = nullptr;
attn::DecoderModel* LazyGolden::s_model = nullptr;
attn::DecoderRun* LazyGolden::s_lazy = nullptr;

// Issue 18's check: one layer's weights within 1e-4 absolute (issue 17's tolerance; float32 on both sides, the
// difference is rounding of the residual stream through 14 layers and of the dequantized vs in-format products).
// Masked cells (key > query) are 0 in transformers' softmax and must be 0 here too. (Each test is its own process
// under ctest and repeats the 12 s setup, so the run's own checks ride along here rather than in a test of their own.)
TEST_F(LazyGolden, LayerWeightsAtTheGoldenRowsMatchTransformers)
{
    EXPECT_TRUE(s_lazy->lazy);
    EXPECT_EQ(s_lazy->encoding.ids, ids());
    EXPECT_EQ(static_cast<int>(ids().size()), 1500);
    EXPECT_TRUE(s_lazy->warnings.empty());
    const int layer = golden()["layer"].get<int>(), heads = golden()["heads"].get<int>(), n = golden()["keys"].get<int>();
    const std::vector<int> rows = golden()["rows"].get<std::vector<int>>();
    const std::vector<float> g = base64Floats(golden()["weights_f32"].get<std::string>());
    ASSERT_EQ(g.size(), std::size_t(heads) * rows.size() * std::size_t(n));
    ASSERT_EQ(heads, s_model->config.heads);
    const auto maps = attn::decoderMaps(*s_model, *s_lazy);
    ASSERT_NE(maps, nullptr);
    ASSERT_EQ(maps->queries(), n);
    ASSERT_EQ(maps->keys(), n);
    double worst = 0, worstMasked = 0;
    int worstHead = -1, worstRow = -1, worstKey = -1, mismatches = 0;
    attn::Matrix tile;
    for (int h = 0; h < heads; ++h)
        for (std::size_t k = 0; k < rows.size(); ++k) {
            const int r = rows[k];
            const attn::Status s = maps->tile(attn::MapKind::Weights, layer, h, attn::MapRect{r, 0, 1, n}, tile);
            ASSERT_TRUE(s.ok()) << s.message;
            ASSERT_EQ(tile.rows(), 1);
            ASSERT_EQ(tile.cols(), n);
            const float* want = g.data() + (std::size_t(h) * rows.size() + k) * std::size_t(n);
            for (int j = 0; j < n; ++j) {
                const double d = std::abs(double(tile(0, j)) - double(want[j]));
                if (!(d <= 1e-4) && ++mismatches <= 5)
                    ADD_FAILURE() << "L" << layer << " H" << h << " query " << r << " key " << j << ": " << tile(0, j)
                                  << " vs transformers " << want[j];
                if (j > r) worstMasked = std::max(worstMasked, std::abs(double(tile(0, j))));
                if (d > worst || std::isnan(d)) {
                    worst = std::isnan(d) ? INFINITY : d;
                    worstHead = h, worstRow = r, worstKey = j;
                }
            }
        }
    std::printf("layer %d weights: max |diff| %.3g (H%d query %d key %d), %d cells over 1e-4; masked cells max %.3g\n",
                layer, worst, worstHead, worstRow, worstKey, mismatches, worstMasked);
    EXPECT_LE(worst, 1e-4);
    EXPECT_EQ(worstMasked, 0.0);
}

// The last position's logits within 1e-3 of their largest magnitude, and the hidden state after the final norm
// within 2e-3 absolute: test_decoder_golden's SmolLM2 tolerances (issue 17). Float32 rounding over 30 layers, the
// in-format Q4_1 products against transformers' products of the dequantized weights, and 1500 keys' sums.
// Top-10 identical, the golden's order (so the top token agrees).
TEST_F(LazyGolden, LastLogitsAndHiddenMatchTransformers)
{
    const std::vector<float> logits = base64Floats(golden()["last_logits_f32"].get<std::string>());
    ASSERT_EQ(static_cast<Eigen::Index>(logits.size()), s_lazy->lastLogits.size());
    double maxMag = 0, worst = 0;
    for (std::size_t v = 0; v < logits.size(); ++v) {
        maxMag = std::max(maxMag, std::abs(double(logits[v])));
        worst = std::max(worst, std::abs(double(logits[v]) - s_lazy->lastLogits[static_cast<Eigen::Index>(v)]));
    }
    std::printf("last logits: max |diff| %.3g (largest magnitude %.3g)\n", worst, maxMag);
    EXPECT_LE(worst, 1e-3 * maxMag) << "last-position logits (largest magnitude " << maxMag << ")";

    const std::vector<int> top10 = golden()["top10"].get<std::vector<int>>();
    const auto top = attn::topTokens(*s_model, s_lazy->lastLogits, 10);
    ASSERT_EQ(top.size(), top10.size());
    for (std::size_t i = 0; i < top10.size(); ++i) EXPECT_EQ(top[i].id, top10[i]) << "top " << i;

    const std::vector<float> hidden = base64Floats(golden()["hidden_last_f32"].get<std::string>());
    ASSERT_EQ(static_cast<int>(hidden.size()), s_model->config.hidden);
    const int last = static_cast<int>(s_lazy->finalHidden.rows()) - 1;
    double worstHidden = 0;
    for (int j = 0; j < s_model->config.hidden; ++j) {
        const double d = std::abs(double(s_lazy->finalHidden(last, j)) - double(hidden[static_cast<std::size_t>(j)]));
        worstHidden = std::max(worstHidden, d);
        EXPECT_LE(d, 2e-3) << "hidden " << j;
    }
    std::printf("last hidden (after the final norm): max |diff| %.3g\n", worstHidden);
}

// The same ids dense: the lazy outputs equal the dense path's within float rounding (lazy_attention.h). The
// logits within 1e-5 of their largest magnitude: the two paths sum the same products in a different order (key
// blocks with a rescaled running sum vs one softmax row), which moves float32 results by a few ulps per layer.
// The dense run keeps 30 × 9 × 1500² × 9 B ≈ 5.5 GB of maps: skipped where that is over half the machine's memory.
TEST_F(LazyGolden, DenseRunAgrees)
{
    const long n = static_cast<long>(ids().size());
    const double need = attn::decoderRunBytes(s_model->config, n, false);
    const double physical = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (physical > 0 && need > physical / 2)
        GTEST_SKIP() << "a dense run over " << n << " tokens keeps " << need / 1e9 << " GB, over half of this machine's "
                     << physical / 1e9 << " GB";
    const auto t0 = std::chrono::steady_clock::now();
    auto dense = attn::runDecoder(*s_model, ids());
    if (!dense.ok() && dense.status().code == attn::StatusCode::ResourceExhausted)
        GTEST_SKIP() << dense.status().message;
    ASSERT_TRUE(dense.ok()) << dense.status().message;
    std::printf("dense forward over %ld tokens: %.1f s\n", n, seconds(t0));
    const double maxMag = dense->lastLogits.cwiseAbs().maxCoeff();
    const double worst = (dense->lastLogits - s_lazy->lastLogits).cwiseAbs().maxCoeff();
    std::printf("lazy vs dense last logits: max |diff| %.3g (largest magnitude %.3g)\n", worst, maxMag);
    EXPECT_LE(worst, 1e-5 * maxMag);
    // And the layer's maps through the same seam. Within 1e-5, not bitwise: a tile is exp(q·k·s − lse) from the
    // layer's own Q and K, but those come from residual streams that 14 layers summed in the two orders above
    // (measured: 3.3e-6 on the last 64 rows).
    const int layer = golden()["layer"].get<int>();
    const auto lazyMaps = attn::decoderMaps(*s_model, *s_lazy), denseMaps = attn::decoderMaps(*s_model, *dense);
    attn::Matrix a, b;
    double worstWeight = 0;
    for (int h = 0; h < s_model->config.heads; ++h) {
        const attn::MapRect rect{static_cast<int>(n) - 64, 0, 64, static_cast<int>(n)};
        ASSERT_TRUE(lazyMaps->tile(attn::MapKind::Weights, layer, h, rect, a).ok());
        ASSERT_TRUE(denseMaps->tile(attn::MapKind::Weights, layer, h, rect, b).ok());
        worstWeight = std::max(worstWeight, double((a - b).cwiseAbs().maxCoeff()));
    }
    std::printf("lazy vs dense layer %d weights (last 64 rows): max |diff| %.3g\n", layer, worstWeight);
    EXPECT_LE(worstWeight, 1e-5);
}

} // namespace
