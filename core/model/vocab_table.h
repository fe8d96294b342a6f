// The vocabulary table of the two BPE tokenizers (byte-level: bpe_tokenizer.cpp; SentencePiece-style:
// spm_tokenizer.cpp), written once: the pieces by id with the bytes each stands for, piece → id and bytes → id,
// the merge table by rank, the lookups both tokenizers answer (tokenText, idOf, the BOS/EOS range), and the reading
// of what tokenizer.json writes alike for both (model.vocab, added_tokens, model.merges, model.unk_token). Each
// tokenizer's Impl is a VocabTable plus its own decoding of a piece's bytes, its pre-tokenisation, its matching of
// special tokens and its merge loop.
//
// Internal to core/model (not a public header).
#pragma once

#include "attnscope/status.h"
#include "attnscope/tokenizer.h"  // Encoding

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attn::detail {

// Largest vocabulary accepted (Gemma 3's 262 144 pieces and Llama 3's and Qwen2's ~150k are the largest in use); a
// bigger array is a broken or hostile file.
constexpr std::size_t kMaxVocabTokens = 1'000'000;
// Longest piece accepted, in bytes (Gemma 3's longest is 48, byte-level vocabularies stay under ~300: runs of
// spaces or dashes).
constexpr std::size_t kMaxTokenBytes = 65'536;

// `s` with each ill-formed UTF-8 subsequence replaced by U+FFFD (as Rust's String::from_utf8_lossy).
std::string lossyUtf8(const std::string& s);
// The merge table's key of the pair (left id, right id).
std::uint64_t pairKey(int a, int b);
// A merge written "a b": one space between two non-empty pieces.
bool splitMerge(const std::string& m, std::pair<std::string, std::string>& out);

struct VocabTable {
    std::vector<std::string> tokens;   // id → piece as the file writes it
    std::vector<std::string> bytes;    // id → the bytes it stands for (decoded)
    std::vector<std::string> display;  // id → those bytes as valid UTF-8
    std::unordered_map<std::string_view, int> vocab;  // piece → its first id (views into `tokens`)
    std::unordered_map<std::string, int> byDecoded;   // decoded bytes → an id (setBytes says which)
    std::unordered_map<std::uint64_t, std::pair<int, int>> merges;  // pairKey(left, right) → (rank, merged id)

    int size() const { return static_cast<int>(tokens.size()); }

    // Takes the pieces: each non-empty, at most kMaxTokenBytes long and valid UTF-8; with `unique` no piece twice
    // (a byte-level piece is its id's key), else a repeated piece's first id is its id. InvalidArgument naming
    // "<where>[id]" (e.g. "tokenizer.ggml.tokens[6]: the token is empty"), or "<where>: the vocabulary is empty".
    Status setTokens(std::vector<std::string> pieces, const std::string& where, bool unique);
    // Each id's bytes (size() entries) and their display form. byDecoded maps bytes to the lowest id among those
    // `preferred` names, else to the lowest id (SentencePiece: normal pieces before control tokens of the same text).
    void setBytes(std::vector<std::string> decoded, const std::function<bool(int)>& preferred);
    // The merges by rank: pairKey(left, right) → (rank, id of left + right); the first entry of a repeated pair wins,
    // as in Hugging Face. InvalidArgument naming "<where>[rank] \"l r\"" when a piece is not in the vocabulary.
    Status setMerges(const std::vector<std::pair<std::string, std::string>>& list, const std::string& where);

    // The shared lookups of BpeTokenizer and SpmTokenizer (see their headers).
    std::string tokenText(int id) const;               // display[id], "" outside the vocabulary
    std::optional<int> idOf(const std::string& decodedText) const;
    Status checkBosEos(int bos, int eos) const;        // each in −1 … size() − 1
    // An encoding's tokens (display forms) and type ids from its ids.
    void finishEncoding(Encoding& enc) const;
};

// What tokenizer.json says about the vocabulary, as both tokenizers read it.
struct JsonVocab {
    std::vector<std::string> tokens;  // id → piece: model.vocab, then added_tokens (which may extend it); no gaps
    struct Added {
        int id;        // its id in `tokens`
        bool special;  // its "special" flag
    };
    std::vector<Added> added;         // added_tokens, in the file's order
    std::vector<std::pair<std::string, std::string>> merges;  // model.merges ("a b" or ["a", "b"]), by rank
    int unk = -1;                     // model.unk_token's id, or −1
};

// Parses tokenizer.json's `text` into `file` and checks what both tokenizers ask of it: nested at most kMaxJsonDepth,
// an object with a "model" object of type BPE, no dropout / continuing_subword_prefix / end_of_word_suffix,
// byte_fallback / ignore_merges / fuse_unk booleans or null. ParseError or Unsupported "tokenizer.json: …".
Status parseJsonBpe(const std::string& text, nlohmann::json& file);
// f() with nlohmann's exceptions (value() and get() throw on a field of the wrong type) and std::bad_alloc turned
// into a Status: no exception leaves core.
template <class F>
auto catchingJsonErrors(F&& f) -> decltype(f())
{
    try {
        return f();
    } catch (const nlohmann::json::exception& e) {
        return makeError(StatusCode::ParseError, std::string("tokenizer.json: a field has the wrong type: ") + e.what());
    } catch (const std::bad_alloc&) {
        return makeError(StatusCode::ResourceExhausted, "tokenizer.json: out of memory");
    }
}
// Reads model.vocab, added_tokens, model.merges (at most `maxMerges`) and model.unk_token of tokenizer.json (`file`
// the whole object, `model` its "model"). ParseError "tokenizer.json: …" naming the field. May throw
// nlohmann::json::exception on a field of the wrong type (the callers' fromTokenizerJson catches it).
Expected<JsonVocab> readJsonVocab(const nlohmann::json& file, const nlohmann::json& model, std::size_t maxMerges);

// The template around the text of tokenizer.json's post_processor at `path` (TemplateProcessing's "single", in a
// Sequence or not; ByteLevel sets offsets only): the special tokens before the sequence $A appended to `before`,
// those after it to `after`. A template token is special_tokens' ids (below `vocabSize`) or the piece of that name
// (`ids`). ParseError or Unsupported "tokenizer.json: <path>…".
Status readJsonTemplate(const nlohmann::json& j, const std::string& path, const std::unordered_map<std::string, int>& ids,
                        std::size_t vocabSize, std::vector<int>& before, std::vector<int>& after, int depth);

} // namespace attn::detail
