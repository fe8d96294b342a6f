// Null-backend smoke test (STYLE 7a): every panel for a number of frames with an ImGui context and no GL at
// all (no platform or renderer backend; heatmaps use the CPU fallback), over every preset and the toggles.
#include "headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/paths.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace {

class NullBackend : public ::testing::Test {
protected:
    void SetUp() override
    {
        createHeadlessImGui();
        state.autosave = false;
        state.presetsDir = ATTNSCOPE_PRESETS_DIR;
        state.recordRects = true;
    }
    void TearDown() override { ImGui::DestroyContext(); }

    void frames(int n)
    {
        for (int i = 0; i < n; ++i) {
            state.doc.recomputeIfNeeded();
            ImGui::NewFrame();
            app::drawAllPanels(state);
            ImGui::Render();
            ASSERT_NE(ImGui::GetDrawData(), nullptr);
        }
    }

    app::AppState state;
};

TEST_F(NullBackend, EveryPresetEveryPanel)
{
    const auto presets = app::listJsonFiles(ATTNSCOPE_PRESETS_DIR);
    ASSERT_GE(presets.size(), 5u);
    state.showFilePanel = true;
    state.showLog = true;
    state.exportDialog.open = true;  // its preview renders each preset's figure (no texture without GL)
    for (const std::string& p : presets) {
        ASSERT_TRUE(app::openSession(state, p)) << p;
        state.exportDialog.preview = {};  // render this preset's figure at once, not after the preview's interval
        frames(5);
        EXPECT_TRUE(state.doc.hasResult()) << p;
        EXPECT_TRUE(state.doc.lastError().ok()) << p << ": " << state.doc.lastError().message;
        EXPECT_TRUE(state.rects.count("heatmap/weights/0")) << p << ": the weights are drawn";
        EXPECT_EQ(state.exportDialog.preview.renders, 1) << p;
        EXPECT_TRUE(state.exportDialog.preview.error.empty()) << p << ": " << state.exportDialog.preview.error;
        EXPECT_TRUE(state.rects.count("export/preview")) << p << ": the export preview is laid out";
    }
}

TEST_F(NullBackend, TogglesKeepComputing)
{
    ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    frames(2);
    auto check = [&](const char* what) {
        frames(3);
        EXPECT_TRUE(state.doc.lastError().ok()) << what << ": " << state.doc.lastError().message;
    };
    state.doc.edit([](attn::Session& s) { s.config.layout = attn::Layout::Column; });
    check("column layout");
    state.doc.edit([](attn::Session& s) { s.input.mask.causal = true; });
    check("causal");
    state.doc.edit([](attn::Session& s) { s.input.mask.keyPadding = {0, 0, 1, 0}; });
    check("key padding");
    state.doc.setMode(attn::Mode::Cross);
    check("cross");
    state.doc.setMode(attn::Mode::Direct);
    check("direct");
    state.doc.setScore(attn::Score::Additive);
    check("additive");
    state.doc.setMode(attn::Mode::Self);
    state.doc.setScore(attn::Score::Dot);
    app::Sizes z = state.doc.sizes();
    z.H = 3;
    ASSERT_TRUE(state.doc.setSizes(z).ok());
    check("3 heads");
    EXPECT_EQ(state.doc.sizes().Hkv, 3) << "multi-head stays multi-head when the heads change";
    ASSERT_TRUE(state.doc.setKvHeads(1).ok());
    check("3 heads sharing 1 KV head (multi-query)");
    state.doc.setPresent(app::MatrixId::Wo, true);
    state.doc.setPresent(app::MatrixId::Bq, true);
    check("W^O and b^Q");
    state.view.sharedRange = false;
    state.view.zoom = 4.0f;
    check("per-head ranges, zoomed");
    state.loadError = "test error";
    check("load error modal");
    EXPECT_EQ(state.doc.result().heads.size(), 3u);
}

TEST_F(NullBackend, HoverLinksQueryAcrossPanels)
{
    ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    frames(2);
    ASSERT_TRUE(state.rects.count("heatmap/weights/0"));
    const app::UiRect r = state.rects["heatmap/weights/0"];
    // Centre of the cell (query 2, key 1) of the 4×4 weights.
    const float cw = (r.x1 - r.x0) / 4, ch = (r.y1 - r.y0) / 4;
    ImGui::GetIO().MousePos = ImVec2(r.x0 + cw * 1.5f, r.y0 + ch * 2.5f);
    frames(2);
    EXPECT_EQ(state.hoverQuery, 2);
    EXPECT_EQ(state.hoverKey, 1);
}

// Pointer and keys fed straight into ImGui's IO, one frame per step (what a platform backend would do).
TEST_F(NullBackend, ScrubTypeAndUndoACell)
{
    ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    frames(2);
    ASSERT_TRUE(state.rects.count("cell/X/0/0"));
    const app::UiRect r = state.rects["cell/X/0/0"];
    ImGuiIO& io = ImGui::GetIO();
    const ImVec2 c((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
    // Drag 50 px to the right: +0.5 at 0.01 per pixel.
    io.MousePos = c;
    frames(1);
    io.MouseDown[0] = true;
    frames(1);
    for (int dx = 10; dx <= 50; dx += 10) {
        io.MousePos = ImVec2(c.x + static_cast<float>(dx), c.y);
        frames(1);
    }
    io.MouseDown[0] = false;
    frames(2);
    EXPECT_FLOAT_EQ(state.doc.cell(app::MatrixId::X, 0, 0), 1.5f);
    EXPECT_TRUE(state.doc.result().Q.isApprox(state.doc.session().input.X * state.doc.session().input.Wq))
        << "the heatmaps show the scrubbed value (Q = X·W^Q, computed by core)";
    // The whole drag is one undo step.
    ASSERT_TRUE(state.doc.undo());
    EXPECT_EQ(state.doc.cell(app::MatrixId::X, 0, 0), 1.0f);

    // Click (no drag) opens the text field; typing and Enter commit.
    io.MousePos = c;
    frames(1);
    io.MouseDown[0] = true;
    frames(1);
    io.MouseDown[0] = false;
    frames(3);
    ASSERT_TRUE(state.rects.count("editing")) << "a click opens the cell's text field";
    io.AddInputCharactersUTF8("-2.5");
    frames(1);
    io.KeysDown[ImGuiKey_Enter] = true;
    frames(1);
    io.KeysDown[ImGuiKey_Enter] = false;
    frames(2);
    EXPECT_EQ(state.doc.cell(app::MatrixId::X, 0, 0), -2.5f);
    EXPECT_FALSE(state.rects.count("editing"));

    // Arrow keys move the selection; typing a digit edits the new cell.
    io.MousePos = ImVec2(-1000, -1000);
    ASSERT_TRUE(state.rects.count("selected"));
    const float y0 = state.rects["selected"].y0;
    io.KeysDown[ImGuiKey_DownArrow] = true;
    frames(1);
    io.KeysDown[ImGuiKey_DownArrow] = false;
    frames(1);
    ASSERT_TRUE(state.rects.count("selected"));
    EXPECT_GT(state.rects["selected"].y0, y0) << "Down moves the selection one row down";
    io.AddInputCharactersUTF8("7");
    frames(3);  // the digit opens the field; focus lands the frame after (SetKeyboardFocusHere)
    ASSERT_TRUE(state.rects.count("editing")) << "typing a digit on a selected cell opens it";
    io.AddInputCharactersUTF8("5");  // appended, not replacing the first digit
    frames(1);
    io.KeysDown[ImGuiKey_Enter] = true;
    frames(1);
    io.KeysDown[ImGuiKey_Enter] = false;
    frames(2);
    EXPECT_EQ(state.doc.cell(app::MatrixId::X, 1, 0), 75.0f) << "X[0][0] = " << state.doc.cell(app::MatrixId::X, 0, 0);
}

TEST_F(NullBackend, PaintCustomMaskAndPadAKey)
{
    ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    frames(2);
    ImGuiIO& io = ImGui::GetIO();
    const app::UiRect w = state.rects["heatmap/weights/0"];
    const float cw = (w.x1 - w.x0) / 4, ch = (w.y1 - w.y0) / 4;
    auto clickAt = [&](ImVec2 p) {
        io.MousePos = p;
        frames(1);
        io.MouseDown[0] = true;
        frames(1);
        io.MouseDown[0] = false;
        frames(2);
    };
    // Paint (query 0, key 1) and (query 0, key 2) in one drag.
    state.paintMask = true;
    io.MousePos = ImVec2(w.x0 + cw * 1.5f, w.y0 + ch * 0.5f);
    frames(1);
    io.MouseDown[0] = true;
    frames(1);
    io.MousePos = ImVec2(w.x0 + cw * 2.5f, w.y0 + ch * 0.5f);
    frames(1);
    io.MouseDown[0] = false;
    frames(2);
    const attn::HeadResult& h = state.doc.result().heads[0];
    EXPECT_EQ(h.masked(0, 1), 1);
    EXPECT_EQ(h.masked(0, 2), 1);
    EXPECT_EQ(h.masked(0, 0), 0);
    EXPECT_EQ(h.weights(0, 1), 0.0f) << "a masked key gets weight 0 (fill -inf), from core";
    ASSERT_TRUE(state.doc.undo()) << "the painting stroke is one undo step";
    state.doc.recomputeIfNeeded();
    EXPECT_EQ(state.doc.result().heads[0].masked(0, 1), 0);

    // Click the label of key 3 above the weights: that key is padded for every query.
    state.paintMask = false;
    clickAt(ImVec2(w.x0 + cw * 3.5f, w.y0 - 4));
    ASSERT_EQ(state.doc.session().input.mask.keyPadding.size(), 4u);
    EXPECT_EQ(state.doc.session().input.mask.keyPadding[3], 1);
    for (int q = 0; q < 4; ++q) EXPECT_EQ(state.doc.result().heads[0].masked(q, 3), 1);
}

TEST_F(NullBackend, PresetsOpenUntitled)
{
    ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    EXPECT_EQ(state.doc.path(), "") << "saving must not overwrite the preset";
    EXPECT_TRUE(state.recentFiles.empty());
}

TEST_F(NullBackend, BadFileLeavesSessionUntouched)
{
    ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    frames(1);
    const attn::Matrix x = state.doc.session().input.X;
    EXPECT_FALSE(app::openSession(state, "/no/such/file.json"));
    EXPECT_NE(state.loadError.find("/no/such/file.json: cannot open"), std::string::npos) << state.loadError;
    frames(2);
    EXPECT_EQ(state.doc.session().input.X, x);
}

} // namespace

// Cell values: the values a map of this size commonly holds all get a label, close to the value, and never wider
// than the cell. At the fit layout's 34 px output cells, -0.0955 was the one blank cell of the causal preset's
// output map (its 2-digit compact form "-.096" was too wide): it now reads "-.1".
TEST_F(NullBackend, CellValuesFitTheCellAndStayCloseToTheValue)
{
    ImGui::NewFrame();  // a current font for the measurements
    const float cell = 34.0f, font = std::clamp(cell * 0.42f, 11.5f, ImGui::GetFontSize());
    for (float v : {-0.0955f, 0.91f, -0.5f, 0.033f, 1.09f, -1.7f, 0.0f, 12.5f}) {
        const std::string t = app::cellValueText(v, cell, font);
        ASSERT_FALSE(t.empty()) << v;
        EXPECT_LE(ImGui::GetFont()->CalcTextSizeA(font, 1e9f, 0.0f, t.c_str()).x, cell - 3.0f) << t;
        // One significant digit at worst: within half a unit of the value's leading digit.
        const float lead = v == 0.0f ? 1.0f : std::pow(10.0f, std::floor(std::log10(std::fabs(v))));
        EXPECT_NEAR(std::stof(t), v, 0.5f * lead + 1e-6f) << v << " shown as " << t;
    }
    EXPECT_TRUE(app::cellValueText(NAN, cell, font).empty());
    // A cell too narrow for any form of the value shows a dot, not a blank that reads as 0 (issue 21).
    EXPECT_EQ(app::cellValueText(-0.0457f, 19.0f, 11.5f), "\u00b7");
    ImGui::EndFrame();
}
