// The window's panels: one ImGui window per file, each a free function over AppState.
// drawAllPanels() lays them out (a fixed tiling of the window, no imgui.ini) and runs the registry below;
// adding a panel is one line in kPanelRegistry (panels.cpp) plus its draw function.
#pragma once

#include "state/app_state.h"

#include <imgui.h>

namespace app {

void drawMainMenu(AppState& state);        // menu bar: File (open, save, recent, presets), Edit, View
void drawControlsPanel(AppState& state);   // mode, layout, heads, score, masks, sizes, tokens, colormaps
void drawChainPanel(AppState& state);      // the data flow: inputs → Q K V → per-head maps → output
void drawFilePanel(AppState& state);       // path field, open/save, recent files; load-error modal
void drawExportPanel(AppState& state);     // File → Export… (Ctrl+E): figure, data, import, code, screenshot
void drawStatusBar(AppState& state);       // backend, compute time, errors
void drawMessagesPanel(AppState& state);   // toasts and the log window
void drawRestoreOffer(AppState& state);    // "restore the autosaved session?" on start
void drawLessonPanels(AppState& state);    // the open lesson panels (View → Lessons), over the chain
// The fit layout's plan for this frame (view/chain_view.h), made before any panel is drawn: it decides
// whether the controls sidebar is collapsed to a strip.
void planChainLayout(AppState& state);
void drawControlsOrStrip(AppState& state);  // the controls sidebar, or its collapsed strip

// Everything, once per frame, between ImGui::NewFrame and ImGui::Render. Also handles the global shortcuts
// (Ctrl+Z, Ctrl+Shift+Z / Ctrl+Y, Ctrl+S, Ctrl+O, Ctrl+E) and updates the linked hover at the end of the frame.
void drawAllPanels(AppState& state);

// Layout constants shared by the panels (the window is tiled: menu bar, controls on the left, chain, status bar).
inline constexpr float kControlsWidth = 262.0f;
inline constexpr float kStatusBarHeight = 24.0f;
// The sidebar's width this frame: kControlsWidth, or kStripWidth when collapsed.
float controlsWidth(const AppState& state);

// Key presses in ImGui 1.86: named keys go through io.KeyMap (GetKeyIndex); letters other than the few ImGui
// names use the backend's key codes, which for GLFW are the uppercase ASCII codes ('S' = GLFW_KEY_S = 83).
inline bool keyPressed(ImGuiKey k, bool repeat = true) { return ImGui::IsKeyPressed(ImGui::GetKeyIndex(k), repeat); }
inline bool letterPressed(char upper) { return ImGui::IsKeyPressed(static_cast<int>(upper), false); }


} // namespace app
