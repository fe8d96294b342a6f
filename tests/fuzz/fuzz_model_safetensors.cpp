// libFuzzer target: the core's safetensors reader (attn::parseSafetensors, F32/F16/BF16 → float32), which
// loads model weights. Whatever the bytes: a tensor map or a Status.
#include <attnscope/safetensors.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    (void)attn::parseSafetensors(data, size, "fuzz.safetensors");
    return 0;
}
