// libFuzzer target: a byte-level BPE tokenizer.json (attn::BpeTokenizer::fromTokenizerJson) and, when it loads,
// encoding and decoding a text with it. The input is split at its first NUL byte: the JSON before it, the text
// after it, so one corpus drives both the parser and the tokenizer.
#include <attnscope/bpe_tokenizer.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string all(reinterpret_cast<const char*>(data), size);
    const std::size_t cut = all.find('\0');
    attn::Expected<attn::BpeTokenizer> tok = attn::BpeTokenizer::fromTokenizerJson(all.substr(0, cut));
    if (!tok || cut == std::string::npos) return 0;
    const std::string text = all.substr(cut + 1);
    for (bool special : {false, true}) {
        attn::Expected<attn::Encoding> e = tok->encode(text, special);
        if (!e) continue;
        if (e->ids.size() != e->tokens.size()) __builtin_trap();  // ids and their texts must agree
        for (int id : e->ids)
            if (id < 0 || id >= tok->vocabSize()) __builtin_trap();  // every id inside the vocabulary
        (void)tok->decode(e->ids);
    }
    return 0;
}
