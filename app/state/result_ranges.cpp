#include "state/result_ranges.h"

#include <algorithm>
#include <thread>

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
    const std::size_t H = r.heads.size();
    g.scores.resize(H);
    g.weights.resize(H);
    g.headOut.resize(H);
    auto heads = [&](std::size_t first, std::size_t step) {
        for (std::size_t k = first; k < H; k += step) {
            const attn::HeadResult& h = r.heads[k];
            g.scores[k] = attn::displayRange(h.scores, &h.masked, o.scores);
            g.weights[k] = attn::displayRange(h.weights, &h.masked, o.weights);
            g.headOut[k] = attn::displayRange(h.output, nullptr, o.output);
        }
    };
    // Heads are independent: large results scan them on a few threads (at n=4096, h=8, 268 M values: the scan
    // is bound by memory, which one core does not saturate). Small ones stay on this thread (a thread's start
    // costs more than their scan).
    constexpr std::size_t kThreadedValues = std::size_t(1) << 22;
    const std::size_t values = H ? H * std::size_t(r.heads[0].weights.size()) : 0;
    const std::size_t n = values >= kThreadedValues ? std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::min<std::size_t>(4, H)) : 1;
    std::vector<std::thread> team;
    for (std::size_t t = 1; t < n; ++t) team.emplace_back(heads, t, n);
    heads(0, n);
    for (std::thread& t : team) t.join();
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
