// The GL heatmap renderer's tiles (needs a display: runs under Xvfb, label gui): a map larger than one tile
// is drawn exactly (every cell's colour read back from the framebuffer), only tiles on screen are filled,
// a changed row and column re-upload only the rows of the tiles they touch, and tiles long off screen are freed.
#include "panels/style.h"
#include "platform/platform.h"
#include "render/heatmap_gl.h"
#include "screenshot.h"

#include <attnscope/colormap.h>

#include <gtest/gtest.h>
#include <imgui.h>

#include <cstdio>
#include <cstdlib>
#include <random>

namespace {

constexpr int kTile = 128;   // tiles of 128² entries: a 300×300 map has 3×3 of them
constexpr int kN = 300;
constexpr float kCellPx = 2;  // 600×600 pixels: the whole map fits the 1280×800 window

// One window for the whole suite: Xvfb resets when its last client leaves, and a window opened during the
// reset fails.
class HeatmapTiles : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        app::PlatformOptions po;
        po.vsync = false;
        s_platform = new app::Platform;
        const attn::Status st = s_platform->init(po);
        s_ready = st.ok();
        if (!st.ok()) std::fprintf(stderr, "%s\n", st.message.c_str());
        else app::setupImGuiStyle();
    }
    static void TearDownTestSuite()
    {
        if (s_ready) s_platform->shutdown();
        delete s_platform;
    }
    void SetUp() override
    {
        ASSERT_TRUE(s_ready) << "no window (see stderr)";
        ASSERT_TRUE(renderer.init().ok());
        renderer.setTileSize(kTile);
    }
    void TearDown() override
    {
        if (s_ready) renderer.shutdown();
    }
    // One frame drawing `m` with its top-left cell at `at` (window pixels), cells `cell` pixels wide and tall;
    // returns the picture.
    app::Image draw(const attn::Matrix& m, std::uint64_t generation, ImVec2 at, ImVec2 cell = ImVec2(kCellPx, kCellPx),
                    bool capture = true)
    {
        platform.pollEvents(0.0);
        platform.beginFrame(true);
        const ImGuiViewport* vp = ImGui::GetMainViewport();
        ImGui::SetNextWindowPos(vp->Pos);
        ImGui::SetNextWindowSize(vp->Size);
        ImGui::Begin("tiles", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoBackground);
        app::HeatmapSource src;
        src.values = &m;
        src.range = {0.0f, 1.0f, 0};
        src.colormap = attn::Colormap::Viridis;
        src.generation = generation;
        const ImVec2 b(at.x + cell.x * static_cast<float>(m.cols()), at.y + cell.y * static_cast<float>(m.rows()));
        renderer.drawCells(ImGui::GetWindowDrawList(), at, b, "map", src);
        ImGui::End();
        platform.renderFrame();
        int w = 0, h = 0;
        platform.framebufferSize(w, h);
        app::Image img = capture ? app::captureFramebuffer(w, h) : app::Image{};
        platform.swapBuffers();
        renderer.endFrame();
        return img;
    }
    // Largest channel difference between each on-screen cell's centre pixel and the colormap's colour of its
    // value (the shader picks LUT entry round(t·255); float rounding on either side may pick the neighbour,
    // and neighbouring viridis entries differ by at most 4 levels).
    int maxCellError(const app::Image& img, const attn::Matrix& m, ImVec2 at, ImVec2 cell = ImVec2(kCellPx, kCellPx))
    {
        const auto lut = attn::colormapLut(attn::Colormap::Viridis);
        int worst = 0;
        for (int r = 0; r < m.rows(); ++r)
            for (int c = 0; c < m.cols(); ++c) {
                const int x = static_cast<int>(at.x + cell.x * (static_cast<float>(c) + 0.5f));
                const int y = static_cast<int>(at.y + cell.y * (static_cast<float>(r) + 0.5f));
                // The window's clip rectangle leaves out its padding (8 px here): pixels there are background.
                if (x < 16 || y < 16 || x >= img.width || y >= img.height) continue;
                const attn::Rgb8 want = lut[static_cast<std::size_t>(std::lround(std::clamp(m(r, c), 0.0f, 1.0f) * 255.0f))];
                const std::uint8_t* p = img.rgb.data() + (static_cast<std::size_t>(y) * static_cast<std::size_t>(img.width) + static_cast<std::size_t>(x)) * 3;
                worst = std::max({worst, std::abs(p[0] - want.r), std::abs(p[1] - want.g), std::abs(p[2] - want.b)});
            }
        return worst;
    }

    static inline app::Platform* s_platform = nullptr;
    static inline bool s_ready = false;
    app::Platform& platform = *s_platform;
    app::GlHeatmapRenderer renderer;
};

attn::Matrix randomMatrix(int rows, int cols, unsigned seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    attn::Matrix m(rows, cols);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) m(r, c) = u(rng);
    return m;
}

TEST_F(HeatmapTiles, DrawsEveryCellAndUploadsOnlyChangedRows)
{
    ASSERT_EQ(renderer.tileSize(), kTile);
    attn::Matrix m = randomMatrix(kN, kN, 1);
    const ImVec2 at(20, 20);
    app::Image img = draw(m, 1, at);
    EXPECT_LE(maxCellError(img, m, at), 4) << "a tile drawn in the wrong place or with the wrong data";
    const app::GlHeatmapRenderer::FillStats first = renderer.fillStats();
    EXPECT_EQ(first.hostUploads, 9) << "3×3 tiles";
    EXPECT_EQ(first.rowsUploaded, 3 * kN) << "each of the 3 tile columns sends every row once";

    // One token edited: row 5 and column 200 change (tile column 1 holds columns 128…255).
    for (int c = 0; c < kN; ++c) m(5, c) = 1.0f - m(5, c);
    for (int r = 0; r < kN; ++r) m(r, 200) = 1.0f - m(r, 200);
    img = draw(m, 2, at);
    EXPECT_LE(maxCellError(img, m, at), 4) << "the changed rows landed in the wrong place";
    const app::GlHeatmapRenderer::FillStats second = renderer.fillStats();
    // Tile (0,0) and (0,2): row 5 only; the 3 tiles of column 1: all their rows; tiles (1,0) … (2,2) off
    // column 1: nothing.
    EXPECT_EQ(second.rowsUploaded - first.rowsUploaded, 1 + 1 + kN);
    EXPECT_EQ(second.hostUploads - first.hostUploads, 5);
    // Nothing changed: nothing is sent.
    draw(m, 2, at);
    EXPECT_EQ(renderer.fillStats().rowsUploaded, second.rowsUploaded);
}

TEST_F(HeatmapTiles, TilesOffScreenAreNotFilled)
{
    const attn::Matrix m = randomMatrix(kN, kN, 2);
    // Shifted up and left so that only the bottom-right 100×100 cells (tile (2,2), 44×44, and parts of
    // (1,1), (1,2), (2,1)) are on screen.
    const ImVec2 at(-kCellPx * 200, -kCellPx * 200);
    const app::Image img = draw(m, 1, at);
    EXPECT_EQ(renderer.fillStats().hostUploads, 4);
    EXPECT_LE(maxCellError(img, m, at), 4);
}

// A large map panned across keeps only what is on screen: tiles off screen for about 2 s (120 frames) are freed,
// those still drawn are kept as they are, and a freed tile scrolled back is filled again and drawn right.
TEST_F(HeatmapTiles, TilesLongOffScreenAreFreedAndFilledAgainWhenBack)
{
    const attn::Matrix m = randomMatrix(kN, kN, 4);
    const ImVec2 whole(20, 20), corner(-kCellPx * 200, -kCellPx * 200);  // corner: tiles (1,1), (1,2), (2,1), (2,2)
    draw(m, 1, whole, ImVec2(kCellPx, kCellPx), false);
    const app::GlHeatmapRenderer::FillStats first = renderer.fillStats();
    ASSERT_EQ(first.hostUploads, 9);
    for (int i = 0; i < 125; ++i) draw(m, 1, corner, ImVec2(kCellPx, kCellPx), false);
    const app::GlHeatmapRenderer::FillStats panned = renderer.fillStats();
    EXPECT_EQ(panned.tilesEvicted, 5) << "the 5 tiles off screen for 125 frames";
    EXPECT_EQ(panned.hostUploads, first.hostUploads) << "the 4 tiles on screen were kept, not filled again";
    const app::Image img = draw(m, 1, whole);
    EXPECT_EQ(renderer.fillStats().hostUploads - panned.hostUploads, 5) << "the freed tiles, filled again";
    EXPECT_LE(maxCellError(img, m, whole), 4);
}

// Issue 36: a thin map (n × 8: Q, K, V, a head's output) is drawn with cells wider than tall, here 24 × 2 px
// (3 tiles down, one across): every cell lands where hit-testing puts it (heatmap_view: column x / 24, row y / 2).
TEST_F(HeatmapTiles, AThinMapsNonSquareCellsEachLandInPlace)
{
    const attn::Matrix m = randomMatrix(kN, 8, 3);
    const ImVec2 at(40, 20), cell(24, 2);
    const app::Image img = draw(m, 1, at, cell);
    EXPECT_EQ(renderer.fillStats().hostUploads, 3) << "3×1 tiles";
    EXPECT_LE(maxCellError(img, m, at, cell), 4);
}

} // namespace
