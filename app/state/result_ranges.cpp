#include "state/result_ranges.h"

#include <algorithm>

namespace app {

ResultRanges computeResultRanges(const attn::AttentionResult& r, const RangeOptions& o)
{
    ResultRanges g;
    g.options = o;
    g.valid = true;
    g.q = attn::displayRange(r.Q, nullptr, o.projection);
    g.k = attn::displayRange(r.K, nullptr, o.projection);
    g.v = attn::displayRange(r.V, nullptr, o.projection);
    g.concat = attn::displayRange(r.concat, nullptr, o.output);
    g.output = attn::displayRange(r.output, nullptr, o.output);
    for (const attn::HeadResult& h : r.heads) {
        g.scores.push_back(attn::displayRange(h.scores, &h.masked, o.scores));
        g.weights.push_back(attn::displayRange(h.weights, &h.masked, o.weights));
        g.headOut.push_back(attn::displayRange(h.output, nullptr, o.output));
    }
    if (o.shared && r.heads.size() > 1) {
        const attn::DisplayRange a = attn::unionRange(g.scores, o.scores);
        const attn::DisplayRange b = attn::unionRange(g.weights, o.weights);
        const attn::DisplayRange c = attn::unionRange(g.headOut, o.output);
        std::fill(g.scores.begin(), g.scores.end(), a);
        std::fill(g.weights.begin(), g.weights.end(), b);
        std::fill(g.headOut.begin(), g.headOut.end(), c);
    }
    return g;
}

} // namespace app
