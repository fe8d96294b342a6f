// attnscope_model on tiny synthetic models written by the test: safetensors, config.json, tokenizer, forward
// properties, and every bad-input message (missing files, corrupt safetensors, shapes contradicting
// config.json, unknown model_type, bad ablation).
#include <attnscope/attention.h>
#include <attnscope/model.h>
#include <attnscope/preset_io.h>
#include <attnscope/safetensors.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

struct Tensor {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

std::uint16_t toHalf(float f)  // exact for the values used here (multiples of 1/64 in ±4)
{
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    const std::uint32_t sign = (b >> 16) & 0x8000u;
    const int exp = int((b >> 23) & 0xff) - 127 + 15;
    if ((b & 0x7fffffffu) == 0) return static_cast<std::uint16_t>(sign);
    return static_cast<std::uint16_t>(sign | (std::uint32_t(exp) << 10) | ((b >> 13) & 0x3ffu));
}

std::string safetensorsBytes(const std::map<std::string, Tensor>& tensors)
{
    json h = json::object();
    std::string data;
    for (const auto& [name, t] : tensors) {
        const std::size_t begin = data.size();
        for (float v : t.values) {
            if (t.dtype == "F32") data.append(reinterpret_cast<const char*>(&v), 4);
            else if (t.dtype == "F16") {
                const std::uint16_t x = toHalf(v);
                data.append(reinterpret_cast<const char*>(&x), 2);
            } else {  // BF16: the high half of the float
                std::uint32_t b;
                std::memcpy(&b, &v, 4);
                const std::uint16_t x = static_cast<std::uint16_t>(b >> 16);
                data.append(reinterpret_cast<const char*>(&x), 2);
            }
        }
        h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string hs = h.dump();
    std::string out(8, '\0');
    const std::uint64_t n = hs.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + hs + data;
}

void writeText(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A BERT with M=4, H=2, F=8, L=2, 16 positions and a 14-token vocabulary.
constexpr int kM = 4, kF = 8, kL = 2, kPos = 16;
const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "un",
                                         "##believ", "##able", "!", "a", "##b", "é"};

json tinyConfig()
{
    return {{"model_type", "bert"}, {"num_hidden_layers", kL}, {"num_attention_heads", 2}, {"hidden_size", kM},
            {"intermediate_size", kF}, {"max_position_embeddings", kPos}, {"vocab_size", int(kVocab.size())},
            {"type_vocab_size", 2}, {"layer_norm_eps", 1e-12}, {"hidden_act", "gelu"}};
}

std::map<std::string, Tensor> tinyTensors(const std::string& dtype = "F32")
{
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> d(-64, 64);
    auto t = [&](std::vector<std::int64_t> shape) {
        Tensor x{dtype, shape, {}};
        std::int64_t n = 1;
        for (auto s : shape) n *= s;
        for (std::int64_t i = 0; i < n; ++i) x.values.push_back(float(d(rng)) / 64.0f);  // exact in F16/BF16
        return x;
    };
    std::map<std::string, Tensor> m;
    const std::int64_t V = static_cast<std::int64_t>(kVocab.size());
    m["embeddings.word_embeddings.weight"] = t({V, kM});
    m["embeddings.position_embeddings.weight"] = t({kPos, kM});
    m["embeddings.token_type_embeddings.weight"] = t({2, kM});
    m["embeddings.LayerNorm.weight"] = t({kM});
    m["embeddings.LayerNorm.bias"] = t({kM});
    for (int l = 0; l < kL; ++l) {
        const std::string p = "encoder.layer." + std::to_string(l) + ".";
        for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
            m[p + n + ".weight"] = t({kM, kM});
            m[p + n + ".bias"] = t({kM});
        }
        m[p + "attention.output.LayerNorm.weight"] = t({kM});
        m[p + "attention.output.LayerNorm.bias"] = t({kM});
        m[p + "intermediate.dense.weight"] = t({kF, kM});
        m[p + "intermediate.dense.bias"] = t({kF});
        m[p + "output.dense.weight"] = t({kM, kF});
        m[p + "output.dense.bias"] = t({kM});
        m[p + "output.LayerNorm.weight"] = t({kM});
        m[p + "output.LayerNorm.bias"] = t({kM});
    }
    m["embeddings.position_ids"] = {"F32", {1, kPos}, std::vector<float>(kPos, 0.0f)};
    return m;
}

std::string vocabTxt()
{
    std::string s;
    for (const auto& v : kVocab) s += v + "\n";
    return s;
}

class TinyModel : public ::testing::Test {
protected:
    void SetUp() override
    {
        const char* tmp = std::getenv("TMPDIR");
        std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/attnscope-model-XXXXXX";
        ASSERT_NE(mkdtemp(templ.data()), nullptr);
        m_dir = templ;
        write(tinyConfig(), tinyTensors());
        writeText(m_dir / "vocab.txt", vocabTxt());
    }
    void TearDown() override { fs::remove_all(m_dir); }
    void write(const json& cfg, const std::map<std::string, Tensor>& tensors)
    {
        writeText(m_dir / "config.json", cfg.dump());
        writeText(m_dir / "model.safetensors", safetensorsBytes(tensors));
    }
    std::string loadError()
    {
        auto m = attn::loadModel(m_dir.string());
        return m.ok() ? std::string("(loaded)") : m.status().message;
    }
    fs::path m_dir;
};

// ---- safetensors ---------------------------------------------------------------------------------------

TEST(Safetensors, ConvertsF16AndBF16ToFloat)
{
    const std::string b = safetensorsBytes({{"h", {"F16", {2, 2}, {1.5f, -0.25f, 0.0f, 3.0f}}},
                                            {"b", {"BF16", {3}, {-2.0f, 0.5f, 1.0f / 64}}}});
    auto m = attn::parseSafetensors(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), "t");
    ASSERT_TRUE(m.ok()) << m.status().message;
    EXPECT_EQ(m->at("h").values, (std::vector<float>{1.5f, -0.25f, 0.0f, 3.0f}));
    EXPECT_EQ(m->at("h").shape, (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(m->at("b").values, (std::vector<float>{-2.0f, 0.5f, 1.0f / 64}));
}

std::string parseError(const std::string& b)
{
    auto m = attn::parseSafetensors(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), "f.safetensors");
    EXPECT_FALSE(m.ok());
    if (m.ok()) return "(parsed)";
    EXPECT_EQ(m.status().code, attn::StatusCode::ParseError);
    return m.status().message;
}

TEST(Safetensors, CorruptFilesAreParseErrorsNamingTheProblem)
{
    EXPECT_EQ(parseError("abc"), "f.safetensors: not a safetensors file (3 bytes, shorter than the 8-byte header size)");
    std::string huge(8, '\xff');
    EXPECT_NE(parseError(huge).find("over the limit"), std::string::npos);
    std::string past = safetensorsBytes({{"x", {"F32", {2}, {1, 2}}}});
    past[0] = static_cast<char>(past[0] + 100);
    EXPECT_NE(parseError(past).find("runs past the end of the file"), std::string::npos);
    std::string truncated = safetensorsBytes({{"x", {"F32", {4}, {1, 2, 3, 4}}}});
    truncated.resize(truncated.size() - 4);
    EXPECT_NE(parseError(truncated).find("tensor \"x\": data_offsets [0, 16] outside the data (12 bytes)"), std::string::npos);
    auto withHeader = [](const std::string& h) {
        std::string out(8, '\0');
        out[0] = static_cast<char>(h.size());
        return out + h;
    };
    EXPECT_EQ(parseError(withHeader("{oops")), "f.safetensors: header is not valid JSON");
    EXPECT_EQ(parseError(withHeader("[1]")), "f.safetensors: header is not a JSON object");
    EXPECT_NE(parseError(withHeader(R"({"x":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})")).find("unknown dtype \"Q4\""),
              std::string::npos);
    EXPECT_NE(parseError(withHeader(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})")).find("non-negative"),
              std::string::npos);
    EXPECT_NE(parseError(withHeader(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,0]}})"))
                  .find("span 0 bytes, expected 12 (3 F32 values)"),
              std::string::npos);
    EXPECT_NE(parseError(withHeader(std::string(200, '[') + std::string(200, ']'))).find("nested deeper than 8 levels"), std::string::npos);
}

// ---- config.json ---------------------------------------------------------------------------------------

TEST(ModelConfig, UnknownModelTypeNamesWhatIsSupported)
{
    json c = tinyConfig();
    c["model_type"] = "gpt2";
    auto r = attn::parseModelConfig(c.dump());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code, attn::StatusCode::Unsupported);
    EXPECT_EQ(r.status().message, "config.json: model_type \"gpt2\" is not supported (supported: bert; decoders: gemma2, gemma3, gpt2, gptneox, llama, mistral, olmo2, phi3, qwen2, qwen3)");
}

TEST(ModelConfig, FieldErrorsNameTheField)
{
    json c = tinyConfig();
    c["num_attention_heads"] = 3;
    EXPECT_EQ(attn::parseModelConfig(c.dump()).status().message,
              "config.json: num_attention_heads 3 does not divide hidden_size 4");
    c = tinyConfig();
    c.erase("hidden_size");
    EXPECT_EQ(attn::parseModelConfig(c.dump()).status().message, "config.json: hidden_size is missing");
    c = tinyConfig();
    c["num_hidden_layers"] = -2;
    EXPECT_EQ(attn::parseModelConfig(c.dump()).status().message,
              "config.json: num_hidden_layers: expected an integer in 1..1024, got -2");
    c = tinyConfig();
    c["hidden_act"] = "relu";
    EXPECT_EQ(attn::parseModelConfig(c.dump()).status().code, attn::StatusCode::Unsupported);
    EXPECT_EQ(attn::parseModelConfig("not json").status().message, "config.json: not a JSON object");
    auto good = attn::parseModelConfig(tinyConfig().dump());
    ASSERT_TRUE(good.ok());
    EXPECT_EQ(good->layers, kL);
    EXPECT_EQ(good->maxPositions, kPos);
}

// ---- tokenizer ----------------------------------------------------------------------------------------

TEST(Tokenizer, WordPieceSplitsAndMarksUnknownWords)
{
    auto t = attn::Tokenizer::fromVocabTxt(vocabTxt());
    ASSERT_TRUE(t.ok()) << t.status().message;
    auto toks = t->tokenize("The  UNBELIEVABLE cat!! ab dog É");
    ASSERT_TRUE(toks.ok());
    // "É" lowercases and loses its accent → "e", not in the vocabulary → [UNK]; "é" itself is never reached.
    EXPECT_EQ(*toks, (std::vector<std::string>{"the", "un", "##believ", "##able", "cat", "!", "!", "a", "##b",
                                                "[UNK]", "[UNK]"}));
    auto enc = t->encode("the cat", std::string("sat"), 16);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->tokens, (std::vector<std::string>{"[CLS]", "the", "cat", "[SEP]", "sat", "[SEP]"}));
    EXPECT_EQ(enc->ids, (std::vector<int>{2, 4, 5, 3, 6, 3}));
    EXPECT_EQ(enc->typeIds, (std::vector<int>{0, 0, 0, 0, 1, 1}));
    EXPECT_FALSE(enc->truncated);
}

TEST(Tokenizer, SpecialTokensTypedInTheTextStayWhole)
{
    // vocab.txt: the BERT specials in the vocabulary ([PAD] [UNK] [CLS] [SEP]; this one has no [MASK]).
    auto v = attn::Tokenizer::fromVocabTxt(vocabTxt());
    ASSERT_TRUE(v.ok()) << v.status().message;
    auto tv = v->tokenize("the[SEP]cat [sep] [UNK]");
    ASSERT_TRUE(tv.ok());
    EXPECT_EQ(*tv, (std::vector<std::string>{"the", "[SEP]", "cat", "[UNK]", "[UNK]", "[UNK]", "[UNK]"}));
    // tokenizer.json: added_tokens with normalized = false; the longest match wins where two start together;
    // a normalized = true one is left to WordPiece (not supported).
    const std::string j = R"({"model":{"type":"WordPiece","vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"[M]":3,"[M]x":4,
        "a":5,"[":6,"m":7,"]":8,"é":9},"unk_token":"[UNK]"},"normalizer":{"type":"BertNormalizer","lowercase":false},
        "added_tokens":[{"content":"[M]","normalized":false},{"content":"[M]x","normalized":false},
                        {"content":"a","normalized":true}]})";
    auto t = attn::Tokenizer::fromTokenizerJson(j);
    ASSERT_TRUE(t.ok()) << t.status().message;
    auto toks = t->tokenize("a[M]a [M]x[m]é");
    ASSERT_TRUE(toks.ok());
    EXPECT_EQ(*toks, (std::vector<std::string>{"a", "[M]", "a", "[M]x", "[", "m", "]", "é"}));
    auto bad = t->tokenize("[M]\xff");
    ASSERT_FALSE(bad.ok());  // the offset is the whole text's, not the segment's
    EXPECT_NE(bad.status().message.find("byte 3"), std::string::npos) << bad.status().message;
    auto broken = attn::Tokenizer::fromTokenizerJson(R"({"model":{"type":"WordPiece","vocab":{"[UNK]":0}},"added_tokens":[{"id":1}]})");
    ASSERT_FALSE(broken.ok());
    EXPECT_EQ(broken.status().message,
              "tokenizer.json: added_tokens[0]: expected an object with a non-empty \"content\" string");
}

TEST(Tokenizer, TruncatesLongestFirstWithAWarning)
{
    auto t = attn::Tokenizer::fromVocabTxt(vocabTxt());
    ASSERT_TRUE(t.ok());
    auto enc = t->encode("the cat sat the cat sat the cat", std::string("sat"), 8);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->tokens, (std::vector<std::string>{"[CLS]", "the", "cat", "sat", "the", "[SEP]", "sat", "[SEP]"}));
    EXPECT_TRUE(enc->truncated);
    ASSERT_EQ(enc->warnings.size(), 1u);
    EXPECT_EQ(enc->warnings[0], "text: 12 tokens are more than the model's 8 positions; truncated to 8 (longest sentence first)");
}

TEST(Tokenizer, BadInputIsReported)
{
    auto t = attn::Tokenizer::fromVocabTxt(vocabTxt());
    ASSERT_TRUE(t.ok());
    auto bad = t->encode("the \xff cat", std::nullopt, 16);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().message, "text: invalid UTF-8 at byte 4");
    auto badPair = t->encode("the", std::string("\xc3"), 16);
    ASSERT_FALSE(badPair.ok());
    EXPECT_EQ(badPair.status().message, "pair text: invalid UTF-8 at byte 0");
    // A word longer than 100 characters is one [UNK], even when it would split.
    auto longWord = t->tokenize(std::string(101, 'a'));
    ASSERT_TRUE(longWord.ok());
    EXPECT_EQ(*longWord, std::vector<std::string>{"[UNK]"});

    auto bpe = attn::Tokenizer::fromTokenizerJson(R"({"model":{"type":"BPE","vocab":{}}})");
    ASSERT_FALSE(bpe.ok());
    EXPECT_EQ(bpe.status().message, "tokenizer.json: model.type \"BPE\" is not supported (supported: WordPiece)");
    auto noUnk = attn::Tokenizer::fromTokenizerJson(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})");
    ASSERT_FALSE(noUnk.ok());
    EXPECT_EQ(noUnk.status().message, "tokenizer.json: vocabulary: no unknown token [UNK]");
    auto badId = attn::Tokenizer::fromTokenizerJson(R"({"model":{"type":"WordPiece","vocab":{"a":7}}})");
    ASSERT_FALSE(badId.ok());
    EXPECT_EQ(badId.status().message, "tokenizer.json: model.vocab[\"a\"]: id must be an integer in 0..0");
    // A float where an integer belongs was converted to int (undefined behaviour; found by fuzz_tokenizer).
    auto floatChars = attn::Tokenizer::fromTokenizerJson(
        R"({"model":{"type":"WordPiece","max_input_chars_per_word":1.1e81,"vocab":{"[UNK]":0}}})");
    ASSERT_FALSE(floatChars.ok());
    EXPECT_EQ(floatChars.status().message,
              "tokenizer.json: model.max_input_chars_per_word: expected an integer in 1..1000000, got 1.1e+81");
    auto deep = attn::Tokenizer::fromTokenizerJson(std::string(100000, '[') + std::string(100000, ']'));
    ASSERT_FALSE(deep.ok());
    EXPECT_NE(deep.status().message.find("nested deeper than 64 levels"), std::string::npos);
}

// ---- loading and running --------------------------------------------------------------------------------

TEST_F(TinyModel, RunsWithRowsSummingToOneAndAUnitEmbedding)
{
    auto m = attn::loadModel(m_dir.string());
    ASSERT_TRUE(m.ok()) << m.status().message;
    auto run = attn::runModel(*m, "the cat sat", std::string("unbelievable!"));
    ASSERT_TRUE(run.ok()) << run.status().message;
    const int n = static_cast<int>(run->encoding.ids.size());
    EXPECT_EQ(n, 10);  // [CLS] the cat sat [SEP] un ##believ ##able ! [SEP]
    ASSERT_EQ(run->hidden.size(), std::size_t(kL + 1));
    for (const auto& r : run->attention) {
        ASSERT_EQ(r.heads.size(), 2u);
        for (const auto& h : r.heads) {
            ASSERT_EQ(h.weights.rows(), n);
            for (int i = 0; i < n; ++i) EXPECT_NEAR(h.weights.row(i).sum(), 1.0f, 1e-5f);
        }
    }
    // LayerNorm output with these small weights: finite, and the embedding has norm 1.
    EXPECT_TRUE(run->hidden.back().allFinite());
    EXPECT_NEAR(run->embedding.norm(), 1.0f, 1e-5f);
    // The layer's AttentionInput holds that layer's X: the chain view opens it as a session.
    EXPECT_EQ(m->layers[1].attention.X, run->hidden[1]);
}

// The feed-forward half of a layer, written out with plain loops and std::erf: the oracle for the model's
// blocked, vectorised version (LayerNorm, GELU with Eigen's erf approximation, the column-blocked products).
attn::Matrix naiveFeedForward(const attn::EncoderLayer& L, const attn::Matrix& attnOut, const attn::Matrix& input, float eps)
{
    auto layerNorm = [eps](attn::Matrix& x, const attn::Vector& g, const attn::Vector& b) {
        for (int i = 0; i < x.rows(); ++i) {
            double mean = 0, var = 0;
            for (int j = 0; j < x.cols(); ++j) mean += x(i, j);
            mean /= double(x.cols());
            for (int j = 0; j < x.cols(); ++j) var += (x(i, j) - mean) * (x(i, j) - mean);
            var /= double(x.cols());
            for (int j = 0; j < x.cols(); ++j) x(i, j) = float((x(i, j) - mean) / std::sqrt(var + eps) * g(j) + b(j));
        }
    };
    const int n = int(input.rows()), M = int(input.cols()), F = int(L.W1.cols());
    attn::Matrix x = attnOut + input;
    layerNorm(x, L.ln1Gamma, L.ln1Beta);
    attn::Matrix h(n, F), y(n, M);
    for (int i = 0; i < n; ++i)
        for (int f = 0; f < F; ++f) {
            double acc = L.b1(f);
            for (int k = 0; k < M; ++k) acc += double(x(i, k)) * L.W1(k, f);
            h(i, f) = float(0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0))));
        }
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < M; ++j) {
            double acc = L.b2(j) + x(i, j);
            for (int f = 0; f < F; ++f) acc += double(h(i, f)) * L.W2(f, j);
            y(i, j) = float(acc);
        }
    layerNorm(y, L.ln2Gamma, L.ln2Beta);
    return y;
}

TEST_F(TinyModel, FeedForwardMatchesPlainLoops)
{
    auto m = attn::loadModel(m_dir.string());
    ASSERT_TRUE(m.ok()) << m.status().message;
    auto run = attn::runModel(*m, "the cat sat", std::string("unbelievable!"));
    ASSERT_TRUE(run.ok()) << run.status().message;
    for (int l = 0; l < kL; ++l) {
        const attn::Matrix want = naiveFeedForward(m->layers[std::size_t(l)], run->attention[std::size_t(l)].output,
                                                   run->hidden[std::size_t(l)], m->config.layerNormEps);
        // float32 sums and Eigen's erf (a couple of ulp) against double sums and std::erf, through two
        // LayerNorms of 4 values with eps 1e-12 (which amplify a rounding difference by 1/σ): 1e-5 of values ~1.
        EXPECT_LT((run->hidden[std::size_t(l) + 1] - want).cwiseAbs().maxCoeff(), 1e-5f) << "layer " << l;
    }
}

// A layer's input pinned to edited hidden states (the chain view's X edits): the result must be a full forward
// with that input injected, computed here by the naive oracles (the reference attention path and the plain
// loops above), layer by layer from the pinned one.
TEST_F(TinyModel, PinnedInputMatchesAFullForwardWithItInjected)
{
    auto m = attn::loadModel(m_dir.string());
    ASSERT_TRUE(m.ok()) << m.status().message;
    for (int pinLayer = 0; pinLayer < kL; ++pinLayer) {
        auto run = attn::runModel(*m, "the cat sat", std::string("unbelievable!"), {attn::Backend::Cpu, {{1, 1}}});
        ASSERT_TRUE(run.ok()) << run.status().message;
        const attn::Matrix below = run->hidden[0];
        attn::PinnedInput pin{pinLayer, run->hidden[std::size_t(pinLayer)]};
        pin.X(0, 0) += 0.75f;
        pin.X.row(3) *= -1.0f;
        // From layer 0: the layers below the pin are recomputed as they were, then the pin replaces the input.
        ASSERT_TRUE(attn::recomputeFrom(*m, 0, *run, pin).ok());
        if (pinLayer > 0) {
            EXPECT_EQ(run->hidden[0], below);
        }
        EXPECT_EQ(run->hidden[std::size_t(pinLayer)], pin.X);

        attn::Matrix h = pin.X;
        for (int l = pinLayer; l < kL; ++l) {
            attn::AttentionInput in = m->layers[std::size_t(l)].attention;
            in.X = h;
            attn::AttentionConfig cfg;
            cfg.heads = 2;
            cfg.cpuPath = attn::CpuPath::Reference;
            attn::AttentionResult res;
            ASSERT_TRUE(attn::compute(in, cfg, res).ok());
            if (l == 1) {  // head 1 of layer 1 ablated: its slice of the concat is 0 (Hugging Face's head_mask)
                res.concat.middleCols(kM / 2, kM / 2).setZero();
                res.output = res.concat * in.Wo;
                res.output.rowwise() += in.bo.transpose();
            }
            h = naiveFeedForward(m->layers[std::size_t(l)], res.output, h, m->config.layerNormEps);
        }
        // Float32 Eigen against the reference loops and double sums through LayerNorms (see
        // FeedForwardMatchesPlainLoops): the same 1e-5 of values ~1.
        EXPECT_LT((run->hidden[kL] - h).cwiseAbs().maxCoeff(), 1e-5f) << "pinned layer " << pinLayer;
    }
}

TEST_F(TinyModel, BadPinnedInputsAreNamed)
{
    auto m = attn::loadModel(m_dir.string());
    ASSERT_TRUE(m.ok());
    auto run = attn::runModel(*m, "the cat", std::nullopt);
    ASSERT_TRUE(run.ok());
    const attn::Status shape = attn::recomputeFrom(*m, 0, *run, attn::PinnedInput{1, attn::Matrix::Zero(4, 3)});
    EXPECT_EQ(shape.message, "pinned input of layer 1: expected 4×4 (tokens × hidden_size), got 4×3");
    const attn::Status layer = attn::recomputeFrom(*m, 0, *run, attn::PinnedInput{2, run->hidden[0]});
    EXPECT_EQ(layer.message, "pinned input: layer 2 is outside 0..1");
}

TEST_F(TinyModel, ARunReusedForAnotherTextEqualsAFreshOne)
{
    auto m = attn::loadModel(m_dir.string());
    ASSERT_TRUE(m.ok()) << m.status().message;
    attn::ModelRun run;
    // Longer, then shorter, then the same length again: buffers resized and reused.
    for (const char* text : {"the cat sat a cat sat", "the cat", "the sat"}) {
        ASSERT_TRUE(attn::runModel(*m, text, std::nullopt, {}, run).ok());
        auto fresh = attn::runModel(*m, text, std::nullopt);
        ASSERT_TRUE(fresh.ok());
        EXPECT_EQ(run.encoding.ids, fresh->encoding.ids) << text;
        ASSERT_EQ(run.hidden.size(), fresh->hidden.size());
        for (std::size_t l = 0; l < run.hidden.size(); ++l) EXPECT_EQ(run.hidden[l], fresh->hidden[l]) << text << " layer " << l;
        for (std::size_t l = 0; l < run.attention.size(); ++l)
            for (std::size_t h = 0; h < run.attention[l].heads.size(); ++h)
                EXPECT_EQ(run.attention[l].heads[h].weights, fresh->attention[l].heads[h].weights) << text;
        EXPECT_EQ(run.embedding, fresh->embedding) << text;
    }
    // A bad text leaves the run usable: the next good one fills it.
    EXPECT_FALSE(attn::runModel(*m, "the", std::nullopt, {attn::Backend::Cpu, {{5, 0}}}, run).ok());
    ASSERT_TRUE(attn::runModel(*m, "the cat", std::nullopt, {}, run).ok());
    EXPECT_EQ(run.hidden.size(), std::size_t(kL + 1));
}

TEST_F(TinyModel, AblationZeroesTheHeadAndChangesTheOutput)
{
    auto m = attn::loadModel(m_dir.string());
    ASSERT_TRUE(m.ok());
    auto plain = attn::runModel(*m, "the cat sat", std::nullopt);
    auto abl = attn::runModel(*m, "the cat sat", std::nullopt, {attn::Backend::Cpu, {{1, 0}}});
    ASSERT_TRUE(plain.ok() && abl.ok());
    EXPECT_EQ(abl->attention[1].heads[0].weights.cwiseAbs().maxCoeff(), 0.0f);
    EXPECT_EQ(abl->attention[1].heads[1].weights, plain->attention[1].heads[1].weights);
    EXPECT_EQ(abl->hidden[1], plain->hidden[1]);              // below the ablated layer: identical
    EXPECT_GT((abl->hidden[2] - plain->hidden[2]).cwiseAbs().maxCoeff(), 1e-4f);
    auto out = attn::runModel(*m, "the", std::nullopt, {attn::Backend::Cpu, {{2, 0}}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().message, "ablate: layer 2 is outside 0..1");
}

TEST_F(TinyModel, F16AndBF16FilesGiveTheSameModel)
{
    auto f32 = attn::loadModel(m_dir.string());
    ASSERT_TRUE(f32.ok());
    auto a = attn::runModel(*f32, "the cat", std::nullopt);
    for (const char* dt : {"F16", "BF16"}) {
        write(tinyConfig(), tinyTensors(dt));
        auto m = attn::loadModel(m_dir.string());
        ASSERT_TRUE(m.ok()) << dt << ": " << m.status().message;
        auto b = attn::runModel(*m, "the cat", std::nullopt);
        ASSERT_TRUE(b.ok());
        EXPECT_EQ(a->hidden.back(), b->hidden.back()) << dt;  // every weight is exact in 16 bits
    }
}

TEST_F(TinyModel, BadDirectoriesGiveOneClearMessage)
{
    EXPECT_NE(attn::loadModel((m_dir / "nope").string()).status().message.find("nope does not exist"), std::string::npos);
    // A file (a README, a .bin) is not called missing: the message says what a model is.
    std::ofstream(m_dir / "README.md") << "# not a model\n";
    EXPECT_EQ(attn::loadModel((m_dir / "README.md").string()).status().message,
              (m_dir / "README.md").string() + " is a file, not a model: expected a .gguf file (a decoder) or a model "
                                               "directory (config.json, model.safetensors and tokenizer.json or "
                                               "vocab.txt in it)");

    auto tensors = tinyTensors();
    tensors["encoder.layer.1.attention.self.key.weight"].shape = {4, 2};
    tensors["encoder.layer.1.attention.self.key.weight"].values.resize(8);
    write(tinyConfig(), tensors);
    EXPECT_EQ(loadError(), (m_dir / "model.safetensors").string() +
                               ": encoder.layer.1.attention.self.key.weight: expected 4×4 (hidden_size × hidden_size), got 4×2");

    tensors = tinyTensors();
    tensors.erase("encoder.layer.0.output.dense.bias");
    write(tinyConfig(), tensors);
    EXPECT_EQ(loadError(), (m_dir / "model.safetensors").string() + ": tensor encoder.layer.0.output.dense.bias is missing");

    json cfg = tinyConfig();
    cfg["num_hidden_layers"] = 3;  // the file has 2 layers
    write(cfg, tinyTensors());
    EXPECT_NE(loadError().find("tensor encoder.layer.2.attention.self.query.weight is missing"), std::string::npos);

    cfg = tinyConfig();
    cfg["model_type"] = "t5";
    write(cfg, tinyTensors());
    EXPECT_EQ(loadError(), "config.json: model_type \"t5\" is not supported (supported: bert; decoders: gemma2, gemma3, gpt2, gptneox, llama, mistral, olmo2, phi3, qwen2, qwen3)");

    write(tinyConfig(), tinyTensors());
    writeText(m_dir / "model.safetensors", "garbage!");
    EXPECT_NE(loadError().find("model.safetensors: header size"), std::string::npos);

    fs::remove(m_dir / "model.safetensors");
    EXPECT_NE(loadError().find("model.safetensors: cannot open"), std::string::npos);
    fs::remove(m_dir / "vocab.txt");
    EXPECT_NE(loadError().find("neither tokenizer.json nor vocab.txt"), std::string::npos);
}

TEST(Ablation, ParsesPairsAndRejectsBadOnes)
{
    auto ok = attn::parseAblation("0:3,5:11", 6, 12);
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(*ok, (std::vector<std::pair<int, int>>{{0, 3}, {5, 11}}));
    EXPECT_EQ(attn::parseAblation("6:0", 6, 12).status().message, "--ablate: layer 6 is outside 0..5");
    EXPECT_EQ(attn::parseAblation("0:12", 6, 12).status().message, "--ablate: head 12 is outside 0..11");
    EXPECT_EQ(attn::parseAblation("x", 6, 12).status().message,
              "--ablate: \"x\" is not LAYER:HEAD (e.g. 0:3, layers 0..5, heads 0..11)");
    EXPECT_EQ(attn::parseAblation("1:-2", 6, 12).status().message,
              "--ablate: \"1:-2\" is not LAYER:HEAD (e.g. 0:3, layers 0..5, heads 0..11)");
    EXPECT_FALSE(attn::parseAblation("", 6, 12).ok());
}

} // namespace
