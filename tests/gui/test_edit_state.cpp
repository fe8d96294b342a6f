// Headless tests of the editing plumbing (issue 11 "Files as on any desktop" and "Selection you can see",
// issue 12 "State in AppState"): path completion, the routing of dropped files, the selection cleared by a
// load, and the desktop chooser's answer when no portal can be reached.
#include "panels/matrix_editor.h"
#include "panels/panels.h"
#include "panels/path_field.h"
#include "platform/portal.h"
#include "state/file_drop.h"
#include "headless_imgui.h"

#include "io/array_io.h"

#include <attnscope/preset_io.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using app::MatrixId;

const std::string kPresets = ATTNSCOPE_PRESETS_DIR;
const std::string kSeed000 = kPresets + "/seed000_worked_example.json";

// A fresh folder under the system's temporary folder, removed at the end of the test.
struct TempDir {
    fs::path path;
    TempDir()
    {
        path = fs::temp_directory_path() / ("attnscope_edit_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    std::string str() const { return path.string(); }
};

void touch(const fs::path& p) { std::ofstream(p) << "x"; }

// ---- path completion -----------------------------------------------------------------------------------

TEST(PathCompletion, FoldersAndFilesOfTheTypedFolderStartingWithTheTail)
{
    TempDir d;
    fs::create_directories(d.path / "sessions");
    fs::create_directories(d.path / "scratch");
    touch(d.path / "seed.json");
    touch(d.path / "other.json");
    touch(d.path / ".secret.json");
    const std::string base = d.str() + "/";
    const auto c = app::pathCompletions(base + "s", {});
    // Sorted; folders end in '/'; "other.json" does not start with "s"; hidden files are not offered.
    EXPECT_EQ(c, (std::vector<std::string>{base + "scratch/", base + "seed.json", base + "sessions/"}));
    EXPECT_EQ(app::pathCompletions(base + "se", {}), (std::vector<std::string>{base + "seed.json", base + "sessions/"}));
    // A tail starting with '.' offers the hidden entries.
    EXPECT_EQ(app::pathCompletions(base + ".s", {}), (std::vector<std::string>{base + ".secret.json"}));
    // Inside a folder: everything in it.
    touch(d.path / "sessions" / "a.json");
    EXPECT_EQ(app::pathCompletions(base + "sessions/", {}), (std::vector<std::string>{base + "sessions/a.json"}));
}

TEST(PathCompletion, RecentFilesThatMatchComeFirst)
{
    TempDir d;
    touch(d.path / "seed.json");
    const std::string base = d.str() + "/";
    const std::vector<std::string> recent = {"/elsewhere/Seed_old.json", "/elsewhere/unrelated.json", base + "seed.json"};
    const auto c = app::pathCompletions(base + "se", recent);
    // The recent file in the folder is listed once, in the recent files' place.
    EXPECT_EQ(c, (std::vector<std::string>{base + "seed.json"}));
    // Case-insensitive substring match over the recent files.
    EXPECT_EQ(app::pathCompletions("seed", recent)[0], "/elsewhere/Seed_old.json");
    // Nothing typed: the recent files, newest first.
    EXPECT_EQ(app::pathCompletions("", recent), recent);
    // At most `max`.
    EXPECT_EQ(app::pathCompletions("", recent, 2).size(), 2u);
}

TEST(PathCompletion, MissingOrUnreadableFolderGivesNoEntries)
{
    TempDir d;
    EXPECT_TRUE(app::pathCompletions(d.str() + "/no/such/folder/x", {}).empty());
}

TEST(PathCompletion, HomeIsExpandedButTheChoiceKeepsTheTilde)
{
    TempDir d;
    touch(d.path / "model.json");
    const char* old = std::getenv("HOME");
    const std::string saved = old ? old : "";
    ::setenv("HOME", d.str().c_str(), 1);
    const auto c = app::pathCompletions("~/mo", {});
    if (saved.empty()) ::unsetenv("HOME");
    else ::setenv("HOME", saved.c_str(), 1);
    EXPECT_EQ(c, (std::vector<std::string>{"~/model.json"}));
}

TEST(PathCompletion, CommonPrefixIsWhatTabCompletes)
{
    EXPECT_EQ(app::commonPrefix({"/a/sessions/", "/a/seed.json"}), "/a/se");
    EXPECT_EQ(app::commonPrefix({"/a/seed.json"}), "/a/seed.json");
    EXPECT_EQ(app::commonPrefix({}), "");
}

TEST(PathField, EachFieldKeepsItsOwnChoices)
{
    TempDir d;
    touch(d.path / "a.json");
    touch(d.path / "b.npz");
    createHeadlessImGui();
    app::AppState state;
    state.autosave = false;
    state.recordRects = true;
    std::string one = d.str() + "/a", two = d.str() + "/b";
    for (int frame = 0; frame < 2; ++frame) {
        ImGui::NewFrame();
        ImGui::Begin("files");
        app::drawPathField(state, "test/one", one, "", -1);
        app::drawPathField(state, "test/two", two, "", -1);
        ImGui::End();
        ImGui::Render();
    }
    EXPECT_EQ(state.edit.pathFields["test/one"].choices, (std::vector<std::string>{d.str() + "/a.json"}));
    EXPECT_EQ(state.edit.pathFields["test/two"].choices, (std::vector<std::string>{d.str() + "/b.npz"}));
    EXPECT_TRUE(state.rects.count("test/one") && state.rects.count("test/two"));
    ImGui::DestroyContext();
}

// ---- file drops ------------------------------------------------------------------------------------------

TEST(FileDrop, KindByExtension)
{
    EXPECT_EQ(app::dropKindOf("/x/s.json"), app::DropKind::Session);
    EXPECT_EQ(app::dropKindOf("/x/S.JSON"), app::DropKind::Session);
    EXPECT_EQ(app::dropKindOf("w.npy"), app::DropKind::Array);
    EXPECT_EQ(app::dropKindOf("w.npz"), app::DropKind::Array);
    EXPECT_EQ(app::dropKindOf("m.SafeTensors"), app::DropKind::Array);
    EXPECT_EQ(app::dropKindOf("notes.txt"), app::DropKind::Unknown);
    EXPECT_EQ(app::dropKindOf("Makefile"), app::DropKind::Unknown);
}

TEST(FileDrop, EditorUnderThePointer)
{
    const std::vector<app::EditorRect> eds = {{MatrixId::X, {0, 0}, {100, 50}}, {MatrixId::Wq, {0, 60}, {100, 120}}};
    EXPECT_EQ(app::editorAt(eds, {10, 10}), MatrixId::X);
    EXPECT_EQ(app::editorAt(eds, {99, 119}), MatrixId::Wq);
    EXPECT_FALSE(app::editorAt(eds, {50, 55}).has_value());  // between them
    EXPECT_FALSE(app::editorAt(eds, {150, 10}).has_value());
}

// A document with seed 000 and the editors drawn in a headless frame, as the window has them when a drop
// arrives between frames.
struct DropFixture : ::testing::Test {
    app::AppState state;
    void SetUp() override
    {
        createHeadlessImGui();
        state.autosave = false;
        ASSERT_TRUE(app::openSession(state, kSeed000));
        ImGui::NewFrame();
        ImGui::Begin("editors");
        app::drawMatrixEditor(state, MatrixId::X, ImVec2(600, 400));
        app::drawMatrixEditor(state, MatrixId::Wv, ImVec2(600, 400));
        ImGui::End();
        ImGui::Render();
    }
    void TearDown() override { ImGui::DestroyContext(); }
    ImVec2 inside(MatrixId id) const
    {
        for (const app::EditorRect& e : state.edit.editors)
            if (e.id == id) return ImVec2((e.min.x + e.max.x) / 2, (e.min.y + e.max.y) / 2);
        ADD_FAILURE() << "no editor for " << app::matrixName(id);
        return {};
    }
    std::string writeNpy(const std::string& path, const attn::Matrix& m)
    {
        app::io::NamedArray a;
        a.matrix = &m;
        EXPECT_TRUE(app::io::writeNpy(path, a).ok());
        return path;
    }
};

TEST_F(DropFixture, ArrayOntoAnEditorImportsIntoThatMatrixAsOneUndoStep)
{
    TempDir d;
    const int r = state.doc.rows(MatrixId::Wv), c = state.doc.cols(MatrixId::Wv);
    const float before = state.doc.cell(MatrixId::Wv, 0, 0);
    const attn::Matrix m = attn::Matrix::Constant(r, c, 0.25f);
    const auto out = app::handleFileDrop(state, {writeNpy(d.str() + "/wv.npy", m)}, inside(MatrixId::Wv));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].ok) << out[0].message;
    EXPECT_EQ(state.doc.cell(MatrixId::Wv, r - 1, c - 1), 0.25f);
    EXPECT_NE(state.doc.cell(MatrixId::X, 0, 0), 0.25f);  // X, the other editor, is untouched
    ASSERT_TRUE(state.doc.undo());
    EXPECT_EQ(state.doc.cell(MatrixId::Wv, 0, 0), before);
}

TEST_F(DropFixture, WrongShapeNamesExpectedAndActual)
{
    TempDir d;
    const int r = state.doc.rows(MatrixId::Wv), c = state.doc.cols(MatrixId::Wv);
    const auto rev = state.doc.revision();
    const auto out = app::handleFileDrop(state, {writeNpy(d.str() + "/w.npy", attn::Matrix::Zero(r + 1, c))}, inside(MatrixId::Wv));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FALSE(out[0].ok);
    const std::string want = "expected " + std::to_string(r) + "×" + std::to_string(c) + " (W^V as the session holds it), got " +
                             std::to_string(r + 1) + "×" + std::to_string(c) + " (w.npy)";
    EXPECT_NE(out[0].message.find(want), std::string::npos) << out[0].message;
    EXPECT_EQ(state.doc.revision(), rev);
}

TEST_F(DropFixture, NpzPicksTheArrayNamedAsTheSlotOrSaysWhichItHas)
{
    TempDir d;
    const attn::Matrix x = attn::Matrix::Constant(state.doc.rows(MatrixId::X), state.doc.cols(MatrixId::X), 2.0f);
    const attn::Matrix other = attn::Matrix::Zero(2, 2);
    app::io::NamedArray a, b;
    a.name = "X";
    a.matrix = &x;
    b.name = "junk";
    b.matrix = &other;
    ASSERT_TRUE(app::io::writeNpz(d.str() + "/two.npz", {b, a}).ok());
    auto out = app::handleFileDrop(state, {d.str() + "/two.npz"}, inside(MatrixId::X));
    EXPECT_TRUE(out[0].ok) << out[0].message;
    EXPECT_EQ(state.doc.cell(MatrixId::X, 0, 0), 2.0f);
    // Dropped onto W^V: no array is named Wv, and there are two: the message lists them.
    out = app::handleFileDrop(state, {d.str() + "/two.npz"}, inside(MatrixId::Wv));
    EXPECT_FALSE(out[0].ok);
    EXPECT_NE(out[0].message.find("holds 2 arrays (junk, X) and none is named Wv"), std::string::npos) << out[0].message;
}

TEST_F(DropFixture, ArrayBesideTheEditorsAndUnknownTypesGetAMessage)
{
    TempDir d;
    const auto rev = state.doc.revision();
    const std::string npy = writeNpy(d.str() + "/w.npy", attn::Matrix::Zero(2, 2));
    touch(d.path / "notes.txt");
    const auto out = app::handleFileDrop(state, {npy, d.str() + "/notes.txt"}, ImVec2(-50, -50));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_FALSE(out[0].ok);
    EXPECT_NE(out[0].message.find("outside the matrix editors"), std::string::npos) << out[0].message;
    EXPECT_FALSE(out[1].ok);
    EXPECT_NE(out[1].message.find("expected a session (.json)"), std::string::npos) << out[1].message;
    EXPECT_NE(out[1].message.find("got '.txt'"), std::string::npos) << out[1].message;
    EXPECT_EQ(state.doc.revision(), rev);
}

TEST_F(DropFixture, SessionOpensWhereverItLandsAndClearsTheSelection)
{
    state.edit.focus.hasMatrix = true;
    state.edit.focus.id = MatrixId::Wq;
    const std::string causal = kPresets + "/causal_decoder_2heads.json";
    const auto out = app::handleFileDrop(state, {causal}, inside(MatrixId::X));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].ok) << out[0].message;
    EXPECT_EQ(state.doc.session().config.heads, 2);
    EXPECT_FALSE(state.edit.focus.hasMatrix);
    // A session that cannot be read: the message, the document unchanged.
    const auto bad = app::handleFileDrop(state, {kPresets + "/no_such_session.json"}, inside(MatrixId::X));
    EXPECT_FALSE(bad[0].ok);
    EXPECT_NE(bad[0].message.find("cannot open session"), std::string::npos) << bad[0].message;
    EXPECT_EQ(state.doc.session().config.heads, 2);
}

TEST(FileDrop, TestHookRequestIsReadOnceAndRemoved)
{
    TempDir d;
    std::ofstream(d.path / "drop.request") << R"({"paths": ["/a/s.json", "/b/w.npy"], "x": 12.5, "y": 40})";
    auto r = app::takeDropRequest(d.str());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->paths, (std::vector<std::string>{"/a/s.json", "/b/w.npy"}));
    EXPECT_EQ(r->pos.x, 12.5f);
    EXPECT_EQ(r->pos.y, 40.0f);
    EXPECT_FALSE(fs::exists(d.path / "drop.request"));
    EXPECT_FALSE(app::takeDropRequest(d.str()).has_value());
    EXPECT_FALSE(app::takeDropRequest("").has_value());
}

// ---- state in AppState -----------------------------------------------------------------------------------

TEST(EditState, TwoAppStatesKeepTheirOwnSelection)
{
    createHeadlessImGui();
    app::AppState a, b;
    a.autosave = b.autosave = false;
    ASSERT_TRUE(app::openSession(a, kSeed000));
    ASSERT_TRUE(app::openSession(b, kSeed000));
    a.edit.focus.hasMatrix = true;
    a.edit.focus.id = MatrixId::Wk;
    a.edit.focus.error = "W^K[0][0]: 'x' is not a number";
    for (app::AppState* s : {&a, &b}) {
        ImGui::NewFrame();
        ImGui::Begin("editors");
        app::drawMatrixEditor(*s, MatrixId::Wk, ImVec2(600, 400));
        ImGui::End();
        ImGui::Render();
    }
    EXPECT_TRUE(a.edit.focus.hasMatrix);
    EXPECT_FALSE(b.edit.focus.hasMatrix);
    EXPECT_TRUE(b.edit.focus.error.empty());
    ImGui::DestroyContext();
}

TEST(EditState, ACellBeyondAShrunkMatrixIsDropped)
{
    createHeadlessImGui();
    app::AppState s;
    s.autosave = false;
    ASSERT_TRUE(app::openSession(s, kSeed000));
    const int rows = s.doc.rows(MatrixId::Wq);
    // Being typed into the last row of W^Q when d_model shrinks by one (as a size change or an undo does).
    s.edit.focus = {};
    s.edit.focus.hasMatrix = true;
    s.edit.focus.id = MatrixId::Wq;
    s.edit.focus.r = rows - 1;
    s.edit.focus.c = 0;
    s.edit.focus.editing = true;
    s.edit.focus.text = "2";
    app::Sizes z = s.doc.sizes();
    z.M -= 1;
    ASSERT_TRUE(s.doc.setSizes(z).ok());
    ASSERT_EQ(s.doc.rows(MatrixId::Wq), rows - 1);
    ImGui::NewFrame();
    ImGui::Begin("editors");
    app::drawMatrixEditor(s, MatrixId::Wq, ImVec2(600, 400));
    ImGui::End();
    ImGui::Render();
    EXPECT_TRUE(s.edit.focus.hasMatrix);
    EXPECT_FALSE(s.edit.focus.cellSelected());
    EXPECT_FALSE(s.edit.focus.editing);
    ImGui::DestroyContext();
}

TEST(EditState, LoadingASessionClearsTheSelectionButKeepsTheFillSeed)
{
    app::AppState s;
    s.autosave = false;
    s.edit.focus.hasMatrix = true;
    s.edit.focus.id = MatrixId::Wq;
    s.edit.focus.r = s.edit.focus.c = 0;
    s.edit.focus.editing = true;
    s.edit.focus.text = "abc";
    s.edit.focus.fillSeed = 7;
    ASSERT_TRUE(app::openSession(s, kSeed000));
    EXPECT_FALSE(s.edit.focus.hasMatrix);
    EXPECT_FALSE(s.edit.focus.editing);
    EXPECT_TRUE(s.edit.focus.text.empty());
    EXPECT_EQ(s.edit.focus.fillSeed, 7u);
}

// ---- the desktop's file chooser ----------------------------------------------------------------------------

TEST(DesktopChooser, WithoutASessionBusItSaysSoAndAsksNothing)
{
    const char* addr = std::getenv("DBUS_SESSION_BUS_ADDRESS");
    const char* rt = std::getenv("XDG_RUNTIME_DIR");
    const std::string savedAddr = addr ? addr : "", savedRt = rt ? rt : "";
    ::unsetenv("DBUS_SESSION_BUS_ADDRESS");
    ::unsetenv("XDG_RUNTIME_DIR");
    EXPECT_EQ(app::sessionBusAddress(), "");
    app::DesktopChooser chooser;
    EXPECT_FALSE(chooser.mayBeAvailable());  // the window then shows no Browse button: the path field is the way
    EXPECT_FALSE(chooser.start(app::ChooserKind::Open, "Open session", ""));
    EXPECT_FALSE(chooser.take().has_value());
    if (!savedAddr.empty()) ::setenv("DBUS_SESSION_BUS_ADDRESS", savedAddr.c_str(), 1);
    if (!savedRt.empty()) ::setenv("XDG_RUNTIME_DIR", savedRt.c_str(), 1);
}

TEST(DesktopChooser, ABusWithNoPortalIsReportedUnavailable)
{
    // A bus address nobody listens on: the connection fails at once, the result says no portal answered,
    // and from then on the chooser is not offered.
    TempDir d;
    const char* addr = std::getenv("DBUS_SESSION_BUS_ADDRESS");
    const std::string saved = addr ? addr : "";
    const std::string fake = "unix:path=" + d.str() + "/no_bus_here";
    ::setenv("DBUS_SESSION_BUS_ADDRESS", fake.c_str(), 1);
    {
        app::DesktopChooser chooser;
        ASSERT_TRUE(chooser.mayBeAvailable());
        ASSERT_TRUE(chooser.start(app::ChooserKind::Open, "Open session", ""));
        std::optional<app::ChooserResult> r;
        for (int i = 0; i < 12000 && !r; ++i) {  // waits for the worker's answer (60 s at most: a bound, not a timing)
            r = chooser.take();
            if (!r) ::usleep(5000);
        }
        ASSERT_TRUE(r.has_value());
        EXPECT_TRUE(r->unavailable);
        EXPECT_TRUE(r->path.empty());
        EXPECT_FALSE(r->message.empty());
        EXPECT_FALSE(chooser.mayBeAvailable());
    }
    if (saved.empty()) ::unsetenv("DBUS_SESSION_BUS_ADDRESS");
    else ::setenv("DBUS_SESSION_BUS_ADDRESS", saved.c_str(), 1);
}

} // namespace
