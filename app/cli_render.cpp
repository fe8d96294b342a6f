// `attnscope render SESSION.json -o FIG.(png|svg|pdf) [--panel KIND] [--head N|all] [--cmap NAME] [--scale S]
//  [--annotate] [--per-head-range] [--title TEXT]`
#include "cli.h"
#include "cli_session.h"
#include "figure/figure.h"
#include "figure/figure_render.h"

#include <CLI/CLI.hpp>

#include <cstdio>

namespace app {

void addRenderCommand(CLI::App& root, CommandAction& action)
{
    struct Options {
        std::string session, out, panel = "weights", head = "all", cmap, title;
        bool titleGiven = false;
        double scale = 2.0;
        bool annotate = false, perHeadRange = false;
    };
    auto opt = std::make_shared<Options>();
    CLI::App* cmd = root.add_subcommand("render", "Draw a figure of a session to PNG, SVG or PDF (vector, with real text)");
    cmd->add_option("session", opt->session, "Session file (JSON)")->required();
    cmd->add_option("-o,--output", opt->out, "FIG.png, FIG.svg or FIG.pdf")->required();
    cmd->add_option("--panel", opt->panel, "What to draw: " + fig::panelKindList() + " (default weights)");
    cmd->add_option("--head", opt->head, "A head index (0-based) or 'all' for a grid of small multiples (default all)");
    cmd->add_option("--cmap", opt->cmap, "viridis | magma | cividis | rdbu (default: viridis for weights, rdbu otherwise)");
    cmd->add_option("--scale", opt->scale, "PNG pixels per point (2 = 144 dpi; default 2)");
    cmd->add_flag("--annotate", opt->annotate, "Print each cell's value in the cell");
    cmd->add_flag("--per-head-range", opt->perHeadRange, "Each head gets its own colour range and colorbar");
    cmd->add_option("--title", opt->title, "Figure title (\"\" for none; default names the panel)")
        ->each([opt](const std::string&) { opt->titleGiven = true; });
    cmd->callback([opt, &action] {
        action = [opt]() -> int {
            const std::optional<fig::FigureFormat> format = fig::formatFromPath(opt->out);
            if (!format) return printError("-o " + opt->out + ": expected a .png, .svg or .pdf file name"), kExitBadInput;
            fig::FigureOptions fo;
            const std::optional<fig::PanelKind> kind = fig::panelKindFromString(opt->panel);
            if (!kind) return printError("--panel: expected one of " + fig::panelKindList() + ", got '" + opt->panel + "'"), kExitBadInput;
            fo.panel = *kind;
            if (opt->head != "all") {
                try {
                    std::size_t used = 0;
                    fo.head = std::stoi(opt->head, &used);
                    if (used != opt->head.size() || fo.head < 0) throw std::invalid_argument("head");
                } catch (const std::exception&) {
                    return printError("--head: expected a head index ≥ 0 or 'all', got '" + opt->head + "'"), kExitBadInput;
                }
            }
            if (!opt->cmap.empty()) {
                fo.cmap = attn::colormapFromString(opt->cmap);
                if (!fo.cmap)
                    return printError("--cmap: expected viridis, magma, cividis or rdbu, got '" + opt->cmap + "'"), kExitBadInput;
            }
            fo.annotate = opt->annotate;
            fo.sharedRange = !opt->perHeadRange;
            if (opt->titleGiven) fo.title = opt->title;
            int rc = kExitOk;
            std::optional<LoadedSession> ls = loadForCli(opt->session, true, rc);
            if (!ls) return rc;
            attn::Expected<fig::Figure> f = fig::buildFigure(ls->session, ls->result, fo);
            if (!f) return printError(opt->session + ": " + f.status().message), kExitBadInput;
            if (fo.annotate && !fig::layoutFigure(*f).annotationsFit)
                std::fprintf(stderr, "attnscope: warning: cells too small for --annotate at this size; values not printed\n");
            attn::Status st = fig::writeFigure(*f, opt->out, *format, opt->scale);
            if (!st.ok()) {
                printError(st.message);
                return st.code == attn::StatusCode::InvalidArgument ? kExitBadInput : kExitFailure;
            }
            return kExitOk;
        };
    });
}

} // namespace app
