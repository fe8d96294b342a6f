// libFuzzer target: the .npy decoder, then the matrix slicing the import applies to what it returns.
#include "io/array_io.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    attn::Expected<app::io::Array> a = app::io::decodeNpy(bytes, "fuzz.npy");
    if (a) {
        app::io::SliceSpec spec;
        spec.transpose = size % 2 == 1;
        (void)app::io::toMatrix(*a, spec, "fuzz.npy");
    }
    return 0;
}
