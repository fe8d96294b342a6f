// AppState: the window's UI options (persisted: per session in its "view" object, per user in the state
// folder) and the transient interaction state shared by the panels (hover, selection, open dialogs).
#pragma once

#include "lessons/lesson_common.h"
#include "state/background_saver.h"
#include "state/doc_ui_state.h"
#include "state/document.h"
#include "state/edit_state.h"
#include "state/export_state.h"
#include "state/bundle_state.h"
#include "state/model_state.h"
#include "view/chain_view.h"

#include <attnscope/colormap.h>

#include <imgui.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace app {

// Which kind of data a heatmap shows; each kind has its own colormap.
enum class HeatmapKind { Projection, Scores, Weights, Output };
inline constexpr int kHeatmapKinds = 4;

// Options saved with each session (the "view" object of the session file).
struct ViewOptions {
    attn::Colormap colormaps[kHeatmapKinds] = {attn::Colormap::RdBu, attn::Colormap::RdBu, attn::Colormap::Viridis,
                                               attn::Colormap::RdBu};  // signed data defaults to the diverging map
    bool sharedRange = true;     // per-head small multiples share one colour range (else one range per head)
    bool showValues = true;      // print values in cells when they fit
    float zoom = 1.0f;           // heatmap cell size factor (Ctrl+wheel over a heatmap, full chain), 0.25…8
    bool fit = true;             // the chain laid out to the window (else the full chain: every head, every editor)
    int head = 0;                // the head the fit layout shows (0-based; clamped to the session's heads)
    RangeMode weightsRange = RangeMode::Fixed;  // weights: 0…1 (Fixed), auto-fitted, or locked
    RangeMode otherRanges = RangeMode::Auto;    // every other map: auto-fitted or locked
    // Weights' colour scale ("weights_scale"): auto (linear up to attn::kLogScaleKeys keys, log past), linear,
    // log, or each query's row over its largest weight (attn::WeightsScale).
    attn::WeightsScale weightsScale = attn::WeightsScale::Auto;
    // Open lesson panels ("lesson": "masks" or ["heads", "scaling"] in the file) and the query the vector view
    // starts on ("query": i; -1 = keep the current one).
    bool lessons[kLessonCount] = {};
    int lessonQuery = -1;
};
std::string viewToJson(const ViewOptions& v);
// Reads what it knows from `json` (unknown or malformed fields keep their defaults).
ViewOptions viewFromJson(const std::string& json);

// A rectangle of an interesting widget, written for the end-to-end test (--test-hooks).
struct UiRect { float x0 = 0, y0 = 0, x1 = 0, y1 = 0; };

struct AppState {
    Document doc;
    ViewOptions view;

    // Persisted per user (state folder, app.json).
    std::vector<std::string> recentFiles;  // newest first, at most kMaxRecent
    static constexpr std::size_t kMaxRecent = 10;

    // Paths and flags from the command line.
    std::string stateDir;      // "" = no persistence
    bool autosave = true;
    std::string presetsDir;

    // Interaction state (not persisted).
    int hoverQuery = -1;       // hovered query index (any panel), -1 = none; read by every panel next frame
    int hoverKey = -1;         // hovered key index
    int nextHoverQuery = -1;   // written during a frame, becomes hoverQuery at the end of it
    int nextHoverKey = -1;
    bool paintMask = false;    // clicking the weights paints the custom mask
    int paintValue = -1;       // while painting: the value being painted (0/1), -1 = not painting
    std::string filePath;      // the path field of the file panel
    std::string loadError;     // shown in a modal when a file fails to load; "" = none
    bool showRestoreOffer = false;
    bool quitPrompt = false;     // "Quit with unsaved edits?" is shown
    bool quitConfirmed = false;  // the window closes after this frame
    std::string restorePath;   // the autosaved session offered back
    bool showFilePanel = false;
    bool showLog = false;
    ExportState exportDialog;  // File → Export… (Ctrl+E)
    DocUiState docUi;          // controls panel, main menu and unsaved-changes prompt
    ModelState model;          // the model mode: a trained transformer (docs/model.md)
    BundleState bundle;        // an attention bundle's views (docs/bundle.md)
    EditState edit;            // matrix selection and cell being typed, status bar, path field, file chooser
    ChainView chain;           // the chain panel's layout, focus, locked ranges (view/chain_view.h)

    // Lesson panels: their UI state, and the session in file orientation they read (rebuilt when the
    // document's revision changes: the document stores it row-oriented).
    LessonState lesson;
    attn::Session lessonSession;
    std::uint64_t lessonSessionRevision = ~std::uint64_t(0);
    bool lessonGesture = false;  // a lesson edit is being dragged: later edits join its undo step
    // Saving a lesson panel as PNG ("Save this view as PNG" in each panel, --screenshot-lesson): the frame
    // after the request draws the panel without its save row and records the panel's rectangle; the window
    // loop then cuts that rectangle out of the rendered frame and writes it.
    struct ViewCapture {
        int lesson = -1;
        std::string path;
        bool armed = false;  // the current frame shows the panel as it should be saved
    };
    std::optional<ViewCapture> viewCapture;
    UiRect lessonRects[kLessonCount];             // each open lesson panel's rectangle, window pixels
    std::string lessonPngPaths[kLessonCount];     // the path fields of the save rows ("" = the default)
    std::string lessonPngStatus[kLessonCount];    // the last save's outcome, shown under the save row
    bool lessonPngFailed[kLessonCount] = {};
    bool lessonSaveRows = true;                   // false: no save rows (--screenshot-lesson saves the panel alone)
    double lastChangeTime = -1;       // when the document last changed (for the autosave delay)
    std::uint64_t savedRevision = 0;  // the revision the autosave file holds
    std::uint64_t seenRevision = 0;
    BackgroundSaver autosaver;        // writes the autosave file off the frame loop

    // Test hooks: named widget rectangles of the current frame (filled when recordRects is on).
    bool recordRects = false;
    std::map<std::string, UiRect> rects;
    void recordRect(const std::string& name, ImVec2 a, ImVec2 b)
    {
        if (recordRects) rects[name] = {a.x, a.y, b.x, b.y};
    }
};

// Opens a session file into the document, as one undo step (no prompt: see requestOpen for the one that asks
// about unsaved changes); on failure sets state.loadError (shown as a modal) and posts the message; the current
// session is untouched. Adds successes to the recent files, except presets (files in state.presetsDir), which
// open as untitled documents so that saving never overwrites them.
bool openSession(AppState& state, const std::string& path);
// File → Open, recent files, presets and dropped sessions: opens `path` now, or, when the document has unsaved
// changes, asks first (state.docUi.pendingOpen: the prompt saves or discards, then opens). False when opening
// now failed (openSession's loadError says why).
bool requestOpen(AppState& state, const std::string& path);
// True when `path` is in state.presetsDir.
bool isPreset(const AppState& state, const std::string& path);
// Keeps the view options with the session they belong to, once per frame: stores them in the document's
// session while it stays the same opened session, and when undo/redo returns to another one (across an
// open) shows that session's view options again.
void followDocumentView(AppState& state);
// Saves the document (with the view options) to `path`; posts the outcome.
bool saveSessionAs(AppState& state, const std::string& path);

// The user's app.json (recent files) and the autosaved session in the state folder.
void loadUserState(AppState& state);
void saveUserState(const AppState& state);
std::string autosavePath(const AppState& state);  // "" when there is no state folder
// Saves the session to the autosave file when it changed and `now` is kAutosaveDelay past the last change
// (or `force`). The write runs on state.autosaver's thread (a failure is posted on a later call); `force`
// (at exit) writes now, after the background writes. Returns true when it wrote or queued a write.
inline constexpr double kAutosaveDelaySeconds = 0.5;  // short: a crash loses at most half a second of edits
// A layer opened from the model view is not autosaved: it is the model's (tens of MB of trained weights),
// rebuilt by opening the model again, and a restored copy would be a session detached from the model.
bool autosaveIfNeeded(AppState& state, double now, bool force);

// Crash detection for the restore offer: a marker file in the state folder lives while a window runs.
// beginRun writes it and returns whether the previous run left its marker behind (it crashed or was killed:
// its autosave is then worth offering); endRun removes it on a clean close (Quit, Ctrl+Q, the window's close
// button). Without a state folder or autosave: no marker, beginRun returns false.
std::string runMarkerPath(const AppState& state);
bool beginRun(AppState& state);
void endRun(AppState& state);

// Quit (File → Quit, Ctrl+Q, the window's close button): at once when nothing is unsaved, else
// state.quitPrompt asks (save, quit without saving, cancel). state.quitConfirmed tells the window to close.
void requestQuit(AppState& state);

} // namespace app
