// Attention maps read tile by tile, whoever made them (STYLE.md §8: one seam, many sources):
//   DenseMaps     a run's dense results (attn::AttentionResult per layer: the hand-made sessions, the encoder),
//                 core/src/attention_maps.cpp;
//   BundleMaps    an attention bundle: a safetensors file of `attn.<layer>` tensors, heads × queries × keys, read
//                 from the memory-mapped file (attnscope/bundle.h, docs/bundle.md);
//   decoder runs  attn::decoderMaps (attnscope/decoder.h): a dense run's kept weights (HeadWeights), or a lazy
//                 run's LazyMaps, which rebuild any tile from Q, K and the softmax statistics (issue 18).
// The views, figures and exports ask for what they show: a tile of cells when zoomed in, a max-pooled overview
// (each cell the largest value of its block, so one sharp key stays visible) when zoomed out.
//
// Part of attnscope_core. Maps are always addressed as query rows × key columns, whatever layout computed them.
#pragma once

#include "attnscope/status.h"
#include "attnscope/types.h"

#include <string>
#include <vector>

namespace attn {

enum class MapKind { Weights, Scores };
const char* toString(MapKind k);  // "weights", "scores"

// A rectangle of a map: queries r0…r0+rows−1 × keys c0…c0+cols−1.
struct MapRect {
    int r0 = 0, c0 = 0, rows = 0, cols = 0;
    bool operator==(const MapRect&) const = default;
};

class AttentionMaps {
public:
    virtual ~AttentionMaps() = default;
    virtual int layers() const = 0;
    virtual int heads() const = 0;       // query heads per layer
    virtual int queries() const = 0;     // T
    virtual int keys() const = 0;        // S
    virtual bool has(MapKind kind) const = 0;  // a bundle holds weights only
    // Whether key j > query i is masked (a decoder's causal maps: the views hatch those cells).
    virtual bool causal() const { return false; }
    // A sliding window > 0 of layer `layer` (Mistral's on every layer, Gemma's on its sliding layers) also masks
    // the keys j ≤ i − window.
    virtual int window(int layer) const { (void)layer; return 0; }

    // The cells of `rect` of head `head` in layer `layer`, as a rect.rows × rect.cols matrix (query rows).
    // InvalidArgument for a layer, head or rectangle outside the maps or a kind the source does not hold.
    virtual Status tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const = 0;

    // Which cells of `rect` are masked (1), for the hatching; the default is the rule of causal() and window().
    virtual Status maskTile(int layer, int head, const MapRect& rect, MaskMatrix& out) const;

    // `rect` max-pooled to outRows × outCols (clamped to 1…rect.rows and 1…rect.cols): cell (r, c) is the largest
    // finite value of the rect's rows [r·R/outRows, (r+1)·R/outRows) × cols [c·C/outCols, (c+1)·C/outCols), the
    // blocks attn::poolMax uses (NaN when a block holds none). The default reads tiles of a band of rows at a
    // time (never the whole map at once); sources with a faster path override it.
    virtual Status pooled(MapKind kind, int layer, int head, const MapRect& rect, int outRows, int outCols,
                          Matrix& out) const;

    // The whole map (tests, small exports): tile() over everything.
    Status whole(MapKind kind, int layer, int head, Matrix& out) const
    {
        return tile(kind, layer, head, MapRect{0, 0, queries(), keys()}, out);
    }

protected:
    // InvalidArgument naming what is outside; ok otherwise.
    Status checkTile(MapKind kind, int layer, int head, const MapRect& rect) const;

    // What every pooled() starts with: the request checked, outRows/outCols clamped to the rect, and the pooled
    // columns' blocks: colOf[j] is the pooled column of the rect's key j (poolMax's blocks: row block r is rows
    // r·R/outRows … (r+1)·R/outRows − 1, see blockStart). False, with `out` empty, when the rect has no cell.
    Expected<bool> preparePooled(MapKind kind, int layer, int head, const MapRect& rect, int& outRows, int& outCols,
                                 std::vector<int>& colOf, Matrix& out) const;
    // Where block b of `blocks` near-equal blocks of n cells starts (b = blocks: n).
    static int blockStart(int n, int blocks, int b) { return int(long(b) * n / blocks); }
};

// The mask rule of causal maps and a sliding window (AttentionMaps::causal, window): whether key `key` is hidden
// from query `query`.
inline bool maskedByRule(bool causal, int window, long query, long key)
{
    return (causal && key > query) || (window > 0 && key <= query - window);
}

// Head `head`'s scaled scores (q·k·scale, before masking) over the tile `r`, from Q (queries × H·D) and K
// (keys × H_kv·D) in Row layout: the head's columns of Q against its KV head's (head / (H / H_kv)) of K. What a
// lazy run's maps and a dense result without scores give as their Scores tiles.
// With softcap > 0 the scores are capped as the attention core caps them (AttentionConfig::softcap).
void scoresTile(const Matrix& Q, const Matrix& K, int head, int heads, int kvHeads, float scale, const MapRect& r, Matrix& out,
                float softcap = 0);

// A run's dense results, referenced (valid while `results` lives and is not resized): layer l's map of head h is
// results[l].heads[h].weights (or .scores), in the result's layout, with its mask. A result without scores gives
// a scores tile from its Q and K: the head's columns, its KV head's for K; a head without a mask gives the rule's
// (AttentionMaps::maskTile) of `causal` and `window`.
class DenseMaps final : public AttentionMaps {
public:
    explicit DenseMaps(const std::vector<AttentionResult>& results, bool causal = false, int window = 0)
        : m_results(&results), m_causal(causal), m_window(window) {}
    bool causal() const override { return m_causal; }
    int window(int) const override { return m_window; }
    int layers() const override { return static_cast<int>(m_results->size()); }
    int heads() const override;
    int queries() const override;
    int keys() const override;
    bool has(MapKind) const override { return true; }
    Status tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const override;
    Status maskTile(int layer, int head, const MapRect& rect, MaskMatrix& out) const override;

private:
    const std::vector<AttentionResult>* m_results;
    bool m_causal = false;
    int m_window = 0;
};

} // namespace attn
