// colormap.h: maps, ranges, ticks.
#include <attnscope/colormap.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <random>

namespace attn {
namespace {

TEST(Colormap, NamesRoundTrip)
{
    for (Colormap c : {Colormap::Viridis, Colormap::Magma, Colormap::Cividis, Colormap::RdBu})
        EXPECT_EQ(colormapFromString(toString(c)), c);
    EXPECT_FALSE(colormapFromString("jet").has_value());
}

TEST(Colormap, EndsAndDivergingCentre)
{
    auto v0 = colormapColor(Colormap::Viridis, 0), v1 = colormapColor(Colormap::Viridis, 1);
    EXPECT_EQ(v0.r, 0x44);
    EXPECT_EQ(v0.g, 0x01);
    EXPECT_EQ(v1.r, 0xfd);
    EXPECT_EQ(v1.b, 0x25);
    auto mid = colormapColor(Colormap::RdBu, 0.5f);
    EXPECT_EQ(mid.r, 0xf7);
    EXPECT_EQ(mid.g, 0xf7);
    auto lo = colormapColor(Colormap::RdBu, 0), hi = colormapColor(Colormap::RdBu, 1);
    EXPECT_GT(lo.b, lo.r);  // negative is blue
    EXPECT_GT(hi.r, hi.b);  // positive is red
    EXPECT_TRUE(isDiverging(Colormap::RdBu));
    EXPECT_FALSE(isDiverging(Colormap::Magma));
}

TEST(Colormap, PerceptualMapsGetBrighterMonotonically)
{
    for (Colormap c : {Colormap::Viridis, Colormap::Magma, Colormap::Cividis}) {
        auto lut = colormapLut(c);
        auto lum = [](Rgb8 x) { return 0.2126 * x.r + 0.7152 * x.g + 0.0722 * x.b; };
        for (int i = 1; i < kColormapLutSize; ++i) EXPECT_GE(lum(lut[i]) + 1.0, lum(lut[i - 1])) << toString(c) << " " << i;
    }
}

TEST(Colormap, MaskedGreyIsNotInAnyMap)
{
    for (Colormap c : {Colormap::Viridis, Colormap::Magma, Colormap::Cividis, Colormap::RdBu})
        for (Rgb8 x : colormapLut(c)) {
            // Grey means r == g == b; the diverging centre (0xf7 grey-white) is far from kMaskedColor.
            const bool same = x.r == kMaskedColor.r && x.g == kMaskedColor.g && x.b == kMaskedColor.b;
            EXPECT_FALSE(same) << toString(c);
        }
}

TEST(DisplayRange, SkipsMaskedAndNonFinite)
{
    Matrix m{{1, 2}, {100, NAN}};
    MaskMatrix mask{{0, 0}, {1, 0}};
    DisplayRange r = displayRange(m, &mask, false);
    EXPECT_EQ(r.lo, 1);
    EXPECT_EQ(r.hi, 2);
    EXPECT_EQ(r.nonFinite, 1);
    DisplayRange s = displayRange(Matrix{{-3, 1}}, nullptr, true);
    EXPECT_EQ(s.lo, -3);
    EXPECT_EQ(s.hi, 3);
}

// The chunked fast path (whole chunks through Eigen's min/max, masked chunks skipped) against a plain loop,
// on matrices large enough for every kind of chunk: unmasked, fully masked (a causal mask's upper right),
// mixed (its diagonal), and chunks holding a NaN or an infinity.
TEST(DisplayRange, LargeMatricesMatchAPlainLoop)
{
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int n : {255, 256, 700, 1031}) {
        Matrix m(n, n);
        for (Eigen::Index k = 0; k < m.size(); ++k) m.data()[k] = normal(rng);
        MaskMatrix causal(n, n);
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) causal(i, j) = j > i;
        // Extremes where the mask hides them (must not count), and non-finite values in visible cells.
        m(0, n - 1) = 1e30f;
        m(1, n - 2) = -1e30f;
        m(n - 1, 3) = NAN;
        m(n / 2, n / 3) = INFINITY;
        m(n - 2, 0) = -INFINITY;
        for (const MaskMatrix* mask : std::initializer_list<const MaskMatrix*>{nullptr, &causal}) {
            float lo = INFINITY, hi = -INFINITY;
            int bad = 0;
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j) {
                    if (mask && (*mask)(i, j)) continue;
                    if (!std::isfinite(m(i, j))) {
                        ++bad;
                        continue;
                    }
                    lo = std::min(lo, m(i, j));
                    hi = std::max(hi, m(i, j));
                }
            const DisplayRange r = displayRange(m, mask, false);
            EXPECT_EQ(r.lo, lo) << "n=" << n << (mask ? " causal" : "");
            EXPECT_EQ(r.hi, hi) << "n=" << n << (mask ? " causal" : "");
            EXPECT_EQ(r.nonFinite, bad) << "n=" << n << (mask ? " causal" : "");
            if (!mask) EXPECT_EQ(r.hi, 1e30f);  // the masked extremes count only without the mask
            else EXPECT_LT(r.hi, 1e29f);
        }
    }
}

TEST(DisplayRange, DegenerateInputsHaveDefinedRanges)
{
    DisplayRange c = displayRange(Matrix::Constant(3, 3, 2.0f), nullptr, false);
    EXPECT_LT(c.lo, 2.0f);
    EXPECT_GT(c.hi, 2.0f);
    EXPECT_EQ(normalize(2.0f, c), 0.5f);  // a constant matrix is one colour, not NaN
    DisplayRange e = displayRange(Matrix(), nullptr, false);
    EXPECT_EQ(e.lo, 0);
    EXPECT_EQ(e.hi, 1);
    DisplayRange z = displayRange(Matrix::Zero(2, 2), nullptr, true);
    EXPECT_EQ(z.lo, -1);
    EXPECT_EQ(z.hi, 1);
    EXPECT_EQ(normalize(NAN, z), 0.5f);
    DisplayRange u = unionRange({DisplayRange{0, 1, 0}, DisplayRange{-2, 0.5f, 1}}, false);
    EXPECT_EQ(u.lo, -2);
    EXPECT_EQ(u.hi, 1);
    EXPECT_EQ(u.nonFinite, 1);
}

TEST(Ticks, NiceStepsInsideTheRange)
{
    auto t = niceTicks(0.0f, 1.0f, 6);
    ASSERT_EQ(t.size(), 6u);
    EXPECT_FLOAT_EQ(t[1], 0.2f);
    auto s = niceTicks(-3.2f, 3.2f, 5);
    for (float v : s) {
        EXPECT_GE(v, -3.2f);
        EXPECT_LE(v, 3.2f);
    }
    EXPECT_NE(std::find(s.begin(), s.end(), 0.0f), s.end());
    EXPECT_EQ(niceTicks(1.0f, 1.0f, 5).size(), 1u);
}

TEST(Format, ShortReadableValues)
{
    EXPECT_EQ(formatValue(3.9492f), "3.95");
    EXPECT_EQ(formatValue(0.25f), "0.25");
    EXPECT_EQ(formatValue(-1e6f), "-1e+06");
    EXPECT_EQ(formatValue(0.0f), "0");
    EXPECT_EQ(formatValue(-INFINITY), "-inf");
}

TEST(Colormap, PoolMaxKeepsEachBlocksLargestEntry)
{
    // 5×5 into 2×2: blocks of rows {0,1} / {2,3,4} and the same columns; one strong entry per block.
    Matrix m = Matrix::Zero(5, 5);
    m(1, 1) = 0.9f;
    m(0, 4) = 0.7f;
    m(4, 0) = 0.5f;
    m(3, 3) = 0.3f;
    m(2, 2) = std::nanf("");
    const Matrix p = poolMax(m, 2, 2);
    ASSERT_EQ(p.rows(), 2);
    ASSERT_EQ(p.cols(), 2);
    EXPECT_FLOAT_EQ(p(0, 0), 0.9f);
    EXPECT_FLOAT_EQ(p(0, 1), 0.7f);
    EXPECT_FLOAT_EQ(p(1, 0), 0.5f);
    EXPECT_FLOAT_EQ(p(1, 1), 0.3f) << "a NaN is skipped, not taken as the maximum";
    // Sizes past m's are clamped (no pooling), an empty m stays empty, an all-NaN block gives NaN.
    EXPECT_EQ(poolMax(m, 9, 9).rows(), 5);
    // Blocks of one cell: each cell as it is, a non-finite one NaN (a block without a finite entry), from a view with
    // a row stride as from a matrix.
    Matrix withInf = m;
    withInf(0, 0) = INFINITY;
    const Matrix same = poolMax(withInf, 5, 5);
    EXPECT_TRUE(std::isnan(same(0, 0)));
    EXPECT_TRUE(std::isnan(same(2, 2)));
    Matrix finite = m;
    finite(2, 2) = 0;
    Matrix got = same;
    got(0, 0) = 0;
    got(2, 2) = 0;
    EXPECT_EQ(got, finite);
    const Matrix big = Matrix::Random(7, 9);
    EXPECT_EQ(poolMax(MatrixCMap(big.data(), 4, 4, Eigen::OuterStride<>(9)), 4, 4), Matrix(big.topLeftCorner(4, 4)));
    EXPECT_EQ(poolMax(Matrix(), 3, 3).size(), 0);
    Matrix nan = Matrix::Constant(2, 2, std::nanf(""));
    EXPECT_TRUE(std::isnan(poolMax(nan, 1, 1)(0, 0)));
}

// poolMax against the rule written out block by block (the largest finite value; NaN for a block with none), on
// random maps with ±inf, NaN and whole non-finite blocks, for block shapes that do and do not divide the map.
TEST(Colormap, PoolMaxMatchesTheBlockRule)
{
    std::mt19937 rng(36);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (const auto& [R, C, rows, cols] : {std::array<int, 4>{37, 53, 5, 7}, {64, 64, 8, 8}, {100, 9, 33, 4}, {7, 300, 7, 96}, {1, 5, 1, 2}}) {
        Matrix m(R, C);
        for (int i = 0; i < R; ++i)
            for (int j = 0; j < C; ++j) {
                const int pick = int(rng() % 50);
                m(i, j) = pick == 0 ? INFINITY : pick == 1 ? -INFINITY : pick == 2 ? std::nanf("") : u(rng);
            }
        m.topLeftCorner(std::min(R, 3), std::min(C, 3)).setConstant(-INFINITY);  // a block with no finite value
        const Matrix p = poolMax(m, rows, cols);
        ASSERT_EQ(p.rows(), rows);
        ASSERT_EQ(p.cols(), cols);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                float best = NAN;
                for (int i = r * R / rows; i < (r + 1) * R / rows; ++i)
                    for (int j = c * C / cols; j < (c + 1) * C / cols; ++j)
                        if (std::isfinite(m(i, j)) && (std::isnan(best) || m(i, j) > best)) best = m(i, j);
                if (std::isnan(best)) EXPECT_TRUE(std::isnan(p(r, c))) << R << "x" << C << " block " << r << "," << c;
                else EXPECT_EQ(p(r, c), best) << R << "x" << C << " block " << r << "," << c;
            }
    }
}

} // namespace
} // namespace attn

// Issue 36: the weights of a long text are ~1/n; a log scale over 1e-4…1 shows their structure.
TEST(ColorScale, LogNormalizesByTheLogarithm)
{
    attn::DisplayRange r{1e-4f, 1.0f, 0, attn::ColorScale::Log};
    EXPECT_FLOAT_EQ(attn::normalize(1.0f, r), 1.0f);
    EXPECT_NEAR(attn::normalize(1e-2f, r), 0.5f, 1e-5f);
    EXPECT_NEAR(attn::normalize(1e-3f, r), 0.25f, 1e-5f);
    EXPECT_FLOAT_EQ(attn::normalize(0.0f, r), 0.0f) << "0 (a masked key) is the low end, not NaN";
    EXPECT_FLOAT_EQ(attn::normalize(-1.0f, r), 0.0f);
    EXPECT_FLOAT_EQ(attn::normalize(5.0f, r), 1.0f);
    EXPECT_FLOAT_EQ(attn::normalize(std::nanf(""), r), 0.5f);
    // A log range that cannot be one (lo ≤ 0) draws linear.
    attn::DisplayRange bad{0.0f, 1.0f, 0, attn::ColorScale::Log};
    EXPECT_FLOAT_EQ(attn::normalize(0.25f, bad), 0.25f);
}

TEST(ColorScale, LogTicksArePowersOfTen)
{
    attn::DisplayRange r{1e-4f, 1.0f, 0, attn::ColorScale::Log};
    const std::vector<float> t = attn::rangeTicks(r, 10);
    ASSERT_EQ(t.size(), 5u);
    EXPECT_FLOAT_EQ(t.front(), 1e-4f);
    EXPECT_FLOAT_EQ(t.back(), 1.0f);
    EXPECT_LE(attn::rangeTicks(r, 3).size(), 3u);
    EXPECT_EQ(attn::rangeTicks(attn::DisplayRange{0.0f, 1.0f, 0}, 6), attn::niceTicks(0.0f, 1.0f, 6));
}

TEST(ColorScale, AutoPicksLogPast128Keys)
{
    using attn::WeightsScale;
    EXPECT_EQ(attn::resolveWeightsScale(WeightsScale::Auto, 56), WeightsScale::Linear);
    EXPECT_EQ(attn::resolveWeightsScale(WeightsScale::Auto, 128), WeightsScale::Linear);
    EXPECT_EQ(attn::resolveWeightsScale(WeightsScale::Auto, 129), WeightsScale::Log);
    EXPECT_EQ(attn::resolveWeightsScale(WeightsScale::Linear, 4096), WeightsScale::Linear);
    EXPECT_EQ(attn::resolveWeightsScale(WeightsScale::RowMax, 4), WeightsScale::RowMax);
    const attn::DisplayRange lin{0.0f, 1.0f, 0};
    const attn::DisplayRange log = attn::weightsRange(WeightsScale::Log, lin);
    EXPECT_EQ(log.scale, attn::ColorScale::Log);
    EXPECT_FLOAT_EQ(log.lo, attn::kLogWeightsLo);
    EXPECT_FLOAT_EQ(log.hi, 1.0f);
    EXPECT_EQ(attn::weightsRange(WeightsScale::Linear, attn::DisplayRange{0.1f, 0.6f, 0}).lo, 0.1f);
    for (WeightsScale s : {WeightsScale::Auto, WeightsScale::Linear, WeightsScale::Log, WeightsScale::RowMax})
        EXPECT_EQ(attn::weightsScaleFromString(attn::toString(s)), s);
    EXPECT_FALSE(attn::weightsScaleFromString("logarithmic"));
}

TEST(ColorScale, RowMaxDividesEachQueryByItsLargest)
{
    attn::Matrix w(2, 3);
    w << 0.5f, 0.25f, 0.25f,
         0.0f, 0.0f, 0.0f;  // a fully masked query keeps its zeros
    const attn::Matrix r = attn::rowMaxNormalized(w, true);
    EXPECT_FLOAT_EQ(r(0, 0), 1.0f);
    EXPECT_FLOAT_EQ(r(0, 1), 0.5f);
    EXPECT_FLOAT_EQ(r(1, 2), 0.0f);
    // Column layout: queries are columns.
    const attn::Matrix c = attn::rowMaxNormalized(w.transpose(), false);
    EXPECT_FLOAT_EQ(c(1, 0), 0.5f);
    EXPECT_FLOAT_EQ(c(0, 0), 1.0f);
}
