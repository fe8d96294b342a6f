// "Why here?" (issue 35, docs/interp.md): why a decoder head attends from one query to one key. A right-click on a
// cell of a head's map (the grid's thumbnails, the chain view's scores and weights) offers it; the panel shows the
// cell's score and weight, the components of the residual stream that wrote the query's and the key's side of
// the match (bars), the strongest pairs, the component × component matrix grouped by layer, and on request the
// head's pattern with one component removed from the keys' or the queries' side beside the original.
//
// Every number comes from attnscope_model (attnscope/qk_attribution.h), computed on the model worker after each run
// (state/model_state.h: QkRequest, QkResults), so that the panel follows ablations, edits, typing and appends and
// the frame never waits for it; nothing here computes.
//
// [SECTION] Small pieces: names as links, tokens, bars
// [SECTION] The sections: header, bars, pairs, matrix, patched pattern
// [SECTION] The menu and the window
#include "panels/model_panels.h"
#include "panels/panels.h"

#include "io/array_io.h"
#include "messages.h"
#include "render/heatmap_view.h"
#include "state/model_state.h"

#include <attnscope/colormap.h>
#include <attnscope/preset_io.h>
#include <attnscope/qk_attribution.h>

#include <imgui.h>
#include <imgui_internal.h>  // BringWindowToDisplayFront (Debian's libimgui-dev 1.86 ships it)
#include <imgui_stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace app {
namespace {

// Bars shown per side and pairs listed: enough to see the few that matter; the matrix and .npy hold them all.
constexpr int kQkBars = 8;
constexpr int kQkPairsShown = 6;

// -----------------------------------------------------------------------------------------------------
// [SECTION] Small pieces: names as links, tokens, bars
// -----------------------------------------------------------------------------------------------------

std::string tokenAt(const ModelState& m, int i)
{
    if (!m.drun || i < 0 || static_cast<std::size_t>(i) >= m.drun->encoding.tokens.size()) return "?";
    return "'" + tokenLabel(m.drun->encoding.tokens[static_cast<std::size_t>(i)]) + "'";
}

std::string headName(int layer, int head) { return "L" + std::to_string(layer) + ".H" + std::to_string(head); }

// What a component is, for its tooltip.
std::string componentMeaning(const std::string& name)
{
    int head = -1;
    const int layer = attn::qkComponentLayer(name, &head);
    if (name == "embed") return "the token embedding: what the token itself wrote";
    if (head >= 0) return "head " + std::to_string(head) + " of layer " + std::to_string(layer) + ": what it wrote into the stream";
    if (name.find(".mlp") != std::string::npos) return "layer " + std::to_string(layer) + "'s feed-forward (MLP) output";
    if (name.find(".qk_bias") != std::string::npos) return "the constant term of this head's own layer (norm β, projection biases)";
    if (name.find(".bias") != std::string::npos) return "layer " + std::to_string(layer) + "'s output-projection bias b^O";
    if (layer >= 0) return "layer " + std::to_string(layer) + ": its heads, b^O and MLP together";
    return name;
}

// A component's name; a head's is a link that opens it in the chain view. `width` 0 = as wide as the text.
void componentLink(AppState& state, const std::string& name, float width)
{
    int head = -1;
    const int layer = attn::qkComponentLayer(name, &head);
    if (head < 0) {
        const float x = ImGui::GetCursorPosX();
        ImGui::TextUnformatted(name.c_str());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", componentMeaning(name).c_str());
        if (width > 0) {
            ImGui::SameLine(x + width);
            ImGui::Dummy(ImVec2(0, 0));
        }
        return;
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.45f, 0.7f, 1.0f, 1.0f));
    const bool clicked = ImGui::Selectable(name.c_str(), false, 0, ImVec2(width, 0));
    ImGui::PopStyleColor();
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\nclick: open %s in the chain view (Esc or Back returns)", componentMeaning(name).c_str(), name.c_str());
    if (clicked) {
        state.model.linesLayer = layer;
        state.model.linesHead = head;
        openLayerInChain(state, layer, head);
    }
}

// One row: the name (a link for a head), a bar from 0 scaled to `range`, the value, and the remove button.
void barRow(AppState& state, const std::string& name, float value, const attn::DisplayRange& range, attn::QkSide side,
            const char* removeLabel, float nameW, float barW)
{
    QkState& q = state.model.qk;
    componentLink(state, name, nameW);
    ImGui::SameLine(0, 4);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetFrameHeight();
    ImGui::Dummy(ImVec2(barW, h));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float mid = p.x + barW * 0.5f, x = p.x + barW * attn::normalize(value, range);
    dl->AddLine(ImVec2(mid, p.y + 2), ImVec2(mid, p.y + h - 2), IM_COL32(150, 150, 150, 160));
    // The matrix's colours (RdBu: positive red, negative blue), so that a bar and its column read alike.
    const ImU32 colour = value >= 0 ? IM_COL32(214, 96, 77, 255) : IM_COL32(67, 147, 195, 255);
    dl->AddRectFilled(ImVec2(std::min(mid, x), p.y + h * 0.2f), ImVec2(std::max(mid, x), p.y + h * 0.8f), colour);
    ImGui::SameLine(0, 6);
    ImGui::Text("%+8.3f", value);
    ImGui::SameLine(0, 6);
    const bool removed = q.cell.patchComponent == name && q.cell.patchSide == side;
    const std::string sideName = side == attn::QkSide::Key ? "key" : "query";
    const std::string id = "##" + sideName + name;
    if (removed) {
        ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0.75f, 0.45f, 0.15f, 1.0f));
        if (ImGui::SmallButton(("restore" + id).c_str())) setQkPatch(state, "", side);
        ImGui::PopStyleColor();
    } else if (ImGui::SmallButton((removeLabel + id).c_str())) {
        setQkPatch(state, name, side);
    }
    state.recordRect("qk/remove/" + sideName + "/" + name, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) {
        const std::string tip = removed ? std::string("show the pattern as the run made it")
                                        : "recompute the head's whole pattern with " + name + "'s part taken out of every " +
                                              (side == attn::QkSide::Key ? "key" : "query");
        ImGui::SetTooltip("%s", tip.c_str());
    }
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] The sections: header, bars, pairs, matrix, patched pattern
// -----------------------------------------------------------------------------------------------------

// The bars of one side: its kQkBars largest components by |value| (core's order).
void drawBars(AppState& state, const attn::QkCell& cell, attn::QkSide side)
{
    const attn::Vector& values = side == attn::QkSide::Key ? cell.keyComponents : cell.queryComponents;
    const std::vector<int> top = attn::strongestQkComponents(values, kQkBars);
    if (top.empty()) return;
    attn::Matrix shown(1, static_cast<Eigen::Index>(top.size()));
    for (std::size_t t = 0; t < top.size(); ++t) shown(0, static_cast<Eigen::Index>(t)) = values[top[t]];
    const attn::DisplayRange range = attn::displayRange(shown, nullptr, true);
    const float avail = ImGui::GetContentRegionAvail().x;
    const float nameW = ImGui::CalcTextSize("L00.qk_bias").x + 6, valueW = ImGui::CalcTextSize("+0000.000").x + 6;
    const char* wideLabel = side == attn::QkSide::Key ? "remove from keys" : "remove from queries";
    const bool wide = avail > nameW + valueW + ImGui::CalcTextSize(wideLabel).x + 240;
    const char* removeLabel = wide ? wideLabel : "remove";
    const float removeW = ImGui::CalcTextSize(removeLabel).x + ImGui::GetStyle().FramePadding.x * 2;
    const float barW = std::max(40.0f, avail - nameW - valueW - removeW - 30);
    ImGui::PushID(side == attn::QkSide::Key ? "keybars" : "querybars");
    for (std::size_t t = 0; t < top.size(); ++t) {
        ImGui::PushID(static_cast<int>(t));
        const std::string& name = cell.components[static_cast<std::size_t>(top[t])];
        const float y0 = ImGui::GetCursorScreenPos().y;
        barRow(state, name, values[top[t]], range, side, removeLabel, nameW, barW);
        state.recordRect(std::string("qk/bar/") + (side == attn::QkSide::Key ? "key/" : "query/") + std::to_string(t),
                         ImVec2(ImGui::GetWindowPos().x, y0), ImVec2(ImGui::GetWindowPos().x + avail, ImGui::GetCursorScreenPos().y));
        ImGui::PopID();
    }
    ImGui::PopID();
    ImGui::TextDisabled("%d components in all; the bars show the %zu largest", static_cast<int>(values.size()), top.size());
}

void drawPairs(AppState& state, const QkResults& r)
{
    const attn::QkCell& cell = *r.cell;
    if (!ImGui::BeginTable("pairs", 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) return;
    ImGui::TableSetupColumn("query side");
    ImGui::TableSetupColumn("key side");
    ImGui::TableSetupColumn("value");
    ImGui::TableHeadersRow();
    const float w = ImGui::CalcTextSize("L00.qk_bias").x + 6;
    for (std::size_t t = 0; t < std::min<std::size_t>(r.pairs.size(), kQkPairsShown); ++t) {
        const attn::QkPair& p = r.pairs[t];
        ImGui::PushID(static_cast<int>(t));
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        componentLink(state, cell.components[static_cast<std::size_t>(p.query)], w);
        ImGui::TableNextColumn();
        ImGui::PushID("k");
        componentLink(state, cell.components[static_cast<std::size_t>(p.key)], w);
        ImGui::PopID();
        ImGui::TableNextColumn();
        ImGui::Text("%+.3f", p.value);
        ImGui::PopID();
    }
    ImGui::EndTable();
}

// Save .npy: the whole C×C matrix (float32, row = query side) and its component names beside it (.names.txt).
void saveQkMatrix(AppState& state, const attn::QkCell& cell)
{
    QkState& q = state.model.qk;
    const std::string path = q.exportPath;
    attn::Status st = std::filesystem::path(path).extension() == ".npy"
                          ? io::writeNpy(path, io::NamedArray{"qk_matrix", &cell.matrix, nullptr, nullptr, {}, {}})
                          : attn::invalidArgument(path + ": expected a .npy file name");
    const std::string names = std::filesystem::path(path).replace_extension(".names.txt").string();
    if (st.ok()) {
        std::string text;
        for (const std::string& n : cell.components) text += n + "\n";
        st = attn::writeFileAtomic(names, text);
    }
    std::error_code ec;
    const std::string where = std::filesystem::absolute(path, ec).string();
    q.exportStatus = st.ok() ? "saved " + (ec ? path : where) + " (" + std::to_string(cell.matrix.rows()) + "×" +
                                   std::to_string(cell.matrix.cols()) + ") and its names in " +
                                   std::filesystem::path(names).filename().string()
                             : st.message;
    if (st.ok()) postMessage(MessageLevel::Info, q.exportStatus);
    else postError(st.message);
}

void drawSaveRow(AppState& state, const attn::QkCell& cell)
{
    QkState& q = state.model.qk;
    ImGui::SetNextItemWidth(std::min(260.0f, ImGui::GetContentRegionAvail().x * 0.5f));
    if (ImGui::InputText("##qkexport", &q.exportPath)) q.overwriteAsked = false;
    ImGui::SameLine();
    if (ImGui::Button(q.overwriteAsked ? "Overwrite" : "Save .npy")) {
        std::error_code ec;
        if (!q.overwriteAsked && std::filesystem::exists(q.exportPath, ec)) q.overwriteAsked = true;
        else {
            saveQkMatrix(state, cell);
            q.overwriteAsked = false;
        }
    }
    state.recordRect("qk/save", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the whole component × component matrix (%ld × %ld, float32, rows: query side) as .npy, "
                          "its names in a .names.txt beside it", static_cast<long>(cell.matrix.rows()),
                          static_cast<long>(cell.matrix.cols()));
    if (q.overwriteAsked) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "exists");
        ImGui::SameLine();
        if (ImGui::SmallButton("Cancel##qksave")) q.overwriteAsked = false;
    } else if (!q.exportStatus.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", q.exportStatus.c_str());
        ImGui::PopTextWrapPos();
    }
}

// The component × component matrix, each earlier layer summed unless expanded (a click on its label expands it;
// a click on a component's label folds its layer again). Grouped by core (attn::groupQkByLayer).
void drawMatrix(AppState& state, const QkResults& r)
{
    QkState& q = state.model.qk;
    const attn::QkCell& cell = *r.cell;
    if (q.groupsGeneration != r.generation || q.groupsExpanded != q.expanded) {
        q.groups = attn::groupQkByLayer(cell, q.expanded);
        q.groupsGeneration = r.generation;
        q.groupsExpanded = q.expanded;
    }
    const attn::QkGroups& g = q.groups;
    const int G = static_cast<int>(g.names.size());
    if (G == 0) return;
    ImGui::TextDisabled("rows: query side, columns: key side; click a layer's label to expand it to its heads and MLP");
    if (ImGui::SmallButton("Expand all")) {
        q.expanded.clear();
        for (int l = 0; l < cell.layer; ++l) q.expanded.push_back(l);
    }
    ImGui::SameLine();
    if (ImGui::SmallButton("Collapse all")) q.expanded.clear();
    const float avail = ImGui::GetContentRegionAvail().x;
    HeatmapSpec spec;
    spec.key = "qk/matrix";
    spec.src.values = &g.matrix;
    spec.src.range = attn::displayRange(g.matrix, nullptr, true);
    spec.src.colormap = attn::Colormap::RdBu;
    spec.src.generation = r.generation * 4096 + static_cast<std::uint64_t>(G);
    spec.rowLabels = spec.colLabels = &g.names;
    spec.rowTitle = "query side";
    spec.colTitle = "key side";
    spec.cellPx = std::clamp((avail - kColorbarWidth - 110) / float(G), 6.0f, 34.0f);
    spec.maxWidth = avail - kColorbarWidth - 12;
    spec.maxHeight = std::max(200.0f, std::min(460.0f, spec.cellPx * float(G) + 110));
    const HeatmapHit hit = drawHeatmap(spec);
    state.recordRect("qk/matrix", hit.cellsMin, hit.cellsMax);
    ImGui::SameLine();
    drawColorbar("qk/matrix/bar", spec.src.colormap, spec.src.range,
                 std::min(kColorbarMaxHeight, std::max(60.0f, hit.cellsMax.y - hit.cellsMin.y)));
    auto toggle = [&](int a) {
        if (a < 0 || a >= G) return;
        const int l = g.layer[static_cast<std::size_t>(a)];
        if (l < 0 || l >= cell.layer) return;
        const auto it = std::find(q.expanded.begin(), q.expanded.end(), l);
        if (it == q.expanded.end()) q.expanded.push_back(l);
        else q.expanded.erase(it);
    };
    toggle(hit.rowLabelClicked);
    toggle(hit.colLabelClicked);
    if (hit.row >= 0 && hit.col >= 0) {
        const std::string& a = g.names[static_cast<std::size_t>(hit.row)];
        const std::string& b = g.names[static_cast<std::size_t>(hit.col)];
        int headB = -1, headA = -1;
        const int layerB = attn::qkComponentLayer(b, &headB), layerA = attn::qkComponentLayer(a, &headA);
        const bool opens = headB >= 0 || headA >= 0;
        const std::string opened = headB >= 0 ? headName(layerB, headB) : headA >= 0 ? headName(layerA, headA) : "";
        const std::string click = opens ? "\nclick: open " + opened + " in the chain view" : std::string();
        ImGui::SetTooltip("query side %s × key side %s: %+.4f%s", a.c_str(), b.c_str(), g.matrix(hit.row, hit.col), click.c_str());
        if (hit.pressed && opens) {
            const int l = headB >= 0 ? layerB : layerA, h = headB >= 0 ? headB : headA;
            state.model.linesLayer = l;
            state.model.linesHead = h;
            openLayerInChain(state, l, h);
        }
    }
    drawSaveRow(state, cell);
}

// The head's pattern with a component removed, beside the original (core's patchPattern), the cell marked.
void drawPatch(AppState& state, const QkResults& r)
{
    const ModelState& m = state.model;
    const QkRequest& c = r.of;
    if (!r.patchError.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.3f, 1), "%s", r.patchError.c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    if (!r.patch) return;
    const attn::PatternPatch& p = *r.patch;
    const int n = static_cast<int>(p.original.rows());
    if (c.query < 0 || c.query >= n || c.key < 0 || c.key >= n) return;
    if (ImGui::SmallButton("Restore")) setQkPatch(state, "", p.side);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("back to the pattern as the run made it");
    state.recordRect("qk/patch_restore", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::Text("%s removed from every %s", p.component.c_str(), p.side == attn::QkSide::Key ? "key" : "query");
    ImGui::Text("the cell's weight %.4f \u2192 %.4f", p.original(c.query, c.key), p.patched(c.query, c.key));
    state.recordRect("qk/patch_line", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    const float avail = ImGui::GetContentRegionAvail().x;
    const float each = std::max(80.0f, (avail - kColorbarWidth - 24) / 2);
    // Whole in its box: past `each` tokens the cells are under a pixel, drawn max-pooled (a fitted map).
    const float cell = std::min((each - 8) / float(n), 22.0f);
    const bool fitted = cell < 1.0f;
    const bool labels = cell >= 12;
    const attn::Matrix* maps[] = {&p.original, &p.patched};
    const char* titles[] = {"original", "patched"};
    for (int i = 0; i < 2; ++i) {
        if (i > 0) ImGui::SameLine();
        ImGui::BeginGroup();
        ImGui::TextUnformatted(titles[i]);
        HeatmapSpec spec;
        spec.key = std::string("qk/") + titles[i];
        spec.src.values = maps[i];
        spec.src.range = attn::DisplayRange{0.0f, 1.0f, 0};
        spec.src.colormap = attn::Colormap::Viridis;
        spec.src.generation = r.generation;
        spec.cellPx = cell;
        spec.showValues = false;
        spec.rowLabelsShown = labels && i == 0;
        spec.colLabelsShown = labels;
        spec.rowLabels = spec.colLabels = m.drun ? &m.drun->encoding.tokens : nullptr;
        spec.highlightRow = c.query;
        spec.highlightCol = c.key;
        spec.maxWidth = each + (labels && i == 0 ? 80.0f : 0.0f);
        spec.maxHeight = std::max(120.0f, each + (labels ? 80.0f : 0.0f));
        spec.wheelZooms = fitted;  // (its wheel is not used: the map stays whole)
        const HeatmapHit hit = drawHeatmap(spec);
        state.recordRect(std::string("qk/patch/") + titles[i], hit.cellsMin, hit.cellsMax);
        // The decomposed cell, outlined in both maps.
        const float cw = (hit.cellsMax.x - hit.cellsMin.x) / float(n), ch = (hit.cellsMax.y - hit.cellsMin.y) / float(n);
        const ImVec2 a(hit.cellsMin.x + cw * float(c.key), hit.cellsMin.y + ch * float(c.query));
        const float pad = std::max(1.0f, (6.0f - std::min(cw, ch)) / 2);  // a cell under a pixel: a 6-px ring
        ImGui::GetWindowDrawList()->AddRect(ImVec2(a.x - pad, a.y - pad), ImVec2(a.x + cw + pad, a.y + ch + pad),
                                            IM_COL32(255, 90, 60, 255), 0, 0, 2.0f);
        if (hit.row >= 0 && hit.col >= 0)
            ImGui::SetTooltip("query %d %s → key %d %s\noriginal %.4f, patched %.4f", hit.row, tokenAt(m, hit.row).c_str(),
                              hit.col, tokenAt(m, hit.col).c_str(), p.original(hit.row, hit.col), p.patched(hit.row, hit.col));
        ImGui::EndGroup();
    }
    ImGui::SameLine();
    drawColorbar("qk/patch/bar", attn::Colormap::Viridis, attn::DisplayRange{0.0f, 1.0f, 0}, std::max(60.0f, std::min(each, 200.0f)));
}

void drawHeader(AppState& state)
{
    ModelState& m = state.model;
    QkState& q = m.qk;
    const QkResults& r = q.results;
    const QkRequest& c = q.cell;
    ImGui::Text("%s: query %d %s \u2192 key %d %s", headName(c.layer, c.head).c_str(), c.query, tokenAt(m, c.query).c_str(),
                c.key, tokenAt(m, c.key).c_str());
    state.recordRect("qk/title", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::SetCursorPosX(std::max(ImGui::GetCursorPosX(), ImGui::GetWindowContentRegionMax().x - ImGui::CalcTextSize("Close").x - 12));
    if (ImGui::SmallButton("Close")) closeQk(state);
    state.recordRect("qk/close", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    const bool current = r.of == c;
    if (current && r.cell) {
        const bool capped = r.cell->softcap > 0;
        if (capped)  // a soft-cap is not linear: the bars sum to the score before it (docs/interp.md)
            ImGui::Text("score before the soft-cap %.3f   capped %.3f   weight %.4f", r.cell->score, r.cell->cappedScore, r.cell->weight);
        else
            ImGui::Text("score %.3f   weight %.4f", r.cell->score, r.cell->weight);
        state.recordRect("qk/score", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        const bool hovered = ImGui::IsItemHovered();
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled(capped ? "Each side's bars below sum to the score before the soft-cap (the cap is not linear: "
                                     "it is applied to the sum). Click a head's name to open it; \"remove\" shows the "
                                     "head's pattern without that component."
                                   : "Each side's bars below sum to the score. Click a head's name to open it; \"remove\" "
                                     "shows the head's pattern without that component.");
        ImGui::PopTextWrapPos();
        if (hovered && capped)
            ImGui::SetTooltip("score: scale · q·k as the run computed it (scale %.4f), before the layer's soft-cap %.0f·tanh(score "
                              "/ %.0f), which gives the capped score the softmax read; weight: its softmax over the keys "
                              "the query sees. The bars of each side sum to the score before the cap.",
                              r.cell->scale, r.cell->softcap, r.cell->softcap);
        else if (hovered)
            ImGui::SetTooltip("score: scale · q·k as the run computed it (scale %.4f); weight: its softmax over the keys the "
                              "query sees. The bars of each side sum to the score.", r.cell->scale);
    }
    if (qkComputing(m)) {
        const float f = r.steps > 0 && current ? float(r.step) / float(r.steps) : 0.0f;
        char label[96];
        std::snprintf(label, sizeof label, "%s %.0f ms", r.running && current ? "decomposing…" : "waiting for the run…", r.ms);
        ImGui::ProgressBar(f, ImVec2(std::min(260.0f, ImGui::GetContentRegionAvail().x * 0.6f), 0), label);
        state.recordRect("qk/progress", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::SameLine();
        if (ImGui::SmallButton("Cancel##qk")) {
            cancelQk(state);
            if (m.computing()) m.cancelRun();
        }
        state.recordRect("qk/cancel", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    } else if (current && r.cancelled) {
        ImGui::TextColored(ImVec4(0.95f, 0.7f, 0.25f, 1), "stopped (Cancel): the numbers below may be of the cell only");
        ImGui::SameLine();
        if (ImGui::SmallButton("Compute again")) retryQk(state);
        state.recordRect("qk/retry", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    } else if (!current && !m.error.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.3f, 1), "no run to decompose: %s", m.error.c_str());
        ImGui::PopTextWrapPos();
    }
    if (current && !r.error.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.3f, 1), "%s", r.error.c_str());
        state.recordRect("qk/error", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (m.longRun())
            ImGui::TextDisabled("Texts of up to %d tokens run dense: a shorter text (or a part of this one) can be "
                                "decomposed.", kLazyTokens);
        ImGui::PopTextWrapPos();
    }
}

// The row mode (why this key and not another): the cell's key against another key of the query's row (the
// runner-up by weight unless a key of the list was clicked), each side's components by their part of the
// difference of the two scores (core's contrastKeys), then the row's keys by weight with each one's strongest
// key-side component; a click on a key compares with it.
void drawRow(AppState& state)
{
    ModelState& m = state.model;
    QkState& q = m.qk;
    const QkResults& r = q.results;
    bool on = q.cell.row;
    if (ImGui::Checkbox("Row: why this key and not another", &on)) setQkRow(state, on);
    state.recordRect("qk/row/toggle", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (!q.cell.row) return;
    if (!(r.of == q.cell) || (!r.row && r.rowError.empty())) {
        ImGui::TextDisabled("decomposing the query's row\u2026");
        return;
    }
    if (!r.row) {
        ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.3f, 1), "%s", r.rowError.c_str());
        return;
    }
    const attn::QkRow& row = *r.row;
    const int key = q.cell.key, last = row.firstKey + static_cast<int>(row.scores.size()) - 1;
    const int other = q.rowOther >= row.firstKey && q.rowOther <= last && q.rowOther != key ? q.rowOther : attn::runnerUpKey(row, key);
    if (other < 0) {
        ImGui::TextDisabled("the query sees this key alone");
        return;
    }
    auto c = attn::contrastKeys(row, key, other);
    if (!c) {
        ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.3f, 1), "%s", c.status().message.c_str());
        return;
    }
    const Eigen::Index a = key - row.firstKey, b = other - row.firstKey;
    // Two lines: in a narrow panel (900×600) one line's weights were cut off, and ImGui's wrapping breaks numbers at
    // their decimal point.
    ImGui::BeginGroup();
    ImGui::Text("key %d %s vs key %d %s%s:", key, tokenAt(m, key).c_str(), other, tokenAt(m, other).c_str(),
                q.rowOther == other ? "" : " (the runner-up)");
    ImGui::Text("score %.3f vs %.3f (%+.3f), weight %.4f vs %.4f", row.scores[a], row.scores[b], c->difference,
                row.weights[a], row.weights[b]);
    ImGui::EndGroup();
    state.recordRect("qk/row/contrast", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::TextDisabled("each side's parts sum to the difference %+.3f%s", c->difference, row.softcap > 0 ? " (before the soft-cap)" : "");
    for (const auto& [label, values] : {std::pair<const char*, const attn::Vector*>{"key side", &c->keySide}, {"query side", &c->querySide}}) {
        ImGui::TextUnformatted(label);
        ImGui::Indent();
        for (int t : attn::strongestQkComponents(*values, 5)) {
            const float v = (*values)[t];
            ImGui::TextColored(v >= 0 ? ImVec4(0.85f, 0.3f, 0.25f, 1) : ImVec4(0.3f, 0.45f, 0.9f, 1), "%+9.3f  %s", v,
                               row.components[static_cast<std::size_t>(t)].c_str());
        }
        ImGui::Unindent();
    }
    // The keys by weight (at most 12), each with its strongest key-side component; a click compares with it.
    std::vector<int> order(row.scores.size());
    for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return row.weights[x] > row.weights[y]; });
    order.resize(std::min<std::size_t>(order.size(), 12));
    ImGui::TextDisabled("the row's keys by weight (click one to compare with it)");
    for (int t : order) {
        const int j = row.firstKey + t;
        Eigen::Index top = 0;
        row.keyComponents.row(t).cwiseAbs().maxCoeff(&top);
        char line[200];
        std::snprintf(line, sizeof line, "key %3d %-12s weight %.4f  score %8.3f  top %s %+.3f", j, tokenAt(m, j).c_str(),
                      row.weights[t], row.scores[t], row.components[static_cast<std::size_t>(top)].c_str(), row.keyComponents(t, top));
        if (ImGui::Selectable(line, j == other || j == key) && j != key) q.rowOther = j;
        state.recordRect("qk/row/key/" + std::to_string(j), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
}

void drawPanelBody(AppState& state)
{
    ModelState& m = state.model;
    const QkResults& r = m.qk.results;
    drawHeader(state);
    // The last results stay on screen while newer ones are computed (a new run, another cell), dimmed.
    if (!r.cell || r.of.layer != m.qk.cell.layer || r.of.head != m.qk.cell.head || r.of.query != m.qk.cell.query ||
        r.of.key != m.qk.cell.key)
        return;
    const bool stale = qkComputing(m);
    if (stale) ImGui::PushStyleVar(ImGuiStyleVar_Alpha, 0.6f);
    const attn::QkCell& cell = *r.cell;
    drawRow(state);  // near the top: its toggle stays in view
    if (!r.of.patchComponent.empty()) {
        ImGui::Separator();
        drawPatch(state, r);
    }
    ImGui::Separator();
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted("Key side: what wrote the key's part of the match");
    ImGui::TextDisabled("each bar: scale · q · (that component's part of k), the whole query against it");
    ImGui::PopTextWrapPos();
    drawBars(state, cell, attn::QkSide::Key);
    ImGui::Separator();
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted("Query side: what wrote what the query looks for");
    ImGui::TextDisabled("each bar: scale · (that component's part of q) · k");
    ImGui::PopTextWrapPos();
    drawBars(state, cell, attn::QkSide::Query);
    ImGui::Separator();
    if (ImGui::CollapsingHeader("Strongest pairs (query side × key side)", ImGuiTreeNodeFlags_DefaultOpen)) drawPairs(state, r);
    const bool matrix = ImGui::CollapsingHeader("Component \u00d7 component matrix, by layer");
    state.recordRect("qk/matrix_header", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (matrix) drawMatrix(state, r);
    if (stale) ImGui::PopStyleVar();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] The menu and the window
// -----------------------------------------------------------------------------------------------------

// The right-click menu offered this frame (offerQkMenu), opened here, at the top level, so that any map can
// offer it whatever window it is drawn in.
void drawQkMenu(AppState& state)
{
    ModelState& m = state.model;
    QkState& q = m.qk;
    if (q.menuPending) {
        ImGui::OpenPopup("##qkmenu");
        q.menuPending = false;
    }
    if (!ImGui::BeginPopup("##qkmenu")) return;
    const QkRequest& c = q.menuCell;
    ImGui::TextDisabled("%s: query %d %s \u2192 key %d %s", headName(c.layer, c.head).c_str(), c.query,
                        tokenAt(m, c.query).c_str(), c.key, tokenAt(m, c.key).c_str());
    if (ImGui::MenuItem("Why here?")) openQkCell(state, c.layer, c.head, c.query, c.key);
    state.recordRect("qk/menu/why", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("which components of the residual stream wrote the query's and the key's side of this score");
    if (q.menuLines && ImGui::MenuItem("Show its lines")) {
        m.linesLayer = c.layer;
        m.linesHead = c.head;
    }
    ImGui::EndPopup();
}

// Keeps the panel above the full-window views under it. A click in the model view focuses that window, and ImGui
// brings a focused window to the front: the panel vanished behind it (and a click on Close went through to the
// model view). So while one of those views has the focus (and no popup is open) the panel goes back in front of
// it, with the toasts above it; a dialog the user focuses stays in front as usual.
void keepAboveViews()
{
    ImGuiContext& g = *GImGui;
    if (!g.NavWindow || ImGui::IsPopupOpen(nullptr, ImGuiPopupFlags_AnyPopupId)) return;
    ImGuiWindow* focused = g.NavWindow->RootWindow;
    for (const char* name : {"###model", "Attention chain"}) {
        if (focused != ImGui::FindWindowByName(name)) continue;
        ImGui::BringWindowToDisplayFront(ImGui::GetCurrentWindow());
        if (ImGuiWindow* toasts = ImGui::FindWindowByName("##toasts")) ImGui::BringWindowToDisplayFront(toasts);
        return;
    }
}

} // namespace

void offerQkMenu(AppState& state, int layer, int head, int query, int key, bool lines)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    m.qk.menuPending = true;
    m.qk.menuCell = QkRequest{layer, head, query, key, {}, attn::QkSide::Key};
    m.qk.menuLines = lines;
}

void drawQkPanel(AppState& state)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    drawQkMenu(state);
    if (!m.qk.open) return;
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    // On the right, over the grid's side (the predictions stay in view under it); the user may move it.
    const float w = std::clamp(vp->WorkSize.x * 0.46f, 360.0f, 640.0f);
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x - w, vp->WorkPos.y), ImGuiCond_Appearing);
    ImGui::SetNextWindowSize(ImVec2(w, vp->WorkSize.y - kStatusBarHeight), ImGuiCond_Appearing);
    bool open = true;
    const std::string title = "Why here? " + headName(m.qk.cell.layer, m.qk.cell.head) + "###qk";
    ImGui::SetNextWindowBgAlpha(1.0f);
    const bool shown = ImGui::Begin(title.c_str(), &open, ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings);
    keepAboveViews();
    if (shown) {
        state.recordRect("qk/window", ImGui::GetWindowPos(),
                         ImVec2(ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y));
        drawPanelBody(state);
    }
    ImGui::End();
    if (!open) closeQk(state);
}

} // namespace app
