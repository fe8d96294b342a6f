// attnscope/device_maps.h: the seam's checks here, the copies and kernels in the CUDA backend
// (core/cuda/device_maps.cpp); without it every read is Unavailable.
#include "attnscope/device_maps.h"

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#endif

namespace attn {

DeviceMaps::DeviceMaps(const AttentionResult& r, bool causal, int window)
    : m_generation(r.deviceGeneration), m_heads(static_cast<int>(r.heads.size())), m_causal(causal), m_window(window)
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

#endif

} // namespace attn
