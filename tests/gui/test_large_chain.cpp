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

} // namespace
