// An attention bundle in the window (docs/bundle.md): attention someone else's model computed, brought in as a
// safetensors file and shown with the model mode's views: the layers × heads grid, the lines view of a head,
// and one head's map, zoomable to single cells at thousands of tokens. View only: nothing to edit or ablate.
//
// Every map is read through the tile seam (attnscope/attention_maps.h) from the memory-mapped file, so a bundle
// larger than memory opens. The grid's thumbnails (each a max-pooled overview of a whole map, which reads the
// whole map) are made on a thread of their own (BundleThumbs), one after another, the rows the grid shows first
// (nextThumbnail), and appear as they are done; the head view fetches only what its viewport shows (view/tiled_map.h).
#pragma once

#include "io/bundle_open.h"
#include "view/model_grid.h"
#include "view/tiled_map.h"

#include <attnscope/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace app {

struct AppState;
class BundleThumbs;

// Thumbnails are pooled to at most this many cells a side (a 4096-token head: 32 tokens a cell).
inline constexpr int kBundleThumbCells = 128;

struct BundleState {
    std::shared_ptr<const OpenedBundle> bundle;  // null = none open
    std::string keyPrefix = "bundle";  // its widgets' names in the test hooks ("long" for a decoder's long run)
    bool showView = true;          // the bundle's window is shown over the chain view
    bool waitForThumbs = false;    // each frame waits for the thumbnails (screenshots: the grid complete)
    std::string error;             // why the last open failed ("" = none)

    // The grid: thumbnails[l·H + h] (empty until made), copied from the worker when `thumbsGeneration` moves.
    std::shared_ptr<BundleThumbs> thumbs;
    std::vector<attn::Matrix> thumbnails;
    std::vector<std::string> thumbErrors;   // a map that could not be read (NaN in the file…), per thumbnail
    std::vector<attn::Matrix> thumbShown;   // the thumbnails pooled again to the grid's cells (plan.shown)
    int thumbShownSide = 0;                 // the side they were pooled to
    std::vector<std::uint8_t> thumbCopied;  // 1 where `thumbnails` holds the worker's finished thumbnail
    std::uint64_t thumbsGeneration = 0;
    int thumbsDone = 0;
    ModelGridPlan gridPlan;        // the grid's layout in the last frame (tests)

    // The head shown in the head view and the lines view.
    int layer = 0, head = 0;
    bool headOpen = false;         // the head view replaces the grid (breadcrumb: bundle › layer › head)
    MapViewport viewport;          // its zoom and pan
    MapFrame shownFrame;           // what `tile` holds (fetched when the frame to draw differs)
    int tileLayer = -1, tileHead = -1;
    attn::Matrix tile;             // the fetched values (cells, or a pooled overview)
    std::uint64_t tileGeneration = 0;
    double tileMs = 0;             // how long the last fetch took
    std::string tileError;
    bool viewRange = false;        // the colours span 0…the view's largest weight (else 0…1)

    int linesLayer = -1, linesHead = -1;  // the head `linesMap` holds (the lines view of short bundles)
    attn::Matrix linesMap;
    std::string linesError;
    int hoverToken = -1;           // the lines view's hovered token
    float linesRow = 0;            // its row height in the last frame (tests)
    std::string exportPath = "bundle_view.pdf";
    std::string exportStatus;

    bool active() const { return bundle != nullptr; }
};

// Opens the bundle at `path` in the window (replacing an open one only on success; validated first). On failure
// the message is posted and returned.
attn::Status openBundleInWindow(AppState& state, const std::string& path);
// Shows an opened bundle (openBundleInWindow's second half; tests give maps of their own): the grid from the start,
// its thumbnails started on the worker.
void showBundle(AppState& state, OpenedBundle bundle);
// Shows other maps in the same views, keeping the open head, its zoom and the selection (a decoder's long run
// after an ablation or an appended token): a new thumbnail worker, the head view's tile fetched again.
void replaceMaps(BundleState& b, OpenedBundle bundle);
// Once a frame: copies the thumbnails the worker finished since the last call.
void pollBundleThumbs(BundleState& b);
// True while the worker is still making thumbnails.
bool bundleThumbsBusy(const BundleState& b);
// Which thumbnail the worker makes next: the first not done (done[l·H + h] == 0) in grid order among the layers
// firstLayer…lastLayer the grid shows, else the first not done at all; −1 when every one is done.
int nextThumbnail(const std::vector<std::uint8_t>& done, int heads, int firstLayer, int lastLayer);
// Tells the worker which layers the grid shows (the rows scrolled into view), so that it makes those first.
void preferThumbLayers(BundleState& b, int firstLayer, int lastLayer);
// Closes the bundle (the worker is stopped).
void closeBundle(BundleState& b);
// Brings `tile` up to date for the head view's frame (fetching from the maps when the frame, layer or head
// changed). Returns the frame drawn.
const MapFrame& updateBundleTile(BundleState& b, double width, double height);

} // namespace app
