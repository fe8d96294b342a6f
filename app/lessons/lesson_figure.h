// Figures of the lesson panels (issue 6): the heatmaps a lesson is about, as one figure description that
// renders to PNG, SVG and PDF like every other figure. Each lesson with a figure has its builder in
// app/lessons/<name>_figure.cpp, named in the registry (lesson_registry.h). Values come from the core lessons
// (attnscope/lessons/*.h); nothing here does attention math.
#pragma once

#include "figure/figure.h"
#include "lessons/lesson_registry.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace app {
namespace fig {

struct LessonFigureOptions {
    LessonId lesson = LessonId::VectorView;  // a lesson with a figure (Lesson::figure)
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

// The lesson named `name` when it has a figure (render --lesson), else nullopt.
std::optional<LessonId> lessonFigureFromName(std::string_view name);

// Helpers of the figure builders: a heatmap of `m` with its own colour range (diverging maps centred at 0)
// and colour bar label; a vector as a 1×n heatmap row; a mask vector as a 1×n mask.
Heatmap heatmap(std::string title, attn::Matrix m, std::vector<std::string> rows, std::vector<std::string> cols,
                std::string rowAxis, std::string colAxis, attn::Colormap cmap, std::string colorbar);
Heatmap vectorRow(std::string title, const attn::Vector& v, std::string rowLabel, std::vector<std::string> cols,
                  std::string colAxis, attn::Colormap cmap, std::string colorbar);
attn::MaskMatrix maskRow(const std::vector<std::uint8_t>& m);

} // namespace fig

// What a lesson's figure builder reads: the session (file orientation), its result, the options, and the
// token labels of the queries and keys.
struct LessonFigureContext {
    const attn::Session& s;
    const attn::AttentionResult& r;
    const fig::LessonFigureOptions& o;
    std::vector<std::string> qTokens, kTokens;
};

// The registry's figure builders (Lesson::figure), one per file.
attn::Status buildVectorViewFigure(const LessonFigureContext& c, fig::Figure& f);
attn::Status buildTwoFormulasFigure(const LessonFigureContext& c, fig::Figure& f);
attn::Status buildHeadsFigure(const LessonFigureContext& c, fig::Figure& f);
attn::Status buildAdditiveFigure(const LessonFigureContext& c, fig::Figure& f);
attn::Status buildMasksFigure(const LessonFigureContext& c, fig::Figure& f);

} // namespace app
