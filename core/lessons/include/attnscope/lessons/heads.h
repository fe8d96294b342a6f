// Heads (seeds 002/003): which columns belong to each head, the block-identity selector, each head's
// contribution through W^O, and one head against h heads on the same input.
//
// Orientation: matrices are in "token rows" orientation (query i is row i, key j is row j) unless a field
// says otherwise; fields named "...InLayout" keep the session's layout (attnscope/layout.h converts).
#pragma once

#include "attnscope/attention.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <string>
#include <vector>

namespace attn {

// Which columns of W^Q/W^K/W^V and Q/K/V (Row layout; rows in Column layout) and which rows of W^O
// (columns in Column layout) belong to a head: [begin, end) ranges. With grouped-query attention the K and
// V ranges are those of the head's KV head, shared by its group.
struct HeadBlock {
    int head = 0;
    int kvHead = 0;             // the KV head it reads (= head for multi-head attention)
    int qBegin = 0, qEnd = 0;   // in W^Q and Q (width H·d_q)
    int kBegin = 0, kEnd = 0;   // in W^K and K (width H_kv·d_k)
    int vBegin = 0, vEnd = 0;   // in W^V and V (width H_kv·d_v)
    int oBegin = 0, oEnd = 0;   // in concat (width H·d_v); also W^O's rows (Row layout)
};
std::vector<HeadBlock> headBlocks(const Dims& d);

// A few sentences on grouped-query attention with the session's numbers: how many query heads share each
// key/value head, which KV head a query head reads, how much narrower K and V (and a decoder's KV cache) are
// than with multi-head attention; for a multi-head session, what grouping would do.
std::string groupedQueryText(const Dims& d);

// Seed 003's block-identity matrix W_h: width × (width/heads), the identity in rows
// [h·width/heads, (h+1)·width/heads) and zero elsewhere, so that Q·W_h = Q_h (head h's columns).
// Errors (InvalidArgument): width < 1, heads < 1, heads not dividing width, head outside [0, heads).
Expected<Matrix> headSelector(int width, int heads, int head);

// The contribution of each head to the final output: head h's output times its block of W^O,
//   contribution_h = O_h · W^O[rows of head h]   (Row layout; Column: W^O[:, cols of h] · O_h),
// so Σ_h contribution_h + b_o = output. Without W^O, contribution_h is concat with every other head's
// columns zero, and the sum is concat.
struct HeadContributions {
    std::vector<Matrix> perHead;   // H matrices, each shaped like result.output, in the result's layout
    Matrix sum;                    // Σ perHead (in double), shaped like the output
    Vector bias;                   // b_o (empty when none)
    float maxAbsDiff = 0.0f;       // max |sum + b_o − output|: float rounding only
    std::vector<float> norms;      // Frobenius norm of each contribution, for a bar chart
};
// `in` must be the input `result` was computed from (its Wo and bo are read).
// Errors (InvalidArgument): result without heads; Wo's shape not matching the result ("Wo: expected
// 6×4 (H·d_v × O), got 5×4").
Expected<HeadContributions> headContributions(const AttentionInput& in, const AttentionResult& result);

// One head vs h heads on the same input (seed 003): the single head scores with all of Q and K, so its
// raw scores are the sum of the per-head products, QKᵀ = Σ_h Q_h·K_hᵀ, and every output block uses the
// same weights; h heads keep the products apart (only the red diagonal terms of the seed's figure).
struct HeadsComparison {
    int heads = 1;
    AttentionResult oneHead;               // cfg with heads = 1
    AttentionResult multiHead;             // cfg with heads = h
    std::vector<Matrix> perHeadRawScores;  // H matrices T×S: Q_h·K_hᵀ (token rows, unscaled)
    Matrix oneHeadRawScores;               // T×S: Q·Kᵀ (unscaled)
    float maxAbsDecompositionDiff = 0.0f;  // max |Q·Kᵀ − Σ_h Q_h·K_hᵀ|: float rounding only
    float maxAbsOutputDiff = 0.0f;         // max |oneHead.output − multiHead.output|: how much heads change
};
// Errors (InvalidArgument): heads < 1, Additive score (no QKᵀ to decompose), grouped-query attention
// (cfg.kvHeads set below heads: one head and h heads would need Q and K of equal width), and whatever compute()
// returns for either head count (e.g. heads not dividing a width).
Expected<HeadsComparison> compareHeadCounts(const AttentionInput& in, const AttentionConfig& cfg, int heads);

} // namespace attn
