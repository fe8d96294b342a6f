// Gemma 3 270M (Q4_K_M GGUF: Q4_K, Q5_0, Q6_K and Q8_0 tensors) against Hugging Face transformers' Gemma3ForCausalLM
// on the same weights dequantized by gguf-py (goldens/decoder_gemma3_270m.json, make_gemma3_goldens.py). Issue 33's
// tolerances: per-head weights within 1e-4 on sliding (0, 4) and global (5, 17) layers, the last logits within 1e-3
// of their largest magnitude, the top 5 identical; a 1500-token text past the 512-token window, dense and lazy.
#include <attnscope/attention_maps.h>
#include <attnscope/decoder.h>
#include <attnscope/preset_io.h>

#include "golden_floats.h"
#include "golden_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace {
using json = nlohmann::json;

const json& golden()
{
    static const json g = attn::testing::readGoldenJson("decoder_gemma3_270m.json", 64u << 20);
    return g;
}

using attn::testing::base64Floats;

// The golden's logits (at logit_ids) against a run's: within 1e-3 of their largest magnitude; the top 5 identical.
void expectLogits(const attn::DecoderModel& model, const attn::Vector& logits, const json& c, const std::string& what)
{
    const std::vector<int> ids = c["logit_ids"].get<std::vector<int>>();
    const std::vector<float> want = base64Floats(c["logits_f32"].get<std::string>());
    ASSERT_EQ(ids.size(), want.size());
    ASSERT_EQ(logits.size(), model.config.vocab);
    double maxMag = 0, worst = 0;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        maxMag = std::max(maxMag, std::abs(double(want[k])));
        worst = std::max(worst, std::abs(double(want[k]) - logits[ids[k]]));
    }
    EXPECT_LE(worst, 1e-3 * maxMag) << what << ": last logits (largest magnitude " << maxMag << ")";
    const auto top = attn::topTokens(model, logits, 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(top[static_cast<std::size_t>(i)].id, c["top5"][i].get<int>()) << what << ": top " << i;
}

class Gemma3 : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        if (!std::filesystem::exists(ATTNSCOPE_GEMMA3)) return;
        auto m = attn::loadDecoder(ATTNSCOPE_GEMMA3);
        ASSERT_TRUE(m.ok()) << m.status().message;
        s_model = new attn::DecoderModel(std::move(*m));
    }
    static void TearDownTestSuite() { delete s_model; }
    void SetUp() override
    {
        if (s_model == nullptr) GTEST_SKIP() << ATTNSCOPE_GEMMA3 << " is not installed (scripts/setup.sh installs it)";
    }
    static attn::DecoderModel* s_model;
};
attn::DecoderModel* Gemma3::s_model = nullptr;

TEST_F(Gemma3, ConfigurationFromTheGguf)
{
    const attn::DecoderConfig& c = s_model->config;
    EXPECT_EQ(c.architecture, "gemma3");
    EXPECT_EQ(c.family, attn::DecoderFamily::Gemma);
    EXPECT_EQ(c.layers, 18);
    EXPECT_EQ(c.heads, 4);
    EXPECT_EQ(c.kvHeads, 1);
    EXPECT_EQ(c.hidden, 640);
    EXPECT_EQ(c.headDim, 256);  // Q is 1024 wide on a 640-wide model
    EXPECT_EQ(c.vocab, 262144);
    EXPECT_EQ(c.qkNorm, attn::QkNorm::PerHead);
    EXPECT_TRUE(c.postNorms);
    EXPECT_EQ(c.ffn, attn::FfnKind::GeGluTanh);
    EXPECT_FLOAT_EQ(c.embedScale, std::sqrt(640.0f));
    EXPECT_TRUE(c.tiedEmbeddings);
    // Global layers 5, 11, 17 (RoPE base 1e6, no window); the others slide over 512 keys with base 1e4.
    ASSERT_EQ(static_cast<int>(c.layerSpecs.size()), 18);
    for (int l = 0; l < 18; ++l) {
        const bool global = (l + 1) % 6 == 0;
        EXPECT_EQ(c.windowOf(l), global ? 0 : 512) << "layer " << l;
        EXPECT_FLOAT_EQ(c.ropeThetaOf(l), global ? 1e6f : 1e4f) << "layer " << l;
    }
    // Mixed quantizations, each kept in its format.
    EXPECT_EQ(s_model->layers[0].Wq.type(), attn::GgmlType::Q5_0);
    EXPECT_EQ(s_model->layers[0].Wo.type(), attn::GgmlType::Q4_K);
    EXPECT_EQ(s_model->layers[0].Wdown.type(), attn::GgmlType::Q6_K);
    EXPECT_EQ(s_model->tokenEmbeddings.type(), attn::GgmlType::Q8_0);
}

TEST_F(Gemma3, MatchesTransformersOnTheDequantizedWeights)
{
    const json g = golden();
    ASSERT_EQ(g["format"], "attnscope-gemma3-golden");
    for (const json& c : g["cases"]) {
        const std::string text = c["text"].get<std::string>();
        const std::vector<int> ids = c["ids"].get<std::vector<int>>();
        // The SentencePiece tokenizer gives transformers' ids (BOS, the 4-space piece of the code text).
        auto enc = attn::encodeForDecoder(*s_model, text, false);
        ASSERT_TRUE(enc.ok()) << enc.status().message;
        EXPECT_EQ(enc->ids, ids) << text;
        auto run = attn::runDecoder(*s_model, ids);
        ASSERT_TRUE(run.ok()) << run.status().message;
        const int n = static_cast<int>(ids.size());
        double worst = 0;
        const std::vector<int> layers = c["weight_layers"].get<std::vector<int>>();
        for (std::size_t k = 0; k < layers.size(); ++k)
            for (int h = 0; h < s_model->config.heads; ++h) {
                const auto& w = run->weights[static_cast<std::size_t>(layers[k])][static_cast<std::size_t>(h)];
                const json& gw = c["weights"][k][h];
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < n; ++j) worst = std::max(worst, std::abs(double(w(i, j)) - gw[i][j].get<double>()));
            }
        EXPECT_LE(worst, 1e-4) << text << ": per-head weights";
        expectLogits(*s_model, run->lastLogits, c, text);
        for (int i = 1; i < n; ++i)
            EXPECT_NEAR(run->surprise[static_cast<std::size_t>(i)], c["surprise"][i].get<double>(), 2e-3) << text << ": token " << i;
    }
}

// 1500 tokens, past the 512-token window of the sliding layers: dense and lazy both match transformers, the sliding
// layer's weights are 0 before the window and its maps say so.
TEST_F(Gemma3, ALongTextPastTheWindowMatchesTransformers)
{
    const json& L = golden()["long"];
    const std::vector<int> ids = L["ids"].get<std::vector<int>>();
    const std::vector<int> layers = L["layers"].get<std::vector<int>>(), rows = L["rows"].get<std::vector<int>>();
    const std::vector<float> w = base64Floats(L["weights_f32"].get<std::string>());
    const int n = static_cast<int>(ids.size()), H = s_model->config.heads;
    ASSERT_EQ(w.size(), layers.size() * H * rows.size() * std::size_t(n));
    for (bool lazy : {false, true}) {
        attn::DecoderOptions o;
        o.lazy = lazy;
        auto run = attn::runDecoder(*s_model, ids, o);
        ASSERT_TRUE(run.ok()) << run.status().message;
        const std::string what = lazy ? "lazy" : "dense";
        expectLogits(*s_model, run->lastLogits, L, what);
        const auto maps = attn::decoderMaps(*s_model, *run);
        double worst = 0;
        for (std::size_t k = 0; k < layers.size(); ++k) {
            EXPECT_EQ(maps->window(layers[k]), s_model->config.windowOf(layers[k]));
            for (int h = 0; h < H; ++h)
                for (std::size_t r = 0; r < rows.size(); ++r) {
                    attn::Matrix tile;
                    ASSERT_TRUE(maps->tile(attn::MapKind::Weights, layers[k], h, {rows[r], 0, 1, n}, tile).ok());
                    const float* g = w.data() + ((k * H + h) * rows.size() + r) * std::size_t(n);
                    for (int j = 0; j < n; ++j) worst = std::max(worst, std::abs(double(tile(0, j)) - g[j]));
                }
        }
        EXPECT_LE(worst, 1e-4) << what << ": weights of layers 0 (sliding) and 5 (global)";
        // The sliding layer hides keys 512 and more behind a query: row 1499 of layer 0 sees keys 988…1499 only.
        attn::Matrix row;
        ASSERT_TRUE(maps->tile(attn::MapKind::Weights, 0, 0, {1499, 0, 1, n}, row).ok());
        EXPECT_EQ(row.leftCols(988).cwiseAbs().maxCoeff(), 0.0f) << what;
        EXPECT_NEAR(row.rightCols(512).sum(), 1.0, 1e-4) << what;
        attn::MaskMatrix mask;
        ASSERT_TRUE(maps->maskTile(0, 0, {1499, 986, 1, 4}, mask).ok());
        EXPECT_EQ(mask(0, 0), 1);
        EXPECT_EQ(mask(0, 1), 1);
        EXPECT_EQ(mask(0, 2), 0);
        ASSERT_TRUE(maps->maskTile(5, 0, {1499, 0, 1, 4}, mask).ok());
        EXPECT_EQ(mask.cwiseAbs().maxCoeff(), 0);  // the global layer sees every earlier key
    }
}

// Appending tokens one by one past the window equals a whole forward (the appended rows honour each layer's window).
TEST_F(Gemma3, AppendsPastTheWindowEqualAWholeForward)
{
    const std::vector<int> all = golden()["long"]["ids"].get<std::vector<int>>();
    const std::vector<int> head(all.begin(), all.begin() + 508), whole(all.begin(), all.begin() + 520);
    auto run = attn::runDecoder(*s_model, head);
    ASSERT_TRUE(run.ok()) << run.status().message;
    for (std::size_t i = head.size(); i < whole.size(); ++i) ASSERT_TRUE(attn::appendTokens(*s_model, {whole[i]}, *run).ok());
    auto ref = attn::runDecoder(*s_model, whole);
    ASSERT_TRUE(ref.ok());
    EXPECT_LE((run->lastLogits - ref->lastLogits).cwiseAbs().maxCoeff(), 1e-3 * ref->lastLogits.cwiseAbs().maxCoeff());
    for (int l : {0, 5})
        for (int h = 0; h < s_model->config.heads; ++h) {
            const attn::Matrix a = run->weights[l][h].toMatrix(), b = ref->weights[l][h].toMatrix();
            ASSERT_EQ(a.rows(), b.rows());
            EXPECT_LE((a - b).cwiseAbs().maxCoeff(), 5e-6) << "layer " << l << " head " << h;
        }
}

} // namespace
