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
// The frame around the selected matrix: 3 px outside the editor, in the accent blue of ImGui's dark style's
// active widgets (so it reads as "this has the focus").
constexpr float kOutlinePad = 3.0f;
constexpr ImU32 kOutlineColour = IM_COL32(66, 150, 250, 255);

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
    MatrixFocus& f = state.edit.focus;
    auto v = parseCellValue(f.text);
    const std::string where = std::string(matrixName(f.id)) + "[" + std::to_string(f.r) + "][" +
                              std::to_string(f.c) + "]";
    if (!v.ok()) {
        f.error = where + ": " + v.status().message;
        postWarning(f.error);
        f.focusField = true;
        return;
    }
    const MatrixId id = f.id;
    const int r = f.r, c = f.c;
    const float value = *v;
    if (state.doc.cell(id, r, c) != value) {
        attn::Matrix m(state.doc.rows(id), state.doc.cols(id));
        for (int i = 0; i < m.rows(); ++i)
            for (int j = 0; j < m.cols(); ++j) m(i, j) = state.doc.cell(id, i, j);
        m(r, c) = value;
        state.doc.setMatrix(id, m);
    }
    f.editing = false;
    f.error.clear();
}

// Closes the open text field, if any: valid text is kept (as a spreadsheet does when you click elsewhere),
// invalid text goes with its message.
void leaveEditing(AppState& state)
{
    MatrixFocus& f = state.edit.focus;
    if (!f.editing) return;
    if (parseCellValue(f.text).ok()) commitText(state);
    f.editing = false;
    f.error.clear();
}

// Escape in the text field: the cell keeps its value, the typed text and its error message go.
void cancelEditing(AppState& state)
{
    MatrixFocus& f = state.edit.focus;
    f.editing = false;
    f.focusField = false;
    f.error.clear();
    f.text = attn::formatValue(state.doc.cell(f.id, f.r, f.c), 6);
}

// Selects matrix `id` (its title was clicked): Ctrl+C / Ctrl+V act on it from now on.
void selectMatrix(AppState& state, MatrixId id)
{
    leaveEditing(state);
    MatrixFocus& f = state.edit.focus;
    f.hasMatrix = true;
    f.id = id;
    f.r = f.c = -1;
}

void copyMatrix(const AppState& state, MatrixId id)
{
    attn::Matrix m(state.doc.rows(id), state.doc.cols(id));
    for (int i = 0; i < m.rows(); ++i)
        for (int j = 0; j < m.cols(); ++j) m(i, j) = state.doc.cell(id, i, j);
    if (columnLayout(state) && !isVector(id)) m = attn::Matrix(m.transpose());
    ImGui::SetClipboardText(matrixToCsv(m).c_str());
}

void pasteClipboard(AppState& state, MatrixId id)
{
    const char* clip = ImGui::GetClipboardText();
    attn::Status st = pasteMatrix(state, id, clip ? clip : "");
    if (!st.ok()) postError(st.message);
}

// Selects cell (r, c) of matrix `id` (and so the matrix).
void selectCell(MatrixFocus& f, MatrixId id, int r, int c)
{
    f.hasMatrix = true;
    f.id = id;
    f.r = r;
    f.c = c;
}

void startEditing(AppState& state, MatrixId id, int r, int c, const std::string* initial)
{
    MatrixFocus& f = state.edit.focus;
    selectCell(f, id, r, c);
    f.editing = true;
    f.focusField = true;
    f.error.clear();
    f.caretToEnd = initial != nullptr;
    if (initial) f.text = *initial;
    else f.text = attn::formatValue(state.doc.cell(id, r, c), 6);
}


// Keys for the selected matrix of this editor (not while a text field takes the keyboard): Ctrl+C / Ctrl+V
// copy / paste the whole matrix; arrows move the selected cell (from the title: to the first cell); Enter
// or a typed digit edits it.
void handleKeys(AppState& state, MatrixId id, bool col, int dr, int dc)
{
    MatrixFocus& f = state.edit.focus;
    if (!f.hasMatrix || f.id != id || f.editing || ImGui::GetIO().WantTextInput ||
        !ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows))
        return;
    if (ImGui::GetIO().KeyCtrl) {
        if (keyPressed(ImGuiKey_V, false)) pasteClipboard(state, id);
        else if (keyPressed(ImGuiKey_C, false)) copyMatrix(state, id);
        return;
    }
    const bool arrows = keyPressed(ImGuiKey_UpArrow) || keyPressed(ImGuiKey_DownArrow) || keyPressed(ImGuiKey_LeftArrow) ||
                        keyPressed(ImGuiKey_RightArrow);
    if (!f.cellSelected()) {
        if (!arrows) return;
        f.r = f.c = 0;
        return;
    }
    int di = col ? f.c : f.r, dj = col ? f.r : f.c;  // displayed
    if (keyPressed(ImGuiKey_UpArrow)) di = std::max(0, di - 1);
    if (keyPressed(ImGuiKey_DownArrow)) di = std::min(dr - 1, di + 1);
    if (keyPressed(ImGuiKey_LeftArrow)) dj = std::max(0, dj - 1);
    if (keyPressed(ImGuiKey_RightArrow)) dj = std::min(dc - 1, dj + 1);
    f.r = col ? dj : di;
    f.c = col ? di : dj;
    if (keyPressed(ImGuiKey_Enter) || keyPressed(ImGuiKey_KeyPadEnter)) {
        startEditing(state, id, f.r, f.c, nullptr);
        return;
    }
    for (ImWchar ch : ImGui::GetIO().InputQueueCharacters)
        if ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.') {
            const std::string first(1, static_cast<char>(ch));
            startEditing(state, id, f.r, f.c, &first);
            break;
        }
}

} // namespace

void noteEditorRect(EditState& edit, MatrixId id, ImVec2 min, ImVec2 max)
{
    const int frame = ImGui::GetFrameCount();
    if (edit.editorsFrame != frame) {
        edit.editors.clear();
        edit.editorsFrame = frame;
    }
    edit.editors.push_back({id, min, max});
}

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
    MatrixFocus& f = state.edit.focus;
    ImGui::PushID(static_cast<int>(id));
    const std::string name = matrixName(id);
    const bool outlined = f.hasMatrix && f.id == id;
    ImGui::BeginGroup();
    // The title is a button: a click selects the matrix (Ctrl+C / Ctrl+V act on it), a right-click opens
    // the fill menu.
    const std::string title = matrixTitle(state, id);
    const ImVec2 titlePos = ImGui::GetCursorScreenPos();
    const ImVec2 titleSize = ImGui::CalcTextSize(title.c_str());
    ImGui::InvisibleButton("title", ImVec2(std::max(titleSize.x, 1.0f), ImGui::GetTextLineHeight()));
    state.recordRect("title/" + name, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) selectMatrix(state, id);
    ImGui::GetWindowDrawList()->AddText(titlePos, outlined ? kOutlineColour : ImGui::GetColorU32(ImGuiCol_Text), title.c_str());
    if (ImGui::BeginPopupContextItem("fill")) {
        int seed = static_cast<int>(f.fillSeed);
        ImGui::SetNextItemWidth(90);
        if (ImGui::InputInt("seed", &seed)) f.fillSeed = static_cast<unsigned>(std::max(0, seed));
        if (ImGui::MenuItem("Zeros")) fillMatrix(state, id, FillKind::Zeros, 0);
        if (ImGui::MenuItem("Identity / block identity")) fillMatrix(state, id, FillKind::Identity, 0);
        if (ImGui::MenuItem("Random normal (seed)")) fillMatrix(state, id, FillKind::RandomNormal, f.fillSeed);
        if (ImGui::MenuItem("Xavier normal (seed)")) fillMatrix(state, id, FillKind::Xavier, f.fillSeed);
        ImGui::Separator();
        if (ImGui::MenuItem("Copy as CSV")) copyMatrix(state, id);
        if (ImGui::MenuItem("Paste (CSV, rows, NumPy/PyTorch printout)")) pasteClipboard(state, id);
        ImGui::EndPopup();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Click: select (Ctrl+C / Ctrl+V copy / paste the matrix)\nRight-click: fill, copy, paste");

    const bool col = columnLayout(state) && !isVector(id);
    const int cr = state.doc.rows(id), cc = state.doc.cols(id);
    if (f.hasMatrix && f.id == id && (f.r >= cr || f.c >= cc)) {
        // The matrix shrank under the selected cell (sizes or heads changed, an undo): keep the matrix
        // selected, drop the cell and any text typed for it.
        f.r = f.c = -1;
        f.editing = false;
        f.error.clear();
    }
    const int dr = col ? cc : cr, dc = col ? cr : cc;  // displayed rows / cols
    if (dr == 0 || dc == 0) {
        ImGui::TextDisabled("(none)");
        ImGui::EndGroup();
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
            const bool isFocus = f.hasMatrix && f.id == id && f.r == r && f.c == c;
            ImGui::PushID(i * 65536 + j);
            ImGui::SetCursorScreenPos(p0);
            if (cr * cc <= 64) state.recordRect("cell/" + std::string(matrixName(id)) + "/" + std::to_string(i) + "/" + std::to_string(j), p0, p1);
            if (isFocus && f.editing) {
                ImGui::SetNextItemWidth(kCellWidth - 2);
                if (f.focusField) {
                    ImGui::SetKeyboardFocusHere();
                    f.focusField = false;
                }
                const bool bad = !f.error.empty();
                if (bad) {
                    ImGui::PushStyleColor(ImGuiCol_FrameBg, IM_COL32(140, 30, 30, 255));
                    ImGui::PushStyleColor(ImGuiCol_Border, IM_COL32(255, 60, 60, 255));
                }
                // ImGui selects all when a field is focused from code; after a typed first character the caret
                // must follow it instead, or the next character would replace it.
                auto caret = [](ImGuiInputTextCallbackData* d) {
                    auto* focus = static_cast<MatrixFocus*>(d->UserData);
                    if (focus->caretToEnd) {  // callbacks only run while the field is active
                        d->CursorPos = d->SelectionStart = d->SelectionEnd = d->BufTextLen;
                        focus->caretToEnd = false;
                    }
                    return 0;
                };
                const bool enter = ImGui::InputText("##edit", &f.text,
                                                    ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll |
                                                        ImGuiInputTextFlags_CallbackAlways,
                                                    caret, &f);
                if (bad) ImGui::PopStyleColor(2);
                if (ImGui::IsItemActive()) state.recordRect("editing", p0, p1);
                const bool active = ImGui::IsItemActive();
                if (enter) commitText(state);
                else if (active && keyPressed(ImGuiKey_Tab)) {
                    commitText(state);
                    if (!f.editing) {
                        const int nj = (j + 1) % dc, ni = nj == 0 ? (i + 1) % dr : i;
                        startEditing(state, id, col ? nj : ni, col ? ni : nj, nullptr);
                    }
                } else if ((active || ImGui::IsItemDeactivated()) && keyPressed(ImGuiKey_Escape)) {
                    // ImGui's field handles Escape itself (it reverts to the text it was focused with and lets go),
                    // so the field is no longer active in this frame: Escape counts when it just let go too.
                    cancelEditing(state);
                } else if (!active && !f.focusField && ImGui::IsMouseClicked(ImGuiMouseButton_Left) &&
                           !ImGui::IsItemHovered()) {
                    leaveEditing(state);  // clicked elsewhere
                }
            } else {
                ImGui::InvisibleButton("c", ImVec2(kCellWidth - 2, cellH - 2));
                const bool hovered = ImGui::IsItemHovered();
                if (hovered && tokens) {
                    if (id == MatrixId::X || id == MatrixId::Q) state.nextHoverQuery = r;
                    else state.nextHoverKey = r;
                }
                if (ImGui::IsItemActivated()) {
                    leaveEditing(state);
                    selectCell(f, id, r, c);
                    f.scrubbing = false;
                    f.scrubStart = state.doc.cell(id, r, c);
                }
                if (ImGui::IsItemActive() && !f.scrubbing &&
                    std::fabs(ImGui::GetMouseDragDelta(ImGuiMouseButton_Left).x) > kScrubThreshold) {
                    f.scrubbing = true;
                    state.doc.beginGesture();
                }
                if (ImGui::IsItemActive() && f.scrubbing) {
                    const float step = ImGui::GetIO().KeyShift ? kScrubPerPixel * 0.1f : kScrubPerPixel;
                    const float v = f.scrubStart + ImGui::GetMouseDragDelta(ImGuiMouseButton_Left).x * step;
                    if (v != state.doc.cell(id, r, c)) state.doc.setCellInGesture(id, r, c, v);
                }
                if (ImGui::IsItemDeactivated()) {
                    if (!f.scrubbing) startEditing(state, id, r, c, nullptr);
                    f.scrubbing = false;
                }
                const bool sel = isFocus;
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

    ImGui::SetCursorScreenPos(origin);
    ImGui::Dummy(full);
    if (scroll) ImGui::EndChild();
    if (f.hasMatrix && f.id == id && !f.error.empty()) {
        // Wrapped at the matrix's width: a long message under a small matrix widened its panel and shifted the
        // chain to its right (issue 21).
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + std::max(full.x, 160.0f));
        ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.4f, 1.0f), "%s", f.error.c_str());
        ImGui::PopTextWrapPos();
        state.recordRect("cell_error", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
    ImGui::EndGroup();
    const ImVec2 gmin = ImGui::GetItemRectMin(), gmax = ImGui::GetItemRectMax();
    noteEditorRect(state.edit, id, gmin, gmax);
    if (outlined) {
        // The selected matrix is framed: the one Ctrl+C / Ctrl+V act on.
        const ImVec2 a(gmin.x - kOutlinePad, gmin.y - kOutlinePad), b(gmax.x + kOutlinePad, gmax.y + kOutlinePad);
        ImGui::GetWindowDrawList()->AddRect(a, b, kOutlineColour, 3.0f, 0, 2.0f);
        state.recordRect("outline/" + name, a, b);
    }
    handleKeys(state, id, col, dr, dc);
    ImGui::PopID();
}

} // namespace app
