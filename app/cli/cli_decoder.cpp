// `attnscope model --model FILE.gguf|DIR` for decoder language models: every layer's and head's attention, the
// next-token predictions, how surprised the model was by each token, greedy generation (docs/model.md).
#include "cli/backend_option.h"
#include "cli/cli.h"
#include "cli/cli_decoder.h"
#include "cli/cli_session.h"  // humanSize
#include "figure/model_figure.h"

#include <attnscope/decoder.h>
#include <attnscope/interp.h>
#include <attnscope/model.h>  // parseAblation
#include <attnscope/preset_io.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
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

int runDecoderCommand(const ModelOptionsCli& opt, const std::string& path)
{
    const attn::Backend backend = parseBackend(opt.backend);
    if (!opt.pair.empty()) return printError("model: --pair is for encoder models; a decoder reads one text"), kExitBadInput;
    if (opt.bench) return printError("model: --bench times the encoder; decoders are not benchmarked yet"), kExitBadInput;
    if (opt.out.empty()) return printError("model: -o OUT.json is required"), kExitBadInput;
    if (!opt.textGiven) return printError("model: --text TEXT is required"), kExitBadInput;
    auto model = attn::loadDecoder(path);
    if (!model) {
        printError(model.status().message);
        return model.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
    }
    const attn::DecoderConfig& c = model->config;
    attn::DecoderOptions mo;
    mo.backend = backend;
    if (!opt.ablate.empty()) {
        auto ab = attn::parseAblation(opt.ablate, c.layers, c.heads);
        if (!ab) return printError(ab.status().message), kExitBadInput;
        mo.ablate = *ab;
    }
    auto layers = parseLayers(opt.layers, c.layers);
    if (!layers) return printError(layers.status().message), kExitBadInput;
    auto enc = attn::encodeForDecoder(*model, opt.text, opt.chat);
    if (!enc) return printError(enc.status().message), kExitBadInput;
    const std::uint64_t n = std::min<std::uint64_t>(enc->ids.size() + std::uint64_t(opt.generate), std::uint64_t(c.maxPositions));
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

    json head;
    head["attnscope"] = 1;
    head["model"] = {{"name", model->name}, {"family", attn::toString(c.family)}, {"architecture", c.architecture},
                     {"layers", c.layers}, {"heads", c.heads}, {"kv_heads", c.kvHeads}, {"d_model", c.hidden},
                     {"vocab", c.vocab}};
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
