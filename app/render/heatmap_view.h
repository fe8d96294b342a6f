// Heatmap widget: a matrix drawn as coloured cells with token labels on both axes, values printed when they
// fit, masked cells hatched grey, hover and linked highlights; plus a colorbar with ticks.
//
// The cells themselves are drawn by a HeatmapRenderer: the GL one (render/heatmap_gl.h, our GLSL shader over a
// float texture and a colormap lookup texture) in the window, or the CPU fallback here (one rectangle per cell)
// when none is installed, as in the null-backend smoke test.
#pragma once

#include <attnscope/colormap.h>
#include <attnscope/device_interop.h>
#include <attnscope/types.h>

#include "state/pooled_parts.h"

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace app {

// What to draw: values (rows × cols), an optional mask of the same shape, the range and colormap.
struct HeatmapSource {
    const attn::Matrix* values = nullptr;
    const attn::MaskMatrix* mask = nullptr;  // null or empty = nothing masked
    attn::DisplayRange range;
    attn::Colormap colormap = attn::Colormap::Viridis;
    std::uint64_t generation = 0;  // changes whenever *values or *mask change (the renderer re-uploads then)
    // Where *values also lies in device memory: head `deviceHead`'s `deviceMatrix` of the result with this
    // attn::AttentionResult::deviceGeneration (0 = host only). The GL renderer then fills the texture from
    // the device (attnscope/device_interop.h) when it can, else uploads *values as usual.
    std::uint64_t deviceGeneration = 0;
    attn::DeviceMatrix deviceMatrix = attn::DeviceMatrix::Scores;
    int deviceHead = 0;
    // With *values empty, the shape of a map whose cells are not on the host (a CUDA result shown before its maps
    // come back, AttentionResult::mapsOnDevice): it is laid out as it will be, its pooled parts come from the
    // spec's `prepooled` (made on the device) and its full-size cells from device memory (the GL renderer's
    // interop); what neither gives is left blank. 0 = the shape of *values.
    int shapeRows = 0, shapeCols = 0;
    bool onHost() const { return values && values->size() > 0; }
    int rows() const { return onHost() || shapeRows <= 0 ? static_cast<int>(values ? values->rows() : 0) : shapeRows; }
    int cols() const { return onHost() || shapeCols <= 0 ? static_cast<int>(values ? values->cols() : 0) : shapeCols; }
};

class HeatmapRenderer {
public:
    virtual ~HeatmapRenderer() = default;
    // Draws the cells of `src` into the rectangle [a, b] of `dl`. `key` names the heatmap (stable across
    // frames) so that its textures are reused while `src.generation` is unchanged.
    virtual void drawCells(ImDrawList* dl, ImVec2 a, ImVec2 b, const std::string& key, const HeatmapSource& src) = 0;
    // Uploads an RGBA8 picture (straight alpha, top row first, width·height·4 bytes) as a texture ImGui can
    // draw (ImGui::Image), kept under `key`: a later upload with the same key replaces it. Returns null when
    // the renderer has no textures, as here by default.
    virtual ImTextureID uploadImage(const std::string& key, int width, int height, const std::uint8_t* rgba)
    {
        (void)key, (void)width, (void)height, (void)rgba;
        return nullptr;
    }
};
// Installs the renderer used by drawHeatmap (null: the CPU fallback). Not owned.
void setHeatmapRenderer(HeatmapRenderer* r);
// Only the cells of `src` into [a, b] (no labels, no interaction), by the installed renderer or the CPU fallback:
// for views that lay out and zoom a map themselves (the tiled map view, view/tiled_map.h).
void drawHeatmapCells(ImDrawList* dl, ImVec2 a, ImVec2 b, const std::string& key, const HeatmapSource& src);
// uploadImage of the installed renderer; null when there is none (the null backend of the tests), and the
// caller then draws a placeholder.
ImTextureID uploadRgbaImage(const std::string& key, int width, int height, const std::uint8_t* rgba);

// What each axis of a heatmap indexes: hovering a Query/Key axis links the panels.
enum class Axis { Query, Key, Feature };

struct HeatmapSpec {
    std::string key;                  // unique id, e.g. "weights/0"
    HeatmapSource src;
    Axis rowAxis = Axis::Feature, colAxis = Axis::Feature;
    const std::vector<std::string>* rowLabels = nullptr;  // null = indices
    const std::vector<std::string>* colLabels = nullptr;
    float cellPx = 24;                // cell side in pixels (its width when cellPxY is set)
    float cellPxY = 0;                // > 0: a cell's height apart from its width (a thin map fitted along each side
                                      // on its own, chain_panel: 1024 × 8 cells of 0.5 × 8 px); 0 = square cells
    bool showValues = true;
    int highlightRow = -1, highlightCol = -1;  // linked hover highlights
    std::vector<std::uint8_t> colLabelMarked;  // optional: columns whose label is drawn struck (padded keys)
    std::vector<std::uint8_t> rowLabelMarked;
    int colBlock = 0, rowBlock = 0;            // > 0: a separator every colBlock columns / rowBlock rows (heads)
    float maxWidth = 420, maxHeight = 420;     // larger maps scroll inside this area (pan); Ctrl+wheel zooms
    bool rowLabelsShown = true;                // false: no row label band (a map to the left shows these rows)
    bool colLabelsShown = true;
    std::string rowTitle, colTitle;            // axis titles ("query", "key"); empty = none
    float minColBand = 0;                      // the cells start at least this far below the top (rows level with a neighbour's)
    // A map larger than its box, opened fitted (the caller's cellPx may then be below a pixel): it always sits in
    // its box, the plain wheel zooms it (reported in zoomWheel, Ctrl+wheel too), Shift+wheel pans across, and
    // cells under a pixel are drawn from the visible part max-pooled to one value a pixel (attn::poolMax).
    bool wheelZooms = false;
    // Parts of src.values pooled ahead of the frame (Document::prepooled): when src.generation is new and this
    // returns values for the part the frame draws pooled, they are drawn instead of pooling in the frame.
    std::function<const attn::Matrix*(const PoolPart&)> prepooled;
};

struct HeatmapHit {
    int row = -1, col = -1;        // hovered cell, -1 = none
    bool pressed = false;          // mouse went down on a cell this frame
    bool held = false;             // mouse button held over a cell (for painting)
    int colLabelClicked = -1;      // a column label was clicked
    int rowLabelClicked = -1;
    float zoomWheel = 0;           // Ctrl+wheel over the map, or the wheel over one that wheelZooms (the caller zooms)
    ImVec2 mouseInCells;           // the pointer's position from the cells' top-left (cellsMin), pixels
    ImVec2 viewMin, viewMax;       // the box the cells show in (= the cells when the map does not scroll)
    ImVec2 cellsMin, cellsMax;     // screen rectangle of the cells (labels excluded)
    PoolPart pooled;               // the part of the map drawn max-pooled this frame (empty when not pooled)
};

// Draws the heatmap at the cursor (labels included) and reports interaction.
HeatmapHit drawHeatmap(const HeatmapSpec& spec);

// Vertical colorbar with "nice" ticks (attn::niceTicks), `height` pixels tall, at the cursor. It takes
// kColorbarWidth pixels across (more only for unusually long tick labels), so maps without a bar of their own
// (heads sharing one range) line up when they reserve the same width.
inline constexpr float kColorbarWidth = 64.0f;
inline constexpr float kColorbarMaxHeight = 420.0f;  // = the default HeatmapSpec::maxHeight
// `minWidth` below kColorbarWidth packs it to its tick labels (the fit layout, where width is scarce). A log
// range (attn::ColorScale::Log) ticks its powers of ten and says "log" under the bar; `caption`, when given,
// is written there instead (e.g. "÷ row max"). Returns the bar's screen rectangle (its gradient, without the ticks).
std::pair<ImVec2, ImVec2> drawColorbar(const char* id, attn::Colormap cmap, const attn::DisplayRange& range, float height,
                  float minWidth = kColorbarWidth, const char* caption = nullptr);

// The text printed in a cell `cellPx` wide for value v: 3 significant digits, else 2, else 2 without the
// leading zero (".91"), then 1 digit ("-.1"), whichever first fits in `fontSize`; a middle dot "·" when none
// does (a value too wide to print, not a blank cell that reads as 0); "" for NaN/Inf.
std::string cellValueText(float v, float cellPx, float fontSize);

// Black or white, whichever reads better on the colour of value v.
ImU32 contrastingTextColor(attn::Colormap cmap, const attn::DisplayRange& range, float v);

// The label of index i: labels[i] when present, else "i" (0-based).
std::string axisLabel(const std::vector<std::string>* labels, int i);

} // namespace app
