// ImGui context set-up shared by the window and the headless tests: style, no imgui.ini, the bundled font.
#pragma once

#include <string>

namespace app {

// Font size in pixels of the UI font (DejaVu Sans): 14 px keeps 4-digit values inside 30 px heatmap cells.
inline constexpr float kFontSize = 14.0f;

// Configures the current ImGui context: dark style, no imgui.ini (fixed layout, reproducible screenshots),
// DejaVu Sans with every glyph it has in the BMP, common CJK, and more on request (panels/glyph_atlas.h).
// Returns "" or a warning (font file missing: ImGui's built-in font is used instead).
std::string setupImGuiStyle();

} // namespace app
