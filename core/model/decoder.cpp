// Decoder language models: loading (format × family), the run loop, predictions, appending tokens.
// See attnscope/decoder.h for the contract and docs/model.md ("Decoder models").
//
// [SECTION] Loading
// [SECTION] Shared numerics
// [SECTION] Forward
// [SECTION] Appending tokens
// [SECTION] Predictions
#include "attnscope/decoder.h"

#include "attnscope/attention.h"
#include "attnscope/colormap.h"  // poolMax
#include "attnscope/gguf.h"
#include "attnscope/preset_io.h"  // readFile, checkJsonDepth, clipForMessage
#include "attnscope/weight_formats.h"
#include "decoder_device_run.h"
#include "decoder_family.h"
#include "decoder_tokenizer.h"
#include "lm_head.h"
#include "teams.h"
#include "weight_source.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <sys/stat.h>

namespace attn {
using json = nlohmann::json;
using namespace detail;

const char* toString(DecoderFamily f)
{
    switch (f) {
    case DecoderFamily::Llama: return "llama";
    case DecoderFamily::Gpt2: return "gpt2";
    case DecoderFamily::Gemma: return "gemma";
    case DecoderFamily::GptNeoX: return "gptneox";
    case DecoderFamily::Phi3: return "phi3";
    case DecoderFamily::Olmo2: return "olmo2";
    }
    return "?";
}

const char* supportedDecoderArchitectures() { return "gemma2, gemma3, gpt2, gptneox, llama, mistral, olmo2, phi3, qwen2, qwen3"; }

// -----------------------------------------------------------------------------------------------------
// [SECTION] Loading
// -----------------------------------------------------------------------------------------------------

namespace {

bool isDir(const std::string& p)
{
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string& p)
{
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A GGUF file is known by its first four bytes, "GGUF", whatever its name: Hugging Face's cache keeps files under
// their hashes, and a download may lose its extension.
bool hasGgufMagic(const std::string& p)
{
    std::FILE* f = std::fopen(p.c_str(), "rb");
    if (!f) return false;
    char magic[4] = {};
    const bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
    std::fclose(f);
    return ok;
}

std::string baseName(std::string p)
{
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

// The model_type of a directory's config.json ("" when it has none or is not JSON).
std::string modelTypeOf(const std::string& dir)
{
    auto text = readFile(dir + "/config.json", 1 << 20);
    if (!text || !checkJsonDepth(*text, 32, "config.json").ok()) return "";
    const json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return "";
    auto it = j.find("model_type");
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The family file that reads an architecture (GGUF general.architecture or config.json model_type).
enum class FamilyFile { None, Llama, Gpt2, Gemma, GptNeoX, Phi3, Olmo2 };
FamilyFile familyOf(const std::string& a)
{
    if (a == "llama" || a == "mistral" || a == "qwen2" || a == "qwen3") return FamilyFile::Llama;
    if (a == "gpt2") return FamilyFile::Gpt2;
    if (a == "gemma2" || a == "gemma3" || a == "gemma3_text") return FamilyFile::Gemma;
    if (a == "gptneox" || a == "gpt_neox") return FamilyFile::GptNeoX;
    if (a == "phi3") return FamilyFile::Phi3;
    if (a == "olmo2") return FamilyFile::Olmo2;
    return FamilyFile::None;
}

bool isDecoderArchitecture(const std::string& a) { return familyOf(a) != FamilyFile::None; }

// What a known architecture that this build cannot run lacks, in one line ("" for an unknown one).
std::string whatItLacks(const std::string& a)
{
    if (a == "gemma4") return "Gemma 4 (per-layer embeddings, shared key/value layers, heads of two widths) is not supported";
    if (a == "qwen35" || a == "qwen3_5" || a == "qwen3next" || a == "qwen3_next")
        return "Qwen3.5 / Qwen3-Next (linear-attention Gated DeltaNet layers) is not supported";
    if (a == "qwen3moe" || a == "qwen3_moe" || a == "qwen2moe" || a == "qwen2_moe" || a == "mixtral" || a == "olmoe" ||
        a == "gpt-oss" || a == "gpt_oss" || a == "deepseek2" || a == "llama4" || a == "phimoe")
        return "mixture-of-experts feed-forwards are not supported";
    if (a == "olmo3") return "OLMo 3's sliding-window layers are not supported";
    if (a == "gemma" ) return "Gemma 1 is not supported (Gemma 2 and 3 are)";
    return "";
}

Status unsupportedArchitecture(const std::string& where, const char* key, const std::string& a)
{
    const std::string lacks = whatItLacks(a);
    return makeError(StatusCode::Unsupported, where + ": " + key + " \"" + clipForMessage(a) + "\" is not supported" +
                                                  (lacks.empty() ? "" : ": " + lacks) + " (supported: " +
                                                  supportedDecoderArchitectures() + ")");
}

// The family's configuration from GGUF metadata.
Status familyConfigFromGguf(const GgufFile& f, const std::string& path, DecoderConfig& c)
{
    switch (familyOf(c.architecture)) {
    case FamilyFile::Llama: return llamaConfigFromGguf(f, c.architecture, c);
    case FamilyFile::Gpt2: return gpt2ConfigFromGguf(f, c);
    case FamilyFile::Gemma: return gemmaConfigFromGguf(f, c.architecture, c);
    case FamilyFile::GptNeoX: return neoxConfigFromGguf(f, c.architecture, c);
    case FamilyFile::Phi3: return phi3ConfigFromGguf(f, c.architecture, c);
    case FamilyFile::Olmo2: return olmo2ConfigFromGguf(f, c.architecture, c);
    case FamilyFile::None: break;
    }
    return unsupportedArchitecture(path, "general.architecture", c.architecture);
}

// Every tensor of the model, by its family's names.
Status familyTensors(WeightSource& w, bool gguf, DecoderModel& m)
{
    const DecoderConfig& c = m.config;
    switch (familyOf(c.architecture)) {
    case FamilyFile::Gpt2: return gpt2Tensors(w, gguf, m);
    case FamilyFile::Llama: return familyTensors(w, gguf, llamaLayout(c, gguf), m);
    case FamilyFile::Gemma: return familyTensors(w, gguf, gemmaLayout(c, gguf), m);
    case FamilyFile::GptNeoX: return familyTensors(w, gguf, neoxLayout(c, gguf), m);
    case FamilyFile::Phi3: return familyTensors(w, gguf, phi3Layout(c, gguf), m);
    case FamilyFile::Olmo2: return familyTensors(w, gguf, olmo2Layout(c, gguf), m);
    case FamilyFile::None: break;
    }
    return unsupportedArchitecture(m.path, "architecture", c.architecture);
}

Status checkModel(const DecoderModel& m)
{
    if (m.tokenizer.vocabSize() > m.config.vocab)
        return invalidArgument(m.path + ": the tokenizer has " + std::to_string(m.tokenizer.vocabSize()) +
                               " tokens, more than the model's vocabulary of " + std::to_string(m.config.vocab));
    return Status::success();
}

Expected<DecoderModel> loadGguf(const std::string& path, const DecoderLoadOptions& options)
{
    auto opened = GgufFile::open(path);
    if (!opened) return opened.status();
    // Shared: the model's weight views keep the mapping alive (WeightMatrix::quantized).
    const auto file = std::make_shared<const GgufFile>(std::move(*opened));
    DecoderModel m;
    m.path = path;
    m.name = baseName(path);
    m.format = "gguf";
    auto arch = file->getString("general.architecture");
    if (!arch) return arch.status();
    m.config.architecture = *arch;
    ATTNSCOPE_RETURN_IF_ERROR(familyConfigFromGguf(*file, path, m.config));
    // Tokenizer: by tokenizer.ggml.model, "gpt2" byte-level BPE or "llama" SentencePiece BPE (decoder_tokenizer.cpp).
    auto tok = tokenizerFromGguf(*file, path);
    if (!tok) return tok.status();
    m.tokenizer = std::move(*tok);
    if (file->has("tokenizer.chat_template")) {
        auto t = file->getString("tokenizer.chat_template");
        if (!t) return t.status();
        m.chatTemplate = *t;
    }

    GgufSource src(file, options.dequantize);
    ATTNSCOPE_RETURN_IF_ERROR(familyTensors(src, true, m));
    ATTNSCOPE_RETURN_IF_ERROR(checkModel(m));
    return m;
}

Expected<DecoderModel> loadDirectory(const std::string& dirIn)
{
    std::string dir = dirIn;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    DecoderModel m;
    m.path = dir;
    m.name = baseName(dir);
    m.format = "safetensors";
    const std::string cfgPath = dir + "/config.json";
    auto cfgText = readFile(cfgPath, 1 << 20);
    if (!cfgText) return cfgText.status();
    auto cfg = parseDecoderConfig(*cfgText, cfgPath);
    if (!cfg) return cfg.status();
    m.config = std::move(*cfg);
    const std::string tokPath = dir + "/tokenizer.json";
    if (!isFile(tokPath)) return makeError(StatusCode::IoError, dir + ": tokenizer.json is not there");
    auto tokText = readFile(tokPath, 256u << 20);
    if (!tokText) return tokText.status();
    auto tok = tokenizerFromJson(*tokText, tokPath);
    if (!tok) return tok.status();
    m.tokenizer = std::move(*tok);
    {
        // BOS/EOS ids from config.json (tokenizer.json alone names BOS only through its post-processor, and EOS
        // not at all); an id outside the vocabulary is ignored, the tokenizer's own kept.
        const json cj = json::parse(*cfgText, nullptr, false);
        auto idFrom = [&](const char* key, int fallback) {
            if (!cj.is_object() || !cj.contains(key)) return fallback;
            json v = cj[key];
            if (v.is_array() && !v.empty()) v = v[0];
            if (!v.is_number_integer()) return fallback;
            const auto id = v.get<long long>();
            return id >= 0 && id < m.tokenizer.vocabSize() ? int(id) : fallback;
        };
        (void)m.tokenizer.setBosEos(idFrom("bos_token_id", m.tokenizer.bos()), idFrom("eos_token_id", m.tokenizer.eos()));
    }
    // The chat template lives in tokenizer_config.json (or a chat_template.jinja beside it, in newer exports).
    if (isFile(dir + "/tokenizer_config.json")) {
        auto t = readFile(dir + "/tokenizer_config.json", 64u << 20);
        if (t && checkJsonDepth(*t, 64, "tokenizer_config.json").ok()) {
            const json j = json::parse(*t, nullptr, false);
            if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
                m.chatTemplate = j["chat_template"].get<std::string>();
        }
    }
    if (m.chatTemplate.empty() && isFile(dir + "/chat_template.jinja")) {
        auto t = readFile(dir + "/chat_template.jinja", 1 << 20);
        if (t) m.chatTemplate = *t;
    }
    auto src = SafetensorsSource::open(dir);
    if (!src) return src.status();
    ATTNSCOPE_RETURN_IF_ERROR(familyTensors(**src, false, m));
    ATTNSCOPE_RETURN_IF_ERROR(checkModel(m));
    return m;
}

} // namespace

Status detail::assembleDecoder(WeightSource& w, DecoderModel& m)
{
    ATTNSCOPE_RETURN_IF_ERROR(attn::familyTensors(w, false, m));
    return attn::checkModel(m);
}

namespace {

// A layer's weight matrices (those a family does not use are empty).
std::array<const WeightMatrix*, 9> layerMatrices(const DecoderLayer& L)
{
    return {&L.Wq, &L.Wk, &L.Wv, &L.Wo, &L.Wgate, &L.Wup, &L.Wdown, &L.Wfc, &L.Wproj};
}

} // namespace

std::size_t DecoderModel::denseWeightBytes() const
{
    auto v = [](const auto& m) { return static_cast<std::size_t>(m.size()) * sizeof(float); };
    std::size_t b = tokenEmbeddings.denseBytes() + lmHead.denseBytes() + v(positionEmbeddings) + v(finalNormGamma) +
                    v(finalNormBeta);
    for (const DecoderLayer& L : layers) {
        b += v(L.attnNormGamma) + v(L.attnNormBeta) + v(L.ffnNormGamma) + v(L.ffnNormBeta);
        b += v(L.bq) + v(L.bk) + v(L.bv) + v(L.bo) + v(L.bfc) + v(L.bproj);
        for (const WeightMatrix* w : layerMatrices(L)) b += w->denseBytes();
    }
    return b;
}

std::size_t DecoderModel::streamedWeightBytes() const
{
    std::size_t b = unembedding().streamedBytes() + static_cast<std::size_t>(config.hidden) * sizeof(float);
    for (const DecoderLayer& L : layers)
        for (const WeightMatrix* w : layerMatrices(L)) b += w->streamedBytes();
    return b;
}

std::vector<WeightFormat> weightFormats(const DecoderModel& model)
{
    std::vector<WeightFormat> formats;
    auto add = [&](const WeightMatrix& w) {
        if (w.empty()) return;
        auto it = std::find_if(formats.begin(), formats.end(), [&](const WeightFormat& f) { return f.type == w.type(); });
        if (it == formats.end()) it = formats.insert(formats.end(), WeightFormat{w.type(), 0, 0, 0, 0});
        it->matrices += 1;
        it->weights += std::int64_t(w.inputs()) * std::int64_t(w.outputs());
        it->bytes += w.streamedBytes();
    };
    add(model.tokenEmbeddings);
    add(model.lmHead);  // empty when tied: the embedding is counted once
    for (const DecoderLayer& L : model.layers)
        for (const WeightMatrix* w : layerMatrices(L)) add(*w);
    std::sort(formats.begin(), formats.end(), [](const WeightFormat& a, const WeightFormat& b) {
        return a.weights != b.weights ? a.weights > b.weights : a.type < b.type;
    });
    std::int64_t all = 0;
    for (const WeightFormat& f : formats) all += f.weights;
    for (WeightFormat& f : formats) f.share = double(f.weights) / double(all);
    return formats;
}

double bitsPerWeight(const std::vector<WeightFormat>& formats)
{
    WeightFormat all;
    for (const WeightFormat& f : formats) {
        all.weights += f.weights;
        all.bytes += f.bytes;
    }
    return all.bitsPerWeight();
}

Expected<DecoderConfig> parseDecoderConfig(const std::string& text, const std::string& file)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, 32, file));
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return makeError(StatusCode::ParseError, file + ": not a JSON object");
    DecoderConfig c;
    auto it = j.find("model_type");
    c.architecture = it != j.end() && it->is_string() ? it->get<std::string>() : "";
    const JsonConfig jc{j, file};
    switch (familyOf(c.architecture)) {
    case FamilyFile::Gpt2: ATTNSCOPE_RETURN_IF_ERROR(gpt2ConfigFromJson(text, file, c)); break;
    case FamilyFile::Llama: ATTNSCOPE_RETURN_IF_ERROR(llamaConfigFromJson(jc, c)); break;
    case FamilyFile::Gemma: ATTNSCOPE_RETURN_IF_ERROR(gemmaConfigFromJson(jc, c)); break;
    case FamilyFile::GptNeoX: ATTNSCOPE_RETURN_IF_ERROR(neoxConfigFromJson(jc, c)); break;
    case FamilyFile::Phi3: ATTNSCOPE_RETURN_IF_ERROR(phi3ConfigFromJson(jc, c)); break;
    case FamilyFile::Olmo2: ATTNSCOPE_RETURN_IF_ERROR(olmo2ConfigFromJson(jc, c)); break;
    case FamilyFile::None: {
        const std::string lacks = whatItLacks(c.architecture);
        return makeError(StatusCode::Unsupported, file + ": model_type \"" + clipForMessage(c.architecture) +
                                                      "\" is not a supported decoder" + (lacks.empty() ? "" : ": " + lacks) +
                                                      " (supported: " + supportedDecoderArchitectures() +
                                                      "; and bert as an encoder)");
    }
    }
    return c;
}

bool isDecoderModelPath(const std::string& path)
{
    if (isFile(path)) return endsWith(path, ".gguf") || hasGgufMagic(path);
    return isDir(path) && isDecoderArchitecture(modelTypeOf(path));
}

Expected<DecoderModel> loadDecoder(const std::string& path, const DecoderLoadOptions& options)
{
    if (isDir(path)) return loadDirectory(path);
    if (isFile(path)) {
        if (!endsWith(path, ".gguf") && !hasGgufMagic(path))
            return makeError(StatusCode::Unsupported, path + ": not a GGUF file (it neither ends in .gguf nor starts "
                                                             "with \"GGUF\") nor a Hugging Face model directory");
        return loadGguf(path, options);
    }
    return makeError(StatusCode::IoError, path + " does not exist (expected a .gguf file or a Hugging Face model directory)");
}

Expected<Encoding> encodeForDecoder(const DecoderModel& model, const std::string& text, bool chat)
{
    if (!chat) return model.tokenizer.encode(text, true);
    if (model.chatTemplate.empty())
        return makeError(StatusCode::Unsupported, model.name + " has no chat template: run without --chat");
    const int bos = model.tokenizer.bos();
    auto wrapped = applyChatTemplate(model.chatTemplate, text, bos >= 0 ? model.tokenizer.tokenText(bos) : std::string());
    if (!wrapped) return wrapped.status();
    // The template writes the special tokens itself (e.g. <|im_start|>), matched whole in the text.
    return model.tokenizer.encode(*wrapped, false);
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Shared numerics
// -----------------------------------------------------------------------------------------------------

namespace detail {


void product(const Matrix& a, const Matrix& b, Matrix& out)
{
    out.resize(a.rows(), b.cols());
    const Eigen::Index width = taskCols(b.cols()), tasks = (b.cols() + width - 1) / width;
    forTasks(tasks, worthTeam(a.rows(), a.cols(), b.cols()), [&](Eigen::Index t) {
        const Eigen::Index c0 = t * width, cols = std::min(width, b.cols() - c0);
        out.middleCols(c0, cols).noalias() = a * b.middleCols(c0, cols);
    });
}

void productTransposed(const Matrix& a, const Matrix& bt, Matrix& out)
{
    out.resize(a.rows(), bt.rows());
    const Eigen::Index width = taskCols(bt.rows()), tasks = (bt.rows() + width - 1) / width;
    // A few rows (the last position's logits after a token is appended): each as bt · rowᵀ, a matrix-vector
    // product over bt's contiguous rows. Eigen's row-vector · btᵀ took twice as long for the same bytes (the
    // 113 MB unembedding of SmolLM2 streamed at 14 GB/s instead of 30 in isolation).
    constexpr Eigen::Index kVectorRows = 4;
    forTasks(tasks, worthTeam(a.rows(), a.cols(), bt.rows()), [&](Eigen::Index t) {
        const Eigen::Index r0 = t * width, rows = std::min(width, bt.rows() - r0);
        if (a.rows() <= kVectorRows) {
            for (Eigen::Index i = 0; i < a.rows(); ++i)
                out.row(i).segment(r0, rows).noalias() = (bt.middleRows(r0, rows) * a.row(i).transpose()).transpose();
        } else {
            out.middleCols(r0, rows).noalias() = a * bt.middleRows(r0, rows).transpose();
        }
    });
}

void rmsNormRows(const Matrix& x, const Vector& gamma, float eps, Matrix& out)
{
    out.resize(x.rows(), x.cols());
    const float invM = 1.0f / static_cast<float>(x.cols());
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        const float ms = x.row(i).squaredNorm() * invM;
        out.row(i) = x.row(i).cwiseProduct(gamma.transpose()) * (1.0f / std::sqrt(ms + eps));
    }
}

void layerNormRows(const Matrix& x, const Vector& gamma, const Vector& beta, float eps, Matrix& out)
{
    out.resize(x.rows(), x.cols());
    const float invM = 1.0f / static_cast<float>(x.cols());
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        auto r = x.row(i).array();
        const float mean = r.sum() * invM;
        const float var = (r - mean).square().sum() * invM;
        out.row(i).array() = (r - mean) * (gamma.transpose().array() / std::sqrt(var + eps)) + beta.transpose().array();
    }
}

AttentionConfig layerConfig(const DecoderConfig& c, int /*layer*/, Backend backend)
{
    AttentionConfig cfg;
    cfg.mode = Mode::Direct;
    cfg.heads = c.heads;
    cfg.kvHeads = c.kvHeads;
    // The score soft-cap (Gemma 2) runs on the CPU only: a soft-capped layer's attention stays there.
    cfg.backend = c.attnSoftcap > 0 && backend == Backend::Cuda ? Backend::Cpu : backend;
    if (c.attnScale > 0) cfg.scale = c.attnScale;
    cfg.softcap = c.attnSoftcap;
    cfg.incremental = false;  // every input changes when a layer below is recomputed
    return cfg;
}

Eigen::Index firstKeyInWindow(const DecoderConfig& c, int layer, Eigen::Index pos)
{
    const int w = c.windowOf(layer);
    return w > 0 ? std::max<Eigen::Index>(0, pos - w + 1) : 0;
}

void slidingWindowMask(const DecoderConfig& c, int layer, int queries, int pos0, int keys, MaskSpec& mask)
{
    mask.custom.resize(0, 0);
    const int w = c.windowOf(layer);
    if (w <= 0 || pos0 + queries <= w) return;
    mask.custom = MaskMatrix::Zero(queries, keys);
    for (int i = 0; i < queries; ++i)
        mask.custom.row(i).head(std::min<Eigen::Index>(keys, firstKeyInWindow(c, layer, pos0 + i))).setOnes();
}

} // namespace detail

// -----------------------------------------------------------------------------------------------------
// [SECTION] Forward
// -----------------------------------------------------------------------------------------------------

namespace {

Status checkAblation(const DecoderConfig& c, const std::vector<std::pair<int, int>>& ablate)
{
    for (const auto& [l, h] : ablate) {
        if (l < 0 || l >= c.layers)
            return invalidArgument("ablate: layer " + std::to_string(l) + " is outside 0.." + std::to_string(c.layers - 1));
        if (h < 0 || h >= c.heads)
            return invalidArgument("ablate: head " + std::to_string(h) + " is outside 0.." + std::to_string(c.heads - 1));
    }
    return Status::success();
}

// W^O: the concat of the heads' contexts times W^O (+ b^O) into res.output, after the ablated heads' contexts are
// zeroed (as a hook on the output projection's input would). The core is not given W^O, so that this product runs
// once, on the team, with ablation or without.
void projectOut(const DecoderModel& m, int l, const std::vector<std::pair<int, int>>& ablated, AttentionResult& res)
{
    const DecoderLayer& L = m.layers[static_cast<std::size_t>(l)];
    const int D = m.config.headDim;
    for (const auto& [al, ah] : ablated)
        if (al == l) res.concat.middleCols(ah * D, D).setZero();
    product(res.concat, L.Wo, res.output);
    if (L.bo.size() > 0) res.output.rowwise() += L.bo.transpose();
}

LazyAttentionSpec lazySpec(const DecoderConfig& c, int layer)
{
    return LazyAttentionSpec{c.heads, c.kvHeads, c.scoreScale(), true, c.windowOf(layer), c.attnSoftcap};
}

// Every layer's spec (the lazy maps' per-layer window).
std::vector<LazyAttentionSpec> lazySpecs(const DecoderConfig& c)
{
    std::vector<LazyAttentionSpec> specs;
    for (int l = 0; l < c.layers; ++l) specs.push_back(lazySpec(c, l));
    return specs;
}

// A dense run keeps per head only its weights. The head's Q, K, V and context are columns of the layer's
// Q, K, V and concat (query head h: columns h·D…; its KV head h / (H / H_kv)), where the attention core also gives
// each head a copy: those copies were a third of a run's bytes besides the maps at 128 tokens (each KV head's keys
// and values once per query head sharing it), and an appended token reallocated all four of every head (~35 MB
// moved an append at 128 tokens). The scores are Q·Kᵀ·scale of those columns, which the tile seam computes for
// the tile asked (decoderMaps, as a lazy run's LazyMaps does): kept, they were 4 of the 9 bytes per head and cell
// (1.1 GB of a 1024-token run), and every appended token moved them all to the wider stride. The mask is the
// model's rule (causal, and Mistral's sliding window), the same for every head, which the seam gives
// (decoderMaps: AttentionMaps::maskTile's rule): kept, it was 1 of the 5 bytes per head and cell left (283 MB of a 1024-token
// run), and an append moved 4.4 MB of them at 128 tokens. The weights move to `kept` (HeadWeights: room for
// appended tokens), leaving `res.heads` H empty entries.
void keepWeights(AttentionResult& res, std::vector<HeadWeights>& kept)
{
    kept.resize(res.heads.size());
    for (std::size_t i = 0; i < res.heads.size(); ++i) {
        HeadResult& h = res.heads[i];
        kept[i] = HeadWeights(std::move(h.weights));
        h.weights.resize(0, 0);
        h.masked.resize(0, 0);
        h.Q.resize(0, 0);
        h.K.resize(0, 0);
        h.V.resize(0, 0);
        h.scores.resize(0, 0);
        h.output.resize(0, 0);
    }
}

// The residual stream's rows before layer 0 of tokens `ids` at positions pos0, pos0 + 1, … (their embeddings, scaled as the
// family scales them, plus learned positions where the model has them), one row each.
void embedTokens(const DecoderModel& model, const std::vector<int>& ids, int pos0, Matrix& x)
{
    const DecoderConfig& c = model.config;
    x.resize(static_cast<Eigen::Index>(ids.size()), c.hidden);
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        model.tokenEmbeddings.column(ids[static_cast<std::size_t>(i)], x.row(i).data());
        if (c.embedScale != 1.0f) x.row(i) *= c.embedScale;
        if (model.positionEmbeddings.size() > 0) x.row(i) += model.positionEmbeddings.row(pos0 + i);
    }
}

template <class M, class Rows>
void appendRows(M& dst, const Eigen::MatrixBase<Rows>& rows)
{
    const Eigen::Index n = dst.rows();
    dst.conservativeResize(n + rows.rows(), Eigen::NoChange);  // row-major, same width: a realloc, not a copy
    dst.bottomRows(rows.rows()) = rows;
}

// Layer l's attention without maps (DecoderOptions::lazy): Q, K, V of the queries at positions pos0…; with pos0 > 0
// the kept positions' keys and values are run.lazyLayers[l]'s K and V, which grow by these rows (in place when
// they can: LazyLayer::appended). The output of the queries' rows (context · W^O + b^O) goes into res.output,
// which holds only them (the caller adds them to the residual and drops them).
Status lazyLayer(const DecoderModel& m, int l, DecoderRun& run, Matrix Q, Matrix K, Matrix V, int pos0)
{
    const DecoderConfig& c = m.config;
    std::vector<std::uint8_t> off(static_cast<std::size_t>(c.heads), 0);
    for (const auto& [al, ah] : run.ablated)
        if (al == l) off[static_cast<std::size_t>(ah)] = 1;
    AttentionResult& res = run.attention[static_cast<std::size_t>(l)];
    std::shared_ptr<const LazyLayer>& kept = run.lazyLayers[static_cast<std::size_t>(l)];
    Matrix lse;
    AttentionResult part;
    if (pos0 == 0) {
        ATTNSCOPE_RETURN_IF_ERROR(lazyAttention(Q, K, V, lazySpec(c, l), 0, part.concat, lse, off));
        // Spare rows for appended tokens, never past the model's context (at 8192 the run fills it).
        const Eigen::Index n = Q.rows();
        const Eigen::Index spare = std::clamp<Eigen::Index>(LazyLayer::defaultSpareRows(n), 0, std::max<Eigen::Index>(0, c.maxPositions - n));
        kept = std::make_shared<const LazyLayer>(std::move(Q), std::move(K), std::move(lse), spare, std::move(V));
    } else {
        std::shared_ptr<LazyLayer> grown = kept->appended(Q, K, V);
        ATTNSCOPE_RETURN_IF_ERROR(lazyAttention(Q, grown->K, grown->V, lazySpec(c, l), pos0, part.concat, lse, off));
        grown->setLse(pos0, lse);
        kept = std::move(grown);
    }
    projectOut(m, l, {}, part);  // the ablated heads' contexts are 0 already
    res.output = std::move(part.output);
    // The heads' contexts are not kept: no view of a lazy run reads them (the interpretability scans need a dense
    // run), and they were 566 MB of the 2.5 GB at 8192 tokens.
    res.concat.resize(0, 0);
    res.Q.resize(0, 0);
    res.K.resize(0, 0);
    res.V.resize(0, 0);
    res.heads.clear();
    res.scale = lazySpec(c, l).scale;
    res.layout = Layout::Row;
    return Status::success();
}

Status runLayer(DecoderModel& m, int l, DecoderRun& run, Backend backend)
{
    const DecoderConfig& c = m.config;
    const Matrix& x = run.hidden[static_cast<std::size_t>(l)];
    const int n = static_cast<int>(x.rows());
    AttentionInput& in = run.scratch.in;
    if (run.pinned.layer == l) {
        const Eigen::Index qd = Eigen::Index(c.heads) * c.headDim, kd = Eigen::Index(c.kvHeads) * c.headDim;
        const DecoderRun::PinnedQKV& p = run.pinned;
        if (p.Q.rows() != n || p.Q.cols() != qd || p.K.rows() != n || p.K.cols() != kd || p.V.rows() != n || p.V.cols() != kd)
            return invalidArgument("pinned Q, K, V of layer " + std::to_string(l) + ": expected " + std::to_string(n) + "×" +
                                   std::to_string(qd) + ", " + std::to_string(n) + "×" + std::to_string(kd) + " and " +
                                   std::to_string(n) + "×" + std::to_string(kd) + ", got " + std::to_string(p.Q.rows()) +
                                   "×" + std::to_string(p.Q.cols()) + ", " + std::to_string(p.K.rows()) + "×" +
                                   std::to_string(p.K.cols()) + " and " + std::to_string(p.V.rows()) + "×" +
                                   std::to_string(p.V.cols()));
        in.Q = p.Q;
        in.K = p.K;
        in.V = p.V;
    } else {
        attentionInputs(m, l, x, 0, run.scratch.normed, in.Q, in.K, in.V);
    }
    AttentionResult& res = run.attention[static_cast<std::size_t>(l)];
    if (run.lazy) {
        ATTNSCOPE_RETURN_IF_ERROR(lazyLayer(m, l, run, in.Q, in.K, in.V, 0));
    } else {
        in.mask.causal = true;
        in.mask.validLens.clear();
        slidingWindowMask(c, l, n, 0, n, in.mask);
        // The kept maps' buffers back to the core, which reuses those of the same size (a recompute of the same
        // length allocates nothing).
        std::vector<HeadWeights>& kept = run.weights[static_cast<std::size_t>(l)];
        if (res.heads.size() == kept.size())
            for (std::size_t h = 0; h < kept.size(); ++h) res.heads[h].weights = kept[h].release();
        if (auto s = compute(in, layerConfig(c, l, backend), res); !s.ok())
            return makeError(s.code, "layer " + std::to_string(l) + ": " + s.message);
        projectOut(m, l, run.ablated, res);
        keepWeights(res, kept);
    }
    afterAttention(m, l, res.output, x, run.scratch.block, run.hidden[static_cast<std::size_t>(l) + 1]);
    // In the residual now: no run keeps the n × M output rows (the logit attribution needs no copy of them).
    res.output.resize(0, 0);
    return Status::success();
}

// The surprise of positions first+1 … last+1 from the logits of positions first … last (and the last position's
// logits when last is n − 1), through lmHeadLogProbabilities: the head read once for all of them, n×V logits never
// at once (8192 × 262 144 floats would be 8 GB).
void logitRows(const DecoderModel& m, DecoderRun& run, Eigen::Index first, Eigen::Index last)
{
    const Eigen::Index n = run.finalHidden.rows(), rows = last + 1 - first;
    std::vector<int> targets(static_cast<std::size_t>(rows), -1);
    for (Eigen::Index i = 0; i < rows; ++i)
        if (first + i + 1 < n) targets[static_cast<std::size_t>(i)] = run.encoding.ids[static_cast<std::size_t>(first + i + 1)];
    std::vector<float> logProb(static_cast<std::size_t>(rows));
    const bool withLast = last == n - 1;
    lmHeadLogProbabilities(m.config, m.unembedding(), run.finalHidden.middleRows(first, rows), targets, logProb.data(),
                           withLast ? rows - 1 : -1, withLast ? &run.lastLogits : nullptr);
    for (Eigen::Index i = 0; i < rows; ++i)
        if (first + i + 1 < n) run.surprise[static_cast<std::size_t>(first + i + 1)] = -logProb[static_cast<std::size_t>(i)];
}

// The final norm and the LM head of positions from… (the rows before are kept: finalHidden's rows and the
// surprise up to position from − 1 are a shorter run's, which causality leaves valid), or with `surprise` Deferred
// the last position's logits only (run.surpriseStale until updateDecoderSurprise).
void predictions(const DecoderModel& m, DecoderRun& run, Eigen::Index from, SurpriseUpdate surprise = SurpriseUpdate::Now)
{
    const Matrix& x = run.hidden.back();
    const Eigen::Index n = x.rows();
    if (from > 0 && from <= n && run.finalHidden.rows() >= from && run.finalHidden.cols() == x.cols()) {
        run.finalHidden.conservativeResize(from, Eigen::NoChange);
        Matrix normed;
        finalNorm(m, x.bottomRows(n - from), normed);
        appendRows(run.finalHidden, normed);
    } else {
        from = 0;
        finalNorm(m, x, run.finalHidden);
    }
    run.surprise.resize(static_cast<std::size_t>(n));
    // Every position's surprise made now: up to date, whatever an earlier deferred recompute left.
    if (surprise == SurpriseUpdate::Now && from == 0) run.surpriseStale = false;
    if (n == 0) return;
    if (from == 0) run.surprise[0] = std::numeric_limits<float>::quiet_NaN();
    if (surprise == SurpriseUpdate::Deferred) {
        run.surpriseStale = true;
        logitRows(m, run, n - 1, n - 1);
        return;
    }
    // Position i's logits predict token i + 1; the last position's are kept whole. After an append (from = the
    // old length), position from − 1's logits are the run's last ones before it, run.lastLogits (which a
    // truncation drops): the first new token's surprise comes from them and the LM head runs on the new positions
    // alone. Its product on two rows instead of one had taken 1.5 of the 3.7 ms the predictions took in an append
    // at 128 tokens.
    Eigen::Index first = std::max<Eigen::Index>(from - 1, 0);
    if (from >= 1 && from < n && run.lastLogits.size() == m.unembedding().outputs()) {
        run.surprise[static_cast<std::size_t>(from)] = -logProbability(run.lastLogits, run.encoding.ids[static_cast<std::size_t>(from)]);
        first = from;
    }
    logitRows(m, run, first, n - 1);
}

} // namespace

Status runDecoder(DecoderModel& model, const std::vector<int>& idsIn, const DecoderOptions& options, DecoderRun& run)
{
    const DecoderConfig& c = model.config;
    ATTNSCOPE_RETURN_IF_ERROR(checkAblation(c, options.ablate));
    if (idsIn.empty()) return invalidArgument("the text has no tokens: type some text");
    for (std::size_t i = 0; i < idsIn.size(); ++i)
        if (idsIn[i] < 0 || idsIn[i] >= c.vocab)
            return invalidArgument("token " + std::to_string(i) + ": id " + std::to_string(idsIn[i]) + " is outside 0.." +
                                   std::to_string(c.vocab - 1));
    std::vector<int> ids = idsIn;
    run.warnings.clear();
    if (static_cast<int>(ids.size()) > c.maxPositions) {
        run.warnings.push_back("the text has " + std::to_string(ids.size()) + " tokens; the model's context is " +
                               std::to_string(c.maxPositions) + ": truncated to the first " + std::to_string(c.maxPositions));
        ids.resize(static_cast<std::size_t>(c.maxPositions));
    }
    run.encoding.ids = ids;
    run.encoding.tokens.clear();
    for (int id : ids) run.encoding.tokens.push_back(model.tokenizer.tokenText(id));
    run.encoding.typeIds.assign(ids.size(), 0);
    run.ablated = options.ablate;
    const int n = static_cast<int>(ids.size());
    const double need = decoderRunBytes(c, n, options.lazy), budget = double(defaultMemoryBudget());
    if (need > budget)
        return makeError(StatusCode::ResourceExhausted,
                         "a " + std::string(options.lazy ? "" : "dense ") + "run over " + std::to_string(n) + " tokens would keep about " +
                             std::to_string(long(need / 1048576.0)) + " MiB, over the memory budget of " +
                             std::to_string(long(budget / 1048576.0)) + " MiB: at most " +
                             std::to_string(decoderLargestFit(c, budget, options.lazy)) + " tokens fit" +
                             (options.lazy ? std::string() : " (a lazy run keeps no n×n maps: " +
                                                                 std::to_string(decoderLargestFit(c, budget, true)) + " fit)"));
    if (run.lazy != options.lazy) {
        run.attention.clear();
        run.lazyLayers.clear();
        run.weights.clear();
    }
    run.lazy = options.lazy;
    run.deviceAttention = options.deviceAttention;
    run.hidden.resize(static_cast<std::size_t>(c.layers) + 1);
    run.attention.resize(static_cast<std::size_t>(c.layers));
    if (run.lazy) run.lazyLayers.resize(static_cast<std::size_t>(c.layers));
    else run.weights.resize(static_cast<std::size_t>(c.layers));
    embedTokens(model, ids, 0, run.hidden[0]);
    return recomputeDecoderFrom(model, 0, run, options.backend);
}

Expected<DecoderRun> runDecoder(DecoderModel& model, const std::vector<int>& ids, const DecoderOptions& options)
{
    DecoderRun run;
    ATTNSCOPE_RETURN_IF_ERROR(runDecoder(model, ids, options, run));
    return run;
}

namespace {

// Whether a run goes to the GPU (decoderOnDevice), less what the device forward lacks: LongRoPE (its RoPE takes one
// set of divisors and no factor on cos and sin), refused on Cuda and computed on the CPU under Auto, with a warning.
Expected<bool> onDeviceFor(const DecoderConfig& c, Backend& backend, std::vector<std::string>& warnings)
{
    auto onDevice = decoderOnDevice(backend);
    if (!onDevice || !*onDevice || !c.longRope()) return onDevice;
    const std::string why = "backend cuda: LongRoPE (two sets of RoPE factors and an attention factor) is not on the GPU";
    if (backend != Backend::Auto) return makeError(StatusCode::Unsupported, why + ": run it with --backend cpu");
    const std::string warning = why + "; computed on the CPU instead";
    if (std::find(warnings.begin(), warnings.end(), warning) == warnings.end()) warnings.push_back(warning);  // once a run
    backend = Backend::Cpu;
    return false;
}

// Whether a run of `from` positions grown or cut to `to` changes LongRoPE's set (every key is rotated anew).
bool ropeSetChanges(const DecoderConfig& c, long from, long to)
{
    return c.longRope() && (from > c.ropeOriginalContext) != (to > c.ropeOriginalContext);
}

} // namespace

Status recomputeDecoderFrom(DecoderModel& model, int fromLayer, DecoderRun& run, Backend backend, SurpriseUpdate surprise)
{
    const int L = model.config.layers;
    if (fromLayer < 0 || fromLayer >= L)
        return invalidArgument("layer " + std::to_string(fromLayer) + " is outside 0.." + std::to_string(L - 1));
    if (static_cast<int>(run.hidden.size()) != L + 1 || static_cast<int>(run.attention.size()) != L ||
        (!run.lazy && static_cast<int>(run.weights.size()) != L))
        return invalidArgument("recompute: the run does not come from this model (" + std::to_string(run.attention.size()) +
                               " layers, the model has " + std::to_string(L) + ")");
    ATTNSCOPE_RETURN_IF_ERROR(checkAblation(model.config, run.ablated));
    // On the GPU (decoder_device_run.h): every layer there, or an error (Cuda); Auto falls back to the CPU with a
    // warning when the device fails (out of device memory, a driver error).
    auto onDevice = onDeviceFor(model.config, backend, run.warnings);
    if (!onDevice) return onDevice.status();
    if (*onDevice) {
        Status s = deviceRecompute(model, fromLayer, run, surprise);
        if (s.ok()) {
            if (run.onLayer) (void)run.onLayer(L - fromLayer, L - fromLayer);  // one call: nothing left to cancel
            return s;
        }
        if (backend != Backend::Auto || s.code == StatusCode::InvalidArgument) return s;
        run.warnings.push_back(s.message + "; computed on the CPU instead");
        backend = Backend::Cpu;
    }
    run.backend = Backend::Cpu;
    run.deviceTimings = {};
    run.deviceKVGeneration = 0;  // the layers' K and V are the CPU's now
    const TeamsForTheLoad teams;
    for (int l = fromLayer; l < L; ++l) {
        ATTNSCOPE_RETURN_IF_ERROR(runLayer(model, l, run, backend));
        if (run.onLayer && !run.onLayer(l - fromLayer + 1, L - fromLayer))
            return makeError(StatusCode::Cancelled, "the run was cancelled at layer " + std::to_string(l + 1) + " of " + std::to_string(L));
    }
    predictions(model, run, 0, surprise);
    return Status::success();
}

Status updateDecoderSurprise(const DecoderModel& model, DecoderRun& run)
{
    const Eigen::Index n = run.finalHidden.rows();
    if (n != run.hidden.back().rows() || static_cast<std::size_t>(n) != run.encoding.ids.size())
        return invalidArgument("surprise: the run's final norm has " + std::to_string(n) + " rows, its text " +
                               std::to_string(run.encoding.ids.size()) + " tokens");
    if (!run.surpriseStale) return Status::success();
    const TeamsForTheLoad teams;
    run.surprise.resize(static_cast<std::size_t>(n));
    if (n > 0) run.surprise[0] = std::numeric_limits<float>::quiet_NaN();
    // Positions 0 … n − 2 predict tokens 1 … n − 1; the last position's logits are up to date already.
    if (n > 1) logitRows(model, run, 0, n - 2);
    run.surpriseStale = false;
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Appending tokens
// -----------------------------------------------------------------------------------------------------

HeadWeights::HeadWeights(Matrix square) : m_buf(std::move(square)), m_n(m_buf.rows())
{
    assert(m_buf.rows() == m_buf.cols());
}

// The buffer's rows 0…n−1 are kept zero to the right of the corner, up to the capacity: the weights a kept query
// gives the keys of positions not yet appended (its future). So an append writes its new rows whole (their cells
// past the new corner zeroed, a few contiguous floats) and no column: zeroing the old rows' new cells touched one
// cache line per kept row and head at every token. SmolLM2's 270 maps at 128 tokens, one row appended to each in
// their room, on one thread: 0.49–0.56 ms before, 0.07–0.09 ms now (best of 200, three runs alternating). Rows
// past n are unspecified until an append writes them.
void HeadWeights::append(const Matrix& rows)
{
    const Eigen::Index n = m_n, total = rows.cols(), m = total - n;
    assert(m >= 0 && rows.rows() == m);
    if (total > capacity()) {
        const Eigen::Index cap = std::max(total, n + std::max<Eigen::Index>(32, n / 8));
        Matrix grown(cap, cap);  // rows n… are written by the appends that reach them
        grown.topLeftCorner(n, n) = view();
        grown.topRightCorner(n, cap - n).setZero();
        m_buf.swap(grown);
    }
    m_buf.block(n, 0, m, total) = rows;
    m_buf.block(n, total, m, capacity() - total).setZero();
    m_n = total;
}

void HeadWeights::truncate(Eigen::Index t)
{
    assert(t >= 0 && t <= m_n);
    m_buf.block(0, t, t, m_n - t).setZero();  // the kept queries' weights of the dropped keys: their future again
    m_n = t;
}

Matrix HeadWeights::release()
{
    Matrix out;
    if (capacity() == m_n) out.swap(m_buf);
    m_buf.resize(0, 0);
    m_n = 0;
    return out;
}

namespace {

// The attention of a dense run's m new queries (positions n…n+m−1, Q after RoPE) against all n + m keys (K and V:
// the layer's, every position's rows), each query head against its KV head: what the attention core computes for
// them — the scaled score of every key, the causal and sliding-window mask (slidingWindowMask's), the softmax over
// the unmasked keys, weights·V — without the core's per-head copies of all n + m keys and values and its per-call
// setup. `part` receives concat (m × H·D) and per head the new rows of the weights (the stitching takes them from
// there; the masked keys' weights are 0). Tested as the core path was: appends equal a whole forward (DecoderRun.*Append*, sliding
// windows and grouped-query heads among the tiny families).
void newRowsAttention(const DecoderConfig& c, int layer, const Matrix& Q, const Matrix& K, const Matrix& V, int n, float scale,
                      AttentionResult& part)
{
    const int H = c.heads, D = c.headDim, group = c.heads / c.kvHeads;
    const Eigen::Index m = Q.rows(), total = n + m;
    assert(K.rows() == total && V.rows() == total);
    part.concat.resize(m, Eigen::Index(H) * D);
    part.heads.resize(static_cast<std::size_t>(H));
    Matrix scores;
    for (int h = 0; h < H; ++h) {
        HeadResult& src = part.heads[static_cast<std::size_t>(h)];
        const Eigen::Index g = h / group;
        scores.noalias() = Q.middleCols(Eigen::Index(h) * D, D) * K.middleCols(g * D, D).transpose();
        scores *= scale;
        if (c.attnSoftcap > 0) scores.array() = (scores.array() * (1.0f / c.attnSoftcap)).tanh() * c.attnSoftcap;
        src.weights.setZero(m, total);
        for (Eigen::Index i = 0; i < m; ++i) {
            const Eigen::Index pos = n + i;
            // Keys pos+1… are in the query's future; Mistral's window hides the keys before `first`.
            const Eigen::Index first = firstKeyInWindow(c, layer, pos);
            const auto s = scores.row(i).segment(first, pos + 1 - first);
            auto w = src.weights.row(i).segment(first, pos + 1 - first);
            w = (s.array() - s.maxCoeff()).exp().matrix();
            w /= w.sum();
        }
        part.concat.middleCols(Eigen::Index(h) * D, D).noalias() = src.weights * V.middleCols(g * D, D);
    }
}

} // namespace

Status appendTokens(DecoderModel& model, const std::vector<int>& ids, DecoderRun& run, Backend backend)
{
    const DecoderConfig& c = model.config;
    const int L = c.layers;
    if (static_cast<int>(run.hidden.size()) != L + 1 || static_cast<int>(run.attention.size()) != L || run.encoding.ids.empty() ||
        (!run.lazy && static_cast<int>(run.weights.size()) != L))
        return invalidArgument("append: the run does not come from this model");
    if (ids.empty()) return Status::success();
    const int n = static_cast<int>(run.encoding.ids.size()), m = static_cast<int>(ids.size());
    if (n + m > c.maxPositions)
        return invalidArgument("append: " + std::to_string(n + m) + " tokens would exceed the model's context of " +
                               std::to_string(c.maxPositions));
    for (int id : ids)
        if (id < 0 || id >= c.vocab)
            return invalidArgument("append: id " + std::to_string(id) + " is outside 0.." + std::to_string(c.vocab - 1));
    auto pushIds = [&] {
        for (int id : ids) {
            run.encoding.ids.push_back(id);
            run.encoding.tokens.push_back(model.tokenizer.tokenText(id));
            run.encoding.typeIds.push_back(0);
        }
    };
    // On the GPU: the new rows there (deviceAppend: the kept K and V read in place while the device still holds
    // them, else uploaded). Where LongRoPE's set changes with the length every key is rotated anew (as transformers'
    // Phi-3 generate drops its cache there): the whole run again over the longer text, which equals the appended run
    // by definition; so too Auto's fallback when the device fails.
    auto onDevice = onDeviceFor(c, backend, run.warnings);
    if (!onDevice) return onDevice.status();
    run.pinned = {};  // the pinned Q, K, V were for the old length
    bool whole = ropeSetChanges(c, n, n + m);
    if (*onDevice && !whole) {
        Status s = deviceAppend(model, ids, run);
        if (s.ok()) {
            pushIds();
            if (run.onLayer) (void)run.onLayer(L, L);  // one call: nothing left to cancel
            return s;
        }
        if (backend != Backend::Auto || s.code == StatusCode::InvalidArgument) return s;
        run.warnings.push_back(s.message + "; the whole text recomputed instead");
        whole = true;
    }
    if (whole) {
        pushIds();
        // The new positions' embeddings on the host too, for Auto's fallback to the CPU (the device makes its own).
        Matrix x;
        embedTokens(model, ids, n, x);
        appendRows(run.hidden[0], x);
        return recomputeDecoderFrom(model, 0, run, backend);
    }
    const TeamsForTheLoad teams;
    // The step's ~250 short products (7 a layer and the LM head, one token) on a team whose threads spin between
    // them, instead of an OpenMP region each that wakes a sleeping thread.
    ProductBurst burst;
    run.backend = Backend::Cpu;
    run.deviceTimings = {};
    run.deviceKVGeneration = 0;  // the new rows' K and V are the CPU's
    Matrix x;
    embedTokens(model, ids, n, x);
    appendRows(run.hidden[0], x);
    DecoderRun::Scratch& buf = run.scratch;
    for (int l = 0; l < L; ++l) {
        const AttentionConfig cfg = layerConfig(c, l, backend);
        AttentionResult& res = run.attention[static_cast<std::size_t>(l)];
        AttentionInput in;
        Matrix Knew, Vnew;
        attentionInputs(model, l, run.hidden[static_cast<std::size_t>(l)].bottomRows(m), n, buf.normed, in.Q, Knew, Vnew);
        if (run.lazy) {
            // The new queries against every key: only their rows are computed, the kept statistics stay. Past
            // kLazyTokens the attention splits the keys over its own OpenMP team: the burst's threads sleep for it
            // (spinning, they took its cores: 44 → 54 ms an append at 4096 tokens).
            burst.rest();
            ATTNSCOPE_RETURN_IF_ERROR(lazyLayer(model, l, run, std::move(in.Q), std::move(Knew), std::move(Vnew), n));
            Matrix out;
            afterAttention(model, l, res.output, run.hidden[static_cast<std::size_t>(l)].bottomRows(m), buf.block, out);
            res.output.resize(0, 0);
            appendRows(run.hidden[static_cast<std::size_t>(l) + 1], out);
            continue;
        }
        AttentionResult part;
        if (backend == Backend::Cpu) {
            // A few rows: here (newRowsAttention: 3 of 30 ms at 128 tokens went to the core's setup and its copies
            // of every key and value per head), against the layer's keys and values grown by the new rows.
            appendRows(res.K, Knew);
            appendRows(res.V, Vnew);
            newRowsAttention(c, l, in.Q, res.K, res.V, n, res.scale, part);
            part.Q = std::move(in.Q);
        } else {
            // Through the attention core on its backend. The new queries see every kept key and the new ones up to
            // themselves: valid lengths n+1 … n+m.
            in.K.resize(n + m, res.K.cols());
            in.K << res.K, Knew;
            in.V.resize(n + m, res.V.cols());
            in.V << res.V, Vnew;
            in.mask.validLens.resize(static_cast<std::size_t>(m));
            std::iota(in.mask.validLens.begin(), in.mask.validLens.end(), n + 1);
            slidingWindowMask(c, l, m, n, n + m, in.mask);
            if (auto s = compute(in, cfg, part); !s.ok()) return makeError(s.code, "layer " + std::to_string(l) + ": " + s.message);
            res.K = std::move(in.K);
            res.V = std::move(in.V);
        }
        projectOut(model, l, run.ablated, part);
        // Stitch the new rows into the kept maps: each head's weights grow by m rows and m columns (HeadWeights:
        // in place, but once per n/8 tokens when the capacity grows; the scores and the mask are not kept:
        // keepWeights), the heads split over the burst's team (a growth is a copy that waits for memory, whose
        // bandwidth one core alone does not reach).
        std::vector<HeadWeights>& kept = run.weights[static_cast<std::size_t>(l)];
        detail::forTasks(c.heads, true, [&](Eigen::Index h) {
            kept[static_cast<std::size_t>(h)].append(part.heads[static_cast<std::size_t>(h)].weights);
        });
        appendRows(res.Q, part.Q);
        appendRows(res.concat, part.concat);
        Matrix out;
        afterAttention(model, l, part.output, run.hidden[static_cast<std::size_t>(l)].bottomRows(m), buf.block, out);
        appendRows(run.hidden[static_cast<std::size_t>(l) + 1], out);
    }
    pushIds();
    predictions(model, run, n);
    return Status::success();
}

namespace {

// Keeps the first t positions of a run (t ≥ 1): every kept row and map is what a forward over those t tokens gives,
// since nothing before a position depends on what comes after it (causality).
void truncateRun(DecoderRun& run, int t)
{
    const int n = static_cast<int>(run.encoding.ids.size());
    auto keepRows = [t](auto& m) { m.conservativeResize(std::min<Eigen::Index>(t, m.rows()), Eigen::NoChange); };
    for (Matrix& h : run.hidden) keepRows(h);
    for (std::shared_ptr<const LazyLayer>& p : run.lazyLayers)
        if (p) p = p->truncated(t);  // a view of the same rows: nothing copied
    for (AttentionResult& r : run.attention) {
        keepRows(r.Q);
        keepRows(r.K);
        keepRows(r.V);
        keepRows(r.concat);
    }
    for (std::vector<HeadWeights>& layer : run.weights)
        for (HeadWeights& w : layer) w.truncate(std::min<Eigen::Index>(t, w.size()));
    run.encoding.ids.resize(static_cast<std::size_t>(t));
    run.encoding.tokens.resize(static_cast<std::size_t>(t));
    run.encoding.typeIds.resize(static_cast<std::size_t>(t));
    keepRows(run.finalHidden);
    run.surprise.resize(static_cast<std::size_t>(t));
    if (t < n) run.lastLogits.resize(0);  // another position's: predictions() makes position t − 1's
}

} // namespace

Status rerunDecoder(DecoderModel& model, const std::vector<int>& ids, const DecoderOptions& options, bool sameModel,
                    DecoderRun& run, int* reused)
{
    if (reused) *reused = 0;
    const int L = model.config.layers;
    const auto& old = run.encoding.ids;
    std::size_t common = 0;
    while (common < old.size() && common < ids.size() && old[common] == ids[common]) ++common;
    const bool usable = sameModel && run.pinned.layer < 0 && options.ablate == run.ablated && options.lazy == run.lazy && common >= 1 &&
                        static_cast<int>(run.hidden.size()) == L + 1 && static_cast<int>(run.attention.size()) == L &&
                        ids.size() <= static_cast<std::size_t>(model.config.maxPositions) &&
                        (common < ids.size() || ids.size() < old.size());
    if (!usable || model.config.anyWindow() || ropeSetChanges(model.config, long(old.size()), long(ids.size())))
        return runDecoder(model, ids, options, run);
    run.deviceAttention = options.deviceAttention;  // the same results either way: the kept rows stand
    if (common == ids.size()) {
        // The new text is a prefix of the old one: keep it, the last position's predictions are recomputed.
        truncateRun(run, static_cast<int>(common));
        if (reused) *reused = static_cast<int>(common);
        predictions(model, run, static_cast<Eigen::Index>(common));
        return Status::success();
    }
    truncateRun(run, static_cast<int>(common));
    ATTNSCOPE_RETURN_IF_ERROR(appendTokens(model, std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(common), ids.end()),
                                           run, options.backend));
    if (reused) *reused = static_cast<int>(common);
    return Status::success();
}

Expected<Vector> logitsAt(const DecoderModel& model, const DecoderRun& run, int position)
{
    const int n = static_cast<int>(run.finalHidden.rows());
    if (position < 0 || position >= n)
        return invalidArgument("position " + std::to_string(position) + " is outside 0.." + std::to_string(n - 1));
    Matrix row = run.finalHidden.row(position), out;
    product(row, model.unembedding(), out);
    finalSoftcap(model.config, out);
    return Vector(out.row(0).transpose());
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Predictions
// -----------------------------------------------------------------------------------------------------

float logProbability(const Vector& logits, int id)
{
    if (id < 0 || id >= logits.size()) return -std::numeric_limits<float>::infinity();
    const float mx = logits.maxCoeff();
    // Eigen's vectorised exp in float: each term ≤ 1, summed over ≤ a few 10⁵ entries, ~1e-6 relative (the
    // per-element libm exp in double was 4 % of a forward, for every position's surprise).
    const double sum = (logits.array() - mx).exp().sum();
    return static_cast<float>(double(logits[id]) - double(mx) - std::log(sum));
}

std::vector<TokenProbability> topTokens(const DecoderModel& model, const Vector& logits, int k, float temperature)
{
    std::vector<TokenProbability> out;
    const Eigen::Index V = logits.size();
    if (V == 0 || k <= 0) return out;
    const double t = temperature > 0 ? temperature : 1.0;
    const double mx = logits.maxCoeff();
    double sum = 0;
    for (Eigen::Index i = 0; i < V; ++i) sum += std::exp((double(logits[i]) - mx) / t);
    std::vector<int> idx(static_cast<std::size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    const auto kk = static_cast<std::ptrdiff_t>(std::min<Eigen::Index>(k, V));
    // Ties go to the lower id, so the order is the same on every run.
    std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (std::ptrdiff_t i = 0; i < kk; ++i) {
        const int id = idx[static_cast<std::size_t>(i)];
        out.push_back({id, model.tokenizer.tokenText(id), logits[id],
                       static_cast<float>(std::exp((double(logits[id]) - mx) / t) / sum)});
    }
    return out;
}

} // namespace attn

namespace attn {

int sampleToken(const Vector& logits, float temperature, std::uint64_t seed)
{
    const Eigen::Index V = logits.size();
    if (V == 0) return -1;
    Eigen::Index best = 0;
    for (Eigen::Index i = 1; i < V; ++i)
        if (logits[i] > logits[best]) best = i;  // the first of equal maxima
    if (!(temperature > 0) || !std::isfinite(temperature)) return static_cast<int>(best);
    // splitmix64 of the seed → a uniform number in [0, 1): the same seed draws the same token on every machine.
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = double(z >> 11) * (1.0 / 9007199254740992.0);
    const double mx = logits[best], t = temperature;
    double sum = 0;
    for (Eigen::Index i = 0; i < V; ++i) sum += std::exp((double(logits[i]) - mx) / t);
    double acc = 0;
    for (Eigen::Index i = 0; i < V; ++i) {
        acc += std::exp((double(logits[i]) - mx) / t) / sum;
        if (u < acc) return static_cast<int>(i);
    }
    return static_cast<int>(best);  // rounding left u above the last sum
}

} // namespace attn

namespace attn {

Status decoderLayerInput(const DecoderModel& model, const DecoderRun& run, int layer, AttentionInput& in, AttentionConfig& cfg)
{
    const DecoderConfig& c = model.config;
    if (layer < 0 || layer >= c.layers || static_cast<int>(run.attention.size()) != c.layers)
        return invalidArgument("layer " + std::to_string(layer) + " is outside 0.." + std::to_string(c.layers - 1) +
                               " (or the run has no result for it)");
    const AttentionResult& r = run.attention[static_cast<std::size_t>(layer)];
    if (run.lazy)
        return makeError(StatusCode::Unsupported, "layer " + std::to_string(layer) + " of a lazy run (a long text) keeps no per-head "
                                                  "results to open in the chain view");
    if (static_cast<int>(r.heads.size()) != c.heads) return invalidArgument("the run's layer " + std::to_string(layer) + " has no heads");
    const Eigen::Index n = r.Q.rows(), D = c.headDim;
    if (r.Q.cols() != c.heads * D || r.K.cols() != c.kvHeads * D || r.V.cols() != c.kvHeads * D || r.K.rows() != n || r.V.rows() != n)
        return invalidArgument("the run's layer " + std::to_string(layer) + " has no Q, K, V of " + std::to_string(c.heads) + " and " +
                               std::to_string(c.kvHeads) + " heads of " + std::to_string(D));
    in = AttentionInput{};
    in.Q = r.Q;
    in.K = r.K;
    in.V = r.V;
    const DecoderLayer& l = model.layers[static_cast<std::size_t>(layer)];
    in.Wo = l.Wo.toMatrix();
    in.bo = l.bo;
    in.mask.causal = true;
    slidingWindowMask(c, layer, static_cast<int>(n), 0, static_cast<int>(n), in.mask);
    cfg = AttentionConfig{};
    cfg.mode = Mode::Direct;
    cfg.heads = c.heads;
    cfg.kvHeads = c.kvHeads;
    if (c.attnScale > 0) cfg.scale = c.attnScale;
    cfg.softcap = c.attnSoftcap;
    return Status::success();
}

} // namespace attn

namespace attn {

double decoderRunBytes(const DecoderConfig& c, long n, bool lazy)
{
    const double N = double(n), M = c.hidden, D = c.headDim, H = c.heads, Hkv = c.kvHeads > 0 ? c.kvHeads : c.heads;
    // Residual streams (L+1, plus the final norm's); a dense run also keeps each layer's context rows (a lazy one
    // drops them once the residual has them; neither keeps the attention's output rows).
    double bytes = 4.0 * N * M * (c.layers + 2);
    if (lazy) return bytes + c.layers * lazyLayerBytes(n, c.heads, c.kvHeads, c.headDim);
    bytes += 4.0 * N * H * D * c.layers;
    // Dense: Q, K, V side by side (no per-head copies: keepWeights), and per head its weights (4 B a cell,
    // n × n).
    return bytes + c.layers * (4.0 * N * (H * D + 2 * Hkv * D) + H * 4.0 * N * N);
}

long decoderLargestFit(const DecoderConfig& c, double budgetBytes, bool lazy)
{
    long lo = 0, hi = 1L << 24;
    while (lo < hi) {
        const long mid = (lo + hi + 1) / 2;
        if (decoderRunBytes(c, mid, lazy) <= budgetBytes) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

namespace {

// A dense run's maps: the weights from its HeadWeights (views of the kept buffers), the scores Q·Kᵀ·scale of the
// layer's Q and K (the head's columns, its KV head's), the mask the model's rule (causal, the sliding window).
class DenseDecoderMaps final : public AttentionMaps {
public:
    DenseDecoderMaps(const DecoderRun& run, const DecoderConfig& c)
        : m_run(&run), m_config(c), m_heads(c.heads), m_kvHeads(c.kvHeads)
    {
    }
    int layers() const override { return static_cast<int>(m_run->weights.size()); }
    int heads() const override { return m_run->weights.empty() ? 0 : static_cast<int>(m_run->weights.front().size()); }
    int queries() const override { return heads() == 0 ? 0 : static_cast<int>(m_run->weights.front().front().size()); }
    int keys() const override { return queries(); }
    bool has(MapKind) const override { return true; }
    bool causal() const override { return true; }
    // The model's rule of the layer: causal, and its sliding window.
    int window(int layer) const override { return m_config.windowOf(layer); }
    Status tile(MapKind kind, int layer, int head, const MapRect& r, Matrix& out) const override
    {
        ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
        const Expected<const HeadWeights*> w = kept(layer, head);
        if (!w) return w.status();
        if (kind == MapKind::Weights) {
            out = (*w)->view().block(r.r0, r.c0, r.rows, r.cols);
            return Status::success();
        }
        const AttentionResult& res = m_run->attention[static_cast<std::size_t>(layer)];
        if (res.Q.rows() < long(r.r0) + r.rows || res.K.rows() < long(r.c0) + r.cols ||
            res.Q.cols() % m_heads != 0 || res.K.cols() != res.Q.cols() / m_heads * m_kvHeads)
            return invalidArgument("layer " + std::to_string(layer) + " keeps no Q and K to make its scores from");
        scoresTile(res.Q, res.K, head, m_heads, m_kvHeads, res.scale, r, out, m_config.attnSoftcap);
        return Status::success();
    }
    // The weights pooled from the kept buffer itself (poolMax over its view: the same blocks and the same rule as
    // the seam's default, which copies each band of rows into a tile first and pools it cell by cell through a
    // column table). The scores: the default.
    Status pooled(MapKind kind, int layer, int head, const MapRect& r, int outRows, int outCols, Matrix& out) const override
    {
        if (kind != MapKind::Weights) return AttentionMaps::pooled(kind, layer, head, r, outRows, outCols, out);
        ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
        const Expected<const HeadWeights*> w = kept(layer, head);
        if (!w) return w.status();
        // poolMax clamps the sizes to the rect's as preparePooled does, and gives an empty rect an empty map.
        out = poolMax((*w)->view().block(r.r0, r.c0, r.rows, r.cols), outRows, outCols);
        return Status::success();
    }

private:
    // A (layer, head) checkTile accepted: its map, which must hold every position of the run.
    Expected<const HeadWeights*> kept(int layer, int head) const
    {
        const HeadWeights& w = m_run->weights[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)];
        if (w.size() != queries())
            return invalidArgument("layer " + std::to_string(layer) + " head " + std::to_string(head) + " holds " +
                                   std::to_string(w.size()) + " positions, expected " + std::to_string(queries()));
        return &w;
    }

    const DecoderRun* m_run;
    DecoderConfig m_config;
    int m_heads, m_kvHeads;
};

} // namespace

std::shared_ptr<const AttentionMaps> decoderMaps(const DecoderModel& model, const DecoderRun& run, bool onDevice)
{
    if (run.lazy) {
        auto host = std::make_shared<LazyMaps>(run.lazyLayers, lazySpecs(model.config));
        if (!onDevice) return host;
        return detail::lazyMapsWithDevice(std::move(host), run, model.config);
    }
    return std::make_shared<DenseDecoderMaps>(run, model.config);
}

long decoderMapsDeviceReads(const AttentionMaps& maps) { return detail::deviceMapReads(maps); }
std::vector<DeviceAttentionChoice> deviceAttentionChoices() { return detail::deviceAttentionChoices(); }
void forgetDeviceAttentionChoices() { detail::forgetDeviceAttentionChoices(); }

} // namespace attn
