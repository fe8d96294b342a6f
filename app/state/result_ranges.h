// The colour ranges of a result's heatmaps, computed by core (attn::displayRange) once per result, on the
// compute worker's thread when there is one: at n=4096, h=8 that is 256M values per matrix kind, far too
// many for a frame.
#pragma once

#include <attnscope/attention.h>
#include <attnscope/colormap.h>

#include <vector>

namespace app {

// How ranges are computed: symmetric ([-a, a], for diverging colormaps) per kind of map, and whether the
// heads share one range per kind.
struct RangeOptions {
    bool projection = true, scores = true, weights = false, output = true;  // symmetric?
    bool shared = true;
    bool operator==(const RangeOptions& o) const
    {
        return projection == o.projection && scores == o.scores && weights == o.weights && output == o.output && shared == o.shared;
    }
    bool operator!=(const RangeOptions& o) const { return !(*this == o); }
};

struct ResultRanges {
    RangeOptions options;
    bool valid = false;  // computed for a result
    double ms = 0;       // time taken to compute them on the worker (bench --gui reports it)
    attn::DisplayRange q, k, v, concat, output;
    std::vector<attn::DisplayRange> scores, weights, headOut;  // per head (all equal when options.shared)
};

// Every range of `r` under `o` (masked entries are left out of the scores' and weights' ranges).
ResultRanges computeResultRanges(const attn::AttentionResult& r, const RangeOptions& o);

} // namespace app
