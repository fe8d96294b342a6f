// Attention bundles on the command line (docs/bundle.md):
//   attnscope render --bundle FILE --panel model-view|weights|lines [--layer L --head H] -o FIG.png|svg|pdf
//   attnscope export --bundle FILE [--layer L] [--head H] -o OUT.npy|OUT.npz|DIR/
// Every map is read through the tile seam (attnscope/attention_maps.h) from the mapped file.
#include "cli/cli.h"
#include "cli/cli_model.h"
#include "figure/figure_render.h"
#include "figure/model_figure.h"
#include "io/array_io.h"
#include "io/bundle_open.h"

#include <attnscope/preset_io.h>

#include <cstdio>

namespace app {

namespace {

int exitFor(const attn::Status& s) { return s.code == attn::StatusCode::InvalidArgument || s.code == attn::StatusCode::ParseError ||
                                            s.code == attn::StatusCode::IoError || s.code == attn::StatusCode::Unsupported
                                         ? kExitBadInput : kExitFailure; }

// "3" → 3; "all" or "" → -1 (every one); else an error naming the flag.
bool parseIndex(const std::string& flag, const std::string& text, int count, const char* what, int& out)
{
    if (text.empty() || text == "all") {
        out = -1;
        return true;
    }
    std::size_t used = 0;
    try {
        out = std::stoi(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || out < 0 || out >= count) {
        printError(flag + ": expected a " + what + " in 0.." + std::to_string(count - 1) + (flag == "--head" ? " or 'all'" : "") +
                   ", got '" + attn::clipForMessage(text) + "'");
        return false;
    }
    return true;
}

} // namespace

int renderBundleFromCli(const std::string& path, const std::string& panel, const std::string& layerText,
                        const std::string& headText, const std::string& out, double scale,
                        const std::optional<std::string>& title)
{
    const std::optional<fig::FigureFormat> format = fig::formatFromPath(out);
    if (!format) return printError("-o " + out + ": expected a .png, .svg or .pdf file name"), kExitBadInput;
    fig::ModelFigureOptions fo;
    if (panel == "weights") fo.kind = fig::ModelFigureKind::Head;
    else if (panel == "model-view") fo.kind = fig::ModelFigureKind::ModelView;
    else if (panel == "lines") fo.kind = fig::ModelFigureKind::Lines;
    else return printError("--panel: with --bundle expected weights, model-view or lines, got '" + attn::clipForMessage(panel) + "'"),
                kExitBadInput;
    attn::Expected<OpenedBundle> b = openBundle(path);
    if (!b) return printError(b.status().message), exitFor(b.status());
    int layer = 0, head = 0;
    if (!parseIndex("--layer", layerText, b->maps->layers(), "layer", layer) ||
        !parseIndex("--head", headText, b->maps->heads(), "head", head))
        return kExitBadInput;
    fo.layer = std::max(layer, 0);
    fo.head = std::max(head, 0);
    fo.title = title;
    const RunView run(*b->maps, b->tokens, b->keyTokens);
    attn::Expected<std::string> bytes = std::string();
    if (fo.kind == fig::ModelFigureKind::Lines) {
        bytes = fig::renderLinesFigure(b->name, run, fo, *format, scale);
    } else {
        attn::Expected<fig::Figure> f = fig::buildModelFigure(b->name, run, fo);
        if (!f) return printError(f.status().message), exitFor(f.status());
        bytes = fig::renderFigure(*f, *format, scale);
    }
    if (!bytes) return printError(bytes.status().message), exitFor(bytes.status());
    if (attn::Status w = attn::writeFileAtomic(out, *bytes); !w.ok()) return printError(w.message), kExitCannotWrite;
    return kExitOk;
}

int exportBundleFromCli(const std::string& path, const std::string& layerText, const std::string& headText,
                        const std::string& out, const std::string& format, bool toDir, double memoryBudgetMiB)
{
    attn::Expected<OpenedBundle> b = openBundle(path);
    if (!b) return printError(b.status().message), exitFor(b.status());
    const attn::AttentionMaps& maps = *b->maps;
    int layer = -1, head = -1;
    if (!parseIndex("--layer", layerText, maps.layers(), "layer", layer) || !parseIndex("--head", headText, maps.heads(), "head", head))
        return kExitBadInput;
    std::vector<std::pair<int, int>> which;
    for (int l = 0; l < maps.layers(); ++l)
        for (int h = 0; h < maps.heads(); ++h)
            if ((layer < 0 || l == layer) && (head < 0 || h == head)) which.emplace_back(l, h);
    if (format == "npy" && !toDir && which.size() != 1)
        return printError("-o " + out + ": one .npy holds one head's map; name a --layer and a --head, or write a .npz or a "
                          "folder DIR/"), kExitBadInput;
    // 4 bytes a value, held once as float32 and about twice more while a file is encoded (as `export` of sessions).
    const double bytes = double(which.size()) * double(maps.queries()) * double(maps.keys()) * 12.0;
    const double budget = memoryBudgetMiB > 0 ? memoryBudgetMiB * 1024.0 * 1024.0 : double(std::size_t(1) << 33);
    if (bytes > budget)
        return printError("the export of " + std::to_string(which.size()) + " maps of " + std::to_string(maps.queries()) + "×" +
                          std::to_string(maps.keys()) + " needs about " + std::to_string(long(bytes / 1048576.0)) +
                          " MiB, over the budget of " + std::to_string(long(budget / 1048576.0)) +
                          " MiB: export fewer maps (--layer, --head) or raise --memory-budget"), kExitBadInput;
    std::vector<attn::Matrix> values(which.size());
    std::vector<io::NamedArray> arrays;
    for (std::size_t i = 0; i < which.size(); ++i) {
        if (attn::Status s = maps.whole(attn::MapKind::Weights, which[i].first, which[i].second, values[i]); !s.ok())
            return printError(path + ": " + s.message), exitFor(s);
        io::NamedArray a;
        a.name = "weights_L" + std::to_string(which[i].first) + "_H" + std::to_string(which[i].second);
        a.matrix = &values[i];
        arrays.push_back(a);
    }
    attn::Status st;
    if (format == "npy" && !toDir) st = io::writeNpy(out, arrays.front());
    else if (format == "npz") st = io::writeNpz(out, arrays);
    else if (format == "safetensors") st = io::writeSafetensors(out, arrays);
    else st = io::writeArraysToFolder(out, arrays, format == "csv");
    if (!st.ok()) return printError(st.message), st.code == attn::StatusCode::InvalidArgument ? kExitBadInput : kExitCannotWrite;
    std::fprintf(stderr, "attnscope: wrote %zu map%s of %s to %s\n", arrays.size(), arrays.size() == 1 ? "" : "s",
                 path.c_str(), out.c_str());
    return kExitOk;
}

} // namespace app
