// libFuzzer target: the GGUF reader (attn::GgufFile::parse) and the GGML dequantizers. Whatever the bytes: a
// file or a Status; every metadata value and every tensor of a file that parses is then read, so a lie the
// parser let through shows up as an out-of-bounds read (ASan) here.
#include <attnscope/gguf.h>

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    auto f = attn::GgufFile::parse(data, size, "fuzz.gguf");
    if (!f) return 0;
    volatile std::uint64_t sink = 0;
    for (const auto& [key, v] : f->metadata()) {
        sink = sink + v.describe().size();
        if (v.type == attn::GgufValueType::Array)
            for (std::uint64_t k = 0; k < v.count; ++k) sink = sink + v.element(k).u;
        (void)f->getIntArray(key);
        (void)f->getFloatArray(key);
        (void)f->getStringArray(key);
    }
    std::vector<float> out;
    for (const attn::GgufTensorInfo& t : f->tensors()) {
        // Bounded: a tensor's bytes are inside the (≤ max_len) input, but a K-quant expands 256 values from 84
        // bytes, so cap the floats to keep each run small.
        if (t.elements() > (std::int64_t(1) << 22)) continue;
        out.resize(static_cast<std::size_t>(t.elements()));
        (void)f->dequantize(t, out.data(), out.size());
    }
    return 0;
}
