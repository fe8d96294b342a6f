// Files dropped on the window (GLFW's drop callback, platform/platform.h): a .json session opens through
// openSession, as File → Open does; a .npy / .npz / .safetensors dropped onto a matrix editor is imported
// into that matrix as one undo step (state/export_actions.h importArray). Anything else, or an array dropped
// beside the editors, gets a message saying what to do instead.
#pragma once

#include "state/app_state.h"

#include <imgui.h>

#include <optional>
#include <string>
#include <vector>

namespace app {

enum class DropKind { Session, Array, Model, Unknown };
// By extension, case-insensitive: .json → Session; .npy .npz .safetensors → Array; .gguf → Model; a folder
// (a Hugging Face model directory) → Model.
DropKind dropKindOf(const std::string& path);

// The matrix editor under `pos` among `editors` (the last one drawn there wins: it is on top), if any.
std::optional<MatrixId> editorAt(const std::vector<EditorRect>& editors, ImVec2 pos);

// The session-file slot name of a matrix ("Wq", "X_kv", "additive_Wq", "bq", ...), as io::setSlot knows it.
const char* slotName(MatrixId id);

// What became of one dropped file.
struct DropOutcome {
    std::string path;
    bool ok = false;
    std::string message;  // "opened s.json", "W^K ← w.npy float32 (4×4); Ctrl+Z undoes it", or the error
};

// Handles the files dropped at `pos` (window pixels, where the pointer was): the matrix editors are those
// drawn in the last frame (state.edit.editors). Each outcome is also posted as a message (errors as errors).
std::vector<DropOutcome> handleFileDrop(AppState& state, const std::vector<std::string>& paths, ImVec2 pos);

// Test hook (--test-hooks DIR): xdotool cannot drag files, so a test writes DIR/drop.request, a JSON object
// {"paths": [...], "x": X, "y": Y}; the frame loop hands it to handleFileDrop exactly as a GLFW drop at
// (X, Y), and removes the file. Returns the request when there was a readable one.
struct DropRequest {
    std::vector<std::string> paths;
    ImVec2 pos;
};
std::optional<DropRequest> takeDropRequest(const std::string& hooksDir);

} // namespace app
