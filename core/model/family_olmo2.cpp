// OLMo 2: no norm before the sublayers, an RMSNorm after each (post-norms only), and an RMSNorm of the whole Q and
// K projections (H·D and H_kv·D wide, before they are split into heads and rotated). SwiGLU, untied, no biases.
//   h = x + RMSNorm_post₁(attention(x));  out = h + RMSNorm_post₂(W_down(SiLU(W_gate h) ⊙ W_up h))
#include "decoder_family.h"

namespace attn::detail {

namespace {
void olmo2Block(DecoderConfig& c)
{
    c.family = DecoderFamily::Olmo2;
    c.preNorms = false;
    c.postNorms = true;
    c.qkNorm = QkNorm::Whole;
}
} // namespace

Status olmo2ConfigFromJson(const JsonConfig& j, DecoderConfig& c)
{
    olmo2Block(c);
    if (const std::string act = j.string("hidden_act"); j.find("hidden_act") != nullptr && act != "silu")
        return makeError(StatusCode::Unsupported, j.file + ": hidden_act \"" + act + "\" is not supported (supported: silu)");
    if (j.find("sliding_window") != nullptr || j.find("layer_types") != nullptr)
        return makeError(StatusCode::Unsupported, j.file + ": OLMo 3's sliding-window layers are not supported");
    return commonConfigFromJson(j, false, c);
}

Status olmo2ConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    olmo2Block(c);
    if (f.has(arch + ".attention.sliding_window"))
        return makeError(StatusCode::Unsupported, f.what() + ": OLMo 3's sliding-window layers are not supported");
    return commonConfigFromGguf(f, arch, c);
}

TensorLayout olmo2Layout(const DecoderConfig&, bool)
{
    TensorLayout t;
    t.hf.attnNorm.clear();
    t.hf.ffnNorm.clear();
    t.hf.postAttnNorm = "post_attention_layernorm";
    t.hf.postFfnNorm = "post_feedforward_layernorm";
    return t;
}

} // namespace attn::detail
