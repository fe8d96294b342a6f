// A trained BERT-family encoder (e.g. sentence-transformers' all-MiniLM-L6-v2) run through the attention core.
//
// Part of attnscope_model (core/model/), documented in docs/model.md. Load a Hugging Face model directory
// (config.json + model.safetensors + tokenizer.json or vocab.txt), tokenise text, run the encoder with every
// layer's X and every head's scores and weights kept, ablate heads, edit weights and recompute from the edited
// layer on. Shapes: n tokens, M = d_model (hidden_size), H heads, F = intermediate_size, L layers.
#pragma once

#include "attnscope/status.h"
#include "attnscope/tokenizer.h"
#include "attnscope/types.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attn {

// What config.json says (the fields the encoder needs).
struct ModelConfig {
    std::string modelType;        // "bert" (the one supported model_type)
    int layers = 0;               // num_hidden_layers, L
    int heads = 0;                // num_attention_heads, H
    int hidden = 0;               // hidden_size, M (H must divide it)
    int intermediate = 0;         // intermediate_size, F
    int maxPositions = 0;         // max_position_embeddings (texts are truncated to this many tokens)
    int vocabSize = 0;            // vocab_size
    int typeVocabSize = 2;        // type_vocab_size; default 2
    float layerNormEps = 1e-12f;  // layer_norm_eps; default 1e-12
};

// Parses config.json text. Unsupported names the model_type and what is supported; InvalidArgument names a
// missing or out-of-range field ("config.json: num_attention_heads: 5 does not divide hidden_size 384").
Expected<ModelConfig> parseModelConfig(const std::string& text);

// One encoder layer, stored in the attention core's convention (x·W + b, W is in×out: the transpose of a
// PyTorch Linear weight) so that `attention` is a ready attn::AttentionInput (X is set per forward).
struct EncoderLayer {
    AttentionInput attention;   // Wq, Wk, Wv M×M; bq, bk, bv M; Wo M×M; bo M
    Vector ln1Gamma, ln1Beta;   // attention output LayerNorm, M
    Matrix W1; Vector b1;       // feed-forward in: M×F, F
    Matrix W2; Vector b2;       // feed-forward out: F×M, M
    Vector ln2Gamma, ln2Beta;   // output LayerNorm, M
};

struct Model {
    std::string name;           // the directory's last component, e.g. "all-MiniLM-L6-v2"
    ModelConfig config;
    Tokenizer tokenizer;
    Matrix wordEmbeddings;      // vocab_size×M
    Matrix positionEmbeddings;  // max_position_embeddings×M
    Matrix typeEmbeddings;      // type_vocab_size×M
    Vector embLnGamma, embLnBeta;
    std::vector<EncoderLayer> layers;
};

// Loads a model directory. Errors: IoError (missing directory or file, naming it), Unsupported (model_type,
// hidden_act, position_embedding_type), ParseError (corrupt safetensors / JSON), InvalidArgument (a tensor
// missing or whose shape contradicts config.json: "encoder.layer.0.attention.self.query.weight: expected
// 384×384 (hidden_size × hidden_size), got 384×383"). Tensor names may carry a "bert." prefix.
Expected<Model> loadModel(const std::string& dir);

// The result of one forward, everything kept for the views.
struct ModelRun {
    Encoding encoding;                     // tokens, ids, type ids
    std::vector<std::pair<int, int>> ablated;  // (layer, head) pairs whose weights were multiplied by 0
    std::vector<Matrix> hidden;            // L+1 matrices n×M: hidden[l] is layer l's X, hidden[L] the output
    std::vector<AttentionResult> attention; // L results: per head Q, K, V, scores (scaled), weights
    Vector embedding;                      // M: mean of hidden[L] over the tokens, L2-normalised
    std::vector<std::string> warnings;     // truncation, backend fallback
    // Buffers of the feed-forward, kept so that the next forward or recompute of the same length allocates
    // nothing: the attention LayerNorm's output (n×M) and the GELU activations (n×F) of the last layer run.
    struct Scratch { Matrix normed, ffn; } scratch;
};

struct ModelOptions {
    Backend backend = Backend::Cpu;        // the attention core's backend; default Cpu
    std::vector<std::pair<int, int>> ablate; // heads to ablate as Hugging Face's head_mask; default none
};

// Tokenises and runs the whole encoder. `b` adds a second sentence (pair template). InvalidArgument for bad
// UTF-8 or an ablation (layer, head) outside L×H ("ablate: layer 7 is outside 0..5").
// Sets each model.layers[l].attention.X to that layer's input, so the layer's AttentionInput is exactly what
// the attention core computed (the chain view opens it as a session).
Expected<ModelRun> runModel(Model& model, const std::string& a, const std::optional<std::string>& b,
                            const ModelOptions& options = {});
// The same into an existing run, reusing its buffers when the token count did not change (what the window's
// reruns and the bench do). On error `run` is left in an unspecified but valid state.
Status runModel(Model& model, const std::string& a, const std::optional<std::string>& b, const ModelOptions& options,
                ModelRun& run);

// Recomputes layers `fromLayer`…L−1 of `run` (and the embedding) after an edit of that layer's weights or of
// run.ablated; layers below keep their results. `run` must come from runModel on this model.
Status recomputeFrom(Model& model, int fromLayer, ModelRun& run, Backend backend = Backend::Cpu);

// A layer's input replaced by given hidden states (an edit of that layer's X in the chain view).
struct PinnedInput {
    int layer = -1;  // the layer whose input is replaced; −1 = none
    Matrix X;        // n×M, the run's token count × hidden_size
};
// The same with `pin`: when fromLayer ≤ pin.layer, run.hidden[pin.layer] becomes pin.X before that layer
// runs, so layers pin.layer…L−1 see the edited input (a full forward with that input injected). A pin below
// fromLayer is already in run.hidden and is left as it is. InvalidArgument for a pin outside 0..L−1 or of
// the wrong shape ("pinned input of layer 3: expected 17×384 (tokens × hidden_size), got 17×383").
Status recomputeFrom(Model& model, int fromLayer, ModelRun& run, const PinnedInput& pin, Backend backend = Backend::Cpu);

// Parses "L:H[,L:H…]" (e.g. "0:3,5:11") into pairs, checked against the model's L and H.
Expected<std::vector<std::pair<int, int>>> parseAblation(const std::string& text, int layers, int heads);

// Cosine similarity of two vectors of equal length (0 when either is zero).
float cosineSimilarity(const Vector& a, const Vector& b);

} // namespace attn
