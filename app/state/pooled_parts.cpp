#include "state/pooled_parts.h"

#include <attnscope/colormap.h>
#include <attnscope/device_maps.h>

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

// Whether `slot` is a head's scores or weights (the maps a CUDA result may hold on the device), and which.
bool mapSlot(int slot, int& head, attn::MapKind& kind)
{
    if (slot < kResultMatrices) return false;
    const int k = (slot - kResultMatrices) % kHeadMatrices;
    if (k != 3 && k != 5) return false;
    head = (slot - kResultMatrices) / kHeadMatrices;
    kind = k == 3 ? attn::MapKind::Scores : attn::MapKind::Weights;
    return true;
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

std::pair<Eigen::Index, Eigen::Index> storedMapShape(const attn::AttentionResult& r)
{
    const bool row = r.layout == attn::Layout::Row;
    const Eigen::Index T = row ? r.Q.rows() : r.Q.cols(), S = row ? r.K.rows() : r.K.cols();
    return row ? std::pair{T, S} : std::pair{S, T};
}

PooledParts poolParts(const attn::AttentionResult& r, const PoolRequests& wanted, int threads)
{
    // A CUDA result the device still holds: its scores' and weights' parts are pooled there (a kernel each, only the
    // pooled values cross the bus). A CPU result never asks the device.
    const attn::DeviceMaps maps(r);
    const bool device = r.backend == attn::Backend::Cuda && maps.current();
    // The stored maps' shape, for a result whose maps are on the device only (its HeadResults hold none).
    const auto [mapRows, mapCols] = storedMapShape(r);
    PooledParts out, onHost;
    for (const PoolRequest& w : wanted) {
        const attn::Matrix* m = resultMatrixAt(r, w.slot);
        const PoolPart& p = w.part;
        if (!m) continue;
        int head = 0;
        attn::MapKind kind = attn::MapKind::Scores;
        const bool isMap = mapSlot(w.slot, head, kind);
        const bool hostHas = m->size() > 0 || !r.mapsOnDevice || !isMap;
        const Eigen::Index rows = hostHas ? m->rows() : mapRows, cols = hostHas ? m->cols() : mapCols;
        if (p.empty() || p.r0 < 0 || p.c0 < 0 || p.r0 + p.rows > rows || p.c0 + p.cols > cols) continue;
        if (device && isMap) {
            PrepooledPart part{w.slot, p, {}};
            if (maps.pooledStored(kind, 0, head, attn::MapRect{p.r0, p.c0, p.rows, p.cols}, p.outRows, p.outCols, part.values).ok()) {
                out.push_back(std::move(part));
                continue;
            }
        }
        // The device no longer holds a result whose maps only it had: that part is left out.
        if (hostHas) onHost.push_back(PrepooledPart{w.slot, p, {}});
    }
    // Parts are independent: each thread takes every `threads`-th part (the parts of one frame are alike in size:
    // a head's map each).
    auto work = [&](std::size_t first, std::size_t step) {
        for (std::size_t k = first; k < onHost.size(); k += step) {
            const PoolPart& p = onHost[k].part;
            onHost[k].values = attn::poolMax(resultMatrixAt(r, onHost[k].slot)->block(p.r0, p.c0, p.rows, p.cols), p.outRows, p.outCols);
        }
    };
    const std::size_t n = std::clamp<std::size_t>(std::size_t(std::max(1, threads)), 1, std::max<std::size_t>(1, onHost.size()));
    std::vector<std::thread> team;
    for (std::size_t t = 1; t < n; ++t) team.emplace_back(work, t, n);
    work(0, n);
    for (std::thread& t : team) t.join();
    for (PrepooledPart& p : onHost) out.push_back(std::move(p));
    return out;
}

} // namespace app
