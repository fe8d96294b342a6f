// The SentencePiece-style BPE tokenizer of decoder language models (Llama 2, Mistral v0.1–0.3, TinyLlama, Gemma,
// Phi-3), from a GGUF file's tokenizer.ggml.* metadata (tokenizer.ggml.model "llama") or from a Hugging Face
// tokenizer.json (model BPE with byte_fallback).
//
// Part of attnscope_model (core/model/). Pipeline (llama.cpp's SPM path, src/llama-vocab.cpp; the research note
// /work/shared/research/families.md §3 has the sources):
//   special split: every control, user-defined and unknown token (Gemma's "<start_of_turn>", its runs of spaces
//                  and newlines, "<table>") is cut out of the raw text as its own id, the longest token first over
//                  the whole text, each token's occurrences leftmost first; the text between them is a fragment;
//   space prefix:  with add_space_prefix (Llama 2: yes, Gemma: no) a fragment that starts the text or follows a
//                  cut-out token gets a " " in front; then every " " becomes "▁" (U+2581). No other normalisation;
//   BPE:           the fragment's UTF-8 characters are the symbols; of all neighbouring pairs whose concatenation
//                  is a token, the one whose token has the highest score merges first (leftmost on ties), until
//                  none is left (from a tokenizer.json: the pair with the lowest merges rank, as Hugging Face);
//   byte fallback: a symbol that is not a token becomes one <0xXX> token per byte; without those, the unknown
//                  token (with a warning); without that either, an error;
//   template:      BOS / EOS around the text when the model asks for them (add_bos_token, add_eos_token, or the
//                  tokenizer.json's TemplateProcessing).
// Scores and merge ranks: llama.cpp orders merges by the merged token's score, Hugging Face by the rank of the pair
// in model.merges. The converters write the merges of these models in the order of the merged token's score, so
// the two agree on the real models; each path here does what its own file says.
#pragma once

#include "attnscope/status.h"
#include "attnscope/tokenizer.h"  // Encoding

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attn {

// A SentencePiece vocabulary as a GGUF file stores it (tokenizer.ggml.*). The defaults are llama.cpp's for an SPM
// vocabulary whose file does not say (llama_vocab::impl::load).
struct SpmVocabSpec {
    std::vector<std::string> tokens;  // tokenizer.ggml.tokens: pieces as stored ("▁the", "<0x0A>", "<bos>", "  ")
    std::vector<float> scores;        // tokenizer.ggml.scores: merge priority, higher first; empty = all 0
    std::vector<int> tokenTypes;      // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined,
                                      // 5 unused, 6 byte; empty = all normal
    int bos = 1;                      // tokenizer.ggml.bos_token_id (-1 = none); default 1
    int eos = 2;                      // tokenizer.ggml.eos_token_id (-1 = none); default 2
    int unk = 0;                      // tokenizer.ggml.unknown_token_id (-1 = none); default 0
    int pad = -1;                     // tokenizer.ggml.padding_token_id (-1 = none); default none
    bool addBos = true;               // tokenizer.ggml.add_bos_token: encode(…, addSpecial) prepends bos; default true
    bool addEos = false;              // tokenizer.ggml.add_eos_token: encode(…, addSpecial) appends eos; default false
    bool addSpacePrefix = true;       // tokenizer.ggml.add_space_prefix: " " before each fragment; default true
};

class SpmTokenizer {
public:
    // From GGUF metadata. InvalidArgument naming the field, with expected and actual, for: no tokens, more than
    // 1 000 000 tokens, an empty or invalid UTF-8 or over-long token, scores or token_type of another length than
    // tokens, a score that is NaN, a token type outside 1..6, a byte token (type 6) that is not <0xXX>, bos/eos/unk/pad outside the vocabulary,
    // add_bos_token / add_eos_token without that token. A piece that appears twice keeps its first id.
    static Expected<SpmTokenizer> fromSpec(const SpmVocabSpec& spec);

    // From the text of a tokenizer.json with model.type "BPE" and byte_fallback true (merges as "a b" strings or
    // [a, b] pairs); normalizer null, Replace(" " → "▁"), Prepend("▁") or a Sequence of them (Llama 2 legacy,
    // Gemma); pre_tokenizer null, Metaspace (Llama non-legacy: prepend_scheme always / first / never, split) or
    // Split(String, MergedWithPrevious / MergedWithNext / Isolated) or a Sequence (Gemma's Split(" ")); decoder
    // null or a Sequence of Replace, ByteFallback, Fuse, Strip, Metaspace; added_tokens matched whole in the raw
    // text (special ones as control tokens, the others as user-defined); post_processor TemplateProcessing (or a
    // Sequence with one). ParseError / Unsupported name what is wrong, e.g. "tokenizer.json: normalizer.type
    // \"NFKC\" is not supported (supported: Replace, Prepend, Sequence)".
    static Expected<SpmTokenizer> fromTokenizerJson(const std::string& text);

    // True when a tokenizer.json (already parsed as JSON text) is a SentencePiece-style BPE: model.type "BPE"
    // with byte_fallback true, or a Metaspace pre-tokeniser / a normalizer that writes "▁". The decoder loader
    // routes by it.
    static bool looksLikeSpmJson(const std::string& text);

    // Tokenises `text` (addSpecial: BOS / EOS as the model asks). Encoding.ids are the token ids, Encoding.tokens
    // each token's decoded text (" capital" for "▁capital", "\n" for <0x0A>; a byte token that is not whole UTF-8
    // on its own shows U+FFFD), typeIds all 0, warnings when a character had to become the unknown token.
    // InvalidArgument when `text` is not valid UTF-8 (naming the byte offset), or when a character has neither a
    // token, byte tokens nor an unknown token to stand for it; ResourceExhausted when the text holds more than 16 Mi
    // special-token matches (about 500 KB of nothing but newlines with Gemma's vocabulary).
    Expected<Encoding> encode(const std::string& text, bool addSpecial = true) const;

    // The tokens' bytes concatenated ("▁" → " ", <0xXX> → that byte, control and user-defined tokens as their
    // text), less the one space the encoder put before each fragment (add_space_prefix), so that
    // decode(encode(text, false)) == text for valid UTF-8 text. Ids outside the vocabulary are skipped.
    std::string decode(const std::vector<int>& ids) const;

    // One token's decoded text as valid UTF-8 (U+FFFD for incomplete bytes); "" for an id outside the vocabulary.
    std::string tokenText(int id) const;
    // The id of the token whose decoded bytes are `decodedText` (" Paris" for "▁Paris"), the lowest such id.
    std::optional<int> idOf(const std::string& decodedText) const;

    int vocabSize() const;
    int bos() const { return m_bos; }  // -1 when the model has none
    int eos() const { return m_eos; }
    int unk() const;                   // -1 when the model has none
    int pad() const;                   // -1 when the model has none
    bool addSpacePrefix() const;
    // Sets BOS/EOS (e.g. from a config.json beside a tokenizer.json); InvalidArgument outside the vocabulary (-1 =
    // none is allowed).
    Status setBosEos(int bos, int eos);

    struct Impl;  // the vocabulary, scores or merges and the special-token trie (spm_tokenizer.cpp); shared by copies

private:
    static Expected<SpmTokenizer> fromTokenizerJsonImpl(const std::string& text);
    std::shared_ptr<const Impl> m_impl;
    int m_bos = -1, m_eos = -1;
};

} // namespace attn
