#include "render/heads_grid.h"

#include <imgui.h>

#include <algorithm>

namespace app {

HeadsGridHit drawHeadsGrid(const HeadsGridSpec& spec)
{
    HeadsGridHit out;
    ImGui::PushID(spec.id.c_str());
    const int n = static_cast<int>(spec.items.size());
    const int perRow = spec.columns > 0 ? spec.columns : std::max(1, n);
    float tallest = 0;
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
