// Figure of the vector-view lesson: one query's scores, weights, weighted values and output row next to
// row i of the matrix version.
#include "lessons/lesson_figure.h"

#include <attnscope/lessons/vector_view.h>

namespace app {

using namespace fig;

attn::Status buildVectorViewFigure(const LessonFigureContext& c, fig::Figure& f)
{
    auto v = attn::vectorView(c.r, c.s.config.score, c.o.head, c.o.query);
    if (!v) return v.status();
    const std::string q = c.qTokens[std::size_t(c.o.query)];
    const auto keys = c.kTokens;
    std::vector<Heatmap> p;
    p.push_back(vectorRow("scores a_{ij} (scaled)", v->scaledScores, q, keys, "key j", attn::Colormap::RdBu, "score"));
    p.back().masked = maskRow(v->masked);
    p.push_back(vectorRow("weights â_{ij} = softmax_{j}", v->weights, q, keys, "key j", attn::Colormap::Viridis, "weight"));
    p.back().masked = maskRow(v->masked);
    p.back().range = {0.0f, 1.0f};
    p.push_back(heatmap("â_{ij}·v_{j}", v->weightedValues, keys, indexLabels(v->weightedValues.cols()), "key j", "d_{v}",
                        attn::Colormap::RdBu, "value"));
    p.push_back(vectorRow("o_{i} = Σ_{j} â_{ij}·v_{j}", v->vectorSum, q, indexLabels(v->vectorSum.size()), "d_{v}",
                          attn::Colormap::RdBu, "value"));
    p.push_back(vectorRow("row i of softmax(QK^{T}/√d_{k})·V", v->matrixRow, q, indexLabels(v->matrixRow.size()), "d_{v}",
                          attn::Colormap::RdBu, "value"));
    // The last two are the same numbers: one colour range for both, so equal colours mean equal values.
    const attn::DisplayRange u = attn::unionRange({p[3].range, p[4].range}, true);
    p[3].range = p[4].range = u;
    f.title = std::string("From vector to matrix: query ") + q + (c.r.heads.size() > 1 ? " (head " + std::to_string(c.o.head) + ")" : "");
    f.columns = 1;
    f.panels = std::move(p);
    return {};
}

} // namespace app
