// Lazy attention (attnscope/lazy_attention.h, issue 18): the blockwise online-softmax outputs equal the dense core's
// (the oracle) within 1e-5, and every tile of scores and weights rebuilt from Q, K and the log-sum-exp equals the
// dense maps within 1e-6 — for random sizes (past the 64-query and 256-key blocks), causal and sliding-window
// masks, queries that start later than key 0 (an append, and one-token steps whose keys are split into chunks),
// grouped-query heads, ablated heads, and both layouts of the dense reference (read through DenseMaps).
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
        // One-token steps, whose keys are split into chunks merged after (split-key): the last query of 1501
        // positions, grouped-query; two queries behind a window (the first chunks wholly masked); unmasked.
        {1, 1500, 9, 3, 16, 0, true},
        {2, 2000, 4, 4, 8, 300, true},
        {1, 700, 2, 1, 8, 0, false},
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
        // The log-sum-exp over each query's unmasked keys, from the dense scores (what the maps are rebuilt with).
        for (int h = 0; h < c.H; ++h)
            for (int i = 0; i < c.rows; ++i) {
                const HeadResult& hr = d.heads[std::size_t(h)];
                double mx = -1e30, sum = 0;
                for (int j = 0; j < S; ++j)
                    if (!hr.masked(i, j)) mx = std::max(mx, double(hr.scores(i, j)));
                for (int j = 0; j < S; ++j)
                    if (!hr.masked(i, j)) sum += std::exp(double(hr.scores(i, j)) - mx);
                EXPECT_NEAR(lse(i, h), mx + std::log(sum), 1e-5 * std::max(1.0, std::abs(mx))) << "head " << h << " query " << i;
            }
        // Maps: only for queries that are the whole sequence (LazyMaps is self-attention over the n positions).
        if (c.pos0 != 0) continue;
        auto layer = std::make_shared<const LazyLayer>(Q, K, lse);
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
        auto layer = std::make_shared<const LazyLayer>(Q, K, lse);
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

// A LazyLayer's rows grow in a shared buffer (issue 18: appending a token copies no layer's Q, K and V): every layer
// made along the way keeps viewing exactly its own rows while later ones append past them (in place), cross the
// buffer's capacity (a copy into a larger one), truncate and append other rows (a copy: an older layer still views
// those rows), and a layer whose later views are gone appends in place again.
TEST(LazyAttention, LayersGrowInPlaceAndNeverChangeRowsAnotherLayerViews)
{
    std::mt19937 rng(5);
    const int total = 60, H = 2, D = 3, Hkv = 1;
    const Matrix Q = randomMatrix(rng, total, H * D), K = randomMatrix(rng, total, Hkv * D), lse = randomMatrix(rng, total, H);
    const Matrix V = randomMatrix(rng, total, Hkv * (D + 1));  // values grow with the keys (a decoder's layers)
    auto same = [](const LazyLayer& l, const Matrix& q, const Matrix& k, const Matrix& v, const Matrix& s, Eigen::Index n) {
        return l.Q.rows() == n && l.K.rows() == n && l.V.rows() == n && l.lse.rows() == n && Matrix(l.Q) == q.topRows(n) &&
               Matrix(l.K) == k.topRows(n) && Matrix(l.V) == v.topRows(n) && Matrix(l.lse) == s.topRows(n);
    };
    std::vector<std::shared_ptr<const LazyLayer>> views;
    views.push_back(std::make_shared<const LazyLayer>(Q.topRows(3), K.topRows(3), lse.topRows(3), 5, V.topRows(3)));
    int copies = 0;
    for (int n = 3; n < total;) {
        const int m = n % 3 == 0 ? 2 : 1;  // one and two rows at a time
        std::shared_ptr<LazyLayer> next = views.back()->appended(Q.middleRows(n, m), K.middleRows(n, m), V.middleRows(n, m));
        next->setLse(n, lse.middleRows(n, m));
        if (next->Q.data() != views.back()->Q.data()) ++copies;
        n += m;
        views.push_back(std::move(next));
    }
    // 3 + 5 spare rows, then a quarter more (at least 64) on the first copy: one copy up to 60 rows.
    EXPECT_EQ(copies, 1);
    for (const auto& v : views) EXPECT_TRUE(same(*v, Q, K, V, lse, v->Q.rows())) << "a layer of " << v->Q.rows() << " rows";

    // Truncate to 10 and append other rows: the layers of 11… rows still view the old ones, so this copies.
    const Matrix Q2 = randomMatrix(rng, 12, H * D), K2 = randomMatrix(rng, 12, Hkv * D), lse2 = randomMatrix(rng, 12, H);
    const Matrix V2 = randomMatrix(rng, 12, Hkv * (D + 1));
    Matrix q = Q, k = K, vv = V, s = lse;
    q.middleRows(10, 12) = Q2;
    k.middleRows(10, 12) = K2;
    vv.middleRows(10, 12) = V2;
    s.middleRows(10, 12) = lse2;
    std::shared_ptr<const LazyLayer> cut = views.back()->truncated(10);
    EXPECT_EQ(cut->Q.data(), views.back()->Q.data()) << "a truncation views the same rows";
    std::shared_ptr<LazyLayer> other = cut->appended(Q2, K2, V2);
    other->setLse(10, lse2);
    EXPECT_NE(other->Q.data(), cut->Q.data());
    EXPECT_TRUE(same(*other, q, k, vv, s, 22));
    for (const auto& v : views) EXPECT_TRUE(same(*v, Q, K, V, lse, v->Q.rows())) << "after the edit, " << v->Q.rows() << " rows";

    // Once every layer past 10 rows is gone, appending to the truncated one writes in place.
    const Eigen::Index kept = views[4]->Q.rows();
    views.resize(5);  // layers of 3 … kept rows
    other.reset();
    cut.reset();
    std::shared_ptr<const LazyLayer> cut2 = views.back()->truncated(kept);
    std::shared_ptr<LazyLayer> again = cut2->appended(Q2.topRows(2), K2.topRows(2), V2.topRows(2));
    again->setLse(kept, lse2.topRows(2));
    EXPECT_EQ(again->Q.data(), cut2->Q.data()) << "nothing views rows past " << kept << ": appended in place";
    q = Q;
    k = K;
    vv = V;
    s = lse;
    q.middleRows(kept, 2) = Q2.topRows(2);
    k.middleRows(kept, 2) = K2.topRows(2);
    vv.middleRows(kept, 2) = V2.topRows(2);
    s.middleRows(kept, 2) = lse2.topRows(2);
    EXPECT_TRUE(same(*again, q, k, vv, s, kept + 2));
    for (const auto& v : views) EXPECT_TRUE(same(*v, Q, K, V, lse, v->Q.rows()));
    // Two layers of the same rows appending: the first writes in place, the second copies.
    std::shared_ptr<LazyLayer> a = cut2->appended(Q.middleRows(kept, 1), K.middleRows(kept, 1), V.middleRows(kept, 1));
    EXPECT_NE(a->Q.data(), cut2->Q.data()) << "`again` views row " << kept;
    again.reset();
    a.reset();
    std::shared_ptr<LazyLayer> b = cut2->appended(Q.middleRows(kept, 1), K.middleRows(kept, 1), V.middleRows(kept, 1));
    std::shared_ptr<LazyLayer> c = cut2->appended(Q.middleRows(kept, 1), K.middleRows(kept, 1), V.middleRows(kept, 1));
    EXPECT_EQ(b->Q.data(), cut2->Q.data());
    EXPECT_NE(c->Q.data(), cut2->Q.data());
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
