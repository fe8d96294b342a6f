// Internal to core/model: a decoder's tokenizer from a GGUF file's tokenizer.ggml.* metadata or from a Hugging Face
// tokenizer.json, routed to the byte-level BPE or the SentencePiece-style tokenizer by what the file says.
#pragma once

#include "attnscope/gguf.h"
#include "attnscope/text_tokenizer.h"

#include <string>

namespace attn {

// By tokenizer.ggml.model: "gpt2" → byte-level BPE (tokens, merges, token_type, pre, bos/eos, add_bos_token);
// "llama" → SentencePiece BPE (tokens, scores, token_type, bos/eos/unknown/padding ids, add_bos_token,
// add_eos_token, add_space_prefix; llama.cpp's defaults where a key is absent). Unsupported for another model,
// naming the supported ones; messages start with `path`.
Expected<TextTokenizer> tokenizerFromGguf(const GgufFile& file, const std::string& path);

// By the tokenizer.json's model: BPE with byte_fallback (or a Metaspace / "▁" normaliser) → SentencePiece BPE,
// other BPE → byte-level BPE. Messages start with `path`.
Expected<TextTokenizer> tokenizerFromJson(const std::string& text, const std::string& path);

} // namespace attn
