// The in-app path field, used where the desktop's file chooser (platform/portal.h) is not available:
// typing lists the folders and files that complete the path, and the recent files that match; Tab completes
// as far as the choices agree, Up/Down pick one, a click on a folder goes into it. When a portal may answer,
// a "Browse…" button beside the field opens the desktop's own chooser: a file chosen in its Open dialog is
// taken as if typed and Enter pressed, a Save dialog's choice fills the field.
#pragma once

#include "state/app_state.h"

#include <cstddef>
#include <string>
#include <vector>

namespace app {

// The completions of `typed`: recent files that contain it (case-insensitive; all recent files when `typed`
// is empty), then the entries of typed's folder whose names start with the part after the last '/' (folders
// with a trailing '/', sorted, hidden ones only when that part starts with '.'); at most `max`, no repeats.
// A leading "~/" means $HOME. An unreadable folder gives no entries.
std::vector<std::string> pathCompletions(const std::string& typed, const std::vector<std::string>& recent,
                                         std::size_t max = 12);
// The longest common prefix of `choices` (for Tab), "" when there are none.
std::string commonPrefix(const std::vector<std::string>& choices);

// Draws the field (`width` as ImGui's SetNextItemWidth, the Browse button included) at the cursor and
// records its rectangle as `rectName` (test hooks). Returns true when Enter was pressed in it, or when the
// desktop's Open dialog started for it returned a file (which is then in `path`): open it as on Enter.
bool drawPathField(AppState& state, const char* rectName, std::string& path, const char* hint, float width,
                   ChooserKind browseKind = ChooserKind::Open);

// Opens the desktop's Open / Save dialog for the path field `rectName` (its answer arrives through
// drawPathField), as its Browse… button does. False when no portal can answer: the field is then the way.
// File → Open / save… (Ctrl+O) can call it beside showing the file panel, so that the desktop's dialog comes
// up at once where there is one: `state.showFilePanel = true; startDesktopChooser(state, "file/path", ChooserKind::Open);`
bool startDesktopChooser(AppState& state, const char* rectName, ChooserKind kind, const std::string& suggestedName = "");

} // namespace app
