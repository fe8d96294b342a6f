// Where the window keeps its files: the XDG state folder (autosave, recent files) and the presets.
#pragma once

#include <string>
#include <vector>

namespace app {

// $XDG_STATE_HOME/attnscope, else ~/.local/state/attnscope; `override` (from --state-dir) wins when set.
// Created when missing; returns "" (and the caller skips persistence) when it cannot be created.
std::string stateDirectory(const std::string& override);

// The presets folder: <exe dir>/../../assets/presets (build tree), <exe dir>/../share/attnscope/assets/presets
// (installed by `cmake --install` or the .deb), or ATTNSCOPE_SOURCE_DIR/assets/presets; "" when none exists.
std::string presetsDirectory();

// The models folder: <exe dir>/../models (build tree: build/models, filled by scripts/setup.sh), else
// <exe dir>/../share/attnscope/models (installed). Found from the program's own path, not the working folder,
// so an installed attnscope works from anywhere. When neither exists: the installed path if the program is
// installed (a share/attnscope beside it), else the build-tree one, so a "cannot open" names where it belongs.
std::string modelsDirectory();

// The .json files in `dir`, sorted by name (full paths); empty when the folder cannot be read.
std::vector<std::string> listJsonFiles(const std::string& dir);

// "seed000_worked_example.json" for ".../seed000_worked_example.json".
std::string fileName(const std::string& path);

} // namespace app
