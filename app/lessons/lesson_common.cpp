// Drawing helpers shared by the lesson panels. Colour comes from core's colormaps and display ranges, so
// these views agree with the heatmaps and the figure export.
#include "lessons/lesson_common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>

namespace app {

bool beginLessonPanel(LessonId id, ImVec2 firstSize, bool* open)
{
    ImGui::SetNextWindowSize(firstSize, ImGuiCond_FirstUseEver);
    // Content wider than the panel scrolls with a visible scrollbar instead of being cut at the right edge.
    if (ImGui::Begin(lesson(id).title, open, ImGuiWindowFlags_HorizontalScrollbar)) return true;
    ImGui::End();
    return false;
}

bool lessonHasResult(const LessonInputs& in, const char* note, bool fits)
{
    // A result shown before its maps are back from the device (Document::mapsArriving): the lessons read whole
    // maps (grids, rows, bars), so they wait for the completed result, which follows within a frame or so.
    if (in.session && in.result && !in.result->heads.empty() && in.result->mapsOnDevice) {
        noteText("The maps are coming from the GPU…");
        ImGui::End();
        return false;
    }
    if (in.session && in.result && !in.result->heads.empty() && fits) return true;
    noteText(note);
    ImGui::End();
    return false;
}

void clampSelection(const attn::AttentionResult& r, LessonState& st)
{
    const int H = int(r.heads.size());
    st.head = H > 0 ? std::clamp(st.head, 0, H - 1) : 0;
    if (H == 0) return;
    const attn::HeadResult& h = r.heads[st.head];
    const bool row = r.layout == attn::Layout::Row;
    const int T = int(row ? h.weights.rows() : h.weights.cols());
    const int S = int(row ? h.weights.cols() : h.weights.rows());
    st.query = T > 0 ? std::clamp(st.query, 0, T - 1) : 0;
    st.key = S > 0 ? std::clamp(st.key, 0, S - 1) : 0;
}

std::string tokenLabel(const std::vector<std::string>& labels, int i)
{
    if (i >= 0 && i < int(labels.size()) && !labels[i].empty()) return labels[i];
    return "#" + std::to_string(i);
}

std::string fitLabel(const std::string& label, float width)
{
    if (ImGui::CalcTextSize(label.c_str()).x <= width) return label;
    // U+2026 when the font has it (the DejaVu font loads U+2000…U+206F), else three dots.
    const char* ellipsis = ImGui::GetFont()->FindGlyphNoFallback(0x2026) ? "\u2026" : "...";
    std::size_t end = label.size();
    while (end > 0) {
        do --end;
        while (end > 0 && (static_cast<unsigned char>(label[end]) & 0xC0) == 0x80);  // UTF-8 continuation byte
        std::string text = label.substr(0, end) + ellipsis;
        if (ImGui::CalcTextSize(text.c_str()).x <= width) return end > 0 ? text : std::string();
    }
    return std::string();
}

void sameLineIfFits(float width, float spacing)
{
    const float gap = spacing >= 0.0f ? spacing : ImGui::GetStyle().ItemSpacing.x;
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + gap + width <= right) ImGui::SameLine(0.0f, gap);
}

void textWrapped(const char* fmt, ...)
{
    // Window-local wrap position of the visible content edge; ImGui subtracts the horizontal scroll itself.
    ImGui::PushTextWrapPos(ImGui::GetWindowContentRegionMax().x + ImGui::GetScrollX());
    va_list args;
    va_start(args, fmt);
    ImGui::TextV(fmt, args);
    va_end(args);
    ImGui::PopTextWrapPos();
}

void errorText(const std::string& message)
{
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(230, 80, 70, 255));
    textWrapped("%s", message.c_str());
    ImGui::PopStyleColor();
}

void noteText(const std::string& text)
{
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    textWrapped("%s", text.c_str());
    ImGui::PopStyleColor();
}

void sectionTitle(const char* title)
{
    ImGui::Spacing();
    ImGui::Separator();
    ImGui::TextUnformatted(title);
}

ImU32 toImColor(attn::Rgb8 c, std::uint8_t alpha) { return IM_COL32(c.r, c.g, c.b, alpha); }

ImU32 headColor(int head, std::uint8_t alpha)
{
    // Eight distinguishable hues (Okabe–Ito, a palette designed to stay distinct for colour-blind readers).
    static constexpr std::array<attn::Rgb8, 8> kPalette{{{230, 159, 0},
                                                         {86, 180, 233},
                                                         {0, 158, 115},
                                                         {240, 228, 66},
                                                         {0, 114, 178},
                                                         {213, 94, 0},
                                                         {204, 121, 167},
                                                         {160, 160, 160}}};
    return toImColor(kPalette[std::size_t(head) % kPalette.size()], alpha);
}

namespace {

// Black or white text, whichever reads better on the cell colour (Rec. 601 luma, threshold mid-grey).
ImU32 textOn(attn::Rgb8 c)
{
    const int luma = (299 * c.r + 587 * c.g + 114 * c.b) / 1000;
    return luma > 140 ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

} // namespace

GridOptions gridOptions(const LessonInputs& in, LessonMap kind)
{
    GridOptions o;
    o.colormap = in.colormap(kind);
    o.symmetric = attn::isDiverging(o.colormap);
    return o;
}

namespace {
constexpr float kRowLabelWidth = 56.0f;   // room for short token labels (longer ones end in an ellipsis)
}

float gridWidth(const char* title, const attn::Matrix& m, const GridOptions& o)
{
    const float cells = (o.rowLabels.empty() ? 0.0f : kRowLabelWidth) + o.cell * float(m.cols());
    return std::max(cells, title && *title ? ImGui::CalcTextSize(title).x : 0.0f);
}

GridHit drawMatrixGrid(const char* id, const char* title, const attn::Matrix& m, const GridOptions& o)
{
    GridHit hit;
    ImGui::PushID(id);
    if (title && *title) ImGui::TextUnformatted(title);
    const int R = int(m.rows()), C = int(m.cols());
    if (R == 0 || C == 0) {
        noteText("(empty)");
        ImGui::PopID();
        return hit;
    }
    const float labelW = o.rowLabels.empty() ? 0.0f : kRowLabelWidth;
    const float labelH = o.colLabels.empty() ? 0.0f : ImGui::GetTextLineHeight() + 2.0f;
    const float blockH = o.colBlocks.empty() ? 0.0f : 5.0f;    // the head-colour strip above the columns
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 size(labelW + o.cell * float(C), labelH + blockH + o.cell * float(R));
    ImGui::InvisibleButton("grid", size);
    const bool hovered = ImGui::IsItemHovered();
    const bool clicked = ImGui::IsItemClicked();
    ImDrawList* dl = ImGui::GetWindowDrawList();

    const attn::DisplayRange range = o.range ? *o.range : attn::displayRange(m, o.mask, o.symmetric);
    const ImVec2 cells(origin.x + labelW, origin.y + labelH + blockH);
    for (std::size_t b = 0; b < o.colBlocks.size(); ++b) {
        const auto [begin, end] = o.colBlocks[b];
        dl->AddRectFilled(ImVec2(cells.x + o.cell * float(begin), origin.y + labelH),
                          ImVec2(cells.x + o.cell * float(end), origin.y + labelH + blockH - 1.0f), headColor(int(b)));
    }
    // Labels wider than their cell end in an ellipsis (never run into the next one); hovering shows them whole.
    for (int c = 0; c < C && c < int(o.colLabels.size()); ++c) {
        const std::string l = fitLabel(o.colLabels[c], o.cell - 3.0f);
        dl->AddText(ImVec2(cells.x + o.cell * float(c) + 2.0f, origin.y), ImGui::GetColorU32(ImGuiCol_Text), l.c_str());
    }
    // Only the cells inside the window's clip rectangle are drawn: a 5×128 matrix would otherwise emit ~80k
    // vertices per frame for cells nobody can see.
    const ImVec2 clipMin = dl->GetClipRectMin(), clipMax = dl->GetClipRectMax();
    const int c0 = std::clamp(int(std::floor((clipMin.x - cells.x) / o.cell)), 0, C);
    const int c1 = std::clamp(int(std::ceil((clipMax.x - cells.x) / o.cell)), 0, C);
    const int r0 = std::clamp(int(std::floor((clipMin.y - cells.y) / o.cell)), 0, R);
    const int r1 = std::clamp(int(std::ceil((clipMax.y - cells.y) / o.cell)), 0, R);
    for (int r = r0; r < r1; ++r) {
        if (!o.rowLabels.empty()) {
            const std::string l = r < int(o.rowLabels.size()) ? fitLabel(o.rowLabels[r], labelW - 4.0f) : std::string();
            dl->AddText(ImVec2(origin.x, cells.y + o.cell * float(r) + (o.cell - ImGui::GetTextLineHeight()) * 0.5f),
                        ImGui::GetColorU32(ImGuiCol_Text), l.c_str());
        }
        for (int c = c0; c < c1; ++c) {
            const ImVec2 a(cells.x + o.cell * float(c), cells.y + o.cell * float(r));
            const ImVec2 b(a.x + o.cell - 1.0f, a.y + o.cell - 1.0f);
            const bool isMasked = o.mask && o.mask->rows() == R && o.mask->cols() == C && (*o.mask)(r, c);
            const float v = m(r, c);
            const attn::Rgb8 col = isMasked || !std::isfinite(v) ? attn::kMaskedColor
                                                                  : attn::colormapColor(o.colormap, attn::normalize(v, range));
            dl->AddRectFilled(a, b, toImColor(col));
            if (o.values && o.cell >= 26.0f) {
                // Two significant digits fit a narrow cell ("0.0094" would not); three from 44 px up.
                // Tiny values ("0.0009") fit neither: one digit, else no text (never a clipped number).
                std::string text = isMasked ? "×" : attn::formatValue(v, o.cell >= 44.0f ? 3 : 2);
                ImVec2 ts = ImGui::CalcTextSize(text.c_str());
                if (ts.x > o.cell - 3.0f) {
                    text = attn::formatValue(v, 1);
                    ts = ImGui::CalcTextSize(text.c_str());
                }
                if (ts.x <= o.cell - 3.0f)
                    dl->AddText(ImVec2(a.x + (o.cell - ts.x) * 0.5f, a.y + (o.cell - ts.y) * 0.5f), textOn(col), text.c_str());
            }
        }
    }
    const ImU32 hl = IM_COL32(255, 60, 60, 255);
    if (o.highlightRow >= 0 && o.highlightRow < R)
        dl->AddRect(ImVec2(cells.x - 1.0f, cells.y + o.cell * float(o.highlightRow) - 1.0f),
                    ImVec2(cells.x + o.cell * float(C), cells.y + o.cell * float(o.highlightRow + 1)), hl, 0.0f, 0, 2.0f);
    if (o.highlightCol >= 0 && o.highlightCol < C)
        dl->AddRect(ImVec2(cells.x + o.cell * float(o.highlightCol) - 1.0f, cells.y - 1.0f),
                    ImVec2(cells.x + o.cell * float(o.highlightCol + 1), cells.y + o.cell * float(R)), hl, 0.0f, 0, 2.0f);

    if (hovered) {
        const ImVec2 mp = ImGui::GetMousePos();
        const int c = int(std::floor((mp.x - cells.x) / o.cell)), r = int(std::floor((mp.y - cells.y) / o.cell));
        const auto label = [](const std::vector<std::string>& labels, int i) {
            return i >= 0 && i < int(labels.size()) ? labels[i] : std::string();
        };
        if (r >= 0 && r < R && c >= 0 && c < C) {
            hit.row = r;
            hit.col = c;
            hit.clicked = clicked;
            const std::string rl = label(o.rowLabels, r), cl = label(o.colLabels, c);
            if (rl.empty() && cl.empty())
                ImGui::SetTooltip("[%d, %d] = %s", r, c, attn::formatValue(m(r, c), 6).c_str());
            else
                ImGui::SetTooltip("[%d, %d] = %s\nrow: %s\ncolumn: %s", r, c, attn::formatValue(m(r, c), 6).c_str(), rl.c_str(), cl.c_str());
        } else if (r < 0 && c >= 0 && c < C && !label(o.colLabels, c).empty()) {
            ImGui::SetTooltip("%s", label(o.colLabels, c).c_str());   // over a column label
        } else if (c < 0 && r >= 0 && r < R && !label(o.rowLabels, r).empty()) {
            ImGui::SetTooltip("%s", label(o.rowLabels, r).c_str());   // over a row label
        }
    }
    ImGui::PopID();
    return hit;
}

void drawWeightBars(const char* id, const attn::Vector& w, const std::vector<std::string>& labels,
                    const std::vector<std::uint8_t>* masked, float width, int highlight)
{
    ImGui::PushID(id);
    const float rowH = ImGui::GetTextLineHeightWithSpacing();
    const float labelW = 64.0f, valueW = 64.0f;   // token label and printed weight
    const float barW = std::max(40.0f, width - labelW - valueW);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const int n = int(w.size());
    ImGui::Dummy(ImVec2(width, rowH * float(n)));
    if (ImGui::IsItemHovered()) {   // the whole label of the hovered row (it may be shortened below)
        const int j = int(std::floor((ImGui::GetMousePos().y - origin.y) / rowH));
        if (j >= 0 && j < n) ImGui::SetTooltip("%s: %s", tokenLabel(labels, j).c_str(), attn::formatValue(w[j], 6).c_str());
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int j = 0; j < n; ++j) {
        const float y = origin.y + rowH * float(j);
        const bool isMasked = masked && j < int(masked->size()) && (*masked)[j];
        dl->AddText(ImVec2(origin.x, y), ImGui::GetColorU32(ImGuiCol_Text), fitLabel(tokenLabel(labels, j), labelW - 6.0f).c_str());
        const float v = std::isfinite(w[j]) ? std::clamp(w[j], 0.0f, 1.0f) : 0.0f;
        const ImVec2 a(origin.x + labelW, y + 2.0f);
        dl->AddRectFilled(a, ImVec2(a.x + barW, y + rowH - 2.0f), IM_COL32(60, 60, 60, 80));
        const ImU32 fill = isMasked ? toImColor(attn::kMaskedColor) : (j == highlight ? IM_COL32(230, 90, 60, 255) : IM_COL32(70, 130, 200, 255));
        dl->AddRectFilled(a, ImVec2(a.x + barW * v, y + rowH - 2.0f), fill);
        const std::string text = isMasked ? "masked (0)" : attn::formatValue(w[j], 4);
        dl->AddText(ImVec2(origin.x + labelW + barW + 6.0f, y), ImGui::GetColorU32(ImGuiCol_Text), text.c_str());
    }
    ImGui::PopID();
}

void drawHistogram(const char* id, const attn::Histogram& h, const std::vector<float>* curve, ImU32 color,
                   ImVec2 size, float maxCount)
{
    ImGui::PushID(id);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::Dummy(size);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRect(o, ImVec2(o.x + size.x, o.y + size.y), IM_COL32(120, 120, 120, 255));
    const int n = int(h.counts.size());
    if (n > 0 && maxCount > 0) {
        const float bw = size.x / float(n);
        for (int b = 0; b < n; ++b) {
            const float t = std::min(1.0f, float(h.counts[b]) / maxCount);
            dl->AddRectFilled(ImVec2(o.x + bw * float(b), o.y + size.y * (1.0f - t)), ImVec2(o.x + bw * float(b + 1), o.y + size.y), color);
        }
        if (curve && int(curve->size()) == n) {
            // The theme's text colour: light on the dark theme, dark on a light one (a fixed black vanished).
            const ImU32 curveColor = ImGui::GetColorU32(ImGuiCol_Text);
            ImVec2 prev;
            for (int b = 0; b < n; ++b) {
                const float t = std::min(1.0f, (*curve)[b] / maxCount);
                const ImVec2 p(o.x + bw * (float(b) + 0.5f), o.y + size.y * (1.0f - t));
                if (b > 0) dl->AddLine(prev, p, curveColor, 2.0f);
                prev = p;
            }
        }
    }
    // Axis ends and the outside counts.
    const std::string lo = attn::formatValue(h.lo, 3), hi = attn::formatValue(h.hi, 3);
    dl->AddText(ImVec2(o.x, o.y + size.y + 1.0f), ImGui::GetColorU32(ImGuiCol_Text), lo.c_str());
    dl->AddText(ImVec2(o.x + size.x - ImGui::CalcTextSize(hi.c_str()).x, o.y + size.y + 1.0f), ImGui::GetColorU32(ImGuiCol_Text), hi.c_str());
    ImGui::Dummy(ImVec2(size.x, ImGui::GetTextLineHeight()));
    ImGui::PopID();
}

void drawVectorCells(const char* id, const char* title, const attn::Vector& v, const GridOptions& o)
{
    attn::Matrix m(1, v.size());
    m.row(0) = v.transpose();
    drawMatrixGrid(id, title, m, o);
}

} // namespace app
