// What the last compute() into a result changed, for callers that keep things derived from its maps (the
// window's colour ranges), and displayRange's parts for ranges kept per part of a map.
#pragma once

#include "attnscope/colormap.h"
#include "attnscope/types.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attn {

// Against the result whose serial is `base`: everything (all), or, in row semantics, the queries and keys whose
// rows changed (a head not marked in headAll changed its scores in those rows and columns only, its weights as
// rowScale says). serial: the
// identity of the values the result holds now (a fresh number each compute; a copy by attn::copyResult keeps it).
struct ResultChange {
    bool all = true;
    std::uint64_t base = 0, serial = 0;
    std::vector<int> queries, keys;
    std::vector<char> headAll;
    // Per head h and query i (index h·T + i), for a head not changed whole: the float every weight of row i
    // was multiplied by (1: untouched), the weights at the changed keys being new values; NaN where the row
    // was recomputed. (Empty: not known.)
    std::vector<float> rowScale;
};

// The fast CPU path's account of the last compute into r; null where there is none (another path, a plain copy):
// then everything changed.
const ResultChange* resultChange(const AttentionResult& r);

// Extends [lo, hi] by the finite values of p[0..n) whose mask flag (mask may be null) is 0, counting the
// non-finite ones (as attn::displayRange); and the range displayRange gives for that min/max (lo > hi: none).
void extendFiniteRange(const float* p, const std::uint8_t* mask, std::ptrdiff_t n, float& lo, float& hi, int& nonFinite);
DisplayRange rangeFromMinMax(float lo, float hi, int nonFinite, bool symmetric);

} // namespace attn
