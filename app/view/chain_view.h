// The chain panel's own state (one per AppState: two windows or tests in one process never share it) and
// the "fit" layout: how big the heatmap cells are and what collapses so that the current head's weights and
// output take a fair share of the window.
//
// Fit layout, left to right: inputs (editors, or a strip of their names) → Q, K, V (small cells) → the
// current head's scores (small) → weights → output (large cells) → concat, W^O, final output (small); with
// several heads, the heads grid (every head's weights) under that row. The cell size of the large maps
// grows with the window between kMinCell and kMaxCell; when the weights would get less than kTargetShare of
// the window, the inputs collapse to a strip first, then the controls sidebar.
#pragma once

#include <attnscope/types.h>

#include "state/pooled_parts.h"
#include "state/result_ranges.h"

#include <attnscope/colormap.h>

#include <cstdint>
#include <map>
#include <string>

namespace app {

// Whether a collapsible part is chosen by the fit layout (Auto) or by the user.
enum class Collapse { Auto, Shown, Hidden };

// How a map's colour range follows the data: Auto re-fits to every result, Locked keeps the range it had
// when locked (before/after an edit compare), Fixed uses a given range (weights: 0…1, their whole domain).
enum class RangeMode { Auto, Locked, Fixed };

// Sizes the fit layout plans for: the window, and the maps as shown (rows × cols in the session's layout).
struct FitInput {
    float width = 0, height = 0;   // the window's size (pixels): the weights' share is of this
    float chainWidth = 0;          // the chain panel's content width with the sidebar shown
    float chainHeight = 0;         // its content height under the title lines
    float sidebarWidth = 0;        // what collapsing the sidebar gives back (its width minus the strip's)
    float inputsWidth = 0;         // the inputs column with its editors open
    float stripWidth = 0;          // the inputs column collapsed to a strip
    int wRows = 1, wCols = 1;      // weights (and scores) of one head
    int wVisible = 1;              // its cells not masked (masked cells are grey, not the map's colours)
    int oRows = 1, oCols = 1;      // that head's output
    bool outputLabels = false;     // the output has row labels of its own (Column layout: its rows are features)
    int qkvRows = 1, qkvCols = 1;  // Q, K, V stacked: their rows added, the widest's columns
    int finalRows = 0, finalCols = 0;  // final output (0: not shown: one head and no W^O)
    int heads = 1;                 // > 1: the heads grid (every head's weights) under the main row
    float labelBand = 40;          // a token label band's width (row labels) and height (column labels)
    float fontSize = 16;           // the UI font's size (labels show in cells of at least 0.8 of it)
};

struct FitPlan {
    float cell = 24;          // the large maps' cell side (weights, head output)
    float smallCell = 12;     // Q, K, V, scores, concat, final output
    float gridCell = 8;       // heads grid thumbnails
    bool inputsCollapsed = false;
    bool sidebarCollapsed = false;
    bool fits = true;         // false: even the smallest cells overflow (the panel scrolls)
    // When it does not fit (hundreds of tokens, or a model's head, whose Q, K, V are hundreds of columns wide),
    // each map scrolls inside a box of its own, sized so that the weights stay on screen whole: the small maps
    // (Q, K, V, scores, the final column) get small boxes first, the weights what they need of the rest (their
    // cells grown towards the target), the head output what is left. Unbounded when it fits.
    float smallView = 1e6f;   // side of a small map's box, pixels
    float bigView = 1e6f;     // side of the weights' box
    float outputView = 1e6f;  // side of the head output's box
    float qkvViewHeight = 1e6f;  // height of each of Q, K, V's boxes (stacked: a third of the panel, less their titles)
};

inline constexpr float kMinCell = 12.0f;    // below this the labels no longer fit (heatmap_view: 0.8 × font)
inline constexpr float kMaxCell = 64.0f;    // larger cells add nothing readable; values print at 26+ px
inline constexpr float kComfortCell = 40.0f;  // 3 digits in the value font with room to spare
// The share of the window the weights' unmasked cells aim for: 6.5%, so that their colours cover 5% once
// the printed values are taken out (measured: text takes 4-6% of a 30-60 px cell).
inline constexpr float kTargetShare = 0.065f;
inline constexpr float kStripWidth = 26.0f;        // the collapsed controls sidebar
inline constexpr float kInputsStripWidth = 44.0f;  // the inputs strip's buttons ("W^Q" in the UI font)

// The heads grid's thumbnails: the small maps' cells, at most 16 px, at least 4.
inline float gridCellFor(float smallCell) { return smallCell < 4.0f ? 4.0f : smallCell > 16.0f ? 16.0f : smallCell; }

// The fit plan for `in` under the user's choices (Auto lets the plan collapse what it needs).
FitPlan planFitLayout(const FitInput& in, Collapse inputs, Collapse sidebar);

struct ChainView {
    // Layout (not saved with the session: a window-size matter).
    Collapse sidebar = Collapse::Auto;
    Collapse inputs = Collapse::Auto;
    std::map<int, bool> inputOpen;  // MatrixId → opened from the strip
    FitPlan plan;                   // this frame's plan (made before the panels are drawn)
    std::map<std::string, float> mapZoom;  // per map key ("weights/0"): its own Ctrl+wheel zoom (absent = 1)
    // Maps larger than their box open whole (fitted, max-pooled under a pixel a cell); per map key, the cell size
    // the wheel zoomed it to (the fit cell or less: whole; absent: whole, or the sidebar's zoom when not 1×). Its
    // scroll position is its box's own (kept per map by ImGui).
    std::map<std::string, float> mapCell;
    // The heads grid's thumbnails of heads too large for one pixel a cell (hundreds of tokens): each head's
    // weights pooled to the thumbnail (attn::poolMax), for the result stamp and side they were made for.
    std::vector<attn::Matrix> gridPooled;
    std::uint64_t gridPooledStamp = ~std::uint64_t(0);  // the weights' texture generation they were pooled from
    // The weights under the row-max scale (attn::rowMaxNormalized), per head, and the result stamp each was made for.
    std::vector<attn::Matrix> rowMax;
    std::vector<std::uint64_t> rowMaxStamps;
    int gridPooledSide = 0;
    // The current head's unmasked weights and their shape, from the last result whose maps were on the host: a
    // result whose maps are still on the device (same shape, the mask seldom changes) is planned with it.
    int knownVisible = -1, knownRows = 0, knownCols = 0;
    // Parts of the maps of a result whose maps are still on the device, pooled there in a frame (chain_panel's
    // devicePooled), per map key: the result generation and the part they are of.
    struct DevicePooled {
        std::uint64_t generation = 0;
        PoolPart part;
        attn::Matrix values;
    };
    std::map<std::string, DevicePooled> devicePooled;
    bool planned = false;
    std::string focus;              // the key of the map in focus mode ("weights/0"); "" = none
    // Colour ranges held by RangeMode::Locked, per map key ("weights/1"); cleared when unlocked.
    std::map<std::string, attn::DisplayRange> locked;
    // The generation stamp of the textures drawn for this document's shown result: unique in the process
    // (a global counter), so two documents never hand the renderer the same (key, generation) for different
    // data. Renewed whenever the shown result changes.
    std::uint64_t stamp = 0;
    std::uint64_t stampedGeneration = ~std::uint64_t(0);
};

} // namespace app
