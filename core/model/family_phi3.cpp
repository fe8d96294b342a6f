// Phi-3: the llama block with fused projections: one Q|K|V tensor (rows Q, then K, then V) and one gate|up tensor
// of 2F rows (the first F the gate). Partial rotary where the file says so (Phi-4-mini: 3/4 of each head).
// Hugging Face applies config.json's sliding_window (2047 on Phi-3-mini-4k); llama.cpp ignores
// phi3.attention.sliding_window. We follow each format's reference: the window from config.json, none from GGUF.
// LongRoPE (the 128k variants, Phi-3.5, Phi-4-mini: rope_scaling "longrope", GGUF rope_factors_short/long) is read by
// the common readers (family_common.cpp) and applied by the shared RoPE (blocks.cpp, ropeRows).
#include "decoder_family.h"

namespace attn::detail {

Status phi3ConfigFromJson(const JsonConfig& j, DecoderConfig& c)
{
    c.family = DecoderFamily::Phi3;
    if (const std::string act = j.string("hidden_act"); j.find("hidden_act") != nullptr && act != "silu")
        return makeError(StatusCode::Unsupported, j.file + ": hidden_act \"" + act + "\" is not supported (supported: silu)");
    // A window no shorter than the context hides nothing (Phi-3-mini-128k writes 262144 for 131072).
    nlohmann::json copy = j.j;
    if (auto w = copy.find("sliding_window"), m = copy.find("max_position_embeddings");
        w != copy.end() && m != copy.end() && w->is_number_integer() && m->is_number_integer() && w->get<long long>() >= m->get<long long>())
        copy.erase("sliding_window");
    return commonConfigFromJson(JsonConfig{copy, j.file}, false, c);
}

Status phi3ConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    c.family = DecoderFamily::Phi3;
    return commonConfigFromGguf(f, arch, c);
}

TensorLayout phi3Layout(const DecoderConfig&, bool)
{
    TensorLayout t;
    t.hf.qkv = "self_attn.qkv_proj";
    t.hf.gateUp = "mlp.gate_up_proj";
    t.fusedQkv = true;
    t.fusedGateUp = true;
    return t;
}

} // namespace attn::detail
