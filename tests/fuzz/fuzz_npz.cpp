// libFuzzer target: .npz (zip) archives held in memory: the listing, then every listed array.
#include "io/array_io.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    attn::Expected<std::vector<std::string>> names = app::io::listNpzBytes(bytes, "fuzz.npz");
    if (!names) return 0;
    for (std::size_t i = 0; i < names->size() && i < 8; ++i)
        (void)app::io::decodeNpz(bytes, (*names)[i], "fuzz.npz");
    return 0;
}
