// BertViz's head view, shared by the model view and a bundle's view: see model_panels.h (drawLinesMap).
#include "panels/model_panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>

namespace app {

void drawLinesMap(AppState& state, ImVec2 size, const std::vector<std::string>& queries,
                  const std::vector<std::string>& keys, const attn::MatrixCRef& w, int& hoverToken, float& rowOut)
{
    const int nq = static_cast<int>(queries.size()), nk = static_cast<int>(keys.size());
    const int n = std::max(nq, nk);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    // A row per token, never shorter than a label (they overlapped from ~26 tokens): past the room the
    // child window scrolls.
    const float row = std::max(ImGui::GetFontSize() + 1, std::min((size.y - 30) / float(std::max(n, 1)), ImGui::GetFontSize() + 4));
    rowOut = row;
    // Labels as the token strip draws tokens (tokenLabel: a newline as a mark, not a line break that ran into the
    // next label; right-to-left runs in visual order; their characters asked of the font atlas).
    auto labelsOf = [](const std::vector<std::string>& tokens) {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        for (const std::string& t : tokens) out.push_back(tokenLabel(t));
        return out;
    };
    const std::vector<std::string> qLabels = labelsOf(queries);
    std::vector<std::string> kOwn;
    if (&keys != &queries) kOwn = labelsOf(keys);  // a decoder's self-attention passes the same tokens twice
    const std::vector<std::string>& kLabels = &keys != &queries ? kOwn : qLabels;
    float labelW = 0;
    for (const std::string& t : qLabels) labelW = std::max(labelW, ImGui::CalcTextSize(t.c_str()).x);
    if (&kLabels != &qLabels)
        for (const std::string& t : kLabels) labelW = std::max(labelW, ImGui::CalcTextSize(t.c_str()).x);
    // The width inside the child (less its scrollbar once the rows scroll), so the right labels are not cut.
    const float width = std::min(size.x, ImGui::GetContentRegionAvail().x);
    const float leftX = o.x + labelW + 8, rightX = std::min(o.x + width - labelW - 8, leftX + 220);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    int hover = -1;
    for (int i = 0; i < nq; ++i) {
        const float y = o.y + row * (float(i) + 0.5f);
        if (std::fabs(mouse.y - y) < row / 2 && mouse.x >= o.x && mouse.x <= o.x + size.x && ImGui::IsWindowHovered()) hover = i;
    }
    hoverToken = hover;
    state.recordRect("model/lines", o, ImVec2(o.x + size.x, o.y + row * float(n)));
    const int rows = std::min<int>(nq, int(w.rows())), cols = std::min<int>(nk, int(w.cols()));
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) {
            if (hover >= 0 && i != hover) continue;
            const float a = std::clamp(w(i, j), 0.0f, 1.0f);
            if (a < (n > 64 ? 0.05f : 0.01f)) continue;  // invisible at that opacity; keeps long texts fluid
            dl->AddLine(ImVec2(leftX, o.y + row * (float(i) + 0.5f)), ImVec2(rightX, o.y + row * (float(j) + 0.5f)),
                        hover >= 0 ? IM_COL32(255, 190, 80, int(80 + 175 * a)) : IM_COL32(110, 180, 255, int(255 * std::min(1.0f, 1.5f * a))),
                        1.0f + 2.0f * a);  // light blue on the dark background; a hovered token's lines amber
        }
    for (int i = 0; i < nq; ++i) {
        const char* t = qLabels[static_cast<std::size_t>(i)].c_str();
        const float y = o.y + row * (float(i) + 0.5f) - ImGui::GetFontSize() / 2;
        const ImU32 col = (hover == i) ? IM_COL32(200, 60, 30, 255) : ImGui::GetColorU32(ImGuiCol_Text);
        dl->AddText(ImVec2(leftX - 6 - ImGui::CalcTextSize(t).x, y), col, t);
    }
    for (int j = 0; j < nk; ++j) {
        const float y = o.y + row * (float(j) + 0.5f) - ImGui::GetFontSize() / 2;
        dl->AddText(ImVec2(rightX + 6, y), ImGui::GetColorU32(ImGuiCol_Text), kLabels[static_cast<std::size_t>(j)].c_str());
    }
    ImGui::Dummy(ImVec2(size.x, row * float(n)));
}

} // namespace app
