// The description of one heatmap of the chain, built once from (session, result): which numbers (a block of
// a session or result matrix, in the session's layout), which cells are masked, what each axis is (tokens
// or features, with its title) and the map's name. The chain panel (panels/chain_panel.cpp, ImGui/GL) and
// the figure builder (figure/figure.cpp, cairo) both draw from it, so the window and exported figures
// cannot disagree on orientation, labels, axes or masks. No GUI types: attnscope_export uses it headless.
#pragma once

#include <attnscope/colormap.h>
#include <attnscope/preset_io.h>
#include <attnscope/status.h>
#include <attnscope/types.h>

#include <string>
#include <vector>

namespace app::view {

// The maps: inputs (per-head blocks of the weights), Q/K/V with every head (the window's projection
// column) or one head's block, per-head scores/weights/output, and the concat and final output.
enum class MapKind { X, Xkv, Wq, Wk, Wv, Wo, Q, K, V, HeadQ, HeadK, HeadV, Scores, Weights, HeadOut, Concat, Output };

// What an axis indexes: queries and keys link hovers across maps and are labelled by their tokens.
enum class AxisKind { Query, Key, Feature };

struct AxisDescription {
    AxisKind kind = AxisKind::Feature;
    std::string title;                              // "query", "key", "d_{k}" (figure rich text: _{…} subscripts)
    const std::vector<std::string>* tokens = nullptr;  // the token labels, or null (indices 0…n-1)
};

struct MapDescription {
    std::string name;                       // "weights", "Q", "W_{Q}"
    const attn::Matrix* source = nullptr;   // the matrix the numbers come from
    Eigen::Index row0 = 0, col0 = 0;        // the block of it shown (all of it unless a head's block)
    Eigen::Index rows = 0, cols = 0;
    const attn::MaskMatrix* masked = nullptr;  // same shape as the block, or null: nothing masked
    AxisDescription row, col;
    int headBlock = 0;                      // > 0: a separator every headBlock features (Q/K/V/concat of all heads)

    bool whole() const { return source && row0 == 0 && col0 == 0 && rows == source->rows() && cols == source->cols(); }
    attn::Matrix values() const { return source->block(row0, col0, rows, cols); }
};

// The description of map `kind` (of head `head` for per-head maps). `result` must come from computing `s`.
// Errors (InvalidArgument) name the map: "panel xkv: the session is not in cross mode", "panel wq: direct
// mode has no projection weights", "panel wo: the session has no W_O", "head 3: the result has 2 heads".
attn::Expected<MapDescription> describeMap(const attn::Session& s, const attn::AttentionResult& result, MapKind kind, int head);

// The colour range map `kind` is drawn with, in the window and in figures: the weights (probabilities) over
// their whole domain 0…1 when `fixedWeights` (the view's "weights_range": "fixed", the default), else `data`,
// the range of the numbers shown (attn::displayRange). The non-finite flags of `data` are kept.
// Under a resolved weights scale (attn::resolveWeightsScale) other than Linear the weights take that scale's
// range (attn::weightsRange: log 1e-4…1, or 0…1 of each query over its largest weight).
attn::DisplayRange drawnRange(MapKind kind, const attn::DisplayRange& data, bool fixedWeights,
                              attn::WeightsScale resolvedScale = attn::WeightsScale::Linear);
// The weights' colour scale a session's "view" object asks for ("weights_scale"; Auto when absent or unknown).
attn::WeightsScale viewWeightsScale(const std::string& viewJson);
// The keys a map of the description has (its Key axis' size; 0 when neither axis indexes keys).
long keyCount(const MapDescription& d);
// Whether a session's "view" object (Session::viewJson) draws the weights over 0…1: true unless its
// "weights_range" is "auto" or "locked" (a figure has no earlier range to keep, so locked draws the data's).
bool viewFixesWeightsRange(const std::string& viewJson);

// "d_{k}" → "d_k", "W_{Q}" → "W_Q", "x^{2}" → "x^2": figure rich text as plain text for the window.
std::string plainText(const std::string& rich);

} // namespace app::view
