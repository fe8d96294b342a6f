#include "panels/matrix_editor.h"
#include "panels/panels.h"

#include "messages.h"
#include "render/heatmap_view.h"
#include "state/matrix_text.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace app {
namespace {

// Cell size: wide enough for "-0.51" (3 significant digits) in the 14 px font; the height is ImGui's frame height.
constexpr float kCellWidth = 42.0f;
// Scrubbing: value change per pixel dragged (Shift: 10× finer). 0.01 lets a 100 px drag move by 1.
constexpr float kScrubPerPixel = 0.01f;
// A press that moves less than this many pixels is a click (opens the cell), more is a scrub.
constexpr float kScrubThreshold = 3.0f;

// The one cell being edited or selected, app-wide (one text field at a time).
struct CellFocus {
    MatrixId id = MatrixId::X;
    int r = -1, c = -1;          // canonical indices
    bool selected = false;
    bool editing = false;
    bool focusField = false;     // give the text field keyboard focus next frame
    bool caretToEnd = false;     // opened by typing: keep the typed text, caret after it (no select-all)
    std::string text;
    std::string error;           // why the typed text was refused ("" = fine)
    bool scrubbing = false;
    float scrubStart = 0;
    unsigned fillSeed = 1;
};
CellFocus g_focus;

bool columnLayout(const AppState& s) { return s.doc.session().config.layout == attn::Layout::Column; }
bool isVector(MatrixId id)
{
    return id == MatrixId::Bq || id == MatrixId::Bk || id == MatrixId::Bv || id == MatrixId::Bo || id == MatrixId::Wv_additive;
}

// Canonical (rows, cols) shape names.
std::pair<const char*, const char*> shapeNames(const AppState& s, MatrixId id)
{
    const bool direct = s.doc.session().config.mode == attn::Mode::Direct;
    switch (id) {
    case MatrixId::X: return {"n", "d_model"};
    case MatrixId::Xkv: return {"n_kv", "d_model"};
    case MatrixId::Wq: return {"d_model", "h·d_k"};
    case MatrixId::Wk: return {"d_model", "h·d_k"};
    case MatrixId::Wv: return {"d_model", "h·d_v"};
    case MatrixId::Wo: return {"h·d_v", "d_out"};
    case MatrixId::Q: return {"n", direct ? "h·d_q" : "h·d_k"};
    case MatrixId::K: return {"n_kv", "h·d_k"};
    case MatrixId::V: return {"n_kv", "h·d_v"};
    case MatrixId::Aq: return {"d_q", "a"};
    case MatrixId::Ak: return {"d_k", "a"};
    case MatrixId::Bq: return {"", "h·d_k"};
    case MatrixId::Bk: return {"", "h·d_k"};
    case MatrixId::Bv: return {"", "h·d_v"};
    case MatrixId::Bo: return {"", "d_out"};
    case MatrixId::Wv_additive: return {"", "a"};
    }
    return {"?", "?"};
}

// Which token list labels the canonical rows (null: none).
const std::vector<std::string>* rowTokens(const AppState& s, MatrixId id)
{
    const attn::Session& ss = s.doc.session();
    if (id == MatrixId::X || id == MatrixId::Q) return ss.queryTokens.empty() ? nullptr : &ss.queryTokens;
    if (id == MatrixId::Xkv || id == MatrixId::K || id == MatrixId::V) return ss.keyTokens.empty() ? nullptr : &ss.keyTokens;
    return nullptr;
}
int hoverIndexFor(const AppState& s, MatrixId id)
{
    if (id == MatrixId::X || id == MatrixId::Q) return s.hoverQuery;
    if (id == MatrixId::Xkv || id == MatrixId::K || id == MatrixId::V) return s.hoverKey;
    return -1;
}

void commitText(AppState& state)
{
    auto v = parseCellValue(g_focus.text);
    const std::string where = std::string(matrixName(g_focus.id)) + "[" + std::to_string(g_focus.r) + "][" +
                              std::to_string(g_focus.c) + "]";
    if (!v.ok()) {
        g_focus.error = where + ": " + v.status().message;
        postWarning(g_focus.error);
        g_focus.focusField = true;
        return;
    }
    const MatrixId id = g_focus.id;
    const int r = g_focus.r, c = g_focus.c;
    const float value = *v;
    if (state.doc.cell(id, r, c) != value) {
        attn::Matrix m(state.doc.rows(id), state.doc.cols(id));
        for (int i = 0; i < m.rows(); ++i)
            for (int j = 0; j < m.cols(); ++j) m(i, j) = state.doc.cell(id, i, j);
        m(r, c) = value;
        state.doc.setMatrix(id, m);
    }
    g_focus.editing = false;
    g_focus.error.clear();
}

void startEditing(AppState& state, MatrixId id, int r, int c, const std::string* initial)
{
    g_focus.id = id;
    g_focus.r = r;
    g_focus.c = c;
    g_focus.selected = true;
    g_focus.editing = true;
    g_focus.focusField = true;
    g_focus.error.clear();
    g_focus.caretToEnd = initial != nullptr;
    if (initial) g_focus.text = *initial;
    else g_focus.text = attn::formatValue(state.doc.cell(id, r, c), 6);
}

} // namespace

std::string matrixTitle(const AppState& state, MatrixId id)
{
    auto [rn, cn] = shapeNames(state, id);
    const int r = state.doc.rows(id), c = state.doc.cols(id);
    char buf[160];
    if (isVector(id)) std::snprintf(buf, sizeof buf, "%s  %d  [%s]", matrixName(id), c, cn);
    else if (columnLayout(state)) std::snprintf(buf, sizeof buf, "%s  %d×%d  [%s × %s]", matrixName(id), c, r, cn, rn);
    else std::snprintf(buf, sizeof buf, "%s  %d×%d  [%s × %s]", matrixName(id), r, c, rn, cn);
    return buf;
}

void fillMatrix(AppState& state, MatrixId id, FillKind kind, unsigned seed)
{
    const int r = state.doc.rows(id), c = state.doc.cols(id);
    if (r == 0 || c == 0) return;
    state.doc.setMatrix(id, makeFilled(kind, r, c, seed));
}

attn::Status pasteMatrix(AppState& state, MatrixId id, const std::string& text)
{
    auto m = parseMatrixText(text);
    if (!m.ok()) return m.status();
    attn::Matrix v = std::move(*m);
    const int r = state.doc.rows(id), c = state.doc.cols(id);
    // The pasted text is in the orientation the user sees.
    if (columnLayout(state) && !isVector(id)) v = attn::Matrix(v.transpose());
    if (isVector(id) && v.rows() == c && v.cols() == 1) v = attn::Matrix(v.transpose());
    if (v.rows() != r || v.cols() != c) {
        const bool col = columnLayout(state) && !isVector(id);
        return attn::invalidArgument("paste into " + std::string(matrixName(id)) + ": expected " +
                                     std::to_string(col ? c : r) + "×" + std::to_string(col ? r : c) + ", got " +
                                     std::to_string(col ? v.cols() : v.rows()) + "×" +
                                     std::to_string(col ? v.rows() : v.cols()) + " (change the sizes first)");
    }
    return state.doc.setMatrix(id, v);
}

void drawMatrixEditor(AppState& state, MatrixId id, ImVec2 maxSize)
{
    ImGui::PushID(static_cast<int>(id));
    const std::string title = matrixTitle(state, id);
    ImGui::TextUnformatted(title.c_str());
    if (ImGui::BeginPopupContextItem("fill")) {
        int seed = static_cast<int>(g_focus.fillSeed);
        ImGui::SetNextItemWidth(90);
        if (ImGui::InputInt("seed", &seed)) g_focus.fillSeed = static_cast<unsigned>(std::max(0, seed));
        if (ImGui::MenuItem("Zeros")) fillMatrix(state, id, FillKind::Zeros, 0);
        if (ImGui::MenuItem("Identity / block identity")) fillMatrix(state, id, FillKind::Identity, 0);
        if (ImGui::MenuItem("Random normal (seed)")) fillMatrix(state, id, FillKind::RandomNormal, g_focus.fillSeed);
        if (ImGui::MenuItem("Xavier normal (seed)")) fillMatrix(state, id, FillKind::Xavier, g_focus.fillSeed);
        ImGui::Separator();
        if (ImGui::MenuItem("Copy as CSV")) {
            attn::Matrix m(state.doc.rows(id), state.doc.cols(id));
            for (int i = 0; i < m.rows(); ++i)
                for (int j = 0; j < m.cols(); ++j) m(i, j) = state.doc.cell(id, i, j);
            if (columnLayout(state) && !isVector(id)) m = attn::Matrix(m.transpose());
            ImGui::SetClipboardText(matrixToCsv(m).c_str());
        }
        if (ImGui::MenuItem("Paste (CSV, rows, NumPy/PyTorch printout)")) {
            const char* clip = ImGui::GetClipboardText();
            attn::Status st = pasteMatrix(state, id, clip ? clip : "");
            if (!st.ok()) postError(st.message);
        }
        ImGui::EndPopup();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Right-click: fill, copy, paste");

    const bool col = columnLayout(state) && !isVector(id);
    const int cr = state.doc.rows(id), cc = state.doc.cols(id);
    const int dr = col ? cc : cr, dc = col ? cr : cc;  // displayed rows / cols
    if (dr == 0 || dc == 0) {
        ImGui::TextDisabled("(none)");
        ImGui::PopID();
        return;
    }
    const std::vector<std::string>* tokens = rowTokens(state, id);
    const float labelW = 42.0f;  // token labels (or indices) on the left
    const float cellH = ImGui::GetFrameHeight();
    const float headerH = cellH;
    const ImVec2 full(labelW + kCellWidth * static_cast<float>(dc), headerH + cellH * static_cast<float>(dr));
    const bool scroll = full.x > maxSize.x || full.y > maxSize.y;
    if (scroll) {
        const ImVec2 view(std::min(full.x, maxSize.x) + ImGui::GetStyle().ScrollbarSize,
                          std::min(full.y, maxSize.y) + ImGui::GetStyle().ScrollbarSize);
        ImGui::BeginChild("grid", view, false, ImGuiWindowFlags_HorizontalScrollbar);
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    // Visible range only: a 1024×512 X has half a million cells.
    const ImVec2 clipMin = dl->GetClipRectMin(), clipMax = dl->GetClipRectMax();
    const int r0 = std::clamp(static_cast<int>((clipMin.y - origin.y - headerH) / cellH), 0, dr);
    const int r1 = std::clamp(static_cast<int>((clipMax.y - origin.y - headerH) / cellH) + 1, 0, dr);
    const int c0 = std::clamp(static_cast<int>((clipMin.x - origin.x - labelW) / kCellWidth), 0, dc);
    const int c1 = std::clamp(static_cast<int>((clipMax.x - origin.x - labelW) / kCellWidth) + 1, 0, dc);
    const int hoverIdx = hoverIndexFor(state, id);
    const ImU32 textCol = ImGui::GetColorU32(ImGuiCol_Text);
    const ImU32 dimCol = ImGui::GetColorU32(ImGuiCol_TextDisabled);

    // Header (column indices, or tokens in column layout) and row labels.
    for (int j = c0; j < c1; ++j) {
        const std::string t = (col && tokens) ? axisLabel(tokens, j) : std::to_string(j);
        dl->AddText(ImVec2(origin.x + labelW + kCellWidth * static_cast<float>(j) + 4, origin.y + 2), col && j == hoverIdx ? IM_COL32(255, 200, 60, 255) : dimCol, t.c_str());
    }
    for (int i = r0; i < r1; ++i) {
        const std::string t = (!col && tokens) ? axisLabel(tokens, i) : std::to_string(i);
        const ImVec2 p(origin.x + 2, origin.y + headerH + cellH * static_cast<float>(i) + ImGui::GetStyle().FramePadding.y);
        dl->PushClipRect(ImVec2(origin.x, p.y), ImVec2(origin.x + labelW - 2, p.y + cellH), true);
        dl->AddText(p, !col && i == hoverIdx ? IM_COL32(255, 200, 60, 255) : dimCol, t.c_str());
        dl->PopClipRect();
    }

    for (int i = r0; i < r1; ++i)
        for (int j = c0; j < c1; ++j) {
            const int r = col ? j : i, c = col ? i : j;  // canonical
            const ImVec2 p0(origin.x + labelW + kCellWidth * static_cast<float>(j), origin.y + headerH + cellH * static_cast<float>(i));
            const ImVec2 p1(p0.x + kCellWidth - 2, p0.y + cellH - 2);
            const bool isFocus = g_focus.id == id && g_focus.r == r && g_focus.c == c;
            ImGui::PushID(i * 65536 + j);
            ImGui::SetCursorScreenPos(p0);
            if (cr * cc <= 64) state.recordRect("cell/" + std::string(matrixName(id)) + "/" + std::to_string(i) + "/" + std::to_string(j), p0, p1);
            if (isFocus && g_focus.editing) {
                ImGui::SetNextItemWidth(kCellWidth - 2);
                if (g_focus.focusField) {
                    ImGui::SetKeyboardFocusHere();
                    g_focus.focusField = false;
                }
                const bool bad = !g_focus.error.empty();
                if (bad) {
                    ImGui::PushStyleColor(ImGuiCol_FrameBg, IM_COL32(140, 30, 30, 255));
                    ImGui::PushStyleColor(ImGuiCol_Border, IM_COL32(255, 60, 60, 255));
                }
                // ImGui selects all when a field is focused from code; after a typed first character the caret
                // must follow it instead, or the next character would replace it.
                auto caret = [](ImGuiInputTextCallbackData* d) {
                    if (g_focus.caretToEnd) {  // callbacks only run while the field is active
                        d->CursorPos = d->SelectionStart = d->SelectionEnd = d->BufTextLen;
                        g_focus.caretToEnd = false;
                    }
                    return 0;
                };
                const bool enter = ImGui::InputText("##edit", &g_focus.text,
                                                    ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll |
                                                        ImGuiInputTextFlags_CallbackAlways,
                                                    caret);
                if (bad) ImGui::PopStyleColor(2);
                if (ImGui::IsItemActive()) state.recordRect("editing", p0, p1);
                const bool active = ImGui::IsItemActive();
                if (enter) commitText(state);
                else if (active && keyPressed(ImGuiKey_Tab)) {
                    commitText(state);
                    if (!g_focus.editing) {
                        const int nj = (j + 1) % dc, ni = nj == 0 ? (i + 1) % dr : i;
                        startEditing(state, id, col ? nj : ni, col ? ni : nj, nullptr);
                    }
                } else if (active && keyPressed(ImGuiKey_Escape)) {
                    g_focus.editing = false;
                    g_focus.error.clear();
                } else if (!active && !g_focus.focusField && ImGui::IsMouseClicked(ImGuiMouseButton_Left) &&
                           !ImGui::IsItemHovered()) {
                    // Clicked elsewhere: keep valid text (as a spreadsheet does), drop invalid text with its message.
                    if (parseCellValue(g_focus.text).ok()) commitText(state);
                    g_focus.editing = false;
                    g_focus.error.clear();
                }
            } else {
                ImGui::InvisibleButton("c", ImVec2(kCellWidth - 2, cellH - 2));
                const bool hovered = ImGui::IsItemHovered();
                if (hovered && tokens) {
                    if (id == MatrixId::X || id == MatrixId::Q) state.nextHoverQuery = r;
                    else state.nextHoverKey = r;
                }
                if (ImGui::IsItemActivated()) {
                    g_focus.id = id;
                    g_focus.r = r;
                    g_focus.c = c;
                    g_focus.selected = true;
                    g_focus.editing = false;
                    g_focus.scrubbing = false;
                    g_focus.scrubStart = state.doc.cell(id, r, c);
                }
                if (ImGui::IsItemActive() && !g_focus.scrubbing &&
                    std::fabs(ImGui::GetMouseDragDelta(ImGuiMouseButton_Left).x) > kScrubThreshold) {
                    g_focus.scrubbing = true;
                    state.doc.beginGesture();
                }
                if (ImGui::IsItemActive() && g_focus.scrubbing) {
                    const float step = ImGui::GetIO().KeyShift ? kScrubPerPixel * 0.1f : kScrubPerPixel;
                    const float v = g_focus.scrubStart + ImGui::GetMouseDragDelta(ImGuiMouseButton_Left).x * step;
                    if (v != state.doc.cell(id, r, c)) state.doc.setCellInGesture(id, r, c, v);
                }
                if (ImGui::IsItemDeactivated()) {
                    if (!g_focus.scrubbing) startEditing(state, id, r, c, nullptr);
                    g_focus.scrubbing = false;
                }
                const bool sel = isFocus && g_focus.selected;
                if (sel) state.recordRect("selected", p0, p1);
                const ImU32 bg = ImGui::GetColorU32(sel ? ImGuiCol_FrameBgActive : hovered ? ImGuiCol_FrameBgHovered : ImGuiCol_FrameBg);
                dl->AddRectFilled(p0, p1, bg, 2.0f);
                const bool linked = hoverIdx >= 0 && (col ? j : i) == hoverIdx && tokens;
                if (linked) dl->AddRect(p0, p1, IM_COL32(255, 200, 60, 255), 2.0f);
                // 3 significant digits, or 2 when that does not fit the cell (e.g. "-0.759" -> "-0.76").
                std::string t = attn::formatValue(state.doc.cell(id, r, c), 3);
                ImVec2 ts = ImGui::CalcTextSize(t.c_str());
                if (ts.x > kCellWidth - 8) {
                    t = attn::formatValue(state.doc.cell(id, r, c), 2);
                    ts = ImGui::CalcTextSize(t.c_str());
                }
                dl->AddText(ImVec2(p1.x - ts.x - 4, p0.y + (cellH - 2 - ts.y) * 0.5f), textCol, t.c_str());
            }
            ImGui::PopID();
        }

    // Keyboard navigation of the selected (not edited) cell of this editor.
    if (g_focus.selected && !g_focus.editing && g_focus.id == id && !ImGui::GetIO().WantTextInput &&
        ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows)) {
        int di = col ? g_focus.c : g_focus.r, dj = col ? g_focus.r : g_focus.c;
        if (keyPressed(ImGuiKey_UpArrow)) di = std::max(0, di - 1);
        if (keyPressed(ImGuiKey_DownArrow)) di = std::min(dr - 1, di + 1);
        if (keyPressed(ImGuiKey_LeftArrow)) dj = std::max(0, dj - 1);
        if (keyPressed(ImGuiKey_RightArrow)) dj = std::min(dc - 1, dj + 1);
        g_focus.r = col ? dj : di;
        g_focus.c = col ? di : dj;
        if (ImGui::GetIO().KeyCtrl && keyPressed(ImGuiKey_V, false)) {
            const char* clip = ImGui::GetClipboardText();
            attn::Status st = pasteMatrix(state, id, clip ? clip : "");
            if (!st.ok()) postError(st.message);
        } else if (ImGui::GetIO().KeyCtrl && keyPressed(ImGuiKey_C, false)) {
            attn::Matrix m(cr, cc);
            for (int a = 0; a < cr; ++a)
                for (int b = 0; b < cc; ++b) m(a, b) = state.doc.cell(id, a, b);
            if (col) m = attn::Matrix(m.transpose());
            ImGui::SetClipboardText(matrixToCsv(m).c_str());
        } else if (keyPressed(ImGuiKey_Enter) || keyPressed(ImGuiKey_KeyPadEnter)) {
            startEditing(state, id, g_focus.r, g_focus.c, nullptr);
        } else {
            for (ImWchar ch : ImGui::GetIO().InputQueueCharacters)
                if ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.') {
                    const std::string first(1, static_cast<char>(ch));
                    startEditing(state, id, g_focus.r, g_focus.c, &first);
                    break;
                }
        }
    }

    ImGui::SetCursorScreenPos(origin);
    ImGui::Dummy(full);
    if (scroll) ImGui::EndChild();
    if (g_focus.id == id && !g_focus.error.empty()) ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.4f, 1.0f), "%s", g_focus.error.c_str());
    ImGui::PopID();
}

} // namespace app
