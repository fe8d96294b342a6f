// The window's lifecycle (issue 21): the restore offer only after a run that did not close cleanly, Quit
// (File → Quit, Ctrl+Q) at once when nothing is unsaved, else a prompt; no autosave of a model layer (in
// test_model_grid.cpp, which has the stand-in model).
#include "headless_imgui.h"
#include "panels/panels.h"
#include "state/app_state.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

struct StateDir {
    fs::path path;
    StateDir()
    {
        path = fs::temp_directory_path() / ("attnscope_life_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~StateDir() { fs::remove_all(path); }
};

TEST(Lifecycle, RestoreOfferedOnlyAfterARunThatDidNotCloseCleanly)
{
    StateDir dir;
    app::AppState state;
    state.stateDir = dir.path.string();
    EXPECT_FALSE(app::beginRun(state)) << "first run: nothing to restore";
    app::endRun(state);  // closed cleanly
    EXPECT_FALSE(app::beginRun(state)) << "after a clean close: no restore offer";
    // This run crashes: no endRun. The next one finds its marker.
    EXPECT_TRUE(app::beginRun(state)) << "after a crash: the autosave is offered";
    app::endRun(state);
    EXPECT_FALSE(fs::exists(app::runMarkerPath(state)));
    // No state folder (screenshots, --no-autosave): no marker, never an offer.
    app::AppState none;
    none.autosave = false;
    none.stateDir = dir.path.string();
    EXPECT_FALSE(app::beginRun(none));
    EXPECT_FALSE(app::beginRun(none));
}

class Quit : public ::testing::Test {
protected:
    void SetUp() override
    {
        createHeadlessImGui();
        state.autosave = false;
        state.recordRects = true;
        ASSERT_TRUE(app::openSession(state, std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json"));
    }
    void TearDown() override { ImGui::DestroyContext(); }
    void frames(int k)
    {
        for (int i = 0; i < k; ++i) {
            state.doc.recomputeIfNeeded();
            ImGui::NewFrame();
            app::drawAllPanels(state);
            ImGui::Render();
        }
    }
    void press(int key, bool ctrl)
    {
        ImGuiIO& io = ImGui::GetIO();
        io.KeyCtrl = ctrl;
        io.KeysDown[key] = true;
        frames(1);
        io.KeysDown[key] = false;
        io.KeyCtrl = false;
        frames(1);
    }
    void click(const std::string& rect)
    {
        const app::UiRect r = state.rects.at(rect);
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
        frames(1);
        io.MouseDown[0] = true;
        frames(1);
        io.MouseDown[0] = false;
        frames(1);
    }
    app::AppState state;
};

TEST_F(Quit, CtrlQWithNothingUnsavedQuitsAtOnce)
{
    frames(2);
    press('Q', true);
    EXPECT_TRUE(state.quitConfirmed);
    EXPECT_FALSE(state.quitPrompt);
}

TEST_F(Quit, UnsavedEditsAskFirstAndCancelKeepsTheWindow)
{
    state.doc.edit([](attn::Session& s) { s.input.X(0, 0) += 1.0f; });
    frames(2);
    ASSERT_TRUE(state.doc.modified());
    press('Q', true);
    EXPECT_FALSE(state.quitConfirmed) << "unsaved edits: ask, do not quit";
    EXPECT_TRUE(state.quitPrompt);
    frames(2);
    ASSERT_TRUE(state.rects.count("quit/prompt"));
    click("quit/cancel");
    EXPECT_FALSE(state.quitPrompt);
    EXPECT_FALSE(state.quitConfirmed);
    app::requestQuit(state);  // the close button, again
    frames(2);
    click("quit/discard");
    EXPECT_TRUE(state.quitConfirmed) << "Quit without saving";
}

} // namespace
