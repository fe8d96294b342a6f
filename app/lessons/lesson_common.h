// Shared state and drawing helpers of the lesson panels (issue 6): one panel per seed lesson, each a free
// function over the document's session and result plus LessonState. The panels draw what the core lessons
// (attnscope/lessons/*.h) compute; they never compute attention themselves.
#pragma once

#include "attnscope/colormap.h"
#include "attnscope/lessons/lessons.h"
#include "attnscope/preset_io.h"
#include "attnscope/types.h"
#include "lessons/lesson_registry.h"

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace app {

// The kinds of data a lesson heatmap shows, in the order of the main view's HeatmapKind (app_state.h): each
// kind takes the colormap the user chose for it in "Colormaps and view", so lessons and chain agree.
enum class LessonMap { Projection, Scores, Weights, Output };
inline constexpr int kLessonMapKinds = 4;

// What every lesson panel reads from the window. The session and result belong to the document; a panel
// that wants to change the session (an edit, a preset) calls applySession, and the document decides.
struct LessonInputs {
    const attn::Session* session = nullptr;         // null: nothing loaded
    const attn::AttentionResult* result = nullptr;  // the last good result of `session`; null: none
    std::function<void(attn::Session)> applySession;  // replace the document's session (may be empty)
    std::string presetDir;                          // assets/presets, for the lesson preset buttons
    std::string imageDir;                           // assets/images, for the sample image
    std::uint64_t revision = 0;                     // changes whenever the session changes (cache key)
    // The main view's colormap per LessonMap kind (its defaults: signed data diverging, weights viridis).
    attn::Colormap colormaps[kLessonMapKinds] = {attn::Colormap::RdBu, attn::Colormap::RdBu, attn::Colormap::Viridis,
                                                 attn::Colormap::RdBu};
    attn::Colormap colormap(LessonMap kind) const { return colormaps[static_cast<int>(kind)]; }
};

// A lesson value computed for one document revision and parameter set, or the error that prevented it.
template <class T>
struct LessonCache {
    std::optional<T> value;
    std::string error;
    std::uint64_t revision = ~std::uint64_t(0);
    int param = -1;

    // Recomputes with `make` (returning attn::Expected<T>) when the revision or parameter changed.
    template <class Make>
    void refresh(std::uint64_t rev, int p, Make&& make)
    {
        if (rev == revision && p == param) return;
        revision = rev;
        param = p;
        auto e = make();
        if (e) {
            value = std::move(*e);
            error.clear();
        } else {
            value.reset();
            error = e.status().message;
        }
    }
};

// UI state of the lesson panels (selection and each lesson's own controls) and their caches.
struct LessonState {
    int head = 0;
    int query = 0;
    int key = 0;
    std::string presetError;                   // the last failed preset load of a lesson button

    // Scaling lesson: sampled q·k statistics and one row.
    attn::ScalingSampleConfig sampling;        // μ, σ, d_k values, samples, seed
    bool commonAxis = true;                    // one x axis for every d_k (shows the spread growing)
    bool rowFromSession = false;               // the row demo uses the session's head/query, else samples
    int rowDk = 128;                           // sampled row: d_k
    int rowKeys = 8;                           // sampled row: S
    float rowMu = 1.0f, rowSigma = 1.0f;       // sampled row: entries ~ N(μ, σ²)
    std::uint64_t rowSeed = 1;
    bool splitForm = false;                    // show q/d^¼·k/d^¼ instead of q·k/√d_k (identical results)
    std::optional<std::vector<attn::DotProductStats>> stats;   // cache of sampleDotProducts(sampling)
    std::string statsKey;                      // the sampling parameters `stats` was computed for
    struct HistPair {
        attn::Histogram raw, scaled;           // of q·k and q·k/√d_k, on one axis
        std::vector<float> rawCurve, scaledCurve;  // expected counts under the predicted normal
    };
    std::vector<HistPair> hists;               // one per d_k, rebuilt with `stats` or commonAxis
    std::string histsKey;                      // statsKey and axis choice `hists` was built for

    // Formulas and heads lessons: computed once per document revision (each is one or two computes).
    LessonCache<attn::LayoutComparison> layouts;
    LessonCache<attn::WrongFormulaDemo> wrongFormula;      // param: head
    LessonCache<attn::HeadContributions> contributions;
    LessonCache<attn::HeadsComparison> headCounts;         // param: compareHeads
    int compareHeads = 2;                      // h of the one-vs-h comparison

    // Image patches lesson.
    std::string imagePath;                     // empty: the sample image
    int patch = 8;
    attn::PatchSessionOptions patchOptions;
    int patchQuery = 0;
    std::string imageKey;                      // the parameters the cache below was built for
    std::optional<attn::RgbImage> image;
    std::string loadedImagePath;               // the file `image` came from
    std::optional<attn::PatchGrid> grid;
    std::optional<attn::AttentionResult> patchResult;
    std::string imageError;                    // the last load/patch error, shown in the panel
};

// The opening every lesson panel shares: its first-use size and its window, titled from the registry. Returns
// false (the window already ended) when the panel is collapsed or closed: nothing more to draw this frame.
bool beginLessonPanel(LessonId id, ImVec2 firstSize, bool* open);
// True when `in` has a computed session with heads whose maps are on the host (and `fits`, the lesson's own
// condition on it); otherwise shows `note` (which session to open), or that the maps are coming from the GPU, and
// ends the window.
bool lessonHasResult(const LessonInputs& in, const char* note, bool fits = true);

// Clamps the selection to the result's heads, queries and keys (the document may have changed).
void clampSelection(const attn::AttentionResult& r, LessonState& st);

// The label of token i (the session's label, or "#i").
std::string tokenLabel(const std::vector<std::string>& labels, int i);

// `label` as drawn in `width` pixels: whole when it fits, else its longest prefix (whole UTF-8 characters)
// followed by an ellipsis, else empty. Callers show the whole label in a tooltip.
std::string fitLabel(const std::string& label, float width);
// ImGui::SameLine() when an item `width` pixels wide still fits on the current line of the window, else
// nothing (the next item starts a new line): rows of checkboxes or grids wrap instead of running off the panel.
void sameLineIfFits(float width, float spacing = -1.0f);

// ImGui::TextWrapped, wrapping at the panel's visible right edge. (ImGui's own wrap width is the window's
// content width when the window scrolls horizontally: once anything is wide, wrapped text would follow it.)
void textWrapped(const char* fmt, ...) IM_FMTARGS(1);

// One message line in the panel's colour for errors (kept visible; also mirrored by the window's log).
void errorText(const std::string& message);
// A short grey explanation wrapped to the panel width.
void noteText(const std::string& text);
// A separator followed by a section title (ImGui 1.86 has no SeparatorText).
void sectionTitle(const char* title);

ImU32 toImColor(attn::Rgb8 c, std::uint8_t alpha = 255);
// A categorical colour per head (repeats after 8), used for the W/Q/K/V column blocks.
ImU32 headColor(int head, std::uint8_t alpha = 255);

// A matrix as coloured cells with values, in a fixed cell size; masked cells grey. Returns the hovered
// cell (row, col) or (-1, -1); `clicked` is set when that cell was clicked.
struct GridOptions {
    float cell = 34.0f;                 // cell size in pixels
    bool values = true;                 // print values in cells
    bool symmetric = false;             // colour range centred at 0 (diverging map)
    attn::Colormap colormap = attn::Colormap::Viridis;
    int highlightRow = -1, highlightCol = -1;
    const attn::MaskMatrix* mask = nullptr;
    std::vector<std::pair<int, int>> colBlocks;  // [begin, end) column ranges tinted with headColor(i)
    std::vector<std::string> rowLabels, colLabels;
    std::optional<attn::DisplayRange> range;     // default: attn::displayRange of the matrix
};
struct GridHit {
    int row = -1, col = -1;
    bool clicked = false;
};
// Grid options for one kind of data: the main view's colormap for it, centred at 0 when that map is diverging.
GridOptions gridOptions(const LessonInputs& in, LessonMap kind);
// The width drawMatrixGrid takes for `m` (cells, row labels, and the title when wider), for sameLineIfFits.
float gridWidth(const char* title, const attn::Matrix& m, const GridOptions& o);
GridHit drawMatrixGrid(const char* id, const char* title, const attn::Matrix& m, const GridOptions& o);

// Horizontal bars for values in [0, 1] (weights), with labels and the value printed; masked bars grey.
void drawWeightBars(const char* id, const attn::Vector& w, const std::vector<std::string>& labels,
                    const std::vector<std::uint8_t>* masked, float width, int highlight = -1);

// A histogram (counts per bin) with an optional expected-count curve drawn over it.
void drawHistogram(const char* id, const attn::Histogram& h, const std::vector<float>* curve, ImU32 color,
                   ImVec2 size, float maxCount);

// A vector as a row of coloured cells (a 1×n grid).
void drawVectorCells(const char* id, const char* title, const attn::Vector& v, const GridOptions& o);

} // namespace app
