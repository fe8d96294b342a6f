// libFuzzer target: the session parser (JSON text → attn::Session, with every field check and validate()).
// Whatever the bytes, parseSession must return a value or a Status: no crash, no sanitizer report, no hang.
#include <attnscope/preset_io.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    attn::Expected<attn::Session> s = attn::parseSession(text, "fuzz.json");
    if (s) {
        // A session that loads must also save and load again (what `import` and the window rely on).
        attn::Expected<attn::Session> again = attn::parseSession(attn::sessionToJson(*s), "resaved.json");
        if (!again) __builtin_trap();
    }
    return 0;
}
