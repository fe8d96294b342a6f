// Lesson figures: each lesson's values (attnscope/explain.h) laid out as heatmap panels.
#include "figure/lesson_figure.h"

#include <attnscope/attention.h>
#include <attnscope/explain.h>

namespace app::fig {

namespace {

struct LessonInfo {
    LessonFigure lesson;
    const char* name;
    const char* title;
};
constexpr LessonInfo kLessons[] = {
    {LessonFigure::VectorView, "vector_view", "From vector to matrix"},
    {LessonFigure::TwoFormulas, "two_formulas", "The two formulas"},
    {LessonFigure::Heads, "heads", "Each head's contribution through W^O"},
    {LessonFigure::Additive, "additive", "Additive attention, term by term"},
    {LessonFigure::Masks, "masks", "Masked softmax"},
};

const LessonInfo& info(LessonFigure l)
{
    for (const LessonInfo& i : kLessons)
        if (i.lesson == l) return i;
    return kLessons[0];
}

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

// "lesson vector_view: query 9: the session has 4 queries (0..3)"
attn::Status outOfRange(const char* lesson, const char* what, const char* whats, int i, int n)
{
    return attn::invalidArgument(std::string("lesson ") + lesson + ": " + what + " " + std::to_string(i) + ": the session has " +
                                 std::to_string(n) + " " + (n == 1 ? what : whats) + " (0.." + std::to_string(n - 1) + ")");
}

struct Ctx {
    const attn::Session& s;
    const attn::AttentionResult& r;
    const LessonFigureOptions& o;
    std::vector<std::string> qTokens, kTokens;
};

attn::Expected<std::vector<Heatmap>> vectorViewPanels(const Ctx& c, std::string& title)
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
    title = std::string("From vector to matrix: query ") + q + (c.r.heads.size() > 1 ? " (head " + std::to_string(c.o.head) + ")" : "");
    return p;
}

attn::Expected<std::vector<Heatmap>> twoFormulaPanels(const Ctx& c)
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
    return p;
}

attn::Expected<std::vector<Heatmap>> headPanels(const Ctx& c)
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
    return p;
}

attn::Expected<std::vector<Heatmap>> additivePanels(const Ctx& c, std::string& title)
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
    title = "Additive score of (" + c.qTokens[std::size_t(c.o.query)] + ", " + c.kTokens[std::size_t(c.o.key)] + ")";
    return p;
}

} // namespace

const char* toString(LessonFigure l) { return info(l).name; }

std::optional<LessonFigure> lessonFigureFromString(std::string_view s)
{
    for (const LessonInfo& i : kLessons)
        if (s == i.name) return i.lesson;
    return std::nullopt;
}

std::string lessonFigureList()
{
    std::string out;
    for (const LessonInfo& i : kLessons) out += (out.empty() ? "" : "|") + std::string(i.name);
    return out;
}

attn::Expected<Figure> buildLessonFigure(const attn::Session& s, const attn::AttentionResult& result,
                                         const LessonFigureOptions& opt)
{
    attn::Expected<attn::Dims> dims = attn::validate(s.input, s.config);
    if (!dims) return dims.status();
    const char* name = info(opt.lesson).name;
    if (result.heads.size() != std::size_t(dims->H))
        return attn::invalidArgument(std::string("lesson ") + name + ": the result does not belong to the session (stale result?)");
    if (opt.head < 0 || opt.head >= dims->H) return outOfRange(name, "head", "heads", opt.head, dims->H);
    if (opt.query < 0 || opt.query >= dims->T) return outOfRange(name, "query", "queries", opt.query, dims->T);
    if (opt.key < 0 || opt.key >= dims->S) return outOfRange(name, "key", "keys", opt.key, dims->S);

    Ctx c{s, result, opt, tokenLabels(s.queryTokens, dims->T), {}};
    c.kTokens = tokenLabels(s.keyTokens.empty() && s.config.mode == attn::Mode::Self ? s.queryTokens : s.keyTokens, dims->S);

    Figure f;
    f.title = info(opt.lesson).title;
    f.subtitle = s.name;
    f.annotate = opt.annotate;
    f.sharedColorbar = false;
    attn::Expected<std::vector<Heatmap>> panels = std::vector<Heatmap>{};
    switch (opt.lesson) {
    case LessonFigure::VectorView:
        panels = vectorViewPanels(c, f.title);
        f.columns = 1;
        break;
    case LessonFigure::TwoFormulas:
        panels = twoFormulaPanels(c);
        f.columns = 2;
        break;
    case LessonFigure::Heads:
        panels = headPanels(c);
        f.columns = std::min<int>(4, int(result.heads.size()) + 1);
        f.sharedColorbar = true;  // the panels share one range (headPanels)
        f.colorbarLabel = "value";
        break;
    case LessonFigure::Additive:
        panels = additivePanels(c, f.title);
        f.columns = 1;
        break;
    case LessonFigure::Masks: {
        // The head's scores and weights with the masked cells drawn as such (the standard panels).
        for (PanelKind k : {PanelKind::Scores, PanelKind::Weights}) {
            FigureOptions fo;
            fo.panel = k;
            fo.head = opt.head;
            auto one = buildFigure(s, result, fo);
            if (!one) return one.status();
            Heatmap h = std::move(one->panels.front());
            h.title = k == PanelKind::Scores ? "scores (masked cells grey)" : "weights: masked exactly 0, rows sum to 1";
            h.colorbarLabel = one->colorbarLabel;
            panels->push_back(std::move(h));
        }
        f.columns = 2;
        break;
    }
    }
    if (!panels) return attn::invalidArgument(std::string("lesson ") + name + ": " + panels.status().message);
    f.panels = std::move(*panels);
    if (opt.title) f.title = *opt.title;
    return f;
}

} // namespace app::fig
