// Synthetic decoders (attnscope/synthetic_decoder.h): the shapes are the real models' (checked against the installed
// GGUFs' own metadata where scripts/setup.sh put them), the weights are reproducible, a forward runs, bad names are
// refused.
#include <attnscope/decoder.h>
#include <attnscope/synthetic_decoder.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

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

} // namespace
