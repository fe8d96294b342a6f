// Loading and running a BERT-family encoder. See attnscope/model.h for the contract and docs/model.md.
//
// [SECTION] config.json
// [SECTION] Loading
// [SECTION] Forward
// [SECTION] Helpers
#include "attnscope/model.h"

#include "attnscope/attention.h"
#include "attnscope/preset_io.h"  // readFile
#include "attnscope/safetensors.h"

#include "json_limits.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <sys/stat.h>

namespace attn {
using json = nlohmann::json;

// -----------------------------------------------------------------------------------------------------
// [SECTION] config.json
// -----------------------------------------------------------------------------------------------------

Expected<ModelConfig> parseModelConfig(const std::string& text)
{
    if (auto d = detail::checkJsonDepth(text, 32); !d.ok())
        return makeError(StatusCode::ParseError, "config.json: " + d.message);
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return makeError(StatusCode::ParseError, "config.json: not a JSON object");
    ModelConfig c;
    auto str = [&](const char* key, const std::string& def) -> std::string {
        auto it = j.find(key);
        return (it != j.end() && it->is_string()) ? it->get<std::string>() : def;
    };
    c.modelType = str("model_type", "");
    if (c.modelType != "bert")
        return makeError(StatusCode::Unsupported, "config.json: model_type \"" + c.modelType +
                                                      "\" is not supported (supported: bert)");
    if (const std::string act = str("hidden_act", "gelu"); act != "gelu")
        return makeError(StatusCode::Unsupported, "config.json: hidden_act \"" + act + "\" is not supported (supported: gelu)");
    if (const std::string pe = str("position_embedding_type", "absolute"); pe != "absolute")
        return makeError(StatusCode::Unsupported, "config.json: position_embedding_type \"" + pe +
                                                      "\" is not supported (supported: absolute)");
    struct Field { const char* key; int* dst; int lo, hi; bool required; };
    // Upper bounds keep a hostile config from asking for absurd allocations before the tensors are checked.
    const Field fields[] = {
        {"num_hidden_layers", &c.layers, 1, 1024, true},      {"num_attention_heads", &c.heads, 1, 1024, true},
        {"hidden_size", &c.hidden, 1, 65536, true},           {"intermediate_size", &c.intermediate, 1, 262144, true},
        {"max_position_embeddings", &c.maxPositions, 3, 1 << 20, true},
        {"vocab_size", &c.vocabSize, 3, 2'000'000, true},     {"type_vocab_size", &c.typeVocabSize, 1, 1024, false},
    };
    for (const Field& f : fields) {
        auto it = j.find(f.key);
        if (it == j.end()) {
            if (f.required) return invalidArgument(std::string("config.json: ") + f.key + " is missing");
            continue;
        }
        if (!it->is_number_integer() || it->get<long long>() < f.lo || it->get<long long>() > f.hi)
            return invalidArgument(std::string("config.json: ") + f.key + ": expected an integer in " +
                                   std::to_string(f.lo) + ".." + std::to_string(f.hi) + ", got " + it->dump());
        *f.dst = static_cast<int>(it->get<long long>());
    }
    if (auto it = j.find("layer_norm_eps"); it != j.end()) {
        if (!it->is_number() || !(it->get<double>() > 0) || !(it->get<double>() < 1))
            return invalidArgument("config.json: layer_norm_eps: expected a number in (0, 1), got " + it->dump());
        c.layerNormEps = static_cast<float>(it->get<double>());
    }
    if (c.hidden % c.heads != 0)
        return invalidArgument("config.json: num_attention_heads " + std::to_string(c.heads) +
                               " does not divide hidden_size " + std::to_string(c.hidden));
    return c;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Loading
// -----------------------------------------------------------------------------------------------------

namespace {

bool fileExists(const std::string& p)
{
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string shapeText(const std::vector<std::int64_t>& s)
{
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "×" : "") + std::to_string(s[i]);
    return s.empty() ? "a scalar" : out;
}

// Takes tensors out of the map by name (with or without the "bert." prefix), checking dtype and shape.
class TensorSource {
public:
    TensorSource(SafeTensorMap& m, std::string file) : m_map(m), m_file(std::move(file))
    {
        m_prefix = (m_map.count("embeddings.word_embeddings.weight") == 0 &&
                    m_map.count("bert.embeddings.word_embeddings.weight") != 0) ? "bert." : "";
    }
    // A rows×cols tensor; `transpose` turns a PyTorch Linear weight (out×in) into in×out.
    Status matrix(const std::string& name, int rows, int cols, const char* dims, Matrix& out, bool transpose = false)
    {
        SafeTensor* t = nullptr;
        if (auto s = find(name, t); !s.ok()) return s;
        if (t->shape.size() != 2 || t->shape[0] != rows || t->shape[1] != cols)
            return invalidArgument(m_file + ": " + m_prefix + name + ": expected " + std::to_string(rows) + "×" +
                                   std::to_string(cols) + " (" + dims + "), got " + shapeText(t->shape));
        Eigen::Map<const Matrix> src(t->values.data(), rows, cols);
        if (transpose) out = src.transpose();
        else out = src;
        release(*t);
        return Status::success();
    }
    Status vector(const std::string& name, int n, const char* dims, Vector& out)
    {
        SafeTensor* t = nullptr;
        if (auto s = find(name, t); !s.ok()) return s;
        if (t->shape.size() != 1 || t->shape[0] != n)
            return invalidArgument(m_file + ": " + m_prefix + name + ": expected " + std::to_string(n) + " (" + dims +
                                   "), got " + shapeText(t->shape));
        out = Eigen::Map<const Vector>(t->values.data(), n);
        release(*t);
        return Status::success();
    }

private:
    SafeTensorMap& m_map;
    std::string m_file, m_prefix;

    Status find(const std::string& name, SafeTensor*& t)
    {
        auto it = m_map.find(m_prefix + name);
        if (it == m_map.end()) return invalidArgument(m_file + ": tensor " + m_prefix + name + " is missing");
        if (it->second.values.empty() && !it->second.shape.empty() && it->second.dtype != "F32" &&
            it->second.dtype != "F16" && it->second.dtype != "BF16")
            return makeError(StatusCode::Unsupported, m_file + ": " + m_prefix + name + ": dtype " + it->second.dtype +
                                                          " is not supported (supported: F32, F16, BF16)");
        t = &it->second;
        return Status::success();
    }
    static void release(SafeTensor& t) { std::vector<float>().swap(t.values); }
};

} // namespace

Expected<Model> loadModel(const std::string& dirIn)
{
    std::string dir = dirIn;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return makeError(StatusCode::IoError, "model directory " + dir + " does not exist (expected config.json, "
                                              "model.safetensors and tokenizer.json or vocab.txt in it)");
    Model m;
    m.name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);

    auto cfgText = readFile(dir + "/config.json", 1 << 20);
    if (!cfgText) return cfgText.status();
    auto cfg = parseModelConfig(*cfgText);
    if (!cfg) return cfg.status();
    m.config = *cfg;
    const ModelConfig& c = m.config;

    if (fileExists(dir + "/tokenizer.json")) {
        auto text = readFile(dir + "/tokenizer.json", 256u << 20);
        if (!text) return text.status();
        auto tok = Tokenizer::fromTokenizerJson(*text);
        if (!tok) return tok.status();
        m.tokenizer = std::move(*tok);
    } else if (fileExists(dir + "/vocab.txt")) {
        auto text = readFile(dir + "/vocab.txt", 64u << 20);
        if (!text) return text.status();
        auto tok = Tokenizer::fromVocabTxt(*text);
        if (!tok) return tok.status();
        m.tokenizer = std::move(*tok);
    } else {
        return makeError(StatusCode::IoError, dir + ": neither tokenizer.json nor vocab.txt is there");
    }
    if (m.tokenizer.vocabSize() > c.vocabSize)
        return invalidArgument(dir + ": the tokenizer has " + std::to_string(m.tokenizer.vocabSize()) +
                               " tokens, more than config.json's vocab_size " + std::to_string(c.vocabSize));

    const std::string stPath = dir + "/model.safetensors";
    auto tensors = readSafetensorsFile(stPath);
    if (!tensors) return tensors.status();
    TensorSource src(*tensors, stPath);
    const int M = c.hidden, F = c.intermediate;
    Status s;
#define ATTNSCOPE_TRY(expr) do { s = (expr); if (!s.ok()) return s; } while (0)
    ATTNSCOPE_TRY(src.matrix("embeddings.word_embeddings.weight", c.vocabSize, M, "vocab_size × hidden_size", m.wordEmbeddings));
    ATTNSCOPE_TRY(src.matrix("embeddings.position_embeddings.weight", c.maxPositions, M,
                             "max_position_embeddings × hidden_size", m.positionEmbeddings));
    ATTNSCOPE_TRY(src.matrix("embeddings.token_type_embeddings.weight", c.typeVocabSize, M,
                             "type_vocab_size × hidden_size", m.typeEmbeddings));
    ATTNSCOPE_TRY(src.vector("embeddings.LayerNorm.weight", M, "hidden_size", m.embLnGamma));
    ATTNSCOPE_TRY(src.vector("embeddings.LayerNorm.bias", M, "hidden_size", m.embLnBeta));
    m.layers.resize(static_cast<std::size_t>(c.layers));
    for (int l = 0; l < c.layers; ++l) {
        EncoderLayer& L = m.layers[static_cast<std::size_t>(l)];
        const std::string p = "encoder.layer." + std::to_string(l) + ".";
        const char* mm = "hidden_size × hidden_size";
        ATTNSCOPE_TRY(src.matrix(p + "attention.self.query.weight", M, M, mm, L.attention.Wq, true));
        ATTNSCOPE_TRY(src.vector(p + "attention.self.query.bias", M, "hidden_size", L.attention.bq));
        ATTNSCOPE_TRY(src.matrix(p + "attention.self.key.weight", M, M, mm, L.attention.Wk, true));
        ATTNSCOPE_TRY(src.vector(p + "attention.self.key.bias", M, "hidden_size", L.attention.bk));
        ATTNSCOPE_TRY(src.matrix(p + "attention.self.value.weight", M, M, mm, L.attention.Wv, true));
        ATTNSCOPE_TRY(src.vector(p + "attention.self.value.bias", M, "hidden_size", L.attention.bv));
        ATTNSCOPE_TRY(src.matrix(p + "attention.output.dense.weight", M, M, mm, L.attention.Wo, true));
        ATTNSCOPE_TRY(src.vector(p + "attention.output.dense.bias", M, "hidden_size", L.attention.bo));
        ATTNSCOPE_TRY(src.vector(p + "attention.output.LayerNorm.weight", M, "hidden_size", L.ln1Gamma));
        ATTNSCOPE_TRY(src.vector(p + "attention.output.LayerNorm.bias", M, "hidden_size", L.ln1Beta));
        ATTNSCOPE_TRY(src.matrix(p + "intermediate.dense.weight", F, M, "intermediate_size × hidden_size", L.W1, true));
        ATTNSCOPE_TRY(src.vector(p + "intermediate.dense.bias", F, "intermediate_size", L.b1));
        ATTNSCOPE_TRY(src.matrix(p + "output.dense.weight", M, F, "hidden_size × intermediate_size", L.W2, true));
        ATTNSCOPE_TRY(src.vector(p + "output.dense.bias", M, "hidden_size", L.b2));
        ATTNSCOPE_TRY(src.vector(p + "output.LayerNorm.weight", M, "hidden_size", L.ln2Gamma));
        ATTNSCOPE_TRY(src.vector(p + "output.LayerNorm.bias", M, "hidden_size", L.ln2Beta));
    }
#undef ATTNSCOPE_TRY
    return m;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Forward
// -----------------------------------------------------------------------------------------------------

namespace {

// Row-wise LayerNorm over the M columns (biased variance, as torch.nn.LayerNorm).
void layerNorm(Matrix& x, const Vector& gamma, const Vector& beta, float eps)
{
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        auto r = x.row(i);
        const float mean = r.mean();
        const float var = (r.array() - mean).square().mean();
        const float inv = 1.0f / std::sqrt(var + eps);
        r = ((r.array() - mean) * inv * gamma.transpose().array() + beta.transpose().array()).matrix();
    }
}

// GELU in its exact erf form (Hugging Face's "gelu" activation for BERT).
void gelu(Matrix& x)
{
    x = x.unaryExpr([](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
}

Status runLayer(Model& model, int l, ModelRun& run, Backend backend)
{
    const ModelConfig& c = model.config;
    EncoderLayer& layer = model.layers[static_cast<std::size_t>(l)];
    layer.attention.X = run.hidden[static_cast<std::size_t>(l)];
    AttentionConfig cfg;
    cfg.heads = c.heads;
    cfg.backend = backend;
    AttentionResult& res = run.attention[static_cast<std::size_t>(l)];
    if (auto s = compute(layer.attention, cfg, res); !s.ok())
        return makeError(s.code, "layer " + std::to_string(l) + ": " + s.message);

    // Head ablation as Hugging Face's head_mask: the head's weights × 0, so its context (and concat slice) is 0.
    bool anyAblated = false;
    const int D = c.hidden / c.heads;
    for (const auto& [al, ah] : run.ablated) {
        if (al != l) continue;
        anyAblated = true;
        HeadResult& h = res.heads[static_cast<std::size_t>(ah)];
        h.weights.setZero();
        h.output.setZero();
        res.concat.middleCols(ah * D, D).setZero();
    }
    if (anyAblated) res.output = (res.concat * layer.attention.Wo).rowwise() + layer.attention.bo.transpose();

    Matrix x = res.output + run.hidden[static_cast<std::size_t>(l)];
    layerNorm(x, layer.ln1Gamma, layer.ln1Beta, c.layerNormEps);
    Matrix h = (x * layer.W1).rowwise() + layer.b1.transpose();
    gelu(h);
    Matrix y = (h * layer.W2).rowwise() + layer.b2.transpose();
    y += x;
    layerNorm(y, layer.ln2Gamma, layer.ln2Beta, c.layerNormEps);
    run.hidden[static_cast<std::size_t>(l) + 1] = std::move(y);
    return Status::success();
}

void updateEmbedding(ModelRun& run)
{
    const Matrix& last = run.hidden.back();
    run.embedding = last.colwise().mean().transpose();
    const float norm = run.embedding.norm();
    if (norm > 0) run.embedding /= norm;
}

} // namespace

Expected<ModelRun> runModel(Model& model, const std::string& a, const std::optional<std::string>& b,
                            const ModelOptions& options)
{
    const ModelConfig& c = model.config;
    for (const auto& [l, h] : options.ablate) {
        if (l < 0 || l >= c.layers)
            return invalidArgument("ablate: layer " + std::to_string(l) + " is outside 0.." + std::to_string(c.layers - 1));
        if (h < 0 || h >= c.heads)
            return invalidArgument("ablate: head " + std::to_string(h) + " is outside 0.." + std::to_string(c.heads - 1));
    }
    auto enc = model.tokenizer.encode(a, b, c.maxPositions);
    if (!enc) return enc.status();
    ModelRun run;
    run.encoding = std::move(*enc);
    run.warnings = run.encoding.warnings;
    run.ablated = options.ablate;
    const int n = static_cast<int>(run.encoding.ids.size());
    for (int i = 0; i < n; ++i) {
        const int id = run.encoding.ids[static_cast<std::size_t>(i)], type = run.encoding.typeIds[static_cast<std::size_t>(i)];
        if (id < 0 || id >= c.vocabSize || type >= c.typeVocabSize)
            return invalidArgument("token " + std::to_string(i) + ": id " + std::to_string(id) + " or type " +
                                   std::to_string(type) + " is outside the model's embeddings");
    }
    Matrix x(n, c.hidden);
    for (int i = 0; i < n; ++i)
        x.row(i) = model.wordEmbeddings.row(run.encoding.ids[static_cast<std::size_t>(i)]) +
                   model.positionEmbeddings.row(i) + model.typeEmbeddings.row(run.encoding.typeIds[static_cast<std::size_t>(i)]);
    layerNorm(x, model.embLnGamma, model.embLnBeta, c.layerNormEps);
    run.hidden.assign(static_cast<std::size_t>(c.layers) + 1, Matrix());
    run.hidden[0] = std::move(x);
    run.attention.assign(static_cast<std::size_t>(c.layers), AttentionResult());
    if (auto s = recomputeFrom(model, 0, run, options.backend); !s.ok()) return s;
    return run;
}

Status recomputeFrom(Model& model, int fromLayer, ModelRun& run, Backend backend)
{
    const int L = model.config.layers;
    if (fromLayer < 0 || fromLayer >= L)
        return invalidArgument("layer " + std::to_string(fromLayer) + " is outside 0.." + std::to_string(L - 1));
    if (static_cast<int>(run.hidden.size()) != L + 1 || static_cast<int>(run.attention.size()) != L)
        return invalidArgument("recomputeFrom: the run does not come from this model (" +
                               std::to_string(run.attention.size()) + " layers, model has " + std::to_string(L) + ")");
    for (const auto& [al, ah] : run.ablated)
        if (al < 0 || al >= L || ah < 0 || ah >= model.config.heads)
            return invalidArgument("ablate: (" + std::to_string(al) + ", " + std::to_string(ah) +
                                   ") is outside the model's layers × heads");
    for (int l = fromLayer; l < L; ++l)
        if (auto s = runLayer(model, l, run, backend); !s.ok()) return s;
    updateEmbedding(run);
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Helpers
// -----------------------------------------------------------------------------------------------------

Expected<std::vector<std::pair<int, int>>> parseAblation(const std::string& text, int layers, int heads)
{
    std::vector<std::pair<int, int>> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const auto colon = item.find(':');
        auto bad = [&] {
            return invalidArgument("--ablate: \"" + item + "\" is not LAYER:HEAD (e.g. 0:3, layers 0.." +
                                   std::to_string(layers - 1) + ", heads 0.." + std::to_string(heads - 1) + ")");
        };
        if (colon == std::string::npos || colon == 0 || colon + 1 >= item.size() || item.size() > 16) return bad();
        const std::string ls = item.substr(0, colon), hs = item.substr(colon + 1);
        if (ls.find_first_not_of("0123456789") != std::string::npos || hs.find_first_not_of("0123456789") != std::string::npos)
            return bad();
        const int l = std::stoi(ls), h = std::stoi(hs);
        if (l >= layers) return invalidArgument("--ablate: layer " + ls + " is outside 0.." + std::to_string(layers - 1));
        if (h >= heads) return invalidArgument("--ablate: head " + hs + " is outside 0.." + std::to_string(heads - 1));
        out.emplace_back(l, h);
    }
    if (out.empty()) return invalidArgument("--ablate: expected LAYER:HEAD[,LAYER:HEAD…], got \"" + text + "\"");
    return out;
}

float cosineSimilarity(const Vector& a, const Vector& b)
{
    if (a.size() != b.size()) return 0.0f;
    const float na = a.norm(), nb = b.norm();
    return (na > 0 && nb > 0) ? a.dot(b) / (na * nb) : 0.0f;
}

} // namespace attn
