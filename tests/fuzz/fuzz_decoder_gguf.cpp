// libFuzzer target: a decoder from a GGUF file (attn::loadDecoder): the families' keys (per-layer windows and RoPE
// bases, soft-caps, partial rotary, QK-norm, post-norms, fused Q/K/V and gate/up, parallel residual) and their
// tensors' shapes (LongRoPE's factor lists among them), then a forward, an append and a lazy forward of a few tokens on what loaded. Whatever the bytes:
// a model or a Status, never a crash, a hang or an out-of-bounds read. Seeds: micro GGUFs of each family (16 tokens,
// width 8) written by tests/model/make_decoder_goldens.py --only hostile.
#include <attnscope/decoder.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    // loadDecoder maps a file: the input goes to one of this process's own.
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/fuzz_decoder_gguf_" + std::to_string(getpid()) + ".gguf";
    }();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    auto model = attn::loadDecoder(path);
    // Removed at once, so that no file is left behind when libFuzzer exits (at -max_total_time it does not return
    // here): a mapping outlives its file's name.
    std::remove(path.c_str());
    if (!model) return 0;
    const attn::DecoderConfig& c = model->config;
    // Keep each run small: a file can name a large (but real) model.
    if (double(c.hidden) * c.vocab > 4e6 || c.layers > 8 || c.maxPositions < 4) return 0;
    std::vector<int> ids = {0, 1 % c.vocab, 2 % c.vocab};
    // LongRoPE: up to its pretraining context, so that the append crosses into the long factors.
    if (c.longRope() && c.ropeOriginalContext < c.maxPositions && c.ropeOriginalContext <= 64)
        while (static_cast<int>(ids.size()) < c.ropeOriginalContext) ids.push_back(static_cast<int>(ids.size()) % c.vocab);
    auto run = attn::runDecoder(*model, ids);
    if (run) (void)attn::appendTokens(*model, {3 % c.vocab}, *run);
    attn::DecoderOptions lazy;
    lazy.lazy = true;
    (void)attn::runDecoder(*model, ids, lazy);
    return 0;
}
