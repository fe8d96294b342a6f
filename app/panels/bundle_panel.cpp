// An attention bundle's window (docs/bundle.md): the layers × heads grid (thumbnails made on a thread, appearing
// as they are done), a head's map that zooms from the whole map (max-pooled, a pixel a block) down to single
// cells with their values, and BertViz's lines view. Every number comes from the bundle's maps through the tile
// seam (state/bundle_state.h); nothing here does math.
#include "panels/model_panels.h"

#include "figure/figure_render.h"
#include "figure/model_figure.h"
#include "io/array_io.h"
#include "messages.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/bundle_state.h"
#include "view/model_grid.h"
#include "view/run_view.h"

#include <attnscope/colormap.h>
#include <attnscope/preset_io.h>

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace app {
namespace {

// The lines view draws every (query, key) pair: in the window up to this many tokens (a 512-token head is 262 144
// candidate lines a frame); longer bundles point to the head's map.
constexpr int kBundleLinesMax = 512;

std::string layerName(const OpenedBundle& b, int l)
{
    return l < int(b.layerLabels.size()) ? b.layerLabels[std::size_t(l)] : "L" + std::to_string(l);
}
std::string headName(const OpenedBundle& b, int h)
{
    return h < int(b.headLabels.size()) ? b.headLabels[std::size_t(h)] : "H" + std::to_string(h);
}

// Thumbnail i as the grid draws it: pooled once more to the plan's cells a side (a cell at least a pixel, the
// heatmap's rule), kept until the side changes.
const attn::Matrix& shownThumb(BundleState& b, std::size_t i, int side)
{
    const attn::Matrix& v = b.thumbnails[i];
    if (v.rows() <= side && v.cols() <= side) return v;
    if (b.thumbShownSide != side || b.thumbShown.size() != b.thumbnails.size()) {
        b.thumbShown.assign(b.thumbnails.size(), attn::Matrix());
        b.thumbShownSide = side;
    }
    attn::Matrix& s = b.thumbShown[i];
    if (s.size() == 0) s = attn::poolMax(v, side, side);
    return s;
}

void openHead(BundleState& b, int l, int h)
{
    b.layer = l;
    b.head = h;
    b.headOpen = true;
    b.viewport = {};  // fit
}

} // namespace

void drawMapsGrid(AppState& state, BundleState& b, ImVec2 size)
{
    const OpenedBundle& ob = *b.bundle;
    const attn::AttentionMaps& maps = *ob.maps;
    const int L = maps.layers(), H = maps.heads();
    ModelGridInput in;
    in.layers = L;
    in.heads = H;
    in.tokens = std::max(maps.queries(), maps.keys());
    in.width = size.x - ImGui::GetStyle().ScrollbarSize;
    in.height = size.y;
    in.labelWidth = ImGui::CalcTextSize("L00").x + 12;
    for (const std::string& t : ob.layerLabels) in.labelWidth = std::max(in.labelWidth, ImGui::CalcTextSize(t.c_str()).x + 12);
    in.headerHeight = ImGui::GetTextLineHeightWithSpacing();
    in.rowExtra = ImGui::GetStyle().ItemSpacing.y + 2;
    const ModelGridPlan plan = planModelGrid(in);
    b.gridPlan = plan;
    ImGui::BeginChild((b.keyPrefix + "_grid").c_str(), size, false, ImGuiWindowFlags_HorizontalScrollbar);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    {
        // The rows scrolled into view are made first (a long text's 270 thumbnails take seconds).
        const float top = ImGui::GetScrollY() - in.headerHeight, pitch = std::max(1.0f, plan.pitchY);
        const int first = std::clamp(int(std::floor(top / pitch)), 0, L - 1);
        const int last = std::clamp(int(std::floor((top + size.y) / pitch)), first, L - 1);
        preferThumbLayers(b, first, last);
    }
    for (int h = 0; h < H; ++h) {
        const std::string t = headName(ob, h);
        const float x = o.x + in.labelWidth + plan.pitchX * float(h) + (plan.thumb - ImGui::CalcTextSize(t.c_str()).x) / 2;
        dl->AddText(ImVec2(x, o.y), ImGui::GetColorU32(ImGuiCol_Text), t.c_str());
    }
    for (int l = 0; l < L; ++l) {
        const float y = o.y + in.headerHeight + plan.pitchY * float(l);
        const std::string t = layerName(ob, l);
        dl->AddText(ImVec2(o.x, y + (plan.thumb - ImGui::GetFontSize()) / 2), ImGui::GetColorU32(ImGuiCol_Text), t.c_str());
        for (int h = 0; h < H; ++h) {
            const ImVec2 p(o.x + in.labelWidth + plan.pitchX * float(h), y);
            const std::size_t i = std::size_t(l) * std::size_t(H) + std::size_t(h);
            const std::string key = b.keyPrefix + "/" + std::to_string(l) + "/" + std::to_string(h);
            ImGui::SetCursorScreenPos(p);
            ImGui::PushID(int(i));
            const attn::Matrix& v = b.thumbnails[i].size() > 0 ? shownThumb(b, i, std::max(1, plan.shown)) : b.thumbnails[i];
            bool pressed = false, hovered = false;
            ImVec2 c0 = p, c1(p.x + plan.thumb, p.y + plan.thumb);
            if (v.size() > 0) {
                HeatmapSpec spec;
                spec.key = key;
                spec.src.values = &v;
                spec.src.range = {0.0f, 1.0f, 0};
                spec.src.colormap = attn::Colormap::Viridis;
                spec.src.generation = 1;  // a thumbnail never changes once made
                spec.cellPx = plan.thumb / float(std::max(v.rows(), v.cols()));  // ≥ 1: v has at most plan.shown cells
                spec.showValues = false;
                spec.rowLabelsShown = spec.colLabelsShown = false;
                spec.maxWidth = spec.maxHeight = plan.thumb + 1;
                const HeatmapHit hit = drawHeatmap(spec);
                c0 = hit.cellsMin;
                c1 = hit.cellsMax;
                pressed = hit.pressed;
                hovered = hit.row >= 0;
            } else {
                // Not made yet (or unreadable): a placeholder of the same size that can be clicked all the same.
                pressed = ImGui::InvisibleButton("pending", ImVec2(plan.thumb, plan.thumb));
                hovered = ImGui::IsItemHovered();
                const bool failed = !b.thumbErrors[i].empty();
                dl->AddRectFilled(c0, c1, failed ? IM_COL32(90, 30, 30, 255) : IM_COL32(40, 42, 50, 255));
                const char* mark = failed ? "!" : "…";
                const ImVec2 ts = ImGui::CalcTextSize(mark);
                dl->AddText(ImVec2((c0.x + c1.x - ts.x) / 2, (c0.y + c1.y - ts.y) / 2), IM_COL32(200, 200, 200, 255), mark);
            }
            state.recordRect(key, c0, c1);
            if (l == b.layer && h == b.head)
                dl->AddRect(ImVec2(c0.x - 2, c0.y - 2), ImVec2(c1.x + 2, c1.y + 2), IM_COL32(255, 200, 60, 255), 0, 0, 2.0f);
            if (hovered) {
                if (!b.thumbErrors[i].empty())
                    ImGui::SetTooltip("%s, %s: %s", layerName(ob, l).c_str(), headName(ob, h).c_str(), b.thumbErrors[i].c_str());
                else
                    ImGui::SetTooltip("%s, %s%s\nclick: open its map (zoom to single cells)\nright-click: show its lines",
                                      layerName(ob, l).c_str(), headName(ob, h).c_str(),
                                      v.rows() < maps.queries() ? "\neach cell the largest weight of its block of tokens" : "");
            }
            if (pressed) openHead(b, l, h);
            if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
                b.layer = l;
                b.head = h;
            }
            ImGui::PopID();
        }
    }
    ImGui::SetCursorScreenPos(o);
    ImGui::Dummy(ImVec2(plan.contentWidth, plan.contentHeight));
    ImGui::EndChild();
}

namespace {

// Saves a figure of the grid, the selected head or its lines (the format from the file name), through the same
// code as `attnscope render --bundle`.
void saveBundleFigure(BundleState& b, fig::ModelFigureKind kind)
{
    const OpenedBundle& ob = *b.bundle;
    const std::optional<fig::FigureFormat> format = fig::formatFromPath(b.exportPath);
    attn::Status st;
    if (!format) {
        st = attn::invalidArgument(b.exportPath + ": expected a .png, .svg or .pdf file name");
    } else {
        const RunView run(*ob.maps, ob.tokens, ob.keyTokens);
        fig::ModelFigureOptions fo;
        fo.kind = kind;
        fo.layer = b.layer;
        fo.head = b.head;
        attn::Expected<std::string> bytes = std::string();
        if (kind == fig::ModelFigureKind::Lines) {
            bytes = fig::renderLinesFigure(ob.name, run, fo, *format, 2.0);
        } else {
            attn::Expected<fig::Figure> f = fig::buildModelFigure(ob.name, run, fo);
            bytes = f ? fig::renderFigure(*f, *format, 2.0) : attn::Expected<std::string>(f.status());
        }
        st = bytes ? attn::writeFileAtomic(b.exportPath, *bytes) : bytes.status();
    }
    b.exportStatus = st.ok() ? "saved " + b.exportPath : st.message;
    if (st.ok()) postInfo(b.exportStatus);
    else postError(b.exportStatus);
}

// The selected head's whole map as .npy (next to the figure's name).
void saveBundleArray(BundleState& b)
{
    std::filesystem::path p(b.exportPath);
    p.replace_extension(".npy");
    attn::Matrix w;
    attn::Status st = b.bundle->maps->whole(attn::MapKind::Weights, b.layer, b.head, w);
    if (st.ok()) {
        io::NamedArray a;
        a.name = "weights";
        a.matrix = &w;
        st = io::writeNpy(p.string(), a);
    }
    b.exportStatus = st.ok() ? "saved " + p.string() : st.message;
    if (st.ok()) postInfo(b.exportStatus);
    else postError(b.exportStatus);
}

void drawExportRow(AppState& state)
{
    BundleState& b = state.bundle;
    ImGui::SetNextItemWidth(-1);
    ImGui::InputText("##bundle_export", &b.exportPath);
    if (ImGui::Button("Save grid")) saveBundleFigure(b, fig::ModelFigureKind::ModelView);
    state.recordRect("bundle/save/grid", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    if (ImGui::Button("Save head")) saveBundleFigure(b, fig::ModelFigureKind::Head);
    state.recordRect("bundle/save/head", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    if (ImGui::Button("Save lines")) saveBundleFigure(b, fig::ModelFigureKind::Lines);
    ImGui::SameLine();
    if (ImGui::Button("Save head .npy")) saveBundleArray(b);
    state.recordRect("bundle/save/npy", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (!b.exportStatus.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", b.exportStatus.c_str());
        ImGui::PopTextWrapPos();
        state.recordRect("bundle/save_status", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
}

// The lines view of the selected head (short bundles), and the export row.
void drawLinesAndExport(AppState& state, ImVec2 size)
{
    BundleState& b = state.bundle;
    const OpenedBundle& ob = *b.bundle;
    const attn::AttentionMaps& maps = *ob.maps;
    ImGui::BeginChild("bundle_lines", ImVec2(size.x * 0.5f, size.y));
    ImGui::TextWrapped("Lines view: %s, %s (right-click a thumbnail to pick; hover a token)", layerName(ob, b.layer).c_str(),
                       headName(ob, b.head).c_str());
    if (std::max(maps.queries(), maps.keys()) > kBundleLinesMax) {
        ImGui::TextWrapped("The lines view draws up to %d tokens; this bundle has %d. Click a thumbnail to see the head's "
                           "map, which zooms to single cells.", kBundleLinesMax, std::max(maps.queries(), maps.keys()));
    } else {
        if (b.linesLayer != b.layer || b.linesHead != b.head) {
            b.linesError.clear();
            if (attn::Status s = maps.whole(attn::MapKind::Weights, b.layer, b.head, b.linesMap); !s.ok()) {
                b.linesMap.resize(0, 0);
                b.linesError = s.message;
            }
            b.linesLayer = b.layer;
            b.linesHead = b.head;
        }
        if (!b.linesError.empty()) ImGui::TextColored(ImVec4(0.85f, 0.2f, 0.2f, 1), "%s", b.linesError.c_str());
        else drawLinesMap(state, ImVec2(size.x * 0.5f, size.y - ImGui::GetTextLineHeightWithSpacing()), ob.tokens,
                          ob.keyTokens, b.linesMap, b.hoverToken, b.linesRow);
    }
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("bundle_info", ImVec2(0, size.y));
    ImGui::TextWrapped("%s: %d layers × %d heads, %d queries × %d keys, from %s", ob.name.c_str(), maps.layers(),
                       maps.heads(), maps.queries(), maps.keys(), ob.path.c_str());
    if (bundleThumbsBusy(b))
        ImGui::Text("thumbnails: %d of %d", b.thumbsDone, maps.layers() * maps.heads());
    ImGui::Separator();
    ImGui::TextWrapped("Export (PNG, SVG or PDF from the name; head and lines: the selected head)");  // narrow windows
    drawExportRow(state);
    ImGui::EndChild();
}

} // namespace

// One head's map, zoomable from the whole map to single cells: the wheel zooms about the pointer, a drag pans,
// a double-click (or Fit) shows the whole map again.
void drawMapsHeadView(AppState& state, BundleState& b, ImVec2 size)
{
    const float y0 = ImGui::GetCursorPosY();
    const OpenedBundle& ob = *b.bundle;
    const std::string& k = b.keyPrefix;
    const attn::AttentionMaps& maps = *ob.maps;
    const int T = maps.queries(), S = maps.keys();
    const bool back = ImGui::Button("< Back");
    state.recordRect(k + "/back", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::Text("%s › %s › %s", ob.name.c_str(), layerName(ob, b.layer).c_str(), headName(ob, b.head).c_str());
    state.recordRect(k + "/breadcrumb", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::TextDisabled("(Esc or Back: the grid)");
    ImGui::SameLine();
    const bool fit = ImGui::Button("Fit");
    state.recordRect(k + "/fit", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    // Over thousands of keys a diffuse head's weights are all near 1/n: on the 0…1 scale they are one colour.
    ImGui::Checkbox("scale to the view's largest weight", &b.viewRange);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("off: 0 to 1 for every head (heads comparable)\non: 0 to the largest weight shown (a diffuse head's pattern)");
    const bool esc = ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false) && !ImGui::GetIO().WantTextInput;
    if (back || esc) {
        b.headOpen = false;
        return;
    }
    // The map's room: what is left of `size` under the header (in the model window the lines view and predictions
    // sit below it), less the colorbar and two text lines under it.
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 avail(std::min(size.x, ImGui::GetContentRegionAvail().x), size.y - (ImGui::GetCursorPosY() - y0));
    const float W = std::max(64.0f, avail.x - kColorbarWidth - 8), Hpx = std::max(64.0f, avail.y - 2 * line - 4);
    if (fit) b.viewport = {};
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton((k + "_map").c_str(), ImVec2(W, Hpx));
    state.recordRect(k + "/map", o, ImVec2(o.x + W, o.y + Hpx));
    const ImGuiIO& io = ImGui::GetIO();
    const bool hovered = ImGui::IsItemHovered();
    if (hovered && io.MouseWheel != 0)
        b.viewport = zoomAt(b.viewport, std::pow(1.25, double(io.MouseWheel)), io.MousePos.x - o.x, io.MousePos.y - o.y, T, S, W, Hpx);
    if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f))
        b.viewport = panBy(b.viewport, io.MouseDelta.x, io.MouseDelta.y, T, S, W, Hpx);
    if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) b.viewport = {};
    const MapFrame& f = updateBundleTile(b, W, Hpx);
    // What the map shows, for the end-to-end test: a max-pooled overview or single cells.
    state.recordRect(k + (f.pooled ? "/map_pooled" : "/map_cells"), o, ImVec2(o.x + W, o.y + Hpx));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(o, ImVec2(o.x + W, o.y + Hpx), IM_COL32(20, 20, 24, 255));
    if (!b.tileError.empty()) {
        ImGui::SetCursorScreenPos(ImVec2(o.x + 8, o.y + 8));
        ImGui::PushTextWrapPos(o.x + W - 8);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", b.tileError.c_str());
        ImGui::PopTextWrapPos();
    }
    attn::DisplayRange range{0.0f, 1.0f, 0};
    if (b.viewRange && b.tile.size() > 0) {
        const attn::DisplayRange shown = attn::displayRange(b.tile, nullptr, false);  // weights ≥ 0: from 0 to its top
        range.hi = shown.hi > 0 ? shown.hi : 1.0f;
    }
    if (b.tileError.empty() && b.tile.size() > 0) {
        HeatmapSource src;
        src.values = &b.tile;
        src.range = range;
        src.colormap = attn::Colormap::Viridis;
        src.generation = b.tileGeneration;
        const ImVec2 a(o.x + float(f.offsetX), o.y + float(f.offsetY));
        dl->PushClipRect(o, ImVec2(o.x + W, o.y + Hpx), true);
        drawHeatmapCells(dl, a, ImVec2(a.x + float(f.drawWidth), a.y + float(f.drawHeight)), k + "/head", src);
        // Deep enough to read: each cell's value in it.
        if (!f.pooled && f.scale >= 28 && b.tile.rows() == f.rect.rows && b.tile.cols() == f.rect.cols) {
            for (int i = 0; i < f.rect.rows; ++i)
                for (int j = 0; j < f.rect.cols; ++j) {
                    const float v = b.tile(i, j);
                    const std::string t = cellValueText(v, float(f.scale), ImGui::GetFontSize());
                    const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
                    const float cx = a.x + float((j + 0.5) * f.scale), cy = a.y + float((i + 0.5) * f.scale);
                    dl->AddText(ImVec2(cx - ts.x / 2, cy - ts.y / 2), contrastingTextColor(attn::Colormap::Viridis, src.range, v), t.c_str());
                }
        }
        dl->PopClipRect();
    }
    int row = -1, col = -1;
    if (hovered && cellAt(b.viewport, io.MousePos.x - o.x, io.MousePos.y - o.y, T, S, W, Hpx, row, col)) {
        const std::string q = tokenLabel(ob.tokens[std::size_t(row)]), k = tokenLabel(ob.keyTokens[std::size_t(col)]);
        // (The pointer's cell lies in the fetched rectangle but for float rounding at its far edge: checked.)
        const int ti = row - f.rect.r0, tj = col - f.rect.c0;
        if (!f.pooled && ti >= 0 && tj >= 0 && ti < b.tile.rows() && tj < b.tile.cols()) {
            const float v = b.tile(ti, tj);
            ImGui::SetTooltip("query %d '%s' → key %d '%s': %.4g\nwheel: zoom, drag: pan, double-click: fit", row, q.c_str(),
                              col, k.c_str(), v);
        } else {
            const double cells = 1.0 / f.scale;
            ImGui::SetTooltip("near query %d '%s' → key %d '%s'\neach pixel: the largest weight of about %.0f × %.0f cells\n"
                              "wheel: zoom in to single cells, drag: pan", row, q.c_str(), col, k.c_str(), cells, cells);
        }
        // A decoder's long text (the model's own maps): "Why here?" of the cell, whose panel says what core makes of
        // a lazy run.
        if (&b == &state.model.longView && state.model.isDecoder() && !f.pooled && ImGui::IsMouseClicked(ImGuiMouseButton_Right))
            offerQkMenu(state, b.layer, b.head, row, col, false);
    }
    ImGui::SetCursorScreenPos(ImVec2(o.x + W + 8, o.y));
    drawColorbar((k + "_cb").c_str(), attn::Colormap::Viridis, range, std::min(Hpx, kColorbarMaxHeight));
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + Hpx + 4));
    if (f.pooled)
        ImGui::Text("queries %d–%d × keys %d–%d of %d × %d; max-pooled: each pixel shows the largest weight of its "
                    "%.0f × %.0f-cell block, so a sharp key stays visible", f.rect.r0, f.rect.r0 + f.rect.rows - 1,
                    f.rect.c0, f.rect.c0 + f.rect.cols - 1, T, S, 1.0 / f.scale, 1.0 / f.scale);
    else
        ImGui::Text("queries %d–%d × keys %d–%d of %d × %d; %.0f px a cell", f.rect.r0, f.rect.r0 + f.rect.rows - 1,
                    f.rect.c0, f.rect.c0 + f.rect.cols - 1, T, S, f.scale);
    state.recordRect(k + "/map_legend", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::TextDisabled("wheel: zoom about the pointer · drag: pan · double-click or Fit: the whole map · fetched in %.0f ms",
                        b.tileMs);
}

bool bundleViewShown(const AppState& state) { return state.bundle.active() && state.bundle.showView; }

void drawBundlePanel(AppState& state)
{
    BundleState& b = state.bundle;
    if (!bundleViewShown(state)) return;
    pollBundleThumbs(b);
    const OpenedBundle& ob = *b.bundle;
    const attn::AttentionMaps& maps = *ob.maps;
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const float left = controlsWidth(state);
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + left, vp->WorkPos.y));
    ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x - left, vp->WorkSize.y - kStatusBarHeight));
    const int total = maps.layers() * maps.heads();
    const std::string title = "Bundle: " + ob.name + " (" + std::to_string(maps.layers()) + " layers × " +
                              std::to_string(maps.heads()) + " heads, " + std::to_string(maps.queries()) + " tokens" +
                              (maps.keys() != maps.queries() ? " × " + std::to_string(maps.keys()) + " keys" : std::string()) + ")" +
                              (bundleThumbsBusy(b) ? "   thumbnails " + std::to_string(b.thumbsDone) + "/" + std::to_string(total) : std::string()) +
                              "###bundle";
    ImGui::SetNextWindowBgAlpha(1.0f);
    ImGui::Begin(title.c_str(), nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse);
    if (b.headOpen) {
        drawMapsHeadView(state, b, ImGui::GetContentRegionAvail());
    } else {
        const ImVec2 avail = ImGui::GetContentRegionAvail();
        drawMapsGrid(state, b, ImVec2(avail.x, avail.y * 0.62f));
        ImGui::Separator();
        const ImVec2 rest = ImGui::GetContentRegionAvail();
        drawLinesAndExport(state, ImVec2(rest.x, std::max(rest.y, 120.0f)));
    }
    ImGui::End();
}

void drawBundleSidebar(AppState& state)
{
    BundleState& b = state.bundle;
    const OpenedBundle& ob = *b.bundle;
    const attn::AttentionMaps& maps = *ob.maps;
    ImGui::TextWrapped("%s", ob.name.c_str());
    state.recordRect("control/bundle_summary", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("attention bundle: %d layers × %d heads", maps.layers(), maps.heads());
    ImGui::TextDisabled("%d queries × %d keys", maps.queries(), maps.keys());
    ImGui::TextDisabled("%s", ob.path.c_str());
    ImGui::Separator();
    ImGui::TextWrapped("View only: attention another program computed (docs/bundle.md). Click a thumbnail to open the "
                       "head's map (the wheel zooms to single cells); right-click one to show its lines.");
    ImGui::PopTextWrapPos();
    ImGui::Separator();
    if (ImGui::Button("Close bundle")) {
        closeBundle(b);
        if (state.model.active) state.model.showView = true;
    }
    state.recordRect("bundle/close", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
}

void drawBundleStatus(AppState& state, const std::string& backend)
{
    const BundleState& b = state.bundle;
    const attn::AttentionMaps& maps = *b.bundle->maps;
    ImGui::Text("%s   |   bundle %s   |   %d tokens  layers=%d  heads=%d%s", backend.c_str(), b.bundle->name.c_str(),
                maps.queries(), maps.layers(), maps.heads(),
                bundleThumbsBusy(b) ? ("   |   thumbnails " + std::to_string(b.thumbsDone)).c_str() : "");
    state.recordRect("status/bundle", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
}

} // namespace app
