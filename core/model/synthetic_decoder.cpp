// Synthetic decoders (attnscope/synthetic_decoder.h): a config.json of a real model, random weights answered by a
// WeightSource, and the family code of a real load (detail::assembleDecoder).
#include "attnscope/synthetic_decoder.h"

#include "decoder_tokenizer.h"
#include "weight_source.h"

#include <cmath>

namespace attn {
namespace {

// SmolLM2-135M's config.json (Hugging Face HuggingFaceTB/SmolLM2-135M), the fields the llama family reads.
constexpr const char* kSmolLm2 = R"({
  "model_type": "llama", "architectures": ["LlamaForCausalLM"],
  "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
  "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
  "vocab_size": 49152, "max_position_embeddings": 8192, "rms_norm_eps": 1e-05,
  "rope_theta": 100000.0, "rope_scaling": null, "hidden_act": "silu",
  "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": true,
  "bos_token_id": 0, "eos_token_id": 0
})";

// Gemma 3 270M's config.json (google/gemma-3-270m), in the rope_parameters form of transformers 5.
constexpr const char* kGemma3_270m = R"({
  "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
  "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
  "vocab_size": 262144, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
  "query_pre_attn_scalar": 256, "sliding_window": 512, "_sliding_window_pattern": 6,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                  "sliding_attention", "full_attention",
                  "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                  "sliding_attention", "full_attention",
                  "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                  "sliding_attention", "full_attention"],
  "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": null, "final_logit_softcapping": null,
  "attention_bias": false, "tie_word_embeddings": true, "use_bidirectional_attention": false,
  "bos_token_id": 2, "eos_token_id": 1
})";

// splitmix64: a fixed generator, identical on every machine (std's distributions are not).
struct Random {
    std::uint64_t s;
    std::uint64_t next()
    {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [-1, 1).
    float symmetric() { return float(double(next() >> 40) / double(1ull << 23) - 1.0); }
};

// Every tensor the family asks for, random: a source with no fused tensors and no biases (has() is false for all,
// which is what a plain llama or Gemma directory answers for the optional ones).
class RandomSource final : public detail::WeightSource {
public:
    explicit RandomSource(std::uint64_t seed) : m_random{seed} {}
    bool has(const std::string&) const override { return false; }
    Status matrix(const std::string&, int rows, int cols, const char*, Matrix& out) override
    {
        // Uniform on [-a, a] has standard deviation a/√3: a = 0.02·√3 gives 0.02, a trained model's usual scale.
        const float a = 0.02f * std::sqrt(3.0f);
        out.resize(rows, cols);
        float* p = out.data();
        for (Eigen::Index i = 0; i < out.size(); ++i) p[i] = a * m_random.symmetric();
        return Status::success();
    }
    Status vector(const std::string&, int n, const char*, Vector& out) override
    {
        // Norm weights (the only vectors asked for without biases): about 1.
        out.resize(n);
        for (int i = 0; i < n; ++i) out[i] = 1.0f + 0.1f * m_random.symmetric();
        return Status::success();
    }
    std::string where(const std::string& name) const override { return "synthetic model: " + name; }

private:
    Random m_random;
};

// GPT-2's byte → printable character map (the byte-level form of a token), encoded as UTF-8.
std::string byteLevelText(int b)
{
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int code = b;
    if (!printable) {
        int k = 0;  // the index of b among the non-printable bytes
        for (int c = 0; c < b; ++c)
            if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) ++k;
        code = 256 + k;
    }
    std::string s;
    if (code < 0x80) {
        s += char(code);
    } else {
        s += char(0xC0 | (code >> 6));
        s += char(0x80 | (code & 0x3F));
    }
    return s;
}

} // namespace

std::vector<std::string> syntheticDecoderShapes() { return {"smollm2", "gemma3-270m"}; }

std::string syntheticDecoderConfig(const std::string& shape)
{
    if (shape == "smollm2") return kSmolLm2;
    if (shape == "gemma3-270m") return kGemma3_270m;
    return {};
}

Expected<DecoderModel> syntheticDecoder(const std::string& shape, std::uint64_t seed)
{
    const std::string text = syntheticDecoderConfig(shape);
    if (text.empty()) {
        std::string known;
        for (const std::string& s : syntheticDecoderShapes()) known += (known.empty() ? "" : ", ") + s;
        return invalidArgument("synthetic model \"" + shape + "\": unknown shape (known: " + known + ")");
    }
    DecoderModel m;
    m.name = "synthetic " + shape;
    m.path = "synthetic:" + shape;
    m.format = "synthetic";
    auto cfg = parseDecoderConfig(text, m.path + " config.json");
    if (!cfg) return cfg.status();
    m.config = std::move(*cfg);
    BpeVocabSpec spec;
    for (int b = 0; b < 256; ++b) spec.tokens.push_back(byteLevelText(b));
    spec.pre = "gpt2";
    auto tok = BpeTokenizer::fromSpec(spec);
    if (!tok) return tok.status();
    m.tokenizer = std::move(*tok);
    RandomSource source(seed);
    ATTNSCOPE_RETURN_IF_ERROR(detail::assembleDecoder(source, m));
    return m;
}

} // namespace attn
