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
#include <vector>

namespace attn {

struct LazyAttentionSpec {
    int heads = 1;        // H
    int kvHeads = 0;      // H_kv (0 = H); divides H
    float scale = 1.0f;   // applied to q·k (1/√D for scaled dot product)
    bool causal = true;   // key j > the query's position is masked
    int window = 0;       // > 0: key j ≤ position − window is masked too (0 = none)
};

// Computes context = softmax(mask(Q·Kᵀ·scale))·V per head (rows × H·D, heads side by side) and lse (rows × H:
// log Σ_j exp(q·k_j·scale) over the query's unmasked keys; −inf for a query with none, whose context row is 0).
// `ablated[h]` != 0 zeroes head h's context (its lse is still computed); empty = none. InvalidArgument naming the
// shape that disagrees.
Status lazyAttention(const Matrix& Q, const Matrix& K, const Matrix& V, const LazyAttentionSpec& spec, int pos0,
                     Matrix& context, Matrix& lse, const std::vector<std::uint8_t>& ablated = {});

// Bytes of one layer of a lazy result at n tokens: Q and K (what the maps need), V, and lse.
double lazyLayerBytes(long n, int heads, int kvHeads, int headDim);

// What one layer keeps for its maps. Immutable once made (shared with the views).
struct LazyLayer {
    Matrix Q;    // n × H·D, as the scores use it (after RoPE)
    Matrix K;    // n × H_kv·D
    Matrix lse;  // n × H
};

// The maps of a lazy result: any tile of any head rebuilt on demand (one small GEMM per tile). Queries and keys
// are the same n positions (a decoder's self-attention).
class LazyMaps final : public AttentionMaps {
public:
    LazyMaps(std::vector<std::shared_ptr<const LazyLayer>> layers, const LazyAttentionSpec& spec);
    int layers() const override { return static_cast<int>(m_layers.size()); }
    int heads() const override { return m_spec.heads; }
    int queries() const override { return m_n; }
    int keys() const override { return m_n; }
    bool has(MapKind) const override { return true; }
    bool causal() const override { return m_spec.causal; }
    Status tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const override;
    Status maskTile(int layer, int head, const MapRect& rect, MaskMatrix& out) const override;
    // The overview without a weight per cell: exp is monotonic, so a block's largest weight is
    // exp(max(q·k·s − lse)) — one exp per pooled cell; keys a block's queries cannot see (causal, window) are not
    // multiplied at all; bands of rows run on the thread team. Equals the default (poolMax of the tiles) within
    // float rounding of exp.
    Status pooled(MapKind kind, int layer, int head, const MapRect& rect, int outRows, int outCols,
                  Matrix& out) const override;

    const LazyLayer& layer(int l) const { return *m_layers[static_cast<std::size_t>(l)]; }

private:
    bool masked(int i, int j) const
    {
        return (m_spec.causal && j > i) || (m_spec.window > 0 && j <= i - m_spec.window);
    }
    std::vector<std::shared_ptr<const LazyLayer>> m_layers;
    LazyAttentionSpec m_spec;
    int m_n = 0;
    int m_headDim = 0;
};

} // namespace attn
