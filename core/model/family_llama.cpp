// The llama family (Llama 2/3, Mistral, Qwen2, Qwen3, SmolLM2): RMSNorm, RoPE, grouped-query attention, SwiGLU.
//   h = RMSNorm(x)·g₁;  Q, K, V = h·W^Q (+b), h·W^K (+b), h·W^V (+b);  Q, K = RoPE(Q), RoPE(K)
//   x' = x + attention(Q, K, V)·W^O;  out = x' + (SiLU(RMSNorm(x')·g₂·W_gate) ⊙ (RMSNorm(x')·g₂·W_up))·W_down
// Qwen3: no Q/K/V biases, and an RMSNorm of each head's q and k (over D) before RoPE (QK-norm); its head width
// comes from head_dim / attention.key_length (128 on a 1024-wide Qwen3-0.6B, not 1024/16).
// Names as the checkpoints name them: Hugging Face's model.layers.N.self_attn.q_proj, GGUF's blk.N.attn_q.
#include "decoder_family.h"

namespace attn::detail {

Status llamaConfigFromJson(const JsonConfig& j, DecoderConfig& c)
{
    c.family = DecoderFamily::Llama;
    if (const std::string act = j.string("hidden_act"); j.find("hidden_act") != nullptr && act != "silu")
        return makeError(StatusCode::Unsupported, j.file + ": hidden_act \"" + act + "\" is not supported (supported: silu)");
    if (c.architecture == "qwen3") c.qkNorm = QkNorm::PerHead;
    return commonConfigFromJson(j, false, c);
}

Status llamaConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    c.family = DecoderFamily::Llama;
    if (arch == "qwen3") c.qkNorm = QkNorm::PerHead;
    return commonConfigFromGguf(f, arch, c);
}

TensorLayout llamaLayout(const DecoderConfig& c, bool gguf)
{
    TensorLayout t;
    // llama.cpp's converter interleaves each head's two halves of Q and K for architecture llama (so that adjacent
    // rows rotate together); qwen2 and qwen3 GGUFs keep Hugging Face's order. After this, one RoPE (rotate-half
    // pairing) serves all.
    t.unpermuteQK = gguf && c.architecture == "llama";
    return t;
}

} // namespace attn::detail
