// libFuzzer target: safetensors files held in memory: the header (listing), then every listed tensor.
#include "io/array_io.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    attn::Expected<std::vector<app::io::TensorInfo>> list = app::io::listSafetensorsBytes(bytes, "fuzz.safetensors");
    if (!list) return 0;
    for (std::size_t i = 0; i < list->size() && i < 8; ++i) {
        attn::Expected<app::io::Array> a = app::io::decodeSafetensors(bytes, (*list)[i].name, "fuzz.safetensors");
        if (a) (void)app::io::toMatrix(*a, {}, "fuzz.safetensors");
    }
    return 0;
}
