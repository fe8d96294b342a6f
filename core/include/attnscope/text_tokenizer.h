// The tokenizer of a decoder model: byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM2; attnscope/bpe_tokenizer.h) or
// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama, Gemma, Phi-3; attnscope/spm_tokenizer.h), behind the
// methods both have, so that DecoderModel and its callers need not know which one a model uses.
//
// Part of attnscope_model (core/model/). A default-constructed TextTokenizer holds an empty byte-level BPE
// tokenizer (vocabSize() 0; encode returns InvalidArgument), as DecoderModel's member did before it could hold
// either kind.
#pragma once

#include "attnscope/bpe_tokenizer.h"
#include "attnscope/spm_tokenizer.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace attn {

enum class TokenizerKind { ByteLevelBpe, SentencePiece };
const char* toString(TokenizerKind k);  // "byte-level BPE", "SentencePiece BPE"

class TextTokenizer {
public:
    TextTokenizer() = default;
    TextTokenizer(BpeTokenizer t) : m_tok(std::move(t)) {}
    TextTokenizer(SpmTokenizer t) : m_tok(std::move(t)) {}

    TokenizerKind kind() const;
    // The held tokenizer of that kind, or nullptr.
    const BpeTokenizer* bpe() const { return std::get_if<BpeTokenizer>(&m_tok); }
    const SpmTokenizer* spm() const { return std::get_if<SpmTokenizer>(&m_tok); }

    // As BpeTokenizer / SpmTokenizer: see their headers.
    Expected<Encoding> encode(const std::string& text, bool addSpecial = true) const;
    std::string decode(const std::vector<int>& ids) const;
    std::string tokenText(int id) const;
    std::optional<int> idOf(const std::string& decodedText) const;
    int vocabSize() const;
    int bos() const;
    int eos() const;
    Status setBosEos(int bos, int eos);

private:
    std::variant<BpeTokenizer, SpmTokenizer> m_tok;
};

} // namespace attn
