// The window's test hooks (--test-hooks DIR): the end-to-end tests (tests/gui/e2e_*.py) find widgets and wait
// for state only through these files, never through fixed coordinates or sleeps.
//   DIR/layout.json  named widget rectangles (AppState::rects), counters (result generation, revisions,
//                    captures), the last error and the mouse; rewritten on change and every 3 frames
//   DIR/frame.ppm    the frame that shows a new result, or the next frame after the test creates
//                    DIR/capture.request (removed once served)
#pragma once

#include "render/heatmap_gl.h"
#include "state/app_state.h"

#include <string>

namespace app {

// Called once per frame after rendering, before the swap; `frame` counts from 1, `recomputed` says the frame
// shows a new result, fbw×fbh is the framebuffer. `captures` counts the frame.ppm files written.
void writeTestHooks(const std::string& dir, const AppState& state, const GlHeatmapRenderer& renderer, int frame,
                    bool recomputed, int fbw, int fbh, int& captures);

} // namespace app
