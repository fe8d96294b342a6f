// Null-backend smoke test of the lesson panels: every panel, every preset, several frames with the mouse
// moving and clicking, no GL and no display. Checks that nothing asserts or crashes, that each frame's
// draw lists fit ImGui's limits, and that edits made by the panels produce sessions core accepts.
#include "lessons/lesson_panels.h"

#include "attnscope/attention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>

namespace {

struct ImGuiContextGuard {
    ImGuiContextGuard()
    {
        ImGui::CreateContext();
        ImGuiIO& io = ImGui::GetIO();
        io.DisplaySize = ImVec2(1280, 800);   // the screenshot tests' window size
        io.IniFilename = nullptr;
        io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;  // as the OpenGL 3 backend sets it
        unsigned char* pixels = nullptr;
        int w = 0, h = 0;
        io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
    }
    ~ImGuiContextGuard() { ImGui::DestroyContext(); }
};

} // namespace

TEST(LessonPanelsSmoke, EveryPanelOnEveryPreset)
{
    namespace fs = std::filesystem;
    const std::string root = ATTNSCOPE_SOURCE_DIR;
    ImGuiContextGuard guard;
    ImGuiIO& io = ImGui::GetIO();
    int presets = 0;
    for (const auto& e : fs::directory_iterator(root + "/assets/presets")) {
        if (e.path().extension() != ".json") continue;
        auto loaded = attn::loadSession(e.path().string());
        ASSERT_TRUE(loaded.ok()) << loaded.status().message;
        attn::Session session = *loaded;
        auto result = attn::compute(session.input, session.config);
        ASSERT_TRUE(result.ok()) << result.status().message;

        app::LessonState st;
        st.sampling.samples = 500;   // the sampling itself is tested in test_lesson_scaling; keep the frames fast
        app::LessonInputs in;
        in.session = &session;
        in.result = &*result;
        in.presetDir = root + "/assets/presets";
        in.imageDir = root + "/assets/images";
        in.revision = std::uint64_t(presets) * 1000;
        std::optional<attn::Session> pending;
        in.applySession = [&](attn::Session s) { pending = std::move(s); };

        for (int f = 0; f < 6; ++f) {
            io.DeltaTime = 1.0f / 60.0f;
            io.MousePos = ImVec2(100.0f + 37.0f * float(f), 120.0f + 53.0f * float(f));
            io.MouseDown[0] = f % 2 == 1;
            ImGui::NewFrame();
            bool open = true;
            for (const app::Lesson& l : app::lessons()) l.panel(in, st, &open);
            ImGui::Render();
            if (pending) {  // what the document does with an edit: keep it only if it computes
                auto r = attn::compute(pending->input, pending->config);
                ASSERT_TRUE(r.ok()) << e.path().filename() << ": a panel produced an invalid session: " << r.status().message;
                session = std::move(*pending);
                result = std::move(r);
                in.result = &*result;
                ++in.revision;
                pending.reset();
            }
        }
        EXPECT_TRUE(st.imageError.empty()) << st.imageError;
        ++presets;
    }
    EXPECT_GE(presets, 9);
}

// The paragraphs the two-formulas panel writes under its mistakes (built in the app from the lesson's numbers).
TEST(LessonPanelsText, TwoFormulasParagraphsNameTheAxesAndTheOutcome)
{
    const std::string root = ATTNSCOPE_SOURCE_DIR;
    for (const char* preset : {"seed000_worked_example.json", "lesson_two_formulas_column.json", "lesson_additive.json"}) {
        auto s = attn::loadSession(root + "/assets/presets/" + preset);
        ASSERT_TRUE(s.ok()) << s.status().message;
        auto demo = attn::wrongFormulaDemo(s->input, s->config, 0);
        ASSERT_TRUE(demo.ok()) << demo.status().message;
        const bool row = s->config.layout == attn::Layout::Row;
        const std::string a = app::wrongAxisParagraph(*demo), b = app::literalFormulaParagraph(*demo);
        EXPECT_NE(a.find(row ? "Tokens are rows" : "Tokens are columns"), std::string::npos) << preset << ": " << a;
        EXPECT_NE(a.find(row ? "(dim=0)" : "(dim=1)"), std::string::npos) << preset << ": " << a;
        switch (demo->literal) {
        case attn::LiteralFormula::NotApplicable:
            EXPECT_EQ(s->config.score, attn::Score::Additive) << preset;
            EXPECT_NE(b.find("no QKᵀ product"), std::string::npos) << b;
            break;
        case attn::LiteralFormula::ShapeMismatch:
            EXPECT_NE(b.find("does not even apply"), std::string::npos) << b;
            break;
        case attn::LiteralFormula::Applies:
            EXPECT_NE(b.find("FEATURES"), std::string::npos) << b;
            break;
        }
    }
}

// The registry: one entry per lesson in LessonId order, distinct names and titles, presets that exist, and a
// figure for exactly the heatmap lessons (render --lesson lists them).
TEST(LessonRegistry, OneEntryPerLesson)
{
    namespace fs = std::filesystem;
    const std::string presets = std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/presets/";
    ASSERT_EQ(app::lessons().size(), std::size_t(app::kLessonCount));
    std::set<std::string> names, titles;
    for (std::size_t i = 0; i < app::lessons().size(); ++i) {
        const app::Lesson& l = app::lessons()[i];
        EXPECT_EQ(int(l.id), int(i));
        EXPECT_EQ(app::lessonFromName(l.name), int(i));
        EXPECT_TRUE(names.insert(l.name).second) << l.name;
        EXPECT_TRUE(titles.insert(l.title).second) << l.title;
        EXPECT_NE(l.panel, nullptr) << l.name;
        if (*l.preset) {
            EXPECT_TRUE(fs::exists(presets + l.preset)) << l.name << ": " << l.preset;
        }
    }
    EXPECT_EQ(app::lessonFromName("nope"), -1);
    EXPECT_EQ(app::lessonFigureList(), "vector_view|two_formulas|heads|additive|masks");
}
