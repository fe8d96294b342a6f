// Additive attention (seed 004): w_vᵀ·tanh(q·A_q + k·A_k) for one (query, key) pair, term by term.
//
// Orientation: matrices are in "token rows" orientation (query i is row i, key j is row j) unless a field
// says otherwise; fields named "...InLayout" keep the session's layout (attnscope/layout.h converts).
#pragma once

#include "attnscope/attention.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

namespace attn {

// score(q, k) = w_vᵀ · tanh(q·A_q + k·A_k) for one (query, key) pair of one head, term by term.
struct AdditiveBreakdown {
    int head = 0, query = 0, key = 0;
    Vector q;            // d_q
    Vector k;            // d_k (may differ from d_q)
    Vector qProjected;   // A: q·A_q
    Vector kProjected;   // A: k·A_k
    Vector hidden;       // A: q·A_q + k·A_k
    Vector activated;    // A: tanh(hidden)
    Vector products;     // A: w_v[a]·tanh(hidden[a])
    float score = 0.0f;        // Σ products (accumulated in double)
    float resultScore = 0.0f;  // the score core computed for this pair
};
// `in` must be the input `result` was computed from with Score::Additive.
// Errors (InvalidArgument): head/query/key out of range; A_q, A_k, w_v shapes not matching the head
// widths of the result.
Expected<AdditiveBreakdown> additiveBreakdown(const AttentionInput& in, const AttentionResult& result,
                                              int head, int query, int key);

} // namespace attn
