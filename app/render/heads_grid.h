// A grid of small heatmaps sharing one colour range and colormap, one of them outlined as current, a click
// on one reporting which: the chain's heads grid (every head's weights) and the model view's layers × heads.
#pragma once

#include "render/heatmap_view.h"

#include <string>
#include <utility>
#include <vector>

namespace app {

struct HeadsGridItem {
    std::string key;                         // the heatmap's texture key (stable across frames)
    std::string label;                       // drawn above it, e.g. "head 2"
    const attn::Matrix* values = nullptr;    // rows × cols as shown
    const attn::MaskMatrix* mask = nullptr;  // null or empty = nothing masked
    std::uint64_t generation = 0;            // changes when *values changes (see HeatmapSource)
    // Grouped-query attention: the KV head this query head reads, e.g. "KV 1"; neighbours with the same group
    // are joined by a bracket under their maps, labelled once. Empty = no bracket (multi-head attention).
    std::string group;
};

struct HeadsGridSpec {
    std::string id;                    // ImGui id of the grid
    std::vector<HeadsGridItem> items;
    attn::DisplayRange range;          // one range for all, so that the maps compare
    attn::Colormap colormap = attn::Colormap::Viridis;
    float cellPx = 8;                  // cell side of every map
    int columns = 0;                   // maps per row; 0 = all in one row
    int current = -1;                  // the item outlined as current; -1 = none
    bool colorbar = true;              // one colorbar after the grid
};

struct HeadsGridHit {
    int clicked = -1;                  // the item clicked this frame, -1 = none
    int hovered = -1;                  // the item under the mouse, -1 = none
    int row = -1, col = -1;            // the hovered cell of that item
    std::vector<std::pair<ImVec2, ImVec2>> rects;  // each item's cells on screen (test hooks)
};

// Draws the grid at the cursor.
HeadsGridHit drawHeadsGrid(const HeadsGridSpec& spec);

} // namespace app
