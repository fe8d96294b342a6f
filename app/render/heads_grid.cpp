#include "render/heads_grid.h"

#include <imgui.h>

#include <algorithm>

namespace app {
namespace {

// Under item i's map: its part of the bracket of its KV-head group, joined to the previous map's part when
// that one is of the same group in the same row, and the group's label under the group's first map.
void drawGroupBracket(const HeadsGridSpec& spec, int i, int perRow, const HeatmapHit& hit, float& groupRight)
{
    const std::string& group = spec.items[static_cast<std::size_t>(i)].group;
    const bool first = i % perRow == 0 || spec.items[static_cast<std::size_t>(i - 1)].group != group;
    const float y = hit.cellsMax.y + 4;
    const float x0 = first ? hit.cellsMin.x : groupRight;
    const ImU32 col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddLine(ImVec2(x0, y), ImVec2(hit.cellsMax.x, y), col, 1.0f);
    if (first) dl->AddLine(ImVec2(x0, y - 3), ImVec2(x0, y), col, 1.0f);
    const bool last = i + 1 == static_cast<int>(spec.items.size()) || (i + 1) % perRow == 0 ||
                      spec.items[static_cast<std::size_t>(i + 1)].group != group;
    if (last) dl->AddLine(ImVec2(hit.cellsMax.x, y - 3), ImVec2(hit.cellsMax.x, y), col, 1.0f);
    groupRight = hit.cellsMax.x;
    ImGui::Dummy(ImVec2(0, 4));
    ImGui::TextDisabled("%s", first ? group.c_str() : " ");
}

} // namespace

HeadsGridHit drawHeadsGrid(const HeadsGridSpec& spec)
{
    HeadsGridHit out;
    ImGui::PushID(spec.id.c_str());
    const int n = static_cast<int>(spec.items.size());
    const int perRow = spec.columns > 0 ? spec.columns : std::max(1, n);
    float tallest = 0;
    float groupRight = 0;  // right edge of the previous map's group bracket
    ImGui::BeginGroup();
    for (int i = 0; i < n; ++i) {
        const HeadsGridItem& it = spec.items[static_cast<std::size_t>(i)];
        if (i % perRow != 0) ImGui::SameLine();
        ImGui::BeginGroup();
        const bool current = i == spec.current;
        if (current) ImGui::TextColored(ImVec4(1.0f, 0.78f, 0.24f, 1.0f), "%s", it.label.c_str());
        else ImGui::TextDisabled("%s", it.label.c_str());
        HeatmapSpec hs;
        hs.key = it.key;
        hs.src.values = it.values;
        hs.src.mask = it.mask;
        hs.src.range = spec.range;
        hs.src.colormap = spec.colormap;
        hs.src.generation = it.generation;
        hs.cellPx = spec.cellPx;
        hs.showValues = false;  // thumbnails: the hover names the value
        hs.rowLabelsShown = hs.colLabelsShown = false;
        const HeatmapHit hit = drawHeatmap(hs);
        out.rects.emplace_back(hit.cellsMin, hit.cellsMax);
        if (current)
            ImGui::GetWindowDrawList()->AddRect(ImVec2(hit.cellsMin.x - 3, hit.cellsMin.y - 3), ImVec2(hit.cellsMax.x + 3, hit.cellsMax.y + 3),
                                                IM_COL32(255, 200, 60, 255), 0, 0, 2.0f);
        if (hit.row >= 0) {
            out.hovered = i;
            out.row = hit.row;
            out.col = hit.col;
            if (hit.pressed) out.clicked = i;
        }
        if (!it.group.empty()) drawGroupBracket(spec, i, perRow, hit, groupRight);
        ImGui::EndGroup();
        tallest = std::max(tallest, hit.cellsMax.y - hit.cellsMin.y);
    }
    ImGui::EndGroup();
    if (spec.colorbar && n > 0) {
        ImGui::SameLine();
        drawColorbar("cb", spec.colormap, spec.range, std::max(40.0f, tallest));
    }
    ImGui::PopID();
    return out;
}

} // namespace app
