// attnscope/device_maps.h: the seam's checks here, the copies and kernels in the CUDA backend
// (core/cuda/device_maps.cpp); without it every read is Unavailable.
#include "attnscope/device_maps.h"

#include "attnscope/result_change.h"

#include <algorithm>
#include <limits>

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#endif

namespace attn {

DeviceMaps::DeviceMaps(const AttentionResult& r, bool causal, int window)
    : m_generation(r.deviceGeneration), m_columnMajor(r.layout == Layout::Column), m_heads(static_cast<int>(r.heads.size())),
      m_causal(causal), m_window(window)
{
    // T and S from the projections, which every result keeps: Row stores Q as T×(H·d_q) and K as S×(H_kv·d_k),
    // Column transposed.
    const bool row = r.layout == Layout::Row;
    m_queries = static_cast<int>(row ? r.Q.rows() : r.Q.cols());
    m_keys = static_cast<int>(row ? r.K.rows() : r.K.cols());
}

#ifdef ATTNSCOPE_WITH_CUDA

bool DeviceMaps::current() const { return cuda::mapsCurrent(m_generation); }

Status DeviceMaps::tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, rect));
    return cuda::mapTile(m_generation, m_queries, m_keys, kind, head, rect, out);
}

Status DeviceMaps::maskTile(int layer, int head, const MapRect& rect, MaskMatrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(MapKind::Weights, layer, head, rect));
    bool hasMask = false;
    ATTNSCOPE_RETURN_IF_ERROR(cuda::mapMaskTile(m_generation, m_queries, m_keys, head, rect, out, hasMask));
    if (!hasMask) return AttentionMaps::maskTile(layer, head, rect, out);  // computed without a mask: the rule's
    return Status::success();
}

Status DeviceMaps::pooled(MapKind kind, int layer, int head, const MapRect& rect, int outRows, int outCols,
                          Matrix& out) const
{
    std::vector<int> colOf;  // the host's blocks are not needed: the kernel makes the same ones
    const Expected<bool> any = preparePooled(kind, layer, head, rect, outRows, outCols, colOf, out);
    if (!any || !*any) return any ? Status::success() : any.status();
    return cuda::mapPooled(m_generation, m_queries, m_keys, kind, head, rect, outRows, outCols, out);
}

Status DeviceMaps::ranges(MapKind kind, int layer, bool symmetric, std::vector<DisplayRange>& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, 0, MapRect{}));
    std::vector<float> lo, hi;
    std::vector<unsigned long long> bad;
    ATTNSCOPE_RETURN_IF_ERROR(cuda::mapRanges(m_generation, m_queries, m_keys, kind, lo, hi, bad));
    out.resize(lo.size());
    constexpr unsigned long long kMaxCount = std::numeric_limits<int>::max();  // DisplayRange::nonFinite is an int
    for (std::size_t h = 0; h < lo.size(); ++h)
        out[h] = rangeFromMinMax(lo[h], hi[h], int(std::min(bad[h], kMaxCount)), symmetric);
    return Status::success();
}

Status DeviceMaps::pooledStored(MapKind kind, int layer, int head, const MapRect& stored, int outRows, int outCols,
                                Matrix& out) const
{
    // The same rect in query × key terms, for the seam's checks and messages.
    const MapRect asMaps = m_columnMajor ? MapRect{stored.c0, stored.r0, stored.cols, stored.rows} : stored;
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, asMaps));
    if (stored.rows == 0 || stored.cols == 0) {
        out.resize(0, 0);
        return Status::success();
    }
    outRows = std::clamp(outRows, 1, stored.rows);
    outCols = std::clamp(outCols, 1, stored.cols);
    return cuda::mapPooled(m_generation, m_queries, m_keys, kind, head, stored, outRows, outCols, out, true);
}

Status fetchDeviceMaps(AttentionResult& result, const std::function<bool()>& carryOn) { return cuda::fetchMaps(result, carryOn); }

#else

namespace {
constexpr const char* kNotBuilt = "device maps: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)";
}

bool DeviceMaps::current() const { return false; }
Status DeviceMaps::tile(MapKind, int, int, const MapRect&, Matrix&) const { return makeError(StatusCode::Unavailable, kNotBuilt); }
Status DeviceMaps::maskTile(int, int, const MapRect&, MaskMatrix&) const { return makeError(StatusCode::Unavailable, kNotBuilt); }
Status DeviceMaps::pooled(MapKind, int, int, const MapRect&, int, int, Matrix&) const
{
    return makeError(StatusCode::Unavailable, kNotBuilt);
}

Status DeviceMaps::ranges(MapKind, int, bool, std::vector<DisplayRange>&) const { return makeError(StatusCode::Unavailable, kNotBuilt); }
Status DeviceMaps::pooledStored(MapKind, int, int, const MapRect&, int, int, Matrix&) const
{
    return makeError(StatusCode::Unavailable, kNotBuilt);
}

Status fetchDeviceMaps(AttentionResult& result, const std::function<bool()>&)
{
    if (!result.mapsOnDevice) return Status::success();
    return makeError(StatusCode::Unavailable, kNotBuilt);
}

#endif

} // namespace attn
