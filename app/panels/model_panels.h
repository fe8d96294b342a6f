// The model mode's windows (model_panel.cpp), registered in panels.cpp.
#pragma once

#include "state/app_state.h"

namespace app {

void drawModelPanel(AppState& state);       // the model view over the chain (sentences, grid, lines, embedding)
void drawModelOpenDialog(AppState& state);  // File → Open model…; also syncs chain edits back into the model

} // namespace app
