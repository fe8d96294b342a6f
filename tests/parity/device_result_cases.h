// What the tests of results kept on the device share (test_parity.cpp's MapsOnDevice, tests/app/test_device_state.cpp):
// the problems they run and a bitwise comparison of colour ranges.
#pragma once

#include "test_util.h"

#include <attnscope/colormap.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace attn::test {

// Both layouts; multi-head and grouped-query; self and direct attention (alternating) with no mask and with every
// kind of mask (valid lengths leave a query with no open key); cross attention (T ≠ S, off the diagonal). Seeds from
// `seed` on.
inline std::vector<std::pair<ProblemSpec, Layout>> deviceResultCases(unsigned seed, int n = 13)
{
    std::vector<std::pair<ProblemSpec, Layout>> cases;
    int count = 0;
    for (Layout layout : {Layout::Row, Layout::Column}) {
        for (auto [heads, kvHeads] : {std::pair{3, 3}, std::pair{4, 2}})
            for (bool masks : {false, true}) {
                ProblemSpec p;
                p.mode = count++ % 2 ? Mode::Direct : Mode::Self;
                p.heads = heads;
                p.kvHeads = kvHeads;
                p.T = p.S = n;
                p.causal = p.keyPadding = p.custom = p.validLens = masks;
                p.wo = true;
                p.seed = seed++;
                cases.push_back({p, layout});
            }
        ProblemSpec cross;
        cross.mode = Mode::Cross;
        cross.heads = 2;
        cross.T = n - 4;
        cross.S = n + 4;
        cross.custom = true;
        cross.seed = seed++;
        cases.push_back({cross, layout});
    }
    return cases;
}

// Equal bit for bit (lo, hi), with the same count of non-finite cells and scale.
inline ::testing::AssertionResult sameRangeBits(const DisplayRange& a, const DisplayRange& b, const std::string& what)
{
    if (std::memcmp(&a.lo, &b.lo, sizeof a.lo) == 0 && std::memcmp(&a.hi, &b.hi, sizeof a.hi) == 0 &&
        a.nonFinite == b.nonFinite && a.scale == b.scale)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": [" << a.lo << ", " << a.hi << "] with " << a.nonFinite
                                         << " non-finite, expected [" << b.lo << ", " << b.hi << "] with " << b.nonFinite;
}

} // namespace attn::test
