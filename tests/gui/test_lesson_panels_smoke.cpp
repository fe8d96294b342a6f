// Null-backend smoke test of the lesson panels: every panel, every preset, several frames with the mouse
// moving and clicking, no GL and no display. Checks that nothing asserts or crashes, that each frame's
// draw lists fit ImGui's limits, and that edits made by the panels produce sessions core accepts.
#include "panels/lesson_panels.h"

#include "attnscope/attention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

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
        st.sampling.samples = 500;   // the sampling itself is tested in test_explain; keep the frames fast
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
            app::drawVectorViewPanel(in, st, &open);
            app::drawFormulasPanel(in, st, &open);
            app::drawScalingPanel(in, st, &open);
            app::drawHeadsPanel(in, st, &open);
            app::drawAdditivePanel(in, st, &open);
            app::drawMasksPanel(in, st, &open);
            app::drawImagePatchesPanel(in, st, &open);
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
