// The BERT WordPiece tokenizer, as a Hugging Face tokenizer.json (or a vocab.txt) describes it.
//
// Part of attnscope_model (core/model/). Pipeline (what Hugging Face tokenizers does for BERT models):
//   normaliser: drop NUL, U+FFFD and control characters, whitespace → ' ', spaces around CJK ideographs,
//               strip accents (NFD, drop non-spacing marks) and lowercase (both per tokenizer.json);
//   pre-tokeniser: split on whitespace, every punctuation character its own word;
//   WordPiece: greedy longest match, "##" continuation pieces, [UNK] for a word that does not split or is
//              longer than max_input_chars_per_word (100) characters;
//   template: [CLS] A [SEP] (type 0) or [CLS] A [SEP] B [SEP] (A types 0, B types 1).
// Unicode data (case mapping, NFD, general categories) comes from ICU.
#pragma once

#include "attnscope/status.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace attn {

struct Encoding {
    std::vector<int> ids;              // n token ids
    std::vector<std::string> tokens;   // n token strings ("[CLS]", "hello", "##s", …)
    std::vector<int> typeIds;          // n token type ids (0 for A, 1 for B)
    bool truncated = false;            // true when the text did not fit the maximum length
    std::vector<std::string> warnings; // e.g. the truncation message
};

class Tokenizer {
public:
    // From the text of a tokenizer.json: model.type must be "WordPiece"; the normaliser, when present, must be
    // a BertNormalizer (its lowercase / strip_accents / handle_chinese_chars / clean_text flags are honoured).
    // ParseError / Unsupported name what is wrong, e.g. "tokenizer.json: model.type \"BPE\" is not supported
    // (supported: WordPiece)".
    static Expected<Tokenizer> fromTokenizerJson(const std::string& text);
    // From a vocab.txt (one token per line, id = line number), BERT uncased defaults.
    static Expected<Tokenizer> fromVocabTxt(const std::string& text, bool lowercase = true);

    // Tokenises A (and B when given) into the template above, truncated to `maxLength` tokens (longest first
    // for pairs; maxLength ≥ 3 for a pair, ≥ 2 otherwise) with a warning saying so.
    // InvalidArgument when a text is not valid UTF-8 (naming the byte offset).
    Expected<Encoding> encode(const std::string& a, const std::optional<std::string>& b, int maxLength) const;

    // Special tokens typed in the text ("[MASK]", "[SEP]", tokenizer.json's added_tokens whose normalized is
    // false; case-sensitive) stay one token each, as in Hugging Face; the text between them is tokenised as usual.

    // The WordPiece tokens of one text without special tokens (for tests and the window's token list).
    Expected<std::vector<std::string>> tokenize(const std::string& text) const;

    int vocabSize() const { return static_cast<int>(m_idToToken.size()); }

private:
    std::unordered_map<std::string, int> m_vocab;
    std::vector<std::string> m_idToToken;
    std::string m_unk = "[UNK]", m_cls = "[CLS]", m_sep = "[SEP]", m_prefix = "##";
    int m_maxWordChars = 100;
    bool m_lowercase = true, m_stripAccents = true, m_chinese = true, m_clean = true;
    // Tokens matched verbatim in the raw text before normalisation, each one token (Hugging Face's added
    // tokens with normalized = false, e.g. "[MASK]"; from vocab.txt the BERT specials in the vocabulary).
    std::vector<std::string> m_added;

    Status finish();
    Expected<std::vector<std::string>> pieces(const std::string& text) const;  // m_added split, then WordPiece
    Expected<std::vector<std::string>> wordPieces(const std::string& text) const;
};

} // namespace attn
