// The family seam of the decoder models (STYLE.md §8): what a family says about its configuration and where its
// tensors are, one file each; the block's parts that families share, written once (core/model/blocks.cpp). The
// run loop (core/model/decoder.cpp) calls these; the attention itself always goes through the attention core.
// Internal to attnscope_model.
//
// [SECTION] Reading a configuration (core/model/family_common.cpp)
// [SECTION] The families (family_llama.cpp, family_gemma.cpp, family_neox.cpp, family_phi3.cpp, family_olmo2.cpp,
//           family_gpt2.cpp)
// [SECTION] One block (core/model/blocks.cpp)
// [SECTION] Shared numerics (core/model/decoder.cpp)
#pragma once

#include "attnscope/decoder.h"
#include "attnscope/gguf.h"
#include "weight_source.h"

#include <nlohmann/json.hpp>

#include <string>

namespace attn::detail {

// [SECTION] Reading a configuration

// A Hugging Face config.json, read field by field with messages naming the file and the field (a hostile file
// gets a message, never an exception: json::value() would throw on a value of another type).
struct JsonConfig {
    const nlohmann::json& j;
    std::string file;
    // An integer in lo..hi; a missing (or null) field is an error when required, else leaves `out`.
    Status integer(const char* key, int lo, int hi, int& out, bool required = true) const;
    // A number in (lo, hi); missing leaves `out`.
    Status number(const char* key, double lo, double hi, float& out) const;
    bool flag(const char* key, bool otherwise = false) const;  // a boolean; another type reads as `otherwise`
    std::string string(const char* key) const;                 // "" when missing or not a string
    const nlohmann::json* find(const char* key) const;          // nullptr when missing or null
};

// The fields every family but GPT-2 shares: num_hidden_layers, num_attention_heads, num_key_value_heads,
// hidden_size, head_dim, intermediate_size, vocab_size, max_position_embeddings, rms_norm_eps or
// layer_norm_eps, the RoPE base (rope_theta, or transformers 5's rope_parameters), partial rotary
// (partial_rotary_factor, rotary_pct), rope_scaling (none, llama3, linear, longrope), tie_word_embeddings (default
// `tiedByDefault`), sliding_window, hidden_act / hidden_activation (checked against `acts`).
Status commonConfigFromJson(const JsonConfig& j, bool tiedByDefault, DecoderConfig& c);

// The keys every family but GPT-2 shares, under `arch`.: block_count, attention.head_count, head_count_kv,
// embedding_length, feed_forward_length, context_length, attention.key_length, the norm's epsilon,
// rope.freq_base, rope.dimension_count (partial rotary), the vocabulary from token_embd, tied when there is no
// output.weight, rope_freqs (Llama 3), rope_factors_short/long with rope.scaling.original_context_length and
// rope.scaling.attn_factor (LongRoPE).
Status commonConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);

// Shapes: head width from M / H when unset, H_kv from H, H_kv divides H, the rotary width even and at most D,
// every layer's window within the context. `what` names the file in messages.
Status checkConfig(const std::string& what, DecoderConfig& c);

// One family's Hugging Face tensor names, by concept (without ".weight" / ".bias"; "" = the family has none).
// GGUF names are the same for every family (blk.N.attn_q, …), as llama.cpp's converters write them.
struct HfNames {
    std::string embed = "model.embed_tokens", finalNorm = "model.norm", lmHead = "lm_head";
    std::string layer = "model.layers.";  // + N + "."
    std::string attnNorm = "input_layernorm";
    std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj", qkv;
    std::string qNorm = "self_attn.q_norm", kNorm = "self_attn.k_norm";
    std::string o = "self_attn.o_proj";
    std::string postAttnNorm, ffnNorm = "post_attention_layernorm", postFfnNorm;
    std::string gate = "mlp.gate_proj", up = "mlp.up_proj", gateUp, down = "mlp.down_proj";
};

// How a family stores its tensors.
struct TensorLayout {
    HfNames hf;
    bool fusedQkv = false;      // one Q|K|V tensor (GGUF: attn_qkv, rows Q then K then V)
    bool hfQkvPerHead = false;  // the Hugging Face fused tensor is per head [q k v] (GPT-NeoX's query_key_value)
    bool fusedGateUp = false;   // one gate|up tensor of 2F rows (Phi-3: GGUF ffn_up, HF gate_up_proj)
    bool unpermuteQK = false;   // a llama GGUF: Q and K rows back in Hugging Face's order
    bool normPlusOne = false;   // Hugging Face Gemma stores norm weights w of x̂·(1 + w) (llama.cpp's converter adds the 1)
};

// Every tensor of a family other than GPT-2, as `layout` names them and the configuration asks (QK-norm,
// post-norms, pre-norms, LayerNorm biases, gated or not); projection biases where the file has them.
Status familyTensors(WeightSource& w, bool gguf, const TensorLayout& layout, DecoderModel& m);

// [SECTION] The families
// Each: its config.json (`j`), its GGUF keys, and its tensor layout.

// llama, mistral, qwen2, qwen3 (family_llama.cpp)
Status llamaConfigFromJson(const JsonConfig& j, DecoderConfig& c);
Status llamaConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);
TensorLayout llamaLayout(const DecoderConfig& c, bool gguf);
// gemma2, gemma3 (family_gemma.cpp)
Status gemmaConfigFromJson(const JsonConfig& j, DecoderConfig& c);
Status gemmaConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);
TensorLayout gemmaLayout(const DecoderConfig& c, bool gguf);
// gptneox (family_neox.cpp)
Status neoxConfigFromJson(const JsonConfig& j, DecoderConfig& c);
Status neoxConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);
TensorLayout neoxLayout(const DecoderConfig& c, bool gguf);
// phi3 (family_phi3.cpp)
Status phi3ConfigFromJson(const JsonConfig& j, DecoderConfig& c);
Status phi3ConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);
TensorLayout phi3Layout(const DecoderConfig& c, bool gguf);
// olmo2 (family_olmo2.cpp)
Status olmo2ConfigFromJson(const JsonConfig& j, DecoderConfig& c);
Status olmo2ConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c);
TensorLayout olmo2Layout(const DecoderConfig& c, bool gguf);
// gpt2 (family_gpt2.cpp): learned positions and Conv1D weights, its own loader.
Status gpt2ConfigFromJson(const std::string& text, const std::string& file, DecoderConfig& c);
Status gpt2ConfigFromGguf(const GgufFile& f, DecoderConfig& c);
Status gpt2Tensors(WeightSource& w, bool ggufNames, DecoderModel& m);

// [SECTION] One block (blocks.cpp)

using BlockScratch = DecoderBlockScratch;
// The attention's inputs of layer `layer` for the tokens at positions pos0, pos0+1, … (x: their residual stream,
// rows × M): Q rows×H·D and K, V rows×H_kv·D, normed (QK-norm) and rotated (RoPE) where the model does. With
// period > 0, x is blocks of `period` rows, each the same positions pos0 … pos0+period−1 (the stacked variants of a
// head scan, core/model/interp.cpp), so that the projections stream the weights once for all blocks. `normed`
// receives the pre-norm's output (untouched without pre-norms).
void attentionInputs(const DecoderModel& model, int layer, const Matrix& x, int pos0, Matrix& normed, Matrix& Q,
                     Matrix& K, Matrix& V, int period = 0);
// The rest of the block: the attention's output (its post-norm), the residual, the feed-forward (its norms), as
// the configuration says. `scratch` holds buffers.
void afterAttention(const DecoderModel& model, int layer, const Matrix& attnOut, const Matrix& x, BlockScratch& scratch,
                    Matrix& out);
// The final norm of the residual stream (rows × M).
void finalNorm(const DecoderModel& model, const Matrix& x, Matrix& out);
// The model's norm (RMSNorm or LayerNorm; an empty β is 0) of every row.
void normRows(const DecoderConfig& c, const Matrix& x, const Vector& gamma, const Vector& beta, Matrix& out);
// QK-norm of Q (heads = H) or K (heads = H_kv) in place, as c.qkNorm says; nothing when gamma is empty.
void qkNormRows(const DecoderConfig& c, const Vector& gamma, int heads, Matrix& x);
// RoPE of layer `layer` on `heads` heads of x's rows (positions pos0…, or blocks of `period`), in place.
void ropeRows(const DecoderConfig& c, int layer, Matrix& x, int heads, int pos0, int period = 0);
// The final logit soft-cap (Gemma 2), in place; nothing without one.
void finalSoftcap(const DecoderConfig& c, Matrix& logits);

// [SECTION] Shared numerics (decoder.cpp)

// The attention core's configuration for layer `layer`: Q, K, V given (Direct mode, after RoPE), causal,
// grouped-query, the model's score scale and soft-cap.
AttentionConfig layerConfig(const DecoderConfig& c, int layer, Backend backend);
// Layer `layer`'s sliding window for `queries` rows at positions pos0… over `keys` keys: key j is hidden from
// query i when i − j ≥ window (on top of causality); mask.custom is left empty when nothing is hidden.
void slidingWindowMask(const DecoderConfig& c, int layer, int queries, int pos0, int keys, MaskSpec& mask);
// The first key a query at position `pos` sees through layer `layer`'s window (0 without one).
Eigen::Index firstKeyInWindow(const DecoderConfig& c, int layer, Eigen::Index pos);

// out = a · b with b's columns split over the thread team (Eigen's own products run on one thread in core).
void product(const Matrix& a, const Matrix& b, Matrix& out);
// out = a · btᵀ (bt stored with the output's columns as its rows, e.g. the V×M unembedding), split the same way.
void productTransposed(const Matrix& a, const Matrix& bt, Matrix& out);
// RMSNorm of every row (as Hugging Face's LlamaRMSNorm: x / sqrt(mean(x²) + eps) · gamma).
void rmsNormRows(const Matrix& x, const Vector& gamma, float eps, Matrix& out);
// LayerNorm of every row (biased variance, as torch.nn.LayerNorm).
void layerNormRows(const Matrix& x, const Vector& gamma, const Vector& beta, float eps, Matrix& out);

} // namespace attn::detail
