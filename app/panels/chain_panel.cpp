// The chain: X (and X_kv) → W^Q, W^K, W^V → Q, K, V → per head: scores → mask → weights → output → concat →
// W^O → output, laid out left to right, every matrix titled with its name and shape. All numbers come from
// the document's last good attn::AttentionResult; display ranges from attn::displayRange.
//
// [SECTION] Display ranges (cached per result)
// [SECTION] Heatmap specs for each kind of matrix
// [SECTION] Interaction: key padding, custom mask painting, hover, zoom
// [SECTION] Tooltips and the formula
// [SECTION] drawChainPanel
#include "panels/matrix_editor.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace app {
namespace {

// -----------------------------------------------------------------------------------------------------
// [SECTION] Display ranges (cached per result)
// -----------------------------------------------------------------------------------------------------

// Display ranges are computed by core once per result, with the result (Document::ranges(): on the compute
// worker, not in a frame: at n=4096, h=8 that is 256M values per kind of map).
ResultRanges g_ranges;
std::uint64_t g_rangesGeneration = ~std::uint64_t(0);
const Document* g_rangesDoc = nullptr;  // two documents (bench --gui, tests) may share generation numbers

bool symmetricFor(const AppState& s, HeatmapKind k) { return attn::isDiverging(s.view.colormaps[static_cast<int>(k)]); }

void updateRanges(AppState& s)
{
    RangeOptions o;
    o.projection = symmetricFor(s, HeatmapKind::Projection);
    o.scores = symmetricFor(s, HeatmapKind::Scores);
    o.weights = symmetricFor(s, HeatmapKind::Weights);
    o.output = symmetricFor(s, HeatmapKind::Output);
    o.shared = s.view.sharedRange;
    s.doc.setRangeOptions(o);
    if (g_rangesGeneration == s.doc.resultGeneration() && g_rangesDoc == &s.doc && g_ranges.options == o && g_ranges.valid) return;
    g_rangesGeneration = s.doc.resultGeneration();
    g_rangesDoc = &s.doc;
    g_ranges = s.doc.ranges();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Heatmap specs for each kind of matrix
// -----------------------------------------------------------------------------------------------------

bool isColumn(const AppState& s) { return s.doc.session().config.layout == attn::Layout::Column; }

const std::vector<std::string>* queryLabels(const AppState& s)
{
    const auto& t = s.doc.session().queryTokens;
    return t.empty() ? nullptr : &t;
}
const std::vector<std::string>* keyLabels(const AppState& s)
{
    const auto& t = s.doc.session().keyTokens;
    return t.empty() ? nullptr : &t;
}

// Base cell size: about 200 px for the largest token count, between 3 and 25 px (25 fits "0.25" in the value font), times the zoom.
float cellSize(const AppState& s)
{
    const Sizes z = s.doc.sizes();
    const int n = std::max({z.n, z.nkv, 1});
    return std::clamp(200.0f / static_cast<float>(n), 3.0f, 25.0f) * s.view.zoom;
}

// A heatmap of a token × feature matrix (Q, K, V, outputs): tokens on rows in Row layout, on columns in Column.
HeatmapSpec tokenFeatureSpec(const AppState& s, const std::string& key, const attn::Matrix& m, HeatmapKind kind,
                             const attn::DisplayRange& range, bool queryTokens, int headBlock = 0)
{
    HeatmapSpec spec;
    spec.key = key;
    spec.src.values = &m;
    spec.src.range = range;
    spec.src.colormap = s.view.colormaps[static_cast<int>(kind)];
    spec.src.generation = s.doc.resultGeneration() * 4 + static_cast<std::uint64_t>(kind);
    spec.cellPx = cellSize(s);
    spec.showValues = s.view.showValues;
    const Axis tok = queryTokens ? Axis::Query : Axis::Key;
    const auto* labels = queryTokens ? queryLabels(s) : keyLabels(s);
    const int hov = queryTokens ? s.hoverQuery : s.hoverKey;
    if (isColumn(s)) {
        spec.colAxis = tok;
        spec.colLabels = labels;
        spec.highlightCol = hov;
        spec.rowBlock = headBlock;
    } else {
        spec.rowAxis = tok;
        spec.rowLabels = labels;
        spec.highlightRow = hov;
        spec.colBlock = headBlock;
    }
    return spec;
}

// Scores/weights: Row T×S (queries on rows), Column S×T.
HeatmapSpec queryKeySpec(const AppState& s, const std::string& key, const attn::Matrix& m, const attn::MaskMatrix& mask,
                         HeatmapKind kind, const attn::DisplayRange& range)
{
    HeatmapSpec spec;
    spec.key = key;
    spec.src.values = &m;
    spec.src.mask = &mask;
    spec.src.range = range;
    spec.src.colormap = s.view.colormaps[static_cast<int>(kind)];
    spec.src.generation = s.doc.resultGeneration() * 4 + static_cast<std::uint64_t>(kind);
    spec.cellPx = cellSize(s);
    spec.showValues = s.view.showValues;
    const auto& pad = s.doc.session().input.mask.keyPadding;
    if (isColumn(s)) {
        spec.rowAxis = Axis::Key;
        spec.colAxis = Axis::Query;
        spec.rowLabels = keyLabels(s);
        spec.colLabels = queryLabels(s);
        spec.highlightRow = s.hoverKey;
        spec.highlightCol = s.hoverQuery;
        spec.rowLabelMarked = pad;
    } else {
        spec.rowAxis = Axis::Query;
        spec.colAxis = Axis::Key;
        spec.rowLabels = queryLabels(s);
        spec.colLabels = keyLabels(s);
        spec.highlightRow = s.hoverQuery;
        spec.highlightCol = s.hoverKey;
        spec.colLabelMarked = pad;
    }
    return spec;
}

// Marks a per-head heatmap as also held in device memory (a result of the CUDA backend), so the GL renderer
// can fill its texture from there instead of uploading the host copy. Not while the worker computes: it may
// be overwriting those device buffers with the next result (the host copy is the shown result's own).
void fromDevice(HeatmapSpec& spec, const attn::AttentionResult& r, attn::DeviceMatrix which, int head, bool computing)
{
    spec.src.deviceGeneration = computing ? 0 : r.deviceGeneration;
    spec.src.deviceMatrix = which;
    spec.src.deviceHead = head;
}

// (query, key) of a hovered cell of a query × key map.
std::pair<int, int> queryKeyOf(const AppState& s, const HeatmapHit& hit)
{
    return isColumn(s) ? std::pair{hit.col, hit.row} : std::pair{hit.row, hit.col};
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Interaction: key padding, custom mask painting, hover, zoom
// -----------------------------------------------------------------------------------------------------

void toggleKeyPadding(AppState& s, int key)
{
    if (key < 0) return;
    s.doc.edit([&](attn::Session& ss) {
        auto& pad = ss.input.mask.keyPadding;
        const int S = ss.config.mode == attn::Mode::Self ? static_cast<int>(ss.input.X.rows())
                      : ss.config.mode == attn::Mode::Cross ? static_cast<int>(ss.input.Xkv.rows())
                                                            : static_cast<int>(ss.input.K.rows());
        if (static_cast<int>(pad.size()) != S) pad.assign(static_cast<std::size_t>(S), 0);
        if (key < S) pad[static_cast<std::size_t>(key)] ^= 1;
        if (std::none_of(pad.begin(), pad.end(), [](std::uint8_t v) { return v != 0; })) pad.clear();
    });
}

// Painting the custom mask on the weights (canonical T×S storage).
void paintCustomMask(AppState& s, const HeatmapHit& hit)
{
    const auto [q, k] = queryKeyOf(s, hit);
    if (!s.paintMask || q < 0) return;
    const Sizes z = s.doc.sizes();
    const int S = s.doc.session().config.mode == attn::Mode::Self ? z.n : z.nkv;
    const attn::MaskMatrix& cur = s.doc.session().input.mask.custom;
    if (hit.pressed) {
        const bool was = cur.rows() == z.n && cur.cols() == S && cur(q, k);
        s.paintValue = was ? 0 : 1;
        s.doc.beginGesture();
    }
    if (s.paintValue < 0 || !hit.held) return;
    const bool now = cur.rows() == z.n && cur.cols() == S && cur(q, k);
    if (now == (s.paintValue == 1)) return;
    s.doc.applyInGesture([&](attn::Session& ss) {
        auto& m = ss.input.mask.custom;
        if (m.rows() != z.n || m.cols() != S) m = attn::MaskMatrix::Zero(z.n, S);
        m(q, k) = static_cast<std::uint8_t>(s.paintValue);
    });
}

void noteHover(AppState& s, const HeatmapSpec& spec, const HeatmapHit& hit)
{
    if (hit.row < 0) return;
    if (spec.rowAxis == Axis::Query) s.nextHoverQuery = hit.row;
    if (spec.rowAxis == Axis::Key) s.nextHoverKey = hit.row;
    if (spec.colAxis == Axis::Query) s.nextHoverQuery = hit.col;
    if (spec.colAxis == Axis::Key) s.nextHoverKey = hit.col;
}

void handleZoom(AppState& s, const HeatmapHit& hit)
{
    // Each wheel notch zooms by 1.25×, within 0.25…8 (from a few pixels per cell to very large cells).
    if (hit.zoomWheel != 0) s.view.zoom = std::clamp(s.view.zoom * std::pow(1.25f, hit.zoomWheel), 0.25f, 8.0f);
}

void title(const char* text)
{
    ImGui::TextUnformatted(text);
}

void arrow()
{
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::Dummy(ImVec2(1, 30));
    ImGui::TextDisabled("→");
    ImGui::EndGroup();
    ImGui::SameLine();
}

std::string shapeTitle(const char* name, const attn::Matrix& m, const char* rowName, const char* colName)
{
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s  %ld×%ld  [%s × %s]", name, static_cast<long>(m.rows()), static_cast<long>(m.cols()),
                  rowName, colName);
    return buf;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Tooltips and the formula
// -----------------------------------------------------------------------------------------------------

void hoverWeightTooltip(const AppState& s, const attn::HeadResult& hr, int q, int k, bool showWeight)
{
    const bool col = isColumn(s);
    const int r = col ? k : q, c = col ? q : k;
    const attn::AttentionResult& res = s.doc.result();
    ImGui::BeginTooltip();
    ImGui::Text("query %d '%s'   key %d '%s'", q, axisLabel(queryLabels(s), q).c_str(), k, axisLabel(keyLabels(s), k).c_str());
    const attn::Score sc = s.doc.session().config.score;
    if (sc == attn::Score::Additive) ImGui::Text("score w_vᵀ·tanh(q·A_q + k·A_k) = %s", attn::formatValue(hr.scores(r, c), 5).c_str());
    else ImGui::Text("score = (q·k) × scale = %s", attn::formatValue(hr.scores(r, c), 5).c_str());
    ImGui::Text("scale = %s", attn::formatValue(res.scale, 5).c_str());
    const bool masked = hr.masked(r, c) != 0;
    ImGui::Text("masked: %s", masked ? "yes (score replaced by the fill)" : "no");
    if (showWeight) ImGui::Text("softmax weight p = %s", attn::formatValue(hr.weights(r, c), 5).c_str());
    ImGui::EndTooltip();
}

void hoverOutputTooltip(const AppState& s, const attn::HeadResult& hr, int q, int f)
{
    const bool col = isColumn(s);
    const int S = static_cast<int>(col ? hr.weights.rows() : hr.weights.cols());
    ImGui::BeginTooltip();
    ImGui::Text("output[%d][%d] of query '%s' = Σ_j p_%dj · v_j[%d]", q, f, axisLabel(queryLabels(s), q).c_str(), q, f);
    // The terms, as core computed them (at most 12 listed: the rest are summarised).
    constexpr int kMaxTerms = 12;
    for (int j = 0; j < std::min(S, kMaxTerms); ++j) {
        const float p = col ? hr.weights(j, q) : hr.weights(q, j);
        const float v = col ? hr.V(f, j) : hr.V(j, f);
        ImGui::Text("  j=%d '%s':  p = %s  ×  v = %s", j, axisLabel(keyLabels(s), j).c_str(), attn::formatValue(p, 4).c_str(),
                    attn::formatValue(v, 4).c_str());
    }
    if (S > kMaxTerms) ImGui::Text("  … %d more keys", S - kMaxTerms);
    ImGui::Text("= %s", attn::formatValue(col ? hr.output(f, q) : hr.output(q, f), 5).c_str());
    ImGui::EndTooltip();
}

void valueTooltip(const AppState& s, const HeatmapSpec& spec, const HeatmapHit& hit, const char* name)
{
    const attn::Matrix& m = *spec.src.values;
    ImGui::BeginTooltip();
    const int tok = spec.rowAxis != Axis::Feature ? hit.row : hit.col;
    const bool isQuery = spec.rowAxis == Axis::Query || spec.colAxis == Axis::Query;
    ImGui::Text("%s[%d][%d] = %s", name, hit.row, hit.col, attn::formatValue(m(hit.row, hit.col), 6).c_str());
    ImGui::Text("%s '%s'", isQuery ? "query" : "key", axisLabel(isQuery ? queryLabels(s) : keyLabels(s), tok).c_str());
    ImGui::EndTooltip();
}

std::string formulaText(const AppState& s)
{
    const attn::AttentionConfig& cfg = s.doc.session().config;
    const bool col = cfg.layout == attn::Layout::Column;
    std::string sc;
    switch (cfg.score) {
    case attn::Score::ScaledDot: sc = cfg.scale ? (col ? "KᵀQ·s" : "QKᵀ·s") : (col ? "KᵀQ/√d_k" : "QKᵀ/√d_k"); break;
    case attn::Score::Dot: sc = cfg.scale ? (col ? "KᵀQ·s" : "QKᵀ·s") : (col ? "KᵀQ" : "QKᵀ"); break;
    case attn::Score::Additive: sc = "w_vᵀ·tanh(q·A_q + k·A_k)"; break;
    }
    if (s.doc.session().input.mask.any()) sc += " + mask";
    std::string f = col ? "V·softmax(" + sc + ")" : "softmax(" + sc + ")·V";
    const int H = s.doc.session().config.heads;
    if (H > 1) f = "concat over " + std::to_string(H) + " heads of " + f;
    if (s.doc.present(MatrixId::Wo)) f = col ? "W^Oᵀ·[" + f + "]" : "[" + f + "]·W^O";
    std::string prefix;
    switch (cfg.mode) {
    case attn::Mode::Self: prefix = col ? "Q = W^Qᵀ·X, K = W^Kᵀ·X, V = W^Vᵀ·X;   " : "Q = X·W^Q, K = X·W^K, V = X·W^V;   "; break;
    case attn::Mode::Cross: prefix = col ? "Q = W^Qᵀ·X, K = W^Kᵀ·X_kv, V = W^Vᵀ·X_kv;   " : "Q = X·W^Q, K = X_kv·W^K, V = X_kv·W^V;   "; break;
    case attn::Mode::Direct: prefix = "Q, K, V given;   "; break;
    }
    return prefix + "output = " + f;
}

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] drawChainPanel
// -----------------------------------------------------------------------------------------------------

void drawChainPanel(AppState& state)
{
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + kControlsWidth, vp->WorkPos.y));
    ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x - kControlsWidth, vp->WorkSize.y - kStatusBarHeight));
    ImGui::Begin("Attention chain", nullptr,
                 ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                     ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoBringToFrontOnFocus);
    const std::string formula = formulaText(state);
    ImGui::TextUnformatted(formula.c_str());
    state.recordRect("formula", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (!state.doc.lastError().ok())
        ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "Not computed: %s (showing the last good result)",
                           state.doc.lastError().message.c_str());
    ImGui::Separator();

    const attn::Session& ss = state.doc.session();
    const bool direct = ss.config.mode == attn::Mode::Direct;
    const bool cross = ss.config.mode == attn::Mode::Cross;
    const ImVec2 editorMax(260, 230);  // wider or taller inputs scroll inside this box

    // ---- Column 1: inputs -------------------------------------------------------------------------------
    ImGui::BeginGroup();
    if (direct) {
        for (MatrixId id : {MatrixId::Q, MatrixId::K, MatrixId::V}) drawMatrixEditor(state, id, editorMax);
    } else {
        drawMatrixEditor(state, MatrixId::X, editorMax);
        if (cross) drawMatrixEditor(state, MatrixId::Xkv, editorMax);
        for (MatrixId id : {MatrixId::Wq, MatrixId::Wk, MatrixId::Wv}) drawMatrixEditor(state, id, editorMax);
        for (MatrixId id : {MatrixId::Bq, MatrixId::Bk, MatrixId::Bv})
            if (state.doc.present(id)) drawMatrixEditor(state, id, editorMax);
    }
    if (ss.config.score == attn::Score::Additive)
        for (MatrixId id : {MatrixId::Aq, MatrixId::Ak, MatrixId::Wv_additive}) drawMatrixEditor(state, id, editorMax);
    ImGui::EndGroup();

    // While the worker computes, the last complete result is shown, unless its shape (sizes, heads, layout…)
    // no longer matches the session's: the panels then wait for the new one rather than mix the two.
    if (!state.doc.hasResult() || (state.doc.computing() && !state.doc.resultMatchesShape())) {
        ImGui::SameLine();
        ImGui::TextDisabled(state.doc.hasResult() ? "(computing…)" : "(no result yet)");
        ImGui::End();
        return;
    }
    updateRanges(state);
    const attn::AttentionResult& r = state.doc.result();
    const bool col = isColumn(state);

    // ---- Column 2: Q, K, V ------------------------------------------------------------------------------
    arrow();
    ImGui::BeginGroup();
    const char* dqName = direct ? "h·d_q" : "h·d_k";
    struct Proj { const char* name; const attn::Matrix* m; const attn::DisplayRange* range; bool query; const char* tokName; const char* featName; };
    const Proj projs[3] = {{"Q", &r.Q, &g_ranges.q, true, "n", dqName},
                           {"K", &r.K, &g_ranges.k, false, cross || direct ? "n_kv" : "n", "h·d_k"},
                           {"V", &r.V, &g_ranges.v, false, cross || direct ? "n_kv" : "n", "h·d_v"}};
    for (const Proj& p : projs) {
        const std::string t = col ? shapeTitle(p.name, *p.m, p.featName, p.tokName) : shapeTitle(p.name, *p.m, p.tokName, p.featName);
        title(t.c_str());
        const int H = std::max(1, ss.config.heads);
        const int block = H > 1 ? static_cast<int>(col ? p.m->rows() : p.m->cols()) / H : 0;
        HeatmapSpec spec = tokenFeatureSpec(state, std::string("proj/") + p.name, *p.m, HeatmapKind::Projection, *p.range, p.query, block);
        const HeatmapHit hit = drawHeatmap(spec);
        state.recordRect(std::string("heatmap/") + p.name, hit.cellsMin, hit.cellsMax);
        noteHover(state, spec, hit);
        handleZoom(state, hit);
        if (hit.row >= 0) valueTooltip(state, spec, hit, p.name);
        ImGui::SameLine();
        drawColorbar((std::string("cb/") + p.name).c_str(), spec.src.colormap, *p.range,
                     std::max(40.0f, static_cast<float>(p.m->rows()) * spec.cellPx));
    }
    ImGui::EndGroup();

    // ---- Column 3: per head: scores → weights → output ----------------------------------------------------
    arrow();
    ImGui::BeginGroup();
    const int H = static_cast<int>(r.heads.size());
    const char* qn = "n";
    const char* kn = cross || direct ? "n_kv" : "n";
    for (int h = 0; h < H; ++h) {
        const attn::HeadResult& hr = r.heads[static_cast<std::size_t>(h)];
        const std::string hs = std::to_string(h);
        ImGui::PushID(h);
        if (H > 1) {
            const int w = static_cast<int>(col ? hr.Q.rows() : hr.Q.cols());  // this head's block of Q
            ImGui::TextDisabled("head %d of %d  (%s %d…%d of Q)", h + 1, H, col ? "rows" : "columns", h * w, (h + 1) * w - 1);
        }
        // Scores (masked cells hatched: the mask step of the chain).
        ImGui::BeginGroup();
        std::string t = shapeTitle("scores", hr.scores, col ? kn : qn, col ? qn : kn);
        title(t.c_str());
        HeatmapSpec sspec = queryKeySpec(state, "scores/" + hs, hr.scores, hr.masked, HeatmapKind::Scores, g_ranges.scores[static_cast<std::size_t>(h)]);
        fromDevice(sspec, r, attn::DeviceMatrix::Scores, h, state.doc.computing());
        HeatmapHit hit = drawHeatmap(sspec);
        state.recordRect("heatmap/scores/" + hs, hit.cellsMin, hit.cellsMax);
        noteHover(state, sspec, hit);
        handleZoom(state, hit);
        if (hit.row >= 0) {
            auto [q, k] = queryKeyOf(state, hit);
            hoverWeightTooltip(state, hr, q, k, false);
        }
        if (hit.colLabelClicked >= 0 && !col) toggleKeyPadding(state, hit.colLabelClicked);
        if (hit.rowLabelClicked >= 0 && col) toggleKeyPadding(state, hit.rowLabelClicked);
        ImGui::EndGroup();
        ImGui::SameLine();
        if (h == H - 1 || !state.view.sharedRange)
            drawColorbar("cbs", sspec.src.colormap, sspec.src.range, std::max(40.0f, static_cast<float>(hr.scores.rows()) * sspec.cellPx));
        else
            ImGui::Dummy(ImVec2(kColorbarWidth, 1));
        ImGui::SameLine();
        // Weights (paint the custom mask here; click a key label to pad it).
        ImGui::BeginGroup();
        t = shapeTitle("weights", hr.weights, col ? kn : qn, col ? qn : kn);
        title(t.c_str());
        HeatmapSpec wspec = queryKeySpec(state, "weights/" + hs, hr.weights, hr.masked, HeatmapKind::Weights, g_ranges.weights[static_cast<std::size_t>(h)]);
        fromDevice(wspec, r, attn::DeviceMatrix::Weights, h, state.doc.computing());
        hit = drawHeatmap(wspec);
        state.recordRect("heatmap/weights/" + hs, hit.cellsMin, hit.cellsMax);
        noteHover(state, wspec, hit);
        handleZoom(state, hit);
        if (hit.row >= 0) {
            auto [q, k] = queryKeyOf(state, hit);
            hoverWeightTooltip(state, hr, q, k, true);
        }
        paintCustomMask(state, hit);
        if (hit.colLabelClicked >= 0 && !col) toggleKeyPadding(state, hit.colLabelClicked);
        if (hit.rowLabelClicked >= 0 && col) toggleKeyPadding(state, hit.rowLabelClicked);
        ImGui::EndGroup();
        ImGui::SameLine();
        if (h == H - 1 || !state.view.sharedRange)
            drawColorbar("cbw", wspec.src.colormap, wspec.src.range, std::max(40.0f, static_cast<float>(hr.weights.rows()) * wspec.cellPx));
        else
            ImGui::Dummy(ImVec2(kColorbarWidth, 1));
        ImGui::SameLine();
        // Head output.
        ImGui::BeginGroup();
        t = col ? shapeTitle("output", hr.output, "d_v", qn) : shapeTitle("output", hr.output, qn, "d_v");
        title(t.c_str());
        HeatmapSpec ospec = tokenFeatureSpec(state, "headout/" + hs, hr.output, HeatmapKind::Output, g_ranges.headOut[static_cast<std::size_t>(h)], true);
        fromDevice(ospec, r, attn::DeviceMatrix::Output, h, state.doc.computing());
        hit = drawHeatmap(ospec);
        state.recordRect("heatmap/headout/" + hs, hit.cellsMin, hit.cellsMax);
        noteHover(state, ospec, hit);
        handleZoom(state, hit);
        if (hit.row >= 0) hoverOutputTooltip(state, hr, col ? hit.col : hit.row, col ? hit.row : hit.col);
        ImGui::EndGroup();
        if (h == H - 1 || !state.view.sharedRange) {
            ImGui::SameLine();
            drawColorbar("cbo", ospec.src.colormap, ospec.src.range, std::max(40.0f, static_cast<float>(hr.output.rows()) * ospec.cellPx));
        }
        if (!hr.fullyMaskedQueries.empty())
            ImGui::TextColored(ImVec4(1, 0.7f, 0.3f, 1), "%zu quer%s fully masked: weights 0, output 0",
                               hr.fullyMaskedQueries.size(), hr.fullyMaskedQueries.size() == 1 ? "y" : "ies");
        ImGui::PopID();
    }
    ImGui::EndGroup();

    // ---- Column 4: concat → W^O → output (with one head and no W^O the head's output is the output) ----------
    if (H == 1 && !state.doc.present(MatrixId::Wo)) {
        ImGui::End();
        return;
    }
    arrow();
    ImGui::BeginGroup();
    if (H > 1 || state.doc.present(MatrixId::Wo)) {
        const std::string t = col ? shapeTitle("concat", r.concat, "h·d_v", qn) : shapeTitle("concat", r.concat, qn, "h·d_v");
        title(t.c_str());
        const int block = H > 1 ? static_cast<int>(col ? r.concat.rows() : r.concat.cols()) / H : 0;
        HeatmapSpec spec = tokenFeatureSpec(state, "concat", r.concat, HeatmapKind::Output, g_ranges.concat, true, block);
        const HeatmapHit hit = drawHeatmap(spec);
        noteHover(state, spec, hit);
        if (hit.row >= 0) valueTooltip(state, spec, hit, "concat");
        ImGui::SameLine();
        drawColorbar("cbc", spec.src.colormap, g_ranges.concat, std::max(40.0f, static_cast<float>(r.concat.rows()) * spec.cellPx));
    }
    if (state.doc.present(MatrixId::Wo)) {
        drawMatrixEditor(state, MatrixId::Wo, editorMax);
        if (state.doc.present(MatrixId::Bo)) drawMatrixEditor(state, MatrixId::Bo, editorMax);
    }
    {
        const char* on = state.doc.present(MatrixId::Wo) ? "d_out" : "h·d_v";
        const std::string t = col ? shapeTitle("output", r.output, on, qn) : shapeTitle("output", r.output, qn, on);
        title(t.c_str());
        HeatmapSpec spec = tokenFeatureSpec(state, "output", r.output, HeatmapKind::Output, g_ranges.output, true);
        const HeatmapHit hit = drawHeatmap(spec);
        state.recordRect("heatmap/output", hit.cellsMin, hit.cellsMax);
        noteHover(state, spec, hit);
        if (hit.row >= 0) valueTooltip(state, spec, hit, "output");
        ImGui::SameLine();
        drawColorbar("cbout", spec.src.colormap, g_ranges.output, std::max(40.0f, static_cast<float>(r.output.rows()) * spec.cellPx));
    }
    ImGui::EndGroup();
    ImGui::End();
}

} // namespace app
