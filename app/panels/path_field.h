// The in-app path field, used where the desktop's file chooser (platform/portal.h) is not available:
// typing lists the folders and files that complete the path, and the recent files that match; Tab completes
// as far as the choices agree, Up/Down pick one, a click on a folder goes into it. When a portal may answer,
// a "Browse…" button beside the field opens the desktop's own chooser, whose choice fills the field.
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
// records its rectangle as `rectName` (test hooks). Returns true when Enter was pressed in it.
bool drawPathField(AppState& state, const char* rectName, std::string& path, const char* hint, float width,
                   ChooserKind browseKind = ChooserKind::Open);

} // namespace app
