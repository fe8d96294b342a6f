// `attnscope model --text TEXT [--pair TEXT2] [--ablate L:H,…] [--model-dir DIR] [--layers L,…] -o OUT.json`
// and `attnscope model --bench`: a trained transformer's attention (docs/model.md).
#include "cli/backend_option.h"
#include "cli/cli.h"
#include "cli/cli_model.h"
#include "cli/cli_decoder.h"
#include "figure/figure_render.h"
#include "figure/model_figure.h"
#include "state/model_state.h"

#include <attnscope/attention.h>
#include <attnscope/decoder.h>
#include <attnscope/model.h>
#include <attnscope/preset_io.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace app {

// Matrices are written straight as text (shortest round-trip floats): at 512 tokens the weights and scores
// of every head are 38 M numbers, too many to hold as JSON values in memory.
void appendFloat(std::string& out, float v)
{
    if (!std::isfinite(v)) {
        out += "null";  // JSON has no NaN/Inf; the forward never produces them from finite weights
        return;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void appendMatrix(std::string& out, const attn::MatrixCRef& m)
{
    out += '[';
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        out += i ? ",[" : "[";
        for (Eigen::Index j = 0; j < m.cols(); ++j) {
            if (j) out += ',';
            appendFloat(out, m(i, j));
        }
        out += ']';
    }
    out += ']';
}

// "0,2,5" → layer indices checked against L (empty text = all).
attn::Expected<std::vector<int>> parseLayers(const std::string& text, int L)
{
    std::vector<int> out;
    if (text.empty()) {
        for (int l = 0; l < L; ++l) out.push_back(l);
        return out;
    }
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
            return attn::invalidArgument("--layers: \"" + item + "\" is not a layer number (0.." + std::to_string(L - 1) + ")");
        const int l = std::stoi(item);
        if (l >= L) return attn::invalidArgument("--layers: layer " + item + " is outside 0.." + std::to_string(L - 1));
        out.push_back(l);
    }
    return out;
}

namespace {

// What a decoder comes in, for the messages that refuse an encoder.
std::string decoderFiles()
{
    return std::string("a .gguf file or a Hugging Face directory of ") + attn::supportedDecoderArchitectures();
}

using json = nlohmann::ordered_json;  // keys in the documented order

// Times the forward (every layer's weights kept) at 128 and 512 tokens, into a reused run (as the window
// reruns) and into a fresh one (allocating everything, as `attnscope model`), and an edit of the last layer:
// one weight of its W^Q changed, then layers L−1… recomputed.
int runBench(attn::Model& model, const ModelOptionsCli& opt)
{
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    auto median = [](std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const attn::ModelOptions mo{parseBackend(opt.backend), {}};
    const int L = model.config.layers;
    json rows = json::array();
    for (int n : {128, 512}) {
        if (n > model.config.maxPositions) continue;
        // "a" is one WordPiece token in an uncased BERT vocabulary: n−2 of them plus [CLS] and [SEP].
        std::string text;
        for (int i = 0; i < n - 2; ++i) text += "a ";
        auto run = attn::runModel(model, text, std::nullopt, mo);
        if (!run) {
            printError(run.status().message);
            return kExitFailure;
        }
        float& edited = model.layers[static_cast<std::size_t>(L - 1)].attention.Wq(0, 0);
        const float original = edited;
        std::vector<double> reused, fresh, last;
        for (int r = 0; r < opt.repeats; ++r) {
            auto t0 = Clock::now();
            attn::Status s = attn::runModel(model, text, std::nullopt, mo, *run);
            auto t1 = Clock::now();
            auto again = attn::runModel(model, text, std::nullopt, mo);
            auto t2 = Clock::now();
            edited = (r % 2 == 0) ? original + 0.01f : original;
            attn::Status e = attn::recomputeFrom(model, L - 1, *run, mo.backend);
            auto t3 = Clock::now();
            if (!s.ok() || !again || !e.ok()) {
                edited = original;
                printError(!s.ok() ? s.message : !again ? again.status().message : e.message);
                return kExitFailure;
            }
            reused.push_back(ms(t0, t1));
            fresh.push_back(ms(t1, t2));
            last.push_back(ms(t2, t3));
        }
        edited = original;
        const double minReused = *std::min_element(reused.begin(), reused.end());
        const double fm = median(reused), ff = median(fresh), lm = median(last);
        rows.push_back({{"tokens", static_cast<int>(run->encoding.ids.size())}, {"forward_ms_median", fm},
                        {"forward_ms_min", minReused}, {"forward_fresh_run_ms_median", ff},
                        {"last_layer_edit_ms_median", lm}, {"edit_over_forward", lm / fm},
                        {"one_over_layers", 1.0 / L}, {"repeats", opt.repeats}});
        std::fprintf(stderr,
                     "%4d tokens: forward %.2f ms (median of %d, min %.2f; into a fresh run %.2f), last-layer edit "
                     "%.2f ms (%.3f of a forward, 1/L = %.3f)\n",
                     n, fm, opt.repeats, minReused, ff, lm, lm / fm, 1.0 / L);
    }
    json doc = {{"model", model.name}, {"backend", attn::backendDescription(parseBackend(opt.backend))}, {"rows", rows}};
    std::cout << doc.dump(2) << "\n";
    return kExitOk;
}

int runModelCommand(const ModelOptionsCli& opt)
{
    const std::string dir = opt.modelDir.empty() ? defaultModelDirectory() : opt.modelDir;
    const attn::Backend backend = parseBackend(opt.backend);
    if (int rc = checkBackendUsable(backend); rc != kExitOk) return rc;
    // A .gguf file or a directory of a decoder family is a decoder; a BERT directory the encoder below.
    if (!opt.synthetic.empty()) {
        if (!opt.modelDir.empty())
            return printError("model: --synthetic and --model name two models; give one"), kExitBadInput;
        return opt.bench ? runDecoderBench(opt, "") : runDecoderCommand(opt, "");
    }
    if (attn::isDecoderModelPath(dir) || dir.ends_with(".gguf")) return opt.bench ? runDecoderBench(opt, dir) : runDecoderCommand(opt, dir);
    if (const std::string flag = !opt.interpFlag().empty() ? opt.interpFlag() : opt.qkFlag(); !flag.empty())
        return printError(flag + ": the interpretability views are a decoder's (" + decoderFiles() + "); " + dir +
                          " is an encoder"), kExitBadInput;
    if (opt.chat || opt.generate > 0 || opt.logits)
        return printError("model: --chat, --generate and --logits are for decoder models (" + decoderFiles() + "); " + dir +
                          " is an encoder"), kExitBadInput;
    auto model = attn::loadModel(dir);
    if (!model) {
        printError(model.status().message);
        return kExitBadInput;
    }
    if (opt.bench) return runBench(*model, opt);
    if (opt.out.empty()) {
        printError("model: -o OUT.json is required (or --bench)");
        return kExitBadInput;
    }
    if (!opt.textGiven) {
        printError("model: --text TEXT is required (or --bench)");
        return kExitBadInput;
    }
    attn::ModelOptions mo;
    mo.backend = backend;
    if (!opt.ablate.empty()) {
        auto ab = attn::parseAblation(opt.ablate, model->config.layers, model->config.heads);
        if (!ab) {
            printError(ab.status().message);
            return kExitBadInput;
        }
        mo.ablate = *ab;
    }
    auto layers = parseLayers(opt.layers, model->config.layers);
    if (!layers) {
        printError(layers.status().message);
        return kExitBadInput;
    }
    // The JSON is estimated before the forward (a 2000-word text wrote 456 MB): tokens from the tokenizer alone.
    if (auto enc = model->tokenizer.encode(opt.text, opt.pair.empty() ? std::nullopt : std::optional<std::string>(opt.pair),
                                           model->config.maxPositions)) {
        const std::uint64_t n = enc->ids.size();
        const std::uint64_t values = std::uint64_t(layers->size()) * std::uint64_t(model->config.heads) * n * n * 2 +
                                     n * std::uint64_t(model->config.hidden) * 2;
        if (!jsonEstimateFits(values, opt.maxOutputMb, "model")) return kExitBadInput;
    }
    auto run = attn::runModel(*model, opt.text, opt.pair.empty() ? std::nullopt : std::optional<std::string>(opt.pair), mo);
    if (!run) {
        printError(run.status().message);
        return run.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
    }
    for (const std::string& w : run->warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());

    json ablated = json::array();
    for (const auto& [l, h] : run->ablated) ablated.push_back({l, h});
    json head;  // the small fields, in the documented order
    head["attnscope"] = 1;
    head["model"] = {{"name", model->name}, {"layers", model->config.layers}, {"heads", model->config.heads},
                     {"d_model", model->config.hidden}};
    head["tokens"] = run->encoding.tokens;
    head["token_ids"] = run->encoding.ids;
    head["type_ids"] = run->encoding.typeIds;
    head["ablated"] = ablated;
    if (!run->warnings.empty()) head["warnings"] = run->warnings;
    std::string text = head.dump(-1, ' ', false, json::error_handler_t::replace);
    text.pop_back();  // the closing brace: the large arrays follow
    text += ",\"layers\":[";
    bool firstLayer = true;
    for (int l : *layers) {
        text += firstLayer ? "{\"layer\":" : ",{\"layer\":";
        firstLayer = false;
        text += std::to_string(l) + ",\"heads\":[";
        const auto& heads = run->attention[static_cast<std::size_t>(l)].heads;
        for (std::size_t h = 0; h < heads.size(); ++h) {
            text += h ? ",{\"weights\":" : "{\"weights\":";
            appendMatrix(text, heads[h].weights);
            text += ",\"scores\":";
            appendMatrix(text, heads[h].scores);
            text += '}';
        }
        text += "]}";
    }
    text += "],\"hidden\":";
    appendMatrix(text, run->hidden.back());
    text += ",\"embedding\":[";
    for (Eigen::Index i = 0; i < run->embedding.size(); ++i) {
        if (i) text += ',';
        appendFloat(text, run->embedding[i]);
    }
    text += "]}\n";
    if (opt.out == "-") {
        std::cout << text;
        return std::cout.good() ? kExitOk : kExitCannotWrite;
    }
    if (attn::Status w = attn::writeFileAtomic(opt.out, text); !w.ok()) {
        printError(w.message);
        return kExitCannotWrite;
    }
    return kExitOk;
}

// Loads the model and runs it for the command line; prints the error and sets rc on failure.
struct LoadedRun {
    attn::Model model;
    attn::ModelRun run;
};
std::optional<LoadedRun> loadAndRun(const std::string& modelDir, const std::string& text, const std::string& pair,
                                    const std::string& ablate, attn::Backend backend, int& rc)
{
    const std::string dir = modelDir.empty() ? defaultModelDirectory() : modelDir;
    auto model = attn::loadModel(dir);
    if (!model) {
        printError(model.status().message);
        rc = kExitBadInput;
        return std::nullopt;
    }
    attn::ModelOptions mo;
    mo.backend = backend;
    if (!ablate.empty()) {
        auto ab = attn::parseAblation(ablate, model->config.layers, model->config.heads);
        if (!ab) {
            printError(ab.status().message);
            rc = kExitBadInput;
            return std::nullopt;
        }
        mo.ablate = *ab;
    }
    auto run = attn::runModel(*model, text, pair.empty() ? std::nullopt : std::optional<std::string>(pair), mo);
    if (!run) {
        printError(run.status().message);
        rc = run.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
        return std::nullopt;
    }
    for (const std::string& w : run->warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    return LoadedRun{std::move(*model), std::move(*run)};
}

// `render --model X.gguf --model-text T`: a decoder's grid, head, lines view or next-token bars.
int renderDecoderFromCli(const ModelRenderCli& o, const std::string& path, const std::string& panel,
                         const fig::ModelFigureOptions& fo, const std::string& out, fig::FigureFormat format, double scale)
{
    if (!o.pair.empty()) return printError("--pair: a decoder reads one text (--model-text)"), kExitBadInput;
    auto model = attn::loadDecoder(path);
    if (!model) return printError(model.status().message), kExitBadInput;
    attn::DecoderOptions mo;
    if (!o.ablate.empty()) {
        auto ab = attn::parseAblation(o.ablate, model->config.layers, model->config.heads);
        if (!ab) return printError(ab.status().message), kExitBadInput;
        mo.ablate = *ab;
    }
    auto enc = attn::encodeForDecoder(*model, o.text, o.chat);
    if (!enc) return printError(enc.status().message), kExitBadInput;
    if (enc->ids.empty()) return printError("--model-text: the text has no tokens (this model adds no BOS)"), kExitBadInput;
    auto run = attn::runDecoder(*model, enc->ids, mo);
    if (!run) return printError(run.status().message), run.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
    for (const std::string& w : run->warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    attn::Expected<std::string> bytes = std::string();
    if (panel == "next") {
        std::vector<fig::NextTokenBar> bars;
        for (const attn::TokenProbability& t : attn::topTokens(*model, run->lastLogits, o.topK)) bars.push_back({t.token, t.p});
        const std::string last = run->encoding.tokens.empty() ? std::string() : run->encoding.tokens.back();
        bytes = fig::renderNextFigure(fo.title.value_or(model->name + ": the next token after '" + last + "'"), bars, format, scale);
    } else if (panel == "importance" || panel == "dla" || panel == "types" || panel == "patching") {
        ModelOptionsCli io;
        io.text = o.text;
        io.chat = o.chat;
        io.target = o.target;
        io.patchFrom = o.patchFrom;
        io.targets = o.targets;
        fig::LayerHeadMap map;
        if (int rc = decoderInterpMap(io, *model, *run, mo, panel, o.score, map); rc != kExitOk) return rc;
        if (fo.title) map.title = *fo.title;
        bytes = fig::renderFigure(fig::buildLayerHeadFigure(map), format, scale);
    } else if (panel == "qk") {
        // "Why here?" of one cell (issue 35): --layer, --head, --query, --key.
        if (o.query < 0 || o.key < 0) return printError("--panel qk: give the cell as --layer L --head H --query I --key J"), kExitBadInput;
        auto cell = attn::qkAttribution(*model, *run, o.layer, fo.head, o.query, o.key);
        if (!cell) return printError("--panel qk: " + cell.status().message), kExitBadInput;
        fig::Figure f = fig::buildQkFigure(model->name, *cell, run->encoding.tokens[static_cast<std::size_t>(o.query)],
                                           run->encoding.tokens[static_cast<std::size_t>(o.key)]);
        if (fo.title) f.title = *fo.title;
        bytes = fig::renderFigure(f, format, scale);
    } else if (fo.kind == fig::ModelFigureKind::Lines) {
        bytes = fig::renderLinesFigure(model->name, RunView(*run, attn::decoderMaps(*model, *run)), fo, format, scale);
    } else {
        attn::Expected<fig::Figure> f = fig::buildModelFigure(model->name, RunView(*run, attn::decoderMaps(*model, *run)), fo);
        if (!f) return printError(f.status().message), kExitBadInput;
        bytes = fig::renderFigure(*f, format, scale);
    }
    if (!bytes) {
        printError(bytes.status().message);
        return bytes.status().code == attn::StatusCode::InvalidArgument ? kExitBadInput : kExitFailure;
    }
    if (attn::Status w = attn::writeFileAtomic(out, *bytes); !w.ok()) return printError(w.message), kExitCannotWrite;
    return kExitOk;
}

} // namespace

std::shared_ptr<ModelRenderCli> addModelRenderOptions(CLI::App& render)
{
    auto o = std::make_shared<ModelRenderCli>();
    render.add_option("--model-text", o->text, "Draw a trained model's attention on this text instead of a session "
                                               "(--panel weights | model-view | lines)");
    render.add_option("--pair", o->pair, "With --model-text: sentence B");
    render.add_option("--model,--model-dir", o->modelDir,
                      "With --model-text: a .gguf file or a model directory (default: " + defaultModelDirectory() + ")");
    render.add_flag("--chat", o->chat, "With --model-text and a decoder: wrap the text as one user turn (chat template)");
    render.add_option("--top-k", o->topK, "With --panel next: how many predictions (default 10)")->check(CLI::Range(1, 100));
    render.add_option("--ablate", o->ablate, "With --model-text: heads to ablate, LAYER:HEAD[,LAYER:HEAD…]");
    render.add_option("--layer", o->layer, "With --model-text or --bundle: the layer (0-based; default 0)");
    render.add_option("--bundle", o->bundle, "Draw an attention bundle (a .safetensors of attn.<layer> tensors, docs/bundle.md): "
                                             "--panel weights | model-view | lines");
    render.add_option("--target", o->target,
                      "With --panel importance or dla: the token explained, e.g. ' Paris' (default: the top prediction)");
    render.add_option("--score", o->score, "With --panel types: previous, duplicate, induction (default) or sink");
    render.add_option("--patch-from", o->patchFrom, "With --panel patching: the clean text (--model-text is the corrupted one)");
    render.add_option("--targets", o->targets, "With --panel patching: the two tokens of logit(A) − logit(B), as A,B");
    return o;
}

int renderModelFromCli(const ModelRenderCli& o, const std::string& panel, const std::string& head,
                       const std::string& out, double scale, const std::optional<std::string>& title)
{
    const std::optional<fig::FigureFormat> format = fig::formatFromPath(out);
    if (!format) return printError("-o " + out + ": expected a .png, .svg or .pdf file name"), kExitBadInput;
    fig::ModelFigureOptions fo;
    if (panel == "weights") fo.kind = fig::ModelFigureKind::Head;
    else if (panel == "model-view") fo.kind = fig::ModelFigureKind::ModelView;
    else if (panel == "lines") fo.kind = fig::ModelFigureKind::Lines;
    else if (panel != "next" && panel != "importance" && panel != "dla" && panel != "types" && panel != "patching" && panel != "qk")
        return printError("--panel: with --model-text expected weights, model-view, lines, or (decoders) next, importance, dla, "
                          "types, patching or qk, got '" + panel + "'"),
               kExitBadInput;
    fo.layer = o.layer;
    if (head != "all") {
        std::size_t used = 0;
        try {
            fo.head = std::stoi(head, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != head.size() || fo.head < 0)
            return printError("--head: expected a head index ≥ 0, got '" + head + "'"), kExitBadInput;
    }
    fo.title = title;
    if (panel == "qk" && head == "all") return printError("--panel qk: give the cell as --layer L --head H --query I --key J"), kExitBadInput;
    const std::string dir = o.modelDir.empty() ? defaultModelDirectory() : o.modelDir;
    if (attn::isDecoderModelPath(dir) || dir.ends_with(".gguf")) return renderDecoderFromCli(o, dir, panel, fo, out, *format, scale);
    if (panel == "next")
        return printError("--panel next: the next-token predictions are a decoder's (" + decoderFiles() + "), not an encoder's"),
               kExitBadInput;
    if (fo.kind == fig::ModelFigureKind::Head && panel != "weights")
        return printError("--panel " + panel + ": the interpretability views are a decoder's (docs/interp.md), not an encoder's"),
               kExitBadInput;
    int rc = kExitOk;
    std::optional<LoadedRun> lr = loadAndRun(o.modelDir, o.text, o.pair, o.ablate, attn::Backend::Cpu, rc);
    if (!lr) return rc;
    attn::Expected<std::string> bytes = std::string();
    if (fo.kind == fig::ModelFigureKind::Lines) {
        bytes = fig::renderLinesFigure(lr->model.name, lr->run, fo, *format, scale);
    } else {
        attn::Expected<fig::Figure> f = fig::buildModelFigure(lr->model.name, lr->run, fo);
        if (!f) return printError(f.status().message), kExitBadInput;
        bytes = fig::renderFigure(*f, *format, scale);
    }
    if (!bytes) {
        printError(bytes.status().message);
        return bytes.status().code == attn::StatusCode::InvalidArgument ? kExitBadInput : kExitFailure;
    }
    if (attn::Status w = attn::writeFileAtomic(out, *bytes); !w.ok()) return printError(w.message), kExitCannotWrite;
    return kExitOk;
}

void addModelCommand(CLI::App& root, CommandAction& action)
{
    auto opt = std::make_shared<ModelOptionsCli>();
    CLI::App* cmd = root.add_subcommand("model", "Run a trained transformer (default all-MiniLM-L6-v2; or a decoder LM from a .gguf file or a "
                                                 "Hugging Face directory) on text and write every layer's and head's attention as JSON");
    cmd->add_option("--text", opt->text, "Sentence A")->each([opt](const std::string&) { opt->textGiven = true; });
    cmd->add_option("--text-file", opt->textFile, "Decoders: the text from this file (UTF-8; up to the model's context, "
                                                   "longer is truncated with a warning)");
    cmd->add_option("--head", opt->head, "Decoders with -o OUT.npz: only this head's maps (1 × n × n per layer)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--pair", opt->pair, "Sentence B ([CLS] A [SEP] B [SEP])");
    cmd->add_option("--ablate", opt->ablate, "Heads to ablate (weights × 0), LAYER:HEAD[,LAYER:HEAD…], from 0");
    cmd->add_option("--model,--model-dir", opt->modelDir,
                    "A .gguf file or a Hugging Face directory: bert (an encoder) or a decoder (" +
                        std::string(attn::supportedDecoderArchitectures()) + ") (default: " + defaultModelDirectory() + ")");
    cmd->add_flag("--chat", opt->chat, "Decoders: wrap the text as one user turn of the model's chat template");
    cmd->add_option("--top-k", opt->topK, "Decoders: how many next-token predictions to list (default 10)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--temperature", opt->temperature, "Decoders: softmax temperature of the predictions (default 1)")
        ->check(CLI::Range(0.01, 100.0));
    cmd->add_flag("--logits", opt->logits, "Decoders: write the last position's logits");
    cmd->add_option("--generate", opt->generate, "Decoders: append N tokens, each the most probable (greedy)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--target", opt->target, "Decoders: the token the views explain, e.g. ' Paris' (default: the most probable next one)");
    cmd->add_flag("--head-importance", opt->headImportance,
                  "Decoders: Δ log p(target) when each head is ablated (L×H; one recompute per head)");
    cmd->add_flag("--dla", opt->dla, "Decoders: direct logit attribution of the target (heads, MLPs, embedding)");
    cmd->add_flag("--logit-lens", opt->logitLens, "Decoders: each layer's top token at each position");
    cmd->add_flag("--head-types", opt->headTypes, "Decoders: previous-token, duplicate, induction and sink scores per head");
    cmd->add_option("--patch-from", opt->patchFrom,
                    "Decoders: activation patching from this clean text into --text (equal token lengths; with --targets)");
    cmd->add_option("--targets", opt->targets, "Decoders, --patch-from: the two tokens of logit(A) − logit(B), as A,B");
    cmd->add_option("--qk-attribution", opt->qkAttribution,
                    "Decoders: why head HEAD of layer LAYER attends from QUERY to KEY, as LAYER:HEAD:QUERY:KEY (from 0): "
                    "the score decomposed into what wrote the query and the key");
    cmd->add_option("--qk-top", opt->qkTop, "Decoders, --qk-attribution: how many component pairs to list (default 50)")
        ->check(CLI::Range(0, 1000000));
    cmd->add_option("--qk-patch", opt->qkPatch,
                    "Decoders, --qk-attribution: the head's pattern with this component (e.g. L3.H4) removed from one side");
    cmd->add_option("--qk-side", opt->qkSide, "Decoders, --qk-patch: key (default) or query");
    cmd->add_flag("--composition", opt->composition, "Decoders: Q-, K- and V-composition scores of every head pair");
    cmd->add_option("--max-output-mb", opt->maxOutputMb,
                    "Refuse to write a JSON larger than this estimate, in MB (default 256; --layers writes less)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--layers", opt->layers, "Write only these layers, e.g. 0,5 (default: all)");
    cmd->add_option("-o,--output", opt->out, "Output JSON file (- for stdout)");
    cmd->add_flag("--bench", opt->bench, "Time the forward at 128 and 512 tokens and a last-layer edit (JSON on stdout)");
    cmd->add_option("--repeats", opt->repeats, "Timed runs per size for --bench (median reported)")->check(CLI::Range(1, 1000));
    cmd->add_option("--tokens", opt->benchTokens, "Decoders, --bench: the text's length in tokens (default 128)")
        ->check(CLI::Range(2, 1 << 20));
    cmd->add_option("--synthetic", opt->synthetic,
                    "Decoders: a random-weight model instead of --model, of a known shape (smollm2, gemma3-270m) or of "
                    "any decoder's config.json (the file, or a directory holding it): timings where the model files are not");
    cmd->add_option("--attention", opt->attention,
                    "Decoders on a GPU, long texts (lazy runs): each layer's attention core by cuBLAS products, in one "
                    "fused kernel, or auto: the faster of the two on this GPU, timed once per shape (default; --bench "
                    "times all three)")
        ->check(CLI::IsMember({"auto", "products", "fused"}));
    cmd->add_flag("--json", opt->jsonFlag, "--bench prints one JSON object (always; the flag is accepted)");
    addBackendOption(*cmd, opt->backend);
    cmd->callback([opt, &action] { action = [opt] { return runModelCommand(*opt); }; });
}

} // namespace app
