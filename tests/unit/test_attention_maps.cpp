// The tile seam (attnscope/attention_maps.h): DenseMaps reads a run's dense results as query rows × key columns in
// both layouts; tiles, masks and the default max-pooled overview agree with the whole matrices (attn::poolMax is
// the oracle of pooled()); every out-of-range request is refused with a message.
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/attention_maps.h>
#include <attnscope/colormap.h>

#include <gtest/gtest.h>

#include <random>

namespace attn {
namespace {
using namespace attn::test;

// A computed result (causal, 3 heads) in `layout`: its heads' weights are the maps.
AttentionResult computeResult(Layout layout, int T, int S, std::uint32_t seed)
{
    ProblemSpec p;
    p.T = T;
    p.S = S;
    p.heads = 3;
    p.seed = seed;
    p.mode = Mode::Cross;  // T ≠ S
    p.causal = true;
    AttentionInput in;
    AttentionConfig cfg;
    makeProblem(p, in, cfg);
    if (layout == Layout::Column) {
        in = transposed(in);
        cfg.layout = Layout::Column;
    }
    AttentionResult r;
    EXPECT_TRUE(compute(in, cfg, r).ok());
    return r;
}

TEST(AttentionMaps, DenseTilesAreTheResultsInQueryRowsBothLayouts)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        SCOPED_TRACE(toString(layout));
        std::vector<AttentionResult> results = {computeResult(layout, 7, 9, 1), computeResult(layout, 7, 9, 2)};
        const DenseMaps maps(results);
        ASSERT_EQ(maps.layers(), 2);
        ASSERT_EQ(maps.heads(), 3);
        ASSERT_EQ(maps.queries(), 7);
        ASSERT_EQ(maps.keys(), 9);
        for (int l = 0; l < 2; ++l)
            for (int h = 0; h < 3; ++h) {
                const HeadResult& hr = results[std::size_t(l)].heads[std::size_t(h)];
                const Matrix w = layout == Layout::Row ? hr.weights : Matrix(hr.weights.transpose());
                const Matrix sc = layout == Layout::Row ? hr.scores : Matrix(hr.scores.transpose());
                const MaskMatrix mk = layout == Layout::Row ? hr.masked : MaskMatrix(hr.masked.transpose());
                Matrix t;
                ASSERT_TRUE(maps.tile(MapKind::Weights, l, h, MapRect{2, 3, 4, 5}, t).ok());
                EXPECT_EQ(t, w.block(2, 3, 4, 5));
                ASSERT_TRUE(maps.tile(MapKind::Scores, l, h, MapRect{0, 1, 7, 2}, t).ok());
                EXPECT_EQ(t, sc.block(0, 1, 7, 2));
                MaskMatrix m;
                ASSERT_TRUE(maps.maskTile(l, h, MapRect{1, 1, 5, 6}, m).ok());
                EXPECT_EQ(m, mk.block(1, 1, 5, 6));
                ASSERT_TRUE(maps.whole(MapKind::Weights, l, h, t).ok());
                EXPECT_EQ(t, w);
            }
    }
}

TEST(AttentionMaps, PooledOverviewEqualsPoolMaxOfTheWholeMapAndOfAnyRect)
{
    std::vector<AttentionResult> results = {computeResult(Layout::Row, 61, 61, 3)};
    const DenseMaps maps(results);
    const Matrix& w = results[0].heads[1].weights;
    for (auto [rows, cols] : {std::pair{8, 8}, {61, 61}, {5, 13}, {1, 1}, {100, 100}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        Matrix p;
        ASSERT_TRUE(maps.pooled(MapKind::Weights, 0, 1, MapRect{0, 0, 61, 61}, rows, cols, p).ok());
        EXPECT_EQ(p, poolMax(w, rows, cols));
    }
    // A rect of the map (a zoomed, panned view): the pooled blocks of that rect only.
    Matrix p;
    ASSERT_TRUE(maps.pooled(MapKind::Weights, 0, 1, MapRect{10, 20, 30, 40}, 7, 9, p).ok());
    EXPECT_EQ(p, poolMax(w.block(10, 20, 30, 40), 7, 9));
}

// Maps whose tiles are made up (value = f(layer, head, i, j)) and counted: the default pooled() reads bands of
// rows, never the whole of a large map at once.
class MadeUpMaps final : public AttentionMaps {
public:
    int layers() const override { return 2; }
    int heads() const override { return 2; }
    int queries() const override { return 3000; }
    int keys() const override { return 2000; }
    bool has(MapKind k) const override { return k == MapKind::Weights; }
    Status tile(MapKind kind, int layer, int head, const MapRect& r, Matrix& out) const override
    {
        ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
        largest = std::max(largest, long(r.rows) * r.cols);
        out.resize(r.rows, r.cols);
        for (int i = 0; i < r.rows; ++i)
            for (int j = 0; j < r.cols; ++j) out(i, j) = value(layer, head, r.r0 + i, r.c0 + j);
        return Status::success();
    }
    static float value(int l, int h, int i, int j) { return float((i * 7 + j * 13 + l * 5 + h) % 1000) / 1000.0f; }
    mutable long largest = 0;
};

TEST(AttentionMaps, DefaultPooledReadsBandsAndMatchesPoolMax)
{
    const MadeUpMaps maps;
    Matrix whole;
    ASSERT_TRUE(maps.whole(MapKind::Weights, 1, 0, whole).ok());
    maps.largest = 0;
    Matrix p;
    ASSERT_TRUE(maps.pooled(MapKind::Weights, 1, 0, MapRect{0, 0, 3000, 2000}, 97, 101, p).ok());
    EXPECT_EQ(p, poolMax(whole, 97, 101));
    EXPECT_LE(maps.largest, long(1) << 21) << "a band of rows at a time, not the 6-million-cell map";
}

TEST(AttentionMaps, RefusesWhatIsOutside)
{
    const MadeUpMaps maps;
    Matrix t;
    EXPECT_NE(maps.tile(MapKind::Weights, 2, 0, MapRect{0, 0, 1, 1}, t).message.find("layer 2 is outside 0..1"), std::string::npos);
    EXPECT_NE(maps.tile(MapKind::Weights, 0, -1, MapRect{0, 0, 1, 1}, t).message.find("head -1"), std::string::npos);
    EXPECT_NE(maps.tile(MapKind::Weights, 0, 0, MapRect{2999, 0, 2, 1}, t).message.find("outside the 3000×2000 map"),
              std::string::npos);
    EXPECT_NE(maps.tile(MapKind::Scores, 0, 0, MapRect{0, 0, 1, 1}, t).message.find("no scores"), std::string::npos);
    Matrix p;
    EXPECT_FALSE(maps.pooled(MapKind::Weights, 0, 0, MapRect{-1, 0, 5, 5}, 2, 2, p).ok());
}

TEST(AttentionMaps, CausalMaskTileFromTheDefault)
{
    class Causal final : public AttentionMaps {
    public:
        int layers() const override { return 1; }
        int heads() const override { return 1; }
        int queries() const override { return 6; }
        int keys() const override { return 6; }
        bool has(MapKind) const override { return true; }
        bool causal() const override { return true; }
        Status tile(MapKind, int, int, const MapRect&, Matrix&) const override { return Status::success(); }
    } maps;
    MaskMatrix m;
    ASSERT_TRUE(maps.maskTile(0, 0, MapRect{2, 1, 3, 4}, m).ok());
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) EXPECT_EQ(m(i, j), (1 + j > 2 + i) ? 1 : 0) << i << "," << j;
}

} // namespace
} // namespace attn
