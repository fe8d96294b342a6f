// GPT-NeoX (Pythia): LayerNorm with biases, one fused Q/K/V projection, partial rotary, a parallel residual,
// an ungated GELU feed-forward, biases everywhere, an untied unembedding.
//   out = x + attention(LN₁(x))·W^O + b^O + W_down(GELU(W_up·LN₂(x) + b_up)) + b_down
// RoPE turns the first rotary_pct·D dimensions of each head (Pythia: 16 of 64); the rest pass through.
// Hugging Face's query_key_value is per head [q k v]; llama.cpp's converter reorders it to Q | K | V (GGUF attn_qkv).
// GELU is erf's, as Hugging Face's "gelu" (llama.cpp uses the tanh approximation: a small gap between the two).
#include "decoder_family.h"

#include "attnscope/preset_io.h"  // clipForMessage

namespace attn::detail {

Status neoxConfigFromJson(const JsonConfig& j, DecoderConfig& c)
{
    c.family = DecoderFamily::GptNeoX;
    c.norm = NormKind::Layer;
    c.ffn = FfnKind::GeluErf;
    c.parallelResidual = j.flag("use_parallel_residual", true);
    if (const std::string act = j.string("hidden_act"); j.find("hidden_act") != nullptr && act != "gelu")
        return makeError(StatusCode::Unsupported, j.file + ": hidden_act \"" + clipForMessage(act) + "\" is not supported (supported: gelu)");
    if (j.find("rotary_pct") == nullptr && j.find("partial_rotary_factor") == nullptr && j.find("rope_parameters") == nullptr) {
        // transformers' default rotary_pct is 0.25.
        nlohmann::json copy = j.j;
        copy["rotary_pct"] = 0.25;
        return commonConfigFromJson(JsonConfig{copy, j.file}, false, c);
    }
    return commonConfigFromJson(j, false, c);
}

Status neoxConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    c.family = DecoderFamily::GptNeoX;
    c.norm = NormKind::Layer;
    c.ffn = FfnKind::GeluErf;
    c.parallelResidual = true;
    if (f.has(arch + ".use_parallel_residual")) {
        auto b = f.getBool(arch + ".use_parallel_residual");
        if (!b) return b.status();
        c.parallelResidual = *b;
    }
    return commonConfigFromGguf(f, arch, c);
}

TensorLayout neoxLayout(const DecoderConfig&, bool)
{
    TensorLayout t;
    HfNames& n = t.hf;
    n.embed = "gpt_neox.embed_in";
    n.finalNorm = "gpt_neox.final_layer_norm";
    n.lmHead = "embed_out";
    n.layer = "gpt_neox.layers.";
    n.qkv = "attention.query_key_value";
    n.o = "attention.dense";
    n.ffnNorm = "post_attention_layernorm";
    n.up = "mlp.dense_h_to_4h";
    n.down = "mlp.dense_4h_to_h";
    t.fusedQkv = true;
    t.hfQkvPerHead = true;
    return t;
}

} // namespace attn::detail
