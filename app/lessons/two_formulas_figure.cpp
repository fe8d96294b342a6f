// Figure of the two-formulas lesson: both formulas' outputs (transposes of each other) and the right and
// wrong-axis weights.
#include "lessons/lesson_figure.h"

#include <attnscope/lessons/two_formulas.h>

namespace app {

using namespace fig;

attn::Status buildTwoFormulasFigure(const LessonFigureContext& c, fig::Figure& f)
{
    auto cmp = attn::compareLayouts(c.s.input, c.s.config);
    if (!cmp) return cmp.status();
    auto wrong = attn::wrongFormulaDemo(c.s.input, c.s.config, c.o.head);
    if (!wrong) return wrong.status();
    const auto out = indexLabels(cmp->row.output.cols());
    std::vector<Heatmap> p;
    p.push_back(heatmap("softmax(QK^{T}/√d_{k})·V, tokens as rows", cmp->row.output, c.qTokens, out, "query", "d_{out}",
                        attn::Colormap::RdBu, "value"));
    p.push_back(heatmap("V·softmax(K^{T}Q/√d_{k}), tokens as columns", cmp->column.output, out, c.qTokens, "d_{out}", "query",
                        attn::Colormap::RdBu, "value"));
    const attn::DisplayRange u = attn::unionRange({p[0].range, p[1].range}, true);
    p[0].range = p[1].range = u;
    // The weights in the session's layout: right (softmax along the keys) and wrong (along the queries).
    const bool column = c.s.config.layout == attn::Layout::Column;
    auto weights = [&](const char* title, const attn::Matrix& m) {
        Heatmap h = heatmap(title, m, column ? c.kTokens : c.qTokens, column ? c.qTokens : c.kTokens, column ? "key" : "query",
                            column ? "query" : "key", attn::Colormap::Viridis, "weight");
        h.range = {0.0f, 1.0f};
        return h;
    };
    p.push_back(weights("right: softmax over the keys", wrong->rightWeightsInLayout));
    p.push_back(weights("wrong axis: softmax over the queries", wrong->wrongWeightsInLayout));
    f.columns = 2;
    f.panels = std::move(p);
    return {};
}

} // namespace app
