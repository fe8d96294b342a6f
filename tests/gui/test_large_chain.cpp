// The fit layout at n = 1024 (issue 21): the chain does not fit at readable cells, so each map scrolls in a
// box of its own; the weights map must stay on screen whole at every window size, with the inputs strip or
// the inputs shown, and the heads grid's thumbnails stay thumbnails (pooled, not 1024-pixel maps).
#include "headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/app_state.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

namespace {

// Draws no cells (the CPU fallback would draw a million rectangles a map).
class NoCells : public app::HeatmapRenderer {
public:
    void drawCells(ImDrawList*, ImVec2, ImVec2, const std::string&, const app::HeatmapSource&) override {}
};

attn::Session large(int n)
{
    attn::Session s;
    s.name = "large";
    s.config.heads = 2;
    s.input.X = attn::Matrix::Random(n, 8);
    s.input.Wq = s.input.Wk = s.input.Wv = attn::Matrix::Random(8, 8);
    return s;
}

// Opens `session` in a headless window of w × h (no cells drawn), draws three frames with the rectangles recorded,
// and hands the state to `check`.
template <class Check>
void drawChain(const attn::Session& session, float w, float h, app::Collapse inputs, Check check)
{
    createHeadlessImGui();
    NoCells r;
    app::setHeatmapRenderer(&r);
    ImGui::GetIO().DisplaySize = ImVec2(w, h);
    {
        app::AppState state;
        state.autosave = false;
        state.recordRects = true;
        state.doc.setSession(session, "");
        state.chain.inputs = inputs;
        for (int i = 0; i < 3; ++i) {
            state.doc.recomputeIfNeeded();
            ImGui::NewFrame();
            app::drawAllPanels(state);
            ImGui::Render();
        }
        check(state);
    }
    app::setHeatmapRenderer(nullptr);
    ImGui::DestroyContext();
}

TEST(LargeChain, WeightsStayOnScreenAndGridThumbnailsStaySmall)
{
    for (auto [w, h] : {std::pair{1280.0f, 800.0f}, {900.0f, 600.0f}})
        for (app::Collapse inputs : {app::Collapse::Auto, app::Collapse::Shown}) {
            SCOPED_TRACE(std::to_string(int(w)) + "x" + std::to_string(int(h)) +
                         (inputs == app::Collapse::Shown ? " inputs shown" : " inputs auto"));
            drawChain(large(1024), w, h, inputs, [&](const app::AppState& state) {
                ASSERT_TRUE(state.rects.count("heatmap/weights/0"));
                const app::UiRect m = state.rects.at("heatmap/weights/0");
                // The map scrolls in its box (its cells run on past it): at least 96 px of cells on screen,
                // and the box no smaller than that.
                EXPECT_LE(m.x0 + 96, w) << "the weights' cells start on screen with room to show";
                EXPECT_GE(state.chain.plan.bigView, 96.0f);
                for (int k = 0; k < 2; ++k) {
                    const app::UiRect g = state.rects.at("headsgrid/" + std::to_string(k));
                    EXPECT_LE(g.x1 - g.x0, 97.0f) << "head " << k << ": a thumbnail";
                    EXPECT_LE(g.y1 - g.y0, 97.0f);
                }
            });
        }
}

TEST(ChainZoom, CtrlWheelZoomsOnlyTheMapUnderTheMouse)
{
    createHeadlessImGui();
    {
        app::AppState state;
        state.autosave = false;
        state.recordRects = true;
        ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed004_translation_cross.json"));
        auto frames = [&](int k) {
            for (int i = 0; i < k; ++i) {
                state.doc.recomputeIfNeeded();
                ImGui::NewFrame();
                app::drawAllPanels(state);
                ImGui::Render();
            }
        };
        frames(3);
        const app::UiRect w0 = state.rects.at("heatmap/weights/0"), s0 = state.rects.at("heatmap/scores/0");
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2(w0.x0 + 5, w0.y0 + 5);
        frames(1);
        io.KeyCtrl = true;
        io.MouseWheel = 1.0f;
        frames(1);
        io.MouseWheel = 0.0f;
        io.KeyCtrl = false;
        frames(2);
        const app::UiRect w1 = state.rects.at("heatmap/weights/0"), s1 = state.rects.at("heatmap/scores/0");
        EXPECT_NEAR((w1.x1 - w1.x0) / (w0.x1 - w0.x0), 1.25f, 0.01f) << "the map under the mouse zoomed";
        EXPECT_FLOAT_EQ(s1.x1 - s1.x0, s0.x1 - s0.x0) << "the scores did not";
        EXPECT_FLOAT_EQ(state.view.zoom, 1.0f) << "the global zoom is the slider's";
    }
    ImGui::DestroyContext();
}

} // namespace

namespace {

// Issue 36: the weights' colour scale is part of the session (its "view" object), saved and loaded.
TEST(WeightsScale, SavedAndLoadedWithTheSessionsView)
{
    app::ViewOptions v;
    EXPECT_EQ(v.weightsScale, attn::WeightsScale::Auto) << "the default: log past 128 keys";
    v.weightsScale = attn::WeightsScale::RowMax;
    const std::string j = app::viewToJson(v);
    EXPECT_NE(j.find("\"weights_scale\":\"row_max\""), std::string::npos) << j;
    EXPECT_EQ(app::viewFromJson(j).weightsScale, attn::WeightsScale::RowMax);
    EXPECT_EQ(app::viewFromJson("{\"weights_scale\":\"log\"}").weightsScale, attn::WeightsScale::Log);
    EXPECT_EQ(app::viewFromJson("{\"weights_scale\":\"sqrt\"}").weightsScale, attn::WeightsScale::Auto)
        << "an unknown scale keeps the default";
}

} // namespace

namespace {

// Issue 36, thin maps: a 1024-token session's Q, K, V (1024 × 8) and head output (1024 × 8) fitted with square
// cells were 1-3 px wide. Fitted along each side on their own, they are strips at least 48 px wide (the fit
// layout's smallest box, chain_panel's kThinSide), pooled along their rows only.
class ThinMaps : public ::testing::Test {
protected:
    void SetUp() override { createHeadlessImGui(); app::setHeatmapRenderer(&m_noCells); }
    void TearDown() override
    {
        m_state.reset();
        app::setHeatmapRenderer(nullptr);
        ImGui::DestroyContext();
    }
    void open(float w, float h, attn::Session s = oneHead(1024))
    {
        ImGui::GetIO().DisplaySize = ImVec2(w, h);
        m_state = std::make_unique<app::AppState>();
        m_state->autosave = false;
        m_state->recordRects = true;
        m_state->doc.setSession(s, "");
        frames(3);
    }
    static attn::Session oneHead(int n)
    {
        attn::Session s = large(n);
        s.config.heads = 1;
        return s;
    }
    void frames(int k)
    {
        for (int i = 0; i < k; ++i) {
            m_state->doc.recomputeIfNeeded();
            ImGui::NewFrame();
            app::drawAllPanels(*m_state);
            ImGui::Render();
        }
    }
    app::UiRect rect(const std::string& name) const
    {
        EXPECT_TRUE(m_state->rects.count(name)) << name;
        return m_state->rects.count(name) ? m_state->rects.at(name) : app::UiRect{};
    }
    // The cell the panel says is hovered ("hover/KEY/ROW/COL"), or {-1, -1}.
    std::pair<int, int> hovered(const std::string& key) const
    {
        const std::string prefix = "hover/" + key + "/";
        for (const auto& [name, r] : m_state->rects)
            if (name.rfind(prefix, 0) == 0) {
                int row = -1, col = -1;
                std::sscanf(name.c_str() + prefix.size(), "%d/%d", &row, &col);
                return {row, col};
            }
        return {-1, -1};
    }
    // The cell under screen point (x, y) of a map drawn over `r` with rows × cols cells (the naive oracle).
    static std::pair<int, int> cellUnder(const app::UiRect& r, int rows, int cols, float x, float y)
    {
        return {int((y - r.y0) / ((r.y1 - r.y0) / float(rows))), int((x - r.x0) / ((r.x1 - r.x0) / float(cols)))};
    }
    NoCells m_noCells;
    std::unique_ptr<app::AppState> m_state;
};

TEST_F(ThinMaps, OpenAsStripsAtLeast48PixelsWideWithNonSquareCells)
{
    for (auto [w, h] : {std::pair{1280.0f, 800.0f}, {900.0f, 600.0f}}) {
        SCOPED_TRACE(std::to_string(int(w)) + "x" + std::to_string(int(h)));
        open(w, h);
        for (const char* name : {"heatmap/Q", "heatmap/K", "heatmap/V", "heatmap/headout/0"}) {
            const app::UiRect r = rect(name);
            const float cw = (r.x1 - r.x0) / 8.0f, ch = (r.y1 - r.y0) / 1024.0f;
            EXPECT_GE(r.x1 - r.x0, 48.0f) << name << ": a strip, not a hairline";
            EXPECT_LE(r.x1 - r.x0, 8 * 24.0f + 0.5f) << name << ": at most 24 px a column";
            EXPECT_LT(ch, 1.0f) << name << ": whole, its rows pooled";
            EXPECT_GT(cw, 4 * ch) << name << ": its cells wider than tall";
            EXPECT_LE(r.y1, h) << name << ": on screen";
        }
        // The output's rows are the weights' rows: level with them, as tall.
        const app::UiRect wts = rect("heatmap/weights/0"), out = rect("heatmap/headout/0");
        EXPECT_NEAR(out.y0, wts.y0, 0.5f);
        EXPECT_NEAR(out.y1 - out.y0, wts.y1 - wts.y0, 0.5f);
        // The scores (1024 × 1024) keep square cells.
        const app::UiRect sc = rect("heatmap/scores/0");
        EXPECT_NEAR(sc.x1 - sc.x0, sc.y1 - sc.y0, 0.5f);
    }
}

// A head output that is not thin (200 × 64, as a decoder's head at 200 tokens) in a box narrower than the weights
// are tall is fitted apart too: its rows are the weights' rows, level with them and as tall.
TEST_F(ThinMaps, TheOutputsRowsAreLevelWithTheWeights)
{
    attn::Session s = oneHead(200);
    s.input.Wv = attn::Matrix::Random(8, 64);
    open(1280, 800, s);
    const app::UiRect wts = rect("heatmap/weights/0"), out = rect("heatmap/headout/0");
    ASSERT_GT(out.x1 - out.x0, 0.0f);
    EXPECT_NEAR(out.y0, wts.y0, 0.5f);
    EXPECT_NEAR(out.y1 - out.y0, wts.y1 - wts.y0, 0.5f);
    EXPECT_LE(out.x1 - out.x0, m_state->chain.plan.outputView + 0.5f) << "as wide as its box, no wider";
}

TEST_F(ThinMaps, HoverNamesTheCellUnderThePointer)
{
    open(1280, 800);
    for (const char* key : {"proj/Q", "headout/0"}) {
        const app::UiRect r = rect(std::string("heatmap/") + (std::string(key) == "proj/Q" ? "Q" : key));
        // Points across the strip, including near cell edges along the short (stretched) side.
        for (auto [fx, fy] : {std::pair{0.02f, 0.01f}, {0.37f, 0.5f}, {0.5f, 0.77f}, {0.99f, 0.999f}, {0.126f, 0.3f}}) {
            // Whole pixels: ImGui floors the mouse position (a pointer is at a pixel).
            const float x = std::floor(r.x0 + fx * (r.x1 - r.x0)), y = std::floor(r.y0 + fy * (r.y1 - r.y0));
            ImGui::GetIO().MousePos = ImVec2(x, y);
            frames(2);
            EXPECT_EQ(hovered(key), cellUnder(r, 1024, 8, x, y)) << key << " at " << fx << ", " << fy;
        }
    }
}

TEST_F(ThinMaps, WheelZoomsTheLongSideAboutThePointerAndDoubleClickFits)
{
    open(1280, 800);
    const app::UiRect whole = rect("heatmap/Q");
    const float cw0 = (whole.x1 - whole.x0) / 8.0f, ch0 = (whole.y1 - whole.y0) / 1024.0f;
    ImGuiIO& io = ImGui::GetIO();
    const float x = std::floor(whole.x0 + 0.6f * (whole.x1 - whole.x0)), y = std::floor(whole.y0 + 0.4f * (whole.y1 - whole.y0));
    io.MousePos = ImVec2(x, y);
    frames(2);
    const std::pair<int, int> before = hovered("proj/Q");
    ASSERT_EQ(before, cellUnder(whole, 1024, 8, x, y));
    // Two notches in: the rows 4× taller, the columns as wide as before (still wider than the rows).
    for (int notch = 0; notch < 2; ++notch) {
        io.MouseWheel = 1.0f;
        frames(1);
        io.MouseWheel = 0.0f;
        frames(2);
    }
    const app::UiRect zoomed = rect("heatmap/Q");
    EXPECT_NEAR((zoomed.y1 - zoomed.y0) / 1024.0f, 4 * ch0, 0.01f * ch0);
    EXPECT_NEAR((zoomed.x1 - zoomed.x0) / 8.0f, cw0, 0.01f);
    // About the pointer: the same cell under it (its row to within one pooled block of the whole map).
    const std::pair<int, int> after = hovered("proj/Q");
    EXPECT_EQ(after.second, before.second);
    EXPECT_NEAR(after.first, before.first, 1.0 / ch0 + 1);
    EXPECT_EQ(after, cellUnder(zoomed, 1024, 8, x, y)) << "hit-testing the zoomed strip";
    // Zooming out past whole stops at whole.
    for (int notch = 0; notch < 4; ++notch) {
        io.MouseWheel = -1.0f;
        frames(1);
        io.MouseWheel = 0.0f;
        frames(1);
    }
    app::UiRect back = rect("heatmap/Q");
    EXPECT_NEAR(back.y1 - back.y0, whole.y1 - whole.y0, 0.5f);
    EXPECT_NEAR(back.x1 - back.x0, whole.x1 - whole.x0, 0.5f);
    // In again, then a double-click goes back to the whole map.
    io.MouseWheel = 1.0f;
    frames(1);
    io.MouseWheel = 0.0f;
    frames(1);
    ASSERT_GT(rect("heatmap/Q").y1 - rect("heatmap/Q").y0, 1.5f * (whole.y1 - whole.y0));
    for (int click = 0; click < 2; ++click) {
        io.MouseDown[0] = true;
        frames(1);
        io.MouseDown[0] = false;
        frames(1);
    }
    frames(1);
    back = rect("heatmap/Q");
    EXPECT_NEAR(back.y1 - back.y0, whole.y1 - whole.y0, 0.5f) << "double-click: whole again";
    EXPECT_TRUE(m_state->chain.focus.empty()) << "a zoomed map's double-click fits it, it does not focus it";
}

} // namespace

namespace {

// A decoder layer as the model mode opens it in the chain (issue 36's known layout bug, SmolLM2 at ~150 tokens):
// Q, K and V given (9 query heads of 64, 3 K/V heads), the causal mask and W^O, so that the fit view has a heads
// grid of nine and the concat / final output column right of it. At 1280×800 the grid's nine 96 px thumbnails
// pushed that column off the window's right edge, and the head output's colour bar sat 55 px from the map, after
// its wider title. Every map's box, colour bar and the grid stay inside the window; each bar starts right after
// its map's box, level with its cells.
attn::Session decoderLayer(int n)
{
    attn::Session s;
    s.name = "decoder layer";
    s.config.mode = attn::Mode::Direct;
    s.config.heads = 9;
    s.config.kvHeads = 3;
    s.input.Q = attn::Matrix::Random(n, 9 * 64);
    s.input.K = attn::Matrix::Random(n, 3 * 64);
    s.input.V = attn::Matrix::Random(n, 3 * 64);
    s.input.Wo = attn::Matrix::Random(9 * 64, 9 * 64);
    s.input.mask.causal = true;
    return s;
}

TEST(DecoderHeadView, EveryMapAndColourBarStaysInTheWindowNextToItsMap)
{
    for (int n : {149, 24})
        for (auto [w, h] : {std::pair{1280.0f, 800.0f}, {900.0f, 600.0f}}) {
            SCOPED_TRACE(std::to_string(n) + " tokens, " + std::to_string(int(w)) + "x" + std::to_string(int(h)));
            drawChain(decoderLayer(n), w, h, app::Collapse::Auto, [&](const app::AppState& state) {
                const float spacing = ImGui::GetStyle().ItemSpacing.x;
                const float bottom = h - app::kStatusBarHeight;
                int maps = 0, bars = 0;
                for (const auto& [name, rect] : state.rects) {
                    const bool cells = name.rfind("heatmap/", 0) == 0, grid = name.rfind("headsgrid/", 0) == 0;
                    const bool bar = name.rfind("colorbar/", 0) == 0;
                    if (!cells && !grid && !bar) continue;
                    // A map's box when it has one (a fitted map's cells may run on inside it), else its cells.
                    const std::string key = cells ? name.substr(8) : "";
                    const app::UiRect box = cells && state.rects.count("mapbox/" + key) ? state.rects.at("mapbox/" + key) : rect;
                    EXPECT_LE(box.x1, w + 0.5f) << name << " runs off the right edge";
                    EXPECT_LE(box.y1, bottom + 0.5f) << name << " runs under the status bar";
                    maps += cells;
                    if (!cells || !state.rects.count("colorbar/" + key)) continue;
                    ++bars;
                    const app::UiRect cb = state.rects.at("colorbar/" + key);
                    EXPECT_GE(cb.x0, box.x1 - 0.5f) << name << ": its colour bar overlaps it";
                    EXPECT_LE(cb.x0, box.x1 + spacing + 0.5f) << name << ": its colour bar is not next to it";
                    EXPECT_NEAR(cb.y0, rect.y0, 1.0f) << name << ": its colour bar is not level with its cells";
                }
                EXPECT_TRUE(state.rects.count("heatmap/concat") && state.rects.count("heatmap/output")) << "the final column";
                EXPECT_EQ(maps, 8) << "Q, K, V, scores, weights, head output, concat, output";
                EXPECT_GE(bars, 2) << "the weights' and the head output's colour bars at least";
            });
        }
}

} // namespace
