// The window's model mode (docs/model.md): a trained transformer, its last run, the sentence fields, the
// ablation set, the embedding/cosine panel, and the link between a layer opened in the chain view and the
// model (edits of that layer's weights flow back and recompute the layers from it on).
//
// The forwards run on a worker thread (ModelWorker, model_state.cpp), as the chain view's compute does
// (compute_worker.h): the frame loop sends the whole wanted state as a request (texts, ablation set, every
// layer's attention weights, a pinned layer input) and never waits; the latest request wins; the views show
// the last complete run, swapped in whole. The worker owns the model's layers: the UI keeps its own copy of
// the attention weights (copy-on-write snapshots, shared with the requests) and never reads the worker's.
//
// Opening a model from the window (File → Open model…) reads its files on a thread of its own (ModelLoad,
// model_state.cpp; ~90 MB of safetensors): the frame loop polls it and installs the model when it is read,
// the previous model staying usable until then. Start-up and the tests open synchronously (openModel).
//
// Two families share all of this: an encoder (BERT: attn::Model, two sentences, the embedding and cosine) and a
// decoder language model (attn::DecoderModel from a .gguf file or a Hugging Face directory: one text, the
// next-token predictions, Generate). The same worker runs either; the views read a run through RunView.
#pragma once

#include <attnscope/decoder.h>
#include <attnscope/interp.h>
#include <attnscope/model.h>
#include <attnscope/qk_attribution.h>
#include <attnscope/weight_formats.h>

#include "state/bundle_state.h"
#include "view/model_grid.h"
#include "view/run_view.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace app {

struct AppState;
class ModelWorker;
class ModelLoad;

// Why the model says it (issue 20, decoders; docs/interp.md): what the grid's area shows instead of the attention
// maps. The worker computes each after the run it explains; the scans (importance, patching) row by row.
enum class WhyView { Attention, Importance, Dla, LogitLens, HeadTypes, Patching };
enum class HeadTypeScore { Previous, Duplicate, Induction, Sink };
const char* toString(WhyView v);
const char* toString(HeadTypeScore s);
const char* whyFileName(WhyView v);  // the view's default file name, without extension ("importance")

// "Why here?" (issue 35, docs/interp.md): the cell of a head's map whose score is decomposed into what wrote the
// query and the key (attn::qkAttribution), and optionally the head's pattern with one component removed from the
// keys' or the queries' side (attn::patchPattern). Sent with every request while the panel is open, so that it
// follows ablations, edits, typing and appends.
struct QkRequest {
    int layer = -1, head = 0, query = 0, key = 0;  // layer −1: none (the panel is closed)
    std::string patchComponent;                    // "" = no patch
    attn::QkSide patchSide = attn::QkSide::Key;
    bool row = false;                              // also the query's whole row (attn::qkAttributionRow): why this key
                                                   // and not another
    bool operator==(const QkRequest&) const = default;
};

// What the worker computed for a QkRequest, copied by the frame loop when `generation` changes.
struct QkResults {
    std::uint64_t generation = 0;    // +1 for every change
    std::uint64_t request = 0;       // the model request whose run they explain (0 = none)
    QkRequest of;                    // the cell (and patch) they are of
    bool running = false;            // being computed on the worker
    int step = 0, steps = 0;         // progress: steps done of steps (the cell, then the patch)
    double ms = 0;                   // how long it took (so far)
    bool cancelled = false;          // stopped by Cancel before it finished
    std::optional<attn::QkCell> cell;
    std::vector<attn::QkPair> pairs; // the strongest entries of cell->matrix (kQkPairs)
    std::optional<attn::PatternPatch> patch;
    std::string error;               // why the cell is not decomposed (a family the decomposition does not cover, a lazy run, …)
    std::string patchError;
    std::optional<attn::QkRow> row;  // the query's row (QkRequest::row)
    std::string rowError;
};

// The pairs the worker lists (the panel shows the first few; 50 as the command line's --qk-top default).
inline constexpr int kQkPairs = 50;

// Sent with every request: what the worker computes after the run.
struct InterpRequest {
    bool cheap = false;              // the target, direct logit attribution and head types
    bool lens = false;               // the logit lens (L·n rows through the unembedding: only while it is shown)
    bool importance = false;         // the head-importance scan (progressive)
    bool patching = false;           // the activation-patching scan (progressive)
    int target = -1;                 // token id (-1 = the top prediction at the last position)
    std::string cleanText;           // patching: the clean prompt (the text is the corrupted one)
    int targetA = -1, targetB = -1;  // patching: the metric logit(A) − logit(B)
    int lensPositions = 48;          // the logit lens of the last this many positions (0 = all)
    QkRequest qk;                    // "Why here?": the cell decomposed (layer −1 = none)
    bool operator==(const InterpRequest&) const = default;
};

// What the worker computed from a run (swapped in with it).
struct InterpResults {
    bool valid = false;              // computed for this run (InterpRequest::cheap was set)
    attn::InterpTarget target;
    attn::DirectLogitAttribution dla;
    attn::LogitLens lens;            // empty unless the request asked for it (InterpRequest::lens)
    attn::HeadTypes types;
    std::string error;               // why they could not be computed ("" = none)
};

// One scan's map, filled row by row on the worker (the layers nearest the output first).
struct ScanMap {
    attn::Matrix values;             // L×H; NaN where not computed yet
    attn::MaskMatrix pending;        // 1 where `values` is not computed yet (the view hatches those rows)
    int rows = 0;                    // rows done
    bool done = false;
    double ms = 0;                   // how long it took (so far)
    long scans = 0;                  // scans started since the model opened (tests: kept maps)
};

// The scans' progress, copied by the frame loop when `generation` changes.
struct ScanResults {
    std::uint64_t request = 0;       // the request whose run the maps explain (0 = none)
    std::uint64_t generation = 0;    // +1 for every row and state change
    ScanMap importance;              // Δ log p(target) with each head ablated
    int importanceTarget = -1;       // the target the importance map is about
    ScanMap patching;                // the fraction of the clean − corrupted difference each head restores
    attn::PatchingMetric metric;
    std::string error;               // why a scan failed ("" = none)
};

struct WhyState {
    WhyView view = WhyView::Attention;
    HeadTypeScore typeScore = HeadTypeScore::Induction;
    std::string targetText;          // the typed target ("" = the top prediction)
    int target = -1;                 // its id (-1 = the top prediction)
    std::string targetError;
    std::string cleanText = "When Mary and John went to the store, Mary gave a drink to";
    std::string targetAText = " Mary", targetBText = " John";
    std::string patchError;          // a target that is not one token, unequal lengths
    InterpResults results;           // of the shown run
    ScanResults scan;                // the UI's copy of the worker's
    // Save: the shown map as a figure (PNG / SVG / PDF from the name) or its numbers (.npy beside it).
    std::string exportPath;          // "" = the view's own default name (whyFileName + ".pdf")
    std::string exportStatus;        // where the last save went, or why it failed
    int overwriteKind = -1;          // ≥ 0: the file exists, "Overwrite?" is asked for button i (0 figure, 1 .npy)
};

// The "Why here?" panel (panels/qk_panel.cpp).
struct QkState {
    bool open = false;               // the panel is shown (and the cell is sent with every request)
    QkRequest cell;                  // what it explains
    QkResults results;               // the UI's copy of the worker's
    std::vector<int> expanded;       // layers shown component by component in the matrix (the rest summed)
    attn::QkGroups groups;           // the matrix grouped (core's groupQkByLayer), redone when these change:
    std::uint64_t groupsGeneration = ~std::uint64_t(0);
    std::vector<int> groupsExpanded;
    // The right-click menu of a map's cell: the cell it offers, opened by the panel's draw on this frame.
    bool menuPending = false;
    QkRequest menuCell;
    bool menuLines = false;          // the menu also offers "Show its lines" (the grid's thumbnails)
    // Save .npy: the C×C matrix with its component names.
    std::string exportPath = "qk_matrix.npy";
    int rowOther = -1;               // the row mode's key compared with the cell's (−1: the runner-up)
    std::string exportStatus;
    bool overwriteAsked = false;
};

// Everything a model run depends on. A request is complete (not a delta), so a burst of requests can be
// coalesced into its last one.
struct ModelRequest {
    std::string textA, textB;                  // B empty = one sentence
    std::vector<std::pair<int, int>> ablated;  // (layer, head)
    // Per layer: W^Q, W^K, W^V, W^O and biases as edited (X unused). Immutable once shared: an edit makes
    // a new snapshot, so comparing pointers tells which layers changed.
    std::vector<std::shared_ptr<const attn::AttentionInput>> weights;
    std::shared_ptr<const attn::PinnedInput> pin;  // an edited layer input (chain view X edits); null = none
    // Decoders: per layer null = the model's own W^O (the chain view of a decoder layer edits only Q, K, V and
    // W^O: RoPE sits between W^Q/W^K and the scores), else the edited W^O and b^O in Wo/bo.
    // A layer's Q, K, V as edited in the chain view (after RoPE), used by every recompute; null = none.
    std::shared_ptr<const attn::DecoderRun::PinnedQKV> qkvPin;
    bool chat = false;                         // decoders: the text wrapped as one user turn (chat template)
    attn::Backend backend = attn::Backend::Cpu;  // decoders: where their layers run (the window's Backend menu)
    std::vector<int> generated;                // decoders with chat: tokens Generate appended after the template
    InterpRequest interp;                      // decoders: the views that explain the run
    std::string why;                           // for the cosine panel ("ablated layer 2 head 5")
    std::uint64_t id = 0;                      // increases with every request
};

// Where the model is found when no --model-dir is given: $ATTNSCOPE_MODEL_DIR when set, else
// <exe dir>/../models/all-MiniLM-L6-v2 (build/bin/attnscope → build/models/, where scripts/setup.sh puts it).
std::string defaultModelDirectory();

// `attnscope --model-text TEXT [--pair TEXT2] [--model-dir DIR]`: the model mode at start.
struct ModelStartup {
    std::string text, pair, dir;
    int openLayer = -1;  // --model-layer L: open that layer in the chain view at start (-1 = the model view)
    // Decoders: --why VIEW shows that view over the grid (importance, dla, lens, types, patching); --patch-from
    // TEXT and --targets A,B set up patching. waitForViews: the first frame shows them finished (screenshots).
    std::string why, patchFrom, targets;
    bool waitForViews = false;
    // The window (not a screenshot): startModelMode returns once the model is open and its first run sent, so
    // that the window appears at once with the run's progress (layer k of L, tokens/s) and Cancel; --why,
    // --patch-from and --model-layer are applied when that run is shown. Off (screenshots, tests, tools): it
    // waits for the run, so that the first frame shows it.
    bool async = false;
};
// --why's names: "attention", "importance", "dla", "lens", "types", "patching".
std::optional<WhyView> whyViewFromName(const std::string& name);

// Past this many tokens a decoder's text runs lazily (the dense maps of 1024 tokens are already ~2.5 GB for SmolLM2).
inline constexpr int kLazyTokens = 1024;

// Typing in a sentence field reruns the model this long after the last keystroke: a pause, not every key
// (250 ms: shorter than a reader notices, longer than the gap between keys of a typing burst).
inline constexpr double kTextDebounceSeconds = 0.25;

struct ModelState {
    bool active = false;            // a model is loaded
    bool showView = true;           // the model window is shown over the chain view (View → Model view)
    bool showOpenDialog = false;    // File → Open model…
    std::string dirField;           // the open dialog's path field
    std::string openError;          // why the last open request failed, shown in the dialog; "" = none
    // File → Open text… (decoders): a text file run as the model's text, as --model-text-file.
    bool showTextDialog = false;
    std::string textPathField;      // the dialog's path field
    std::string textOpenError;      // why the last file was refused (shown in the dialog); "" = none
    std::string textPath;           // the file the text was last read from ("" = typed or from the command line)
    std::string dir;
    // Where a decoder's layers run (the window's Backend menu, copied in every frame): Auto and Cuda use the GPU
    // when there is one (core's decoder forward on the device), Auto falls back to the CPU.
    attn::Backend backend = attn::Backend::Cpu;
    // The loaded model. The UI reads only its name, config and tokenizer (fixed after loading): the layers'
    // contents belong to the worker, which writes them (the edited weights, each layer's X) while it runs.
    std::shared_ptr<const attn::Model> model;
    // Or a decoder language model (then `model` is null). The UI reads its name, config, tokenizer, final norm
    // and unembedding (never written after loading); its layers belong to the worker.
    std::shared_ptr<const attn::DecoderModel> decoder;
    // The decoder's weight matrices by storage type, as loaded (the sidebar's summary; empty for an encoder).
    std::vector<attn::WeightFormat> weightFormats;
    std::optional<attn::DecoderRun> drun;   // the decoder's last complete run (what every view shows)
    // Next-token predictions (decoders): of the token at `predictPosition` (-1 = the last), top `topK` at
    // `temperature`; recomputed when the run or these change. `before*`: the logits at that position in the run
    // shown before the last ablation or edit of the same text (each prediction shows its change in log p).
    int predictPosition = -1;
    int topK = 10;
    float temperature = 1.0f;
    bool sample = false;                    // Generate samples at the temperature instead of taking the top token
    int generateLeft = 0;                   // tokens Generate still has to append (one per finished run)
    std::uint64_t sampleCount = 0;          // the samples drawn so far (the seed of the next one)
    std::vector<attn::TokenProbability> predictions;
    attn::Vector shownLogits, beforeLogits; // at predictPosition, now and before the last change
    bool hasBefore = false;
    struct PredictionKey {                  // the run (shown.id) and settings the predictions were made for
        std::uint64_t run = 0;
        int position = -2, k = 0;
        float temperature = 0;
        bool operator==(const PredictionKey&) const = default;
    } predictionsFor;
    attn::Matrix chainQ, chainK, chainV;    // a decoder layer's Q, K, V as last sent to the chain view
    attn::Matrix chainWo;                   // and its W^O: the last edit sent, or the model's own dequantized
    // The last complete run (what every view shows): the pair, and A and B alone (for the cosine; only with
    // B given). Swapped in whole when a run finishes.
    std::optional<attn::ModelRun> run;
    std::optional<attn::ModelRun> runA, runB;
    ModelRequest shown;             // the request `run` is the result of
    ModelRequest wanted;            // the latest request sent (its weights are the UI's copy of the model's)
    std::shared_ptr<ModelWorker> worker;
    double lastRunMs = 0;           // wall time of the last finished run
    std::string textA, textB;       // the sentence fields (B empty = single sentence)
    bool chat = false;              // decoders: wrap the text as one user turn (the model's chat template)
    std::vector<int> generated;     // with chat: the tokens Generate appended (cleared when the text changes)
    std::string error;              // the last failure (load, tokenise), shown in the panel; "" = none
    std::vector<std::uint64_t> layerGeneration;  // +1 when layer l's result changes (thumbnail textures)
    attn::Vector embedding;         // of the current run (the pair when B is given)
    float cosine = 0, cosineBefore = 0;  // cos(emb(A), emb(B)) now and before the last edit or ablation
    bool hasCosine = false, hasCosineBefore = false;
    std::string lastChange;         // what the last edit/ablation was, for the cosine panel
    int linesLayer = 0, linesHead = 0;  // the head shown in the lines view
    int hoverToken = -1;            // hovered token in the lines view
    std::string exportPath = "model_view.pdf";  // Save grid / head / lines: the file (format from its name)
    std::string exportStatus;       // where the last save went, or why it failed
    int overwriteKind = -1;         // ≥ 0: the file exists, "Overwrite?" is asked for save button i
    double textEditedAt = -1;       // when a sentence field was last typed in and not yet run (-1 = none)
    long textReruns = 0;            // reruns the sentence fields asked for (tests: debouncing)
    float linesRow = 0;             // the lines view's row height in the last frame (tests)
    int openLayer = -1;             // the layer opened in the chain view (-1 = none)
    std::uint64_t syncedRevision = 0;   // the document revision last copied back into the model
    attn::Matrix chainX;            // the opened layer's X as last sent (an X edit differs from it)
    // The grid's thumbnails of heads whose n exceeds the thumbnail's pixels: pooled weights (attn::poolMax), and
    // of a decoder's heads the contiguous copies of their kept maps (rows with a stride), index layer·H + head,
    // redone when the run, the layer's result or the thumbnail size changes.
    struct PooledThumb {
        const float* source = nullptr;  // the weights they were pooled from (a new run has new storage)
        std::uint64_t generation = 0;
        int side = 0;
        long n = 0;
        attn::Matrix values;
    };
    std::vector<PooledThumb> thumbs;
    // A dense decoder run keeps no masks (the model's rule, the same for every head): the grid's hatching reads
    // them from here, made through the run's maps (attn::decoderMaps) for the run's length.
    attn::MaskMatrix decoderMask;
    ModelGridPlan gridPlan;         // the grid's layout in the last frame (tests)
    WhyState why;                   // decoders: importance, attribution, logit lens, head types, patching
    QkState qk;                     // decoders: "Why here?" of one cell
    // The command line's views (--why, --model-layer) still to apply once the first run is shown (async start).
    std::optional<ModelStartup> startupLeft;
    // A decoder's long text (more than kLazyTokens tokens) runs lazily (issue 18: no n×n map is kept); its grid and
    // heads are then shown from the run's maps as a bundle's are (thumbnails made on a thread, a click opens the
    // head's zoomable map), kept across reruns; its maps are the shown run's (empty for a dense run).
    BundleState longView;

    bool scanning() const;          // a scan (importance, patching) is under way on the worker

    bool isDecoder() const { return decoder != nullptr; }
    bool hasRun() const { return isDecoder() ? drun.has_value() : run.has_value(); }
    RunView shownRun() const  // hasRun() first
    {
        if (isDecoder() && drun->lazy && longView.active())
            return RunView(*longView.bundle->maps, drun->encoding.tokens, drun->encoding.tokens);
        return isDecoder() ? RunView(*drun, attn::decoderMaps(*decoder, *drun)) : RunView(*run);
    }
    bool longRun() const { return isDecoder() && drun && drun->lazy; }  // the shown run is a lazy one
    std::string modelName() const;
    int layers() const;             // L of either family (0 = none)
    int heads() const;              // H (query heads)
    int kvHeads() const;            // H_kv (= H for an encoder)

    bool computing() const;         // a run is under way or waiting
    double computingMs() const;     // how long the running one has taken so far
    std::pair<int, int> runProgress() const;  // a decoder's forward under way: layers done of those to do
    void cancelRun();               // stops a decoder's forward under way after its current layer
    int runTokens() const;          // the tokens of the decoder's forward under way (0 = none, or not known yet)
    long runsStarted() const;       // runs the worker started since the model was opened (tests: coalescing)

    // The open request in flight (requestOpenModel): its files are read on its own thread; null = none.
    std::shared_ptr<ModelLoad> load;
    // Older requests a newer one replaced while they were still reading: their results are discarded; each is
    // dropped (its thread joined) once it has finished, so that replacing a request never waits.
    std::vector<std::shared_ptr<ModelLoad>> retiredLoads;
    bool loading() const;           // an open request is in flight (until pollOpenModel installs or rejects it)
    std::string loadingDir() const; // its directory ("" = none)
    double loadingMs() const;       // how long it has been reading
};

// Where File → Open model… starts: the installed SmolLM2 GGUF when it is there (build/models/SmolLM2-…), else
// the encoder's directory.
std::string defaultDecoderPath();

// Loads the model at `dir` (a BERT directory, a decoder's directory or a .gguf file) (replacing the current one only on success; the load itself is synchronous, a
// file load) and sends the first run on the fields' text to the worker. Replaces an open request in flight.
// On failure: the message is posted (log, toast, stderr) and returned; the current model stays.
attn::Status openModel(AppState& state, const std::string& dir);
// Starts loading the model at `dir` on a background thread and returns at once (File → Open model…). The
// latest request wins: one still in flight is discarded. The current model stays usable until the new one is
// read; pollOpenModel installs it as openModel does.
void requestOpenModel(AppState& state, const std::string& dir);
// Discards the open request in flight, if any (the dialog closed while it read).
void cancelOpenModel(AppState& state);
// Once per frame (syncModelEdits calls it; never waits): when the request in flight has finished, installs its
// model (and closes the open dialog) or, on failure, posts the same error as openModel, keeps the current
// model and leaves the message in openError for the dialog. Returns the request's outcome when it finished
// in this call, else nothing.
std::optional<attn::Status> pollOpenModel(AppState& state);
// File → Open text…: reads `path` (readTextFile, state/text_file.h: UTF-8, at most kMaxTextFileBytes) and
// runs it as the decoder's text (truncated past the model's context, with a warning). On failure the message
// is posted (log, toast, stderr), left in textOpenError and returned; the text and its run stay.
attn::Status openModelText(AppState& state, const std::string& path);
// Re-tokenises and reruns everything (after a text change); `why` goes to the cosine panel. Asynchronous.
void rerunModel(AppState& state, const std::string& why);
// Toggles head (l, h) in the ablation set; the worker recomputes from layer l. Asynchronous.
void toggleAblation(AppState& state, int layer, int head);
// Opens layer l (all its heads) in the chain view as an editable session: that layer's X (from the shown run)
// and weights, showing head `head` (0-based, as the grid numbers it).
void openLayerInChain(AppState& state, int layer, int head = 0);
// Once per frame: polls an open request (pollOpenModel), sends edits of the opened layer's session to the
// worker (weights: recompute from layer l; X: layer l's input pinned to the edited X, recompute from l), and
// takes a finished run (never waits).
void syncModelEdits(AppState& state);
// Decoders: appends `count` tokens to the text, one per finished run: the top prediction of the last position,
// or a sample at the temperature (ModelState::sample). Any edit of the text stops it.
void generateTokens(AppState& state, int count);
// Decoders: recomputes ModelState::predictions when the run or the prediction settings changed (every frame).
void updatePredictions(ModelState& m);
// Decoders: shows `view` in the grid's place and asks the worker for what it needs (the cheap views after every
// run, a scan once). Asynchronous.
void setWhyView(AppState& state, WhyView view);
// The target explained by importance and attribution: a token typed as text (" Paris": one token of the
// vocabulary, else WhyState::targetError says why) or, empty, the top prediction. Asynchronous.
void setWhyTarget(AppState& state, const std::string& token);
void setWhyTargetId(AppState& state, int id);  // a clicked prediction
// Patching: the clean prompt and the two targets (logit(A) − logit(B)); errors in WhyState::patchError.
void setPatching(AppState& state, const std::string& clean, const std::string& a, const std::string& b);
// "Why here?": opens the panel on cell (query, key) of head (layer, head) and asks the worker to decompose it
// (any patch is dropped). Asynchronous; errors (a family the decomposition does not cover, a lazy run, a masked
// cell) come back in QkResults::error.
void openQkCell(AppState& state, int layer, int head, int query, int key);
// Closes the panel (the worker stops computing it).
void closeQk(AppState& state);
// The head's pattern with `component` removed from the keys' or queries' side, beside the original; an empty
// component drops the patch.
void setQkPatch(AppState& state, const std::string& component, attn::QkSide side);
// The row mode on or off: the worker also decomposes the query's whole row.
void setQkRow(AppState& state, bool on);
// Stops the decomposition under way (its results say so); retryQk computes it again.
void cancelQk(AppState& state);
void retryQk(AppState& state);
// The panel's progress (a decomposition under way on the worker, or waiting for the run before it).
bool qkComputing(const ModelState& m);
// Fills the text with the induction probe (a repeated random-token sequence; `seed` picks it).
void fillInductionProbe(AppState& state, std::uint64_t seed);
// Blocks until the scans and the "Why here?" decomposition asked for have finished or stopped, and copies their
// results (tests).
void finishScans(AppState& state);
// Blocks until every sent request has run and its result is shown (start-up, tests, headless tools).
void finishModelRuns(AppState& state);
// Starts the model mode from the command line (errors go to the message log; the window still opens) and
// waits for the first run, so that the first frame shows it; with startup.async it returns once the run is sent
// (syncModelEdits applies the rest of the start-up when the run is shown).
void startModelMode(AppState& state, const ModelStartup& startup);

} // namespace app
