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

// The min and max of each line of one head's map, over its finite unmasked values, and where in the line they
// are (-1: the line has none): what an incremental range starts from. A line is a stored row, except for the
// weights in Column layout, whose lines are the stored columns (queries).
struct LineRanges {
    std::vector<float> lo, hi;
    std::vector<int> loAt, hiAt;
    int nonFinite = 0;  // in the whole map (a map with any is scanned whole next time)
};

struct ResultRanges {
    RangeOptions options;
    bool valid = false;  // computed for a result
    double ms = 0;       // time taken to compute them on the worker (bench --gui reports it)
    attn::DisplayRange q, k, v, concat, output;
    std::vector<attn::DisplayRange> scores, weights, headOut;  // per head (all equal when options.shared)
    // The scores' per-line ranges (per head) and the result they describe (attn::ResultChange::serial; 0: none).
    std::vector<LineRanges> scoreLines, weightLines;
    std::uint64_t serial = 0;
    int scoresUpdated = 0;   // heads whose scores' range came from `prev` and the changed rows/columns
    int weightsUpdated = 0;  // heads whose weights' range came from `prev`, the queries' scales and the changed keys
};

// Every range of `r` under `o` (masked entries are left out of the scores' and weights' ranges). With `prev`,
// the ranges of the result `r` was updated from (attn::resultChange(r)->base == prev->serial), a head whose
// scores changed only in some rows and columns (attn::ResultChange) has its scores' range from prev's and those alone:
// only the lines that changed are scanned, and the others' changed cells; a line whose old min or max sat in
// a changed cell that moved inward is scanned whole, so the range is the one a full scan gives. The weights'
// range likewise, per query (a stored row in Row layout, a stored column in Column layout): a rescaled query's
// min and max are the old ones times its scale (a float product keeps the order), then its changed keys as
// above; a recomputed query is scanned whole.
// A CUDA result the device still holds (maps copied back or kept there) has its scores' and weights' ranges from the
// device (attn::DeviceMaps::ranges: no host scan, no per-line ranges, `prev` unused); once the device no longer holds
// it, from the host's maps as above (none for a mapsOnDevice result: the empty maps' ranges).
ResultRanges computeResultRanges(const attn::AttentionResult& r, const RangeOptions& o, const ResultRanges* prev = nullptr);

} // namespace app
