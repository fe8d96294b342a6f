// The model mode's windows (model_panel.cpp), registered in panels.cpp.
#pragma once

#include "state/app_state.h"

#include <string>

namespace app {

void drawModelPanel(AppState& state);       // the model view over the chain (sentences, grid, lines, embedding)
void drawModelOpenDialog(AppState& state);
// A decoder's tabs over the grid's area (why_panel.cpp): Attention (returns false: the caller draws the grid) or
// one of the views that explain the prediction, drawn in `size` (returns true).
bool drawWhyView(AppState& state, ImVec2 size);
// A token as a label: newlines and tabs as visible marks, ∅ for an empty token.
std::string tokenLabel(const std::string& t);  // File → Open model…; also syncs chain edits back into the model
// Model mode in the shared windows: while the model view is shown (modelViewShown) the sidebar and the status
// bar describe the model, not the session under it; a layer opened in the chain view gets a breadcrumb
// "model › layer L › head H" with Back (and Esc) to the model view.
bool modelViewShown(const AppState& state);
void drawModelSidebar(AppState& state);
void drawModelStatus(AppState& state, const std::string& backend);  // backend: its description
void drawModelBreadcrumb(AppState& state);

} // namespace app
