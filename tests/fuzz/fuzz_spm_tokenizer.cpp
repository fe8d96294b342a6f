// libFuzzer target: the SentencePiece-style BPE tokenizer (attn::SpmTokenizer), both ways in, then encoding and
// decoding arbitrary bytes with it. The input is split at its first NUL byte: the vocabulary before it, the text
// after it. A vocabulary that starts with '{' is a tokenizer.json (fromTokenizerJson); otherwise one token per line
// as "<type digit><piece>" (type 1..6; a line's score is minus its index, so later pieces merge later, with the
// piece's first byte as a tie-breaker) for fromSpec, as GGUF arrays would give it. Seeds: the tiny trained
// tokenizer.json of tests/model/data/spm_tiny and small line vocabularies with texts.
#include <attnscope/spm_tokenizer.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

attn::Expected<attn::SpmTokenizer> fromLines(const std::string& desc, bool prefix)
{
    attn::SpmVocabSpec spec;
    std::size_t start = 0;
    while (start <= desc.size() && spec.tokens.size() < 4096) {
        std::size_t end = desc.find('\n', start);
        if (end == std::string::npos) end = desc.size();
        const std::string line = desc.substr(start, end - start);
        start = end + 1;
        if (line.empty()) continue;
        const int type = line[0] >= '1' && line[0] <= '6' ? line[0] - '0' : 1;
        spec.tokens.push_back(line.size() > 1 ? line.substr(1) : line);
        spec.tokenTypes.push_back(type);
        spec.scores.push_back(-static_cast<float>(spec.tokens.size()) + static_cast<unsigned char>(line.back()) / 512.0f);
    }
    const int n = static_cast<int>(spec.tokens.size());
    spec.bos = n > 1 ? 1 : -1;
    spec.eos = n > 2 ? 2 : -1;
    spec.unk = n > 0 ? 0 : -1;
    spec.addBos = spec.bos >= 0;
    spec.addEos = spec.eos >= 0 && (n % 2 == 0);
    spec.addSpacePrefix = prefix;
    return attn::SpmTokenizer::fromSpec(spec);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string all(reinterpret_cast<const char*>(data), size);
    const std::size_t cut = all.find('\0');
    const std::string desc = all.substr(0, cut);
    attn::Expected<attn::SpmTokenizer> tok = !desc.empty() && desc[0] == '{'
                                                 ? attn::SpmTokenizer::fromTokenizerJson(desc)
                                                 : fromLines(desc, size % 2 == 0);
    if (!tok || cut == std::string::npos) return 0;
    const std::string text = all.substr(cut + 1);
    for (bool special : {true, false}) {
        attn::Expected<attn::Encoding> e = tok->encode(text, special);
        if (!e) continue;  // invalid UTF-8, or a character with no token at all: a Status, not a crash
        if (e->ids.size() != e->tokens.size() || e->ids.size() != e->typeIds.size()) __builtin_trap();
        for (std::size_t i = 0; i < e->ids.size(); ++i) {
            const int id = e->ids[i];
            if (id < 0 || id >= tok->vocabSize()) __builtin_trap();    // every id is in the vocabulary
            if (e->tokens[i] != tok->tokenText(id)) __builtin_trap();  // tokens are the ids' texts
        }
        if (e->warnings.size() > 8) __builtin_trap();                  // warnings are capped
        // decode stays proportionate: at most each id's own text (a byte piece decodes to 1 byte, shown as the 3 of
        // U+FFFD; "▁" to a space). Not a multiple of the text's length: one character without a piece becomes the
        // unknown token, whose text can be long (a 122-byte "<l…unk>" gave 14 640 bytes for 120 characters).
        std::size_t bound = 0;
        for (int id : e->ids) bound += tok->tokenText(id).size() + 1;
        const std::string back = tok->decode(e->ids);
        if (back.size() > bound) __builtin_trap();
    }
    return 0;
}
