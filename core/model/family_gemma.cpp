// Gemma 2 and Gemma 3: RMSNorm before and after each sublayer (sandwich norms), GeGLU (tanh), the embedding
// times √M, a tied unembedding, sliding-window layers beside global ones.
//   x₀ = E[t]·√M
//   h = x + RMSNorm_post₁(attention(RMSNorm₁(x)))        Gemma 3: RMSNorm of each head's q and k before RoPE
//   out = h + RMSNorm_post₂(W_down(GELU_tanh(W_gate h') ⊙ W_up h')),  h' = RMSNorm₂(h)
// Scores are scaled by query_pre_attn_scalar^−½ (= 1/√D but on Gemma 2 27B and Gemma 3 27B).
// Gemma 3: layer i is global when (i + 1) % 6 == 0 (layer_types, sliding_window_pattern), sliding otherwise; global
// layers use rope.freq_base (1e6, linearly scaled ×8 on 4B+), sliding ones rope.freq_base_swa (10 000).
// Gemma 2: every other layer sliding (the even ones), one base, and soft-caps: scores = 50·tanh(scores / 50) before
// the mask, logits = 30·tanh(logits / 30).
// Hugging Face stores each norm's w of x̂·(1 + w); llama.cpp's converter writes 1 + w into the GGUF already.
#include "decoder_family.h"

#include "attnscope/preset_io.h"  // clipForMessage

#include <cmath>

namespace attn::detail {
using json = nlohmann::json;

namespace {

bool isGemma3(const DecoderConfig& c) { return c.architecture == "gemma3" || c.architecture == "gemma3_text"; }

// Layer types as the period of global layers says: Gemma 3 every 6th global, Gemma 2 every 2nd.
void layerSpecsByPeriod(DecoderConfig& c, int period, float localTheta, float globalScale)
{
    c.layerSpecs.assign(static_cast<std::size_t>(c.layers), DecoderLayerSpec{});
    for (int l = 0; l < c.layers; ++l) {
        DecoderLayerSpec& s = c.layerSpecs[static_cast<std::size_t>(l)];
        const bool global = period <= 1 || (l + 1) % period == 0;
        s.window = global ? 0 : c.slidingWindow;
        s.ropeTheta = global ? c.ropeTheta : localTheta;
        s.ropeScale = global ? globalScale : 1.0f;
    }
}

} // namespace

Status gemmaConfigFromJson(const JsonConfig& j, DecoderConfig& c)
{
    c.family = DecoderFamily::Gemma;
    c.ffn = FfnKind::GeGluTanh;
    c.postNorms = true;
    const bool g3 = isGemma3(c);
    if (g3) c.qkNorm = QkNorm::PerHead;
    for (const char* key : {"hidden_activation", "hidden_act"})
        if (const json* a = j.find(key); a != nullptr && !(a->is_string() && a->get<std::string>() == "gelu_pytorch_tanh"))
            return makeError(StatusCode::Unsupported, j.file + ": " + key + " " + clipForMessage(a->dump()) +
                                                          " is not supported (supported: gelu_pytorch_tanh)");
    // Gemma 3's rope_parameters are per layer type (transformers 5); older files write rope_theta and
    // rope_local_base_freq, and rope_scaling for the global layers.
    float localTheta = 10000.0f, globalScale = 1.0f;
    ATTNSCOPE_RETURN_IF_ERROR(j.number("rope_local_base_freq", 0, 1e12, localTheta));
    const json* rp = j.find("rope_parameters");
    const json* rs = j.find("rope_scaling");
    if (rp != nullptr && rp->is_object() && rp->contains("full_attention")) {
        auto theta = [&](const char* type, float& out, float* scale) -> Status {
            auto t = rp->find(type);
            if (t == rp->end() || !t->is_object()) return Status::success();
            if (auto v = t->find("rope_theta"); v != t->end()) {
                if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
                    return invalidArgument(j.file + ": rope_parameters." + type + ".rope_theta: expected a positive number, got " +
                                           clipForMessage(v->dump()));
                out = static_cast<float>(v->get<double>());
            }
            auto type_ = t->find("rope_type");
            if (type_ != t->end() && type_->is_string() && type_->get<std::string>() == "linear" && scale != nullptr) {
                auto f = t->find("factor");
                if (f == t->end() || !f->is_number() || !(f->get<double>() > 0))
                    return invalidArgument(j.file + ": rope_parameters." + type + ".factor: expected a positive number");
                *scale = static_cast<float>(f->get<double>());
            } else if (type_ != t->end() && type_->is_string() && type_->get<std::string>() != "default") {
                return makeError(StatusCode::Unsupported, j.file + ": rope_parameters." + type + ".rope_type " +
                                                              clipForMessage(type_->dump()) + " is not supported (supported: default, linear)");
            }
            return Status::success();
        };
        ATTNSCOPE_RETURN_IF_ERROR(theta("full_attention", c.ropeTheta, &globalScale));
        ATTNSCOPE_RETURN_IF_ERROR(theta("sliding_attention", localTheta, nullptr));
        rp = nullptr;
    } else if (rs != nullptr && rs->is_object()) {
        // Gemma 3 4B+: {"rope_type": "linear", "factor": 8} on the global layers only.
        auto f = rs->find("factor");
        if (f != rs->end() && f->is_number() && f->get<double>() > 0) globalScale = static_cast<float>(f->get<double>());
    }
    // The common reader must not take Gemma's rope_scaling as every layer's.
    json copy = j.j;
    copy.erase("rope_scaling");
    if (rp == nullptr) copy.erase("rope_parameters");
    const JsonConfig common{copy, j.file};
    ATTNSCOPE_RETURN_IF_ERROR(commonConfigFromJson(common, true, c));
    float scalar = 0;
    ATTNSCOPE_RETURN_IF_ERROR(j.number("query_pre_attn_scalar", 0, 1e9, scalar));
    if (scalar > 0) c.attnScale = 1.0f / std::sqrt(scalar);
    c.embedScale = std::sqrt(static_cast<float>(c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(j.number("attn_logit_softcapping", 0, 1e9, c.attnSoftcap));
    ATTNSCOPE_RETURN_IF_ERROR(j.number("final_logit_softcapping", 0, 1e9, c.finalSoftcap));
    // Layer types: the explicit list, or the period.
    const json* types = j.find("layer_types");
    if (types != nullptr) {
        if (!types->is_array() || static_cast<int>(types->size()) != c.layers)
            return invalidArgument(j.file + ": layer_types: expected " + std::to_string(c.layers) + " entries, got " +
                                   clipForMessage(types->dump(), 80));
        c.layerSpecs.assign(static_cast<std::size_t>(c.layers), DecoderLayerSpec{});
        for (int l = 0; l < c.layers; ++l) {
            const json& t = (*types)[static_cast<std::size_t>(l)];
            const std::string type = t.is_string() ? t.get<std::string>() : std::string();
            if (type != "sliding_attention" && type != "full_attention")
                return invalidArgument(j.file + ": layer_types[" + std::to_string(l) +
                                       "]: expected \"sliding_attention\" or \"full_attention\", got " + clipForMessage(t.dump()));
            const bool global = type == "full_attention";
            DecoderLayerSpec& s = c.layerSpecs[static_cast<std::size_t>(l)];
            s.window = global ? 0 : c.slidingWindow;
            s.ropeTheta = global || !g3 ? c.ropeTheta : localTheta;
            s.ropeScale = global ? globalScale : 1.0f;
        }
    } else {
        int period = g3 ? 6 : 2;
        ATTNSCOPE_RETURN_IF_ERROR(j.integer("sliding_window_pattern", 1, 1024, period, false));
        layerSpecsByPeriod(c, period, g3 ? localTheta : c.ropeTheta, globalScale);
    }
    if (c.slidingWindow <= 0 && c.anyWindow()) return invalidArgument(j.file + ": sliding_window is missing");
    return checkConfig(j.file, c);
}

Status gemmaConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    c.family = DecoderFamily::Gemma;
    c.ffn = FfnKind::GeGluTanh;
    c.postNorms = true;
    const bool g3 = isGemma3(c);
    if (g3) c.qkNorm = QkNorm::PerHead;
    ATTNSCOPE_RETURN_IF_ERROR(commonConfigFromGguf(f, arch, c));
    const std::string p = arch + ".";
    auto number = [&](const std::string& key, float& out) -> Status {
        if (!f.has(key)) return Status::success();
        auto v = f.getFloat(key);
        if (!v) return v.status();
        if (!(*v > 0) || !std::isfinite(*v))
            return invalidArgument(f.what() + ": " + key + ": expected a positive number, got " + std::to_string(*v));
        out = static_cast<float>(*v);
        return Status::success();
    };
    c.embedScale = std::sqrt(static_cast<float>(c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(number(p + "attn_logit_softcapping", c.attnSoftcap));
    ATTNSCOPE_RETURN_IF_ERROR(number(p + "final_logit_softcapping", c.finalSoftcap));
    // No GGUF key holds query_pre_attn_scalar: llama.cpp picks it by the layer count, 27B (46 layers for Gemma 2,
    // 62 for Gemma 3) scaling by (d_model / H)^−½; every other size by 1/√D.
    if ((!g3 && c.layers == 46) || (g3 && c.layers == 62)) c.attnScale = 1.0f / std::sqrt(float(c.hidden) / float(c.heads));
    c.slidingWindow = g3 ? 512 : 4096;  // llama.cpp's defaults when the key is absent
    if (f.has(p + "attention.sliding_window")) {
        auto v = f.getUint(p + "attention.sliding_window");
        if (!v) return v.status();
        if (*v < 1 || *v > std::uint64_t(c.maxPositions))
            return invalidArgument(f.what() + ": " + p + "attention.sliding_window " + std::to_string(*v) + ": expected 1.." +
                                   std::to_string(c.maxPositions) + " (the context)");
        c.slidingWindow = static_cast<int>(*v);
    }
    float localTheta = g3 ? 10000.0f : c.ropeTheta, globalScale = 1.0f;
    ATTNSCOPE_RETURN_IF_ERROR(number(p + "rope.freq_base_swa", localTheta));
    if (f.has(p + "rope.scaling.type")) {
        auto type = f.getString(p + "rope.scaling.type");
        if (!type) return type.status();
        if (*type == "linear") ATTNSCOPE_RETURN_IF_ERROR(number(p + "rope.scaling.factor", globalScale));
        else if (*type != "none")
            return makeError(StatusCode::Unsupported, f.what() + ": " + p + "rope.scaling.type \"" + clipForMessage(*type) +
                                                          "\" is not supported (supported: none, linear)");
    }
    int period = g3 ? 6 : 2;
    if (f.has(p + "attention.sliding_window_pattern")) {
        auto v = f.getUint(p + "attention.sliding_window_pattern");
        if (!v) return makeError(StatusCode::Unsupported, f.what() + ": " + p + "attention.sliding_window_pattern: only a period is supported (" +
                                                              v.status().message + ")");
        if (*v < 1 || *v > 1024)
            return invalidArgument(f.what() + ": " + p + "attention.sliding_window_pattern " + std::to_string(*v) + ": expected 1..1024");
        period = static_cast<int>(*v);
    }
    layerSpecsByPeriod(c, period, localTheta, globalScale);
    return checkConfig(f.what(), c);
}

TensorLayout gemmaLayout(const DecoderConfig&, bool)
{
    TensorLayout t;
    t.hf.postAttnNorm = "post_attention_layernorm";
    t.hf.ffnNorm = "pre_feedforward_layernorm";
    t.hf.postFfnNorm = "post_feedforward_layernorm";
    t.normPlusOne = true;
    return t;
}

} // namespace attn::detail
