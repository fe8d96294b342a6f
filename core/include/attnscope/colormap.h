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

// How a range maps a value to colour: in proportion to the value, or to its logarithm (weights of a long text,
// most of them near 1/n: on a linear 0…1 scale a 1024-token map is one flat colour).
enum class ColorScale { Linear, Log };

// The value range a heatmap maps to colour.
struct DisplayRange {
    float lo = 0.0f;
    float hi = 1.0f;
    int nonFinite = 0;   // count of NaN/Inf values that were skipped
    ColorScale scale = ColorScale::Linear;  // Log needs 0 < lo < hi (else it draws as Linear)
};

// How the window and the figures colour attention weights (the session's view: "weights_scale"):
//   Auto    Linear up to kLogScaleKeys keys, Log past them (the default);
//   Linear  the fixed 0…1 scale (or the data's range, by the view's "weights_range");
//   Log     log10 over kLogWeightsLo…1;
//   RowMax  each query's weights divided by that query's largest (rowMaxNormalized), on 0…1: where each query
//           looks, whatever its spread.
enum class WeightsScale { Auto, Linear, Log, RowMax };
const char* toString(WeightsScale s);  // "auto", "linear", "log", "row_max"
std::optional<WeightsScale> weightsScaleFromString(std::string_view name);
// Past this many keys the weights are ~1/S ≤ 0.008 where spread out: a linear 0…1 scale shows them as its lowest
// colour, so Auto picks Log (issue 36: 1024 keys drew one flat purple).
inline constexpr long kLogScaleKeys = 128;
// The log scale's low end: a weight 1e-4 is below uniform attention over 8192 keys (1.2e-4), the window's
// largest text, so uniform rows never fall off the bottom of the scale.
inline constexpr float kLogWeightsLo = 1e-4f;
// The scale `s` is for a map of `keys` keys: Auto resolved (Linear or Log), the others as they are.
WeightsScale resolveWeightsScale(WeightsScale s, long keys);
// The range the weights are coloured over under a resolved scale: Log kLogWeightsLo…1 (ColorScale::Log),
// RowMax 0…1; Linear/Auto give `linear` (the caller's fixed 0…1 or data range).
DisplayRange weightsRange(WeightsScale resolved, const DisplayRange& linear);
// The weights with each query's row (queriesAreRows; else each column) divided by its largest finite value:
// 1 marks where that query looks most. A query whose largest weight is 0 or not finite keeps its values.
Matrix rowMaxNormalized(const Matrix& w, bool queriesAreRows);

// Range over the finite, unmasked entries of m (mask may be null or empty). symmetric: [-a, a] with
// a = max |v| (for diverging maps centred at 0). Degenerate input has a defined range: no finite values
// gives [0, 1]; a constant c gives [c - 0.5, c + 0.5] (symmetric: [-|c|, |c|], or [-1, 1] for 0), so a
// constant matrix shows a single colour, never NaN.
DisplayRange displayRange(const Matrix& m, const MaskMatrix* mask, bool symmetric);
// Union of several ranges (shared colour range over heads).
DisplayRange unionRange(const std::vector<DisplayRange>& ranges, bool symmetric);
// Position of v in the range, clamped to [0, 1]; NaN maps to 0.5.
float normalize(float v, const DisplayRange& r);
// The ticks of a colorbar over `r`: niceTicks for a linear scale; for a log one the powers of ten inside
// [lo, hi] (every other one, or fewer, when more than maxTicks).
std::vector<float> rangeTicks(const DisplayRange& r, int maxTicks);
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
