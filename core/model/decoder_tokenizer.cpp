// A decoder's tokenizer from GGUF metadata or a tokenizer.json. See decoder_tokenizer.h.
#include "decoder_tokenizer.h"

#include "attnscope/preset_io.h"  // clipForMessage

namespace attn {

namespace {

// A token id key of the metadata (tokenizer.ggml.bos_token_id, …): left as it is when absent, refused outside the
// vocabulary of `vocab` tokens, the file named in every message.
Status optionalTokenId(const GgufFile& file, const std::string& path, const char* key, std::size_t vocab, int& out)
{
    if (!file.has(key)) return Status::success();
    auto v = file.getUint(key);
    if (!v) return makeError(v.status().code, path + ": " + v.status().message);
    if (*v >= vocab)
        return invalidArgument(path + ": " + key + ": " + std::to_string(*v) + " is outside the vocabulary of " +
                               std::to_string(vocab) + " tokens");
    out = static_cast<int>(*v);
    return Status::success();
}

Expected<TextTokenizer> bpeFromGguf(const GgufFile& file, const std::string& path)
{
    BpeVocabSpec spec;
    auto tokens = file.getStringArray("tokenizer.ggml.tokens");
    if (!tokens) return tokens.status();
    spec.tokens = std::move(*tokens);
    auto merges = file.getStringArray("tokenizer.ggml.merges");
    if (!merges) return merges.status();
    spec.merges = std::move(*merges);
    if (file.has("tokenizer.ggml.token_type")) {
        auto types = file.getIntArray("tokenizer.ggml.token_type");
        if (!types) return types.status();
        spec.tokenTypes.assign(types->begin(), types->end());
    }
    spec.pre = "default";
    if (file.has("tokenizer.ggml.pre")) {
        auto pre = file.getString("tokenizer.ggml.pre");
        if (!pre) return pre.status();
        spec.pre = *pre;
    }
    auto optionalId = [&](const char* key, int& out) { return optionalTokenId(file, path, key, spec.tokens.size(), out); };
    ATTNSCOPE_RETURN_IF_ERROR(optionalId("tokenizer.ggml.bos_token_id", spec.bos));
    ATTNSCOPE_RETURN_IF_ERROR(optionalId("tokenizer.ggml.eos_token_id", spec.eos));
    if (file.has("tokenizer.ggml.add_bos_token")) {
        auto b = file.getBool("tokenizer.ggml.add_bos_token");
        if (!b) return b.status();
        spec.addBos = *b;
    }
    auto tok = BpeTokenizer::fromSpec(spec);
    if (!tok) return makeError(tok.status().code, path + ": " + tok.status().message);
    return TextTokenizer(std::move(*tok));
}

Expected<TextTokenizer> spmFromGguf(const GgufFile& file, const std::string& path)
{
    SpmVocabSpec spec;
    auto tokens = file.getStringArray("tokenizer.ggml.tokens");
    if (!tokens) return tokens.status();
    spec.tokens = std::move(*tokens);
    // Scores are float32 in current files, int32 in some older ones (getFloatArray reads both); absent: all 0.
    if (file.has("tokenizer.ggml.scores")) {
        auto scores = file.getFloatArray("tokenizer.ggml.scores");
        if (!scores) return makeError(scores.status().code, path + ": " + scores.status().message);
        spec.scores = std::move(*scores);
    }
    if (file.has("tokenizer.ggml.token_type")) {
        auto types = file.getIntArray("tokenizer.ggml.token_type");
        if (!types) return makeError(types.status().code, path + ": " + types.status().message);
        spec.tokenTypes.reserve(types->size());
        for (std::int64_t t : *types) spec.tokenTypes.push_back(t < 0 || t > 255 ? 0 : static_cast<int>(t));  // 0: refused by fromSpec
    }
    // A key absent keeps llama.cpp's SPM default (SpmVocabSpec); a present id outside the vocabulary is refused.
    auto optionalId = [&](const char* key, int& out) { return optionalTokenId(file, path, key, spec.tokens.size(), out); };
    ATTNSCOPE_RETURN_IF_ERROR(optionalId("tokenizer.ggml.bos_token_id", spec.bos));
    ATTNSCOPE_RETURN_IF_ERROR(optionalId("tokenizer.ggml.eos_token_id", spec.eos));
    ATTNSCOPE_RETURN_IF_ERROR(optionalId("tokenizer.ggml.unknown_token_id", spec.unk));
    ATTNSCOPE_RETURN_IF_ERROR(optionalId("tokenizer.ggml.padding_token_id", spec.pad));
    // Defaults that point past a small vocabulary mean "none" (llama.cpp's defaults assume a real one).
    const int n = static_cast<int>(spec.tokens.size());
    if (!file.has("tokenizer.ggml.bos_token_id") && spec.bos >= n) spec.bos = -1;
    if (!file.has("tokenizer.ggml.eos_token_id") && spec.eos >= n) spec.eos = -1;
    if (!file.has("tokenizer.ggml.unknown_token_id") && spec.unk >= n) spec.unk = -1;
    auto optionalBool = [&](const char* key, bool& out) -> Status {
        if (!file.has(key)) return Status::success();
        auto b = file.getBool(key);
        if (!b) return makeError(b.status().code, path + ": " + b.status().message);
        out = *b;
        return Status::success();
    };
    ATTNSCOPE_RETURN_IF_ERROR(optionalBool("tokenizer.ggml.add_bos_token", spec.addBos));
    ATTNSCOPE_RETURN_IF_ERROR(optionalBool("tokenizer.ggml.add_eos_token", spec.addEos));
    ATTNSCOPE_RETURN_IF_ERROR(optionalBool("tokenizer.ggml.add_space_prefix", spec.addSpacePrefix));
    if (spec.addBos && spec.bos < 0) spec.addBos = false;  // the default asked for a BOS the vocabulary lacks
    auto tok = SpmTokenizer::fromSpec(spec);
    if (!tok) return makeError(tok.status().code, path + ": " + tok.status().message);
    return TextTokenizer(std::move(*tok));
}

} // namespace

Expected<TextTokenizer> tokenizerFromGguf(const GgufFile& file, const std::string& path)
{
    auto model = file.getString("tokenizer.ggml.model");
    if (!model) return makeError(model.status().code, path + ": " + model.status().message);
    if (*model == "gpt2") return bpeFromGguf(file, path);
    if (*model == "llama") return spmFromGguf(file, path);
    return makeError(StatusCode::Unsupported, path + ": tokenizer.ggml.model \"" + clipForMessage(*model) +
                                                  "\" is not supported (supported: gpt2 (byte-level BPE), llama (SentencePiece BPE))");
}

Expected<TextTokenizer> tokenizerFromJson(const std::string& text, const std::string& path)
{
    if (SpmTokenizer::looksLikeSpmJson(text)) {
        auto tok = SpmTokenizer::fromTokenizerJson(text);
        if (!tok) return makeError(tok.status().code, path + ": " + tok.status().message);
        return TextTokenizer(std::move(*tok));
    }
    auto tok = BpeTokenizer::fromTokenizerJson(text);
    if (!tok) return makeError(tok.status().code, path + ": " + tok.status().message);
    return TextTokenizer(std::move(*tok));
}

} // namespace attn
