// Two AppStates in one process (two windows, the GUI bench, tests) with different head counts, drawn
// through the panels: each draws its own result's ranges, and never hands the heatmap renderer a (key,
// generation) pair the other used for different data (the renderer would then show the other's texture).
// Before the chain panel's state moved into AppState, its colour ranges were cached in file-scope globals
// keyed by the document's address and result generation, and generations restart at 1 in every Document.
#include "headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace {

// Records what the panels ask the renderer to draw.
struct RecordingRenderer : app::HeatmapRenderer {
    struct Call {
        std::uint64_t generation;
        attn::DisplayRange range;
        attn::Matrix values;
    };
    std::map<std::string, Call> last;  // per key, the last call
    void drawCells(ImDrawList*, ImVec2, ImVec2, const std::string& key, const app::HeatmapSource& src) override
    {
        last[key] = {src.generation, src.range, *src.values};
    }
};

void frames(app::AppState& s, int n)
{
    for (int i = 0; i < n; ++i) {
        s.doc.recomputeIfNeeded();
        ImGui::NewFrame();
        app::drawAllPanels(s);
        ImGui::Render();
    }
}

void open(app::AppState& s, const char* preset)
{
    s.autosave = false;
    s.presetsDir = ATTNSCOPE_PRESETS_DIR;
    ASSERT_TRUE(app::openSession(s, std::string(ATTNSCOPE_PRESETS_DIR) + "/" + preset));
}

class TwoAppStates : public ::testing::Test {
protected:
    void SetUp() override
    {
        createHeadlessImGui();
        app::setHeatmapRenderer(&renderer);
    }
    void TearDown() override
    {
        app::setHeatmapRenderer(nullptr);
        ImGui::DestroyContext();
    }
    // The scores of head 0 as drawn: the range must be the document's own (auto range mode).
    void expectOwnScores(const app::AppState& s, const char* what)
    {
        ASSERT_TRUE(renderer.last.count("scores/0")) << what;
        const RecordingRenderer::Call& c = renderer.last["scores/0"];
        const attn::DisplayRange& own = s.doc.ranges().scores.at(0);
        EXPECT_EQ(c.range.lo, own.lo) << what << ": scores/0 drawn with another document's colour range";
        EXPECT_EQ(c.range.hi, own.hi) << what << ": scores/0 drawn with another document's colour range";
        EXPECT_TRUE(c.values.isApprox(s.doc.result().heads.at(0).scores)) << what;
    }
    RecordingRenderer renderer;
};

} // namespace

TEST_F(TwoAppStates, OneAfterTheOtherAtTheSameAddress)
{
    std::optional<app::AppState> slot;
    slot.emplace();
    open(*slot, "causal_decoder_2heads.json");  // 2 heads
    frames(*slot, 3);
    ASSERT_EQ(slot->doc.result().heads.size(), 2u);
    expectOwnScores(*slot, "first state");
    const std::uint64_t firstGeneration = renderer.last["scores/0"].generation;

    slot.reset();
    slot.emplace();  // the same storage: the same Document address, its generations from 1 again
    open(*slot, "seed000_worked_example.json");  // 1 head
    frames(*slot, 3);
    ASSERT_EQ(slot->doc.result().heads.size(), 1u);
    expectOwnScores(*slot, "second state");
    EXPECT_NE(renderer.last["scores/0"].generation, firstGeneration)
        << "scores/0 of different data under the same texture generation: the renderer would keep the first's texture";
}

TEST_F(TwoAppStates, SideBySide)
{
    app::AppState a, b;
    open(a, "causal_decoder_2heads.json");  // 2 heads
    open(b, "seed004_translation_cross.json");  // 1 head
    std::uint64_t genA = 0, genB = 0;
    for (int round = 0; round < 3; ++round) {
        frames(a, 2);
        expectOwnScores(a, "state a");
        genA = renderer.last["scores/0"].generation;
        frames(b, 2);
        expectOwnScores(b, "state b");
        genB = renderer.last["scores/0"].generation;
        EXPECT_NE(genA, genB) << "two documents' scores/0 under one texture generation";
    }
}
