// Loading and running a BERT-family encoder. See attnscope/model.h for the contract and docs/model.md.
//
// [SECTION] config.json
// [SECTION] Loading
// [SECTION] Forward
// [SECTION] Helpers
#include "attnscope/model.h"

#include "attnscope/attention.h"
#include "attnscope/decoder.h"  // supportedDecoderArchitectures
#include "attnscope/preset_io.h"  // readFile
#include "attnscope/safetensors.h"
#include "teams.h"


#include <nlohmann/json.hpp>
#include <unsupported/Eigen/SpecialFunctions>  // Eigen's vectorised erf (GELU)

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <sys/stat.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn {
using json = nlohmann::json;

// -----------------------------------------------------------------------------------------------------
// [SECTION] config.json
// -----------------------------------------------------------------------------------------------------

Expected<ModelConfig> parseModelConfig(const std::string& text)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, 32, "config.json"));  // a config is flat: 32 is ample
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
                                                      "\" is not supported (supported: bert; decoders: " + supportedDecoderArchitectures() + ")");
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
                                   std::to_string(f.lo) + ".." + std::to_string(f.hi) + ", got " + clipForMessage(it->dump()));
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
        ATTNSCOPE_RETURN_IF_ERROR(find(name, t));
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
        ATTNSCOPE_RETURN_IF_ERROR(find(name, t));
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
    const bool exists = stat(dir.c_str(), &st) == 0;
    if (exists && !S_ISDIR(st.st_mode))
        return makeError(StatusCode::IoError, dir + " is a file, not a model: expected a .gguf file (a decoder) or a "
                                              "model directory (config.json, model.safetensors and tokenizer.json or "
                                              "vocab.txt in it)");
    if (!exists)
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
    ATTNSCOPE_RETURN_IF_ERROR(src.matrix("embeddings.word_embeddings.weight", c.vocabSize, M, "vocab_size × hidden_size", m.wordEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(src.matrix("embeddings.position_embeddings.weight", c.maxPositions, M,
                             "max_position_embeddings × hidden_size", m.positionEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(src.matrix("embeddings.token_type_embeddings.weight", c.typeVocabSize, M,
                             "type_vocab_size × hidden_size", m.typeEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(src.vector("embeddings.LayerNorm.weight", M, "hidden_size", m.embLnGamma));
    ATTNSCOPE_RETURN_IF_ERROR(src.vector("embeddings.LayerNorm.bias", M, "hidden_size", m.embLnBeta));
    m.layers.resize(static_cast<std::size_t>(c.layers));
    for (int l = 0; l < c.layers; ++l) {
        EncoderLayer& L = m.layers[static_cast<std::size_t>(l)];
        const std::string p = "encoder.layer." + std::to_string(l) + ".";
        const char* mm = "hidden_size × hidden_size";
        ATTNSCOPE_RETURN_IF_ERROR(src.matrix(p + "attention.self.query.weight", M, M, mm, L.attention.Wq, true));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "attention.self.query.bias", M, "hidden_size", L.attention.bq));
        ATTNSCOPE_RETURN_IF_ERROR(src.matrix(p + "attention.self.key.weight", M, M, mm, L.attention.Wk, true));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "attention.self.key.bias", M, "hidden_size", L.attention.bk));
        ATTNSCOPE_RETURN_IF_ERROR(src.matrix(p + "attention.self.value.weight", M, M, mm, L.attention.Wv, true));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "attention.self.value.bias", M, "hidden_size", L.attention.bv));
        ATTNSCOPE_RETURN_IF_ERROR(src.matrix(p + "attention.output.dense.weight", M, M, mm, L.attention.Wo, true));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "attention.output.dense.bias", M, "hidden_size", L.attention.bo));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "attention.output.LayerNorm.weight", M, "hidden_size", L.ln1Gamma));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "attention.output.LayerNorm.bias", M, "hidden_size", L.ln1Beta));
        ATTNSCOPE_RETURN_IF_ERROR(src.matrix(p + "intermediate.dense.weight", F, M, "intermediate_size × hidden_size", L.W1, true));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "intermediate.dense.bias", F, "intermediate_size", L.b1));
        ATTNSCOPE_RETURN_IF_ERROR(src.matrix(p + "output.dense.weight", M, F, "hidden_size × intermediate_size", L.W2, true));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "output.dense.bias", M, "hidden_size", L.b2));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "output.LayerNorm.weight", M, "hidden_size", L.ln2Gamma));
        ATTNSCOPE_RETURN_IF_ERROR(src.vector(p + "output.LayerNorm.bias", M, "hidden_size", L.ln2Beta));
    }
    return m;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Forward
// -----------------------------------------------------------------------------------------------------

namespace {

// Row-wise LayerNorm of rows [r0, r1) over the M columns (biased variance, as torch.nn.LayerNorm). Two passes
// over each row (mean, then centred variance: the one-pass E[x²]−E[x]² form loses digits on BERT's large
// hidden values), the normalisation in a third; all three are Eigen reductions/expressions, vectorised.
void layerNormRows(Matrix& x, Eigen::Index r0, Eigen::Index r1, const Vector& gamma, const Vector& beta, float eps)
{
    const float invM = 1.0f / static_cast<float>(x.cols());
    for (Eigen::Index i = r0; i < r1; ++i) {
        auto r = x.row(i).array();
        const float mean = r.sum() * invM;
        const float var = (r - mean).square().sum() * invM;
        const float inv = 1.0f / std::sqrt(var + eps);
        r = (r - mean) * (inv * gamma.transpose().array()) + beta.transpose().array();
    }
}

// Column blocks of the feed-forward products, the unit of work of the layer's thread team. Each task packs
// the left operand again, so blocks are wide; 256 and 96 give 6 and 4 tasks at MiniLM's F = 1536 and
// M = 384 (more tasks than 2 threads: under load a descheduled thread's block is taken by the other).
constexpr Eigen::Index kFfnInCols = 256;
constexpr Eigen::Index kFfnOutCols = 96;
// Rows per task of the row-wise passes (residual + LayerNorm).
constexpr Eigen::Index kNormRows = 32;

// Below about 4M multiply-adds a thread team costs more than it saves (its start and its spinning threads;
// the same threshold as the attention core's, see SmallProblemOneThread in core/src/cpu/attention_eigen.cpp).
bool worthTeam(Eigen::Index n, Eigen::Index M, Eigen::Index F)
{
    return static_cast<std::size_t>(n) * static_cast<std::size_t>(M) * static_cast<std::size_t>(F) >= (std::size_t(1) << 22);
}

// Everything after the attention of layer l, row-local except the two products:
//   x = LayerNorm1(attention + hidden[l]);  h = GELU(x·W1 + b1);  hidden[l+1] = LayerNorm2(h·W2 + b2 + x).
// One thread team for the whole layer (never nested in the attention core's teams, which have ended), its
// phases split into column blocks (products) and row blocks (norms) under dynamic scheduling; Eigen's
// products inside the team run on one thread each. Buffers come from `run` and are reused between calls.
void feedForward(const EncoderLayer& layer, const ModelConfig& c, const Matrix& attnOut, const Matrix& input,
                 ModelRun& run, Matrix& out)
{
    const Eigen::Index n = input.rows(), M = c.hidden, F = c.intermediate;
    Matrix& x = run.scratch.normed;
    Matrix& h = run.scratch.ffn;
    x.resize(n, M);
    h.resize(n, F);
    out.resize(n, M);
    const float eps = c.layerNormEps;
    const Eigen::Index rowTasks = (n + kNormRows - 1) / kNormRows;
    const Eigen::Index inTasks = (F + kFfnInCols - 1) / kFfnInCols, outTasks = (M + kFfnOutCols - 1) / kFfnOutCols;
#pragma omp parallel if (worthTeam(n, M, F))
    {
#pragma omp for schedule(dynamic, 1)
        for (Eigen::Index t = 0; t < rowTasks; ++t) {
            const Eigen::Index r0 = t * kNormRows, rows = std::min(kNormRows, n - r0);
            x.middleRows(r0, rows) = attnOut.middleRows(r0, rows) + input.middleRows(r0, rows);
            layerNormRows(x, r0, r0 + rows, layer.ln1Gamma, layer.ln1Beta, eps);
        }
#pragma omp for schedule(dynamic, 1)
        for (Eigen::Index t = 0; t < inTasks; ++t) {
            const Eigen::Index c0 = t * kFfnInCols, cols = std::min(kFfnInCols, F - c0);
            auto hb = h.middleCols(c0, cols);
            hb.noalias() = x * layer.W1.middleCols(c0, cols);
            hb.rowwise() += layer.b1.segment(c0, cols).transpose();
            // GELU in its exact erf form (Hugging Face's "gelu" for BERT); Eigen's erf is a rational
            // approximation accurate to a couple of ulp, vectorised (std::erf is not).
            hb.array() = 0.5f * hb.array() * (1.0f + (hb.array() * 0.70710678118654752f).erf());
        }
#pragma omp for schedule(dynamic, 1)
        for (Eigen::Index t = 0; t < outTasks; ++t) {
            const Eigen::Index c0 = t * kFfnOutCols, cols = std::min(kFfnOutCols, M - c0);
            auto ob = out.middleCols(c0, cols);
            ob.noalias() = h * layer.W2.middleCols(c0, cols);
            ob.rowwise() += layer.b2.segment(c0, cols).transpose();
            ob += x.middleCols(c0, cols);
        }
#pragma omp for schedule(dynamic, 1)
        for (Eigen::Index t = 0; t < rowTasks; ++t) {
            const Eigen::Index r0 = t * kNormRows, rows = std::min(kNormRows, n - r0);
            layerNormRows(out, r0, r0 + rows, layer.ln2Gamma, layer.ln2Beta, eps);
        }
    }
}


Status runLayer(Model& model, int l, ModelRun& run, Backend backend)
{
    const ModelConfig& c = model.config;
    EncoderLayer& layer = model.layers[static_cast<std::size_t>(l)];
    const Matrix& input = run.hidden[static_cast<std::size_t>(l)];
    layer.attention.X = input;  // same size as last time: Eigen reuses the buffer
    AttentionConfig cfg;
    cfg.heads = c.heads;
    cfg.backend = backend;
    // Every layer's input changes whenever the one below it is recomputed, so the core's incremental path
    // would find X changed in (nearly) every row and recompute all, after comparing and keeping a snapshot
    // of the input (X and the four M×M weights: 2.4 MB a layer for MiniLM). Always a full compute instead.
    cfg.incremental = false;
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
    if (anyAblated) {
        res.output.noalias() = res.concat * layer.attention.Wo;
        res.output.rowwise() += layer.attention.bo.transpose();
    }
    feedForward(layer, c, res.output, input, run, run.hidden[static_cast<std::size_t>(l) + 1]);
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

Status runModel(Model& model, const std::string& a, const std::optional<std::string>& b, const ModelOptions& options,
                ModelRun& run)
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
    const int n = static_cast<int>(enc->ids.size());
    for (int i = 0; i < n; ++i) {
        const int id = enc->ids[static_cast<std::size_t>(i)], type = enc->typeIds[static_cast<std::size_t>(i)];
        if (id < 0 || id >= c.vocabSize || type >= c.typeVocabSize)
            return invalidArgument("token " + std::to_string(i) + ": id " + std::to_string(id) + " or type " +
                                   std::to_string(type) + " is outside the model's embeddings");
    }
    run.encoding = std::move(*enc);
    run.warnings = run.encoding.warnings;
    run.ablated = options.ablate;
    // Buffers of a previous run of the same length are reused (Eigen's resize keeps them, compute() too).
    run.hidden.resize(static_cast<std::size_t>(c.layers) + 1);
    run.attention.resize(static_cast<std::size_t>(c.layers));
    Matrix& x = run.hidden[0];
    x.resize(n, c.hidden);
    for (int i = 0; i < n; ++i)
        x.row(i) = model.wordEmbeddings.row(run.encoding.ids[static_cast<std::size_t>(i)]) +
                   model.positionEmbeddings.row(i) + model.typeEmbeddings.row(run.encoding.typeIds[static_cast<std::size_t>(i)]);
    layerNormRows(x, 0, n, model.embLnGamma, model.embLnBeta, c.layerNormEps);
    return recomputeFrom(model, 0, run, options.backend);
}

Expected<ModelRun> runModel(Model& model, const std::string& a, const std::optional<std::string>& b,
                            const ModelOptions& options)
{
    ModelRun run;
    ATTNSCOPE_RETURN_IF_ERROR(runModel(model, a, b, options, run));
    return run;
}

Status recomputeFrom(Model& model, int fromLayer, ModelRun& run, Backend backend)
{
    return recomputeFrom(model, fromLayer, run, PinnedInput{}, backend);
}

Status recomputeFrom(Model& model, int fromLayer, ModelRun& run, const PinnedInput& pin, Backend backend)
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
    if (pin.layer >= L || pin.layer < -1)
        return invalidArgument("pinned input: layer " + std::to_string(pin.layer) + " is outside 0.." + std::to_string(L - 1));
    if (pin.layer >= 0) {
        const Eigen::Index n = run.hidden[0].rows(), M = model.config.hidden;
        if (pin.X.rows() != n || pin.X.cols() != M)
            return invalidArgument("pinned input of layer " + std::to_string(pin.layer) + ": expected " + std::to_string(n) +
                                   "×" + std::to_string(M) + " (tokens × hidden_size), got " + std::to_string(pin.X.rows()) +
                                   "×" + std::to_string(pin.X.cols()));
    }
    const TeamsForTheLoad teams;
    for (int l = fromLayer; l < L; ++l) {
        if (l == pin.layer) run.hidden[static_cast<std::size_t>(l)] = pin.X;
        ATTNSCOPE_RETURN_IF_ERROR(runLayer(model, l, run, backend));
    }
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
