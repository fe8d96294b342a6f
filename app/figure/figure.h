// A figure description: pure data (panels of cell values, labels, colour ranges, colormaps, titles) built
// from a session and its result. The figure renderer (figure_render.h) draws it to PNG / SVG / PDF, and the
// window can draw the same description, so screen and files show the same thing.
//
// Colour ranges and colormaps come from core (attnscope/colormap.h); nothing here does attention math.
#pragma once

#include <attnscope/colormap.h>
#include <attnscope/preset_io.h>
#include <attnscope/status.h>
#include <attnscope/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace app::fig {

// What a figure shows. Chain: X (and X_kv) → Q, K, V → scores → weights → output of one head.
enum class PanelKind { X, Xkv, Wq, Wk, Wv, Wo, Q, K, V, Scores, Weights, Output, Final, Chain };
const char* toString(PanelKind k);  // "x", "xkv", "wq", ..., "final", "chain"
std::optional<PanelKind> panelKindFromString(std::string_view s);
// The names accepted by panelKindFromString, "x|xkv|...", for help texts.
std::string panelKindList();

// The colormap a panel uses unless the user picks one: viridis for weights (in [0, 1]), the diverging
// RdBu centred at 0 for everything signed. The window uses the same defaults.
attn::Colormap defaultColormap(PanelKind k);

// One heatmap. Titles may hold sub/superscripts written as "W_{Q}" / "x^{2}"; labels are plain text.
struct Heatmap {
    std::string title;                    // e.g. "head 1" or "Q = X·W_{Q}"; empty = none
    attn::Matrix values;                  // rows × cols, as shown (row i is drawn at the top for i = 0)
    attn::MaskMatrix masked;              // empty, or same shape: 1 = masked cell (drawn grey, hatched)
    std::vector<std::string> rowLabels;   // rows of them, or empty (then indices 0..rows-1 are shown)
    std::vector<std::string> colLabels;   // cols of them, or empty
    bool rowLabelsAreTokens = false;      // token labels are always all shown; index labels may be thinned
    bool colLabelsAreTokens = false;
    std::string rowAxis, colAxis;         // axis titles, e.g. "query", "key", "d_{k}"
    attn::Colormap cmap = attn::Colormap::Viridis;
    attn::DisplayRange range;             // colour range of this panel (the shared one when the colorbar is shared)
    std::string colorbarLabel;            // used when the panel has its own colorbar
    long keys = 0;                        // the keys of a query × key map (the weights' automatic scale), else 0
};

struct Figure {
    std::string title;                    // top line, plain text; empty = none
    std::string subtitle;                 // second line (e.g. the session name); empty = none
    std::vector<Heatmap> panels;          // drawn left to right, top to bottom
    int columns = 1;                      // panels per row
    bool sharedColorbar = true;           // one colorbar for all panels (all share panels[0].range / cmap)
    std::string colorbarLabel;            // label of the shared colorbar
    bool annotate = false;                // print each cell's value in the cell
    bool sharedAxes = false;              // row labels only on the first column, column labels only on the last row
};

// Axis labels: "0", "1", ... n-1; and the session's token labels when there are n of them, else indices.
std::vector<std::string> indexLabels(Eigen::Index n);
// Token labels (clipped to kMaxLabelChars characters with "…"), or indexLabels(n) when there are not n tokens.
std::vector<std::string> tokenLabels(const std::vector<std::string>& tokens, Eigen::Index n);
// Labels longer than this many characters (UTF-8 code points) are cut with "…": a 5 M-character token took
// 74 s to lay out (issue 13, finding 6). Titles get kMaxTitleChars.
inline constexpr std::size_t kMaxLabelChars = 24;
inline constexpr std::size_t kMaxTitleChars = 160;
std::string clipLabel(const std::string& s, std::size_t maxChars);

struct FigureOptions {
    PanelKind panel = PanelKind::Weights;
    int head = -1;                          // -1 = all heads as a grid (chain: head 0); else one head (0-based)
    std::optional<attn::Colormap> cmap;     // default: defaultColormap(panel)
    bool sharedRange = true;                // grid: one colour range and colorbar for all heads
    bool fixedWeightsRange = true;          // weights over 0…1, as the window draws them (view::drawnRange)
    attn::WeightsScale weightsScale = attn::WeightsScale::Auto;  // the weights' colour scale, as the window's
                                            // (view::viewWeightsScale; Auto: log past attn::kLogScaleKeys keys)
    bool annotate = false;                  // cell values printed in the cells
    std::optional<std::string> title;       // default: a title naming the panel; "" = no title
};

// Builds the figure. `result` must come from computing `s`. Errors (InvalidArgument): "head 3: the session
// has 2 heads (0..1)"; "panel xkv: the session is not in cross mode"; "panel wq: direct mode has no W^Q".
attn::Expected<Figure> buildFigure(const attn::Session& s, const attn::AttentionResult& result, const FigureOptions& opt);

} // namespace app::fig
