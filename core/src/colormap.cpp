// Colormaps (piecewise-linear through control points) and display-range statistics.
//
// The perceptual maps (viridis, magma, cividis) are defined by 11 control colours sampled at equal
// steps of the published maps; linear interpolation between them stays within a few 1/255 steps of the
// originals, which is below what a heatmap reader can see. RdBu is the ColorBrewer-style diverging map
// (blue for negative, white at 0, red for positive).
#include "attnscope/colormap.h"
#include "attnscope/result_change.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace attn {
namespace {

struct Stops {
    const std::uint32_t* rgb;
    int n;
};

constexpr std::uint32_t kViridis[] = {0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e, 0x1f9e89,
                                      0x35b779, 0x6ece58, 0xb5de2b, 0xfde725, 0xfde725};
constexpr std::uint32_t kMagma[] = {0x000004, 0x180f3d, 0x440f76, 0x721f81, 0x9e2f7f, 0xcd4071,
                                    0xf1605d, 0xfd9668, 0xfeca8d, 0xfcfdbf, 0xfcfdbf};
constexpr std::uint32_t kCividis[] = {0x00224e, 0x123570, 0x3b496c, 0x575d6d, 0x707173, 0x8a8779,
                                      0xa69d75, 0xc4b56c, 0xe4cf5b, 0xfee838, 0xfee838};
constexpr std::uint32_t kRdBu[] = {0x053061, 0x2166ac, 0x4393c3, 0x92c5de, 0xd1e5f0, 0xf7f7f7,
                                   0xfddbc7, 0xf4a582, 0xd6604d, 0xb2182b, 0x67001f};

// The perceptual tables above repeat their last stop so that all maps have 11 entries; use 10 steps for
// them (the duplicate is never interpolated into) and 11 for RdBu so that 0.5 falls exactly on white.
Stops stopsOf(Colormap c)
{
    switch (c) {
    case Colormap::Viridis: return {kViridis, 10};
    case Colormap::Magma: return {kMagma, 10};
    case Colormap::Cividis: return {kCividis, 10};
    case Colormap::RdBu: return {kRdBu, 11};
    }
    return {kViridis, 10};
}

} // namespace

const char* toString(Colormap c)
{
    switch (c) {
    case Colormap::Viridis: return "viridis";
    case Colormap::Magma: return "magma";
    case Colormap::Cividis: return "cividis";
    case Colormap::RdBu: return "rdbu";
    }
    return "?";
}

std::optional<Colormap> colormapFromString(std::string_view name)
{
    for (Colormap c : {Colormap::Viridis, Colormap::Magma, Colormap::Cividis, Colormap::RdBu})
        if (name == toString(c)) return c;
    if (name == "RdBu" || name == "rdbu_r" || name == "diverging") return Colormap::RdBu;
    return std::nullopt;
}

bool isDiverging(Colormap c) { return c == Colormap::RdBu; }

Rgb8 colormapColor(Colormap c, float t)
{
    if (!(t >= 0.0f)) t = 0.0f;  // also catches NaN
    if (t > 1.0f) t = 1.0f;
    const Stops s = stopsOf(c);
    const float x = t * float(s.n - 1);
    const int i = std::min(int(x), s.n - 2);
    const float f = x - float(i);
    auto ch = [&](int shift) {
        const float a = float((s.rgb[i] >> shift) & 0xff);
        const float b = float((s.rgb[i + 1] >> shift) & 0xff);
        return static_cast<std::uint8_t>(std::lround(a + (b - a) * f));
    };
    return Rgb8{ch(16), ch(8), ch(0)};
}

std::array<Rgb8, kColormapLutSize> colormapLut(Colormap c)
{
    std::array<Rgb8, kColormapLutSize> lut{};
    for (int i = 0; i < kColormapLutSize; ++i) lut[i] = colormapColor(c, float(i) / float(kColormapLutSize - 1));
    return lut;
}

namespace {

// Min and max over n values, skipping masked and non-finite ones (counted in nonFinite). In chunks: a chunk
// with no mask flag and only finite values (the common case: x·0 sums to 0 exactly when every x is finite)
// goes through Eigen's vectorised min/max, a fully masked chunk is skipped, and only mixed chunks (a causal
// diagonal, a NaN) take the per-value loop. The per-value loop alone ran at 3.4 ns a value: 31 ms of the
// window's 84 ms from an edit to its picture at n=1024, h=8 (`attnscope bench --gui`).
void rangeOf(const float* p, const std::uint8_t* mk, std::ptrdiff_t n, float& lo, float& hi, int& nonFinite)
{
    constexpr std::ptrdiff_t kChunk = 256;
    for (std::ptrdiff_t c0 = 0; c0 < n; c0 += kChunk) {
        const std::ptrdiff_t len = std::min(kChunk, n - c0);
        const float* v = p + c0;
        int flags = 0;
        if (mk) {
            for (std::ptrdiff_t k = 0; k < len; ++k) flags += mk[c0 + k] != 0;  // vectorised byte count
            if (flags == len) continue;
        }
        const Eigen::Map<const Eigen::ArrayXf> a(v, len);
        if (flags == 0 && (a * 0.0f).sum() == 0.0f) {
            lo = std::min(lo, a.minCoeff());
            hi = std::max(hi, a.maxCoeff());
            continue;
        }
        for (std::ptrdiff_t k = 0; k < len; ++k) {
            if (mk && mk[c0 + k]) continue;
            if (!std::isfinite(v[k])) {
                ++nonFinite;
                continue;
            }
            lo = std::min(lo, v[k]);
            hi = std::max(hi, v[k]);
        }
    }
}

} // namespace

void extendFiniteRange(const float* p, const std::uint8_t* mask, std::ptrdiff_t n, float& lo, float& hi, int& nonFinite)
{
    rangeOf(p, mask, n, lo, hi, nonFinite);
}

DisplayRange displayRange(const Matrix& m, const MaskMatrix* mask, bool symmetric)
{
    // Same shape and storage order (both row-major): value k and flag k belong to the same cell.
    const bool useMask = mask && mask->size() == m.size() && mask->rows() == m.rows();
    float lo = INFINITY, hi = -INFINITY;
    int nonFinite = 0;
    rangeOf(m.data(), useMask ? mask->data() : nullptr, m.size(), lo, hi, nonFinite);
    return rangeFromMinMax(lo, hi, nonFinite, symmetric);
}

DisplayRange rangeFromMinMax(float lo, float hi, int nonFinite, bool symmetric)
{
    DisplayRange r;
    r.nonFinite = nonFinite;
    if (lo > hi) {  // nothing finite and unmasked
        r.lo = symmetric ? -1.0f : 0.0f;
        r.hi = 1.0f;
        return r;
    }
    if (symmetric) {
        float a = std::max(std::fabs(lo), std::fabs(hi));
        if (a == 0.0f) a = 1.0f;
        r.lo = -a;
        r.hi = a;
    } else if (lo == hi) {
        r.lo = lo - 0.5f;
        r.hi = hi + 0.5f;
    } else {
        r.lo = lo;
        r.hi = hi;
    }
    return r;
}

DisplayRange unionRange(const std::vector<DisplayRange>& ranges, bool symmetric)
{
    if (ranges.empty()) return DisplayRange{symmetric ? -1.0f : 0.0f, 1.0f, 0};
    DisplayRange u = ranges.front();
    for (const DisplayRange& r : ranges) {
        u.lo = std::min(u.lo, r.lo);
        u.hi = std::max(u.hi, r.hi);
    }
    u.nonFinite = 0;
    for (const DisplayRange& r : ranges) u.nonFinite += r.nonFinite;
    if (symmetric) {
        const float a = std::max(std::fabs(u.lo), std::fabs(u.hi));
        u.lo = -a;
        u.hi = a;
    }
    return u;
}

float normalize(float v, const DisplayRange& r)
{
    if (std::isnan(v)) return 0.5f;
    if (r.scale == ColorScale::Log && r.lo > 0.0f && r.hi > r.lo) {
        if (!(v > r.lo)) return 0.0f;  // 0 (a masked or ignored key) and anything under the floor: the low end
        return std::clamp(std::log(v / r.lo) / std::log(r.hi / r.lo), 0.0f, 1.0f);
    }
    const float span = r.hi - r.lo;
    if (!(span > 0.0f)) return 0.5f;
    return std::clamp((v - r.lo) / span, 0.0f, 1.0f);
}

std::vector<float> rangeTicks(const DisplayRange& r, int maxTicks)
{
    if (r.scale != ColorScale::Log || !(r.lo > 0.0f) || !(r.hi > r.lo) || !std::isfinite(r.hi))
        return niceTicks(r.lo, r.hi, maxTicks);
    const int e0 = static_cast<int>(std::ceil(std::log10(r.lo) - 1e-6)), e1 = static_cast<int>(std::floor(std::log10(r.hi) + 1e-6));
    const int step = std::max(1, (e1 - e0 + std::max(1, maxTicks) - 1) / std::max(1, maxTicks));
    std::vector<float> ticks;
    for (int e = e1; e >= e0; e -= step) ticks.insert(ticks.begin(), static_cast<float>(std::pow(10.0, e)));
    return ticks;
}

const char* toString(WeightsScale s)
{
    switch (s) {
    case WeightsScale::Auto: return "auto";
    case WeightsScale::Linear: return "linear";
    case WeightsScale::Log: return "log";
    case WeightsScale::RowMax: return "row_max";
    }
    return "auto";
}

std::optional<WeightsScale> weightsScaleFromString(std::string_view name)
{
    for (WeightsScale s : {WeightsScale::Auto, WeightsScale::Linear, WeightsScale::Log, WeightsScale::RowMax})
        if (name == toString(s)) return s;
    return std::nullopt;
}

WeightsScale resolveWeightsScale(WeightsScale s, long keys)
{
    if (s != WeightsScale::Auto) return s;
    return keys > kLogScaleKeys ? WeightsScale::Log : WeightsScale::Linear;
}

DisplayRange weightsRange(WeightsScale resolved, const DisplayRange& linear)
{
    DisplayRange r = linear;
    if (resolved == WeightsScale::Log) {
        r.lo = kLogWeightsLo;
        r.hi = 1.0f;
        r.scale = ColorScale::Log;
    } else if (resolved == WeightsScale::RowMax) {
        r.lo = 0.0f;
        r.hi = 1.0f;
        r.scale = ColorScale::Linear;
    }
    return r;
}

Matrix rowMaxNormalized(const Matrix& w, bool queriesAreRows)
{
    Matrix out = w;
    const Eigen::Index n = queriesAreRows ? w.rows() : w.cols();
    for (Eigen::Index i = 0; i < n; ++i) {
        float mx = 0.0f;
        const Eigen::Index len = queriesAreRows ? w.cols() : w.rows();
        for (Eigen::Index j = 0; j < len; ++j) {
            const float v = queriesAreRows ? w(i, j) : w(j, i);
            if (std::isfinite(v)) mx = std::max(mx, v);
        }
        if (!(mx > 0.0f)) continue;
        if (queriesAreRows) out.row(i) /= mx;
        else out.col(i) /= mx;
    }
    return out;
}

std::vector<float> niceTicks(float lo, float hi, int maxTicks)
{
    std::vector<float> ticks;
    if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || maxTicks < 2) {
        if (std::isfinite(lo)) ticks.push_back(lo);
        return ticks;
    }
    const double span = double(hi) - double(lo);
    const double rough = span / double(maxTicks - 1);
    const double mag = std::pow(10.0, std::floor(std::log10(rough)));
    double step = mag * 10;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (mag * m >= rough) {
            step = mag * m;
            break;
        }
    const double first = std::ceil(double(lo) / step - 1e-9) * step;
    for (double v = first; v <= double(hi) + step * 1e-9; v += step) {
        const double snapped = std::fabs(v) < step * 1e-9 ? 0.0 : v;  // avoid "-0" and 1e-17 residue
        ticks.push_back(static_cast<float>(snapped));
        if (static_cast<int>(ticks.size()) > maxTicks) break;
    }
    return ticks;
}

std::string formatValue(float v, int significant)
{
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[320];  // %g of any float fits (at most ~50 chars with exponent notation; 320 silences -Wformat-truncation)
    const float a = std::fabs(v);
    if (a != 0.0f && (a >= 1e5f || a < 1e-3f)) std::snprintf(buf, sizeof buf, "%.*g", std::max(1, significant - 1), v);
    else std::snprintf(buf, sizeof buf, "%.*g", significant, v);
    return buf;
}

Matrix poolMax(const MatrixCRef& m, Eigen::Index rows, Eigen::Index cols)
{
    if (m.size() == 0) return Matrix();
    rows = std::clamp<Eigen::Index>(rows, 1, m.rows());
    cols = std::clamp<Eigen::Index>(cols, 1, m.cols());
    // Blocks of one cell (nothing pooled: a short text's thumbnails): each cell as it is, non-finite ones NaN,
    // in one vectorised pass instead of a block loop per cell.
    if (rows == m.rows() && cols == m.cols())
        return m.unaryExpr([](float v) { return std::isfinite(v) ? v : std::numeric_limits<float>::quiet_NaN(); });
    // Block r covers source rows [r·R/rows, (r+1)·R/rows): near-equal, every row in exactly one block (the same
    // for columns). Each source row is folded into `acc` (per source column, the largest finite value of the
    // block's rows so far; -inf for none) with one vectorised max over the row, then each block's columns are
    // reduced. The per-value loop over blocks it replaces ran at ~1 ns a value, which at n=4096 pooled a
    // head's weights in ~20 ms (8 heads' thumbnails a result, in the frame: `perf` of `bench --gui`).
    const Eigen::Index C = m.cols();
    Matrix out(rows, cols);
    Eigen::ArrayXf acc(C);
    constexpr float kNone = -std::numeric_limits<float>::infinity();  // no finite value can be -inf
    for (Eigen::Index r = 0; r < rows; ++r) {
        const Eigen::Index r0 = r * m.rows() / rows, r1 = (r + 1) * m.rows() / rows;
        acc.setConstant(kNone);
        for (Eigen::Index i = r0; i < r1; ++i) {
            const Eigen::Map<const Eigen::ArrayXf> a(m.row(i).data(), C);
            if ((a * 0.0f).sum() == 0.0f) {  // every value finite (x·0 is NaN for ±inf and NaN)
                acc = acc.max(a);
                continue;
            }
            for (Eigen::Index j = 0; j < C; ++j)
                if (std::isfinite(a[j]) && a[j] > acc[j]) acc[j] = a[j];
        }
        for (Eigen::Index c = 0; c < cols; ++c) {
            const Eigen::Index c0 = c * C / cols, c1 = (c + 1) * C / cols;
            const float best = acc.segment(c0, c1 - c0).maxCoeff();
            out(r, c) = best == kNone ? std::numeric_limits<float>::quiet_NaN() : best;
        }
    }
    return out;
}

} // namespace attn
