// A map too large to draw cell by cell (an attention bundle's 4096 × 4096 head, issue 18's 8192-token decoder):
// which part of it a view of W × H pixels shows at its zoom, and what to ask the maps for (attn::AttentionMaps):
// a tile of single cells when a cell is at least a pixel, else a max-pooled overview of about a pixel a cell, so
// the work per frame follows the pixels, not the map. Pure geometry: no ImGui, no maps (tests/app).
#pragma once

#include <attnscope/attention_maps.h>

namespace app {

struct MapViewport {
    double r0 = 0, c0 = 0;  // the map coordinates (query row, key column) at the view's top-left corner
    double scale = 0;       // pixels per cell; 0 = fit the whole map (the start, and after "Fit")
};

// What a frame draws: `rect` of the map (whole cells covering the visible part), fetched as `outRows` × `outCols`
// values (= rect's size for a tile, fewer for a pooled overview), drawn over the pixel rectangle starting
// `offsetX`, `offsetY` from the view's top-left (≤ 0: the first cell may be partly scrolled out) and
// `drawWidth` × `drawHeight` pixels.
struct MapFrame {
    attn::MapRect rect;
    int outRows = 0, outCols = 0;
    bool pooled = false;           // a cell of the fetched values covers a block of map cells
    double scale = 0;              // pixels per map cell (the fit scale when the viewport said 0)
    double offsetX = 0, offsetY = 0, drawWidth = 0, drawHeight = 0;
    bool operator==(const MapFrame&) const = default;
};

inline constexpr double kMaxMapScale = 64;  // pixels per cell at the deepest zoom

// The scale at which T × S cells fill (fit inside) W × H pixels.
double fitScale(int T, int S, double W, double H);

// The viewport with its scale within fit…kMaxMapScale and its corner inside the map (so no empty band shows
// where the map could fill the view).
MapViewport clampViewport(MapViewport v, int T, int S, double W, double H);

// What to fetch and where to draw it.
MapFrame planMapFrame(const MapViewport& v, int T, int S, double W, double H);

// Zoom by `factor` about the pixel (px, py) of the view (the cell under it stays under it), clamped.
MapViewport zoomAt(MapViewport v, double factor, double px, double py, int T, int S, double W, double H);

// Pan by (dx, dy) pixels (a drag to the right shows cells further left), clamped.
MapViewport panBy(MapViewport v, double dx, double dy, int T, int S, double W, double H);

// The map cell under pixel (px, py) of the view; false when outside the map.
bool cellAt(const MapViewport& v, double px, double py, int T, int S, double W, double H, int& row, int& col);

} // namespace app
