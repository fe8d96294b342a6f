// The model's options of `attnscope render` (docs/model.md); `attnscope model` registers through cli.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace CLI { class App; }

namespace app {

struct ModelRenderCli {
    std::string text, pair, modelDir, ablate;
    int layer = 0;
    bool chat = false;  // decoders: the text as one user turn of the chat template
    int topK = 10;      // decoders, --panel next: how many predictions
    // Decoders, --panel importance|dla|types|patching (docs/interp.md): the target token, the score of types, and
    // patching's clean text and its two tokens A,B.
    std::string target, score, patchFrom, targets;
    std::string bundle;      // --bundle FILE: an attention bundle's maps instead of a model (docs/bundle.md)
    int query = -1, key = -1;  // --panel qk: the cell (render's --query and --key)
};

// Adds --model-text, --pair, --model-dir, --ablate and --layer to the render subcommand.
std::shared_ptr<ModelRenderCli> addModelRenderOptions(CLI::App& render);

// True when --model-text was given (render then draws the model instead of a session).
inline bool modelRenderRequested(const ModelRenderCli& o) { return !o.text.empty(); }

// Draws the model figure: panel "weights" (one head; default), "model-view" or "lines". Returns the exit code.
int renderModelFromCli(const ModelRenderCli& o, const std::string& panel, const std::string& head,
                       const std::string& out, double scale, const std::optional<std::string>& title);

// `render --bundle FILE`: panel weights (one head; default), model-view or lines. Returns the exit code.
int renderBundleFromCli(const std::string& path, const std::string& panel, const std::string& layer,
                        const std::string& head, const std::string& out, double scale,
                        const std::optional<std::string>& title);
// `export --bundle FILE [--layer L] [--head H]`: the maps as arrays weights_L<l>_H<h> (one map: a plain .npy).
// `format` is npy, npz, safetensors or csv; `toDir` when -o is a folder. Returns the exit code.
int exportBundleFromCli(const std::string& path, const std::string& layer, const std::string& head,
                        const std::string& out, const std::string& format, bool toDir, double memoryBudgetMiB);

} // namespace app
