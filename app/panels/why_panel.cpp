// Why the model says it (issue 20, docs/interp.md): the views a decoder's grid area can show instead of the
// attention maps — head importance, direct logit attribution, the logit lens, head types and activation
// patching — each about a target token, each recomputed by the worker after every run (the scans row by row,
// the layers nearest the output first). Every number comes from attnscope_model (attnscope/interp.h) through
// state/model_state.h; nothing here computes.
#include "panels/model_panels.h"

#include "figure/figure_render.h"
#include "figure/model_figure.h"
#include "io/array_io.h"
#include "messages.h"
#include "panels/glyph_atlas.h"
#include "render/heatmap_view.h"
#include "state/model_state.h"

#include <attnscope/colormap.h>

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace app {
namespace {

// A token as a label (tokenLabel: visible whitespace), and a token of spaces only as middle dots: a lens cell of
// it looked empty.
std::string visible(const std::string& t)
{
    if (!t.empty() && t.find_first_not_of(' ') == std::string::npos) {
        std::string dots;
        for (std::size_t i = 0; i < t.size(); ++i) dots += "\u00b7";
        return dots;
    }
    return tokenLabel(t);
}

std::vector<std::string> numbered(const char* prefix, int count)
{
    std::vector<std::string> v;
    for (int i = 0; i < count; ++i) v.push_back(prefix + std::to_string(i));
    return v;
}

// An L×H map over the room: cells as large as fit (values printed when they fit), a colour bar, the layers'
// and heads' labels; a click on a head's cell opens that layer and head in the chain view.
struct MapSpec {
    std::string key;                              // the heatmap's texture key: one per map that is shown
    fig::LayerHeadMap map;                        // values, column labels, colormap and range (as saved)
    const attn::MaskMatrix* pending = nullptr;    // rows not computed yet: hatched
    int headColumns = 0;                          // columns that are heads (the rest, e.g. MLP, do not open)
    const char* meaning = "";                     // the tooltip's line for a value, printf with %.4f
};

void drawLayerHeadMap(AppState& state, const MapSpec& ms, ImVec2 size)
{
    ModelState& m = state.model;
    const attn::Matrix& v = ms.map.values;
    const int L = static_cast<int>(v.rows()), C = static_cast<int>(v.cols());
    if (L == 0 || C == 0) return;
    const std::vector<std::string> layerLabels = numbered("L", L);
    const std::vector<std::string> colLabels = ms.map.colLabels.empty() ? numbered("H", C) : ms.map.colLabels;
    const float labelW = ImGui::CalcTextSize("MLP00").x + 14;
    // Column labels turn upright when the cells are narrow: the band above the cells is then as tall as the longest.
    const float upright = ImGui::CalcTextSize("L00").x + 12, flat = ImGui::GetTextLineHeightWithSpacing() + 6;
    const float roomW = size.x - labelW - kColorbarWidth - 24;
    // Layers down the side, or across when that gives larger cells (30 layers × 9 heads in a wide, low room: the
    // cells are then 3× larger and the values fit in them).
    const float cellRows = std::min(roomW / float(C), (size.y - std::max(upright, flat) - 8) / float(L));
    const float cellCols = std::min(roomW / float(L), (size.y - std::max(upright, flat) - 8) / float(C));
    const bool across = cellCols > cellRows;
    const float cell = std::clamp(across ? cellCols : cellRows, 9.0f, 64.0f);
    // Drawn transposed when the layers go across (the renderer reads the values while drawHeatmap runs).
    const bool hasMask = ms.pending && ms.pending->rows() == v.rows() && ms.pending->cols() == v.cols();
    const attn::Matrix values = across ? attn::Matrix(v.transpose()) : v;
    const attn::MaskMatrix mask = !hasMask ? attn::MaskMatrix() : across ? attn::MaskMatrix(ms.pending->transpose()) : *ms.pending;
    HeatmapSpec spec;
    spec.key = ms.key;
    spec.src.values = &values;
    spec.src.mask = hasMask ? &mask : nullptr;
    spec.src.range = ms.map.range;
    spec.src.colormap = ms.map.cmap;
    spec.src.generation = m.why.scan.generation ^ (std::uint64_t(m.shown.id) << 32) ^ (across ? 1u << 31 : 0u);
    spec.cellPx = cell;
    spec.rowLabels = across ? &colLabels : &layerLabels;
    spec.colLabels = across ? &layerLabels : &colLabels;
    spec.maxWidth = size.x - kColorbarWidth - 16;
    spec.maxHeight = size.y - 4;
    const HeatmapHit hit = drawHeatmap(spec);
    state.recordRect("why/map/" + ms.key, hit.cellsMin, hit.cellsMax);
    if (across) state.recordRect("why/map/" + ms.key + "/across", hit.cellsMin, hit.cellsMax);
    ImGui::SameLine();
    drawColorbar((ms.key + "/bar").c_str(), ms.map.cmap, ms.map.range,
                 std::min(kColorbarMaxHeight, std::max(60.0f, hit.cellsMax.y - hit.cellsMin.y)));
    if (hit.row >= 0 && hit.col >= 0) {
        const int layer = across ? hit.col : hit.row, column = across ? hit.row : hit.col;
        const float x = v(layer, column);
        const bool head = column < ms.headColumns;
        const std::string what = head ? "layer " + std::to_string(layer) + ", head " + std::to_string(column)
                                      : "layer " + std::to_string(layer) + ", " + colLabels[static_cast<std::size_t>(column)];
        if (std::isnan(x)) ImGui::SetTooltip("%s: not computed yet (the layers nearest the output come first)", what.c_str());
        else {
            char line[256];
            std::snprintf(line, sizeof line, ms.meaning, x);
            ImGui::SetTooltip("%s\n%s%s", what.c_str(), line, head ? "\nclick: open this head in the chain view" : "");
        }
        if (hit.pressed && head) {
            m.linesLayer = layer;
            m.linesHead = column;
            openLayerInChain(state, layer, column);
        }
    }
}

// The target line of importance and attribution: what is explained, a field to type another token.
void drawTargetRow(AppState& state)
{
    ModelState& m = state.model;
    WhyState& w = m.why;
    const InterpResults& r = w.results;
    ImGui::TextUnformatted("Target");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(140);
    wantGlyphs(w.targetText);
    if (ImGui::InputTextWithHint("##target", "type a token", &w.targetText, ImGuiInputTextFlags_EnterReturnsTrue))
        setWhyTarget(state, w.targetText);
    state.recordRect("why/target_field", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the token to explain, e.g. ' Paris' (a space starts most words); Enter sets it.\n"
                          "Or click a prediction on the right.");
    ImGui::SameLine();
    ImGui::BeginDisabled(w.target < 0);
    if (ImGui::Button("Top prediction")) setWhyTargetId(state, -1);
    ImGui::EndDisabled();
    // The numbers after the controls: on a narrow window they are what gets cut, not the field.
    ImGui::SameLine();
    if (r.valid)
        ImGui::Text("'%s' (id %d): log p = %.3f, p = %.3f, logit %.3f", visible(r.target.token).c_str(), r.target.id,
                    r.target.logprob, std::exp(r.target.logprob), r.target.logit);
    else
        ImGui::TextUnformatted("computing…");
    if (!w.targetError.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", w.targetError.c_str());
    if (!r.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", r.error.c_str());
}

void drawScanStatus(const char* what, int rows, int L, bool done, double ms, const std::string& error)
{
    if (!error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", error.c_str());
    else if (done) ImGui::TextDisabled("%s: all %d layers in %.0f ms", what, L, ms);
    else ImGui::TextDisabled("%s: %d of %d layers (%.0f ms so far; the layers nearest the output first)…", what, rows, L, ms);
}

// The map as saved: the screen's map with a title naming the model and the text.
fig::LayerHeadMap titled(const ModelState& m, fig::LayerHeadMap map, const std::string& title, const std::string& barLabel)
{
    map.title = m.modelName() + ": " + title;
    map.subtitle = "\"" + m.shown.textA + "\"";
    map.colorbarLabel = barLabel;
    return map;
}

// The map of the view as saved: the same numbers, labels, colormap and range as on screen.
void saveWhyMap(AppState& state, const fig::LayerHeadMap& map, int kind)
{
    WhyState& w = state.model.why;
    const std::string path = kind == 0 ? w.exportPath : std::filesystem::path(w.exportPath).replace_extension(".npy").string();
    attn::Status st;
    if (kind == 0) {
        const std::optional<fig::FigureFormat> format = fig::formatFromPath(path);
        if (!format) st = attn::invalidArgument(path + ": expected a .png, .svg or .pdf file name");
        else st = fig::writeFigure(fig::buildLayerHeadFigure(map), path, *format, 2.0);
    } else {
        st = io::writeNpy(path, io::NamedArray{whyFileName(w.view), &map.values, nullptr, nullptr, {}, {}});
    }
    std::error_code ec;
    const std::string where = std::filesystem::absolute(path, ec).string();
    w.exportStatus = st.ok() ? "saved " + (ec ? path : where) : st.message;
    if (st.ok()) postMessage(MessageLevel::Info, w.exportStatus);
    else postError(st.message);
}

// Under a map: its file name, Save figure and Save .npy (asking before overwriting), and where it went.
void drawWhyExportRow(AppState& state, const fig::LayerHeadMap& map)
{
    WhyState& w = state.model.why;
    // Each view starts with a name of its own (setWhyView clears the name while it is a view's default).
    if (w.exportPath.empty()) w.exportPath = std::string(whyFileName(w.view)) + ".pdf";
    ImGui::SetNextItemWidth(std::min(320.0f, ImGui::GetContentRegionAvail().x * 0.5f));
    if (ImGui::InputText("##whyexport", &w.exportPath)) w.overwriteKind = -1;
    const char* labels[] = {"Save figure", "Save .npy"};
    for (int i = 0; i < 2; ++i) {
        ImGui::SameLine();
        if (ImGui::Button(labels[i])) {
            const std::string path = i == 0 ? w.exportPath : std::filesystem::path(w.exportPath).replace_extension(".npy").string();
            std::error_code ec;
            if (std::filesystem::exists(path, ec)) w.overwriteKind = i;
            else saveWhyMap(state, map, i);
        }
        state.recordRect(std::string("why/save/") + std::to_string(i), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(i == 0 ? "the map as a figure: PNG, SVG or PDF from the file name"
                                     : "the map's numbers (layers × columns, float32) as .npy beside the figure's name");
    }
    if (w.overwriteKind >= 0) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "exists:");
        ImGui::SameLine();
        if (ImGui::Button("Overwrite##why")) {
            saveWhyMap(state, map, w.overwriteKind);
            w.overwriteKind = -1;
        }
        state.recordRect("why/overwrite", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::SameLine();
        if (ImGui::Button("Cancel##why")) w.overwriteKind = -1;
    } else if (!w.exportStatus.empty()) {
        ImGui::SameLine();
        ImGui::TextDisabled("%s", w.exportStatus.c_str());
    }
}

void drawImportance(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    WhyState& w = m.why;
    drawTargetRow(state);
    const int L = m.layers();
    const ScanResults& s = w.scan;
    const bool current = s.request == m.shown.id && s.importance.values.rows() == L;
    drawScanStatus("Δ log p(target) with each head ablated alone", current ? s.importance.rows : 0, L,
                   current && s.importance.done, current ? s.importance.ms : 0, s.error);
    if (!current) return;
    MapSpec ms{"importance", fig::signedMap(s.importance.values), &s.importance.pending, m.heads(),
               "Δ log p(target) when ablated: %+.4f nats (negative: the head helps the target)"};
    if (s.importance.done)
        drawWhyExportRow(state, titled(m, ms.map, "Δ log p('" + w.results.target.token + "') with each head ablated", "Δ log p (nats)"));
    drawLayerHeadMap(state, ms, ImVec2(size.x, ImGui::GetContentRegionAvail().y));
}

void drawAttribution(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    WhyState& w = m.why;
    drawTargetRow(state);
    const InterpResults& r = w.results;
    if (!r.valid) return;
    const attn::DirectLogitAttribution& d = r.dla;
    MapSpec ms{"dla", fig::attributionMap(d), nullptr, static_cast<int>(d.heads.cols()),
               "direct contribution to the target's logit: %+.4f"};
    const bool bias = ms.map.colLabels.back() == "b^O";
    drawWhyExportRow(state, titled(m, ms.map, "direct contributions to the logit of '" + r.target.token + "'", "logit"));
    ImGui::TextDisabled("embeddings %+.3f · heads %+.3f · MLPs %+.3f%s · final norm bias %+.3f = logit %.3f", d.embed,
                        d.heads.sum(), d.mlp.sum(), bias ? (" · b^O " + attn::formatValue(d.attnBias.sum())).c_str() : "",
                        d.normBias, d.logit);
    drawLayerHeadMap(state, ms, ImVec2(size.x, ImGui::GetContentRegionAvail().y));
}

// Layers × positions, each cell the layer's top token at that position, coloured by its probability.
void drawLogitLens(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    const InterpResults& r = m.why.results;
    if (!r.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", r.error.c_str());
    if (!r.valid || !m.drun) {
        ImGui::TextUnformatted("computing…");
        return;
    }
    const attn::LogitLens& lens = r.lens;
    const int L = static_cast<int>(lens.top.size());
    const int cols = L > 0 ? static_cast<int>(lens.top[0].size()) : 0;
    ImGui::TextDisabled("Each layer's residual stream read through the final norm and the unembedding: its top token "
                        "at each position (colour: its probability). Hover for the top 5.%s",
                        lens.firstPosition > 0 ? " The last positions only." : "");
    const float labelW = ImGui::CalcTextSize("L00").x + 10;
    const float cellW = std::clamp((size.x - labelW - 16) / float(std::max(cols, 1)), 44.0f, 110.0f);
    const float cellH = ImGui::GetTextLineHeight() + 4;
    ImGui::BeginChild("lens", ImVec2(0, ImGui::GetContentRegionAvail().y), false, ImGuiWindowFlags_HorizontalScrollbar);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const std::vector<std::string>& tokens = m.drun->encoding.tokens;
    auto clipped = [](const std::string& t, float width) {
        std::string s = visible(t);
        while (!s.empty() && ImGui::CalcTextSize(s.c_str()).x > width) {
            // Drop whole UTF-8 characters from the end.
            std::size_t cut = s.size() - 1;
            while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
            s.resize(cut);
        }
        return s;
    };
    // Header: the input token at each position (the lens predicts the token after it).
    for (int c = 0; c < cols; ++c) {
        const int pos = lens.firstPosition + c;
        const std::string t = clipped(tokens[static_cast<std::size_t>(pos)], cellW - 4);
        dl->AddText(ImVec2(o.x + labelW + cellW * float(c) + 2, o.y), ImGui::GetColorU32(ImGuiCol_TextDisabled), t.c_str());
    }
    const float top = o.y + cellH + 2;
    int hoverL = -1, hoverC = -1;
    for (int l = 0; l < L; ++l) {
        const float y = top + cellH * float(L - 1 - l);  // the output layer on top, as the stream rises
        dl->AddText(ImVec2(o.x, y + 2), ImGui::GetColorU32(ImGuiCol_Text), ("L" + std::to_string(l)).c_str());
        for (int c = 0; c < cols; ++c) {
            const auto& top5 = lens.top[static_cast<std::size_t>(l)][static_cast<std::size_t>(c)];
            if (top5.empty()) continue;
            const ImVec2 a(o.x + labelW + cellW * float(c), y), b(a.x + cellW - 1, y + cellH - 1);
            const attn::Rgb8 rgb = attn::colormapColor(attn::Colormap::Viridis, top5[0].p);
            dl->AddRectFilled(a, b, IM_COL32(rgb.r, rgb.g, rgb.b, 255));
            const float lum = 0.299f * rgb.r + 0.587f * rgb.g + 0.114f * rgb.b;
            const std::string t = clipped(top5[0].token, cellW - 6);
            dl->AddText(ImVec2(a.x + 3, a.y + 2), lum > 140 ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255), t.c_str());
            if (ImGui::IsMouseHoveringRect(a, b) && ImGui::IsWindowHovered()) hoverL = l, hoverC = c;
        }
    }
    state.recordRect("why/lens", ImVec2(o.x + labelW, top), ImVec2(o.x + labelW + cellW * float(cols), top + cellH * float(L)));
    if (hoverL >= 0) {
        const int pos = lens.firstPosition + hoverC;
        std::string tip = "layer " + std::to_string(hoverL) + ", after token " + std::to_string(pos) + " '" +
                          visible(tokens[static_cast<std::size_t>(pos)]) + "':";
        for (const attn::TokenProbability& t : lens.top[static_cast<std::size_t>(hoverL)][static_cast<std::size_t>(hoverC)])
            tip += "\n  '" + visible(t.token) + "'  p = " + attn::formatValue(t.p, 3);
        ImGui::SetTooltip("%s", tip.c_str());
    }
    ImGui::Dummy(ImVec2(labelW + cellW * float(cols), cellH * float(L + 1) + 4));
    ImGui::EndChild();
}

void drawHeadTypes(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    WhyState& w = m.why;
    const InterpResults& r = w.results;
    for (HeadTypeScore s : {HeadTypeScore::Previous, HeadTypeScore::Duplicate, HeadTypeScore::Induction, HeadTypeScore::Sink}) {
        if (ImGui::RadioButton(toString(s), w.typeScore == s)) w.typeScore = s;
        ImGui::SameLine();
    }
    if (ImGui::Button("Induction probe")) fillInductionProbe(state, static_cast<std::uint64_t>(m.shown.id) + 1);
    state.recordRect("why/probe", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("replace the text by 20 random tokens repeated twice: induction heads attend, in the\n"
                          "second copy, to the token after the current one's first occurrence");
    if (!r.valid) {
        ImGui::TextUnformatted(r.error.empty() ? "computing…" : r.error.c_str());
        return;
    }
    const attn::Matrix* v = &r.types.previous;
    const char* meaning = "";
    switch (w.typeScore) {
    case HeadTypeScore::Previous: v = &r.types.previous, meaning = "mean weight on the previous token: %.4f"; break;
    case HeadTypeScore::Duplicate: v = &r.types.duplicate, meaning = "mean weight on earlier copies of the token: %.4f"; break;
    case HeadTypeScore::Induction: v = &r.types.induction, meaning = "mean weight on the token after an earlier copy: %.4f"; break;
    case HeadTypeScore::Sink: v = &r.types.sink, meaning = "mean weight on the first token: %.4f"; break;
    }
    const bool needsRepeats = w.typeScore == HeadTypeScore::Duplicate || w.typeScore == HeadTypeScore::Induction;
    if (needsRepeats && !r.types.hasRepeats)
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "The text repeats no token, so this score is 0 everywhere: use the "
                                                      "induction probe or a text with repeats.");
    else ImGui::TextDisabled("Per head, from its attention weights on this text (0 … 1).");
    fig::LayerHeadMap map;
    map.values = *v;
    map.cmap = attn::Colormap::Viridis;
    map.range = {0.0f, 1.0f, 0};
    // A texture key per score: switching the score shows another map of the same run.
    MapSpec ms{std::string("types/") + toString(w.typeScore), std::move(map), nullptr, m.heads(), meaning};
    drawWhyExportRow(state, titled(m, ms.map, std::string(toString(w.typeScore)) + " score of each head", "mean attention weight"));
    drawLayerHeadMap(state, ms, ImVec2(size.x, ImGui::GetContentRegionAvail().y));
}

void drawPatching(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    WhyState& w = m.why;
    ImGui::TextUnformatted("Clean prompt (the text above is the corrupted one, of equal length):");
    ImGui::SetNextItemWidth(std::max(200.0f, size.x - 16));
    wantGlyphs(w.cleanText);
    wantGlyphs(w.targetAText);
    wantGlyphs(w.targetBText);
    bool apply = ImGui::InputText("##clean", &w.cleanText, ImGuiInputTextFlags_EnterReturnsTrue);
    state.recordRect("why/clean_field", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::TextUnformatted("Metric: logit(A) − logit(B).  A");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90);
    apply |= ImGui::InputText("##a", &w.targetAText, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    ImGui::TextUnformatted("B");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90);
    apply |= ImGui::InputText("##b", &w.targetBText, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    apply |= ImGui::Button("Patch");
    state.recordRect("why/patch", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (apply) setPatching(state, w.cleanText, w.targetAText, w.targetBText);
    if (!w.patchError.empty()) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", w.patchError.c_str());
        return;
    }
    if (m.wanted.interp.targetA < 0) {
        ImGui::TextDisabled("Press Patch (or Enter) to patch each head's output from the clean run into this one.");
        return;
    }
    const int L = m.layers();
    const ScanResults& s = w.scan;
    const bool current = s.request == m.shown.id && s.patching.values.rows() == L;
    drawScanStatus("fraction of the clean − corrupted difference each head restores", current ? s.patching.rows : 0, L,
                   current && s.patching.done, current ? s.patching.ms : 0, s.error);
    if (!current) return;
    if (s.patching.done)
        ImGui::TextDisabled("logit(A) − logit(B): clean %.3f, corrupted %.3f", s.metric.clean, s.metric.corrupted);
    MapSpec ms{"patching", fig::fractionMap(s.patching.values), &s.patching.pending, m.heads(),
               "patched from the clean run, it restores %.4f of the difference"};
    if (s.patching.done) {
        // Named by what the map was computed for (the fields may hold an edit not applied yet).
        const InterpRequest& applied = m.shown.interp;
        fig::LayerHeadMap lm = titled(m, ms.map, "share of logit('" + m.decoder->tokenizer.tokenText(applied.targetA) +
                                                     "') − logit('" + m.decoder->tokenizer.tokenText(applied.targetB) +
                                                     "') restored by each head", "fraction restored");
        lm.subtitle = "clean \"" + applied.cleanText + "\" into \"" + m.shown.textA + "\"";
        drawWhyExportRow(state, lm);
    }
    drawLayerHeadMap(state, ms, ImVec2(size.x, ImGui::GetContentRegionAvail().y));
}

} // namespace

bool drawWhyView(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return false;
    // The views, as tabs over the grid's area.
    for (WhyView v : {WhyView::Attention, WhyView::Importance, WhyView::Dla, WhyView::LogitLens, WhyView::HeadTypes,
                      WhyView::Patching}) {
        const bool on = m.why.view == v;
        if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
        if (ImGui::Button(toString(v))) setWhyView(state, v);
        if (on) ImGui::PopStyleColor();
        state.recordRect(std::string("why/tab/") + toString(v), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::SameLine();
    }
    ImGui::NewLine();
    if (m.why.view == WhyView::Attention) return false;
    const float used = ImGui::GetFrameHeightWithSpacing();
    const ImVec2 room(size.x, std::max(120.0f, size.y - used));
    ImGui::BeginChild("why", room, false);
    switch (m.why.view) {
    case WhyView::Importance: drawImportance(state, room); break;
    case WhyView::Dla: drawAttribution(state, room); break;
    case WhyView::LogitLens: drawLogitLens(state, room); break;
    case WhyView::HeadTypes: drawHeadTypes(state, room); break;
    case WhyView::Patching: drawPatching(state, room); break;
    case WhyView::Attention: break;
    }
    ImGui::EndChild();
    return true;
}

} // namespace app
