#include "panels/style.h"

#include "panels/glyph_atlas.h"

#include <imgui.h>

namespace app {

std::string setupImGuiStyle()
{
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.LogFilename = nullptr;
    io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 0;
    st.FrameRounding = 2;
    st.ItemSpacing = ImVec2(6, 4);
    // Disabled controls (a model layer's fixed sizes, Generate while generating) at ImGui's default 0.6 read as
    // enabled on the dark theme (issue 21); at 0.35 they are plainly greyed and still legible.
    st.DisabledAlpha = 0.35f;

    return setupGlyphAtlas();  // DejaVu Sans and the CJK fallback, grown by what is shown (glyph_atlas.h)
}

} // namespace app
