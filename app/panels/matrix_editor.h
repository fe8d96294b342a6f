// The matrix editor: a grid of number cells for one input of the document (X, W^Q, a bias, ...).
//   click a cell and type, Enter commits (Tab moves right, Escape restores the cell); drag a cell sideways to
//   scrub; arrow keys move the selection, Enter or typing a digit edits it; clicking the title or a cell
//   selects the matrix, which is then outlined and is the one Ctrl+C / Ctrl+V copy / paste as a whole;
//   loading a session clears the selection (noteSessionLoaded); right-click the title for fills (zeros, identity/block identity, random normal or Xavier with a
//   seed), copy as CSV and paste.
// Invalid text (not a number, NaN, out of float range) stays in the cell, marked red, with the reason below.
#pragma once

#include "state/app_state.h"

namespace app {

// "X  4×4  [n × d_model]" for the current layout (Column shows the transpose).
std::string matrixTitle(const AppState& state, MatrixId id);

// Draws the editor for `id` at the cursor. `maxSize` bounds the visible area (larger grids scroll).
void drawMatrixEditor(AppState& state, MatrixId id, ImVec2 maxSize);

// Records that the editor of `id` covers min…max in this frame (matrix editors call it; drops use the list).
void noteEditorRect(EditState& edit, MatrixId id, ImVec2 min, ImVec2 max);

// Applies a fill to the matrix as one undo step.
void fillMatrix(AppState& state, MatrixId id, FillKind kind, unsigned seed);
// Pastes a matrix from text (see parseMatrixText); the shape must match the displayed shape (or its transpose).
attn::Status pasteMatrix(AppState& state, MatrixId id, const std::string& text);

} // namespace app
