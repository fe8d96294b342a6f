// libFuzzer target: a byte-level BPE tokenizer.json (attn::BpeTokenizer::fromTokenizerJson) and, when it loads,
// encoding and decoding arbitrary bytes with it. The input is split at its first NUL byte: the JSON before it,
// the text after it (seeds: the tiny gpt2 / llama3 / qwen2 fixtures of tests/model/data with a few texts).
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
    for (bool special : {true, false}) {
        attn::Expected<attn::Encoding> e = tok->encode(text, special);
        if (!e) continue;  // invalid UTF-8, or a pattern that gave up: a Status, not a crash
        if (e->ids.size() != e->tokens.size() || e->ids.size() != e->typeIds.size()) __builtin_trap();
        std::string pieces;
        for (std::size_t i = 0; i < e->ids.size(); ++i) {
            const int id = e->ids[i];
            if (id < 0 || id >= tok->vocabSize()) __builtin_trap();      // every id is in the vocabulary
            if (e->tokens[i] != tok->tokenText(id)) __builtin_trap();    // tokens are the ids' texts
            pieces += tok->decode({id});
        }
        if (pieces != tok->decode(e->ids)) __builtin_trap();             // decode is per-token concatenation
    }
    return 0;
}
