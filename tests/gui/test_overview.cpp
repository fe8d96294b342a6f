// The overview of a map larger than its view (issue 21): it shows the map in miniature (the renderer draws
// the same cells into the small frame), not an empty box.
#include "headless_imgui.h"
#include "render/heatmap_view.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

// Records where the cells of each drawCells call go (no GL).
class RecordingRenderer : public app::HeatmapRenderer {
public:
    void drawCells(ImDrawList*, ImVec2 a, ImVec2 b, const std::string& key, const app::HeatmapSource&) override
    {
        calls.push_back({a, b, key});
    }
    struct Call {
        ImVec2 a, b;
        std::string key;
    };
    std::vector<Call> calls;
};

TEST(Overview, ALargeMapsOverviewShowsTheMapInMiniature)
{
    createHeadlessImGui();
    RecordingRenderer r;
    app::setHeatmapRenderer(&r);
    const attn::Matrix m = attn::Matrix::Random(1024, 1024);
    for (int frame = 0; frame < 2; ++frame) {
        r.calls.clear();
        ImGui::NewFrame();
        ImGui::SetNextWindowPos(ImVec2(0, 0));
        ImGui::SetNextWindowSize(ImVec2(800, 600));
        ImGui::Begin("w");
        app::HeatmapSpec spec;
        spec.key = "weights/0";
        spec.src.values = &m;
        spec.src.range = {-1.0f, 1.0f, 0};
        spec.cellPx = 12;
        spec.maxWidth = spec.maxHeight = 300;  // 1024 × 12 px: it scrolls, with an overview
        app::drawHeatmap(spec);
        ImGui::End();
        ImGui::Render();
    }
    app::setHeatmapRenderer(nullptr);
    ImGui::DestroyContext();
    ASSERT_EQ(r.calls.size(), 2u) << "the map's cells, then its miniature";
    const auto& mini = r.calls[1];
    EXPECT_EQ(mini.key, "weights/0") << "the same map (its texture)";
    EXPECT_LE(mini.b.x - mini.a.x, 64.0f) << "small";
    EXPECT_GE(mini.b.x - mini.a.x, 8.0f);
    EXPECT_NEAR(mini.b.x - mini.a.x, mini.b.y - mini.a.y, 1.0f) << "a square map, a square miniature";
}

} // namespace
