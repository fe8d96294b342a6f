// Synthetic decoders (attnscope/synthetic_decoder.h): a config.json of a real model, random weights answered by a
// WeightSource, and the family code of a real load (detail::assembleDecoder).
#include "attnscope/synthetic_decoder.h"

#include "attnscope/preset_io.h"  // readFile
#include "decoder_tokenizer.h"
#include "weight_source.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>
#include <utility>

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
// which is what a plain llama or Gemma directory answers for the optional ones). A config.json names any size: the
// tensors are made only while they stay within `budget` bytes in all (one that would pass it is refused before it is
// allocated, naming it and the sizes).
class RandomSource final : public detail::WeightSource {
public:
    RandomSource(std::uint64_t seed, std::size_t budget, std::string what) : m_random{seed}, m_budget(budget), m_what(std::move(what)) {}
    bool has(const std::string&) const override { return false; }
    Status matrix(const std::string& name, int rows, int cols, const char*, Matrix& out) override
    {
        ATTNSCOPE_RETURN_IF_ERROR(take(name, std::to_string(rows) + " × " + std::to_string(cols), std::size_t(rows) * std::size_t(cols)));
        // Uniform on [-a, a] has standard deviation a/√3: a = 0.02·√3 gives 0.02, a trained model's usual scale.
        const float a = 0.02f * std::sqrt(3.0f);
        out.resize(rows, cols);
        float* p = out.data();
        for (Eigen::Index i = 0; i < out.size(); ++i) p[i] = a * m_random.symmetric();
        return Status::success();
    }
    Status vector(const std::string& name, int n, const char*, Vector& out) override
    {
        ATTNSCOPE_RETURN_IF_ERROR(take(name, std::to_string(n), std::size_t(n)));
        // Norm weights (the only vectors asked for without biases): about 1.
        out.resize(n);
        for (int i = 0; i < n; ++i) out[i] = 1.0f + 0.1f * m_random.symmetric();
        return Status::success();
    }
    std::string where(const std::string& name) const override { return "synthetic model: " + name; }

private:
    static std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
    // `count` more floats for tensor `name` of `shape`, or ResourceExhausted where they would pass the budget.
    Status take(const std::string& name, const std::string& shape, std::size_t count)
    {
        const std::size_t bytes = count * sizeof(float);
        if (bytes > m_budget - m_used)
            return makeError(StatusCode::ResourceExhausted, m_what + ": its float32 weights would pass " + mib(m_budget) + " at " + name +
                                                                " (" + shape + ", " + mib(bytes) + ", after " + mib(m_used) +
                                                                "); expected a smaller shape");
        m_used += bytes;
        return Status::success();
    }
    Random m_random;
    std::size_t m_budget = 0, m_used = 0;
    std::string m_what;  // the model, for messages
};

// The memory the machine can give without swapping: MemAvailable of /proc/meminfo, or the free physical pages where
// there is none; 0 where neither can be read.
std::size_t availableMemory()
{
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib << 10;
    const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? std::size_t(pages) * std::size_t(size) : 0;
}

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

Expected<DecoderModel> syntheticDecoderFromConfig(const std::string& configText, const std::string& name,
                                                  std::size_t maxWeightBytes, std::uint64_t seed)
{
    DecoderModel m;
    m.name = "synthetic " + name;
    m.path = "synthetic:" + name;
    m.format = "synthetic";
    auto cfg = parseDecoderConfig(configText, name);
    if (!cfg) return cfg.status();
    m.config = std::move(*cfg);
    // The tokenizer below is the 256 bytes: their ids must be rows of the embedding.
    if (m.config.vocab < 256)
        return invalidArgument(name + ": vocab_size " + std::to_string(m.config.vocab) +
                               ": a synthetic model's tokenizer has one token per byte; expected at least 256");
    BpeVocabSpec spec;
    for (int b = 0; b < 256; ++b) spec.tokens.push_back(byteLevelText(b));
    spec.pre = "gpt2";
    auto tok = BpeTokenizer::fromSpec(spec);
    if (!tok) return tok.status();
    m.tokenizer = std::move(*tok);
    RandomSource source(seed, maxWeightBytes, name);
    ATTNSCOPE_RETURN_IF_ERROR(detail::assembleDecoder(source, m));
    return m;
}

Expected<DecoderModel> syntheticDecoder(const std::string& shape, std::uint64_t seed)
{
    // Three quarters of what is available: the runs need room beside the weights (no limit where it cannot be read).
    const std::size_t available = availableMemory();
    const std::size_t budget = available > 0 ? available / 4 * 3 : std::numeric_limits<std::size_t>::max();
    const std::string known = syntheticDecoderConfig(shape);
    if (!known.empty()) return syntheticDecoderFromConfig(known, shape, budget, seed);
    // Not a known name: a config.json, or a directory holding one (a model's, without its weights).
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool dir = fs::is_directory(shape, ec);
    if (!dir && !fs::exists(shape, ec) && shape.find('/') == std::string::npos && !shape.ends_with(".json")) {
        std::string names;
        for (const std::string& s : syntheticDecoderShapes()) names += (names.empty() ? "" : ", ") + s;
        return invalidArgument("synthetic model \"" + shape + "\": unknown shape (known: " + names +
                               "; or a config.json, or a model directory holding one)");
    }
    fs::path named = fs::path(shape).lexically_normal();
    if (named.filename().empty()) named = named.parent_path();  // "dir/"
    const std::string file = dir ? (named / "config.json").string() : shape;
    auto text = readFile(file, 1 << 20);
    if (!text) return text.status();
    auto m = syntheticDecoderFromConfig(*text, file, budget, seed);
    if (!m && m.status().code == StatusCode::ResourceExhausted)
        return makeError(StatusCode::ResourceExhausted, m.status().message + " (the limit: three quarters of the memory available)");
    if (!m) return m.status();
    // Named after the model's directory where it has one (dir, or dir/config.json), else the file.
    const fs::path folder = dir ? named : named.filename() == "config.json" ? named.parent_path() : fs::path();
    m->name = "synthetic " + (!folder.filename().empty() ? folder.filename().string() : named.stem().string());
    return m;
}

} // namespace attn
