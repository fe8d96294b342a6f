// The vector view of one output row (seeds 000/001): o_i = Σ_j â_ij·v_j for one query next to row i
// of the matrix version, and the shape of every product of the computation.
//
// Orientation: matrices are in "token rows" orientation (query i is row i, key j is row j) unless a field
// says otherwise; fields named "...InLayout" keep the session's layout (attnscope/layout.h converts).
#pragma once

#include "attnscope/attention.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// The vector version of output row `query` of head `head` (seed 000/001):
//   a_ij = q_i·k_j (raw), s·a_ij (scaled, s = result.scale), â_ij = softmax_j, o_i = Σ_j â_ij·v_j,
// next to row i of the matrix version (the head output computed by core).
struct VectorView {
    int head = 0;
    int query = 0;
    float scale = 1.0f;           // factor applied to q·k (1/√d_k for ScaledDot)
    Vector q;                     // d_q: query i of this head
    Matrix keys;                  // S×d_k: k_j as rows
    Matrix values;                // S×d_v: v_j as rows
    Vector rawScores;             // S: q_i·k_j (Additive: the additive score itself)
    Vector scaledScores;          // S: the scores core computed (after scaling, before masking)
    std::vector<std::uint8_t> masked;  // S: 1 where key j is masked for this query
    Vector weights;               // S: â_ij (row i of the head's weights); masked entries are 0
    Matrix weightedValues;        // S×d_v: row j = â_ij·v_j
    Vector vectorSum;             // d_v: Σ_j â_ij·v_j, summed here in double
    Vector matrixRow;             // d_v: row i of the head output computed by core (matrix version)
    float maxAbsDiff = 0.0f;      // max |vectorSum − matrixRow| (float rounding only)
    float weightSum = 0.0f;       // Σ_j â_ij: 1, or 0 for a query whose keys are all masked
};

// Builds the vector view from a computed result. `score` is the config's score (the result does not
// record it): for Dot/ScaledDot rawScores are recomputed as q_i·k_j; for Additive they equal the scores.
// Errors (InvalidArgument): head outside [0, H), query outside [0, T), a result without heads.
Expected<VectorView> vectorView(const AttentionResult& result, Score score, int head, int query);

// One matrix product of the computation, with shapes as the seed's figures draw them:
//   e.g. "Q·Kᵀ": [T, d_k]·[d_k, S] → [T, S].
struct ProductShape {
    std::string label;     // e.g. "X·W^Q", "Q·Kᵀ", "softmax(·/√d_k)", "A·V", "concat·W^O"
    std::string lhsName;   // e.g. "Q"
    std::string rhsName;   // e.g. "Kᵀ" (empty for an element-wise step such as softmax)
    std::string outName;   // e.g. "QKᵀ"
    int lhsRows = 0, lhsCols = 0;
    int rhsRows = 0, rhsCols = 0;   // 0×0 for element-wise steps
    int outRows = 0, outCols = 0;
    std::string text;      // the whole line, e.g. "Q·Kᵀ: [4, 3]·[3, 4] → [4, 4]"
};

// The products of one head's computation in order (projections when mode ≠ Direct, scores, softmax,
// weights·values, then concat·W^O when hasWo), in the given layout: Row uses softmax(QKᵀ/√d_k)·V with
// tokens as rows, Column uses V·softmax(KᵀQ/√d_k) with tokens as columns. With Score::Additive the score
// step is the two projections q·A_q [T, A] and k·A_k [S, A] (A = d.A) instead of QKᵀ. `d` comes from
// validate().
std::vector<ProductShape> productShapes(const Dims& d, Layout layout, Mode mode, bool hasWo,
                                        Score score = Score::ScaledDot);

} // namespace attn
