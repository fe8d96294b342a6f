#include "panels/style.h"

#include <imgui.h>

#include <filesystem>

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

    // Glyph ranges: Basic Latin + Latin-1, Greek, superscripts/subscripts (ᵀ is U+1D40 in the phonetic
    // extensions), arrows, math operators (√ Σ ∞ −), box drawing for hatching hints. Static: ImGui keeps the pointer.
    // U+FFFD (the replacement character) is in DejaVu Sans: a glyph the fonts lack then shows as that
    // visible mark (ImGui's fallback), not as a '?' that reads as the text's own question mark.
    static const ImWchar kRanges[] = {
        0x0020, 0x00FF, 0x0370, 0x03FF, 0x1D00, 0x1D7F, 0x2000, 0x206F, 0x2070, 0x209F,
        0x2190, 0x21FF, 0x2200, 0x22FF, 0x2500, 0x25FF, 0xFFFD, 0xFFFD, 0,
    };
    const char* path = ATTNSCOPE_FONT_PATH;
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
        ImFontConfig cfg;
        cfg.OversampleH = 2;
        if (io.Fonts->AddFontFromFileTTF(path, kFontSize, &cfg, kRanges)) {
            // CJK text (a model's tokens, the sentence fields): merged from Droid Sans Fallback when it is
            // installed (Debian's fonts-droid-fallback, 1.8 MB; scripts/setup.sh installs it). The common
            // Chinese ideographs with kana and CJK punctuation (ImGui's ChineseSimplifiedCommon ranges, about
            // 2,500 ideographs) keep the atlas small; rarer ones show the replacement mark.
            const char* cjk = ATTNSCOPE_CJK_FONT_PATH;
            if (std::filesystem::exists(cjk, ec)) {
                ImFontConfig merge;
                merge.MergeMode = true;
                merge.OversampleH = 1;
                io.Fonts->AddFontFromFileTTF(cjk, kFontSize, &merge, io.Fonts->GetGlyphRangesChineseSimplifiedCommon());
            }
            return "";
        }
    }
    io.Fonts->AddFontDefault();
    return std::string("font ") + path + " not found (install fonts-dejavu-core); using ImGui's built-in font";
}

} // namespace app
