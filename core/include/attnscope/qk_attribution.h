// Why does this head attend here? (issue 35). The score of query i on key j in head (l, h) decomposed into what
// wrote the query's and the key's residual streams, path patching of a head's pattern, and composition scores
// between heads. Part of attnscope_model (core/model/qk_attribution.cpp), documented in docs/interp.md ("Why does
// this head attend here?").
//
// The decomposition. Layer l reads x_p = hidden[l] row p, which is exactly the sum of the components that wrote it:
//   "embed"      the token embedding (+ GPT-2's position embedding)
//   "Lk.Hh"      head h of an earlier layer k: its context · its D rows of W^O (0 when ablated)
//   "Lk.bias"    b^O of layer k (only for models with output-projection biases: GPT-2)
//   "Lk.mlp"     layer k's feed-forward output (with its biases)
// The norm before the attention is frozen at its scale in this run (as direct logit attribution freezes the final
// norm): s_p = 1/rms(x_p) (RMSNorm) or 1/σ(x_p) (LayerNorm, whose centring is linear and so applied to each
// component). Then q_i = Σ_c q_i^(c) + q_i^(bias), with q_i^(c) = RoPE_i(s_i · c_i · diag(γ) · W^Q_h) and the
// constant term
//   "Ll.qk_bias" of the head's own layer l: RoPE_i(β·W^Q_h + b^Q_h) on the query side, RoPE_j(β·W^K_g + b^K_g) on
//                the key side (LayerNorm's β and the projections' biases: GPT-2, Qwen2; absent when both are 0),
// and likewise k_j. RoPE is linear at a fixed position, so score(i, j) = scale · q_i·k_j = Σ_{c,c'} scale ·
// q_i^(c)·k_j^(c') exactly (to float rounding). The other blocks freeze the same way (docs/interp.md): a QK-norm
// (Qwen3, Gemma 3 per head, OLMo 2 over the whole row) is a per-position scale s'_p and γ' after the projection,
// frozen from the run's own q and k; a post-norm after the attention (Gemma, OLMo 2) makes each head's component
// its share γ ⊙ head_out / rms(attention output) of what the block wrote; a block without a pre-norm (OLMo 2) has
// s_p = 1; a parallel residual (GPT-NeoX) changes nothing here. A score soft-cap (Gemma 2) is not linear: the parts
// sum to the score before the cap (QkCell::score), and the capped score the softmax read is given beside it. Every component list is the same on both sides, in this order:
// embed, L0.H0 … L0.H{H−1}, [L0.bias], L0.mlp, …, L{l−1}.mlp, [Ll.qk_bias].
//
// Runs: a dense run (a lazy run of a long text keeps no per-head contexts: Unsupported, run the text dense). A run
// whose layer l has pinned Q, K, V (an edit in the chain view) is Unsupported for that layer: its scores do not come
// from the residual stream.
// Shapes: n tokens, C components, D head width, M = d_model, L layers, H query heads.
#pragma once

#include "attnscope/decoder.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <string>
#include <vector>

namespace attn {

// The component names of layer `layer`'s residual stream, in the order above (C of them). Empty for a layer
// outside 0..L−1.
std::vector<std::string> qkComponentNames(const DecoderModel& model, int layer);

// One cell (layer, head, query i, key j): where its score comes from.
struct QkCell {
    int layer = 0, head = 0, query = 0, key = 0;
    float score = 0;                      // the run's scaled q_i·k_j (what the parts sum to, to float rounding);
                                          // with a soft-cap, the raw score before it
    float cappedScore = 0;                // what the softmax read: softcap·tanh(score / softcap), or the score
    float softcap = 0;                    // the layer's score soft-cap (Gemma 2: 50), 0 = none
    float weight = 0;                     // the run's softmax weight of the cell
    float scale = 0;                      // the factor applied to q·k (1/√D)
    std::vector<std::string> components;  // C names
    Vector queryComponents;               // C: scale · q_i^(c) · k_j  (the whole key); sums to the score
    Vector keyComponents;                 // C: scale · q_i · k_j^(c') (the whole query); sums to the score
    Matrix matrix;                        // C×C: scale · q_i^(c) · k_j^(c'); row sums = queryComponents
};

// InvalidArgument for a layer, head or position out of range, or a key the query does not see (in its future, or
// outside Mistral's sliding window): "key 7 is after query 5 (masked: a query sees keys 0..5)". Unsupported for a
// lazy run or a pinned layer (see above).
Expected<QkCell> qkAttribution(const DecoderModel& model, const DecoderRun& run, int layer, int head, int query, int key);

// The k entries of a cell's C×C matrix largest by |value|, largest first (ties: the earlier query component, then
// key component): which query-side component matched which key-side one. k ≤ 0 gives none.
struct QkPair {
    int query = 0, key = 0;  // component indices (QkCell::components)
    float value = 0;         // matrix(query, key)
};
std::vector<QkPair> strongestQkPairs(const QkCell& cell, int k);

// The indices of the k entries of `values` (one side's C components) largest by |value|, largest first (ties: the
// earlier component). k ≤ 0 gives none.
std::vector<int> strongestQkComponents(const Vector& values, int k);

// A cell's components grouped by layer, for a view that cannot show C = 291 rows: "embed" and the head's own
// layer's "Ll.qk_bias" stay alone; every earlier layer k is one group "Lk" (its heads, b^O and MLP summed) unless
// it is in `expandedLayers`, whose components then stay one by one. Sums of the cell's numbers, so that the
// groups still add up to the score.
struct QkGroups {
    std::vector<std::string> names;         // G: "embed", "L3" (a whole layer), or a component ("L3.H4", "L3.mlp")
    std::vector<int> layer;                 // G: the layer a group belongs to (−1: embed; the own layer: qk_bias)
    std::vector<bool> wholeLayer;           // G: the group is a whole (collapsed) layer
    std::vector<std::vector<int>> members;  // G: the component indices it sums
    Matrix matrix;                          // G×G: sums of QkCell::matrix over the members (row = query side)
    Vector queryComponents, keyComponents;  // G: sums of QkCell::queryComponents / keyComponents
};
// Names that follow no known scheme stay groups of their own.
QkGroups groupQkByLayer(const QkCell& cell, const std::vector<int>& expandedLayers);
// The layer of a component name ("L3.H4" → 3, "L3.mlp" → 3, "L5.qk_bias" → 5), −1 for "embed" or another name;
// `head` (when given) gets the head of an "Lk.Hh" name, else −1.
int qkComponentLayer(const std::string& name, int* head = nullptr);

// A whole query row at once: every key the query sees (keys firstKey..query), so that a view can say why key j
// beats key j' (the difference of their rows).
struct QkRow {
    int layer = 0, head = 0, query = 0;
    int firstKey = 0;                     // the first key the query sees (0 unless a sliding window hides some)
    float scale = 0;
    std::vector<std::string> components;  // C names
    float softcap = 0;                    // as QkCell::softcap (scores are before it)
    Vector scores, weights;               // keys = query − firstKey + 1: the run's score (before a soft-cap) and
                                          // weight of each key
    Vector cappedScores;                  // keys: what the softmax read (= scores without a soft-cap)
    Matrix queryComponents;               // keys × C: row j − firstKey is scale · q_i^(c) · k_j
    Matrix keyComponents;                 // keys × C: scale · q_i · k_j^(c')
    Matrix queryVectors;                  // C×D: q_i^(c) (after the frozen norm, the projection and RoPE)
    Matrix keyVectors;                    // (keys·C)×D: rows (j − firstKey)·C … hold k_j^(c')
    // The C×C matrix of key j (firstKey ≤ j ≤ query), from the vectors: scale · q_i^(c) · k_j^(c').
    Matrix matrix(int key) const;
};
// Errors as qkAttribution (the key is not asked).
Expected<QkRow> qkAttributionRow(const DecoderModel& model, const DecoderRun& run, int layer, int head, int query);

// Why key `key` beats key `other` (or loses to it) in a row: per component, its part of the difference of their
// scores, on each side. Both sides sum to difference (to float rounding).
struct QkKeyContrast {
    int key = 0, other = 0;
    float difference = 0;  // scores[key] − scores[other] (before a soft-cap)
    Vector keySide;        // C: keyComponents(key) − keyComponents(other): what the keys' components give the same
                           // query differently (a previous-token head writing into one key and not the other)
    Vector querySide;      // C: queryComponents(key) − queryComponents(other): how much more each query-side
                           // component matches the one key than the other
};
// InvalidArgument for a key outside the row ("key 3 is not in query 9's row (keys 6..9)").
Expected<QkKeyContrast> contrastKeys(const QkRow& row, int key, int other);
// The key of the row with the largest weight other than `key` (ties: the earlier key), −1 when the row has no other.
int runnerUpKey(const QkRow& row, int key);

// Path patching of a pattern: head (layer, head)'s whole n×n pattern recomputed with one component removed from
// the keys' side only (every k_j loses k_j^(c)) or the queries' side only (every q_i loses q_i^(c)); the scores
// are the scaled q·k of the rest (soft-capped where the layer is), the softmax over the same keys (causal, the
// sliding window). The norms stay
// frozen at the run's scale: this is the linear picture above, not a rerun of the layers below.
enum class QkSide { Query, Key };
const char* toString(QkSide side);  // "query", "key"
struct PatternPatch {
    std::string component;
    QkSide side = QkSide::Key;
    Matrix original;    // n×n: the run's weights (0 above the diagonal and outside the window)
    Matrix patched;     // n×n: the weights with the component removed
    Matrix difference;  // patched − original
};
// InvalidArgument for an unknown component (naming the layer's first and last) or an out-of-range layer or head;
// Unsupported as qkAttribution.
Expected<PatternPatch> patchPattern(const DecoderModel& model, const DecoderRun& run, int layer, int head,
                                    const std::string& component, QkSide side);

// Composition scores between heads (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"; as
// TransformerLens's all_composition_scores): for head A of layer a and head B of a later layer b, with W_OV = W^V·W^O
// of a head (its KV group's W^V) and W_QK = W^Q·W^Kᵀ (its KV group's W^K), as M×M maps of row vectors,
//   Q: ‖W_OV^A · W_QK^B‖_F / (‖W_OV^A‖_F ‖W_QK^B‖_F)
//   K: ‖W_OV^A · (W_QK^B)ᵀ‖_F / (…)       V: ‖W_OV^A · W_OV^B‖_F / (‖W_OV^A‖_F ‖W_OV^B‖_F)
// Norms folded in as TransformerLens's fold_ln does (their γ, not their per-position scales, which belong to a run):
// each reading weight (W^Q, W^K, W^V) is diag(γ)·W of its layer's attention norm (none without pre-norms: OLMo 2);
// W^Q and W^K also times the QK-norm's γ' on their columns; W^O times its post-norm's γ on its outputs (Gemma,
// OLMo 2); for LayerNorm (GPT-2, GPT-NeoX) the reading weights are also centred over d_model and W^O's outputs
// centred (center_writing_weights). Quantized weights are dequantized one layer at a time.
struct CompositionScores {
    std::vector<std::string> names;  // L·H: "L3.H4", row/column index l·H + h
    Matrix q, k, v;                  // (L·H)×(L·H): row = writer A, column = reader B; 0 unless layer(A) < layer(B)
};
// InvalidArgument for a model without layers.
Expected<CompositionScores> compositionScores(const DecoderModel& model);

struct CompositionPair {
    int from = 0, to = 0;  // indices into names
    char kind = 'q';       // 'q', 'k' or 'v'
    float value = 0;
};
// The k largest scores over the three maps, largest first (ties: lower kind, from, to first).
std::vector<CompositionPair> strongestCompositions(const CompositionScores& scores, int k);

// Floating-point work, for the bounds of `model --bench` (flops / the measured SGEMM rate): a cell's decomposition
// at layer `layer`, a whole row over n tokens, and every head pair's composition scores.
double qkCellFlops(const DecoderConfig& c, int layer);
double qkRowFlops(const DecoderConfig& c, int layer, int n);
double compositionFlops(const DecoderConfig& c);

} // namespace attn
