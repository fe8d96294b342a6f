// The Export dialog's state (File → Export…, Ctrl+E): figure options, paths, the preview cache, import
// choices, the code snippet and the screenshot request. Not persisted. The actions on it (writing files,
// importing into the document) are in state/export_actions.h, free of ImGui so tests can call them.
#pragma once

#include "figure/figure.h"
#include "figure/figure_render.h"
#include "io/code_snippet.h"

#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

namespace app {

enum class ExportTab { Figure, Data, Import, Code, Screenshot };

// What the Data tab writes: one file, or a folder with one file per array.
enum class DataFormat { Npz, Safetensors, NpyFolder, CsvFolder };

// The outcome of the last action of a tab, shown under its button (errors in red).
struct ActionMessage {
    std::string text;   // "" = nothing to show
    bool error = false;
};

// The figure preview: rendered again only when its key (options, box size, document revision) changes.
struct FigurePreview {
    std::string key;              // what the image shows; "" = nothing rendered yet
    std::string optionsKey;       // the part of `key` without the document revision
    double renderedAt = -1e9;     // when it last rendered (seconds, the caller's clock)
    fig::RgbaImage image;         // empty when `error` is set
    std::string error;            // why there is no image (e.g. "panel xkv: the session is not in cross mode")
    std::uint64_t version = 0;    // +1 each time image/error change (the panel re-uploads the texture then)
    int renders = 0;              // how many times it rendered (tests check the cache with it)
    bool annotationsFit = true;   // false: the cells were too small for the requested annotations
    double widthPt = 0, heightPt = 0;  // the figure's size in points (PNG pixels = points × scale)
    // The GL texture of `image` (null with the null renderer) and the version it holds.
    ImTextureID texture = nullptr;
    std::uint64_t textureVersion = 0;
};

struct ExportState {
    bool open = false;
    bool selectTab = false;                 // make `tab` the selected tab next frame (--open, tests)
    ExportTab tab = ExportTab::Figure;

    // ---- Figure -----------------------------------------------------------------------------------------
    fig::FigureOptions figure;              // panel, head, colormap, shared range, annotate (title: below)
    bool titleDefault = true;               // true: the title names the panel; else `title` ("" = none)
    std::string title;
    fig::FigureFormat format = fig::FigureFormat::Pdf;  // default: vector, for papers
    double scale = 2.0;                     // PNG pixels per point (2 = 144 dpi), as `attnscope render`
    std::string figurePath;                 // follows the options while figurePathAuto
    bool figurePathAuto = true;             // false once the user edits the path
    ActionMessage figureMessage;
    FigurePreview preview;

    // ---- Data -------------------------------------------------------------------------------------------
    DataFormat dataFormat = DataFormat::Npz;
    bool inputsOnly = false;                // only the session's inputs, not the computed results
    std::string dataPath;
    bool dataPathAuto = true;
    ActionMessage dataMessage;

    // ---- Import -----------------------------------------------------------------------------------------
    std::string importSlot = "Wq";          // one of io::slotNames()
    std::string importPath;                 // .npy, .npz or .safetensors
    std::vector<std::string> importNames;   // arrays / tensors found by "Load" (npz, safetensors)
    std::vector<std::string> importInfo;    // "float32 (4, 3)" for each name (or the whole .npy)
    std::string importListedPath;           // the file importNames came from
    int importName = 0;                     // index into importNames
    bool importTranspose = false;
    std::string importRows, importCols;     // "a:b" ranges; "" = all
    bool importHeadSlice = false;
    int importHead = 0, importHeads = 1;
    std::string slotShape;                  // "currently 4×3" for importSlot, remade when slotShapeKey changes
    std::string slotShapeKey;
    ActionMessage importMessage;

    // ---- Code -------------------------------------------------------------------------------------------
    io::CodeLang codeLang = io::CodeLang::NumPy;
    std::string code;                       // the program for codeKey
    std::string codeShown;                  // what the text box shows: `code`, cut when very long
    std::string codeKey;                    // revision + language the code was made for
    ActionMessage codeMessage;

    // ---- Window screenshot ------------------------------------------------------------------------------
    std::string screenshotPath;
    bool screenshotPathAuto = true;
    // The window loop captures the frame after rendering when `screenshotReady` is set: the button sets
    // `screenshotRequest`, the next frame draws everything but this dialog and sets `screenshotReady`.
    bool screenshotRequest = false;
    bool screenshotReady = false;
    ActionMessage screenshotMessage;
};

} // namespace app
