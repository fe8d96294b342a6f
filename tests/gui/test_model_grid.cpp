// The model view's grid (issue 21): thumbnails fit the window at every token count and model shape (pooled
// when n exceeds their pixels, scrolling when even the smallest do not fit), neighbours never touch, and a
// click opens the clicked head. Drawn with no GL over a stand-in model and run (only the shapes matter here).
#include "headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/app_state.h"
#include "state/model_state.h"
#include "view/model_grid.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace {

// A stand-in for a loaded model of L layers × H heads and its run on n tokens: uniform weights, d_model 2·H.
void fakeModel(app::AppState& state, int L, int H, int n)
{
    auto model = std::make_shared<attn::Model>();
    model->name = "fake";
    model->config.layers = L;
    model->config.heads = H;
    model->config.hidden = 2 * H;
    model->layers.resize(static_cast<std::size_t>(L));
    attn::ModelRun run;
    for (int i = 0; i < n; ++i) run.encoding.tokens.push_back("t" + std::to_string(i));
    run.encoding.ids.assign(static_cast<std::size_t>(n), 0);
    const int M = 2 * H;
    for (int l = 0; l <= L; ++l) run.hidden.push_back(attn::Matrix::Zero(n, M));
    for (int l = 0; l < L; ++l) {
        attn::AttentionResult r;
        for (int h = 0; h < H; ++h) {
            attn::HeadResult hr;
            hr.weights = attn::Matrix::Constant(n, n, 1.0f / float(n));
            r.heads.push_back(std::move(hr));
        }
        run.attention.push_back(std::move(r));
        auto w = std::make_shared<attn::AttentionInput>();
        w->Wq = w->Wk = w->Wv = w->Wo = attn::Matrix::Identity(M, M);
        w->bq = w->bk = w->bv = w->bo = attn::Vector::Zero(M);
        state.model.wanted.weights.push_back(std::move(w));
    }
    run.embedding = attn::Vector::Zero(M);
    state.model.model = std::move(model);
    state.model.run = std::move(run);
    state.model.active = true;
    state.model.showView = true;
    state.model.textA = "fake";
}

// Draws no cells: the CPU fallback's one rectangle per cell would overflow ImGui's 16-bit vertex indices with
// 72 thumbnails of 46² cells (the window draws them as textures). Counts the cells asked for instead.
class CountingRenderer : public app::HeatmapRenderer {
public:
    void drawCells(ImDrawList*, ImVec2, ImVec2, const std::string&, const app::HeatmapSource& src) override
    {
        maxCells = std::max<long>(maxCells, long(src.values->size()));
    }
    long maxCells = 0;
};

class ModelGrid : public ::testing::Test {
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
    app::UiRect rect(int l, int h) { return state.rects.at("model/" + std::to_string(l) + "/" + std::to_string(h)); }

    CountingRenderer renderer;
    app::AppState state;
};

TEST_F(ModelGrid, ThumbnailsFitAndNeverTouchAtAnyTokenCount)
{
    struct Shape { int L, H; };
    for (auto [w, h] : {std::pair{1280.0f, 800.0f}, {900.0f, 600.0f}})
        for (Shape s : {Shape{6, 12}, Shape{30, 9}})
            for (int n : {5, 46, 62, 512}) {
                SCOPED_TRACE(std::to_string(int(w)) + "x" + std::to_string(int(h)) + " " + std::to_string(s.L) + "x" +
                             std::to_string(s.H) + " n=" + std::to_string(n));
                ImGui::GetIO().DisplaySize = ImVec2(w, h);
                state.rects.clear();
                state.model.thumbs.clear();
                state.model.wanted.weights.clear();
                fakeModel(state, s.L, s.H, n);
                renderer.maxCells = 0;
                frames(3);
                const app::ModelGridPlan& p = state.model.gridPlan;
                EXPECT_LE(renderer.maxCells, long(p.thumb * p.thumb)) << "no more cells than the thumbnail's pixels";
                EXPECT_GE(p.thumb, app::kModelThumbMin);
                EXPECT_EQ(p.pooled, n > int(p.thumb)) << "pooled exactly when n exceeds the pixels";
                EXPECT_FALSE(p.scrollX) << "the heads fit across";
                for (int l = 0; l < s.L; ++l)
                    for (int k = 0; k < s.H; ++k) {
                        const app::UiRect r = rect(l, k);
                        EXPECT_NEAR(r.x1 - r.x0, p.thumb, 1.0f) << "L" << l << " H" << k << ": a thumbnail, not n px";
                        EXPECT_NEAR(r.y1 - r.y0, p.thumb, 1.0f);
                        if (k + 1 < s.H) {
                            EXPECT_LT(r.x1 + 2, rect(l, k + 1).x0) << "L" << l << " H" << k << " touches H" << k + 1;
                        }
                        if (l + 1 < s.L) {
                            EXPECT_LT(r.y1 + 2, rect(l + 1, k).y0) << "L" << l << " H" << k << " touches L" << l + 1;
                        }
                        EXPECT_LE(r.x1, w) << "inside the window";
                    }
            }
}

TEST_F(ModelGrid, PlanScrollsOnlyWhenTheSmallestThumbnailsDoNotFit)
{
    app::ModelGridInput in;
    in.layers = 30, in.heads = 9, in.tokens = 46, in.width = 600, in.height = 300, in.rowExtra = 24;
    app::ModelGridPlan p = app::planModelGrid(in);
    EXPECT_EQ(p.thumb, app::kModelThumbMin);
    EXPECT_TRUE(p.scrollY);
    EXPECT_FALSE(p.scrollX);
    in.layers = 6, in.heads = 12, in.height = 1000;
    p = app::planModelGrid(in);
    EXPECT_FALSE(p.scrollY);
    EXPECT_LE(p.contentWidth, in.width);
    EXPECT_GT(p.thumb, app::kModelThumbMin);
}

TEST_F(ModelGrid, ClickOpensTheClickedHead)
{
    fakeModel(state, 6, 12, 8);
    frames(2);
    for (auto [l, h] : {std::pair{1, 8}, {2, 9}}) {
        state.model.showView = true;
        frames(1);
        const app::UiRect r = rect(l, h);
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
        frames(1);
        io.MouseDown[0] = true;
        frames(1);
        io.MouseDown[0] = false;
        frames(1);
        EXPECT_EQ(state.model.openLayer, l);
        EXPECT_EQ(state.view.head, h) << "L" << l << " H" << h << " opens head " << h << ", not head 0";
        EXPECT_EQ(state.model.linesLayer, l);
        EXPECT_EQ(state.model.linesHead, h);
    }
}

TEST_F(ModelGrid, SidebarAndStatusBarDescribeTheModel)
{
    fakeModel(state, 6, 12, 8);
    frames(2);
    // Issue 36: in model mode the sidebar folds to its strip (the model view has its own controls); » brings it back.
    EXPECT_FALSE(state.rects.count("control/model_summary")) << "the sidebar is folded in model mode";
    EXPECT_TRUE(state.rects.count("sidebar/expand"));
    state.chain.sidebar = app::Collapse::Shown;
    frames(2);
    EXPECT_TRUE(state.rects.count("control/model_summary")) << "the sidebar names the model";
    EXPECT_FALSE(state.rects.count("control/layout_column")) << "not the session's controls under the model view";
    EXPECT_TRUE(state.rects.count("status/model")) << "the status bar gives the model's figures";
    // The layer opened in the chain view: the session's controls (greyed) and no model status.
    app::openLayerInChain(state, 2, 9);
    state.rects.clear();
    frames(2);
    EXPECT_FALSE(state.rects.count("control/model_summary"));
    EXPECT_FALSE(state.rects.count("status/model"));
}

TEST_F(ModelGrid, BreadcrumbAndEscLeadBackToTheModelView)
{
    fakeModel(state, 6, 12, 8);
    frames(1);
    app::openLayerInChain(state, 2, 9);
    frames(2);
    ASSERT_FALSE(state.model.showView);
    ASSERT_TRUE(state.rects.count("model/breadcrumb")) << "model › layer 2 › head 9";
    ImGuiIO& io = ImGui::GetIO();
    io.KeysDown[ImGuiKey_Escape] = true;
    frames(1);
    io.KeysDown[ImGuiKey_Escape] = false;
    frames(1);
    EXPECT_TRUE(state.model.showView) << "Esc goes back to the model view";
    // Back button.
    app::openLayerInChain(state, 1, 3);
    frames(2);
    ASSERT_FALSE(state.model.showView);
    const app::UiRect r = state.rects.at("model/back");
    io.MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
    frames(1);
    io.MouseDown[0] = true;
    frames(1);
    io.MouseDown[0] = false;
    frames(1);
    EXPECT_TRUE(state.model.showView) << "Back goes back to the model view";
}

TEST_F(ModelGrid, AModelLayerIsNotAutosaved)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("attnscope_modelgrid_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    state.stateDir = dir.string();
    state.autosave = true;
    fakeModel(state, 2, 4, 6);
    frames(1);
    app::openLayerInChain(state, 1, 2);
    state.doc.edit([](attn::Session& s) { s.input.X(0, 0) += 1.0f; });
    frames(1);
    EXPECT_FALSE(app::autosaveIfNeeded(state, 100.0, true)) << "a model layer: no autosave";
    EXPECT_FALSE(fs::exists(app::autosavePath(state)));
    fs::remove_all(dir);
}

TEST_F(ModelGrid, LinesViewRowsNeverShorterThanALabel)
{
    for (int n : {26, 46, 120}) {
        fakeModel(state, 2, 4, n);
        frames(2);
        EXPECT_GE(state.model.linesRow, ImGui::GetFontSize()) << n << " tokens: labels must not overlap";
        const app::UiRect r = state.rects.at("model/lines");
        EXPECT_GE(r.y1 - r.y0, float(n) * ImGui::GetFontSize()) << "the view scrolls instead";
    }
}

TEST_F(ModelGrid, SaveSaysWhereAndAsksBeforeOverwriting)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("attnscope_modelsave_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path file = dir / "grid.svg";
    fakeModel(state, 2, 4, 5);
    state.model.exportPath = file.string();
    frames(2);
    auto click = [&](const std::string& rect) {
        const app::UiRect r = state.rects.at(rect);
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
        frames(1);
        io.MouseDown[0] = true;
        frames(1);
        io.MouseDown[0] = false;
        frames(1);
    };
    click("model/save/0");
    ASSERT_TRUE(fs::exists(file)) << "a new file is written at once";
    EXPECT_NE(state.model.exportStatus.find(file.string()), std::string::npos) << state.model.exportStatus;
    EXPECT_TRUE(state.rects.count("model/save_status")) << "the window says where it went";
    { std::ofstream(file) << "mine"; }
    click("model/save/0");
    EXPECT_TRUE(state.rects.count("model/overwrite_prompt")) << "an existing file: ask";
    EXPECT_EQ(fs::file_size(file), 4u) << "not overwritten before the answer";
    click("model/overwrite");
    frames(1);  // the button fired on the last frame's release: the next one no longer asks
    EXPECT_GT(fs::file_size(file), 4u) << "overwritten after Overwrite";
    EXPECT_FALSE(state.rects.count("model/overwrite_prompt"));
    fs::remove_all(dir);
}

TEST_F(ModelGrid, TypingRerunsTheModelOnceThePausesComes)
{
    fakeModel(state, 2, 4, 5);
    frames(2);
    const app::UiRect r = state.rects.at("model/textA");
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = ImVec2(r.x1 - 4, (r.y0 + r.y1) / 2);
    frames(1);
    io.MouseDown[0] = true;
    frames(1);
    io.MouseDown[0] = false;
    frames(1);
    const long before = state.model.textReruns;
    for (char c : std::string(" cat")) {  // a typing burst: a key every other frame
        io.AddInputCharacter(static_cast<unsigned>(c));
        frames(2);
    }
    EXPECT_EQ(state.model.textA, "fake cat");
    EXPECT_EQ(state.model.textReruns, before) << "no run while typing";
    frames(int(app::kTextDebounceSeconds * 60) + 2);  // the pause (60 frames a second)
    EXPECT_EQ(state.model.textReruns, before + 1) << "one run once the typing pauses, while the field keeps focus";
    frames(30);
    EXPECT_EQ(state.model.textReruns, before + 1) << "and no more";
}

} // namespace
