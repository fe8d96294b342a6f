// Figure of the heads lesson: each head's contribution through W^O and their sum, on one colour scale.
#include "lessons/lesson_figure.h"

#include <attnscope/lessons/heads.h>

#include <algorithm>

namespace app {

using namespace fig;

attn::Status buildHeadsFigure(const LessonFigureContext& c, fig::Figure& f)
{
    auto hc = attn::headContributions(c.s.input, c.r);
    if (!hc) return hc.status();
    const bool column = c.s.config.layout == attn::Layout::Column;
    std::vector<Heatmap> p;
    auto add = [&](std::string title, const attn::Matrix& m) {
        const auto outs = indexLabels(column ? m.rows() : m.cols());
        p.push_back(heatmap(std::move(title), m, column ? outs : c.qTokens, column ? c.qTokens : outs, column ? "d_{out}" : "query",
                            column ? "query" : "d_{out}", attn::Colormap::RdBu, "value"));
    };
    for (std::size_t h = 0; h < hc->perHead.size(); ++h) add("head " + std::to_string(h) + ": O_{" + std::to_string(h) + "}·W_{O} block", hc->perHead[h]);
    add(hc->bias.size() > 0 ? "Σ heads + b_{O} = output" : "Σ heads = output", c.r.output);
    std::vector<attn::DisplayRange> ranges;
    for (const Heatmap& h : p) ranges.push_back(h.range);
    const attn::DisplayRange u = attn::unionRange(ranges, true);
    for (Heatmap& h : p) h.range = u;  // one scale: the heads' shares are comparable
    f.columns = std::min<int>(4, int(c.r.heads.size()) + 1);
    f.sharedColorbar = true;  // the panels share one range (above)
    f.colorbarLabel = "value";
    f.panels = std::move(p);
    return {};
}

} // namespace app
