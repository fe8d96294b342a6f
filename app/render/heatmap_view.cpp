#include "render/heatmap_view.h"

#include "panels/display_text.h"
#include "panels/glyph_atlas.h"

#include <imgui_internal.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>

namespace app {
namespace {

HeatmapRenderer* g_renderer = nullptr;

// The CPU fallback draws at most this many cells (beyond that one grey block): the null-backend smoke test
// and headless use only need it for small maps, and 64k rectangles per map would be slow.
constexpr long kCpuFallbackMaxCells = 65536;

ImU32 toU32(attn::Rgb8 c, int alpha = 255) { return IM_COL32(c.r, c.g, c.b, alpha); }

void drawCellsCpu(ImDrawList* dl, ImVec2 a, ImVec2 b, const HeatmapSource& src)
{
    const attn::Matrix& m = *src.values;
    if (m.size() == 0) return;
    if (m.size() > kCpuFallbackMaxCells) {
        dl->AddRectFilled(a, b, toU32(attn::kMaskedColor));
        return;
    }
    const float cw = (b.x - a.x) / static_cast<float>(m.cols()), ch = (b.y - a.y) / static_cast<float>(m.rows());
    const bool hasMask = src.mask && src.mask->size() == m.size();
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c) {
            const ImVec2 p0(a.x + cw * static_cast<float>(c), a.y + ch * static_cast<float>(r));
            const ImVec2 p1(p0.x + cw, p0.y + ch);
            if (hasMask && (*src.mask)(r, c)) {
                dl->AddRectFilled(p0, p1, toU32(attn::kMaskedColor));
                dl->AddLine(ImVec2(p0.x, p1.y), ImVec2(p1.x, p0.y), IM_COL32(110, 110, 110, 255));
                continue;
            }
            const float v = m(r, c);
            const ImU32 col = std::isfinite(v) ? toU32(attn::colormapColor(src.colormap, attn::normalize(v, src.range)))
                                               : IM_COL32(0, 0, 0, 255);
            dl->AddRectFilled(p0, p1, col);
        }
}

// Adds `text` turned 90° counter-clockwise (reading bottom to top), its baseline start at `bottomLeft`.
void addVerticalText(ImDrawList* dl, ImVec2 bottomLeft, ImU32 col, const char* text)
{
    const int v0 = dl->VtxBuffer.Size;
    dl->AddText(bottomLeft, col, text);
    // Rotate the new vertices by -90° about bottomLeft: (dx, dy) -> (dy, -dx).
    for (int i = v0; i < dl->VtxBuffer.Size; ++i) {
        ImVec2& p = dl->VtxBuffer[i].pos;
        const float dx = p.x - bottomLeft.x, dy = p.y - bottomLeft.y;
        p = ImVec2(bottomLeft.x + dy, bottomLeft.y - dx);
    }
}

// Zooming (the cell size changed since the last frame) keeps the entry under the mouse where it is, as maps
// and image viewers do, instead of zooming about the map's corner. Call inside the map's scrolling child.
void keepPointUnderMouse(ImVec2 cell, ImVec2 bands)
{
    ImGuiStorage* st = ImGui::GetStateStorage();
    const ImGuiID idx = ImGui::GetID("cell width"), idy = ImGui::GetID("cell height");
    const ImGuiID bx = ImGui::GetID("bands x"), by = ImGui::GetID("bands y");
    const ImVec2 prev(st->GetFloat(idx, cell.x), st->GetFloat(idy, cell.y));
    // The label bands come and go with the cell size (labels show from 0.8 of the font): the point under the mouse
    // is measured with the bands it was drawn with.
    const ImVec2 prevBands(st->GetFloat(bx, bands.x), st->GetFloat(by, bands.y));
    st->SetFloat(idx, cell.x);
    st->SetFloat(idy, cell.y);
    st->SetFloat(bx, bands.x);
    st->SetFloat(by, bands.y);
    if ((prev.x == cell.x && prev.y == cell.y) || prev.x <= 0 || prev.y <= 0 || !ImGui::IsWindowHovered()) return;
    const ImVec2 wp = ImGui::GetWindowPos(), mp = ImGui::GetIO().MousePos;
    const float mx = mp.x - wp.x, my = mp.y - wp.y;  // the mouse in the view
    // Each axis by its own factor (a thin map's cells are not square: chain_panel fits its sides apart).
    const float kx = cell.x / prev.x, ky = cell.y / prev.y;
    // The point under the mouse in cell coordinates (label bands excluded), scaled, put back under the mouse.
    const float cx = ImGui::GetScrollX() + mx - prevBands.x, cy = ImGui::GetScrollY() + my - prevBands.y;
    ImGui::SetScrollX(std::max(0.0f, cx * kx + bands.x - mx));
    ImGui::SetScrollY(std::max(0.0f, cy * ky + bands.y - my));
}

// Overview of a map larger than its view: the whole map in miniature (its cells drawn small by the renderer,
// from the same texture), in the view's top-left corner, with the part on screen outlined (where you are
// after zooming and panning). With no renderer (the CPU fallback) only the frame: a miniature drawn one
// rectangle per cell would cost as much as the map.
void drawOverview(ImVec2 full, ImVec2 bands, const HeatmapSpec& spec)
{
    const ImVec2 wpos = ImGui::GetWindowPos(), wsize = ImGui::GetWindowSize();
    const float sbw = ImGui::GetStyle().ScrollbarSize;
    const ImVec2 view(wsize.x - sbw, wsize.y - sbw);
    const float content = std::max(full.x - bands.x, full.y - bands.y);
    const float side = 44.0f;  // the longer side of the overview, pixels (small and see-through: it covers cells)
    const float k = side / std::max(1.0f, content);
    // At least 8 px across, so that a 4096×8 map still shows where you are along its long side.
    const ImVec2 size(std::max(8.0f, (full.x - bands.x) * k), std::max(8.0f, (full.y - bands.y) * k));
    const float kx = size.x / std::max(1.0f, full.x - bands.x), ky = size.y / std::max(1.0f, full.y - bands.y);
    // Top-left corner of the view: the label corner while the map is at its origin, and never off-window
    // when the view runs past the window's right edge.
    const ImVec2 o(wpos.x + 4.0f, wpos.y + 4.0f);
    ImDrawList* fg = ImGui::GetWindowDrawList();
    fg->AddRectFilled(ImVec2(o.x - 1, o.y - 1), ImVec2(o.x + size.x + 1, o.y + size.y + 1), IM_COL32(20, 20, 24, 110));
    if (g_renderer) g_renderer->drawCells(fg, o, ImVec2(o.x + size.x, o.y + size.y), spec.key, spec.src);
    fg->AddRect(o, ImVec2(o.x + size.x, o.y + size.y), IM_COL32(200, 200, 210, 220));
    const float x0 = std::max(0.0f, ImGui::GetScrollX() - bands.x), y0 = std::max(0.0f, ImGui::GetScrollY() - bands.y);
    const ImVec2 v0(o.x + std::min(x0 * kx, size.x - 2.0f), o.y + std::min(y0 * ky, size.y - 2.0f));
    const ImVec2 v1(std::min(o.x + size.x, v0.x + std::max(2.0f, view.x * kx)), std::min(o.y + size.y, v0.y + std::max(2.0f, view.y * ky)));
    fg->AddRectFilled(v0, v1, IM_COL32(255, 200, 60, 90));
    fg->AddRect(v0, v1, IM_COL32(255, 200, 60, 255));
}

// The visible part of a fitted map whose cells are under a pixel, max-pooled to one value a pixel (attn::poolMax,
// core's: each value the largest of its block, so one sharp weight stays visible), kept per map key while the
// map's data (generation), the part and the pixels are the same: a still map pools once, not every frame. A new
// result's part comes ready from the worker (spec.prepooled) when the frames asked for it; the frame pools
// only a part nobody pooled yet (the first result, a zoom or pan).
struct PooledPart {
    std::uint64_t sourceGeneration = 0;
    PoolPart part;
    attn::Matrix values;
    std::uint64_t generation = 0;  // unique in the process (the renderer's texture key is the map's key + "/pooled")
    bool blank = false;            // nothing to pool yet (cells not on the host, not pooled on the device): ask again
};

const PooledPart& pooledPart(const std::string& key, const HeatmapSource& src, const PoolPart& part,
                             const std::function<const attn::Matrix*(const PoolPart&)>& prepooled)
{
    static std::map<std::string, PooledPart> parts;
    static std::atomic<std::uint64_t> next{1};
    PooledPart& p = parts[key];
    if (p.generation == 0 || p.blank || p.sourceGeneration != src.generation || p.part != part) {
        const attn::Matrix* ready = prepooled ? prepooled(part) : nullptr;
        const bool wasBlank = p.blank && p.sourceGeneration == src.generation && p.part == part;
        p.blank = false;
        if (ready) {
            p.values = *ready;
        } else if (src.onHost()) {
            p.values = attn::poolMax(src.values->block(part.r0, part.c0, part.rows, part.cols), part.outRows, part.outCols);
        } else {
            // Cells neither on the host nor pooled yet (a device result's maps while the device is busy or gone):
            // blank (NaN: no value), asked again next frame.
            p.blank = true;
            if (wasBlank) return p;  // the same blank: its texture stands
            p.values = attn::Matrix::Constant(part.outRows, part.outCols, std::numeric_limits<float>::quiet_NaN());
        }
        p.sourceGeneration = src.generation;
        p.part = part;
        p.generation = next.fetch_add(1);
    }
    return p;
}

} // namespace

void setHeatmapRenderer(HeatmapRenderer* r) { g_renderer = r; }

void drawHeatmapCells(ImDrawList* dl, ImVec2 a, ImVec2 b, const std::string& key, const HeatmapSource& src)
{
    if (g_renderer) g_renderer->drawCells(dl, a, b, key, src);
    else drawCellsCpu(dl, a, b, src);
}

ImTextureID uploadRgbaImage(const std::string& key, int width, int height, const std::uint8_t* rgba)
{
    return g_renderer ? g_renderer->uploadImage(key, width, height, rgba) : nullptr;
}

std::string axisLabel(const std::vector<std::string>* labels, int i)
{
    if (labels && i >= 0 && static_cast<std::size_t>(i) < labels->size()) {
        std::string label = visualOrder((*labels)[static_cast<std::size_t>(i)]);  // right-to-left runs drawn right
        wantGlyphs(label);  // drawn next: its characters in the font atlas
        return label;
    }
    return std::to_string(i);
}

std::string cellValueText(float v, float cellPx, float fontSize)
{
    if (!std::isfinite(v)) return "";
    ImFont* font = ImGui::GetFont();
    const float room = cellPx - 3.0f;
    for (int digits : {3, 2}) {
        const std::string t = attn::formatValue(v, digits);
        if (font->CalcTextSizeA(fontSize, FLT_MAX, 0.0f, t.c_str()).x <= room) return t;
    }
    // "0.91" → ".91", "-0.5" → "-.5": the compact form plots use when the cell is narrow; then one significant
    // digit ("-0.0955" → "-.1"), so that a small negative value is not the one blank cell of a map.
    for (int digits : {2, 1}) {
        std::string t = attn::formatValue(v, digits);
        if (t.rfind("0.", 0) == 0) t.erase(0, 1);
        else if (t.rfind("-0.", 0) == 0) t.erase(1, 1);
        if (font->CalcTextSizeA(fontSize, FLT_MAX, 0.0f, t.c_str()).x <= room) return t;
    }
    // Not even that fits: a dot says "a value is here, too wide to print" (a blank cell read as 0).
    return "\u00b7";
}

ImU32 contrastingTextColor(attn::Colormap cmap, const attn::DisplayRange& range, float v)
{
    const attn::Rgb8 c = attn::colormapColor(cmap, attn::normalize(v, range));
    // Relative luminance with Rec. 709 weights; 140 of 255 splits the maps' light and dark halves well.
    const float lum = 0.2126f * c.r + 0.7152f * c.g + 0.0722f * c.b;
    return lum > 140.0f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

HeatmapHit drawHeatmap(const HeatmapSpec& spec)
{
    HeatmapHit hit;
    const attn::Matrix& m = *spec.src.values;
    const int rows = spec.src.rows(), cols = spec.src.cols();  // (the map's shape also while its cells are not on the host)
    ImGui::PushID(spec.key.c_str());
    if (rows == 0 || cols == 0) {
        ImGui::TextDisabled("(empty)");
        ImGui::PopID();
        return hit;
    }
    // Under a pixel only for a fitted map, which pools its cells (below). A cell is cw wide and ch tall: square
    // unless the caller fits a thin map's sides apart (cellPxY).
    const float cw = std::max(spec.wheelZooms ? 1e-3f : 1.0f, spec.cellPx);
    const float ch = spec.cellPxY > 0 ? std::max(spec.wheelZooms ? 1e-3f : 1.0f, spec.cellPxY) : cw;
    const float fontH = ImGui::GetFontSize();

    // Label bands: row labels on the left, column labels on top (turned when they do not fit across a cell).
    // Labels are left out when cells are smaller than the text (large n): hover still names each cell.
    const bool rowLabelsFit = spec.rowLabelsShown && ch >= fontH * 0.8f;
    const bool colLabelsFit = spec.colLabelsShown && cw >= fontH * 0.8f;
    float rowBand = 0, colBand = 0, maxColLabelW = 0;
    // Measuring every label costs O(n) a frame: past kMeasuredLabels the bands take their widest size.
    constexpr int kMeasuredLabels = 512;
    if (rowLabelsFit) {
        rowBand = rows > kMeasuredLabels ? 70.0f : 0.0f;
        for (int r = 0; r < rows && rows <= kMeasuredLabels; ++r)
            rowBand = std::max(rowBand, ImGui::CalcTextSize(axisLabel(spec.rowLabels, r).c_str()).x);
        rowBand = std::min(rowBand, 70.0f) + 6.0f;
    }
    bool colVertical = false;
    if (colLabelsFit) {
        maxColLabelW = cols > kMeasuredLabels ? 60.0f : 0.0f;
        for (int c = 0; c < cols && cols <= kMeasuredLabels; ++c)
            maxColLabelW = std::max(maxColLabelW, ImGui::CalcTextSize(axisLabel(spec.colLabels, c).c_str()).x);
        colVertical = maxColLabelW > cw - 2.0f;
        colBand = colVertical ? std::min(maxColLabelW, 60.0f) + 4.0f : fontH + 2.0f;
    }
    // Axis titles, outside the label bands: the row title turned, left of the row labels.
    const bool rowTitle = rowLabelsFit && !spec.rowTitle.empty();
    const bool colTitle = colLabelsFit && !spec.colTitle.empty();
    const float rowLabelBand = rowBand, colLabelBand = colBand;
    if (rowTitle) rowBand += fontH + 2.0f;
    if (colTitle) colBand += fontH + 2.0f;
    colBand = std::max(colBand, spec.minColBand);
    const ImVec2 full(rowBand + cw * static_cast<float>(cols), colBand + ch * static_cast<float>(rows));
    // Half a pixel of slack: a map fitted to its box (n cells of box/n px) must not overflow by a rounding error.
    const bool overflows = full.x > spec.maxWidth + 0.5f || full.y > spec.maxHeight + 0.5f;
    const bool scroll = spec.wheelZooms || overflows;
    if (scroll) {
        const ImVec2 view(std::min(full.x, spec.maxWidth) + ImGui::GetStyle().ScrollbarSize,
                          std::min(full.y, spec.maxHeight) + ImGui::GetStyle().ScrollbarSize);
        // A fitted map (wheelZooms) keeps its scrollbars' room while whole, so that zooming it moves no map around.
        const ImVec2 box = spec.wheelZooms && !overflows ? ImVec2(full.x + ImGui::GetStyle().ScrollbarSize, full.y + ImGui::GetStyle().ScrollbarSize) : view;
        ImGui::BeginChild("scroll", box, false, ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
        keepPointUnderMouse(ImVec2(cw, ch), ImVec2(rowBand, colBand));
    }
    hit.viewMin = ImGui::GetWindowPos();
    hit.viewMax = ImVec2(hit.viewMin.x + ImGui::GetWindowSize().x, hit.viewMin.y + ImGui::GetWindowSize().y);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 a(origin.x + rowBand, origin.y + colBand);
    const ImVec2 b(a.x + cw * static_cast<float>(cols), a.y + ch * static_cast<float>(rows));

    hit.cellsMin = a;
    hit.cellsMax = b;
    // The rows and columns on screen: text and labels are drawn for those only (frame time must not grow with n).
    const ImVec2 clipMin = dl->GetClipRectMin(), clipMax = dl->GetClipRectMax();
    const int vr0 = std::clamp(static_cast<int>((clipMin.y - a.y) / ch), 0, rows);
    const int vr1 = std::clamp(static_cast<int>((clipMax.y - a.y) / ch) + 1, 0, rows);
    const int vc0 = std::clamp(static_cast<int>((clipMin.x - a.x) / cw), 0, cols);
    const int vc1 = std::clamp(static_cast<int>((clipMax.x - a.x) / cw) + 1, 0, cols);
    // Interaction: one invisible button over the cells, and one per label band.
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton("cells", ImVec2(b.x - a.x, b.y - a.y));
    const bool hovered = ImGui::IsItemHovered();
    // A map that scrolls takes the wheel itself (pan below, Ctrl+wheel zooms): the window around it must not
    // scroll as well. ImGui's internal API (Debian's libimgui-dev 1.86 ships imgui_internal.h).
    if (scroll) ImGui::SetItemUsingMouseWheel();
    const ImGuiIO& io = ImGui::GetIO();
    hit.mouseInCells = ImVec2(io.MousePos.x - a.x, io.MousePos.y - a.y);
    if (spec.wheelZooms && ImGui::IsWindowHovered() && io.MouseWheel != 0 && !io.KeyShift) hit.zoomWheel = io.MouseWheel;
    if (hovered) {
        const ImVec2 mp = ImGui::GetIO().MousePos;
        hit.col = std::clamp(static_cast<int>((mp.x - a.x) / cw), 0, cols - 1);
        hit.row = std::clamp(static_cast<int>((mp.y - a.y) / ch), 0, rows - 1);
        hit.pressed = ImGui::IsMouseClicked(ImGuiMouseButton_Left);
        hit.held = ImGui::IsMouseDown(ImGuiMouseButton_Left);
        if (ImGui::GetIO().KeyCtrl && ImGui::GetIO().MouseWheel != 0) hit.zoomWheel = ImGui::GetIO().MouseWheel;
    }
    if (scroll && ImGui::IsWindowHovered() && !io.KeyCtrl && io.MouseWheel != 0 && (!spec.wheelZooms || io.KeyShift)) {
        // Wheel pans vertically, Shift+wheel horizontally (the child does not scroll with the mouse by itself,
        // so that Ctrl+wheel can zoom).
        const float step = (ImGui::GetIO().KeyShift ? cw : ch) * 3.0f * ImGui::GetIO().MouseWheel;
        if (ImGui::GetIO().KeyShift) ImGui::SetScrollX(ImGui::GetScrollX() - step);
        else ImGui::SetScrollY(ImGui::GetScrollY() - step);
    }
    // Drag with the middle or right button pans (the left button paints masks and picks cells).
    if (scroll && hovered && (ImGui::IsMouseDragging(ImGuiMouseButton_Middle) || ImGui::IsMouseDragging(ImGuiMouseButton_Right))) {
        const ImVec2 d = ImGui::GetIO().MouseDelta;
        ImGui::SetScrollX(ImGui::GetScrollX() - d.x);
        ImGui::SetScrollY(ImGui::GetScrollY() - d.y);
    }

    // Cells: under a pixel a cell, the visible part max-pooled to one value a pixel (a texture of n × n values
    // squeezed into fewer pixels would show every k-th value, and lose the sharp ones).
    if ((cw < 1.0f || ch < 1.0f) && vr1 > vr0 && vc1 > vc0) {
        const int outR = std::clamp(static_cast<int>(std::ceil(float(vr1 - vr0) * ch)), 1, vr1 - vr0);
        const int outC = std::clamp(static_cast<int>(std::ceil(float(vc1 - vc0) * cw)), 1, vc1 - vc0);
        hit.pooled = PoolPart{vr0, vc0, vr1 - vr0, vc1 - vc0, outR, outC};
        const PooledPart& part = pooledPart(spec.key, spec.src, hit.pooled, spec.prepooled);
        HeatmapSource ps = spec.src;
        ps.values = &part.values;
        ps.shapeRows = ps.shapeCols = 0;
        ps.mask = nullptr;  // masked weights are 0 and masked scores not finite: the maxima show them as such
        ps.generation = part.generation;
        ps.deviceGeneration = 0;
        const ImVec2 pa(a.x + cw * float(vc0), a.y + ch * float(vr0)), pb(a.x + cw * float(vc1), a.y + ch * float(vr1));
        if (g_renderer) g_renderer->drawCells(dl, pa, pb, spec.key + "/pooled", ps);
        else drawCellsCpu(dl, pa, pb, ps);
    } else if (g_renderer) {
        g_renderer->drawCells(dl, a, b, spec.key, spec.src);
    } else {
        drawCellsCpu(dl, a, b, spec.src);
    }

    // Values in the cells, when they fit (and the cell is on screen), black or white by the cell's colour.
    const bool hasMask = spec.src.mask && spec.src.mask->size() == m.size();
    // Cell values use a smaller size of the UI font, growing with the cell (11.5 px fits "0.25" in a 27 px
    // cell; at most the UI font's size).
    const float valueFont = std::clamp(std::min(cw, ch) * 0.42f, 11.5f, fontH);
    ImFont* font = ImGui::GetFont();
    if (spec.showValues && spec.src.onHost() && std::min(cw, ch) >= 11.5f * 1.6f) {
        for (int r = vr0; r < vr1; ++r) {
            const float y = a.y + ch * static_cast<float>(r);
            if (y > clipMax.y || y + ch < clipMin.y) continue;
            for (int c = vc0; c < vc1; ++c) {
                const float x = a.x + cw * static_cast<float>(c);
                if (x > clipMax.x || x + cw < clipMin.x) continue;
                if (hasMask && (*spec.src.mask)(r, c)) continue;
                const std::string t = cellValueText(m(r, c), cw, valueFont);
                if (t.empty()) continue;
                const ImVec2 ts = font->CalcTextSizeA(valueFont, FLT_MAX, 0.0f, t.c_str());
                dl->AddText(font, valueFont, ImVec2(x + (cw - ts.x) * 0.5f, y + (ch - ts.y) * 0.5f),
                            contrastingTextColor(spec.src.colormap, spec.src.range, m(r, c)), t.c_str());
            }
        }
    }

    // Labels.
    const ImU32 textCol = ImGui::GetColorU32(ImGuiCol_Text);
    const ImU32 markedCol = IM_COL32(230, 90, 60, 255);
    if (rowLabelsFit) {
        for (int r = vr0; r < vr1; ++r) {
            const std::string t = axisLabel(spec.rowLabels, r);
            const bool marked = r < static_cast<int>(spec.rowLabelMarked.size()) && spec.rowLabelMarked[static_cast<std::size_t>(r)];
            const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
            const ImVec2 p(a.x - 4.0f - std::min(ts.x, rowLabelBand - 6.0f), a.y + ch * static_cast<float>(r) + (ch - ts.y) * 0.5f);
            dl->PushClipRect(ImVec2(a.x - rowLabelBand, p.y), ImVec2(a.x, p.y + ts.y), true);
            dl->AddText(p, marked ? markedCol : (r == spec.highlightRow ? IM_COL32(255, 200, 60, 255) : textCol), t.c_str());
            dl->PopClipRect();
        }
        ImGui::SetCursorScreenPos(ImVec2(origin.x, a.y));
        ImGui::InvisibleButton("rowlabels", ImVec2(std::max(1.0f, rowBand), b.y - a.y));
        if (ImGui::IsItemClicked())
            hit.rowLabelClicked = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.y - a.y) / ch), 0, rows - 1);
    }
    if (colLabelsFit) {
        for (int c = vc0; c < vc1; ++c) {
            const std::string t = axisLabel(spec.colLabels, c);
            const bool marked = c < static_cast<int>(spec.colLabelMarked.size()) && spec.colLabelMarked[static_cast<std::size_t>(c)];
            const ImU32 col = marked ? markedCol : (c == spec.highlightCol ? IM_COL32(255, 200, 60, 255) : textCol);
            const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
            const float x = a.x + cw * static_cast<float>(c);
            if (colVertical) {
                addVerticalText(dl, ImVec2(x + (cw - ts.y) * 0.5f, a.y - 3.0f), col, t.c_str());
            } else {
                dl->AddText(ImVec2(x + (cw - ts.x) * 0.5f, a.y - colLabelBand), col, t.c_str());
            }
            if (marked)  // padded key: strike through its label
                dl->AddLine(ImVec2(x + 2, a.y - colLabelBand * 0.5f), ImVec2(x + cw - 2, a.y - colLabelBand * 0.5f), markedCol, 1.5f);
        }
        ImGui::SetCursorScreenPos(ImVec2(a.x, origin.y));
        ImGui::InvisibleButton("collabels", ImVec2(b.x - a.x, std::max(1.0f, colBand)));
        if (ImGui::IsItemClicked())
            hit.colLabelClicked = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - a.x) / cw), 0, cols - 1);
    }

    const ImU32 titleCol = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    if (rowTitle) {
        const ImVec2 ts = ImGui::CalcTextSize(spec.rowTitle.c_str());
        addVerticalText(dl, ImVec2(origin.x, a.y + (b.y - a.y + ts.x) * 0.5f), titleCol, spec.rowTitle.c_str());
    }
    if (colTitle) {
        const ImVec2 ts = ImGui::CalcTextSize(spec.colTitle.c_str());
        dl->AddText(ImVec2(a.x + (b.x - a.x - ts.x) * 0.5f, origin.y), titleCol, spec.colTitle.c_str());
    }

    // Head boundaries in the projections (Q, K, V, concat): a dark line between blocks.
    const ImU32 sep = IM_COL32(20, 20, 24, 255);
    if (spec.colBlock > 0)
        for (int c = std::max(spec.colBlock, (vc0 / spec.colBlock) * spec.colBlock); c < std::min(cols, vc1 + 1); c += spec.colBlock)
            dl->AddLine(ImVec2(a.x + cw * static_cast<float>(c), a.y), ImVec2(a.x + cw * static_cast<float>(c), b.y), sep, 2.0f);
    if (spec.rowBlock > 0)
        for (int r = std::max(spec.rowBlock, (vr0 / spec.rowBlock) * spec.rowBlock); r < std::min(rows, vr1 + 1); r += spec.rowBlock)
            dl->AddLine(ImVec2(a.x, a.y + ch * static_cast<float>(r)), ImVec2(b.x, a.y + ch * static_cast<float>(r)), sep, 2.0f);

    // Linked highlights: the hovered query's row / key's column, outlined (not coloured, so no value is hidden).
    const ImU32 hl = IM_COL32(255, 200, 60, 255);
    if (spec.highlightRow >= 0 && spec.highlightRow < rows) {
        const float y = a.y + ch * static_cast<float>(spec.highlightRow);
        dl->AddRect(ImVec2(a.x - 1, y - 1), ImVec2(b.x + 1, y + ch + 1), hl, 0, 0, 2.0f);
    }
    if (spec.highlightCol >= 0 && spec.highlightCol < cols) {
        const float x = a.x + cw * static_cast<float>(spec.highlightCol);
        dl->AddRect(ImVec2(x - 1, a.y - 1), ImVec2(x + cw + 1, b.y + 1), hl, 0, 0, 2.0f);
    }
    if (hit.row >= 0) {
        const ImVec2 p0(a.x + cw * static_cast<float>(hit.col), a.y + ch * static_cast<float>(hit.row));
        dl->AddRect(p0, ImVec2(p0.x + cw, p0.y + ch), IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
    }

    ImGui::SetCursorScreenPos(origin);
    ImGui::Dummy(full);
    if (scroll) {
        if (overflows) drawOverview(full, ImVec2(rowBand, colBand), spec);
        ImGui::EndChild();
    }
    ImGui::PopID();
    return hit;
}

std::pair<ImVec2, ImVec2> drawColorbar(const char* id, attn::Colormap cmap, const attn::DisplayRange& range, float height,
                                       float minWidth, const char* caption)
{
    ImGui::PushID(id);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = 12.0f;
    // As tall as the map it belongs to, but no taller than a map's scrolling view (large n).
    const float h = std::clamp(height, 40.0f, kColorbarMaxHeight);
    // 64 gradient strips (top = hi): smooth enough at any size a colorbar gets here.
    constexpr int kStrips = 64;
    for (int i = 0; i < kStrips; ++i) {
        const float t0 = 1.0f - static_cast<float>(i) / kStrips, t1 = 1.0f - static_cast<float>(i + 1) / kStrips;
        const ImU32 c0 = toU32(attn::colormapColor(cmap, t0)), c1 = toU32(attn::colormapColor(cmap, t1));
        const float y0 = p.y + h * static_cast<float>(i) / kStrips, y1 = p.y + h * static_cast<float>(i + 1) / kStrips;
        dl->AddRectFilledMultiColor(ImVec2(p.x, y0), ImVec2(p.x + w, y1), c0, c0, c1, c1);
    }
    dl->AddRect(p, ImVec2(p.x + w, p.y + h), ImGui::GetColorU32(ImGuiCol_Border));
    float labelW = 0;
    // About one tick per 16 px of height (a label is 14 px tall), 4 to 10 of them.
    const int maxTicks = std::clamp(static_cast<int>(h / 16.0f), 4, 10);
    for (float t : attn::rangeTicks(range, maxTicks)) {
        const float y = p.y + h * (1.0f - attn::normalize(t, range));
        dl->AddLine(ImVec2(p.x + w, y), ImVec2(p.x + w + 4, y), ImGui::GetColorU32(ImGuiCol_Text));
        const std::string s = attn::formatValue(t, 3);
        const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
        dl->AddText(ImVec2(p.x + w + 6, y - ts.y * 0.5f), ImGui::GetColorU32(ImGuiCol_Text), s.c_str());
        labelW = std::max(labelW, ts.x);
    }
    ImGui::Dummy(ImVec2(std::max(minWidth, w + 8 + labelW), h));
    if (!caption && range.scale == attn::ColorScale::Log && range.lo > 0 && range.hi > range.lo) caption = "log";
    if (caption) ImGui::TextDisabled("%s", caption);
    ImGui::PopID();
    return {p, ImVec2(p.x + w, p.y + h)};
}

} // namespace app
