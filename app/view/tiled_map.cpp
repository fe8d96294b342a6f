// Geometry of a zoomable map drawn from tiles: see tiled_map.h.
#include "view/tiled_map.h"

#include <algorithm>
#include <cmath>

namespace app {

double fitScale(int T, int S, double W, double H)
{
    if (T <= 0 || S <= 0 || W <= 0 || H <= 0) return 1;
    return std::min(W / S, H / T);
}

MapViewport clampViewport(MapViewport v, int T, int S, double W, double H)
{
    const double fit = fitScale(T, S, W, H);
    v.scale = v.scale <= 0 ? fit : std::clamp(v.scale, fit, std::max(fit, kMaxMapScale));
    // Visible cells along each axis; the corner may go no further than leaves the view full (or 0 when the
    // whole axis fits).
    const double visR = H / v.scale, visC = W / v.scale;
    v.r0 = std::clamp(v.r0, 0.0, std::max(0.0, T - visR));
    v.c0 = std::clamp(v.c0, 0.0, std::max(0.0, S - visC));
    return v;
}

MapFrame planMapFrame(const MapViewport& vIn, int T, int S, double W, double H)
{
    MapFrame f;
    if (T <= 0 || S <= 0 || W < 1 || H < 1) return f;
    const MapViewport v = clampViewport(vIn, T, S, W, H);
    f.scale = v.scale;
    const double visR = std::min(double(T) - v.r0, H / v.scale), visC = std::min(double(S) - v.c0, W / v.scale);
    const int r0 = int(std::floor(v.r0)), c0 = int(std::floor(v.c0));
    const int r1 = std::min(T, int(std::ceil(v.r0 + visR - 1e-9))), c1 = std::min(S, int(std::ceil(v.c0 + visC - 1e-9)));
    f.rect = attn::MapRect{r0, c0, std::max(1, r1 - r0), std::max(1, c1 - c0)};
    f.offsetX = (c0 - v.c0) * v.scale;
    f.offsetY = (r0 - v.r0) * v.scale;
    f.drawWidth = f.rect.cols * v.scale;
    f.drawHeight = f.rect.rows * v.scale;
    // Below a pixel a cell, one fetched value a pixel (rounded up: never fewer values than the pixels drawn).
    f.pooled = v.scale < 1.0;
    f.outRows = f.pooled ? std::clamp(int(std::ceil(f.drawHeight)), 1, f.rect.rows) : f.rect.rows;
    f.outCols = f.pooled ? std::clamp(int(std::ceil(f.drawWidth)), 1, f.rect.cols) : f.rect.cols;
    return f;
}

MapViewport zoomAt(MapViewport v, double factor, double px, double py, int T, int S, double W, double H)
{
    v = clampViewport(v, T, S, W, H);
    const double row = v.r0 + py / v.scale, col = v.c0 + px / v.scale;  // the cell under the pointer
    MapViewport z = v;
    z.scale = v.scale * factor;
    z = clampViewport(z, T, S, W, H);
    z.r0 = row - py / z.scale;
    z.c0 = col - px / z.scale;
    return clampViewport(z, T, S, W, H);
}

MapViewport panBy(MapViewport v, double dx, double dy, int T, int S, double W, double H)
{
    v = clampViewport(v, T, S, W, H);
    v.c0 -= dx / v.scale;
    v.r0 -= dy / v.scale;
    return clampViewport(v, T, S, W, H);
}

bool cellAt(const MapViewport& vIn, double px, double py, int T, int S, double W, double H, int& row, int& col)
{
    const MapViewport v = clampViewport(vIn, T, S, W, H);
    if (px < 0 || py < 0 || px >= W || py >= H) return false;
    const double r = v.r0 + py / v.scale, c = v.c0 + px / v.scale;
    if (r < 0 || c < 0 || r >= T || c >= S) return false;
    row = int(r);
    col = int(c);
    return true;
}

} // namespace app
