// The lesson panels in the window: which are open (View → Lessons, a session's "view.lesson", --lesson),
// where they first appear, and how their edits reach the document (one undo step per click or drag).
#include "panels/lesson_panels.h"
#include "panels/panels.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>

namespace app {
namespace {

using DrawLessonFn = void (*)(const LessonInputs&, LessonState&, bool*);
constexpr DrawLessonFn kLessonDraw[kLessonCount] = {
    drawVectorViewPanel, drawFormulasPanel, drawScalingPanel, drawHeadsPanel,
    drawAdditivePanel,   drawMasksPanel,    drawImagePatchesPanel,
};

// assets/images beside the presets folder (both are found the same way, see presetsDirectory()).
std::string imagesDirectory(const std::string& presetsDir)
{
    if (presetsDir.empty()) return std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/images";
    return (std::filesystem::path(presetsDir).parent_path() / "images").string();
}

} // namespace

void drawLessonPanels(AppState& state)
{
    bool any = false;
    for (bool b : state.view.lessons) any = any || b;
    if (!any) return;

    Document& doc = state.doc;
    // The panels read the session as a file holds it (column sessions transposed back); rebuilt per revision.
    if (state.lessonSessionRevision != doc.revision()) {
        state.lessonSession = doc.sessionForSave("{}");
        state.lessonSessionRevision = doc.revision();
    }
    // A drag that edits the session is one undo step: the first edit while the mouse is down opens it.
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) state.lessonGesture = false;

    LessonInputs in;
    in.session = &state.lessonSession;
    in.result = doc.hasResult() ? &doc.result() : nullptr;
    in.presetDir = state.presetsDir;
    in.imageDir = imagesDirectory(state.presetsDir);
    // The caches key on this: a new revision (an edit) or a new result (the recompute that follows it).
    in.revision = doc.revision() * 1000003u + doc.resultGeneration();
    in.applySession = [&state](attn::Session s) {
        const bool drag = ImGui::IsMouseDown(ImGuiMouseButton_Left);
        state.doc.replaceSession(std::move(s), drag && state.lessonGesture);
        state.lessonGesture = drag;
    };

    // First placement: over the chain, cascading, and never larger than the window's work area.
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const ImVec2 maxSize(std::max(320.0f, vp->WorkSize.x - kControlsWidth - 24.0f),
                         std::max(240.0f, vp->WorkSize.y - kStatusBarHeight - 24.0f));
    int shown = 0;
    for (int i = 0; i < kLessonCount; ++i) {
        if (!state.view.lessons[i]) continue;
        const float offset = 24.0f * float(shown++);
        ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + kControlsWidth + 12.0f + offset, vp->WorkPos.y + 12.0f + offset),
                                ImGuiCond_FirstUseEver);
        ImGui::SetNextWindowSizeConstraints(ImVec2(320.0f, 240.0f), ImVec2(maxSize.x - offset, maxSize.y - offset));
        ImGui::SetNextWindowBgAlpha(1.0f);  // opaque: the chain behind would show through the text
        kLessonDraw[i](in, state.lesson, &state.view.lessons[i]);
    }
}

} // namespace app
