// The lessons of the app, one entry each: its id, names, window title, preset, panel and figure. View → Lessons,
// the session files' "view.lesson", --lesson, `render --lesson`, the lesson host and the figure export all
// read this one table (lesson_registry.cpp); adding a lesson is one entry plus its panel and figure files.
#pragma once

#include <attnscope/status.h>

#include <span>
#include <string>

namespace app {

struct LessonInputs;
struct LessonState;
struct LessonFigureContext;
namespace fig {
struct Figure;
}

// The lesson panels (issue 6), in View → Lessons order (lessons()[int(id)].id == id).
enum class LessonId { VectorView, TwoFormulas, Scaling, Heads, Additive, Masks, ImagePatches };
inline constexpr int kLessonCount = 7;

// Draws the lesson's ImGui window (titled Lesson::title); `open` is its close button.
using DrawLessonPanelFn = void (*)(const LessonInputs& in, LessonState& st, bool* open);
// Fills the figure's panels (and columns, colour bars, a title of its own when it has one).
using BuildLessonFigureFn = attn::Status (*)(const LessonFigureContext& c, fig::Figure& f);

struct Lesson {
    LessonId id;
    const char* name;         // "vector_view": session files ("view.lesson"), --lesson, render --lesson, PNG names
    const char* title;        // the panel's window title: stable, screenshots and imgui.ini refer to it
    const char* menuLabel;    // View → Lessons
    const char* preset;       // the preset in assets/presets that shows the lesson ("" = none: its own data)
    DrawLessonPanelFn panel;
    BuildLessonFigureFn figure;  // null: no figure (the scaling lesson draws histograms, the image lesson an
                                 // image overlay; their panels are saved as PNG from the window)
    const char* figureTitle;  // the figure's default title
};

std::span<const Lesson> lessons();
const Lesson& lesson(LessonId id);
inline const char* lessonName(LessonId id) { return lesson(id).name; }
inline const char* lessonMenuLabel(LessonId id) { return lesson(id).menuLabel; }
// The lesson named `name`, or -1.
int lessonFromName(const std::string& name);
// The lessons with a figure, as "vector_view|two_formulas|..." (the choices of render --lesson).
std::string lessonFigureList();

} // namespace app
