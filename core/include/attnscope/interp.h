// Why a decoder says what it says: the views interpretability people build by hand in notebooks, computed from a
// DecoderRun (issue 20). Part of attnscope_model (core/model/interp.cpp), documented in docs/interp.md.
//
// Every score is about a *target*: one token id whose log-probability (or logit) at one position — by default the
// last, whose logits are run.lastLogits — is explained. Shapes: L layers, H query heads, n tokens, M = d_model,
// V = vocabulary. Maps are L×H (row = layer, column = query head), as the window's grid.
//
// Cheap (from the run alone, no forward): directLogitAttribution, logitLens, headTypes.
// Scans (one recompute per head, batched over groups of start layers so that each layer's weights stream once per
// group):
// headImportance, activationPatching. Both compute the rows of the layers nearest the output first (they need the
// fewest layers recomputed), report each finished row through `progress` and stop early when it returns false.
#pragma once

#include "attnscope/decoder.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn {

struct InterpTarget {
    int id = -1;
    std::string token;      // decoded text, e.g. " Paris"
    float logit = 0;        // at the run's last position
    float logprob = 0;      // log softmax(logits)[id], nats
};

// The target `id` at the run's last position; id < 0 takes the most probable token there (the lowest id of equal
// maxima). InvalidArgument for an id outside 0..V−1 or a run without logits.
Expected<InterpTarget> interpTarget(const DecoderModel& model, const DecoderRun& run, int id = -1);

// A typed target: `token` is looked up as one token of the vocabulary (e.g. " Mary"; encoded without special
// tokens it must be exactly one token). InvalidArgument naming the pieces when it is several tokens ("' Marianne'
// is 2 tokens: ' Mar' 'ianne'; a target is one token"), or when it is empty.
Expected<int> targetTokenId(const DecoderModel& model, const std::string& token);

// Direct logit attribution at the last position: each component's write to the residual stream, through the final
// norm frozen at its scale in this run (its 1/rms or 1/σ of the last position, as TransformerLens's
// apply_ln_to_stack does) and the unembedding row of the target. Sum rule: embed + Σ heads + Σ attnBias + Σ mlp +
// normBias = logit (to float rounding). An ablated head contributes 0.
struct DirectLogitAttribution {
    Matrix heads;            // L×H: query head h of layer l: its context · its D rows of W^O
    Vector attnBias;         // L: b^O of each layer (0 for models without output-projection biases)
    Vector mlp;              // L: each layer's feed-forward output
    float embed = 0;         // token (+ GPT-2 position) embedding
    float normBias = 0;      // the final norm's β·u (0 for RMSNorm)
    float logit = 0;         // the target's logit (what the parts sum to)
};
Expected<DirectLogitAttribution> directLogitAttribution(const DecoderModel& model, const DecoderRun& run, int targetId);

// Logit lens: the residual stream after each layer (hidden[l+1], l = 0…L−1; the last row is the model's own
// output), at every position, through the final norm and the unembedding. top[l][i] are the `k` most probable
// tokens of layer l at position i (probabilities at temperature 1). `positions` limits the work to the last
// `positions` positions (0 = all); firstPosition says where they start.
struct LogitLens {
    int firstPosition = 0;
    std::vector<std::vector<std::vector<TokenProbability>>> top;  // L × (n − firstPosition) × k
};
Expected<LogitLens> logitLens(const DecoderModel& model, const DecoderRun& run, int k = 5, int positions = 0);

// Head types from the run's attention weights (w = a head's n×n weights, ids = the run's tokens):
//   previous   mean over queries i ≥ 1 of w[i][i−1]
//   duplicate  mean over queries i with an earlier copy of their token of Σ w[i][j] over j < i with ids[j] = ids[i]
//   induction  mean over queries i with some k, 1 ≤ k < i, ids[k−1] = ids[i], of Σ w[i][k] over those k (the token
//              after an earlier copy of the current one)
//   sink       mean over queries i ≥ 1 of w[i][0] (the attention sink: the first token)
// A score whose set of queries is empty (no repeats in the text) is 0 and the flag says so.
struct HeadTypes {
    Matrix previous, duplicate, induction, sink;  // L×H each
    bool hasRepeats = false;                      // some token occurs twice (duplicate/induction are defined)
};
HeadTypes headTypes(const DecoderRun& run);

// The standard induction probe: [BOS] r r, r = `length` random tokens (from `seed`, splitmix64) chosen among
// ordinary word tokens so that the text re-encodes to exactly these ids. The text and its ids.
struct InductionProbe {
    std::string text;
    std::vector<int> ids;
};
Expected<InductionProbe> inductionProbe(const DecoderModel& model, int length = 20, std::uint64_t seed = 1);

// Called with each finished layer row of a scan, top down; return false to stop (the scan then returns success
// with `out` holding the rows done and NaN in the others). Rows are computed in groups of up to 5 layers (the
// group's variants share the streaming of each weight), so a stop may leave more rows done than were reported.
using ScanProgress = std::function<bool(int layer)>;

// Head importance: out (L×H) = log p(target | head (l,h) ablated too) − log p(target | run) at the last position,
// on top of run.ablated (a head already ablated gets 0). Each row recomputes from its own layer, the layer's H
// variants stacked so that its weights stream once. InvalidArgument for a target outside 0..V−1.
Status headImportance(DecoderModel& model, const DecoderRun& run, int targetId, Matrix& out,
                      const ScanProgress& progress = {});

// Activation patching: the clean and corrupted runs have equal token lengths (same model, same ablations); for
// each head (l,h) its context (its slice of the concat before W^O, at every position) is taken from the clean run
// into the corrupted one and layers l…L−1 recomputed; out(l,h) = (m_patched − m_corrupted) / (m_clean −
// m_corrupted) where m = logit(targetA) − logit(targetB) at the last position (1 = the head restores all of the
// clean difference). InvalidArgument when the lengths differ, the runs ablate different heads, or m_clean =
// m_corrupted. The corrupted run's pin (if any) is honoured in the recomputes.
struct PatchingMetric {
    float clean = 0, corrupted = 0;  // logit(A) − logit(B) in each run
};
Status activationPatching(DecoderModel& model, const DecoderRun& clean, const DecoderRun& corrupted, int targetA,
                          int targetB, Matrix& out, PatchingMetric* metric = nullptr,
                          const ScanProgress& progress = {});

// The floating-point work of a whole scan of every head (headImportance or activationPatching) of a run of n
// tokens: the recomputes from each layer, H variants each, and the last position's logits of each variant. For
// the bound in `model --bench` (flops / measured SGEMM rate).
double headScanFlops(const DecoderConfig& config, int n);

} // namespace attn
