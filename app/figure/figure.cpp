// Building a figure description from a session and its result.
#include "figure/figure.h"

#include <attnscope/attention.h>
#include <attnscope/layout.h>

namespace app::fig {

namespace {

struct KindInfo {
    PanelKind kind;
    const char* name;
    const char* title;          // default figure title
    const char* panelTitle;     // chain-figure panel title (rich text)
    const char* colorbarLabel;
    bool perHead;               // has one matrix per head
};
constexpr KindInfo kKinds[] = {
    {PanelKind::X, "x", "Token embeddings X", "X", "value", false},
    {PanelKind::Xkv, "xkv", "Key/value-side embeddings X_kv", "X_{kv}", "value", false},
    {PanelKind::Wq, "wq", "Query projection W_Q", "W_{Q}", "weight", true},
    {PanelKind::Wk, "wk", "Key projection W_K", "W_{K}", "weight", true},
    {PanelKind::Wv, "wv", "Value projection W_V", "W_{V}", "weight", true},
    {PanelKind::Wo, "wo", "Output projection W_O", "W_{O}", "weight", true},
    {PanelKind::Q, "q", "Queries Q", "Q = X·W_{Q}", "value", true},
    {PanelKind::K, "k", "Keys K", "K = X·W_{K}", "value", true},
    {PanelKind::V, "v", "Values V", "V = X·W_{V}", "value", true},
    {PanelKind::Scores, "scores", "Attention scores", "scores", "score", true},
    {PanelKind::Weights, "weights", "Attention weights", "weights = softmax(scores)", "attention weight", true},
    {PanelKind::Output, "output", "Attention output per head", "output = weights·V", "value", true},
    {PanelKind::Final, "final", "Attention output", "output", "value", false},
    {PanelKind::Chain, "chain", "Attention, step by step", "", "", true},
};

const KindInfo& info(PanelKind k)
{
    for (const KindInfo& i : kKinds)
        if (i.kind == k) return i;
    return kKinds[0];
}

// The builder works in Row orientation (tokens are rows); Column-layout sessions store every matrix
// transposed, so their matrices are turned to Row orientation on the way in and the heatmap is turned back.
struct Builder {
    const attn::Session& s;
    const attn::AttentionResult& r;
    attn::Dims d;
    std::vector<std::string> qTokens, kTokens;
    bool column;

    attn::Matrix rowOf(const attn::Matrix& m) const { return attn::tokenRows(m, layout()); }
    attn::MaskMatrix rowOf(const attn::MaskMatrix& m) const { return attn::tokenRows(m, layout()); }
    attn::Layout layout() const { return column ? attn::Layout::Column : attn::Layout::Row; }

    Heatmap tokenRows(const attn::Matrix& m, const std::vector<std::string>& rowTokens, const char* rowAxis,
                      const char* colAxis) const
    {
        Heatmap h;
        h.values = m;
        h.rowLabels = tokenLabels(rowTokens, m.rows());
        h.rowLabelsAreTokens = rowTokens.size() == std::size_t(m.rows());
        h.colLabels = indexLabels(m.cols());
        h.rowAxis = rowAxis;
        h.colAxis = colAxis;
        return h;
    }
    Heatmap plain(const attn::Matrix& m, const char* rowAxis, const char* colAxis) const
    {
        Heatmap h;
        h.values = m;
        h.rowLabels = indexLabels(m.rows());
        h.colLabels = indexLabels(m.cols());
        h.rowAxis = rowAxis;
        h.colAxis = colAxis;
        return h;
    }

    attn::Expected<Heatmap> panel(PanelKind k, int head) const
    {
        const char* kindName = info(k).name;
        const bool direct = s.config.mode == attn::Mode::Direct;
        auto need = [&](bool ok, const std::string& why) -> attn::Status {
            return ok ? attn::Status{} : attn::invalidArgument(std::string("panel ") + kindName + ": " + why);
        };
        attn::Status st;
        Heatmap h;
        const attn::HeadResult& hr = r.heads[std::size_t(head)];
        switch (k) {
        case PanelKind::X:
            if (!(st = need(!direct, "direct mode has no X")).ok()) return st;
            h = tokenRows(rowOf(s.input.X), qTokens, "query", "d_{model}");
            break;
        case PanelKind::Xkv:
            if (!(st = need(s.config.mode == attn::Mode::Cross, "the session is not in cross mode")).ok()) return st;
            h = tokenRows(rowOf(s.input.Xkv), kTokens, "key", "d_{model}");
            break;
        case PanelKind::Wq:
        case PanelKind::Wk:
        case PanelKind::Wv: {
            if (!(st = need(!direct, "direct mode has no projection weights")).ok()) return st;
            const attn::Matrix& w = k == PanelKind::Wq ? s.input.Wq : k == PanelKind::Wk ? s.input.Wk : s.input.Wv;
            const int width = k == PanelKind::Wq ? d.dq : k == PanelKind::Wk ? d.dk : d.dv;
            h = plain(rowOf(w).middleCols(Eigen::Index(head) * width, width), "d_{model}",
                      k == PanelKind::Wv ? "d_{v}" : "d_{k}");
            break;
        }
        case PanelKind::Wo:
            if (!(st = need(s.input.Wo.size() > 0, "the session has no W_O")).ok()) return st;
            h = plain(rowOf(s.input.Wo).middleRows(Eigen::Index(head) * d.dv, d.dv), "d_{v}", "d_{out}");
            break;
        case PanelKind::Q: h = tokenRows(rowOf(hr.Q), qTokens, "query", "d_{k}"); break;
        case PanelKind::K: h = tokenRows(rowOf(hr.K), kTokens, "key", "d_{k}"); break;
        case PanelKind::V: h = tokenRows(rowOf(hr.V), kTokens, "key", "d_{v}"); break;
        case PanelKind::Scores:
        case PanelKind::Weights:
            h.values = rowOf(k == PanelKind::Scores ? hr.scores : hr.weights);
            h.masked = rowOf(hr.masked);
            h.rowLabels = tokenLabels(qTokens, h.values.rows());
            h.colLabels = tokenLabels(kTokens, h.values.cols());
            h.rowLabelsAreTokens = qTokens.size() == std::size_t(h.values.rows());
            h.colLabelsAreTokens = kTokens.size() == std::size_t(h.values.cols());
            h.rowAxis = "query";
            h.colAxis = "key";
            break;
        case PanelKind::Output: h = tokenRows(rowOf(hr.output), qTokens, "query", "d_{v}"); break;
        case PanelKind::Final: h = tokenRows(rowOf(r.output), qTokens, "query", "d_{out}"); break;
        case PanelKind::Chain: return attn::invalidArgument("panel chain: not a single panel");
        }
        if (column) {  // back to the session's own orientation
            h.values.transposeInPlace();
            if (h.masked.size() > 0) h.masked.transposeInPlace();
            std::swap(h.rowLabels, h.colLabels);
            std::swap(h.rowLabelsAreTokens, h.colLabelsAreTokens);
            std::swap(h.rowAxis, h.colAxis);
        }
        h.colorbarLabel = info(k).colorbarLabel;
        return h;
    }
};

void setRange(Heatmap& h, attn::Colormap cmap)
{
    h.cmap = cmap;
    h.range = attn::displayRange(h.values, h.masked.size() > 0 ? &h.masked : nullptr, attn::isDiverging(cmap));
}

} // namespace

std::vector<std::string> indexLabels(Eigen::Index n)
{
    std::vector<std::string> v;
    for (Eigen::Index i = 0; i < n; ++i) v.push_back(std::to_string(i));
    return v;
}

std::string clipLabel(const std::string& s, std::size_t maxChars)
{
    std::size_t chars = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // a UTF-8 continuation byte
        if (chars++ == maxChars) return s.substr(0, i) + "…";
    }
    return s;
}

std::vector<std::string> tokenLabels(const std::vector<std::string>& tokens, Eigen::Index n)
{
    if (Eigen::Index(tokens.size()) != n) return indexLabels(n);
    std::vector<std::string> out;
    out.reserve(tokens.size());
    for (const std::string& t : tokens) out.push_back(clipLabel(t, kMaxLabelChars));
    return out;
}

const char* toString(PanelKind k) { return info(k).name; }

std::optional<PanelKind> panelKindFromString(std::string_view s)
{
    for (const KindInfo& i : kKinds)
        if (s == i.name) return i.kind;
    return std::nullopt;
}

std::string panelKindList()
{
    std::string out;
    for (const KindInfo& i : kKinds) out += (out.empty() ? "" : "|") + std::string(i.name);
    return out;
}

attn::Colormap defaultColormap(PanelKind k) { return k == PanelKind::Weights ? attn::Colormap::Viridis : attn::Colormap::RdBu; }

attn::Expected<Figure> buildFigure(const attn::Session& s, const attn::AttentionResult& result, const FigureOptions& opt)
{
    attn::Expected<attn::Dims> dims = attn::validate(s.input, s.config);
    if (!dims) return dims.status();
    if (result.heads.size() != std::size_t(dims->H))
        return attn::invalidArgument("figure: the result has " + std::to_string(result.heads.size()) +
                                     " heads, the session " + std::to_string(dims->H) + " (stale result?)");
    const int H = dims->H;
    if (opt.head >= H)
        return attn::invalidArgument("head " + std::to_string(opt.head) + ": the session has " + std::to_string(H) +
                                     " head" + (H == 1 ? "" : "s") + " (0.." + std::to_string(H - 1) + ")");
    Builder b{s, result, *dims, s.queryTokens, s.keyTokens, s.config.layout == attn::Layout::Column};
    if (b.kTokens.empty() && s.config.mode == attn::Mode::Self) b.kTokens = b.qTokens;

    const KindInfo& ki = info(opt.panel);
    Figure f;
    f.annotate = opt.annotate;
    f.subtitle = clipLabel(s.name, kMaxTitleChars);
    f.title = clipLabel(opt.title ? *opt.title : ki.title, kMaxTitleChars);

    if (opt.panel == PanelKind::Chain) {
        const int head = std::max(0, opt.head);
        std::vector<PanelKind> kinds;
        if (s.config.mode != attn::Mode::Direct) kinds.push_back(PanelKind::X);
        if (s.config.mode == attn::Mode::Cross) kinds.push_back(PanelKind::Xkv);
        for (PanelKind k : {PanelKind::Q, PanelKind::K, PanelKind::V, PanelKind::Scores, PanelKind::Weights, PanelKind::Output})
            kinds.push_back(k);
        for (PanelKind k : kinds) {
            attn::Expected<Heatmap> h = b.panel(k, head);
            if (!h) return h.status();
            setRange(*h, opt.cmap ? *opt.cmap : defaultColormap(k));
            h->title = info(k).panelTitle;
            if (k == PanelKind::Scores) {
                const bool col = s.config.layout == attn::Layout::Column;
                const std::string qk = col ? "K^{T}·Q" : "Q·K^{T}";
                h->title = s.config.score == attn::Score::Additive ? "scores = w_{v}·tanh(q·A_{q} + k·A_{k})"
                           : s.config.scale ? "scores = " + qk + "·" + attn::formatValue(*s.config.scale)
                           : s.config.score == attn::Score::Dot ? "scores = " + qk
                                                                : "scores = " + qk + " / √d_{k}";
            }
            if (s.config.mode == attn::Mode::Cross && (k == PanelKind::K || k == PanelKind::V))
                h->title = k == PanelKind::K ? "K = X_{kv}·W_{K}" : "V = X_{kv}·W_{V}";
            if (s.config.mode == attn::Mode::Direct && (k == PanelKind::Q || k == PanelKind::K || k == PanelKind::V))
                h->title = k == PanelKind::Q ? "Q" : k == PanelKind::K ? "K" : "V";
            f.panels.push_back(std::move(*h));
        }
        f.columns = 4;
        f.sharedColorbar = false;
        if (H > 1 && !opt.title) f.title += " (head " + std::to_string(head) + ")";
        return f;
    }

    std::vector<int> heads;
    if (!ki.perHead) heads = {0};
    else if (opt.head >= 0) heads = {opt.head};
    else for (int h = 0; h < H; ++h) heads.push_back(h);
    const attn::Colormap cmap = opt.cmap ? *opt.cmap : defaultColormap(opt.panel);
    std::vector<attn::DisplayRange> ranges;
    for (int head : heads) {
        attn::Expected<Heatmap> h = b.panel(opt.panel, head);
        if (!h) return h.status();
        setRange(*h, cmap);
        if (ki.perHead && (heads.size() > 1 || H > 1)) h->title = "head " + std::to_string(head);
        ranges.push_back(h->range);
        f.panels.push_back(std::move(*h));
    }
    const int n = int(f.panels.size());
    f.columns = n <= 3 ? n : n == 4 ? 2 : n <= 9 ? 3 : 4;
    f.sharedColorbar = opt.sharedRange || n == 1;
    f.sharedAxes = n > 1;
    f.colorbarLabel = ki.colorbarLabel;
    if (f.sharedColorbar && n > 1) {
        const attn::DisplayRange u = attn::unionRange(ranges, attn::isDiverging(cmap));
        for (Heatmap& h : f.panels) h.range = u;
    }
    return f;
}

} // namespace app::fig
