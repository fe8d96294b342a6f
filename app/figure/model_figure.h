// Figures of a trained model's attention (docs/model.md): one head's weights, the model view (every layer ×
// head as a grid, as BertViz's model view) and the lines view (BertViz's head view: tokens in two columns
// joined by lines whose opacity is the weight). Values come from a run of an encoder or a decoder (RunView); nothing here does math.
#pragma once

#include "figure/figure.h"
#include "figure/figure_render.h"

#include "view/run_view.h"

#include <attnscope/interp.h>
#include <attnscope/model.h>
#include <attnscope/qk_attribution.h>

namespace app::fig {

enum class ModelFigureKind { Head, ModelView, Lines };

struct ModelFigureOptions {
    ModelFigureKind kind = ModelFigureKind::Head;
    int layer = 0;                     // Head and Lines: the layer (0-based)
    int head = 0;                      // Head and Lines: the head (0-based)
    std::optional<std::string> title;  // default names the model, layer and head; "" = none
};

// Head and ModelView as figure descriptions (drawn by figure_render like every heatmap figure).
// Errors (InvalidArgument): "--layer 7: the model has 6 layers (0..5)", "--head 12: … 12 heads (0..11)".
attn::Expected<Figure> buildModelFigure(const std::string& modelName, const RunView& run,
                                        const ModelFigureOptions& opt);

// The lines view draws one line per (query, key) pair and a row per token: past this many tokens it is refused
// (a figure 14 000 points tall; the head's map shows long texts).
inline constexpr int kMaxLinesTokens = 1024;

// The lines view of one layer and head, rendered to PNG / SVG / PDF bytes (scale: PNG pixels per point).
attn::Expected<std::string> renderLinesFigure(const std::string& modelName, const RunView& run,
                                              const ModelFigureOptions& opt, FigureFormat format, double scale);

// A layers × heads map of a decoder (docs/interp.md: head importance, logit attribution, head types, patching)
// as a figure: one heatmap, a row per layer ("L0"…), a column per head ("H0"…, or `colLabels`), values printed
// in the cells, the given colormap and range.
struct LayerHeadMap {
    std::string title, subtitle, colorbarLabel;
    attn::Matrix values;                 // L × columns
    std::vector<std::string> colLabels;  // empty = "H0", "H1", …
    attn::Colormap cmap = attn::Colormap::RdBu;
    attn::DisplayRange range;
};
Figure buildLayerHeadFigure(const LayerHeadMap& map);
// The maps of the views, shared by the window and `render` (titles left to the caller):
// a signed map (head importance) on RdBu centred at 0;
LayerHeadMap signedMap(attn::Matrix values);
// patching's fractions on RdBu over at least −1…1 (1: the head restores the whole difference);
LayerHeadMap fractionMap(attn::Matrix values);
// direct logit attribution: the heads, then each layer's MLP and (where the model has one) b^O as columns.
LayerHeadMap attributionMap(const attn::DirectLogitAttribution& d);

// "Why here?" of one cell as a figure (issue 35, `render --panel qk`): three panels sharing one RdBu colour bar
// and the rows — what wrote the query (query side, a column), the component × component matrix (rows: query side,
// columns: key side), and what wrote the key (key side, a column) — with each earlier layer summed
// (attn::groupQkByLayer) except the layers of the `expandTop` strongest components of either side, shown head by
// head. The title names the head, the cell's tokens, its score and weight.
Figure buildQkFigure(const std::string& modelName, const attn::QkCell& cell, const std::string& queryToken,
                     const std::string& keyToken, int expandTop = 1);

// A decoder's next-token predictions as bars (token, probability), most probable first.
struct NextTokenBar {
    std::string token;  // decoded text, e.g. " Paris"
    float p = 0;
};
attn::Expected<std::string> renderNextFigure(const std::string& title, const std::vector<NextTokenBar>& bars,
                                             FigureFormat format, double scale);

} // namespace app::fig
