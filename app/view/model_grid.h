// The model view's grid (docs/model.md): one thumbnail per (layer, head), rows = layers, columns = heads, in
// the window and in `attnscope render --panel model-view` alike. The plan fits the thumbnails to the room
// (their side comes from the column pitch, never from the token count), pools a head's n×n weights to the
// thumbnail's pixels when n exceeds them, and scrolls when even the smallest readable thumbnails do not fit
// (30 layers × 9 heads of a decoder, or a narrow window). Pure layout: no ImGui, no math on values.
#pragma once

namespace app {

struct ModelGridInput {
    int layers = 0, heads = 0;  // L, H
    int tokens = 0;             // n (a head's weights are n×n)
    float width = 0, height = 0;  // the room for the grid, pixels (labels included)
    float labelWidth = 34;      // the "L12" column left of the thumbnails
    float headerHeight = 18;    // the "H0" row above them
    float rowExtra = 0;         // under each thumbnail (the ablation checkbox row)
};

inline constexpr float kModelThumbMin = 32.0f;   // smaller thumbnails show nothing: scroll instead
inline constexpr float kModelThumbMax = 160.0f;  // larger ones waste the room the lines view needs
inline constexpr float kModelThumbGap = 6.0f;    // between thumbnails, so that neighbours never touch

struct ModelGridPlan {
    float thumb = 0;       // the thumbnail's side, pixels
    float pitchX = 0, pitchY = 0;  // from one thumbnail's corner to the next one's
    int shown = 0;         // cells drawn across: n, or fewer when n exceeds the thumbnail's pixels (pooled)
    float cell = 0;        // thumb / shown (≥ 1 px)
    bool pooled = false;   // shown < n: each cell stands for a block of ⌈n / shown⌉ tokens
    float contentWidth = 0, contentHeight = 0;  // the whole grid
    bool scrollX = false, scrollY = false;      // the grid is larger than the room that way
};

ModelGridPlan planModelGrid(const ModelGridInput& in);

} // namespace app
