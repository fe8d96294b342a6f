// Parity with Hugging Face transformers 4.36 on all-MiniLM-L6-v2 (goldens from make_goldens.py).
// Tolerances are issue 10's: tokens identical, every layer's per-head weights within 1e-4, last hidden states
// within 2e-3, sentence embedding cosine ≥ 0.99999 (float32 both sides; measured max diffs ~3e-6 and ~7e-6).
#include <attnscope/model.h>
#include <attnscope/preset_io.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace {
using json = nlohmann::json;

class ModelGolden : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        auto m = attn::loadModel(ATTNSCOPE_MODEL_DIR);
        ASSERT_TRUE(m.ok()) << m.status().message << " (scripts/setup.sh installs the model)";
        s_model = new attn::Model(std::move(*m));
        auto text = attn::readFile(ATTNSCOPE_MODEL_GOLDENS, 64u << 20);
        ASSERT_TRUE(text.ok()) << text.status().message;
        s_golden = new json(json::parse(*text));
        ASSERT_EQ((*s_golden)["format"], "attnscope-model-goldens");
        ASSERT_EQ((*s_golden)["version"], 1);
    }
    static void TearDownTestSuite()
    {
        delete s_model;
        delete s_golden;
    }
    static attn::Model* s_model;
    static json* s_golden;
};
attn::Model* ModelGolden::s_model = nullptr;
json* ModelGolden::s_golden = nullptr;

std::optional<std::string> pairOf(const json& c)
{
    return c.contains("pair") ? std::optional<std::string>(c["pair"].get<std::string>()) : std::nullopt;
}

TEST_F(ModelGolden, TokenizerMatchesHuggingFace)
{
    ASSERT_TRUE(s_model && s_golden);
    int n = 0;
    for (const json& c : (*s_golden)["tokenizer"]) {
        auto enc = s_model->tokenizer.encode(c["text"], pairOf(c), s_model->config.maxPositions);
        ASSERT_TRUE(enc.ok()) << enc.status().message;
        EXPECT_EQ(enc->tokens, c["tokens"].get<std::vector<std::string>>()) << "text: " << c["text"];
        EXPECT_EQ(enc->ids, c["ids"].get<std::vector<int>>()) << "text: " << c["text"];
        EXPECT_EQ(enc->typeIds, c["type_ids"].get<std::vector<int>>()) << "text: " << c["text"];
        EXPECT_EQ(enc->truncated, c["tokens"].size() == 512u) << "text: " << c["text"];
        ++n;
    }
    EXPECT_GE(n, 10);
}

TEST_F(ModelGolden, ForwardMatchesHuggingFace)
{
    ASSERT_TRUE(s_model && s_golden);
    const int L = s_model->config.layers, H = s_model->config.heads, M = s_model->config.hidden;
    for (const json& c : (*s_golden)["forward"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        attn::ModelOptions opt;
        if (c.contains("ablate"))
            for (const json& p : c["ablate"]) opt.ablate.emplace_back(p[0].get<int>(), p[1].get<int>());
        auto run = attn::runModel(*s_model, c["text"], pairOf(c), opt);
        ASSERT_TRUE(run.ok()) << run.status().message;
        ASSERT_EQ(run->encoding.tokens, c["tokens"].get<std::vector<std::string>>());
        ASSERT_EQ(run->encoding.ids, c["ids"].get<std::vector<int>>());
        const int n = static_cast<int>(run->encoding.ids.size());

        double maxW = 0;
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < H; ++h) {
                const auto ref = c["weights"][l][h].get<std::vector<float>>();
                const attn::Matrix& w = run->attention[l].heads[h].weights;
                ASSERT_EQ(ref.size(), static_cast<std::size_t>(n * n));
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < n; ++j) maxW = std::max(maxW, double(std::fabs(w(i, j) - ref[i * n + j])));
            }
        EXPECT_LE(maxW, 1e-4) << "max |weights − HF| over every layer and head";

        const auto refH = c["last_hidden"].get<std::vector<float>>();
        ASSERT_EQ(refH.size(), static_cast<std::size_t>(n * M));
        double maxH = 0;
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < M; ++k)
                maxH = std::max(maxH, double(std::fabs(run->hidden.back()(i, k) - refH[i * M + k])));
        EXPECT_LE(maxH, 2e-3) << "max |last hidden − HF|";

        const auto refE = c["embedding"].get<std::vector<float>>();
        ASSERT_EQ(refE.size(), static_cast<std::size_t>(M));
        const attn::Vector e = Eigen::Map<const attn::Vector>(refE.data(), M);
        EXPECT_GE(attn::cosineSimilarity(run->embedding, e), 0.99999f);
        EXPECT_NEAR(run->embedding.norm(), 1.0f, 1e-5f);

        // Ablated heads: weights and their concat slice are exactly 0 (HF head_mask semantics).
        for (const auto& [l, h] : opt.ablate) {
            EXPECT_EQ(run->attention[l].heads[h].weights.cwiseAbs().maxCoeff(), 0.0f);
            EXPECT_EQ(run->attention[l].concat.middleCols(h * (M / H), M / H).cwiseAbs().maxCoeff(), 0.0f);
        }
    }
}

// An edit in layer l recomputes l…L−1 only, and matches a full forward with the same weights.
TEST_F(ModelGolden, RecomputeFromEditedLayerMatchesFullForward)
{
    ASSERT_TRUE(s_model);
    attn::Model& m = *s_model;
    auto run = attn::runModel(m, "The cat sat on the mat.", std::nullopt);
    ASSERT_TRUE(run.ok());
    const attn::Matrix layer2Weights = run->attention[2].heads[0].weights;
    const attn::Vector before = run->embedding;
    const float old = m.layers[4].attention.Wq(5, 7);
    m.layers[4].attention.Wq(5, 7) = old + 3.0f;
    ASSERT_TRUE(attn::recomputeFrom(m, 4, *run).ok());
    EXPECT_EQ(run->attention[2].heads[0].weights, layer2Weights);  // below the edit: untouched
    auto full = attn::runModel(m, "The cat sat on the mat.", std::nullopt);
    ASSERT_TRUE(full.ok());
    // The same sums in the same order, whatever the size of the thread teams (blocks follow the sizes alone).
    EXPECT_TRUE(run->hidden.back() == full->hidden.back())
        << "largest difference " << (run->hidden.back() - full->hidden.back()).cwiseAbs().maxCoeff();
    EXPECT_GT((run->embedding - before).cwiseAbs().maxCoeff(), 0.0f);  // the edit changed the output
    m.layers[4].attention.Wq(5, 7) = old;
}

TEST_F(ModelGolden, LongTextIsTruncatedWithAWarning)
{
    ASSERT_TRUE(s_model);
    std::string text;
    for (int i = 0; i < 600; ++i) text += "word ";
    auto run = attn::runModel(*s_model, text, std::nullopt);
    ASSERT_TRUE(run.ok()) << run.status().message;
    EXPECT_EQ(run->encoding.ids.size(), 512u);
    ASSERT_EQ(run->warnings.size(), 1u);
    EXPECT_NE(run->warnings[0].find("602 tokens are more than the model's 512 positions"), std::string::npos)
        << run->warnings[0];
}

} // namespace
