// `attnscope model --model FILE.gguf|DIR` for decoder language models: every layer's and head's attention, the
// next-token predictions, how surprised the model was by each token, greedy generation (docs/model.md).
#include "cli/backend_option.h"
#include "cli/cli.h"
#include "cli/cli_decoder.h"
#include "cli/cli_session.h"  // humanSize
#include "figure/model_figure.h"
#include "io/array_io.h"

#include <attnscope/attention.h>
#include <attnscope/decoder.h>
#include <attnscope/interp.h>
#include <attnscope/model.h>  // parseAblation
#include <attnscope/synthetic_decoder.h>
#include <attnscope/preset_io.h>
#include <attnscope/qk_attribution.h>
#include <attnscope/weight_formats.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <optional>

namespace app {

using json = nlohmann::ordered_json;  // keys in the documented order

bool jsonEstimateFits(std::uint64_t values, double maxMb, const std::string& what)
{
    // ~20 bytes of text a number (shortest round-trip float and a comma), measured on the encoder's output.
    const std::uint64_t bytes = values * 20;
    if (double(bytes) <= maxMb * 1024.0 * 1024.0) return true;
    printError(what + ": the JSON would be about " + humanSize(bytes) + " (" + std::to_string(values) +
               " numbers), over --max-output-mb " + std::to_string(static_cast<long long>(maxMb)) +
               "; write fewer layers (--layers 0,5) or raise --max-output-mb");
    return false;
}

std::string ModelOptionsCli::interpFlag() const
{
    if (!target.empty()) return "--target";
    if (headImportance) return "--head-importance";
    if (dla) return "--dla";
    if (logitLens) return "--logit-lens";
    if (headTypes) return "--head-types";
    if (!patchFrom.empty()) return "--patch-from";
    if (!targets.empty()) return "--targets";
    return "";
}

std::string ModelOptionsCli::qkFlag() const
{
    if (!qkAttribution.empty()) return "--qk-attribution";
    if (!qkPatch.empty()) return "--qk-patch";
    if (composition) return "--composition";
    return "";
}

namespace {

json matrixJson(const attn::Matrix& m)
{
    json rows = json::array();
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
        json row = json::array();
        for (Eigen::Index c = 0; c < m.cols(); ++c) row.push_back(std::isfinite(m(r, c)) ? json(m(r, c)) : json(nullptr));
        rows.push_back(std::move(row));
    }
    return rows;
}

json vectorJson(const attn::Vector& v)
{
    json out = json::array();
    for (Eigen::Index i = 0; i < v.size(); ++i) out.push_back(v[i]);
    return out;
}

// The interpretability views asked for (attnscope/interp.h), added to `head`; the corrupted run of patching is
// `run` (the text), the clean one is --patch-from's. Returns the exit code (kExitOk when everything was added).
// --target, --patch-from and --targets checked and looked up (a, b: the ids of --targets; ab: their texts).
int parseInterpOptions(const ModelOptionsCli& opt, const attn::DecoderModel& model, int& targetId, int& a, int& b,
                       std::vector<std::string>& ab)
{
    const bool patching = !opt.patchFrom.empty();
    if (!opt.targets.empty() && !patching) return printError("--targets: only with --patch-from CLEAN_TEXT"), kExitBadInput;
    if (patching && opt.targets.empty()) return printError("--patch-from: --targets A,B is required (logit(A) − logit(B))"), kExitBadInput;
    targetId = -1;
    if (!opt.target.empty()) {
        auto id = attn::targetTokenId(model, opt.target);
        if (!id) return printError("--target: " + id.status().message), kExitBadInput;
        targetId = *id;
    }
    a = b = -1;
    ab.clear();
    if (patching) {
        // Split at commas only: a token's leading space is part of it (" Mary, John" is " Mary" and " John").
        std::string rest = opt.targets;
        for (std::size_t comma; (comma = rest.find(',')) != std::string::npos; rest.erase(0, comma + 1)) ab.push_back(rest.substr(0, comma));
        ab.push_back(rest);
        if (ab.size() != 2)
            return printError("--targets: expected two tokens A,B, got " + std::to_string(ab.size()) + " ('" + opt.targets + "')"),
                   kExitBadInput;
        auto ia = attn::targetTokenId(model, ab[0]);
        if (!ia) return printError("--targets: " + ia.status().message), kExitBadInput;
        auto ib = attn::targetTokenId(model, ab[1]);
        if (!ib) return printError("--targets: " + ib.status().message), kExitBadInput;
        a = *ia;
        b = *ib;
    }
    return kExitOk;
}

// The clean run of --patch-from (under the text's ablations), or the exit code in `rc`.
std::optional<attn::DecoderRun> cleanRunFromCli(const ModelOptionsCli& opt, attn::DecoderModel& model, const attn::DecoderRun& run,
                                                const attn::DecoderOptions& mo, int& rc)
{
    auto enc = attn::encodeForDecoder(model, opt.patchFrom, opt.chat);
    if (!enc) return printError("--patch-from: " + enc.status().message), rc = kExitBadInput, std::nullopt;
    if (enc->ids.size() != run.encoding.ids.size())
        return printError("--patch-from: the clean text has " + std::to_string(enc->ids.size()) + " tokens, the text has " +
                          std::to_string(run.encoding.ids.size()) + "; patching needs equal lengths"),
               rc = kExitBadInput, std::nullopt;
    auto clean = attn::runDecoder(model, enc->ids, mo);
    if (!clean) return printError("--patch-from: " + clean.status().message), rc = kExitFailure, std::nullopt;
    return std::move(*clean);
}

int addInterpViews(const ModelOptionsCli& opt, attn::DecoderModel& model, const attn::DecoderRun& run,
                   const attn::DecoderOptions& mo, json& head)
{
    if (opt.interpFlag().empty()) return kExitOk;
    const bool patching = !opt.patchFrom.empty();
    int targetId = -1, a = -1, b = -1;
    std::vector<std::string> ab;
    if (int rc = parseInterpOptions(opt, model, targetId, a, b, ab); rc != kExitOk) return rc;
    auto target = attn::interpTarget(model, run, targetId);
    if (!target) return printError(target.status().message), kExitBadInput;
    head["target"] = {{"id", target->id}, {"token", target->token}, {"logprob", target->logprob}};
    if (opt.headImportance) {
        attn::Matrix importance;
        if (attn::Status s = attn::headImportance(model, run, target->id, importance); !s.ok()) return printError(s.message), kExitFailure;
        head["head_importance"] = matrixJson(importance);
    }
    if (opt.dla) {
        auto d = attn::directLogitAttribution(model, run, target->id);
        if (!d) return printError(d.status().message), kExitFailure;
        head["dla"] = {{"heads", matrixJson(d->heads)}, {"mlp", vectorJson(d->mlp)}, {"attn_bias", vectorJson(d->attnBias)},
                       {"embed", d->embed}, {"norm_bias", d->normBias}, {"logit", d->logit}};
    }
    if (opt.logitLens) {
        auto lens = attn::logitLens(model, run, 1);
        if (!lens) return printError(lens.status().message), kExitFailure;
        json layers = json::array();
        for (const auto& layer : lens->top) {
            json row = json::array();
            for (const auto& top : layer) row.push_back({{"id", top[0].id}, {"token", top[0].token}, {"p", top[0].p}});
            layers.push_back(std::move(row));
        }
        head["logit_lens"] = std::move(layers);
    }
    if (opt.headTypes) {
        const attn::HeadTypes t = attn::headTypes(run);
        head["head_types"] = {{"previous", matrixJson(t.previous)}, {"duplicate", matrixJson(t.duplicate)},
                              {"induction", matrixJson(t.induction)}, {"sink", matrixJson(t.sink)}, {"has_repeats", t.hasRepeats}};
    }
    if (patching) {
        int rc = kExitOk;
        std::optional<attn::DecoderRun> clean = cleanRunFromCli(opt, model, run, mo, rc);
        if (!clean) return rc;
        attn::Matrix map;
        attn::PatchingMetric metric;
        if (attn::Status s = attn::activationPatching(model, *clean, run, a, b, map, &metric); !s.ok())
            return printError("--patch-from: " + s.message), kExitBadInput;
        head["patching"] = {{"map", matrixJson(map)}, {"clean", metric.clean}, {"corrupted", metric.corrupted}, {"targets", ab}};
    }
    return kExitOk;
}

// "LAYER:HEAD:QUERY:KEY" as four integers ≥ 0, or a message naming what was expected.
attn::Expected<std::array<int, 4>> parseQkCell(const std::string& text)
{
    std::array<int, 4> v{};
    std::size_t at = 0, k = 0;
    for (; k < 4; ++k) {
        const std::size_t end = k < 3 ? text.find(':', at) : text.size();
        if (end == std::string::npos) break;
        const std::string part = text.substr(at, end - at);
        if (part.empty() || part.size() > 9 || !std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
            break;
        v[k] = std::stoi(part);
        at = end + 1;
    }
    if (k < 4 || at != text.size() + 1)
        return attn::invalidArgument("--qk-attribution: expected LAYER:HEAD:QUERY:KEY (four integers from 0, e.g. 3:4:17:9), got '" +
                                     attn::clipForMessage(text) + "'");
    return v;
}

// --qk-attribution, --qk-patch and --composition, added to `head` (attnscope/qk_attribution.h). Returns the exit
// code: bad input (a cell out of range or masked, an unknown component) is kExitBadInput with one line.
int addQkViews(const ModelOptionsCli& opt, const attn::DecoderModel& model, const attn::DecoderRun& run, json& head)
{
    if (!opt.qkPatch.empty() && opt.qkAttribution.empty())
        return printError("--qk-patch: with --qk-attribution LAYER:HEAD:QUERY:KEY (the head whose pattern is patched)"), kExitBadInput;
    if (opt.qkSide != "key" && opt.qkSide != "query")
        return printError("--qk-side: expected key or query, got '" + opt.qkSide + "'"), kExitBadInput;
    if (!opt.qkAttribution.empty()) {
        auto cellAt = parseQkCell(opt.qkAttribution);
        if (!cellAt) return printError(cellAt.status().message), kExitBadInput;
        const auto [l, h, i, j] = *cellAt;
        auto cell = attn::qkAttribution(model, run, l, h, i, j);
        if (!cell) return printError("--qk-attribution: " + cell.status().message), kExitBadInput;
        const Eigen::Index C = cell->matrix.rows();
        auto sideJson = [&](const attn::Vector& v) {
            json out = json::array();
            for (Eigen::Index c = 0; c < C; ++c) out.push_back({{"name", cell->components[static_cast<std::size_t>(c)]}, {"value", v[c]}});
            return out;
        };
        // The top pairs by |value| (ties: the earlier query component, then key component).
        json pairs = json::array();
        for (const attn::QkPair& p : attn::strongestQkPairs(*cell, opt.qkTop))
            pairs.push_back({{"query", cell->components[static_cast<std::size_t>(p.query)]},
                             {"key", cell->components[static_cast<std::size_t>(p.key)]}, {"value", p.value}});
        json q = {{"layer", l}, {"head", h}, {"query", i}, {"key", j},
                  {"query_token", run.encoding.tokens[static_cast<std::size_t>(i)]},
                  {"key_token", run.encoding.tokens[static_cast<std::size_t>(j)]},
                  {"score", cell->score}, {"weight", cell->weight}, {"scale", cell->scale},
                  {"query_components", sideJson(cell->queryComponents)}, {"key_components", sideJson(cell->keyComponents)},
                  {"pairs", std::move(pairs)}, {"matrix", matrixJson(cell->matrix)}, {"components", cell->components}};
        // A soft-capped layer (Gemma 2): "score" (what the parts sum to) is before the cap; the softmax read this.
        if (cell->softcap > 0) {
            q["softcap"] = cell->softcap;
            q["capped_score"] = cell->cappedScore;
        }
        if (!opt.qkPatch.empty()) {
            const attn::QkSide side = opt.qkSide == "query" ? attn::QkSide::Query : attn::QkSide::Key;
            auto patch = attn::patchPattern(model, run, l, h, opt.qkPatch, side);
            if (!patch) return printError("--qk-patch: " + patch.status().message), kExitBadInput;
            q["patch"] = {{"component", patch->component}, {"side", attn::toString(side)},
                          {"query_row_original", vectorJson(patch->original.row(i).head(i + 1).transpose())},
                          {"query_row_patched", vectorJson(patch->patched.row(i).head(i + 1).transpose())},
                          {"weight_patched", patch->patched(i, j)}, {"difference", matrixJson(patch->difference)}};
        }
        head["qk_attribution"] = std::move(q);
    }
    if (opt.composition) {
        auto scores = attn::compositionScores(model);
        if (!scores) return printError("--composition: " + scores.status().message), kExitFailure;
        json top = json::array();
        for (const attn::CompositionPair& p : attn::strongestCompositions(*scores, opt.qkTop))
            top.push_back({{"from", scores->names[static_cast<std::size_t>(p.from)]}, {"to", scores->names[static_cast<std::size_t>(p.to)]},
                           {"kind", std::string(1, p.kind)}, {"value", p.value}});
        head["composition"] = {{"names", scores->names}, {"q", matrixJson(scores->q)}, {"k", matrixJson(scores->k)},
                               {"v", matrixJson(scores->v)}, {"top", std::move(top)}};
    }
    return kExitOk;
}

} // namespace

int decoderInterpMap(const ModelOptionsCli& opt, attn::DecoderModel& model, const attn::DecoderRun& run,
                     const attn::DecoderOptions& mo, const std::string& panel, const std::string& score, fig::LayerHeadMap& map)
{
    int targetId = -1, a = -1, b = -1;
    std::vector<std::string> ab;
    if (panel == "patching" && opt.patchFrom.empty())
        return printError("--panel patching: --patch-from CLEAN_TEXT and --targets A,B are required"), kExitBadInput;
    if (panel != "patching" && !opt.patchFrom.empty())
        return printError("--patch-from: only with --panel patching"), kExitBadInput;
    if (int rc = parseInterpOptions(opt, model, targetId, a, b, ab); rc != kExitOk) return rc;
    auto target = attn::interpTarget(model, run, targetId);
    if (!target) return printError(target.status().message), kExitBadInput;
    const std::string quoted = "'" + target->token + "'";
    const std::string title = model.name + ": ";
    if (panel == "importance") {
        attn::Matrix values;
        if (attn::Status s = attn::headImportance(model, run, target->id, values); !s.ok()) return printError(s.message), kExitFailure;
        map = fig::signedMap(std::move(values));
        map.title = title + "Δ log p(" + quoted + ") with each head ablated";
        map.colorbarLabel = "Δ log p (nats)";
    } else if (panel == "dla") {
        auto d = attn::directLogitAttribution(model, run, target->id);
        if (!d) return printError(d.status().message), kExitFailure;
        map = fig::attributionMap(*d);
        map.title = title + "direct contributions to the logit of " + quoted;
        map.colorbarLabel = "logit";
    } else if (panel == "types") {
        const attn::HeadTypes t = attn::headTypes(run);
        const std::string kind = score.empty() ? "induction" : score;
        if (kind == "previous") map.values = t.previous;
        else if (kind == "duplicate") map.values = t.duplicate;
        else if (kind == "induction") map.values = t.induction;
        else if (kind == "sink") map.values = t.sink;
        else return printError("--score: expected previous, duplicate, induction or sink, got '" + kind + "'"), kExitBadInput;
        map.title = title + kind + " score of each head";
        map.cmap = attn::Colormap::Viridis;
        map.range = {0.0f, 1.0f, 0};
        map.colorbarLabel = "mean attention weight";
    } else if (panel == "patching") {
        int rc = kExitOk;
        std::optional<attn::DecoderRun> clean = cleanRunFromCli(opt, model, run, mo, rc);
        if (!clean) return rc;
        attn::Matrix values;
        attn::PatchingMetric metric;
        if (attn::Status s = attn::activationPatching(model, *clean, run, a, b, values, &metric); !s.ok())
            return printError("--patch-from: " + s.message), kExitBadInput;
        map = fig::fractionMap(std::move(values));
        map.title = title + "share of logit('" + ab[0] + "') − logit('" + ab[1] + "') restored by each head";
        map.colorbarLabel = "fraction restored";
    } else {
        return printError("--panel " + panel + ": not a layers × heads view"), kExitBadInput;
    }
    map.subtitle = panel == "patching" ? "clean \"" + opt.patchFrom + "\" into \"" + opt.text + "\"" : "\"" + opt.text + "\"";
    return kExitOk;
}

namespace {

// `model --text-file F … -o OUT.npz`: a lazy forward (no n×n map is kept), then token_ids, weights_L<l> (H × n × n,
// or 1 × n × n with --head) for each layer of --layers, and the last position's logits. A map is made from the
// tile seam one layer at a time, and the file is refused when that layer's arrays would not fit the memory budget.
int writeDecoderNpz(const ModelOptionsCli& opt, attn::DecoderModel& model, const attn::Encoding& enc,
                    attn::DecoderOptions mo, const std::vector<int>& layers)
{
    const attn::DecoderConfig& c = model.config;
    if (opt.generate > 0 || opt.headImportance || opt.dla || opt.logitLens || opt.headTypes || !opt.patchFrom.empty() ||
        !opt.qkFlag().empty())
        return printError("model: -o OUT.npz writes the maps and logits of the text; --generate and the interpretability "
                          "views write JSON (-o OUT.json)"), kExitBadInput;
    mo.lazy = true;  // on the CPU or the GPU (the device forward keeps Q, K and the log-sum-exp too)
    const long n = std::min<long>(long(enc.ids.size()), c.maxPositions);
    const long heads = opt.head >= 0 ? 1 : c.heads;
    // All the chosen layers' maps are held while the .npz is encoded (4 B a value, about twice more while zipping).
    const double bytes = double(layers.size()) * double(heads) * double(n) * double(n) * 12.0;
    const double budget = double(attn::defaultMemoryBudget());
    if (bytes > budget)
        return printError("model: the maps of " + std::to_string(layers.size()) + " layer(s) × " + std::to_string(heads) +
                          " head(s) at " + std::to_string(n) + " tokens need about " + std::to_string(long(bytes / 1048576.0)) +
                          " MiB to write, over the budget of " + std::to_string(long(budget / 1048576.0)) +
                          " MiB: choose fewer --layers or one --head"), kExitBadInput;
    auto run = attn::runDecoder(model, enc.ids, mo);
    if (!run) {
        printError(run.status().message);
        return run.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
    }
    for (const std::string& w : enc.warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    for (const std::string& w : run->warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    const auto maps = attn::decoderMaps(model, *run);
    const int T = maps->queries();
    std::vector<attn::Matrix> values(layers.size());
    std::vector<io::NamedArray> arrays;
    io::NamedArray ids;
    ids.name = "token_ids";
    ids.ints.assign(run->encoding.ids.begin(), run->encoding.ids.end());
    arrays.push_back(ids);
    for (std::size_t k = 0; k < layers.size(); ++k) {
        const int l = layers[k];
        attn::Matrix& m = values[k];
        m.resize(Eigen::Index(heads) * T, T);
        attn::Matrix tile;
        for (int h = 0; h < heads; ++h) {
            const int head = opt.head >= 0 ? opt.head : h;
            if (attn::Status s = maps->whole(attn::MapKind::Weights, l, head, tile); !s.ok()) return printError(s.message), kExitFailure;
            m.middleRows(Eigen::Index(h) * T, T) = tile;
        }
        io::NamedArray a;
        a.name = "weights_L" + std::to_string(l);
        a.matrix = &m;
        a.shape = {heads, T, T};
        arrays.push_back(a);
    }
    io::NamedArray logits;
    logits.name = "logits";
    logits.vector = &run->lastLogits;
    arrays.push_back(logits);
    if (attn::Status s = io::writeNpz(opt.out, arrays); !s.ok())
        return printError(s.message), s.code == attn::StatusCode::InvalidArgument ? kExitBadInput : kExitCannotWrite;
    std::fprintf(stderr, "attnscope: wrote %s: %d tokens, %zu layer(s) × %ld head(s) of maps\n", opt.out.c_str(), T,
                 layers.size(), heads);
    return kExitOk;
}

} // namespace

attn::Expected<attn::DecoderModel> loadDecoderFor(const ModelOptionsCli& opt, const std::string& path)
{
    if (!opt.synthetic.empty()) return attn::syntheticDecoder(opt.synthetic);
    return attn::loadDecoder(path);
}

int runDecoderCommand(const ModelOptionsCli& opt, const std::string& path)
{
    const attn::Backend backend = parseBackend(opt.backend);
    if (!opt.pair.empty()) return printError("model: --pair is for encoder models; a decoder reads one text"), kExitBadInput;
    if (opt.bench) return printError("model: --bench times the encoder; decoders are not benchmarked yet"), kExitBadInput;
    if (opt.out.empty()) return printError("model: -o OUT.json (or OUT.npz) is required"), kExitBadInput;
    if (opt.textGiven && !opt.textFile.empty()) return printError("model: give --text or --text-file, not both"), kExitBadInput;
    if (!opt.textGiven && opt.textFile.empty()) return printError("model: --text TEXT (or --text-file F) is required"), kExitBadInput;
    std::string inputText = opt.text;
    if (!opt.textFile.empty()) {
        // 4 MiB of text is ~1 million tokens, far past any context: larger files are not a text to read whole.
        auto bytes = attn::readFile(opt.textFile, std::size_t(4) << 20);
        if (!bytes) return printError("--text-file " + bytes.status().message), kExitBadInput;
        inputText = std::move(*bytes);
    }
    const bool npz = opt.out.size() > 4 && opt.out.compare(opt.out.size() - 4, 4, ".npz") == 0;
    if (opt.head >= 0 && !npz) return printError("model: --head chooses the maps written to -o OUT.npz"), kExitBadInput;
    auto model = loadDecoderFor(opt, path);
    if (!model) {
        printError(model.status().message);
        return model.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
    }
    const attn::DecoderConfig& c = model->config;
    attn::DecoderOptions mo;
    mo.backend = backend;
    mo.deviceAttention = opt.attention == "fused"      ? attn::DeviceAttention::Fused
                         : opt.attention == "products" ? attn::DeviceAttention::Products
                                                       : attn::DeviceAttention::Auto;
    if (!opt.ablate.empty()) {
        auto ab = attn::parseAblation(opt.ablate, c.layers, c.heads);
        if (!ab) return printError(ab.status().message), kExitBadInput;
        mo.ablate = *ab;
    }
    auto layers = parseLayers(opt.layers, c.layers);
    if (!layers) return printError(layers.status().message), kExitBadInput;
    if (opt.head >= c.heads)
        return printError("--head " + std::to_string(opt.head) + ": the model has " + std::to_string(c.heads) + " heads (0.." +
                          std::to_string(c.heads - 1) + ")"), kExitBadInput;
    auto enc = attn::encodeForDecoder(*model, inputText, opt.chat);
    if (!enc) return printError(enc.status().message), kExitBadInput;
    const std::uint64_t n = std::min<std::uint64_t>(enc->ids.size() + std::uint64_t(opt.generate), std::uint64_t(c.maxPositions));
    if (npz) return writeDecoderNpz(opt, *model, *enc, mo, *layers);
    const std::uint64_t values = std::uint64_t(layers->size()) * std::uint64_t(c.heads) * n * n * 2 + n * std::uint64_t(c.hidden) +
                                 (opt.logits ? std::uint64_t(c.vocab) : 0);
    if (!jsonEstimateFits(values, opt.maxOutputMb, "model")) return kExitBadInput;

    auto run = attn::runDecoder(*model, enc->ids, mo);
    if (!run) {
        printError(run.status().message);
        return run.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
    }
    // The views explain the text's own last position, before any generated token.
    json interp;
    if (int rc = addInterpViews(opt, *model, *run, mo, interp); rc != kExitOk) return rc;
    if (int rc = addQkViews(opt, *model, *run, interp); rc != kExitOk) return rc;
    std::vector<int> generated;
    for (int g = 0; g < opt.generate && static_cast<int>(run->encoding.ids.size()) < c.maxPositions; ++g) {
        const auto top = attn::topTokens(*model, run->lastLogits, 1, 1.0f);
        if (top.empty()) break;
        generated.push_back(top[0].id);
        if (attn::Status s = attn::appendTokens(*model, {top[0].id}, *run, backend); !s.ok())
            return printError(s.message), kExitFailure;
        if (top[0].id == model->tokenizer.eos()) break;
    }
    for (const std::string& w : enc->warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    for (const std::string& w : run->warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    reportBackendChoice(backend, run->backend);

    json head;
    head["attnscope"] = 1;
    head["backend"] = run->backend == attn::Backend::Cuda ? "cuda" : "cpu";  // where every layer ran
    head["model"] = {{"name", model->name}, {"family", attn::toString(c.family)}, {"architecture", c.architecture},
                     {"layers", c.layers}, {"heads", c.heads}, {"kv_heads", c.kvHeads}, {"d_model", c.hidden},
                     {"vocab", c.vocab}};
    // The matrices' storage (a quantized file's maps are those of its quantized weights), most weights first.
    const std::vector<attn::WeightFormat> formats = attn::weightFormats(*model);
    json weights = json::array();
    for (const attn::WeightFormat& f : formats)
        weights.push_back({{"type", attn::ggmlTypeName(f.type)}, {"matrices", f.matrices}, {"weights", f.weights},
                           {"bytes", f.bytes}, {"bits_per_weight", f.bitsPerWeight()}, {"share", f.share}});
    head["model"]["weight_formats"] = weights;
    head["model"]["bits_per_weight"] = attn::bitsPerWeight(formats);
    head["token_ids"] = run->encoding.ids;
    head["tokens"] = run->encoding.tokens;
    json ablated = json::array();
    for (const auto& [l, h] : run->ablated) ablated.push_back({l, h});
    head["ablated"] = ablated;
    json next = json::array();
    for (const auto& t : attn::topTokens(*model, run->lastLogits, opt.topK, opt.temperature))
        next.push_back({{"id", t.id}, {"token", t.token}, {"p", t.p}});
    head["next"] = next;
    head["temperature"] = opt.temperature;
    json surprise = json::array();
    for (float s : run->surprise) surprise.push_back(std::isfinite(s) ? json(s) : json(nullptr));
    head["surprise"] = surprise;
    if (!generated.empty()) {
        json toks = json::array();
        for (int id : generated) toks.push_back(model->tokenizer.tokenText(id));
        head["generated"] = {{"ids", generated}, {"tokens", toks}, {"text", model->tokenizer.decode(generated)}};
    }
    std::vector<std::string> warnings = enc->warnings;
    warnings.insert(warnings.end(), run->warnings.begin(), run->warnings.end());
    if (!warnings.empty()) head["warnings"] = warnings;
    for (auto& [key, value] : interp.items()) head[key] = std::move(value);
    std::string text = head.dump(-1, ' ', false, json::error_handler_t::replace);
    text.pop_back();  // the closing brace: the large arrays follow
    text += ",\"layers\":[";
    bool firstLayer = true;
    const auto maps = attn::decoderMaps(*model, *run);
    attn::Matrix scores;
    for (int l : *layers) {
        text += firstLayer ? "{\"layer\":" : ",{\"layer\":";
        firstLayer = false;
        text += std::to_string(l) + ",\"heads\":[";
        const auto& heads = run->weights[static_cast<std::size_t>(l)];
        for (std::size_t h = 0; h < heads.size(); ++h) {
            text += h ? ",{\"weights\":" : "{\"weights\":";
            appendMatrix(text, heads[h].view());
            text += ",\"scores\":";
            // The run keeps no scores: Q·Kᵀ·scale through the tile seam.
            if (attn::Status s = maps->whole(attn::MapKind::Scores, l, static_cast<int>(h), scores); !s.ok())
                return printError(s.message), kExitFailure;
            appendMatrix(text, scores);
            text += '}';
        }
        text += "]}";
    }
    text += "],\"hidden\":";
    appendMatrix(text, run->finalHidden);
    if (opt.logits) {
        text += ",\"logits\":[";
        for (Eigen::Index i = 0; i < run->lastLogits.size(); ++i) {
            if (i) text += ',';
            appendFloat(text, run->lastLogits[i]);
        }
        text += ']';
    }
    text += "}\n";
    if (opt.out == "-") {
        std::cout << text;
        return std::cout.good() ? kExitOk : kExitCannotWrite;
    }
    if (attn::Status w = attn::writeFileAtomic(opt.out, text); !w.ok()) return printError(w.message), kExitCannotWrite;
    return kExitOk;
}

} // namespace app
