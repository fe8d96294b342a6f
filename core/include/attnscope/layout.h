// The orientation seam: every conversion between the token-rows view of a matrix (one row per token, what the
// row layout softmax(QKᵀ/√d_k)·V stores) and the session's layout (the column layout V·softmax(KᵀQ/√d_k)
// stores every matrix transposed). A row-major T×S matrix and a column-major S×T matrix are the same numbers,
// so each conversion is a transpose or nothing; callers name what they want instead of testing the layout.
#pragma once

#include <attnscope/types.h>

namespace attn {

// The token-rows view of a matrix stored in layout `l` (Row: as is; Column: transposed).
Matrix tokenRows(const Matrix& stored, Layout l);
MaskMatrix tokenRows(const MaskMatrix& stored, Layout l);

// A token-rows matrix stored in layout `l` (the inverse of tokenRows).
Matrix inLayout(const Matrix& rows, Layout l);
MaskMatrix inLayout(const MaskMatrix& rows, Layout l);

// Every matrix of `in` (X, X_kv, the weights, given Q/K/V, the additive parameters and the custom mask)
// transposed: the same problem stated for the other layout. Vectors (biases, key padding, valid lengths) and
// the mask's compact parts do not depend on the layout and are kept.
AttentionInput transposedInput(const AttentionInput& in);
// The input stated in layout `from`, restated for layout `to` (a copy when they are equal).
AttentionInput inputInLayout(const AttentionInput& in, Layout from, Layout to);
// In place, for callers that own the input.
void restateInput(AttentionInput& in, Layout from, Layout to);

// The number of queries (T) and keys (S) of a stored score/weight matrix of layout `l`.
inline Eigen::Index queryCount(const Matrix& storedScores, Layout l)
{
    return l == Layout::Row ? storedScores.rows() : storedScores.cols();
}
inline Eigen::Index keyCount(const Matrix& storedScores, Layout l)
{
    return l == Layout::Row ? storedScores.cols() : storedScores.rows();
}

} // namespace attn
