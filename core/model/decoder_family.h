// The family seam of the decoder models (STYLE.md §8): what a family says about its configuration, where its
// tensors are, and the parts of one block's forward that are its own. The run loop (core/model/decoder.cpp) calls
// these; the attention itself always goes through the attention core. Internal to attnscope_model.
#pragma once

#include "attnscope/decoder.h"
#include "attnscope/gguf.h"
#include "weight_source.h"

#include <string>

namespace attn::detail {

// [SECTION] llama family (llama, mistral, qwen2): core/model/family_llama.cpp

// config.json of a Hugging Face llama / mistral / qwen2 directory.
Status llamaConfigFromJson(const std::string& text, const std::string& file, DecoderConfig& c);
// GGUF metadata under `arch`. (llama, qwen2); the vocabulary size from token_embd when the key is absent.
Status llamaConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);
// Every tensor, by Hugging Face names or GGUF names. For a GGUF of architecture llama, Q and K rows are put back
// in Hugging Face's order (llama.cpp's converter interleaves each head's two halves so that adjacent rows rotate
// together); qwen2 GGUFs keep Hugging Face's order. After this, one RoPE (rotate-half pairing) serves all.
Status llamaTensors(WeightSource& w, bool ggufNames, bool unpermuteQK, DecoderModel& m);
using BlockScratch = DecoderBlockScratch;
void llamaAttentionInputs(const DecoderModel& m, const DecoderLayer& L, const Matrix& x, int pos0, Matrix& normed,
                          Matrix& Q, Matrix& K, Matrix& V, int period = 0);
void llamaAfterAttention(const DecoderModel& m, const DecoderLayer& L, const Matrix& attnOut, const Matrix& x,
                         BlockScratch& s, Matrix& out);

// [SECTION] gpt2: core/model/family_gpt2.cpp
Status gpt2ConfigFromJson(const std::string& text, const std::string& file, DecoderConfig& c);
Status gpt2ConfigFromGguf(const GgufFile& f, DecoderConfig& c);
Status gpt2Tensors(WeightSource& w, bool ggufNames, DecoderModel& m);
void gpt2AttentionInputs(const DecoderModel& m, const DecoderLayer& L, const Matrix& x, Matrix& normed, Matrix& Q,
                         Matrix& K, Matrix& V);
void gpt2AfterAttention(const DecoderModel& m, const DecoderLayer& L, const Matrix& attnOut, const Matrix& x,
                        BlockScratch& s, Matrix& out);

// [SECTION] One block, by family (dispatching on model.config.family)

// The attention's inputs of layer `layer` for the tokens at positions pos0, pos0+1, … (x: their residual stream,
// rows × M): Q rows×H·D and K, V rows×H_kv·D, Q and K rotated by RoPE where the family uses it. With period > 0,
// x is blocks of `period` rows, each the same positions pos0 … pos0+period−1 (the stacked variants of a head scan,
// core/model/interp.cpp), so that the projections stream the weights once for all blocks.
void attentionInputs(const DecoderModel& model, const DecoderLayer& layer, const Matrix& x, int pos0, Matrix& normed,
                     Matrix& Q, Matrix& K, Matrix& V, int period = 0);
// The rest of the block: out = x + attnOut, then out += feed-forward(norm(out)). `scratch` holds buffers.
void afterAttention(const DecoderModel& model, const DecoderLayer& layer, const Matrix& attnOut, const Matrix& x,
                    BlockScratch& scratch, Matrix& out);
// The final norm of the residual stream (rows × M).
void finalNorm(const DecoderModel& model, const Matrix& x, Matrix& out);

// [SECTION] Shared numerics (core/model/decoder.cpp)

// The attention core's configuration for one layer: Q, K, V given (Direct mode, after RoPE), causal, grouped-query.
AttentionConfig layerConfig(const DecoderConfig& c, Backend backend);
// Mistral's sliding window for `queries` rows at positions pos0… over `keys` keys: key j is hidden from query i
// when i − j ≥ window (on top of causality); mask.custom is left empty when nothing is hidden.
void slidingWindowMask(const DecoderConfig& c, int queries, int pos0, int keys, MaskSpec& mask);
// The first key a query at position `pos` sees through that window (0 without one): keys before it are hidden.
Eigen::Index firstKeyInWindow(const DecoderConfig& c, Eigen::Index pos);

// out = a · b with b's columns split over the thread team (Eigen's own products run on one thread in core).
void product(const Matrix& a, const Matrix& b, Matrix& out);
// out = a · btᵀ (bt stored with the output's columns as its rows, e.g. the V×M unembedding), split the same way.
void productTransposed(const Matrix& a, const Matrix& bt, Matrix& out);
// RMSNorm of every row (as Hugging Face's LlamaRMSNorm: x / sqrt(mean(x²) + eps) · gamma).
void rmsNormRows(const Matrix& x, const Vector& gamma, float eps, Matrix& out);
// LayerNorm of every row (biased variance, as torch.nn.LayerNorm).
void layerNormRows(const Matrix& x, const Vector& gamma, const Vector& beta, float eps, Matrix& out);

} // namespace attn::detail
