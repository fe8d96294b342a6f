// libFuzzer target: `model --synthetic CONFIG.json` (attn::syntheticDecoderFromConfig): any decoder config.json made into
// a model with random weights through its family's code, then a forward of three byte tokens. Whatever the bytes:
// a status, or a model whose forward gives a logit per vocabulary entry; never a crash, a hang or a huge allocation
// (the weights are held to 8 MiB here, as the program holds them to three quarters of the memory available).
#include <attnscope/decoder.h>
#include <attnscope/synthetic_decoder.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto m = attn::syntheticDecoderFromConfig(text, "fuzz/config.json", std::size_t(8) << 20);
    if (!m) return 0;
    auto enc = attn::encodeForDecoder(*m, "Hi!", false);
    if (!enc) return 0;
    auto run = attn::runDecoder(*m, enc->ids, attn::DecoderOptions{});
    if (!run) return 0;
    if (run->lastLogits.size() != m->config.vocab) __builtin_trap();
    return 0;
}
