// The window's model mode (docs/model.md): a trained transformer, its last run, the sentence fields, the
// ablation set, the embedding/cosine panel, and the link between a layer opened in the chain view and the
// model (edits of that layer's weights flow back and recompute the layers from it on).
#pragma once

#include <attnscope/model.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace app {

struct AppState;

// Where the model is found when no --model-dir is given: $ATTNSCOPE_MODEL_DIR when set, else
// <exe dir>/../models/all-MiniLM-L6-v2 (build/bin/attnscope → build/models/, where scripts/setup.sh puts it).
std::string defaultModelDirectory();

// `attnscope --model-text TEXT [--pair TEXT2] [--model-dir DIR]`: the model mode at start.
struct ModelStartup {
    std::string text, pair, dir;
    int openLayer = -1;  // --model-layer L: open that layer in the chain view at start (-1 = the model view)
};

struct ModelState {
    bool active = false;            // a model is loaded
    bool showView = true;           // the model window is shown over the chain view (View → Model view)
    bool showOpenDialog = false;    // File → Open model…
    std::string dirField;           // the open dialog's path field
    std::string dir;
    std::optional<attn::Model> model;
    std::optional<attn::ModelRun> run;
    std::optional<attn::ModelRun> runA, runB;  // A and B alone (for the cosine; only with B given)
    std::string textA, textB;       // the sentence fields (B empty = single sentence)
    std::string error;              // the last failure (load, tokenise), shown in the panel; "" = none
    std::vector<std::uint64_t> layerGeneration;  // +1 when layer l's result changes (thumbnail textures)
    attn::Vector embedding;         // of the current run (the pair when B is given)
    float cosine = 0, cosineBefore = 0;  // cos(emb(A), emb(B)) now and before the last edit or ablation
    bool hasCosine = false, hasCosineBefore = false;
    std::string lastChange;         // what the last edit/ablation was, for the cosine panel
    int linesLayer = 0, linesHead = 0;  // the head shown in the lines view
    int hoverToken = -1;            // hovered token in the lines view
    int openLayer = -1;             // the layer opened in the chain view (-1 = none)
    std::uint64_t syncedRevision = 0;   // the document revision last copied back into the model
};

// Loads the model at `dir` (replacing the current one only on success) and runs it on the fields' text.
attn::Status openModel(AppState& state, const std::string& dir);
// Re-tokenises and reruns everything (after a text change); `why` goes to the cosine panel.
void rerunModel(AppState& state, const std::string& why);
// Toggles head (l, h) in the ablation set and recomputes from layer l.
void toggleAblation(AppState& state, int layer, int head);
// Opens layer l (all its heads) in the chain view as an editable session: that layer's X and weights.
void openLayerInChain(AppState& state, int layer);
// Once per frame: when the opened layer's session was edited, copies its weights back into the model and
// recomputes layers l…L−1 (X edits stay in the chain view: X is the previous layer's output).
void syncModelEdits(AppState& state);
// Starts the model mode from the command line (errors go to the message log; the window still opens).
void startModelMode(AppState& state, const ModelStartup& startup);

} // namespace app
