// An attention bundle's views (docs/bundle.md, issue 19), drawn with no GL over maps made up in the test (the
// bundle file format has its own tests in tests/model/test_bundle.cpp): the zoomable map's geometry, the grid's
// thumbnails made on the worker, a click opening a head's map with a breadcrumb and Esc back, the wheel zooming
// from the max-pooled overview to single cells whose values are the maps', and the sidebar and status bar.
#include "headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/app_state.h"
#include "state/bundle_state.h"
#include "state/file_drop.h"
#include "view/tiled_map.h"

#include <attnscope/colormap.h>

#include <imgui.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <numeric>
#include <cmath>
#include <thread>

namespace {

// value(l, h, i, j): distinct per layer and head, sharp on key (i·7 + h) % S so max pooling has something to keep.
class MadeUpMaps final : public attn::AttentionMaps {
public:
    MadeUpMaps(int L, int H, int n) : m_L(L), m_H(H), m_n(n) {}
    int layers() const override { return m_L; }
    int heads() const override { return m_H; }
    int queries() const override { return m_n; }
    int keys() const override { return m_n; }
    bool has(attn::MapKind k) const override { return k == attn::MapKind::Weights; }
    attn::Status tile(attn::MapKind kind, int layer, int head, const attn::MapRect& r, attn::Matrix& out) const override
    {
        ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
        out.resize(r.rows, r.cols);
        for (int i = 0; i < r.rows; ++i)
            for (int j = 0; j < r.cols; ++j) out(i, j) = value(layer, head, r.r0 + i, r.c0 + j);
        return attn::Status::success();
    }
    // While `gate` is closed (a test's), pooled() waits: the worker's first thumbnail stays in progress.
    attn::Status pooled(attn::MapKind kind, int layer, int head, const attn::MapRect& r, int outRows, int outCols,
                        attn::Matrix& out) const override
    {
        while (gate && !gate->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        {
            std::lock_guard<std::mutex> lock(callsMutex);
            calls.push_back(layer * m_H + head);
        }
        return AttentionMaps::pooled(kind, layer, head, r, outRows, outCols, out);
    }
    std::shared_ptr<std::atomic<bool>> gate;
    mutable std::mutex callsMutex;
    mutable std::vector<int> calls;  // the maps pooled, l·H + h, in order
    float value(int l, int h, int i, int j) const
    {
        // Like attention: one sharp key a row, the rest small (rows need not sum to 1 here).
        return j == (i * 7 + h) % m_n ? 0.9f : float((i + j + l) % 10) / 10000.0f;
    }

private:
    int m_L, m_H, m_n;
};

app::OpenedBundle madeUpBundle(int L, int H, int n)
{
    app::OpenedBundle b;
    b.maps = std::make_shared<MadeUpMaps>(L, H, n);
    for (int i = 0; i < n; ++i) b.tokens.push_back("t" + std::to_string(i));
    b.keyTokens = b.tokens;
    b.name = "made-up";
    b.path = "made-up.safetensors";
    return b;
}

class CountingRenderer : public app::HeatmapRenderer {
public:
    void drawCells(ImDrawList*, ImVec2, ImVec2, const std::string&, const app::HeatmapSource& src) override
    {
        maxCells = std::max<long>(maxCells, long(src.values->size()));
    }
    long maxCells = 0;
};

class BundleView : public ::testing::Test {
protected:
    void SetUp() override
    {
        createHeadlessImGui();
        app::setHeatmapRenderer(&renderer);
        state.autosave = false;
        state.recordRects = true;
    }
    void TearDown() override
    {
        app::closeBundle(state.bundle);
        app::setHeatmapRenderer(nullptr);
        ImGui::DestroyContext();
    }
    void frames(int k)
    {
        for (int i = 0; i < k; ++i) {
            state.doc.recomputeIfNeeded();
            ImGui::NewFrame();
            app::drawAllPanels(state);
            ImGui::Render();
        }
    }
    void waitForThumbs()
    {
        for (int i = 0; i < 2000 && app::bundleThumbsBusy(state.bundle); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        frames(1);
    }
    app::UiRect rect(const std::string& key) { return state.rects.at(key); }
    void click(const std::string& key)
    {
        const app::UiRect r = rect(key);
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
        frames(1);
        io.MouseDown[0] = true;
        frames(1);
        io.MouseDown[0] = false;
        frames(1);
    }
    const MadeUpMaps& maps() const { return static_cast<const MadeUpMaps&>(*state.bundle.bundle->maps); }

    CountingRenderer renderer;
    app::AppState state;
};

TEST(TiledMap, FitZoomAboutThePointerPanAndCells)
{
    const int T = 4096, S = 4096;
    const double W = 800, H = 600;
    app::MapViewport v;
    app::MapFrame f = app::planMapFrame(v, T, S, W, H);
    EXPECT_TRUE(f.pooled) << "4096 cells in 600 px: pooled";
    EXPECT_EQ(f.rect, (attn::MapRect{0, 0, T, S}));
    EXPECT_NEAR(f.scale, 600.0 / 4096, 1e-12);
    EXPECT_LE(f.outRows, 600);
    EXPECT_LE(f.outCols, 600);
    // The cell under the pointer stays under it.
    int r0 = 0, c0 = 0, r1 = 0, c1 = 0;
    ASSERT_TRUE(app::cellAt(v, 300, 200, T, S, W, H, r0, c0));
    v = app::zoomAt(v, 8.0, 300, 200, T, S, W, H);
    ASSERT_TRUE(app::cellAt(v, 300, 200, T, S, W, H, r1, c1));
    EXPECT_NEAR(r1, r0, 1);
    EXPECT_NEAR(c1, c0, 1);
    // Deep zoom: single cells, only the visible ones fetched.
    for (int i = 0; i < 10; ++i) v = app::zoomAt(v, 2.0, 300, 200, T, S, W, H);
    EXPECT_EQ(v.scale, app::kMaxMapScale);
    f = app::planMapFrame(v, T, S, W, H);
    EXPECT_FALSE(f.pooled);
    EXPECT_LE(f.rect.rows, int(H / app::kMaxMapScale) + 2);
    EXPECT_LE(f.rect.cols, int(W / app::kMaxMapScale) + 2);
    EXPECT_EQ(f.outRows, f.rect.rows);
    // Pan past the corner: clamped inside the map.
    v = app::panBy(v, 1e7, 1e7, T, S, W, H);
    EXPECT_EQ(v.r0, 0);
    EXPECT_EQ(v.c0, 0);
    v = app::panBy(v, -1e9, -1e9, T, S, W, H);
    f = app::planMapFrame(v, T, S, W, H);
    EXPECT_EQ(f.rect.r0 + f.rect.rows, T);
    EXPECT_EQ(f.rect.c0 + f.rect.cols, S);
    // Zooming out never goes past the whole map.
    v = app::zoomAt(v, 1e-6, 10, 10, T, S, W, H);
    EXPECT_NEAR(v.scale, app::fitScale(T, S, W, H), 1e-12);
    EXPECT_FALSE(app::cellAt(v, 700, 10, T, S, W, H, r1, c1)) << "right of a square map fitted by height: outside";
}

TEST(BundleThumbOrder, TheLayersShownComeFirstThenGridOrder)
{
    // 5 layers × 3 heads; the grid shows layers 3…4.
    std::vector<std::uint8_t> done(15, 0);
    EXPECT_EQ(app::nextThumbnail(done, 3, 3, 4), 9) << "the first shown layer's first head";
    done[9] = done[10] = 1;
    EXPECT_EQ(app::nextThumbnail(done, 3, 3, 4), 11);
    for (int i = 9; i < 15; ++i) done[std::size_t(i)] = 1;
    EXPECT_EQ(app::nextThumbnail(done, 3, 3, 4), 0) << "the shown ones done: grid order from the top";
    EXPECT_EQ(app::nextThumbnail(done, 3, 0, -1), 0) << "nothing shown yet: grid order";
    EXPECT_EQ(app::nextThumbnail(done, 3, 7, 9), 0) << "a range past the grid is ignored";
    for (int i = 0; i < 9; ++i) done[std::size_t(i)] = 1;
    EXPECT_EQ(app::nextThumbnail(done, 3, 0, 4), -1) << "all done";
}

TEST_F(BundleView, TheWorkerMakesTheRowsScrolledIntoViewFirst)
{
    // 40 layers of a 200-token map: the rows shown in the grid are asked for first; scrolled to the bottom, the last
    // layer's thumbnails are made before the middle ones.
    // The worker's thumbnails are held at a gate until the preference is given.
    app::OpenedBundle b = madeUpBundle(40, 2, 200);
    auto gate = std::make_shared<std::atomic<bool>>(false);
    std::const_pointer_cast<MadeUpMaps>(std::static_pointer_cast<const MadeUpMaps>(b.maps))->gate = gate;
    app::showBundle(state, std::move(b));
    app::preferThumbLayers(state.bundle, 39, 39);
    *gate = true;
    waitForThumbs();
    const std::vector<int> calls = maps().calls;
    ASSERT_EQ(calls.size(), 80u);
    // The worker may have begun L0 H0 before the preference reached it (held at the gate), or not yet picked one.
    const std::size_t first = calls[0] == 0 ? 1 : 0;
    EXPECT_EQ(calls[first], 78) << "layer 39's heads first";
    EXPECT_EQ(calls[first + 1], 79);
    std::vector<int> rest;
    for (int c : calls)
        if (c < 78) rest.push_back(c);
    std::vector<int> gridOrder(78);
    std::iota(gridOrder.begin(), gridOrder.end(), 0);
    EXPECT_EQ(rest, gridOrder) << "then the rest in grid order";
    waitForThumbs();
    EXPECT_EQ(state.bundle.thumbsDone, 80);
}

TEST_F(BundleView, GridThumbnailsComeFromTheWorkerAndAreThePooledMaps)
{
    app::showBundle(state, madeUpBundle(4, 6, 300));
    frames(2);
    waitForThumbs();
    ASSERT_EQ(state.bundle.thumbsDone, 24);
    for (int l = 0; l < 4; ++l)
        for (int h = 0; h < 6; ++h) {
            const attn::Matrix& t = state.bundle.thumbnails[std::size_t(l * 6 + h)];
            ASSERT_EQ(t.rows(), app::kBundleThumbCells);
            attn::Matrix whole;
            ASSERT_TRUE(maps().whole(attn::MapKind::Weights, l, h, whole).ok());
            EXPECT_EQ(t, attn::poolMax(whole, app::kBundleThumbCells, app::kBundleThumbCells)) << "L" << l << " H" << h;
            EXPECT_TRUE(state.rects.count("bundle/" + std::to_string(l) + "/" + std::to_string(h)));
        }
    EXPECT_TRUE(state.rects.count("control/bundle_summary")) << "the sidebar describes the bundle";
    EXPECT_TRUE(state.rects.count("status/bundle"));
}

TEST_F(BundleView, ClickOpensTheHeadWhoseWheelZoomReachesCellsAndEscGoesBack)
{
    app::showBundle(state, madeUpBundle(2, 3, 2000));
    frames(2);
    waitForThumbs();
    click("bundle/1/2");
    ASSERT_TRUE(state.bundle.headOpen);
    EXPECT_EQ(state.bundle.layer, 1);
    EXPECT_EQ(state.bundle.head, 2);
    EXPECT_TRUE(state.rects.count("bundle/breadcrumb"));
    frames(1);
    EXPECT_TRUE(state.bundle.shownFrame.pooled) << "2000 tokens in a few hundred pixels";
    EXPECT_LE(renderer.maxCells, long(1280 * 800)) << "never more values than pixels";
    // The overview keeps the sharp key of each row block (max pooling).
    EXPECT_FLOAT_EQ(state.bundle.tile.maxCoeff(), 0.9f);
    // Zoom in at the map's top-left corner until single cells show.
    const app::UiRect m = rect("bundle/map");
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = ImVec2(m.x0 + 5, m.y0 + 5);
    for (int i = 0; i < 80 && state.bundle.shownFrame.scale < app::kMaxMapScale; ++i) {
        io.MouseWheel = 1;
        frames(1);
        io.MouseWheel = 0;
        frames(1);
    }
    const app::MapFrame f = state.bundle.shownFrame;
    ASSERT_FALSE(f.pooled);
    EXPECT_EQ(f.scale, app::kMaxMapScale);
    // The cell that was under the pointer in the overview is still under it (within the overview's pixel).
    EXPECT_LT(f.rect.r0, 30);
    EXPECT_LT(f.rect.c0, 30);
    ASSERT_EQ(state.bundle.tile.rows(), f.rect.rows);
    ASSERT_EQ(state.bundle.tile.cols(), f.rect.cols);
    for (int i = 0; i < f.rect.rows; ++i)
        for (int j = 0; j < f.rect.cols; ++j)
            ASSERT_EQ(state.bundle.tile(i, j), maps().value(1, 2, f.rect.r0 + i, f.rect.c0 + j)) << i << "," << j;
    // Esc: back to the grid.
    io.KeysDown[ImGuiKey_Escape] = true;
    frames(1);
    io.KeysDown[ImGuiKey_Escape] = false;
    frames(1);
    EXPECT_FALSE(state.bundle.headOpen);
    EXPECT_TRUE(state.rects.count("bundle/0/0"));
}

TEST_F(BundleView, ALongBundleAsksForTheMapInsteadOfLinesAndAShortOneDrawsThem)
{
    app::showBundle(state, madeUpBundle(1, 2, 40));
    frames(3);
    EXPECT_GT(state.bundle.linesRow, 0) << "40 tokens: the lines view is drawn";
    EXPECT_EQ(state.bundle.linesMap.rows(), 40);
    app::showBundle(state, madeUpBundle(1, 2, 3000));
    state.bundle.linesRow = 0;
    frames(3);
    EXPECT_EQ(state.bundle.linesMap.size(), 0) << "3000 tokens: no lines, a pointer to the head's map";
}

TEST_F(BundleView, ABundleDroppedOutsideTheEditorsOpensAndABadOneIsRefused)
{
    frames(2);
    const std::string dir = ::testing::TempDir();
    const std::string bad = dir + "/cut.attn.safetensors";
    {
        std::ifstream in(ATTNSCOPE_BUNDLE_FILE, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_GT(bytes.size(), 200u);
        std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    }
    std::vector<app::DropOutcome> out = app::handleFileDrop(state, {bad}, ImVec2(5, 5));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FALSE(out[0].ok);
    EXPECT_NE(out[0].message.find("cannot open bundle"), std::string::npos) << out[0].message;
    EXPECT_FALSE(state.bundle.active()) << "the session stays";
    out = app::handleFileDrop(state, {ATTNSCOPE_BUNDLE_FILE}, ImVec2(5, 5));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].ok) << out[0].message;
    ASSERT_TRUE(state.bundle.active());
    frames(2);
    EXPECT_TRUE(state.rects.count("bundle/0/0"));
}

TEST_F(BundleView, CloseBundleReturnsToTheSession)
{
    app::showBundle(state, madeUpBundle(1, 1, 10));
    frames(2);
    click("bundle/close");
    EXPECT_FALSE(state.bundle.active());
    frames(1);
    EXPECT_FALSE(state.rects.count("control/bundle_summary"));
}

} // namespace
