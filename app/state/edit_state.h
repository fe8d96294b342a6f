// EditState: the interaction state of the matrix editors, the status bar, file drops and path fields,
// owned by the AppState it belongs to (issue 12: no file-scope globals, so two AppStates in one process
// never share a selection or a text being typed).
#pragma once

#include "platform/portal.h"
#include "state/document.h"

#include <imgui.h>

#include <attnscope/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace app {

// The matrix that Ctrl+C / Ctrl+V act on (outlined in the window), and the one cell being selected or
// edited in it (one text field at a time, app-wide).
struct MatrixFocus {
    bool hasMatrix = false;      // a matrix is selected (its title or one of its cells was clicked)
    MatrixId id = MatrixId::X;   // which one, when hasMatrix
    int r = -1, c = -1;          // canonical indices of the selected cell; -1 = the matrix only (title click)
    bool editing = false;        // the cell's text field is open
    bool focusField = false;     // give the text field keyboard focus next frame
    bool caretToEnd = false;     // opened by typing: keep the typed text, caret after it (no select-all)
    std::string text;            // the text being typed
    std::string error;           // why the typed text was refused ("" = fine)
    bool scrubbing = false;
    float scrubStart = 0;
    unsigned fillSeed = 1;       // the seed of the title menu's random fills

    bool cellSelected() const { return hasMatrix && r >= 0 && c >= 0; }
    void clear()
    {
        const unsigned seed = fillSeed;
        *this = MatrixFocus{};
        fillSeed = seed;
    }
};

// Where each matrix editor was drawn in the last frame (window pixels): drops land on the one under the
// pointer.
struct EditorRect {
    MatrixId id = MatrixId::X;
    ImVec2 min, max;
};

// One in-app path field (panels/path_field.h): its completion list.
struct PathFieldState {
    std::string listedFor;              // the text the completions were made for
    std::vector<std::string> choices;   // folders and files that complete it, recent files first
    int highlighted = -1;               // the choice Up/Down moved to (-1 = none)
    bool listed = false;                // choices were made at least once
    bool open = false;                  // the list is shown
    bool listHovered = false;           // the pointer was on the list in the last frame
    bool refocus = false;               // give the field the keyboard next frame (after a folder was picked)
};

struct EditState {
    MatrixFocus focus;
    // The editors drawn in frame editorsFrame (ImGui's frame count): between frames, those of the last one.
    std::vector<EditorRect> editors;
    int editorsFrame = -1;

    // Status bar: the backend's description, remade when the backend changes (it probes the device).
    std::string backendText;
    attn::Backend backendOf = attn::Backend::Auto;

    std::map<std::string, PathFieldState> pathFields;  // by the field's rect name (each field its own list)
    // The desktop's file chooser (xdg-desktop-portal); null until first used.
    std::unique_ptr<DesktopChooser> chooser;
    std::string chooserFor;  // the rect name of the path field the open chooser will answer
    ChooserKind chooserKind = ChooserKind::Open;
};

// Called when a session replaces the document (File → Open, a preset, a drop): the selection belonged to
// matrices that are gone, so it goes, with any text being typed.
inline void noteSessionLoaded(EditState& e) { e.focus.clear(); }

} // namespace app
