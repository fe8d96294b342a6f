// `attnscope model` for decoder language models (GGUF files and Hugging Face gpt2 / llama / mistral / qwen2
// directories), beside the BERT encoder of cli_model.cpp: predictions, surprise, generation (docs/model.md).
#pragma once

#include <attnscope/decoder.h>
#include <attnscope/status.h>
#include <attnscope/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace app {

// The options of `attnscope model`, shared by the encoder and the decoder paths.
struct ModelOptionsCli {
    std::string text, pair, ablate, modelDir, layers, out;
    std::string backend = "cpu";
    bool bench = false, textGiven = false;
    int repeats = 20;
    // Decoders
    bool chat = false, logits = false;
    int topK = 10, generate = 0;
    float temperature = 1.0f;
    double maxOutputMb = 256;  // the JSON is refused above this estimate (use --layers)
    int benchTokens = 128;     // --bench --tokens N (decoders)
    std::string attention = "auto";  // --attention: a lazy run's attention core on a GPU (attn::DeviceAttention)
    bool jsonFlag = false;     // --json: the bench always prints JSON; accepted for the documented command line
    // Decoders, interpretability (attnscope/interp.h): the target token (default the most probable next one), and
    // which views to add to the JSON. --patch-from is the clean text of activation patching (--text is corrupted).
    std::string target, patchFrom, targets;
    // Long texts (issue 18): the text from a file, and with -o OUT.npz the maps as arrays (lazy forward) —
    // weights_L<l> of every head (or --head H's only) for each layer of --layers.
    std::string textFile;
    int head = -1;
    bool headImportance = false, dla = false, logitLens = false, headTypes = false;
    // Why does this head attend here? (attnscope/qk_attribution.h, issue 35): a cell as LAYER:HEAD:QUERY:KEY, the
    // top pairs listed (--qk-top), a pattern patched with one component removed from one side (--qk-patch NAME,
    // --qk-side key|query), and the composition scores of every head pair.
    // A random-weight model of a known shape instead of --model (attnscope/synthetic_decoder.h): timing where the
    // model files are not (issue 34).
    std::string synthetic;
    std::string qkAttribution, qkPatch, qkSide = "key";
    int qkTop = 50;
    bool composition = false;
    // The first interpretability flag given ("--dla"), for messages; "" when none (the qk flags: qkFlag()).
    std::string interpFlag() const;
    // The first of --qk-attribution, --qk-patch and --composition given; "" when none.
    std::string qkFlag() const;
};

namespace fig { struct LayerHeadMap; }

// `render --model-text … --panel importance|dla|types|patching` of a decoder: the layers × heads map of `run` (the
// text's) as a figure's description, with --target, --patch-from (and --targets) of `opt` and, for types, `score`
// (previous, duplicate, induction: the default, sink). Returns the exit code; the message is printed.
int decoderInterpMap(const ModelOptionsCli& opt, attn::DecoderModel& model, const attn::DecoderRun& run,
                     const attn::DecoderOptions& mo, const std::string& panel, const std::string& score, fig::LayerHeadMap& map);

// The decoder at `path`, or the synthetic model --synthetic names.
attn::Expected<attn::DecoderModel> loadDecoderFor(const ModelOptionsCli& opt, const std::string& path);

// Runs a decoder model at `path` (a .gguf file or a decoder directory). Returns the exit code.
int runDecoderCommand(const ModelOptionsCli& opt, const std::string& path);

// `attnscope model --bench` for a decoder: forward, append and ablation timings beside their bounds (JSON).
int runDecoderBench(const ModelOptionsCli& opt, const std::string& path);

// False, with the message printed, when a JSON of `values` numbers would exceed `maxMb` megabytes.
bool jsonEstimateFits(std::uint64_t values, double maxMb, const std::string& what);

// JSON text helpers shared by both paths: shortest round-trip floats (null for NaN/Inf), a matrix as rows.
void appendFloat(std::string& out, float v);
void appendMatrix(std::string& out, const attn::MatrixCRef& m);
// "0,2,5" → layer indices checked against L (empty text = all).
attn::Expected<std::vector<int>> parseLayers(const std::string& text, int L);

} // namespace app
