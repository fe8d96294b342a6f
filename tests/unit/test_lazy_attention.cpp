// Lazy attention (attnscope/lazy_attention.h, issue 18): the blockwise online-softmax outputs equal the dense core's
// (the oracle) within 1e-5, and every tile of scores and weights rebuilt from Q, K and the log-sum-exp equals the
// dense maps within 1e-6 — for random sizes (past the 64-query and 256-key blocks), causal and sliding-window
// masks, queries that start later than key 0 (an append), grouped-query heads, ablated heads, and both layouts of
// the dense reference (read through DenseMaps).
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/attention_maps.h>
#include <attnscope/colormap.h>
#include <attnscope/lazy_attention.h>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace attn {
namespace {
using namespace attn::test;

struct Case {
    int rows, pos0, H, Hkv, D, window;
    bool causal;
};

// The dense reference: Direct mode on the same Q, K, V, the masks as a custom mask (queries at pos0 + i).
AttentionResult dense(const Matrix& Q, const Matrix& K, const Matrix& V, const Case& c, float scale, Layout layout)
{
    AttentionInput in;
    in.Q = Q;
    in.K = K;
    in.V = V;
    const int S = int(K.rows());
    in.mask.custom = MaskMatrix::Zero(c.rows, S);
    for (int i = 0; i < c.rows; ++i)
        for (int j = 0; j < S; ++j)
            in.mask.custom(i, j) = ((c.causal && j > c.pos0 + i) || (c.window > 0 && j <= c.pos0 + i - c.window)) ? 1 : 0;
    AttentionConfig cfg;
    cfg.mode = Mode::Direct;
    cfg.heads = c.H;
    cfg.kvHeads = c.Hkv;
    cfg.scale = scale;
    if (layout == Layout::Column) {
        in = transposed(in);
        cfg.layout = Layout::Column;
    }
    AttentionResult r;
    EXPECT_TRUE(compute(in, cfg, r).ok());
    return r;
}

TEST(LazyAttention, OutputsAndEveryTileEqualTheDenseCore)
{
    std::mt19937 rng(7);
    const Case cases[] = {
        {5, 0, 1, 1, 4, 0, true},          // tiny
        {130, 0, 4, 2, 16, 0, true},       // past a query block, grouped-query
        {300, 0, 3, 3, 8, 0, true},        // past a key block
        {40, 290, 6, 2, 8, 0, true},       // an append: 40 new queries after 290 kept positions
        {200, 0, 2, 1, 8, 37, true},       // a sliding window, multi-query
        {70, 100, 2, 2, 8, 50, true},      // window and append
        {90, 0, 2, 2, 8, 0, false},        // no mask at all
    };
    for (const Case& c : cases) {
        SCOPED_TRACE("rows " + std::to_string(c.rows) + " pos0 " + std::to_string(c.pos0) + " H " + std::to_string(c.H) +
                     " Hkv " + std::to_string(c.Hkv) + " window " + std::to_string(c.window));
        const int S = c.pos0 + c.rows;
        const Matrix Q = randomMatrix(rng, c.rows, c.H * c.D, 1.5f), K = randomMatrix(rng, S, c.Hkv * c.D, 1.5f),
                     V = randomMatrix(rng, S, c.Hkv * c.D);
        const float scale = 1.0f / std::sqrt(float(c.D));
        LazyAttentionSpec spec{c.H, c.Hkv, scale, c.causal, c.window};
        Matrix context, lse;
        ASSERT_TRUE(lazyAttention(Q, K, V, spec, c.pos0, context, lse).ok());
        const AttentionResult d = dense(Q, K, V, c, scale, Layout::Row);
        // Outputs: the same sums in another order (blocks of keys, rescaled), float32: 1e-5.
        EXPECT_TRUE(near(context, d.concat, 1e-5f, 1e-5f, "context"));
        // Maps: only for queries that are the whole sequence (LazyMaps is self-attention over the n positions).
        if (c.pos0 != 0) continue;
        auto layer = std::make_shared<LazyLayer>();
        layer->Q = Q;
        layer->K = K;
        layer->lse = lse;
        const LazyMaps lazy({layer}, spec);
        for (Layout layout : {Layout::Row, Layout::Column}) {
            const std::vector<AttentionResult> denseLayers = {dense(Q, K, V, c, scale, layout)};
            const DenseMaps ref(denseLayers);
            std::uniform_int_distribution<int> pick(0, c.rows - 1);
            for (int h = 0; h < c.H; ++h)
                for (int k = 0; k < 4; ++k) {
                    const int r0 = pick(rng), c0 = pick(rng);
                    const MapRect rect{r0, c0, std::min(c.rows - r0, 1 + pick(rng) % 70), std::min(c.rows - c0, 1 + pick(rng) % 90)};
                    Matrix a, b;
                    ASSERT_TRUE(lazy.tile(MapKind::Weights, 0, h, rect, a).ok());
                    ASSERT_TRUE(ref.tile(MapKind::Weights, 0, h, rect, b).ok());
                    EXPECT_TRUE(near(a, b, 1e-6f, 1e-5f, "weights")) << "weights, head " << h;
                    ASSERT_TRUE(lazy.tile(MapKind::Scores, 0, h, rect, a).ok());
                    ASSERT_TRUE(ref.tile(MapKind::Scores, 0, h, rect, b).ok());
                    EXPECT_TRUE(near(a, b, 1e-5f, 1e-5f, "scores")) << "scores, head " << h;
                    MaskMatrix ma, mb;
                    ASSERT_TRUE(lazy.maskTile(0, h, rect, ma).ok());
                    ASSERT_TRUE(ref.maskTile(0, h, rect, mb).ok());
                    EXPECT_EQ(ma, mb);
                }
            // The whole map of the last head, rows summing to 1.
            Matrix w;
            ASSERT_TRUE(lazy.whole(MapKind::Weights, 0, c.H - 1, w).ok());
            for (int i = 0; i < c.rows; ++i) EXPECT_NEAR(w.row(i).sum(), 1.0f, 1e-5f) << "row " << i;
        }
    }
}

// The overview without a weight per cell (one exp per pooled cell, masked keys skipped) against poolMax of the
// whole map: the same blocks, the same maxima within exp's rounding.
TEST(LazyAttention, PooledOverviewEqualsPoolMaxOfTheTiles)
{
    std::mt19937 rng(11);
    for (int window : {0, 29}) {
        const int n = 333, H = 2, D = 8;
        const Matrix Q = randomMatrix(rng, n, H * D, 1.5f), K = randomMatrix(rng, n, D, 1.5f), V = randomMatrix(rng, n, D);
        LazyAttentionSpec spec{H, 1, 0.35f, true, window};
        Matrix context, lse;
        ASSERT_TRUE(lazyAttention(Q, K, V, spec, 0, context, lse).ok());
        auto layer = std::make_shared<LazyLayer>();
        layer->Q = Q;
        layer->K = K;
        layer->lse = lse;
        const LazyMaps maps({layer}, spec);
        for (const MapRect rect : {MapRect{0, 0, n, n}, MapRect{40, 100, 200, 150}, MapRect{300, 0, 33, 333}}) {
            for (auto [pr, pc] : {std::pair{64, 64}, {7, 300}, {1000, 1000}, {1, 1}}) {
                SCOPED_TRACE("window " + std::to_string(window) + " rect " + std::to_string(rect.r0) + "," + std::to_string(rect.c0) +
                             " pooled " + std::to_string(pr) + "x" + std::to_string(pc));
                Matrix fast, tile;
                ASSERT_TRUE(maps.pooled(MapKind::Weights, 0, 1, rect, pr, pc, fast).ok());
                ASSERT_TRUE(maps.tile(MapKind::Weights, 0, 1, rect, tile).ok());
                EXPECT_TRUE(near(fast, poolMax(tile, pr, pc), 1e-6f, 1e-5f, "pooled"));
            }
        }
    }
}

TEST(LazyAttention, AblatedHeadsHaveNoContextButTheirMaps)
{
    std::mt19937 rng(3);
    const Matrix Q = randomMatrix(rng, 20, 3 * 8), K = randomMatrix(rng, 20, 3 * 8), V = randomMatrix(rng, 20, 3 * 8);
    LazyAttentionSpec spec{3, 3, 0.35f, true, 0};
    Matrix full, off, lse1, lse2;
    ASSERT_TRUE(lazyAttention(Q, K, V, spec, 0, full, lse1).ok());
    ASSERT_TRUE(lazyAttention(Q, K, V, spec, 0, off, lse2, {0, 1, 0}).ok());
    EXPECT_TRUE(off.middleCols(8, 8).isZero());
    EXPECT_EQ(off.leftCols(8), full.leftCols(8));
    EXPECT_EQ(off.rightCols(8), full.rightCols(8));
    EXPECT_EQ(lse1, lse2);
}

TEST(LazyAttention, RefusesShapesThatDisagree)
{
    std::mt19937 rng(1);
    Matrix context, lse;
    const Matrix Q = randomMatrix(rng, 4, 12), K = randomMatrix(rng, 4, 8), V = randomMatrix(rng, 4, 8);
    EXPECT_NE(lazyAttention(Q, K, V, {3, 2, 1, true, 0}, 0, context, lse).message.find("must divide H"), std::string::npos);
    EXPECT_NE(lazyAttention(Q, K, V, {5, 1, 1, true, 0}, 0, context, lse).message.find("not a multiple of H"), std::string::npos);
    EXPECT_NE(lazyAttention(Q, K, V, {3, 3, 1, true, 0}, 0, context, lse).message.find("expected S×12"), std::string::npos);
    EXPECT_NE(lazyAttention(Q, randomMatrix(rng, 4, 4), randomMatrix(rng, 3, 4), {3, 1, 1, true, 0}, 0, context, lse).message.find("V is 3×4"),
              std::string::npos);
}

TEST(LazyAttention, LayerBytesAreLinearInTokens)
{
    // SmolLM2 (9 heads, 3 KV heads, D 64) at 8192 tokens: Q, K, V and lse of one layer, 28.6 MB — 30 layers 860 MB,
    // where the dense weights alone would be 30 × 9 × 8192² × 4 B = 72 GB.
    EXPECT_NEAR(lazyLayerBytes(8192, 9, 3, 64), 4.0 * 8192 * (9 * 64 + 2 * 3 * 64 + 9), 1);
    EXPECT_NEAR(lazyLayerBytes(16384, 9, 3, 64), 2 * lazyLayerBytes(8192, 9, 3, 64), 1);
}

} // namespace
} // namespace attn
