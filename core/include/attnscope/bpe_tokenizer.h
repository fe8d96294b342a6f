// The byte-level BPE tokenizer of decoder language models (GPT-2, Llama 3, Qwen2, SmolLM2, …), from a Hugging
// Face tokenizer.json or from a GGUF file's tokenizer.ggml.* metadata.
//
// Part of attnscope_model (core/model/). Pipeline (what Hugging Face tokenizers does for these models):
//   added tokens: special tokens typed in the raw text ("<|im_start|>") are matched whole, leftmost-longest,
//                 and become one token each; the text between them goes through the rest;
//   normaliser:   none, or NFC (Qwen2's tokenizer.json);
//   pre-tokeniser: the model's regular expressions, pattern by pattern (ICU regex, Unicode properties), and
//                 Digits; every piece is then seen as its UTF-8 bytes, each byte one symbol of GPT-2's
//                 byte→unicode alphabet ("Ġ" for a space);
//   BPE:          the lowest-rank merge first (leftmost on ties) until none applies; with ignore_merges
//                 (Llama 3) a piece that is itself a token is taken whole;
//   template:     BOS when the model asks for it (GGUF add_bos_token, tokenizer.json TemplateProcessing).
// Decoding maps each token back to its bytes, so decode(encode(text)) == text for valid UTF-8 text.
#pragma once

#include "attnscope/status.h"
#include "attnscope/tokenizer.h"  // Encoding

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// The offset of the first byte of `s` that does not begin or continue a valid UTF-8 character (overlong forms,
// UTF-16 surrogates and code points past U+10FFFF are invalid, as is a character cut off at the end), or
// std::string_view::npos when all of `s` is valid. Texts are checked with it before they are tokenised.
std::size_t firstInvalidUtf8(std::string_view s);

// A byte-level BPE vocabulary as a GGUF file stores it (tokenizer.ggml.*).
struct BpeVocabSpec {
    std::vector<std::string> tokens;  // id → token in byte-level form (GPT-2's byte→unicode map, "Ġcapital")
    std::vector<std::string> merges;  // "a b", by rank (first = applied first)
    std::vector<int> tokenTypes;      // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control,
                                      // 4 user-defined, 5 unused, 6 byte; empty = all normal. Control and
                                      // user-defined tokens are matched whole in the text.
    std::string pre;                  // tokenizer.ggml.pre: "gpt-2", "llama-bpe", "qwen2", "gpt-4o", "smollm", … (docs/model.md)
    int bos = -1, eos = -1;           // tokenizer.ggml.bos_token_id / eos_token_id; -1 = none
    bool addBos = false;              // tokenizer.ggml.add_bos_token: encode(…, addSpecial) prepends bos
};

class BpeTokenizer {
public:
    // From GGUF metadata. InvalidArgument naming the field for: no tokens, duplicate tokens, an empty token,
    // more than 1 000 000 tokens or merges, a merge that is not "a b" or names a token (or a result) that is
    // not in the vocabulary, tokenTypes of another length than tokens, bos/eos/addBos outside the vocabulary.
    // Unsupported for an unknown pre (naming the supported ones).
    static Expected<BpeTokenizer> fromSpec(const BpeVocabSpec& spec);

    // From the text of a tokenizer.json with model.type "BPE": merges as "a b" strings or [a, b] pairs;
    // pre_tokenizer ByteLevel, or a Sequence of Split (Regex or String, behavior Isolated or Removed),
    // Digits and ByteLevel; normalizer null or NFC; decoder ByteLevel (or null); added_tokens matched whole in
    // the raw text; post_processor ByteLevel, TemplateProcessing (its single template's special tokens before
    // and after $A) or a Sequence of them. ParseError / Unsupported name what is wrong, e.g.
    // "tokenizer.json: pre_tokenizer.type \"Metaspace\" is not supported (supported: ByteLevel, Split,
    // Digits, Sequence)".
    static Expected<BpeTokenizer> fromTokenizerJson(const std::string& text);

    // Tokenises `text` (addSpecial: the template's BOS etc. around it). Encoding.ids are the token ids,
    // Encoding.tokens each token's decoded text (" capital"; a token that is not whole UTF-8 on its own shows
    // U+FFFD for its incomplete bytes, as Hugging Face's decode of that one id does), typeIds all 0.
    // InvalidArgument when `text` is not valid UTF-8, naming the byte offset.
    Expected<Encoding> encode(const std::string& text, bool addSpecial = true) const;

    // The exact bytes of the tokens, concatenated (ids outside the vocabulary are skipped). Tokens that are
    // parts of one UTF-8 character decode to that character together.
    std::string decode(const std::vector<int>& ids) const;

    // One token's decoded text as valid UTF-8 (U+FFFD for incomplete bytes); "" for an id outside the vocabulary.
    std::string tokenText(int id) const;
    // The id of the token whose decoded bytes are `decodedText` (" Paris"), the lowest such id.
    std::optional<int> idOf(const std::string& decodedText) const;

    int vocabSize() const;
    int bos() const { return m_bos; }  // -1 when the model has none
    int eos() const { return m_eos; }
    // Sets BOS/EOS (e.g. from a tokenizer_config.json beside a tokenizer.json); InvalidArgument outside the
    // vocabulary (-1 = none is allowed).
    Status setBosEos(int bos, int eos);

    struct Impl;  // the vocabulary, merges, pre-tokeniser and cache (bpe_tokenizer.cpp); shared by copies

private:
    static Expected<BpeTokenizer> fromTokenizerJsonImpl(const std::string& text);
    std::shared_ptr<const Impl> m_impl;
    int m_bos = -1, m_eos = -1;
};

// Wraps `userText` as one user turn followed by the assistant's generation prompt, as Hugging Face's
// apply_chat_template(messages=[{"role": "user", "content": userText}], add_generation_prompt=True) renders
// the model's chat template (`templateText`: tokenizer.chat_template from GGUF, or tokenizer_config.json's):
//   ChatML (the template has "<|im_start|>", as SmolLM2 and Qwen2): the template's default system turn when it
//     adds one (a literal "<|im_start|>system\n…<|im_end|>" in the template), then
//     "<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n";
//   Llama 3 (the template has "<|start_header_id|>"): "<|begin_of_text|>" when the template writes bos_token,
//     "<|start_header_id|>user<|end_header_id|>\n\n{text, trimmed}<|eot_id|>" and the assistant header.
//   Gemma (the template has "<start_of_turn>"): "<bos>" when the template writes bos_token, then
//     "<start_of_turn>user\n{text, trimmed}<end_of_turn>\n<start_of_turn>model\n";
//   Llama 2 / Mistral (the template has "[INST]"): "<s>" when the template writes bos_token, then
//     "[INST] {text} [/INST]" (the text trimmed when the template trims it, as Llama 2's does and Mistral's not).
//   Phi (the template has "<|end|>" and "<|assistant|>", Phi-3 to Phi-4-mini): "<s>" when the template writes
//     bos_token, "<|user|>\n{text}<|end|>\n<|assistant|>\n" (no newlines where the template writes none: Phi-4-mini).
//   Tülu (the template has "<|user|>" and "<|assistant|>" but no "<|end|>", as OLMo 2's): `bosText` when the
//     template writes bos_token, then "<|user|>\n{text}\n<|assistant|>\n".
// `bosText` is the model's BOS token as text (the tokenizer's), for the families whose BOS the template does not
// name; the others write their own. The result already holds the template's special tokens: encode it with
// addSpecial = false.
// Unsupported for any other template (naming the supported kinds); InvalidArgument for an empty template.
Expected<std::string> applyChatTemplate(const std::string& templateText, const std::string& userText,
                                        const std::string& bosText = "");

} // namespace attn
