// Colormaps and display-range statistics, shared by the window and the figure export so both agree.
#pragma once

#include "attnscope/types.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class Colormap { Viridis, Magma, Cividis, RdBu };  // RdBu: diverging, blue < 0 < red, white at the centre

const char* toString(Colormap c);                          // "viridis", "magma", "cividis", "rdbu"
std::optional<Colormap> colormapFromString(std::string_view name);
bool isDiverging(Colormap c);

struct Rgb8 { std::uint8_t r = 0, g = 0, b = 0; };
inline constexpr int kColormapLutSize = 256;
// 256-entry lookup table, index 0 = low end of the range.
std::array<Rgb8, kColormapLutSize> colormapLut(Colormap c);
// Colour at t in [0, 1] (clamped).
Rgb8 colormapColor(Colormap c, float t);
// Colour used for masked cells in every view: a neutral grey that is in none of the maps.
inline constexpr Rgb8 kMaskedColor{150, 150, 150};

// The value range a heatmap maps to colour.
struct DisplayRange {
    float lo = 0.0f;
    float hi = 1.0f;
    int nonFinite = 0;   // count of NaN/Inf values that were skipped
};

// Range over the finite, unmasked entries of m (mask may be null or empty). symmetric: [-a, a] with
// a = max |v| (for diverging maps centred at 0). Degenerate input has a defined range: no finite values
// gives [0, 1]; a constant c gives [c - 0.5, c + 0.5] (symmetric: [-|c|, |c|], or [-1, 1] for 0), so a
// constant matrix shows a single colour, never NaN.
DisplayRange displayRange(const Matrix& m, const MaskMatrix* mask, bool symmetric);
// Union of several ranges (shared colour range over heads).
DisplayRange unionRange(const std::vector<DisplayRange>& ranges, bool symmetric);
// Position of v in the range, clamped to [0, 1]; NaN maps to 0.5.
float normalize(float v, const DisplayRange& r);
// "Nice" colorbar ticks (1, 2, 2.5, 5 × 10^k steps) inside [lo, hi], at most maxTicks of them.
std::vector<float> niceTicks(float lo, float hi, int maxTicks);
// Short label for a tick or cell value: e.g. "0.25", "-1e+06", "3.95".
std::string formatValue(float v, int significant = 3);

// A rows×cols overview of m for a picture smaller than m (a model-view thumbnail of an n×n head): m split into
// rows×cols near-equal blocks, each cell the largest finite entry of its block (a strong weight stays visible
// however far the map is shrunk; NaN when the block has no finite entry). rows, cols are clamped to
// [1, m.rows()] and [1, m.cols()]; an empty m gives an empty matrix.
Matrix poolMax(const MatrixCRef& m, Eigen::Index rows, Eigen::Index cols);

} // namespace attn
