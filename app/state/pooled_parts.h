// Pooled pictures of a result's maps, made on the compute worker with the result instead of in a frame.
//
// A fitted map whose cells are under a pixel is drawn from the part on screen max-pooled to one value a pixel
// (attn::poolMax; render/heatmap_view). Pooling a changed map in the frame that first shows it cost the frame
// the whole map (~5 M values a frame at n=1024, d_model=512; 16 M a head's map at n=4096). So the frames say
// which part of which result matrix they pooled (Document::wantPooled), the worker pools those parts of each
// new result right after computing it, and the frame that shows the result draws them as they are.
#pragma once

#include <attnscope/types.h>

#include <utility>
#include <vector>

namespace app {

// The part of a map drawn pooled: source rows r0 … r0+rows−1 and columns c0 … c0+cols−1, pooled to
// outRows × outCols (poolMax's blocks).
struct PoolPart {
    int r0 = 0, c0 = 0, rows = 0, cols = 0, outRows = 0, outCols = 0;
    bool operator==(const PoolPart& o) const
    {
        return r0 == o.r0 && c0 == o.c0 && rows == o.rows && cols == o.cols && outRows == o.outRows && outCols == o.outCols;
    }
    bool operator!=(const PoolPart& o) const { return !(*this == o); }
    bool empty() const { return rows <= 0 || cols <= 0 || outRows <= 0 || outCols <= 0; }
};

// A part of the matrix at `slot` of a result (resultSlot), pooled ahead of the frame: its values are
// attn::poolMax of that part.
struct PrepooledPart {
    int slot = -1;
    PoolPart part;
    attn::Matrix values;
};

// Which matrix of a result: its index in the fixed order Q, K, V, concat, output, then per head Q, K, V,
// scores, masked (not a float matrix: never pooled), weights, output. -1 when `m` is none of r's matrices (an
// input, or a copy the view made, such as the weights divided by their row maximum).
int resultSlot(const attn::AttentionResult& r, const attn::Matrix* m);
// The shape of each head's scores and weights as `r` stores them (HeadResult::scores: queries × keys in Row layout,
// keys × queries in Column), read from its projections, so also for a result whose maps are on the device only.
std::pair<Eigen::Index, Eigen::Index> storedMapShape(const attn::AttentionResult& r);
// The matrix at `slot` of r (resultSlot's order); null when r has no such slot.
const attn::Matrix* resultMatrixAt(const attn::AttentionResult& r, int slot);

// Parts wanted (a map may be drawn pooled by more than one view: the fitted map and its thumbnail in the heads
// grid), each once.
struct PoolRequest {
    int slot = -1;
    PoolPart part;
};
using PoolRequests = std::vector<PoolRequest>;
using PooledParts = std::vector<PrepooledPart>;

// Adds (slot, part) to `wanted` unless it is there already.
void addPoolRequest(PoolRequests& wanted, int slot, const PoolPart& part);
// The values pooled for (slot, part), or null.
const attn::Matrix* findPooled(const PooledParts& pooled, int slot, const PoolPart& part);

// Pools each requested part of r: parts that no longer fit their matrix (another session's sizes) and slots r
// does not have are left out. The parts are pooled on up to `threads` threads. The scores' and weights' parts of a
// CUDA result the device still holds are pooled there (attn::DeviceMaps::pooledStored, a kernel each), also when
// their maps were copied back; when it no longer holds them they are pooled on the host if the host has the maps,
// else (AttentionResult::mapsOnDevice) left out. The small matrices are always pooled on the host.
PooledParts poolParts(const attn::AttentionResult& r, const PoolRequests& wanted, int threads = 1);

} // namespace app
