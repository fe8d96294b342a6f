#include "state/pooled_parts.h"

#include <attnscope/colormap.h>

#include <algorithm>
#include <thread>

namespace app {
namespace {

constexpr int kResultMatrices = 5;  // Q, K, V, concat, output
constexpr int kHeadMatrices = 7;    // Q, K, V, scores, masked, weights, output
constexpr int kMaskedIndex = 4;     // the head's `masked` (bytes, not floats)

const attn::Matrix* headMatrix(const attn::HeadResult& h, int k)
{
    switch (k) {
    case 0: return &h.Q;
    case 1: return &h.K;
    case 2: return &h.V;
    case 3: return &h.scores;
    case 5: return &h.weights;
    case 6: return &h.output;
    default: return nullptr;
    }
}

} // namespace

int resultSlot(const attn::AttentionResult& r, const attn::Matrix* m)
{
    if (!m) return -1;
    const attn::Matrix* top[kResultMatrices] = {&r.Q, &r.K, &r.V, &r.concat, &r.output};
    for (int k = 0; k < kResultMatrices; ++k)
        if (top[k] == m) return k;
    for (std::size_t h = 0; h < r.heads.size(); ++h)
        for (int k = 0; k < kHeadMatrices; ++k)
            if (k != kMaskedIndex && headMatrix(r.heads[h], k) == m) return kResultMatrices + int(h) * kHeadMatrices + k;
    return -1;
}

const attn::Matrix* resultMatrixAt(const attn::AttentionResult& r, int slot)
{
    if (slot < 0) return nullptr;
    if (slot < kResultMatrices) {
        const attn::Matrix* top[kResultMatrices] = {&r.Q, &r.K, &r.V, &r.concat, &r.output};
        return top[slot];
    }
    const std::size_t h = std::size_t(slot - kResultMatrices) / kHeadMatrices;
    if (h >= r.heads.size()) return nullptr;
    return headMatrix(r.heads[h], (slot - kResultMatrices) % kHeadMatrices);
}

void addPoolRequest(PoolRequests& wanted, int slot, const PoolPart& part)
{
    for (const PoolRequest& w : wanted)
        if (w.slot == slot && w.part == part) return;
    wanted.push_back(PoolRequest{slot, part});
}

const attn::Matrix* findPooled(const PooledParts& pooled, int slot, const PoolPart& part)
{
    for (const PrepooledPart& p : pooled)
        if (p.slot == slot && p.part == part) return &p.values;
    return nullptr;
}

PooledParts poolParts(const attn::AttentionResult& r, const PoolRequests& wanted, int threads)
{
    PooledParts out;
    for (const PoolRequest& w : wanted) {
        const attn::Matrix* m = resultMatrixAt(r, w.slot);
        const PoolPart& p = w.part;
        if (!m || p.empty() || p.r0 < 0 || p.c0 < 0 || p.r0 + p.rows > m->rows() || p.c0 + p.cols > m->cols()) continue;
        out.push_back(PrepooledPart{w.slot, p, {}});
    }
    // Parts are independent: each thread takes every `threads`-th part (the parts of one frame are alike in size:
    // a head's map each).
    auto work = [&](std::size_t first, std::size_t step) {
        for (std::size_t k = first; k < out.size(); k += step) {
            const PoolPart& p = out[k].part;
            out[k].values = attn::poolMax(resultMatrixAt(r, out[k].slot)->block(p.r0, p.c0, p.rows, p.cols), p.outRows, p.outCols);
        }
    };
    const std::size_t n = std::clamp<std::size_t>(std::size_t(std::max(1, threads)), 1, std::max<std::size_t>(1, out.size()));
    std::vector<std::thread> team;
    for (std::size_t t = 1; t < n; ++t) team.emplace_back(work, t, n);
    work(0, n);
    for (std::thread& t : team) t.join();
    return out;
}

} // namespace app
