// Figures of the lesson panels (issue 6): the heatmaps a lesson is about, as one figure description that
// renders to PNG, SVG and PDF like every other figure. Values come from attnscope/explain.h; nothing here
// does attention math.
#pragma once

#include "figure/figure.h"

#include <optional>
#include <string>
#include <string_view>

namespace app::fig {

// The lessons that have a figure. The scaling lesson (histograms) and the image lesson (an image overlay)
// are not heatmaps; their panels are saved as PNG from the window.
enum class LessonFigure { VectorView, TwoFormulas, Heads, Additive, Masks };
const char* toString(LessonFigure l);  // "vector_view", ... (the names of the window's --lesson)
std::optional<LessonFigure> lessonFigureFromString(std::string_view s);
std::string lessonFigureList();        // "vector_view|two_formulas|heads|additive|masks"

struct LessonFigureOptions {
    LessonFigure lesson = LessonFigure::VectorView;
    int head = 0;           // the head the lesson looks at
    int query = 0;          // vector view, additive: the query i
    int key = 0;            // additive: the key j
    bool annotate = true;   // cell values printed (lesson figures are small; values are the point)
    std::optional<std::string> title;  // default names the lesson; "" = none
};

// `s` in its file orientation and `result` computed from it. Errors (InvalidArgument) name the lesson and
// the problem, e.g. "lesson additive: the session's score is scaled_dot, not additive", "lesson
// vector_view: query 7: the session has 4 queries (0..3)".
attn::Expected<Figure> buildLessonFigure(const attn::Session& s, const attn::AttentionResult& result,
                                         const LessonFigureOptions& opt);

} // namespace app::fig
