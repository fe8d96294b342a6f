// Attention over thousands of tokens without an n×n matrix (issue 18): the outputs are computed in key blocks with
// an online softmax (the FlashAttention recurrence: a running maximum and sum per query, the partial output
// rescaled as they grow), and what is kept per layer is what any map can be rebuilt from: Q and K as the scores
// use them (after RoPE) and, per (query, head), the log-sum-exp of the scaled scores over the unmasked keys.
// Any tile of scores or weights of any head is then q·k·s, or exp(q·k·s − lse) — exact, not an approximation.
//
// Part of attnscope_core (core/src/lazy_attention.cpp). Maps are read through the tile seam
// (attnscope/attention_maps.h: LazyMaps). The dense core (attnscope/attention.h) is the oracle of both.
//
// Shapes (Row layout only, as decoders use it): Q rows × H·D (query i at position pos0 + i), K and V S × H_kv·D
// (key j at position j); query head h reads KV head h / (H / H_kv). Masks: causal (key j > position i) and an
// optional sliding window (key j ≤ position i − window, Mistral's), nothing else.
#pragma once

#include "attnscope/attention_maps.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <memory>
#include <utility>
#include <vector>

namespace attn {

struct LazyAttentionSpec {
    int heads = 1;        // H
    int kvHeads = 0;      // H_kv (0 = H); divides H
    float scale = 1.0f;   // applied to q·k (1/√D for scaled dot product)
    bool causal = true;   // key j > the query's position is masked
    int window = 0;       // > 0: key j ≤ position − window is masked too (0 = none)
    float softcap = 0;    // > 0: scores = softcap·tanh(scores / softcap) after scaling (Gemma 2)
};

// Computes context = softmax(mask(Q·Kᵀ·scale))·V per head (rows × H·D, heads side by side) and lse (rows × H:
// log Σ_j exp(q·k_j·scale) over the query's unmasked keys; −inf for a query with none, whose context row is 0).
// `ablated[h]` != 0 zeroes head h's context (its lse is still computed); empty = none. InvalidArgument naming the
// shape that disagrees.
// Q, K and V may be views (a LazyLayer's rows, a block of a matrix) as well as matrices.
Status lazyAttention(const Eigen::Ref<const Matrix>& Q, const Eigen::Ref<const Matrix>& K, const Eigen::Ref<const Matrix>& V,
                     const LazyAttentionSpec& spec, int pos0, Matrix& context, Matrix& lse,
                     const std::vector<std::uint8_t>& ablated = {});

// Bytes of one layer of a lazy result at n tokens: Q and K (what the maps need), V, and lse.
double lazyLayerBytes(long n, int heads, int kvHeads, int headDim);

// What one layer keeps for its maps: Q, K and lse of n positions. Immutable once made (shared with the views).
// Appending a token to a long text (issue 18) must not copy every layer's Q and K: the rows live in a buffer with
// spare rows, shared by the layers made from one another (appended, truncated), each of which views its first n.
// A layer writes rows of the buffer only past every living layer's n (the layers register their n in the buffer),
// so the rows a view reads never change under it; otherwise, or when the spare rows are used up, appended() copies
// the rows into a new buffer with a quarter more spare rows (amortised O(1) rows copied per row appended).
class LazyLayer {
public:
    LazyLayer() = default;
    // Owns these rows (moved in), with `spareRows` more allocated behind them for appended() to fill; default
    // (−1) defaultSpareRows(n). V (n × H_kv·D_v) is optional: a decoder keeps its values here, where they grow in
    // place with K (appending a token to a long text then copies no layer's values either); empty = none.
    LazyLayer(Matrix Q, Matrix K, Matrix lse, Eigen::Index spareRows = -1, Matrix V = Matrix());
    // A quarter more rows than n (at least 64): the copies on growth then cost O(1) rows per appended row, and a
    // buffer is at most a quarter larger than its rows. Rows never written are never touched (the allocator maps
    // large buffers lazily): they cost address space rather than memory.
    static Eigen::Index defaultSpareRows(Eigen::Index n);
    // Adopts buffers that hold the layer's n rows first and the spare rows behind them (Q, K, lse and V, when
    // given, with the same number of rows ≥ n): nothing is copied. The GPU forward downloads into such buffers.
    // `recycle`: when the last layer viewing them goes, the buffers go to RecycledBuffers (attnscope/recycled_buffers.h)
    // for the next forward's copies, instead of being freed.
    static std::shared_ptr<const LazyLayer> adopt(Matrix Q, Matrix K, Matrix lse, Matrix V, Eigen::Index n, bool recycle = false);
    ~LazyLayer();
    LazyLayer(const LazyLayer&) = delete;
    LazyLayer& operator=(const LazyLayer&) = delete;

    Eigen::Map<const Matrix> Q{nullptr, 0, 0};    // n × H·D, as the scores use it (after RoPE)
    Eigen::Map<const Matrix> K{nullptr, 0, 0};    // n × H_kv·D
    Eigen::Map<const Matrix> lse{nullptr, 0, 0};  // n × H
    Eigen::Map<const Matrix> V{nullptr, 0, 0};    // n × H_kv·D_v, or n × 0 for a layer made without values

    // This layer's rows and m more: Q (m × H·D), K (m × H_kv·D) and V (m × this layer's V width; empty for a
    // layer without values) of the new positions; their lse rows are filled in by the caller (setLse) before the
    // layer is shared. In place when no living layer views rows past n and the buffer has room, else in a new
    // buffer. `Q`, `K`, `V` must have this layer's widths (assert).
    std::shared_ptr<LazyLayer> appended(const Matrix& Q, const Matrix& K, const Matrix& V = Matrix()) const;
    // Writes lse rows row0… (rows × H) of a layer appended() returned, before it is shared.
    void setLse(Eigen::Index row0, const Matrix& lse);
    // The first t ≤ n rows (a view of the same buffer: nothing copied).
    std::shared_ptr<const LazyLayer> truncated(Eigen::Index t) const;

private:
    struct Rows;
    static std::pair<std::shared_ptr<Rows>, Eigen::Index> own(Matrix Q, Matrix K, Matrix lse, Matrix V, Eigen::Index spareRows);
    explicit LazyLayer(std::pair<std::shared_ptr<Rows>, Eigen::Index> owned);
    LazyLayer(std::shared_ptr<Rows> rows, Eigen::Index n);  // n is registered in `rows` already
    std::shared_ptr<Rows> m_rows;
};

// The maps of a lazy result: any tile of any head rebuilt on demand (one small GEMM per tile). Queries and keys
// are the same n positions (a decoder's self-attention).
class LazyMaps final : public AttentionMaps {
public:
    LazyMaps(std::vector<std::shared_ptr<const LazyLayer>> layers, const LazyAttentionSpec& spec);
    // Per layer: `specs` has one entry per layer, the same heads and scale, each its own window (Gemma's sliding
    // and global layers).
    LazyMaps(std::vector<std::shared_ptr<const LazyLayer>> layers, const std::vector<LazyAttentionSpec>& specs);
    int layers() const override { return static_cast<int>(m_layers.size()); }
    int heads() const override { return m_spec.heads; }
    int queries() const override { return m_n; }
    int keys() const override { return m_n; }
    bool has(MapKind) const override { return true; }
    bool causal() const override { return m_spec.causal; }
    float softcap() const { return m_spec.softcap; }
    int window(int layer) const override
    {
        return layer >= 0 && layer < static_cast<int>(m_windows.size()) ? m_windows[static_cast<std::size_t>(layer)] : m_spec.window;
    }
    Status tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const override;
    // The overview without a weight per cell: exp is monotonic, so a block's largest weight is
    // exp(max(q·k·s − lse)) — one exp per pooled cell; keys a block's queries cannot see (causal, window) are not
    // multiplied at all; bands of rows run on the thread team. Equals the default (poolMax of the tiles) within
    // float rounding of exp.
    Status pooled(MapKind kind, int layer, int head, const MapRect& rect, int outRows, int outCols,
                  Matrix& out) const override;

    const LazyLayer& layer(int l) const { return *m_layers[static_cast<std::size_t>(l)]; }

private:
    bool masked(int layer, int i, int j) const { return maskedByRule(m_spec.causal, window(layer), i, j); }
    std::vector<std::shared_ptr<const LazyLayer>> m_layers;
    LazyAttentionSpec m_spec;
    std::vector<int> m_windows;  // per layer (empty: m_spec.window for all)
    int m_n = 0;
    int m_headDim = 0;
};

} // namespace attn
