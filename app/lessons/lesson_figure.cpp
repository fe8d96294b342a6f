// Lesson figures: the registry's figure builders (app/lessons/<name>_figure.cpp) behind one entry point that
// checks the request, names the lesson in errors and applies the common options. Values come from the core
// lessons (attnscope/lessons/*.h); nothing here does attention math.
#include "lessons/lesson_figure.h"

#include "lessons/lesson_registry.h"

#include <attnscope/attention.h>

namespace app {
namespace fig {

// A heatmap of `m` with its own colour range (diverging maps centred at 0) and colorbar label.
Heatmap heatmap(std::string title, attn::Matrix m, std::vector<std::string> rows, std::vector<std::string> cols,
                std::string rowAxis, std::string colAxis, attn::Colormap cmap, std::string colorbar)
{
    Heatmap h;
    h.title = std::move(title);
    h.values = std::move(m);
    h.rowLabels = std::move(rows);
    h.colLabels = std::move(cols);
    h.rowAxis = std::move(rowAxis);
    h.colAxis = std::move(colAxis);
    h.cmap = cmap;
    h.range = attn::displayRange(h.values, nullptr, attn::isDiverging(cmap));
    h.colorbarLabel = std::move(colorbar);
    return h;
}

// A vector as a 1×n heatmap row labelled `rowLabel`.
Heatmap vectorRow(std::string title, const attn::Vector& v, std::string rowLabel, std::vector<std::string> cols,
                  std::string colAxis, attn::Colormap cmap, std::string colorbar)
{
    return heatmap(std::move(title), attn::Matrix(v.transpose()), {std::move(rowLabel)}, std::move(cols), "",
                   std::move(colAxis), cmap, std::move(colorbar));
}

attn::MaskMatrix maskRow(const std::vector<std::uint8_t>& m)
{
    attn::MaskMatrix out(1, Eigen::Index(m.size()));
    for (std::size_t j = 0; j < m.size(); ++j) out(0, Eigen::Index(j)) = m[j];
    return out;
}

} // namespace fig

namespace {

// "lesson vector_view: query 9: the session has 4 queries (0..3)"
attn::Status outOfRange(const char* lesson, const char* what, const char* whats, int i, int n)
{
    return attn::invalidArgument(std::string("lesson ") + lesson + ": " + what + " " + std::to_string(i) + ": the session has " +
                                 std::to_string(n) + " " + (n == 1 ? what : whats) + " (0.." + std::to_string(n - 1) + ")");
}

} // namespace

namespace fig {

attn::Expected<Figure> buildLessonFigure(const attn::Session& s, const attn::AttentionResult& result,
                                         const LessonFigureOptions& opt)
{
    const Lesson& l = lesson(opt.lesson);
    if (!l.figure) return attn::invalidArgument(std::string("lesson ") + l.name + ": has no figure (its panel saves as PNG)");
    attn::Expected<attn::Dims> dims = attn::validate(s.input, s.config);
    if (!dims) return dims.status();
    const char* name = l.name;
    if (result.heads.size() != std::size_t(dims->H))
        return attn::invalidArgument(std::string("lesson ") + name + ": the result does not belong to the session (stale result?)");
    if (opt.head < 0 || opt.head >= dims->H) return outOfRange(name, "head", "heads", opt.head, dims->H);
    if (opt.query < 0 || opt.query >= dims->T) return outOfRange(name, "query", "queries", opt.query, dims->T);
    if (opt.key < 0 || opt.key >= dims->S) return outOfRange(name, "key", "keys", opt.key, dims->S);

    LessonFigureContext c{s, result, opt, tokenLabels(s.queryTokens, dims->T), {}};
    c.kTokens = tokenLabels(s.keyTokens.empty() && s.config.mode == attn::Mode::Self ? s.queryTokens : s.keyTokens, dims->S);

    Figure f;
    f.title = l.figureTitle;
    f.subtitle = s.name;
    f.annotate = opt.annotate;
    f.sharedColorbar = false;
    if (const attn::Status st = l.figure(c, f); !st.ok())
        return attn::invalidArgument(std::string("lesson ") + name + ": " + st.message);
    if (opt.title) f.title = *opt.title;
    return f;
}

std::optional<LessonId> lessonFigureFromName(std::string_view name)
{
    for (const Lesson& l : lessons())
        if (l.figure && name == l.name) return l.id;
    return std::nullopt;
}

} // namespace fig
} // namespace app
