// Synthetic decoders (attnscope/synthetic_decoder.h): the shapes are the real models' (checked against the installed
// GGUFs' own metadata where scripts/setup.sh put them), the weights are reproducible, a forward runs, bad names are
// refused.
#include <attnscope/decoder.h>
#include <attnscope/synthetic_decoder.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace {

// The fields that decide a forward's cost and arithmetic, compared one by one so a failure names the field.
void expectSameShape(const attn::DecoderConfig& a, const attn::DecoderConfig& b)
{
    EXPECT_EQ(a.family, b.family);
    EXPECT_EQ(a.layers, b.layers);
    EXPECT_EQ(a.heads, b.heads);
    EXPECT_EQ(a.kvHeads, b.kvHeads);
    EXPECT_EQ(a.hidden, b.hidden);
    EXPECT_EQ(a.headDim, b.headDim);
    EXPECT_EQ(a.intermediate, b.intermediate);
    EXPECT_EQ(a.vocab, b.vocab);
    EXPECT_EQ(a.tiedEmbeddings, b.tiedEmbeddings);
    EXPECT_FLOAT_EQ(a.normEps, b.normEps);
    EXPECT_EQ(a.norm, b.norm);
    EXPECT_EQ(a.preNorms, b.preNorms);
    EXPECT_EQ(a.postNorms, b.postNorms);
    EXPECT_EQ(a.qkNorm, b.qkNorm);
    EXPECT_EQ(a.ffn, b.ffn);
    EXPECT_FLOAT_EQ(a.embedScale, b.embedScale);
    EXPECT_FLOAT_EQ(a.scoreScale(), b.scoreScale());
    EXPECT_FLOAT_EQ(a.attnSoftcap, b.attnSoftcap);
    EXPECT_FLOAT_EQ(a.finalSoftcap, b.finalSoftcap);
    for (int l = 0; l < std::min(a.layers, b.layers); ++l) {
        EXPECT_EQ(a.windowOf(l), b.windowOf(l)) << "layer " << l;
        EXPECT_FLOAT_EQ(a.ropeThetaOf(l), b.ropeThetaOf(l)) << "layer " << l;
        EXPECT_FLOAT_EQ(a.ropeScaleOf(l), b.ropeScaleOf(l)) << "layer " << l;
    }
}

void expectShapeOfInstalled(const std::string& shape, const std::string& gguf)
{
    if (!std::filesystem::exists(gguf)) GTEST_SKIP() << gguf << " is not installed (scripts/setup.sh installs it)";
    auto real = attn::loadDecoder(gguf);
    ASSERT_TRUE(real) << real.status().message;
    auto syn = attn::syntheticDecoder(shape);
    ASSERT_TRUE(syn) << syn.status().message;
    expectSameShape(syn->config, real->config);
    EXPECT_EQ(syn->format, "synthetic");
    EXPECT_EQ(syn->layers.size(), real->layers.size());
}

TEST(SyntheticDecoder, SmolLm2HasTheInstalledModelsShape)
{
    expectShapeOfInstalled("smollm2", ATTNSCOPE_SMOLLM2);
}

TEST(SyntheticDecoder, Gemma3HasTheInstalledModelsShape)
{
    expectShapeOfInstalled("gemma3-270m", ATTNSCOPE_GEMMA3);
}

TEST(SyntheticDecoder, SameSeedSameWeightsAndAForwardRuns)
{
    auto a = attn::syntheticDecoder("smollm2", 7);
    auto b = attn::syntheticDecoder("smollm2", 7);
    auto c = attn::syntheticDecoder("smollm2", 8);
    ASSERT_TRUE(a && b && c);
    EXPECT_TRUE(a->layers[3].Wq.dense() == b->layers[3].Wq.dense());
    EXPECT_FALSE(a->layers[3].Wq.dense() == c->layers[3].Wq.dense());
    // Standard deviation 0.02 as documented (576 × 576 values: within 2%).
    const attn::Matrix& w = a->layers[3].Wq.dense();
    const double sd = std::sqrt(double(w.array().square().mean()));
    EXPECT_NEAR(sd, 0.02, 0.0004);

    // Any text encodes, one token per byte.
    auto enc = attn::encodeForDecoder(*a, "Paris, é!", false);
    ASSERT_TRUE(enc) << enc.status().message;
    EXPECT_EQ(enc->ids.size(), std::string("Paris, é!").size());
    attn::DecoderOptions o;
    auto run = attn::runDecoder(*a, enc->ids, o);
    ASSERT_TRUE(run) << run.status().message;
    ASSERT_EQ(run->lastLogits.size(), 49152);
    EXPECT_TRUE(run->lastLogits.allFinite());
}

TEST(SyntheticDecoder, UnknownShapeNamesTheKnownOnes)
{
    auto m = attn::syntheticDecoder("llama-70b");
    ASSERT_FALSE(m);
    EXPECT_EQ(m.status().code, attn::StatusCode::InvalidArgument);
    EXPECT_NE(m.status().message.find("llama-70b"), std::string::npos) << m.status().message;
    EXPECT_NE(m.status().message.find("smollm2, gemma3-270m"), std::string::npos) << m.status().message;
}

// Any decoder's config.json: the file, or a directory holding it (here the tiny models', whose weights are also there
// to compare the shape with).
TEST(SyntheticDecoder, AConfigJsonGivesItsModelsShape)
{
    for (const std::string name : {"tiny_gemma3", "tiny_llama", "tiny_phi3"}) {
        SCOPED_TRACE(name);
        const std::string dir = std::string(ATTNSCOPE_DECODER_DATA) + "/" + name;
        auto real = attn::loadDecoder(dir);
        ASSERT_TRUE(real) << real.status().message;
        for (const std::string& shape : {dir, dir + "/", dir + "/config.json"}) {
            auto syn = attn::syntheticDecoder(shape);
            ASSERT_TRUE(syn) << shape << ": " << syn.status().message;
            expectSameShape(syn->config, real->config);
            EXPECT_EQ(syn->name, "synthetic " + name);
            EXPECT_EQ(syn->format, "synthetic");
            EXPECT_EQ(syn->layers.size(), real->layers.size());
        }
        auto syn = attn::syntheticDecoder(dir);
        ASSERT_TRUE(syn);
        auto enc = attn::encodeForDecoder(*syn, "any text", false);
        ASSERT_TRUE(enc) << enc.status().message;
        auto run = attn::runDecoder(*syn, enc->ids, attn::DecoderOptions{});
        ASSERT_TRUE(run) << run.status().message;
        EXPECT_EQ(run->lastLogits.size(), real->config.vocab);
        EXPECT_TRUE(run->lastLogits.allFinite());
    }
}

// The weights' limit of syntheticDecoderFromConfig, exactly: tiny_llama's float32 weights (d_model 32, 4 heads of 8 over
// 2 KV heads, feed-forward 64, 2 layers, 320 tokens, an LM head of its own) fit a budget of their own size and not one
// float less, refused naming the tensor that would pass it.
TEST(SyntheticDecoder, TheWeightsLimitIsExact)
{
    std::ifstream in(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama/config.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t layer = 32 * 32 + 2 * 32 * 16 + 32 * 32 + 3 * 32 * 64 + 2 * 32;  // Q, K, V, O, gate/up/down, 2 norms
    const std::size_t floats = 320 * 32 + 2 * layer + 32 + 320 * 32;                   // embedding, layers, final norm, head
    auto m = attn::syntheticDecoderFromConfig(text, "tiny_llama", floats * sizeof(float));
    ASSERT_TRUE(m) << m.status().message;
    EXPECT_EQ(m->denseWeightBytes(), floats * sizeof(float));
    m = attn::syntheticDecoderFromConfig(text, "tiny_llama", floats * sizeof(float) - sizeof(float));
    ASSERT_FALSE(m);
    EXPECT_EQ(m.status().code, attn::StatusCode::ResourceExhausted);
    EXPECT_NE(m.status().message.find("tiny_llama: its float32 weights would pass"), std::string::npos) << m.status().message;
}

// A config written by the test into its own folder.
std::string writeConfig(const std::string& name, const std::string& text)
{
    const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "attnscope_synthetic" / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << text;
    return (dir / "config.json").string();
}

std::string llamaConfig(long long hidden, long long vocab)
{
    return R"({"model_type": "llama", "hidden_size": )" + std::to_string(hidden) + R"(, "intermediate_size": 64,
               "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 2048,
               "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": )" +
           std::to_string(vocab) + "}";
}

TEST(SyntheticDecoder, BadConfigsAreRefusedNamingWhatIsWrong)
{
    // A path that is not there.
    auto m = attn::syntheticDecoder("no/such/folder/config.json");
    ASSERT_FALSE(m);
    EXPECT_NE(m.status().message.find("no/such/folder/config.json"), std::string::npos) << m.status().message;

    // A vocabulary smaller than the tokenizer's 256 bytes.
    const std::string small = writeConfig("small_vocab", llamaConfig(32, 100));
    m = attn::syntheticDecoder(small);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.status().code, attn::StatusCode::InvalidArgument);
    EXPECT_NE(m.status().message.find("vocab_size 100"), std::string::npos) << m.status().message;
    EXPECT_NE(m.status().message.find("at least 256"), std::string::npos) << m.status().message;

    // Not JSON, and not a decoder, named as a model directory's would be.
    m = attn::syntheticDecoder(writeConfig("not_json", "{ hidden"));
    ASSERT_FALSE(m);
    EXPECT_NE(m.status().message.find("not_json/config.json"), std::string::npos) << m.status().message;
    m = attn::syntheticDecoder(writeConfig("bert", R"({"model_type": "bert", "vocab_size": 30522})"));
    ASSERT_FALSE(m);
    EXPECT_EQ(m.status().code, attn::StatusCode::Unsupported) << m.status().message;

    // Weights of about 1 TB (an embedding of 4 000 000 × 65536 floats, more than any machine these tests run on): refused
    // before they are allocated (allocating them would end the test), naming the tensor and its size.
    m = attn::syntheticDecoder(writeConfig("huge", llamaConfig(65536, 4000000)));
    ASSERT_FALSE(m);
    EXPECT_EQ(m.status().code, attn::StatusCode::ResourceExhausted) << m.status().message;
    EXPECT_NE(m.status().message.find("4000000 × 65536"), std::string::npos) << m.status().message;
    EXPECT_NE(m.status().message.find("memory available"), std::string::npos) << m.status().message;
}

} // namespace
