// Figure of the masks lesson: the head's scores and weights with the masked cells drawn as such.
#include "lessons/lesson_figure.h"

namespace app {

using namespace fig;

attn::Status buildMasksFigure(const LessonFigureContext& c, fig::Figure& f)
{
    // The standard panels of the chain, retitled.
    for (PanelKind k : {PanelKind::Scores, PanelKind::Weights}) {
        FigureOptions fo;
        fo.panel = k;
        fo.head = c.o.head;
        auto one = buildFigure(c.s, c.r, fo);
        if (!one) return one.status();
        Heatmap h = std::move(one->panels.front());
        h.title = k == PanelKind::Scores ? "scores (masked cells grey)" : "weights: masked exactly 0, rows sum to 1";
        h.colorbarLabel = one->colorbarLabel;
        f.panels.push_back(std::move(h));
    }
    f.columns = 2;
    return {};
}

} // namespace app
