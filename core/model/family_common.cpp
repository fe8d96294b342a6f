// What the families' checkpoints share (decoder_family.h): the config.json fields and GGUF keys every family but
// GPT-2 writes, the shape checks, and one loader of the tensors by concept (TensorLayout names them per family).
#include "decoder_family.h"

#include "attnscope/preset_io.h"  // clipForMessage

#include <algorithm>
#include <cmath>

namespace attn::detail {
using json = nlohmann::json;

// -----------------------------------------------------------------------------------------------------
// config.json
// -----------------------------------------------------------------------------------------------------

const json* JsonConfig::find(const char* key) const
{
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

Status JsonConfig::integer(const char* key, int lo, int hi, int& out, bool required) const
{
    const json* v = find(key);
    if (v == nullptr) return required ? invalidArgument(file + ": " + key + " is missing") : Status::success();
    if (!v->is_number_integer() || v->get<long long>() < lo || v->get<long long>() > hi)
        return invalidArgument(file + ": " + key + ": expected an integer in " + std::to_string(lo) + ".." +
                               std::to_string(hi) + ", got " + clipForMessage(v->dump()));
    out = static_cast<int>(v->get<long long>());
    return Status::success();
}

Status JsonConfig::number(const char* key, double lo, double hi, float& out) const
{
    const json* v = find(key);
    if (v == nullptr) return Status::success();
    if (!v->is_number() || !(v->get<double>() > lo) || !(v->get<double>() < hi))
        return invalidArgument(file + ": " + key + ": expected a number in (" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "), got " + clipForMessage(v->dump()));
    out = static_cast<float>(v->get<double>());
    return Status::success();
}

bool JsonConfig::flag(const char* key, bool otherwise) const
{
    const json* v = find(key);
    return v != nullptr && v->is_boolean() ? v->get<bool>() : otherwise;
}

std::string JsonConfig::string(const char* key) const
{
    const json* v = find(key);
    return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

namespace {

// Llama 3's RoPE scaling (rope_scaling.rope_type "llama3"): long wavelengths divided by `factor`, short ones
// kept, a smooth ramp between; stored as a per-pair divisor of the inverse frequency.
void llama3FreqFactors(DecoderConfig& c, double factor, double lowFreq, double highFreq, double originalContext)
{
    const int R = c.rotaryDims(), pairs = R / 2;
    c.ropeFreqFactors.assign(static_cast<std::size_t>(pairs), 1.0f);
    const double lowWavelen = originalContext / lowFreq, highWavelen = originalContext / highFreq;
    for (int i = 0; i < pairs; ++i) {
        const double invFreq = std::pow(double(c.ropeTheta), -2.0 * i / R);
        const double wavelen = 2 * M_PI / invFreq;
        double f = 1.0;
        if (wavelen > lowWavelen) f = factor;
        else if (wavelen >= highWavelen) {
            const double smooth = (originalContext / wavelen - lowFreq) / (highFreq - lowFreq);
            f = 1.0 / ((1 - smooth) / factor + smooth);
        }
        c.ropeFreqFactors[static_cast<std::size_t>(i)] = static_cast<float>(f);
    }
}

// A positive finite number of an object's field, or `otherwise`.
Status objectNumber(const JsonConfig& j, const json& obj, const std::string& where, const char* key, double& out)
{
    auto f = obj.find(key);
    if (f == obj.end() || f->is_null()) return Status::success();
    if (!f->is_number() || !std::isfinite(f->get<double>()) || !(f->get<double>() > 0) || f->get<double>() > 1e12)
        return invalidArgument(j.file + ": " + where + "." + key + ": expected a positive number, got " + clipForMessage(f->dump()));
    out = f->get<double>();
    return Status::success();
}

// LongRoPE's two factor lists (rope_scaling.short_factor / long_factor): R/2 positive finite numbers each.
Status longRopeFactors(const JsonConfig& j, const json& rs, const char* key, int pairs, std::vector<float>& out)
{
    auto f = rs.find(key);
    if (f == rs.end() || !f->is_array())
        return invalidArgument(j.file + ": rope_scaling." + key + ": expected a list of " + std::to_string(pairs) +
                               " numbers (one per rotated pair), got " + (f == rs.end() ? std::string("none") : clipForMessage(f->dump())));
    if (static_cast<long long>(f->size()) != pairs)
        return invalidArgument(j.file + ": rope_scaling." + key + ": expected " + std::to_string(pairs) +
                               " numbers (one per rotated pair), got " + std::to_string(f->size()));
    out.clear();
    for (std::size_t i = 0; i < f->size(); ++i) {
        const json& v = (*f)[i];
        if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0) || v.get<double>() > 1e12)
            return invalidArgument(j.file + ": rope_scaling." + key + "[" + std::to_string(i) +
                                   "]: expected a positive number, got " + clipForMessage(v.dump()));
        out.push_back(static_cast<float>(v.get<double>()));
    }
    return Status::success();
}

// LongRoPE's attention factor where the file gives none: √(1 + ln s / ln L₀) for the context scale s = L / L₀
// (1 when s ≤ 1), as Hugging Face's _compute_longrope_parameters and llama.cpp's Phi-3 converter compute it.
float longRopeDefaultAttnFactor(double scale, double originalContext)
{
    return scale <= 1.0 ? 1.0f : static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(originalContext)));
}

// The formula gives 1.19 for Phi-3-mini-128k (s = 32, L₀ = 4096) and stays under 2 for any s below L₀³; a factor
// past 16 is not a model's (it multiplies every score by its square) and would overflow the scores.
Status checkLongRopeAttnFactor(const std::string& what, float factor)
{
    if (!(factor > 0) || !(factor <= 16))
        return invalidArgument(what + ": expected a LongRoPE attention factor in (0, 16], got " + std::to_string(factor));
    return Status::success();
}

} // namespace

Status commonConfigFromJson(const JsonConfig& j, bool tiedByDefault, DecoderConfig& c)
{
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("num_hidden_layers", 1, 1024, c.layers));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("num_attention_heads", 1, 1024, c.heads));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("num_key_value_heads", 1, 1024, c.kvHeads, false));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("hidden_size", 1, 65536, c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("head_dim", 2, 4096, c.headDim, false));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("intermediate_size", 1, 1 << 20, c.intermediate));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("vocab_size", 2, 4'000'000, c.vocab));
    ATTNSCOPE_RETURN_IF_ERROR(j.integer("max_position_embeddings", 2, 1 << 24, c.maxPositions));
    if (c.norm == NormKind::Layer) ATTNSCOPE_RETURN_IF_ERROR(j.number("layer_norm_eps", 0, 1, c.normEps));
    else ATTNSCOPE_RETURN_IF_ERROR(j.number("rms_norm_eps", 0, 1, c.normEps));
    c.tiedEmbeddings = j.flag("tie_word_embeddings", tiedByDefault);
    // The RoPE base and partial rotary: config.json of transformers < 5 (rope_theta, partial_rotary_factor, GPT-NeoX's
    // rotary_pct and rotary_emb_base), or transformers 5's rope_parameters (one object, or one per layer type:
    // Gemma 3's full_attention / sliding_attention, read by family_gemma.cpp).
    ATTNSCOPE_RETURN_IF_ERROR(j.number("rope_theta", 0, 1e12, c.ropeTheta));
    ATTNSCOPE_RETURN_IF_ERROR(j.number("rotary_emb_base", 0, 1e12, c.ropeTheta));
    float partial = 1;
    ATTNSCOPE_RETURN_IF_ERROR(j.number("partial_rotary_factor", 0, 1.0000001, partial));
    ATTNSCOPE_RETURN_IF_ERROR(j.number("rotary_pct", 0, 1.0000001, partial));
    const json* rp = j.find("rope_parameters");
    if (rp != nullptr && rp->is_object() && !rp->contains("full_attention")) {
        double theta = c.ropeTheta, pf = partial;
        ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rp, "rope_parameters", "rope_theta", theta));
        ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rp, "rope_parameters", "partial_rotary_factor", pf));
        if (pf > 1) return invalidArgument(j.file + ": rope_parameters.partial_rotary_factor: expected at most 1, got " + std::to_string(pf));
        c.ropeTheta = static_cast<float>(theta);
        partial = static_cast<float>(pf);
    }
    // A sliding window (Mistral, Phi-3); Qwen2/3 write one but use it only with use_sliding_window.
    if (auto it = j.find("sliding_window"); it != nullptr && it->is_number_integer() && it->get<long long>() > 0 &&
                                            j.flag("use_sliding_window", true))
        c.slidingWindow = static_cast<int>(std::min<long long>(it->get<long long>(), 1 << 30));
    ATTNSCOPE_RETURN_IF_ERROR(checkConfig(j.file, c));
    if (partial < 1) {
        // Hugging Face: int(head_dim · factor) rotated dimensions.
        c.ropeDims = static_cast<int>(float(c.headDim) * partial);
        if (c.ropeDims < 2 || c.ropeDims % 2 != 0)
            return invalidArgument(j.file + ": partial rotary gives " + std::to_string(c.ropeDims) + " of " +
                                   std::to_string(c.headDim) + " dimensions; expected an even number ≥ 2");
    }
    // rope_scaling (or a rope_parameters object with a rope_type): llama3 and linear; others are refused.
    const json* rs = j.find("rope_scaling");
    if (rs == nullptr && rp != nullptr && rp->is_object() && !rp->contains("full_attention")) rs = rp;
    if (rs != nullptr) {
        if (!rs->is_object()) return invalidArgument(j.file + ": rope_scaling: expected an object, got " + clipForMessage(rs->dump()));
        auto str = [&](const char* key) {
            auto f = rs->find(key);
            return f != rs->end() && f->is_string() ? f->get<std::string>() : std::string();
        };
        std::string type = str("rope_type");
        if (type.empty()) type = str("type");
        if (type == "llama3") {
            double factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "factor", factor));
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "low_freq_factor", low));
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "high_freq_factor", high));
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "original_max_position_embeddings", original));
            if (!(high > low))
                return invalidArgument(j.file + ": rope_scaling: high_freq_factor " + std::to_string(high) +
                                       " must be above low_freq_factor " + std::to_string(low));
            llama3FreqFactors(c, factor, low, high, original);
        } else if (type == "longrope" || type == "su" || (type == "yarn" && c.family == DecoderFamily::Phi3)) {
            // LongRoPE ("su" in the first Phi-3 configs; Phi3Config also reads "yarn" as it). The pretraining
            // context: the top-level original_max_position_embeddings first (as transformers prefers it), else the
            // object's.
            const int pairs = c.rotaryDims() / 2;
            ATTNSCOPE_RETURN_IF_ERROR(longRopeFactors(j, *rs, "short_factor", pairs, c.ropeShortFactors));
            ATTNSCOPE_RETURN_IF_ERROR(longRopeFactors(j, *rs, "long_factor", pairs, c.ropeLongFactors));
            double original = 0;
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "original_max_position_embeddings", original));
            int top = 0;
            ATTNSCOPE_RETURN_IF_ERROR(j.integer("original_max_position_embeddings", 1, 1 << 24, top, false));
            if (top > 0) original = top;
            if (!(original >= 2) || original > double(1 << 24))
                return invalidArgument(j.file + ": rope_scaling " + type +
                                       ": original_max_position_embeddings: expected the pretraining context, 2.." +
                                       std::to_string(1 << 24));
            c.ropeOriginalContext = static_cast<int>(original);
            double factor = double(c.maxPositions) / original, attn = 0;
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "factor", factor));
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "attention_factor", attn));
            c.ropeAttnFactor = attn > 0 ? static_cast<float>(attn) : longRopeDefaultAttnFactor(factor, original);
            ATTNSCOPE_RETURN_IF_ERROR(checkLongRopeAttnFactor(j.file + ": rope_scaling.attention_factor", c.ropeAttnFactor));
        } else if (type == "linear") {
            double factor = 1.0;
            ATTNSCOPE_RETURN_IF_ERROR(objectNumber(j, *rs, "rope_scaling", "factor", factor));
            c.layerSpecs.assign(static_cast<std::size_t>(c.layers), DecoderLayerSpec{c.slidingWindow, c.ropeTheta, float(factor)});
        } else if (!type.empty() && type != "default") {
            return makeError(StatusCode::Unsupported, j.file + ": rope_scaling " + clipForMessage(rs->dump(), 80) +
                                                          " is not supported (supported: none, llama3, linear, longrope)");
        }
    }
    return Status::success();
}

Status checkConfig(const std::string& what, DecoderConfig& c)
{
    if (c.headDim == 0) {
        if (c.hidden % c.heads != 0)
            return invalidArgument(what + ": the head count " + std::to_string(c.heads) + " does not divide the width " +
                                   std::to_string(c.hidden));
        c.headDim = c.hidden / c.heads;
    }
    if (c.kvHeads == 0) c.kvHeads = c.heads;
    if (c.heads % c.kvHeads != 0)
        return invalidArgument(what + ": the key/value head count " + std::to_string(c.kvHeads) +
                               " does not divide the head count " + std::to_string(c.heads));
    if (c.rope) {
        const int R = c.rotaryDims();
        if (R % 2 != 0 || R > c.headDim || R < 2)
            return invalidArgument(what + ": the rotary width " + std::to_string(R) + " must be even and within the head width " +
                                   std::to_string(c.headDim) + " (RoPE rotates pairs)");
    }
    if (!c.layerSpecs.empty() && static_cast<int>(c.layerSpecs.size()) != c.layers)
        return invalidArgument(what + ": " + std::to_string(c.layerSpecs.size()) + " per-layer settings for " +
                               std::to_string(c.layers) + " layers");
    for (int l = 0; l < c.layers; ++l)
        if (c.windowOf(l) > c.maxPositions)
            return invalidArgument(what + ": layer " + std::to_string(l) + "'s sliding window " + std::to_string(c.windowOf(l)) +
                                   " is larger than the context of " + std::to_string(c.maxPositions) + " tokens");
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// GGUF
// -----------------------------------------------------------------------------------------------------

Status commonConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    auto getInt = [&](const std::string& key, int lo, int hi, int& out, bool required = true) -> Status {
        if (!f.has(key)) return required ? invalidArgument(f.what() + ": " + key + ": no such key") : Status::success();
        auto v = f.getUint(key);
        if (!v) return v.status();
        if (*v < std::uint64_t(lo) || *v > std::uint64_t(hi))
            return invalidArgument(f.what() + ": " + key + ": expected " + std::to_string(lo) + ".." + std::to_string(hi) +
                                   ", got " + std::to_string(*v));
        out = static_cast<int>(*v);
        return Status::success();
    };
    auto getFloat = [&](const std::string& key, float& out) -> Status {
        if (!f.has(key)) return Status::success();
        auto v = f.getFloat(key);
        if (!v) return v.status();
        if (!(*v > 0) || !std::isfinite(*v)) return invalidArgument(f.what() + ": " + key + ": expected a positive number, got " + std::to_string(*v));
        out = static_cast<float>(*v);
        return Status::success();
    };
    const std::string p = arch + ".";
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "block_count", 1, 1024, c.layers));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.head_count", 1, 1024, c.heads));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.head_count_kv", 1, 1024, c.kvHeads, false));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "embedding_length", 1, 65536, c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "feed_forward_length", 1, 1 << 20, c.intermediate));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "context_length", 2, 1 << 24, c.maxPositions));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.key_length", 2, 4096, c.headDim, false));
    if (f.has(p + "attention.value_length")) {
        int vd = 0;
        ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.value_length", 2, 4096, vd));
        if (c.headDim != 0 && vd != c.headDim)
            return makeError(StatusCode::Unsupported, f.what() + ": " + p + "attention.value_length " + std::to_string(vd) +
                                                          " differs from key_length " + std::to_string(c.headDim) +
                                                          " (heads of two widths are not supported)");
    }
    if (c.norm == NormKind::Layer) ATTNSCOPE_RETURN_IF_ERROR(getFloat(p + "attention.layer_norm_epsilon", c.normEps));
    else ATTNSCOPE_RETURN_IF_ERROR(getFloat(p + "attention.layer_norm_rms_epsilon", c.normEps));
    ATTNSCOPE_RETURN_IF_ERROR(getFloat(p + "rope.freq_base", c.ropeTheta));
    ATTNSCOPE_RETURN_IF_ERROR(checkConfig(f.what(), c));
    int ropeDims = c.headDim;
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "rope.dimension_count", 2, 4096, ropeDims, false));
    if (ropeDims > c.headDim || ropeDims % 2 != 0)
        return invalidArgument(f.what() + ": " + p + "rope.dimension_count " + std::to_string(ropeDims) +
                               ": expected an even number within the head width " + std::to_string(c.headDim));
    c.ropeDims = ropeDims == c.headDim ? 0 : ropeDims;
    const GgufTensorInfo* emb = f.tensor("token_embd.weight");
    if (emb == nullptr) return invalidArgument(f.what() + ": tensor token_embd.weight is missing");
    if (emb->dims.size() != 2) return invalidArgument(f.what() + ": token_embd.weight: expected 2 dimensions, got " + shapeText(emb->dims));
    c.vocab = static_cast<int>(std::min<std::int64_t>(emb->dims[1], 1 << 30));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "vocab_size", 2, 4'000'000, c.vocab, false));
    c.tiedEmbeddings = f.tensor("output.weight") == nullptr;
    // Per-pair divisors of the inverse frequencies: Llama 3's rope_freqs, or LongRoPE's two sets (llama.cpp's Phi-3
    // converter: rope_factors_short/long, rope.scaling.original_context_length, rope.scaling.attn_factor).
    auto factors = [&](const char* name, std::vector<float>& out) -> Status {
        const GgufTensorInfo* t = f.tensor(name);
        if (t == nullptr) return Status::success();
        const int pairs = c.rotaryDims() / 2;
        if (t->dims.size() != 1 || t->dims[0] != pairs)
            return invalidArgument(f.what() + ": " + name + ": expected " + std::to_string(pairs) + " (rotary width / 2), got " +
                                   shapeText(t->dims));
        auto v = f.dequantize(name);
        if (!v) return v.status();
        for (std::size_t i = 0; i < v->size(); ++i)
            if (!std::isfinite((*v)[i]) || !((*v)[i] > 0))
                return invalidArgument(f.what() + ": " + name + "[" + std::to_string(i) + "]: expected a positive factor, got " +
                                       std::to_string((*v)[i]));
        out = std::move(*v);
        return Status::success();
    };
    ATTNSCOPE_RETURN_IF_ERROR(factors("rope_freqs.weight", c.ropeFreqFactors));
    ATTNSCOPE_RETURN_IF_ERROR(factors("rope_factors_short.weight", c.ropeShortFactors));
    ATTNSCOPE_RETURN_IF_ERROR(factors("rope_factors_long.weight", c.ropeLongFactors));
    if (c.ropeShortFactors.empty() != c.ropeLongFactors.empty())
        return invalidArgument(f.what() + ": LongRoPE: expected both rope_factors_short.weight and rope_factors_long.weight, got only " +
                               (c.ropeShortFactors.empty() ? "rope_factors_long.weight" : "rope_factors_short.weight"));
    if (c.longRope()) {
        if (!c.ropeFreqFactors.empty())
            return invalidArgument(f.what() + ": rope_freqs.weight beside LongRoPE's rope_factors_short/long: expected one of the two");
        // Without the key llama.cpp never leaves the short set (its original context is then the training context).
        c.ropeOriginalContext = c.maxPositions;
        ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "rope.scaling.original_context_length", 2, c.maxPositions, c.ropeOriginalContext, false));
        c.ropeAttnFactor = longRopeDefaultAttnFactor(double(c.maxPositions) / c.ropeOriginalContext, c.ropeOriginalContext);
        ATTNSCOPE_RETURN_IF_ERROR(getFloat(p + "rope.scaling.attn_factor", c.ropeAttnFactor));
        ATTNSCOPE_RETURN_IF_ERROR(checkLongRopeAttnFactor(f.what() + ": " + p + "rope.scaling.attn_factor", c.ropeAttnFactor));
    }
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// Tensors
// -----------------------------------------------------------------------------------------------------

namespace {

// Hugging Face row (head h, half s, index i) was written by llama.cpp's converter at (h, i, s): the stored row of
// each Hugging Face row, for `rows` rows of `heads` heads.
std::vector<int> unpermuteOrder(int rows, int heads)
{
    const int D = rows / heads, half = D / 2;
    std::vector<int> order(static_cast<std::size_t>(rows));
    for (int h = 0; h < heads; ++h)
        for (int s = 0; s < 2; ++s)
            for (int i = 0; i < half; ++i) order[static_cast<std::size_t>(h * D + s * half + i)] = h * D + 2 * i + s;
    return order;
}

Vector unpermuted(const Vector& b, int heads)
{
    const std::vector<int> order = unpermuteOrder(static_cast<int>(b.size()), heads);
    Vector out(b.size());
    for (Eigen::Index j = 0; j < b.size(); ++j) out[j] = b[order[static_cast<std::size_t>(j)]];
    return out;
}

// GPT-NeoX's Hugging Face query_key_value: per head h its q, k, v rows of D each. The stored rows of part
// `part` (0 q, 1 k, 2 v) of every head, in output order.
std::vector<int> perHeadOrder(int heads, int D, int part)
{
    std::vector<int> order(static_cast<std::size_t>(heads) * D);
    for (int h = 0; h < heads; ++h)
        for (int d = 0; d < D; ++d) order[static_cast<std::size_t>(h * D + d)] = h * 3 * D + part * D + d;
    return order;
}

} // namespace

Status familyTensors(WeightSource& w, bool gguf, const TensorLayout& t, DecoderModel& m)
{
    const DecoderConfig& c = m.config;
    const HfNames& hf = t.hf;
    const int M = c.hidden, F = c.intermediate, V = c.vocab, D = c.headDim, QD = c.heads * D, KD = c.kvHeads * D;
    const bool layerNorm = c.norm == NormKind::Layer;
    // A norm's γ (with Hugging Face Gemma's 1 + w) and, for LayerNorm, β.
    auto norm = [&](const std::string& name, int n, const char* dims, Vector& gamma, Vector* beta) -> Status {
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(name + ".weight", n, dims, gamma));
        if (t.normPlusOne && !gguf) gamma.array() += 1.0f;
        if (layerNorm && beta != nullptr) ATTNSCOPE_RETURN_IF_ERROR(w.vector(name + ".bias", n, dims, *beta));
        return Status::success();
    };
    auto optionalBias = [&](const std::string& name, int n, const char* dims, Vector& b) -> Status {
        if (!w.has(name + ".bias")) return Status::success();
        return w.vector(name + ".bias", n, dims, b);
    };
    ATTNSCOPE_RETURN_IF_ERROR(w.embedding(gguf ? "token_embd.weight" : hf.embed + ".weight", V, M, "vocab × d_model", m.tokenEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(norm(gguf ? "output_norm" : hf.finalNorm, M, "d_model", m.finalNormGamma, &m.finalNormBeta));
    if (!c.tiedEmbeddings)
        ATTNSCOPE_RETURN_IF_ERROR(w.embedding(gguf ? "output.weight" : hf.lmHead + ".weight", V, M, "vocab × d_model", m.lmHead));
    m.layers.resize(static_cast<std::size_t>(c.layers));
    for (int l = 0; l < c.layers; ++l) {
        DecoderLayer& L = m.layers[static_cast<std::size_t>(l)];
        const std::string p = gguf ? "blk." + std::to_string(l) + "." : hf.layer + std::to_string(l) + ".";
        auto name = [&](const char* g, const std::string& h) { return p + (gguf ? std::string(g) : h); };
        if (c.preNorms) {
            ATTNSCOPE_RETURN_IF_ERROR(norm(name("attn_norm", hf.attnNorm), M, "d_model", L.attnNormGamma, &L.attnNormBeta));
            ATTNSCOPE_RETURN_IF_ERROR(norm(name("ffn_norm", hf.ffnNorm), M, "d_model", L.ffnNormGamma, &L.ffnNormBeta));
        }
        if (c.postNorms) {
            ATTNSCOPE_RETURN_IF_ERROR(norm(name("post_attention_norm", hf.postAttnNorm), M, "d_model", L.postAttnNormGamma, nullptr));
            ATTNSCOPE_RETURN_IF_ERROR(norm(name("post_ffw_norm", hf.postFfnNorm), M, "d_model", L.postFfnNormGamma, nullptr));
        }
        if (t.fusedQkv) {
            // One tensor of QD + 2·KD rows: three views of its rows.
            const std::string qkv = name("attn_qkv", hf.qkv);
            const int total = QD + 2 * KD;
            const char* dims = "(H·D + 2·H_kv·D) × d_model";
            if (t.hfQkvPerHead && !gguf) {
                if (c.kvHeads != c.heads)
                    return invalidArgument(w.where(qkv) + ": " + qkv + ": a per-head fused Q/K/V needs as many key/value heads as heads");
                ATTNSCOPE_RETURN_IF_ERROR(w.weights(qkv + ".weight", M, total, dims,
                                                    {{0, QD, perHeadOrder(c.heads, D, 0), &L.Wq},
                                                     {0, KD, perHeadOrder(c.heads, D, 1), &L.Wk},
                                                     {0, KD, perHeadOrder(c.heads, D, 2), &L.Wv}}));
            } else {
                ATTNSCOPE_RETURN_IF_ERROR(w.weights(qkv + ".weight", M, total, dims,
                                                    {{0, QD, {}, &L.Wq}, {QD, KD, {}, &L.Wk}, {QD + KD, KD, {}, &L.Wv}}));
            }
            if (w.has(qkv + ".bias")) {
                Vector b;
                ATTNSCOPE_RETURN_IF_ERROR(w.vector(qkv + ".bias", total, "H·D + 2·H_kv·D", b));
                if (t.hfQkvPerHead && !gguf) {
                    L.bq.resize(QD);
                    L.bk.resize(KD);
                    L.bv.resize(KD);
                    for (int h = 0; h < c.heads; ++h) {
                        L.bq.segment(h * D, D) = b.segment(h * 3 * D, D);
                        L.bk.segment(h * D, D) = b.segment(h * 3 * D + D, D);
                        L.bv.segment(h * D, D) = b.segment(h * 3 * D + 2 * D, D);
                    }
                } else {
                    L.bq = b.head(QD);
                    L.bk = b.segment(QD, KD);
                    L.bv = b.tail(KD);
                }
            }
        } else {
            // The un-permutation is a row order of the view: output column j is read from stored row order[j].
            const std::vector<int> qOrder = t.unpermuteQK ? unpermuteOrder(QD, c.heads) : std::vector<int>{};
            const std::vector<int> kOrder = t.unpermuteQK ? unpermuteOrder(KD, c.kvHeads) : std::vector<int>{};
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_q", hf.q) + ".weight", M, QD, "H·D × d_model", 0, QD, qOrder, L.Wq));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_k", hf.k) + ".weight", M, KD, "H_kv·D × d_model", 0, KD, kOrder, L.Wk));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_v", hf.v) + ".weight", M, KD, "H_kv·D × d_model", 0, KD, {}, L.Wv));
            // Biases of Q, K, V where the file has them (Qwen2 always, Llama with attention_bias).
            ATTNSCOPE_RETURN_IF_ERROR(optionalBias(name("attn_q", hf.q), QD, "H·D", L.bq));
            ATTNSCOPE_RETURN_IF_ERROR(optionalBias(name("attn_k", hf.k), KD, "H_kv·D", L.bk));
            ATTNSCOPE_RETURN_IF_ERROR(optionalBias(name("attn_v", hf.v), KD, "H_kv·D", L.bv));
            if (t.unpermuteQK) {
                if (L.bq.size() > 0) L.bq = unpermuted(L.bq, c.heads);
                if (L.bk.size() > 0) L.bk = unpermuted(L.bk, c.kvHeads);
            }
        }
        if (c.qkNorm != QkNorm::None) {
            const bool whole = c.qkNorm == QkNorm::Whole;
            ATTNSCOPE_RETURN_IF_ERROR(norm(name("attn_q_norm", hf.qNorm), whole ? QD : D, whole ? "H·D" : "head width", L.qNormGamma, nullptr));
            ATTNSCOPE_RETURN_IF_ERROR(norm(name("attn_k_norm", hf.kNorm), whole ? KD : D, whole ? "H_kv·D" : "head width", L.kNormGamma, nullptr));
        }
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_output", hf.o) + ".weight", QD, M, "d_model × H·D", 0, M, {}, L.Wo));
        ATTNSCOPE_RETURN_IF_ERROR(optionalBias(name("attn_output", hf.o), M, "d_model", L.bo));
        if (c.gatedFfn()) {
            if (t.fusedGateUp) {
                const std::string gu = name("ffn_up", hf.gateUp) + ".weight";
                ATTNSCOPE_RETURN_IF_ERROR(w.weights(gu, M, 2 * F, "2·d_ff × d_model", {{0, F, {}, &L.Wgate}, {F, F, {}, &L.Wup}}));
            } else {
                ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_gate", hf.gate) + ".weight", M, F, "d_ff × d_model", 0, F, {}, L.Wgate));
                ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_up", hf.up) + ".weight", M, F, "d_ff × d_model", 0, F, {}, L.Wup));
            }
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_down", hf.down) + ".weight", F, M, "d_model × d_ff", 0, M, {}, L.Wdown));
        } else {
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_up", hf.up) + ".weight", M, F, "d_ff × d_model", 0, F, {}, L.Wfc));
            ATTNSCOPE_RETURN_IF_ERROR(optionalBias(name("ffn_up", hf.up), F, "d_ff", L.bfc));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_down", hf.down) + ".weight", F, M, "d_model × d_ff", 0, M, {}, L.Wproj));
            ATTNSCOPE_RETURN_IF_ERROR(optionalBias(name("ffn_down", hf.down), M, "d_model", L.bproj));
        }
    }
    return Status::success();
}

} // namespace attn::detail
