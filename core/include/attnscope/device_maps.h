// A CUDA result's attention maps read where they were computed (STYLE.md §9): the device source of the
// attention-maps seam (attnscope/attention_maps.h). tile() copies only the tile's cells to the host, pooled() max-pools
// on the device (a kernel) and copies only the overview, maskTile() copies the tile of the result's mask. Made for
// a result computed with AttentionConfig::mapsOnDevice (whose HeadResults hold no maps), and works as well for any
// result of the CUDA backend while the device still holds it.
//
// Plain C++: no CUDA types. core implements it in core/cuda/device_maps.cpp when built with CUDA; without CUDA every
// read is Unavailable. Reads take the backend's lock (they wait for a compute in progress), and are valid only while
// the device holds the result: the next compute on the CUDA backend replaces it (see deviceResultCurrent in
// attnscope/device_interop.h), after which every read answers Unavailable, never stale cells.
#pragma once

#include "attnscope/attention_maps.h"

#include <cstdint>

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

private:
    std::uint64_t m_generation = 0;
    int m_heads = 0, m_queries = 0, m_keys = 0;
    bool m_causal = false;
    int m_window = 0;
};

} // namespace attn
