// A CUDA result's attention maps read where they were computed (STYLE.md §9): the device source of the
// attention-maps seam (attnscope/attention_maps.h). tile() copies only the tile's cells to the host, pooled() max-pools
// on the device (a kernel) and copies only the overview, maskTile() copies the tile of the result's mask, ranges()
// reduces every head's map to its colour range on the device; fetchDeviceMaps() brings the whole maps back. Made for
// a result computed with AttentionConfig::mapsOnDevice (whose HeadResults hold no maps), and works as well for any
// result of the CUDA backend while the device still holds it.
//
// Plain C++: no CUDA types. core implements it in core/cuda/device_maps.cpp when built with CUDA; without CUDA every
// read is Unavailable. Reads take the backend's lock (they wait for a compute in progress), and are valid only while
// the device holds the result: the next compute on the CUDA backend replaces it (see deviceResultCurrent in
// attnscope/device_interop.h), after which every read answers Unavailable, never stale cells.
#pragma once

#include "attnscope/attention_maps.h"
#include "attnscope/colormap.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace attn {

class DeviceMaps final : public AttentionMaps {
public:
    // The maps of `result` (one layer: the heads of that result), as query rows × key columns whatever its layout.
    // Copies what it needs from `result` (its generation and sizes); `result` may go away afterwards. `causal` and
    // `window` only describe the maps (AttentionMaps::causal, window); the masked cells come from the result's own
    // mask on the device.
    explicit DeviceMaps(const AttentionResult& result, bool causal = false, int window = 0);

    int layers() const override { return 1; }
    int heads() const override { return m_heads; }
    int queries() const override { return m_queries; }
    int keys() const override { return m_keys; }
    bool has(MapKind) const override { return true; }
    bool causal() const override { return m_causal; }
    int window(int) const override { return m_window; }

    // Whether the device still holds the result (a non-zero generation, no compute on the device since).
    bool current() const;

    // AttentionMaps's contracts, and:
    //   Unavailable      no CUDA backend in this build; a result not computed on the device (generation 0); or
    //                    the device no longer holds it (a later compute started): the message says which
    //   InvalidArgument  layer, head or rect outside the maps (checkTile's messages)
    //   Internal         a CUDA error (the message names the call)
    Status tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const override;
    Status maskTile(int layer, int head, const MapRect& rect, MaskMatrix& out) const override;
    Status pooled(MapKind kind, int layer, int head, const MapRect& rect, int outRows, int outCols,
                  Matrix& out) const override;

    // The colour range of every head's map of `kind` (layer 0), out[h] for head h: what attn::displayRange(map,
    // &mask, symmetric) gives for head h's HeadResult::scores or weights and HeadResult::masked of the same result
    // downloaded (the min and max over the finite unmasked cells, the count of unmasked non-finite ones), computed
    // by two kernels; 3 values a head cross the bus. One call for all heads because the worker wants every head's:
    // one launch and one round trip instead of H. Bit for bit the host's, with one exception: where both +0 and -0
    // are a map's smallest (largest) value the device takes -0 (+0), while the host's pick among them depends on
    // where Eigen's SIMD lanes put them; the two compare equal.
    //   Unavailable / InvalidArgument (layer) / Internal as the reads above.
    Status ranges(MapKind kind, int layer, bool symmetric, std::vector<DisplayRange>& out) const;

    // pooled() of head `head`'s map as the result stores it (HeadResult::scores / weights: query rows in Row layout,
    // key rows in Column layout): `storedRect` in those rows and columns, outRows/outCols clamped to it as
    // attn::poolMax does, the blocks scanned in storage order, so `out` is attn::poolMax(stored.block(storedRect),
    // outRows, outCols) of the same result downloaded (the ±0 exception of ranges() applies: poolMax's pick among
    // them follows Eigen's lanes, the kernel takes the first in storage order). An empty rect gives an empty `out`.
    // Made for the pooled parts the window asks for (app/state/pooled_parts), which name stored matrices.
    //   Unavailable / InvalidArgument (layer, head, rect: checkTile's messages, in query × key terms) / Internal.
    Status pooledStored(MapKind kind, int layer, int head, const MapRect& storedRect, int outRows, int outCols,
                        Matrix& out) const;

private:
    std::uint64_t m_generation = 0;
    bool m_columnMajor = false;  // the result's layout is Layout::Column (its maps stored keys × queries)
    int m_heads = 0, m_queries = 0, m_keys = 0;
    bool m_causal = false;
    int m_window = 0;
};

// Brings every head's scores, weights and mask of `result`, a result computed with AttentionConfig::mapsOnDevice, back
// into its HeadResults while the device still holds it (the backend's pinned staging, as the copied path does), after
// which `result` is exactly what the copied path (mapsOnDevice = false) gives, with mapsOnDevice false. For export,
// figures, lessons and the window's worker, which read the maps whole. A result whose maps are on the host already
// (mapsOnDevice false: a CPU result, or the copied path's) is left as it is: OK, a no-op, so callers need not ask.
// One map (a head's scores or weights) at a time: the backend's lock is held for one map's copy, never for the whole
// fetch, so a frame's read or a compute on another thread waits for one map at most. `carryOn`, when given, is asked
// before each map (from the calling thread); false stops the fetch (Cancelled).
//   Unavailable      no CUDA backend in this build; or the device no longer holds the result (a later compute on
//                    the device started, also during the fetch; the message says so): compute it again
//   Cancelled        carryOn() said false
//   InvalidArgument  the result's heads or layout are not the device's (a result edited since)
//   Internal / ResourceExhausted  a CUDA error (the message names the call)
// On any error the result is left a mapsOnDevice result with empty maps, as it was.
Status fetchDeviceMaps(AttentionResult& result, const std::function<bool()>& carryOn = {});

} // namespace attn
