// The matrix editor: a grid of number cells for one input of the document (X, W^Q, a bias, ...).
//   click a cell and type, Enter commits (Tab moves right, Escape cancels); drag a cell sideways to scrub;
//   arrow keys move the selection, Enter or typing a digit edits it; Ctrl+C / Ctrl+V copy / paste the whole
//   matrix; right-click the title for fills (zeros, identity/block identity, random normal or Xavier with a
//   seed), copy as CSV and paste.
// Invalid text (not a number, NaN, out of float range) stays in the cell, marked red, with the reason below.
#pragma once

#include "state/app_state.h"

namespace app {

// "X  4×4  [n × d_model]" for the current layout (Column shows the transpose).
std::string matrixTitle(const AppState& state, MatrixId id);

// Draws the editor for `id` at the cursor. `maxSize` bounds the visible area (larger grids scroll).
void drawMatrixEditor(AppState& state, MatrixId id, ImVec2 maxSize);

// Applies a fill to the matrix as one undo step.
void fillMatrix(AppState& state, MatrixId id, FillKind kind, unsigned seed);
// Pastes a matrix from text (see parseMatrixText); the shape must match the displayed shape (or its transpose).
attn::Status pasteMatrix(AppState& state, MatrixId id, const std::string& text);

} // namespace app
