// libFuzzer target: tokenizer.json (attn::Tokenizer::fromTokenizerJson) and, when it loads, encoding a short
// text pair with it. The input is split at its first NUL byte: the JSON before it, the text after it (split
// again at the next NUL into sentence A and B), so one corpus drives both the parser and the tokenizer.
#include <attnscope/tokenizer.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string all(reinterpret_cast<const char*>(data), size);
    const std::size_t cut = all.find('\0');
    const std::string json = all.substr(0, cut);
    attn::Expected<attn::Tokenizer> tok = attn::Tokenizer::fromTokenizerJson(json);
    if (!tok || cut == std::string::npos) return 0;
    const std::string rest = all.substr(cut + 1);
    const std::size_t cut2 = rest.find('\0');
    std::optional<std::string> b;
    if (cut2 != std::string::npos) b = rest.substr(cut2 + 1);
    // 16 tokens: the truncation path runs for most pairs.
    attn::Expected<attn::Encoding> e = tok->encode(rest.substr(0, cut2), b, 16);
    if (e && (e->ids.size() != e->tokens.size() || e->ids.size() != e->typeIds.size() || e->ids.size() > 16))
        __builtin_trap();  // the encoding's arrays must agree and respect the maximum length
    return 0;
}
