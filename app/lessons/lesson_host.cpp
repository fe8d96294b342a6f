// The lesson panels in the window: which are open (View → Lessons, a session's "view.lesson", --lesson),
// where they first appear, and how their edits reach the document (one undo step per click or drag).
#include "figure/figure_render.h"
#include "lessons/lesson_figure.h"
#include "lessons/lesson_registry.h"
#include "panels/panels.h"
#include "state/export_actions.h"

#include <attnscope/attention.h>

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace app {
namespace {

// Where "Save this view as PNG" writes unless the user typed a path: beside the session file, else in the
// current folder, named after the session and the lesson ("seed000_masks.png", "attnscope_masks.png").
std::string defaultLessonPngPath(const AppState& state, int lesson)
{
    const std::filesystem::path session(state.doc.path());
    const std::string stem = session.empty() ? "attnscope" : session.stem().string();
    const std::filesystem::path dir = session.empty() ? std::filesystem::path() : session.parent_path();
    return (dir / (stem + "_" + lessonName(LessonId(lesson)) + ".png")).string();
}

// "Save as figure": the lesson's figure for the panel's head/query/key, as PDF unless `path` names an SVG or
// PNG file. Computes the session as a file holds it (the lesson panels' view of it) on the CPU.
attn::Status saveLessonFigure(const AppState& state, LessonId lesson, const std::string& path)
{
    const std::optional<fig::FigureFormat> format = fig::formatFromPath(path);
    if (!format) return attn::invalidArgument(path + ": expected a .pdf, .svg or .png file name");
    attn::AttentionConfig cfg = state.lessonSession.config;
    cfg.backend = attn::Backend::Cpu;
    attn::Expected<attn::AttentionResult> result = attn::compute(state.lessonSession.input, cfg);
    if (!result) return result.status();
    fig::LessonFigureOptions o;
    o.lesson = lesson;
    o.head = state.lesson.head;
    o.query = state.lesson.query;
    o.key = state.lesson.key;
    attn::Expected<fig::Figure> f = fig::buildLessonFigure(state.lessonSession, *result, o);
    if (!f) return f.status();
    return fig::writeFigure(*f, path, *format, 2.0);
}

// Appended to the lesson's own window (ImGui continues a window begun again in the same frame): records
// the panel's rectangle and, unless this frame is the one being saved, the save row.
void lessonSaveRow(AppState& state, int lesson)
{
    const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    state.lessonRects[lesson] = {pos.x, pos.y, pos.x + size.x, pos.y + size.y};
    state.recordRect(std::string("lesson/") + lessonName(LessonId(lesson)), pos, ImVec2(pos.x + size.x, pos.y + size.y));
    AppState::ViewCapture* cap = state.viewCapture ? &*state.viewCapture : nullptr;
    if (cap && cap->lesson == lesson) {
        cap->armed = true;  // this frame is the picture: no save row in it
        return;
    }
    if (!state.lessonSaveRows) return;
    ImGui::Spacing();
    ImGui::Separator();
    std::string& path = state.lessonPngPaths[lesson];
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s", path.c_str());
    const std::string hint = defaultLessonPngPath(state, lesson);
    const Lesson& entry = app::lesson(LessonId(lesson));
    const bool figure = entry.figure != nullptr;
    ImGui::SetNextItemWidth(std::max(160.0f, ImGui::GetContentRegionAvail().x - (figure ? 340.0f : 190.0f)));
    if (ImGui::InputTextWithHint("##pngpath", hint.c_str(), buf, sizeof buf)) path = buf;
    ImGui::SameLine();
    if (ImGui::Button("Save this view as PNG") && !cap)
        state.viewCapture = AppState::ViewCapture{lesson, path.empty() ? hint : path, false};
    state.recordRect(std::string("lesson/save/") + lessonName(LessonId(lesson)), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (figure) {
        ImGui::SameLine();
        if (ImGui::Button("Save as figure (PDF)")) {
            // The typed path when it names a figure format, else the PNG path with .pdf.
            const std::string typed = path.empty() ? hint : path;
            const std::string out = fig::formatFromPath(typed) && !typed.ends_with(".png") ? typed : replaceExtension(typed, ".pdf");
            const attn::Status st = saveLessonFigure(state, entry.id, out);
            state.lessonPngFailed[lesson] = !st.ok();
            state.lessonPngStatus[lesson] = st.ok() ? "saved " + out + " (vector figure of this lesson's heatmaps)"
                                                    : "cannot save the figure: " + st.message;
        }
        state.recordRect(std::string("lesson/figure/") + lessonName(LessonId(lesson)), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("The heatmaps of this lesson (for the selected head and query) as a vector PDF with real\n"
                              "text; type a .svg name in the field for SVG. Same as: attnscope render SESSION --lesson %s",
                              entry.name);
    }
    if (!state.lessonPngStatus[lesson].empty()) {
        if (state.lessonPngFailed[lesson])
            errorText(state.lessonPngStatus[lesson]);
        else
            noteText(state.lessonPngStatus[lesson]);
    }
}

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
    static_assert(kLessonMapKinds == kHeatmapKinds && int(LessonMap::Output) == int(HeatmapKind::Output) &&
                  int(LessonMap::Weights) == int(HeatmapKind::Weights) && int(LessonMap::Scores) == int(HeatmapKind::Scores));
    for (int k = 0; k < kLessonMapKinds; ++k) in.colormaps[k] = state.view.colormaps[k];
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
        const Lesson& l = lessons()[std::size_t(i)];
        l.panel(in, state.lesson, &state.view.lessons[i]);
        if (!state.view.lessons[i]) continue;  // closed by its own button
        if (ImGui::Begin(l.title, &state.view.lessons[i]))
            lessonSaveRow(state, i);
        else if (state.viewCapture && state.viewCapture->lesson == i)
            state.viewCapture.reset();  // collapsed: nothing to save
        ImGui::End();
    }
    // A request for a panel that is closed (or collapsed) has nothing to save.
    if (state.viewCapture && !state.viewCapture->armed && !state.view.lessons[state.viewCapture->lesson])
        state.viewCapture.reset();
}

} // namespace app
