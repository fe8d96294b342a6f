// GPT-2: learned positions, LayerNorm before each sub-block, one fused Q/K/V projection (c_attn), GELU (tanh).
//   h = LN₁(x);  [Q K V] = h·W_attn + b_attn;  x' = x + attention(Q, K, V)·W_proj + b_proj
//   out = x' + GELU(LN₂(x')·W_fc + b_fc)·W_proj' + b_proj'
// Names as the checkpoints name them: Hugging Face's transformer.h.N.attn.c_attn (Conv1D: stored in×out, the
// core's convention already), GGUF's blk.N.attn_qkv (out×in, as every GGUF matrix).
#include "decoder_family.h"

#include "attnscope/preset_io.h"  // checkJsonDepth, clipForMessage

#include <nlohmann/json.hpp>

#include <cmath>

namespace attn::detail {
using json = nlohmann::json;

namespace {
// GPT-2's block as data (blocks.cpp runs it): LayerNorm, learned positions instead of RoPE, GELU (tanh) ungated.
void gpt2Block(DecoderConfig& c)
{
    c.norm = NormKind::Layer;
    c.rope = false;
    c.ffn = FfnKind::GeluTanh;
}
} // namespace

Status gpt2ConfigFromJson(const std::string& text, const std::string& file, DecoderConfig& c)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, 32, file));
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return makeError(StatusCode::ParseError, file + ": not a JSON object");
    c.family = DecoderFamily::Gpt2;
    gpt2Block(c);
    struct Field { const char* key; int* dst; int lo, hi; bool required; };
    const Field fields[] = {
        {"n_layer", &c.layers, 1, 1024, true},       {"n_head", &c.heads, 1, 1024, true},
        {"n_embd", &c.hidden, 1, 65536, true},       {"n_positions", &c.maxPositions, 2, 1 << 24, true},
        {"vocab_size", &c.vocab, 2, 4'000'000, true}, {"n_inner", &c.intermediate, 1, 1 << 20, false},
    };
    for (const Field& f : fields) {
        auto it = j.find(f.key);
        if (it == j.end() || it->is_null()) {
            if (f.required) return invalidArgument(file + ": " + f.key + " is missing");
            continue;
        }
        if (!it->is_number_integer() || it->get<long long>() < f.lo || it->get<long long>() > f.hi)
            return invalidArgument(file + ": " + f.key + ": expected an integer in " + std::to_string(f.lo) + ".." +
                                   std::to_string(f.hi) + ", got " + clipForMessage(it->dump()));
        *f.dst = static_cast<int>(it->get<long long>());
    }
    if (c.intermediate == 0) c.intermediate = 4 * c.hidden;
    if (auto it = j.find("layer_norm_epsilon"); it != j.end()) {
        if (!it->is_number() || !(it->get<double>() > 0) || !(it->get<double>() < 1))
            return invalidArgument(file + ": layer_norm_epsilon: expected a number in (0, 1), got " + clipForMessage(it->dump()));
        c.normEps = static_cast<float>(it->get<double>());
    }
    std::string act = "gelu_new";
    if (auto it = j.find("activation_function"); it != j.end() && !it->is_null()) {
        if (!it->is_string())
            return invalidArgument(file + ": activation_function: expected a string, got " + clipForMessage(it->dump()));
        act = it->get<std::string>();
    }
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast")
        return makeError(StatusCode::Unsupported, file + ": activation_function \"" + clipForMessage(act) +
                                                      "\" is not supported (supported: gelu_new, gelu_pytorch_tanh)");
    if (c.hidden % c.heads != 0)
        return invalidArgument(file + ": n_head " + std::to_string(c.heads) + " does not divide n_embd " + std::to_string(c.hidden));
    c.kvHeads = c.heads;
    c.headDim = c.hidden / c.heads;
    c.tiedEmbeddings = true;  // GPT2LMHeadModel ties lm_head to wte
    return Status::success();
}

Status gpt2ConfigFromGguf(const GgufFile& f, DecoderConfig& c)
{
    c.family = DecoderFamily::Gpt2;
    gpt2Block(c);
    auto getInt = [&](const std::string& key, int lo, int hi, int& out) -> Status {
        auto v = f.getUint(key);
        if (!v) return v.status();
        if (*v < std::uint64_t(lo) || *v > std::uint64_t(hi))
            return invalidArgument(f.what() + ": " + key + ": expected " + std::to_string(lo) + ".." + std::to_string(hi) +
                                   ", got " + std::to_string(*v));
        out = static_cast<int>(*v);
        return Status::success();
    };
    ATTNSCOPE_RETURN_IF_ERROR(getInt("gpt2.block_count", 1, 1024, c.layers));
    ATTNSCOPE_RETURN_IF_ERROR(getInt("gpt2.attention.head_count", 1, 1024, c.heads));
    ATTNSCOPE_RETURN_IF_ERROR(getInt("gpt2.embedding_length", 1, 65536, c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(getInt("gpt2.feed_forward_length", 1, 1 << 20, c.intermediate));
    ATTNSCOPE_RETURN_IF_ERROR(getInt("gpt2.context_length", 2, 1 << 24, c.maxPositions));
    if (f.has("gpt2.attention.layer_norm_epsilon")) {
        auto e = f.getFloat("gpt2.attention.layer_norm_epsilon");
        if (!e) return e.status();
        if (!(*e > 0 && *e < 1)) return invalidArgument(f.what() + ": gpt2.attention.layer_norm_epsilon: expected (0, 1), got " + std::to_string(*e));
        c.normEps = static_cast<float>(*e);
    }
    if (c.hidden % c.heads != 0)
        return invalidArgument(f.what() + ": gpt2.attention.head_count " + std::to_string(c.heads) +
                               " does not divide gpt2.embedding_length " + std::to_string(c.hidden));
    const GgufTensorInfo* emb = f.tensor("token_embd.weight");
    if (emb == nullptr) return invalidArgument(f.what() + ": tensor token_embd.weight is missing");
    if (emb->dims.size() != 2) return invalidArgument(f.what() + ": token_embd.weight: expected 2 dimensions, got " + shapeText(emb->dims));
    c.vocab = static_cast<int>(std::min<std::int64_t>(emb->dims[1], 1 << 30));
    c.kvHeads = c.heads;
    c.headDim = c.hidden / c.heads;
    c.tiedEmbeddings = f.tensor("output.weight") == nullptr;
    return Status::success();
}

Status gpt2Tensors(WeightSource& w, bool gguf, DecoderModel& m)
{
    const DecoderConfig& c = m.config;
    const int M = c.hidden, F = c.intermediate, V = c.vocab, P = c.maxPositions;
    // Hugging Face checkpoints name tensors with or without the "transformer." prefix (GPT2LMHeadModel vs GPT2Model).
    const std::string hf = w.has("transformer.wte.weight") ? "transformer." : "";
    auto name = [&](const std::string& g, const std::string& h) { return gguf ? g : hf + h; };
    ATTNSCOPE_RETURN_IF_ERROR(w.embedding(name("token_embd.weight", "wte.weight"), V, M, "vocab × d_model", m.tokenEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(w.matrix(name("position_embd.weight", "wpe.weight"), P, M, "positions × d_model", m.positionEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(w.vector(name("output_norm.weight", "ln_f.weight"), M, "d_model", m.finalNormGamma));
    ATTNSCOPE_RETURN_IF_ERROR(w.vector(name("output_norm.bias", "ln_f.bias"), M, "d_model", m.finalNormBeta));
    if (gguf && !c.tiedEmbeddings) ATTNSCOPE_RETURN_IF_ERROR(w.embedding("output.weight", V, M, "vocab × d_model", m.lmHead));
    m.layers.resize(static_cast<std::size_t>(c.layers));
    for (int l = 0; l < c.layers; ++l) {
        DecoderLayer& L = m.layers[static_cast<std::size_t>(l)];
        const std::string g = "blk." + std::to_string(l) + ".", h = "h." + std::to_string(l) + ".";
        auto nm = [&](const char* gs, const char* hs) { return name(g + gs, h + hs); };
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("attn_norm.weight", "ln_1.weight"), M, "d_model", L.attnNormGamma));
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("attn_norm.bias", "ln_1.bias"), M, "d_model", L.attnNormBeta));
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("ffn_norm.weight", "ln_2.weight"), M, "d_model", L.ffnNormGamma));
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("ffn_norm.bias", "ln_2.bias"), M, "d_model", L.ffnNormBeta));
        if (gguf) {
            // The fused Q, K, V tensor (3M rows of M): three views of its rows.
            const std::string qkv = nm("attn_qkv.weight", "");
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(qkv, M, 3 * M, "3·d_model × d_model", 0, M, {}, L.Wq));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(qkv, M, 3 * M, "3·d_model × d_model", M, M, {}, L.Wk));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(qkv, M, 3 * M, "3·d_model × d_model", 2 * M, M, {}, L.Wv));
        } else {
            Matrix qkv;  // M×3M, in×out (GPT-2's Conv1D stores in×out)
            ATTNSCOPE_RETURN_IF_ERROR(w.matrix(nm("", "attn.c_attn.weight"), M, 3 * M, "d_model × 3·d_model", qkv));
            L.Wq = WeightMatrix(qkv.leftCols(M));
            L.Wk = WeightMatrix(qkv.middleCols(M, M));
            L.Wv = WeightMatrix(qkv.rightCols(M));
        }
        Vector bqkv;
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("attn_qkv.bias", "attn.c_attn.bias"), 3 * M, "3·d_model", bqkv));
        L.bq = bqkv.head(M);
        L.bk = bqkv.segment(M, M);
        L.bv = bqkv.tail(M);
        if (gguf) {
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(nm("attn_output.weight", ""), M, M, "d_model × d_model", 0, M, {}, L.Wo));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(nm("ffn_up.weight", ""), M, F, "d_ff × d_model", 0, F, {}, L.Wfc));
            ATTNSCOPE_RETURN_IF_ERROR(w.weight(nm("ffn_down.weight", ""), F, M, "d_model × d_ff", 0, M, {}, L.Wproj));
        } else {
            Matrix wo, fc, proj;
            ATTNSCOPE_RETURN_IF_ERROR(w.matrix(nm("", "attn.c_proj.weight"), M, M, "d_model × d_model", wo));
            L.Wo = WeightMatrix(std::move(wo));
            ATTNSCOPE_RETURN_IF_ERROR(w.matrix(nm("", "mlp.c_fc.weight"), M, F, "d_model × d_ff", fc));
            ATTNSCOPE_RETURN_IF_ERROR(w.matrix(nm("", "mlp.c_proj.weight"), F, M, "d_ff × d_model", proj));
            L.Wfc = WeightMatrix(std::move(fc));
            L.Wproj = WeightMatrix(std::move(proj));
        }
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("attn_output.bias", "attn.c_proj.bias"), M, "d_model", L.bo));
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("ffn_up.bias", "mlp.c_fc.bias"), F, "d_ff", L.bfc));
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(nm("ffn_down.bias", "mlp.c_proj.bias"), M, "d_model", L.bproj));
    }
    return Status::success();
}

} // namespace attn::detail
