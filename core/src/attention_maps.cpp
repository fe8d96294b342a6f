// The tile seam over attention maps (attnscope/attention_maps.h): bounds checks, the default mask and pooled
// overview, and DenseMaps over a run's dense results.
#include "attnscope/attention_maps.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn {

const char* toString(MapKind k) { return k == MapKind::Scores ? "scores" : "weights"; }

Status AttentionMaps::checkTile(MapKind kind, int layer, int head, const MapRect& r) const
{
    if (layer < 0 || layer >= layers())
        return makeError(StatusCode::InvalidArgument,
                         "layer " + std::to_string(layer) + " is outside 0.." + std::to_string(layers() - 1));
    if (head < 0 || head >= heads())
        return makeError(StatusCode::InvalidArgument,
                         "head " + std::to_string(head) + " is outside 0.." + std::to_string(heads() - 1));
    if (!has(kind))
        return makeError(StatusCode::InvalidArgument, std::string("these maps hold no ") + toString(kind));
    const long T = queries(), S = keys();
    if (r.rows < 0 || r.cols < 0 || r.r0 < 0 || r.c0 < 0 || long(r.r0) + r.rows > T || long(r.c0) + r.cols > S)
        return makeError(StatusCode::InvalidArgument,
                         "tile rows " + std::to_string(r.r0) + "+" + std::to_string(r.rows) + ", cols " +
                             std::to_string(r.c0) + "+" + std::to_string(r.cols) + " is outside the " +
                             std::to_string(T) + "×" + std::to_string(S) + " map");
    return Status::success();
}

Status AttentionMaps::maskTile(int layer, int head, const MapRect& r, MaskMatrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(MapKind::Weights, layer, head, r));
    out.resize(r.rows, r.cols);
    const bool c = causal();
    const int w = window(layer);
    for (int i = 0; i < r.rows; ++i)
        for (int j = 0; j < r.cols; ++j) out(i, j) = maskedByRule(c, w, long(r.r0) + i, long(r.c0) + j) ? 1 : 0;
    return Status::success();
}

Expected<bool> AttentionMaps::preparePooled(MapKind kind, int layer, int head, const MapRect& r, int& outRows,
                                            int& outCols, std::vector<int>& colOf, Matrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
    if (r.rows == 0 || r.cols == 0) {
        out.resize(0, 0);
        return false;
    }
    outRows = std::clamp(outRows, 1, r.rows);
    outCols = std::clamp(outCols, 1, r.cols);
    colOf.resize(static_cast<std::size_t>(r.cols));
    for (int c = 0; c < outCols; ++c)
        for (int j = blockStart(r.cols, outCols, c); j < blockStart(r.cols, outCols, c + 1); ++j) colOf[std::size_t(j)] = c;
    return true;
}

Status AttentionMaps::pooled(MapKind kind, int layer, int head, const MapRect& r, int outRows, int outCols,
                             Matrix& out) const
{
    std::vector<int> colOf;
    const Expected<bool> any = preparePooled(kind, layer, head, r, outRows, outCols, colOf, out);
    if (!any || !*any) return any ? Status::success() : any.status();
    out.setConstant(outRows, outCols, std::numeric_limits<float>::quiet_NaN());
    // One pass over the rect in bands of whole pooled rows, each band at most ~4 MB of tile (or one pooled row,
    // when a single one is larger).
    const long budgetRows = std::max<long>(1, (1L << 20) / r.cols);
    Matrix band;
    int pr = 0;
    while (pr < outRows) {
        const int i0 = blockStart(r.rows, outRows, pr);
        int pr1 = pr + 1;
        while (pr1 < outRows && blockStart(r.rows, outRows, pr1 + 1) - i0 <= budgetRows) ++pr1;
        const int i1 = blockStart(r.rows, outRows, pr1);
        ATTNSCOPE_RETURN_IF_ERROR(tile(kind, layer, head, MapRect{r.r0 + i0, r.c0, i1 - i0, r.cols}, band));
        for (int p = pr; p < pr1; ++p) {
            const int a = blockStart(r.rows, outRows, p) - i0, b = blockStart(r.rows, outRows, p + 1) - i0;
            float* dst = out.row(p).data();
            for (int i = a; i < b; ++i) {
                const float* src = band.row(i).data();
                for (int j = 0; j < r.cols; ++j) {
                    const float v = src[j];
                    float& d = dst[colOf[std::size_t(j)]];
                    if (std::isfinite(v) && !(v <= d)) d = v;
                }
            }
        }
        pr = pr1;
    }
    return Status::success();
}

void scoresTile(const Matrix& Q, const Matrix& K, int head, int heads, int kvHeads, float scale, const MapRect& r, Matrix& out,
                float softcap)
{
    const Eigen::Index D = Q.cols() / heads, g = head / (heads / kvHeads);
    out.noalias() = Q.block(r.r0, head * D, r.rows, D) * K.block(r.c0, g * D, r.cols, D).transpose();
    out *= scale;
    if (softcap > 0) out.array() = (out.array() * (1.0f / softcap)).tanh() * softcap;
}

int DenseMaps::heads() const { return m_results->empty() ? 0 : static_cast<int>(m_results->front().heads.size()); }

int DenseMaps::queries() const
{
    if (m_results->empty() || m_results->front().heads.empty()) return 0;
    const AttentionResult& r = m_results->front();
    const Matrix& w = r.heads.front().weights;
    return static_cast<int>(r.layout == Layout::Row ? w.rows() : w.cols());
}

int DenseMaps::keys() const
{
    if (m_results->empty() || m_results->front().heads.empty()) return 0;
    const AttentionResult& r = m_results->front();
    const Matrix& w = r.heads.front().weights;
    return static_cast<int>(r.layout == Layout::Row ? w.cols() : w.rows());
}

Status DenseMaps::tile(MapKind kind, int layer, int head, const MapRect& r, Matrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
    const AttentionResult& res = (*m_results)[static_cast<std::size_t>(layer)];
    const HeadResult& h = res.heads[static_cast<std::size_t>(head)];
    if (kind == MapKind::Scores && h.scores.size() == 0 && h.weights.size() > 0) {
        // A result that keeps no scores (a decoder's run): Q·Kᵀ·scale of the head's columns of the layer's Q and
        // K, its KV head's (grouped-query), for the tile's queries and keys.
        const Eigen::Index H = static_cast<Eigen::Index>(res.heads.size());
        const Eigen::Index D = H > 0 ? res.Q.cols() / H : 0;
        const Eigen::Index kv = D > 0 ? res.K.cols() / D : 0;
        if (res.layout != Layout::Row || D == 0 || kv == 0 || H % kv != 0 || res.Q.cols() != H * D || res.K.cols() != kv * D ||
            res.Q.rows() < long(r.r0) + r.rows || res.K.rows() < long(r.c0) + r.cols)
            return makeError(StatusCode::InvalidArgument, "layer " + std::to_string(layer) + " keeps no scores, nor Q and K to make them from");
        scoresTile(res.Q, res.K, head, static_cast<int>(H), static_cast<int>(kv), res.scale, r, out);
        return Status::success();
    }
    const Matrix& m = kind == MapKind::Scores ? h.scores : h.weights;
    if (res.layout == Layout::Row)
        out = m.block(r.r0, r.c0, r.rows, r.cols);
    else
        out = m.block(r.c0, r.r0, r.cols, r.rows).transpose();
    return Status::success();
}

Status DenseMaps::maskTile(int layer, int head, const MapRect& r, MaskMatrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(MapKind::Weights, layer, head, r));
    const AttentionResult& res = (*m_results)[static_cast<std::size_t>(layer)];
    const MaskMatrix& m = res.heads[static_cast<std::size_t>(head)].masked;
    if (m.size() == 0) return AttentionMaps::maskTile(layer, head, r, out);  // the rule's
    if (res.layout == Layout::Row) out = m.block(r.r0, r.c0, r.rows, r.cols);
    else out = m.block(r.c0, r.r0, r.cols, r.rows).transpose();
    return Status::success();
}

} // namespace attn
