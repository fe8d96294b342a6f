// Drawing a figure description (figure.h) to PNG, SVG and PDF, or to an RGBA image for the window's preview.
// One layout and one drawing routine serve every output (see painter.h for the back ends).
#pragma once

#include "figure/figure.h"

#include <attnscope/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace app::fig {

enum class FigureFormat { Png, Svg, Pdf };
// From the file name's extension (.png, .svg, .pdf; any case); nullopt otherwise.
std::optional<FigureFormat> formatFromPath(const std::string& path);

struct Rect {
    double x = 0, y = 0, w = 0, h = 0;
};

struct PanelLayout {
    Rect heatmap;        // the cells, in points
    double cell = 0;     // cell size in points
    Rect colorbar;       // the panel's own colorbar (w = 0 when the figure shares one)
};

// Where everything goes, in points (1/72 inch). Exposed so tests can find the cells in a rendered image.
struct FigureLayout {
    double width = 0, height = 0;
    std::vector<PanelLayout> panels;
    Rect colorbar;                       // the shared colorbar (w = 0 when panels have their own)
    bool annotationsFit = true;          // false when cells were too small for the requested annotations
};
FigureLayout layoutFigure(const Figure& f);

// PNG pixels per point: 2 gives 144 dpi. Scales outside [kMinScale, kMaxScale] are refused
// (0.25 is a thumbnail; 16 gives 1152 dpi, beyond any printer, and a large figure then nears 100 MP).
inline constexpr double kMinScale = 0.25;
inline constexpr double kMaxScale = 16.0;
// Images larger than this many pixels are refused rather than allocated (400 MB of RGBA).
inline constexpr double kMaxPixels = 100e6;
// cairo's image surfaces are limited to 32767 pixels per side (CAIRO_STATUS_INVALID_SIZE beyond).
inline constexpr double kMaxImageSide = 32767;
// Heatmaps with more cells than this are drawn as one image per map (nearest-neighbour, one pixel per
// cell) instead of one rectangle per cell: 128×128 cells as vector rectangles is a ~1 MB SVG, and a
// 2048-token map (4 M cells) as rectangles took 10 GB to write (issue 13, finding 4).
inline constexpr long kMaxVectorCells = 128 * 128;


// The file's bytes. scale applies to PNG only (SVG and PDF are vector, sized in points).
// Errors: InvalidArgument (scale out of range, image too large), Internal (a cairo failure).
attn::Expected<std::string> renderFigure(const Figure& f, FigureFormat format, double scale);
// renderFigure, then attn::writeFileAtomic: a failure leaves no partial file (IoError names the path).
attn::Status writeFigure(const Figure& f, const std::string& path, FigureFormat format, double scale);

// For the window's preview: straight (non-premultiplied) RGBA8, row-major, width × height.
struct RgbaImage {
    int width = 0, height = 0;
    std::vector<std::uint8_t> pixels;
};
attn::Expected<RgbaImage> renderFigureRgba(const Figure& f, double scale);

// Encodes RGBA8 pixels (top row first) as PNG and writes it atomically: the window's "save screenshot"
// (it reads the framebuffer, flips it to top-first and calls this). Errors: InvalidArgument (size does not
// match the pixel count), Internal (encoding), IoError (writing).
attn::Status writePngRgba(const std::string& path, const RgbaImage& img);

} // namespace app::fig
