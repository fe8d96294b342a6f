// Building a figure description from a session and its result.
#include "figure/figure.h"

#include "view/heatmap_description.h"

#include <attnscope/attention.h>

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

view::MapKind mapKindOf(PanelKind k)
{
    switch (k) {
    case PanelKind::X: return view::MapKind::X;
    case PanelKind::Xkv: return view::MapKind::Xkv;
    case PanelKind::Wq: return view::MapKind::Wq;
    case PanelKind::Wk: return view::MapKind::Wk;
    case PanelKind::Wv: return view::MapKind::Wv;
    case PanelKind::Wo: return view::MapKind::Wo;
    case PanelKind::Q: return view::MapKind::HeadQ;
    case PanelKind::K: return view::MapKind::HeadK;
    case PanelKind::V: return view::MapKind::HeadV;
    case PanelKind::Scores: return view::MapKind::Scores;
    case PanelKind::Weights: return view::MapKind::Weights;
    case PanelKind::Output: return view::MapKind::HeadOut;
    case PanelKind::Final:
    case PanelKind::Chain: return view::MapKind::Output;
    }
    return view::MapKind::Weights;
}

// One panel from the heatmap's description (view/heatmap_description.h), the one the window draws from:
// numbers, masks, token labels and axis titles in the session's own orientation.
attn::Expected<Heatmap> panelOf(const attn::Session& s, const attn::AttentionResult& r, PanelKind k, int head)
{
    if (k == PanelKind::Chain) return attn::invalidArgument("panel chain: not a single panel");
    attn::Expected<view::MapDescription> d = view::describeMap(s, r, mapKindOf(k), head);
    if (!d) return d.status();
    Heatmap h;
    h.values = d->whole() ? *d->source : d->values();
    if (d->masked) h.masked = *d->masked;
    h.rowLabels = d->row.tokens ? tokenLabels(*d->row.tokens, h.values.rows()) : indexLabels(h.values.rows());
    h.colLabels = d->col.tokens ? tokenLabels(*d->col.tokens, h.values.cols()) : indexLabels(h.values.cols());
    h.rowLabelsAreTokens = d->row.tokens != nullptr;
    h.colLabelsAreTokens = d->col.tokens != nullptr;
    h.rowAxis = d->row.title;
    h.colAxis = d->col.title;
    h.colorbarLabel = info(k).colorbarLabel;
    h.keys = view::keyCount(*d);
    return h;
}

// The range as the window draws the same map (view::drawnRange: weights over 0…1 unless the view says auto,
// on the view's colour scale: log past attn::kLogScaleKeys keys unless it says otherwise; row max divides each
// query's weights by its largest). The colorbar's label names a scale other than linear.
void setRange(Heatmap& h, attn::Colormap cmap, PanelKind k, const FigureOptions& opt)
{
    h.cmap = cmap;
    const attn::WeightsScale scale =
        k == PanelKind::Weights ? attn::resolveWeightsScale(opt.weightsScale, h.keys) : attn::WeightsScale::Linear;
    if (scale == attn::WeightsScale::RowMax) h.values = attn::rowMaxNormalized(h.values, h.colAxis == "key");
    const attn::DisplayRange data =
        attn::displayRange(h.values, h.masked.size() > 0 ? &h.masked : nullptr, attn::isDiverging(cmap));
    h.range = view::drawnRange(k == PanelKind::Weights ? view::MapKind::Weights : view::MapKind::Output, data,
                               opt.fixedWeightsRange, scale);
    if (scale == attn::WeightsScale::Log) h.colorbarLabel += " (log scale)";
    if (scale == attn::WeightsScale::RowMax) h.colorbarLabel += " ÷ its query's largest";
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
    for (const KindInfo& i : kKinds) {
        if (!out.empty()) out += '|';
        out += i.name;
    }
    return out;
}

attn::Colormap defaultColormap(PanelKind k) { return k == PanelKind::Weights ? attn::Colormap::Viridis : attn::Colormap::RdBu; }

attn::Expected<Figure> buildFigure(const attn::Session& s, const attn::AttentionResult& result, const FigureOptions& opt)
{
    // A figure draws whole maps: a result whose maps stayed on the device needs them back first (attn::fetchDeviceMaps).
    // The window's exports compute their own result on the CPU (state/export_actions.h), so this is a caller's slip.
    if (result.mapsOnDevice)
        return attn::makeError(attn::StatusCode::InvalidArgument,
                               "figure: the result's maps are still on the GPU; bring them back first (attn::fetchDeviceMaps)");
    attn::Expected<attn::Dims> dims = attn::validate(s.input, s.config);
    if (!dims) return dims.status();
    if (result.heads.size() != std::size_t(dims->H))
        return attn::invalidArgument("figure: the result has " + std::to_string(result.heads.size()) +
                                     " heads, the session " + std::to_string(dims->H) + " (stale result?)");
    const int H = dims->H;
    if (opt.head >= H)
        return attn::invalidArgument("head " + std::to_string(opt.head) + ": the session has " + std::to_string(H) +
                                     " head" + (H == 1 ? "" : "s") + " (0.." + std::to_string(H - 1) + ")");
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
            attn::Expected<Heatmap> h = panelOf(s, result, k, head);
            if (!h) return h.status();
            setRange(*h, opt.cmap ? *opt.cmap : defaultColormap(k), k, opt);
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
        attn::Expected<Heatmap> h = panelOf(s, result, opt.panel, head);
        if (!h) return h.status();
        setRange(*h, cmap, opt.panel, opt);
        if (ki.perHead && (heads.size() > 1 || H > 1)) h->title = "head " + std::to_string(head);
        ranges.push_back(h->range);
        f.panels.push_back(std::move(*h));
    }
    const int n = int(f.panels.size());
    f.columns = n <= 3 ? n : n == 4 ? 2 : n <= 9 ? 3 : 4;
    f.sharedColorbar = opt.sharedRange || n == 1;
    f.sharedAxes = n > 1;
    f.colorbarLabel = n > 0 ? f.panels.front().colorbarLabel : ki.colorbarLabel;
    if (f.sharedColorbar && n > 1) {
        const attn::DisplayRange u = attn::unionRange(ranges, attn::isDiverging(cmap));
        for (Heatmap& h : f.panels) h.range = u;
    }
    return f;
}

} // namespace app::fig
