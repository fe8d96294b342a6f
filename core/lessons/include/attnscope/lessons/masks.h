// Masks (seed 004): masked softmax of a scores matrix (look-ahead, key padding, valid lengths).
#pragma once

#include "attnscope/status.h"
#include "attnscope/types.h"

#include <vector>

namespace attn {

// Masked softmax of a scores matrix (seed 004's masked_softmax, and the look-ahead / key-padding masks):
// row i is query i, column j key j. Masked entries take mask.fill before the softmax (so they are exactly
// 0 for fill = -inf, and 0 after float rounding for a large negative fill such as -1e6 — exp(-1e6) is 0 in
// double); the rest are renormalised. A row with every key masked and fill = -inf is all zeros.
struct MaskedSoftmax {
    MaskMatrix masked;               // T×S, 1 = masked
    Matrix weights;                  // T×S
    Vector rowSums;                  // T
    std::vector<int> fullyMaskedRows;
    int maskedNonZero = 0;           // masked entries whose weight is not exactly 0 (expected 0)
};
// scores: T×S (row orientation); mask.custom, when given, T×S. Errors (InvalidArgument): empty scores,
// non-finite scores, key padding not S long, valid lengths not 1 or T values or negative, custom mask
// not T×S, a fill that is NaN or +inf.
Expected<MaskedSoftmax> maskedSoftmax(const Matrix& scores, const MaskSpec& mask);

} // namespace attn
