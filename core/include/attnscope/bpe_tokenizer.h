// The byte-level BPE tokenizer of decoder language models (GPT-2, Llama 3, Qwen2, SmolLM2), from a Hugging Face
// tokenizer.json or from a GGUF file's tokenizer.ggml.* metadata.
//
// Part of attnscope_model (core/model/bpe_tokenizer.cpp). Pipeline, as the model's own files say:
//   special tokens  added tokens typed in the text (e.g. <|im_start|>) are matched whole first, longest first, as
//                   Hugging Face does by default; the text between them goes through the steps below;
//   pre-tokenizer   regular expressions with Unicode properties (ICU), each splitting every piece and keeping
//                   what lies between matches: GPT-2's pattern, Llama 3's, Qwen2's, SmolLM2's (every digit on its
//                   own, then GPT-2's), or tokenizer.json's own Split / ByteLevel / Digits steps;
//   byte level      each piece's UTF-8 bytes become GPT-2's printable stand-ins (byte b → one character);
//   BPE             the adjacent pair of lowest merge rank is merged until none is left (a piece that is itself a
//                   token is taken whole when the tokenizer ignores merges, as Llama 3's does);
//   template        a BOS token first when the model asks for one.
// Decoding maps the stand-ins back to bytes, so decode(encode(text)) == text for any valid UTF-8.
#pragma once

#include "attnscope/status.h"
#include "attnscope/tokenizer.h"  // Encoding

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace attn {

// What a GGUF file says about its tokenizer (tokenizer.ggml.*), the input of BpeTokenizer::fromSpec.
struct BpeVocabSpec {
    std::vector<std::string> tokens;   // id → token in byte-level form
    std::vector<std::string> merges;   // "a b", by rank (first = merged first)
    std::vector<int> tokenTypes;       // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; empty = all 1
    std::string pre = "default";       // tokenizer.ggml.pre: default, gpt2, llama-bpe (llama3), qwen2, smollm
    int bos = -1, eos = -1;
    bool addBos = false;
};

class BpeTokenizer {
public:
    BpeTokenizer();
    ~BpeTokenizer();
    BpeTokenizer(BpeTokenizer&&) noexcept;
    BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
    BpeTokenizer(const BpeTokenizer&) = delete;
    BpeTokenizer& operator=(const BpeTokenizer&) = delete;

    // From GGUF metadata. Unsupported names a pre-tokenizer this build does not know (and lists those it does);
    // InvalidArgument for duplicate tokens, merges naming unknown tokens, token types of another length.
    static Expected<BpeTokenizer> fromSpec(const BpeVocabSpec& spec);
    // From the text of a tokenizer.json whose model.type is BPE (merges as "a b" strings or [a, b] pairs).
    static Expected<BpeTokenizer> fromTokenizerJson(const std::string& text);

    // Token ids and each token's decoded text. With addSpecial, the BOS token the model asks for comes first.
    // InvalidArgument when the text is not valid UTF-8 (naming the byte offset).
    Expected<Encoding> encode(const std::string& text, bool addSpecial = true) const;
    // The bytes the ids stand for, concatenated (special tokens as their text).
    std::string decode(const std::vector<int>& ids) const;
    // One token's bytes (may be part of a UTF-8 character; "" for an id outside the vocabulary).
    std::string tokenText(int id) const;
    // The id of the token whose decoded text is `text` (e.g. " Paris"), if there is one.
    std::optional<int> idOf(const std::string& text) const;

    int vocabSize() const;
    int bos() const;
    int eos() const;
    const std::string& preTokenizer() const;  // "gpt2", "llama-bpe", "qwen2", "smollm" or "tokenizer.json"

private:
    struct Impl;
    std::unique_ptr<Impl> m;
};

// Wraps `userText` as one user turn, ready for the assistant's answer, as the model's chat template (Jinja) would
// with add_generation_prompt: ChatML (<|im_start|>…, SmolLM2 and Qwen2, with the default system prompt their
// templates add) and Llama 3 (<|start_header_id|>…). Another template → Unsupported.
Expected<std::string> applyChatTemplate(const std::string& templateText, const std::string& userText);

} // namespace attn
