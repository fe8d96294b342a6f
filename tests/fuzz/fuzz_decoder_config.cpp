// libFuzzer target: a decoder's config.json (attn::parseDecoderConfig: every family of supportedDecoderArchitectures). Whatever the
// bytes, it returns a config whose sizes are consistent, or a status; never a crash or a huge allocation.
#include <attnscope/decoder.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    attn::Expected<attn::DecoderConfig> c = attn::parseDecoderConfig(text);
    if (!c) return 0;
    // A parsed config is one the loader can size tensors from: positive sizes, H_kv dividing H; the llama family's
    // head width is even (RoPE rotates pairs; GPT-2 has no RoPE, so any width works there) and its RoPE factors
    // are finite and positive.
    if (c->layers < 1 || c->heads < 1 || c->kvHeads < 1 || c->heads % c->kvHeads != 0 || c->headDim < 1 ||
        c->hidden < 1 || c->vocab < 1 || c->maxPositions < 1)
        __builtin_trap();
    if (c->family == attn::DecoderFamily::Llama && (c->headDim < 2 || c->headDim % 2 != 0)) __builtin_trap();
    for (const std::vector<float>* v : {&c->ropeFreqFactors, &c->ropeShortFactors, &c->ropeLongFactors})
        for (float f : *v)
            if (!std::isfinite(f) || !(f > 0)) __builtin_trap();
    // LongRoPE: both lists of R/2, a pretraining context, an attention factor the scores can take.
    if (c->longRope() && (c->ropeShortFactors.size() != c->ropeLongFactors.size() ||
                          static_cast<int>(c->ropeLongFactors.size()) != c->rotaryDims() / 2 || c->ropeOriginalContext < 2 ||
                          !(c->ropeAttnFactor > 0) || !(c->ropeAttnFactor <= 16)))
        __builtin_trap();
    return 0;
}
