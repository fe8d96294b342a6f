// The fit layout at n = 1024 (issue 21): the chain does not fit at readable cells, so each map scrolls in a
// box of its own; the weights map must stay on screen whole at every window size, with the inputs strip or
// the inputs shown, and the heads grid's thumbnails stay thumbnails (pooled, not 1024-pixel maps).
#include "headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/app_state.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <string>

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

TEST(LargeChain, WeightsStayOnScreenAndGridThumbnailsStaySmall)
{
    for (auto [w, h] : {std::pair{1280.0f, 800.0f}, {900.0f, 600.0f}})
        for (app::Collapse inputs : {app::Collapse::Auto, app::Collapse::Shown}) {
            SCOPED_TRACE(std::to_string(int(w)) + "x" + std::to_string(int(h)) +
                         (inputs == app::Collapse::Shown ? " inputs shown" : " inputs auto"));
            createHeadlessImGui();
            NoCells r;
            app::setHeatmapRenderer(&r);
            ImGui::GetIO().DisplaySize = ImVec2(w, h);
            {
                app::AppState state;
                state.autosave = false;
                state.recordRects = true;
                state.doc.setSession(large(1024), "");
                state.chain.inputs = inputs;
                for (int i = 0; i < 3; ++i) {
                    state.doc.recomputeIfNeeded();
                    ImGui::NewFrame();
                    app::drawAllPanels(state);
                    ImGui::Render();
                }
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
            }
            app::setHeatmapRenderer(nullptr);
            ImGui::DestroyContext();
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
