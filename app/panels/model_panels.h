// The model mode's windows (model_panel.cpp), registered in panels.cpp.
#pragma once

#include "state/app_state.h"

#include <string>
#include <vector>

namespace app {

void drawModelPanel(AppState& state);       // the model view over the chain (sentences, grid, lines, embedding)
void drawModelOpenDialog(AppState& state);
void drawModelTextDialog(AppState& state);  // File → Open text… (a decoder's text from a file)
// A decoder's tabs over the grid's area (why_panel.cpp): Attention (returns false: the caller draws the grid) or
// one of the views that explain the prediction, drawn in `size` (returns true).
bool drawWhyView(AppState& state, ImVec2 size);
// "Why here?" (qk_panel.cpp; issue 35): a map of decoder head (layer, head) offers the right-click menu of its cell
// (query, key) this frame (`lines`: the menu also offers "Show its lines"); drawQkPanel opens it, and draws the
// panel while it is open.
void offerQkMenu(AppState& state, int layer, int head, int query, int key, bool lines);
void drawQkPanel(AppState& state);
// A token as a label: newlines and tabs as visible marks, ∅ for an empty token.
std::string tokenLabel(const std::string& t);  // File → Open model…; also syncs chain edits back into the model
// Model mode in the shared windows: while the model view is shown (modelViewShown) the sidebar and the status
// bar describe the model, not the session under it; a layer opened in the chain view gets a breadcrumb
// "model › layer L › head H" with Back (and Esc) to the model view.
bool modelViewShown(const AppState& state);
void drawModelSidebar(AppState& state);
void drawModelStatus(AppState& state, const std::string& backend);  // backend: its description
void drawModelBreadcrumb(AppState& state);

// BertViz's head view (lines_view.cpp): queries and keys in two columns, a line per pair whose opacity is the
// weight w(query, key); hovering a query shows only its lines (`hoverToken` gets it, -1 = none; `rowOut` the
// row height). The caller draws it in a child of `size`, which scrolls past the room.
void drawLinesMap(AppState& state, ImVec2 size, const std::vector<std::string>& queries,
                  const std::vector<std::string>& keys, const attn::MatrixCRef& w, int& hoverToken, float& rowOut);

// An attention bundle's window (bundle_panel.cpp; docs/bundle.md): the grid, a head's zoomable map, the lines
// view; shown over the chain view while a bundle is open. While it is shown (bundleViewShown) the sidebar and
// the status bar describe the bundle.
void drawBundlePanel(AppState& state);
bool bundleViewShown(const AppState& state);
// The bundle window's grid and zoomable head map over any maps `b` holds (also a decoder's long run in the model
// view, ModelState::longView).
void drawMapsGrid(AppState& state, BundleState& b, ImVec2 size);
void drawMapsHeadView(AppState& state, BundleState& b, ImVec2 size);
void drawBundleSidebar(AppState& state);
void drawBundleStatus(AppState& state, const std::string& backend);

} // namespace app
