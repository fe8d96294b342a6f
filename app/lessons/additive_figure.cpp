// Figure of the additive lesson: the terms of w_vᵀ·tanh(q·A_q + k·A_k) for one (query, key) pair.
#include "lessons/lesson_figure.h"

#include <attnscope/lessons/additive.h>

namespace app {

using namespace fig;

attn::Status buildAdditiveFigure(const LessonFigureContext& c, fig::Figure& f)
{
    if (c.s.config.score != attn::Score::Additive)
        return attn::invalidArgument(std::string("the session's score is ") + attn::toString(c.s.config.score) + ", not additive");
    auto b = attn::additiveBreakdown(c.s.input, c.r, c.o.head, c.o.query, c.o.key);
    if (!b) return b.status();
    const auto hidden = indexLabels(b->hidden.size());
    std::vector<Heatmap> p;
    auto row = [&](std::string t, const attn::Vector& v, std::string label) {
        p.push_back(vectorRow(std::move(t), v, std::move(label), hidden, "hidden unit", attn::Colormap::RdBu, "value"));
    };
    row("q_{i}·A_{q}", b->qProjected, c.qTokens[std::size_t(c.o.query)]);
    row("k_{j}·A_{k}", b->kProjected, c.kTokens[std::size_t(c.o.key)]);
    row("tanh(q_{i}·A_{q} + k_{j}·A_{k})", b->activated, "tanh");
    row("w_{v}·tanh(...), summed: score " + attn::formatValue(b->score, 4), b->products, "terms");
    f.title = "Additive score of (" + c.qTokens[std::size_t(c.o.query)] + ", " + c.kTokens[std::size_t(c.o.key)] + ")";
    f.columns = 1;
    f.panels = std::move(p);
    return {};
}

} // namespace app
