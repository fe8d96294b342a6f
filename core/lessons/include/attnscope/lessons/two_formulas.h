// The two formulas (seeds 000/001): softmax(QKᵀ/√d_k)·V on tokens-as-rows data and V·softmax(KᵀQ/√d_k)
// on tokens-as-columns data, and what goes wrong when data laid out one way meets the other formula.
//
// Orientation: matrices are in "token rows" orientation (query i is row i, key j is row j) unless a field
// says otherwise; fields named "...InLayout" keep the session's layout (attnscope/layout.h converts).
#pragma once

#include "attnscope/lessons/vector_view.h"
#include "attnscope/attention.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <string>
#include <vector>

namespace attn {

// The same data computed with both formulas (seed 000/001): softmax(QKᵀ/√d_k)·V on tokens-as-rows data
// and V·softmax(KᵀQ/√d_k) on the transposed (tokens-as-columns) data.
struct LayoutComparison {
    AttentionResult row;       // computed with Layout::Row
    AttentionResult column;    // computed with Layout::Column on transposedInput
    float maxAbsDiffOutput = 0.0f;   // max |row.output − column.outputᵀ|: float rounding only
    float maxAbsDiffWeights = 0.0f;  // max over heads of |row weights − (column weights)ᵀ|
};

// `in`/`cfg` may be in either layout; the other one is derived with transposedInput.
// Errors: whatever compute() returns for the input (InvalidArgument, ResourceExhausted, ...).
Expected<LayoutComparison> compareLayouts(const AttentionInput& in, const AttentionConfig& cfg);

// What goes wrong when data laid out one way meets the other formula. Two labelled mistakes:
//  (a) wrong softmax axis: the scores are right (QKᵀ in Row, KᵀQ in Column) but softmax runs along the
//      queries instead of the keys (torch.softmax(dim=0) where dim=1 was meant, or the reverse). Shapes
//      always fit, so nothing fails: each key's weights over the queries sum to 1 instead of each query's
//      weights over the keys. Silent garbage, here labelled.
//  (b) literal other formula: the other formula applied to the stored matrices as they are, e.g.
//      softmax(QKᵀ)·V on tokens-as-columns Q [d_k, T]: QKᵀ is [d_k, d_k], a softmax over features, not
//      tokens. Either a shape error (LiteralFormula::ShapeMismatch, not a Status) or a wrong-shaped result.
enum class LiteralFormula {
    NotApplicable,   // the additive score has no QKᵀ product to misapply
    ShapeMismatch,   // a product's inner sizes differ: the mistake is loud
    Applies,         // every shape fits: a result of plausible size that is not attention
};
struct WrongFormulaDemo {
    Layout dataLayout = Layout::Row;   // how the session stores tokens
    int head = 0;
    // (a) all in the session's layout (Row: T×S, T×d_v; Column: S×T, d_v×T).
    Matrix scoresInLayout;              // the correct scores, masked entries as stored (before masking)
    Matrix rightWeightsInLayout;        // softmax along the keys (= the head's weights from compute)
    Matrix wrongWeightsInLayout;        // softmax along the queries (the wrong axis), masked entries 0
    Matrix rightOutputInLayout;         // the head output from compute
    Matrix wrongOutputInLayout;         // the same product with the wrong weights
    Vector rightSumsOverKeys;           // T: Σ over keys of the right weights per query (1, or 0)
    Vector wrongSumsOverKeys;           // T: the same sums for the wrong weights (≠ 1 in general)
    Vector wrongSumsOverQueries;        // S: Σ over queries of the wrong weights per key (1, or 0): the tell
    float maxAbsWeightDiff = 0.0f;      // max |right − wrong| weights
    float maxAbsOutputDiff = 0.0f;      // max |right − wrong| outputs
    // (b)
    LiteralFormula literal = LiteralFormula::NotApplicable;  // what applying the other formula did
    std::vector<ProductShape> literalSteps;  // the steps tried; with ShapeMismatch the last one does not fit
                                             // (its inner sizes lhsCols and rhsRows differ)
    Matrix literalOutput;               // its result when it applies (its shape is itself the lesson)
};

// Errors (InvalidArgument): head outside [0, H); whatever compute() returns for the input.
// Works for Dot/ScaledDot and Additive scores (for Additive, (b) is reported as not applicable).
Expected<WrongFormulaDemo> wrongFormulaDemo(const AttentionInput& in, const AttentionConfig& cfg, int head);

} // namespace attn
