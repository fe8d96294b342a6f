// The interaction state of the controls panel, the main menu and the unsaved-changes prompt (issue 12: no
// file-scope globals in the panels). Not persisted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace app {

// A preset as the Presets menu lists it: the session file's own name and description.
struct PresetEntry {
    std::string path;
    std::string name;         // Session::name, or the file name when the file has none
    std::string description;  // Session::description ("" = none)
};

struct DocUiState {
    // Controls: per-field refusal messages, shown under the field until the next valid change.
    std::string sizeError, scaleError, validError, tokenError;
    std::string sentence, keySentence;  // the "type a sentence" fields
    bool keepDModel = false;            // heads: split the projections (d_model×d_model kept) instead of whole heads

    // Main menu: the CUDA probe (once) and the presets read from state.presetsDir (once per folder).
    bool cudaProbed = false;
    bool cudaUsable = false;
    std::string cudaWhy;
    bool presetsListed = false;
    std::string presetsListedFrom;
    std::vector<PresetEntry> presets;

    // Unsaved-changes prompt: a file waiting to be opened until the user saves, discards or cancels.
    std::string pendingOpen;  // "" = no prompt
    std::string saveAsPath;   // where "Save" writes an untitled session
    std::string saveError;    // the last failed save from the prompt

    // followDocumentView: the Document::sessionSerial() whose view options state.view shows.
    std::uint64_t viewSerial = ~std::uint64_t(0);
};

} // namespace app
