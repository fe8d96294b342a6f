// What the Export dialog does, without drawing anything: default paths, writing figures and arrays, reading
// array files into the document, the code snippet, the preview cache and the window screenshot. The dialog
// (panels/export_panel.cpp) calls these, and so do the tests.
//
// Every file is written atomically (fig::writeFigure, io::writeNpz, attn::writeFileAtomic), and a folder of
// arrays as a whole (io::writeArraysToFolder): a failed export never leaves a partial file or folder. Errors come back as messages naming the path or field; nothing throws, and a
// failed import leaves the document as it was.
#pragma once

#include "state/document.h"
#include "state/export_state.h"

#include <attnscope/status.h>

#include <string>
#include <vector>

namespace app {

// ---- What gets exported -------------------------------------------------------------------------------
// The document's session as saved (the layout's orientation, the same matrices as the session file) and its
// result, computed on the CPU as `attnscope render/export` do, so the dialog writes the same files as the
// command line. Errors: the compute's message.
struct ExportSource {
    attn::Session session;
    attn::AttentionResult result;
};
attn::Expected<ExportSource> exportSource(const Document& doc);

// The FigureOptions the dialog's fields describe (its title choice included), drawing the weights over 0…1
// when the window does (`fixedWeightsRange`: the view's weights range is fixed).
fig::FigureOptions figureOptions(const ExportState& st, bool fixedWeightsRange,
                                 attn::WeightsScale weightsScale = attn::WeightsScale::Auto);

// ---- Default paths ------------------------------------------------------------------------------------
// Files go next to the session file when the document has one, else into the current directory. Their
// names start with the session file's stem, else the session's name made file-safe ("Seed 004: translation
// as cross-attention" → "seed_004_translation_as_cross_attention"), else "attnscope".
std::string exportBaseName(const Document& doc);
std::string exportFolder(const Document& doc);   // "" = the current directory, else ends in '/'
const char* figureExtension(fig::FigureFormat f);  // ".png", ".svg", ".pdf"
// <folder><base>_<panel>[_head<i>].<ext>, e.g. "translation_weights.pdf".
std::string defaultFigurePath(const Document& doc, const fig::FigureOptions& o, fig::FigureFormat f);
// <base>.npz, <base>.safetensors, or the folders <base>_npy/ and <base>_csv/.
std::string defaultDataPath(const Document& doc, DataFormat f);
std::string defaultScreenshotPath(const Document& doc);  // <base>_window.png
// `path` with its extension replaced by `ext` (".svg"); the extension is added when there is none.
std::string replaceExtension(const std::string& path, const std::string& ext);

// ---- Figure -------------------------------------------------------------------------------------------
// Builds the figure of the document and writes it to `path` in the format its extension names (.png, .svg,
// .pdf). Returns the message to show ("wrote translation_weights.pdf (612×418 pt)"). Errors name the path
// or the option: "x.jpg: expected a .png, .svg or .pdf file name"; "panel xkv: the session is not in cross
// mode"; "/no/dir/f.pdf: cannot write: No such file or directory".
attn::Expected<std::string> exportFigure(const Document& doc, const fig::FigureOptions& o, const std::string& path,
                                         double scale);

// Renders the preview again when the options, the box or the document's revision changed (else does nothing
// and returns false). A changed document alone renders at most once per kPreviewInterval of `now` (seconds),
// so dragging a value in a large session does not render a figure every frame; the last image stays until
// then. The image fits a box of boxW × boxH pixels (at most 3 pixels per point, at least fig::kMinScale).
// On error the image is cleared and `p.error` says why. Returns true when it rendered.
inline constexpr double kPreviewInterval = 0.25;
bool updatePreview(FigurePreview& p, const Document& doc, const fig::FigureOptions& o, float boxW, float boxH,
                   double now);

// ---- Data ---------------------------------------------------------------------------------------------
// Writes the arrays `attnscope export` writes (io::sessionArrays; results too unless inputsOnly): one .npz or
// .safetensors file, or one .npy / .csv file per array into the folder `path` (created when missing).
// Returns "wrote 27 arrays to out.npz".
attn::Expected<std::string> exportData(const Document& doc, DataFormat f, const std::string& path, bool inputsOnly);

// ---- Import -------------------------------------------------------------------------------------------
// One array or tensor in a file, for the name picker.
struct ArrayEntry {
    std::string name;  // "" for a .npy (it holds one unnamed array)
    std::string info;  // "float32 (4, 3)", or why it cannot be read
};
// The arrays in a .npy, .npz or .safetensors file. Errors: the reader's message, or an unknown extension.
attn::Expected<std::vector<ArrayEntry>> listArrays(const std::string& path);

// The current shape of a slot in file orientation ("4×3"; vectors "1×n"), "" when the session lacks it.
std::string slotShape(const Document& doc, const std::string& slot);

struct ImportRequest {
    std::string slot = "Wq";   // one of io::slotNames()
    std::string path;          // .npy, .npz or .safetensors
    std::string name;          // array / tensor name (.npz, .safetensors)
    bool transpose = false;
    std::string rows, cols;    // "a:b" (half-open), "" = all
    int head = -1;             // -1 = all columns; else keep block `head` of `heads`
    int heads = 1;
};
// Cuts the matrix out of the file as `attnscope import` does (transpose, ranges, head slice), puts it into
// the slot and replaces the document's session as ONE undo step. The whole session is validated first: a
// matrix of the wrong shape gets core's message plus the slot's current shape ("after importing Wq (2×2):
// Wq: expected 4×2 (d_model × H·d_k), got 2×2 (the session's Wq is 4×3)"), and on any error the document
// is unchanged. Returns "Wq ← w.npy float32 (4×3); Ctrl+Z undoes it".
attn::Expected<std::string> importArray(Document& doc, const ImportRequest& r);

// ---- Code ---------------------------------------------------------------------------------------------
// Makes st.code again when the document's revision or the language changed; returns true when it did. On
// error st.code is cleared and st.codeMessage holds the message.
bool updateCode(ExportState& st, const Document& doc);

// ---- Window screenshot --------------------------------------------------------------------------------
// Writes the captured window (RGBA, top row first) as PNG, atomically. Returns "wrote w.png (1280×800)".
attn::Expected<std::string> saveWindowScreenshot(const std::string& path, const fig::RgbaImage& img);

} // namespace app
