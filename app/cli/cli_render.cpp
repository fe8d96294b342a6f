// `attnscope render SESSION.json -o FIG.(png|svg|pdf) [--panel KIND] [--head N|all] [--cmap NAME] [--scale S]
//  [--annotate] [--per-head-range] [--title TEXT]`, or a lesson's figure: `--lesson NAME [--head N] [--query I]
//  [--key J]`.
#include "cli/cli.h"
#include "cli/cli_model.h"
#include "cli/cli_session.h"
#include "figure/figure.h"
#include "figure/figure_render.h"
#include "lessons/lesson_figure.h"
#include "view/heatmap_description.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>

namespace app {

namespace {

struct RenderOptions {
    std::string session, out, panel = "weights", head = "all", cmap, title, lesson;
    int query = 0, key = 0;
    bool titleGiven = false;
    double scale = 2.0;
    double memoryBudgetMiB = 0;
    bool annotate = false, perHeadRange = false;
};

// A head index: digits only, ≥ 0.
bool parseHead(const std::string& text, int& head)
{
    try {
        std::size_t used = 0;
        head = std::stoi(text, &used);
        return used == text.size() && head >= 0;
    } catch (const std::exception&) {
        return false;
    }
}

// Writes `f` to `out`; the exit code (bad input for InvalidArgument, failure otherwise).
int writeOrReport(const fig::Figure& f, const std::string& out, fig::FigureFormat format, double scale)
{
    if (f.annotate && !fig::layoutFigure(f).annotationsFit)
        std::fprintf(stderr, "attnscope: warning: cells too small for --annotate at this size; values not printed\n");
    attn::Status st = fig::writeFigure(f, out, format, scale);
    if (!st.ok()) {
        printError(st.message);
        return st.code == attn::StatusCode::InvalidArgument ? kExitBadInput
               : st.code == attn::StatusCode::IoError       ? kExitCannotWrite
                                                            : kExitFailure;
    }
    return kExitOk;
}

// A figure draws at most every number of the result once. Maps past fig::kMaxVectorCells are one image
// (3 bytes a cell for the pixels, 4 in cairo's surface, the encoded copy), smaller ones a rectangle per cell
// (~150 bytes of SVG or PDF each, at most kMaxVectorCells of them a map): 16 bytes a number bounds both.
std::optional<LoadedSession> loadForFigure(const RenderOptions& o, int& rc)
{
    auto estimate = [](const attn::Session&, const attn::Dims& d) {
        const std::uint64_t cells = resultValueCount(d);
        return OutputEstimate{cells * 4, cells * 16};
    };
    return loadForCli(o.session, true, rc, estimate, std::size_t(o.memoryBudgetMiB * 1024.0 * 1024.0), "the figure",
                      "draw one head (--head N) or another panel (--panel)");
}

int renderLesson(const RenderOptions& o, fig::FigureFormat format)
{
    const std::optional<LessonId> lesson = fig::lessonFigureFromName(o.lesson);
    if (!lesson) return printError("--lesson: expected one of " + lessonFigureList() + ", got '" + attn::clipForMessage(o.lesson) + "'"), kExitBadInput;
    fig::LessonFigureOptions lo;
    lo.lesson = *lesson;
    if (o.head != "all") {
        if (!parseHead(o.head, lo.head))
            return printError("--head: expected a head index ≥ 0 with --lesson, got '" + attn::clipForMessage(o.head) + "'"), kExitBadInput;
    }
    lo.query = o.query;
    lo.key = o.key;
    lo.annotate = true;
    if (o.titleGiven) lo.title = o.title;
    int rc = kExitOk;
    std::optional<LoadedSession> ls = loadForFigure(o, rc);
    if (!ls) return rc;
    attn::Expected<fig::Figure> f = fig::buildLessonFigure(ls->session, ls->result, lo);
    if (!f) return printError(o.session + ": " + f.status().message), kExitBadInput;
    return writeOrReport(*f, o.out, format, o.scale);
}

} // namespace

void addRenderCommand(CLI::App& root, CommandAction& action)
{
    auto opt = std::make_shared<RenderOptions>();
    CLI::App* cmd = root.add_subcommand("render", "Draw a figure of a session to PNG, SVG or PDF (vector, with real text)");
    cmd->add_option("session", opt->session, "Session file (JSON; not with --model-text)");
    std::shared_ptr<ModelRenderCli> model = addModelRenderOptions(*cmd);
    cmd->add_option("-o,--output", opt->out, "FIG.png, FIG.svg or FIG.pdf")->required();
    cmd->add_option("--panel", opt->panel, "What to draw: " + fig::panelKindList() +
                                               " (default weights); with --model-text: weights, model-view, lines or next (a decoder's predictions), and a "
                                               "decoder's importance, dla, types, patching or qk (why --head of --layer attends from --query to --key; docs/interp.md)");
    cmd->add_option("--head", opt->head, "A head index (0-based) or 'all' for a grid of small multiples (default all)");
    cmd->add_option("--cmap", opt->cmap, "viridis | magma | cividis | rdbu (default: viridis for weights, rdbu otherwise)");
    cmd->add_option("--scale", opt->scale, "PNG pixels per point (2 = 144 dpi; default 2)");
    cmd->add_flag("--annotate", opt->annotate, "Print each cell's value in the cell");
    cmd->add_option("--memory-budget", opt->memoryBudgetMiB,
                    "Refuse figures needing more than this many MiB (default: half the machine's RAM)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--per-head-range", opt->perHeadRange, "Each head gets its own colour range and colorbar");
    cmd->add_option("--title", opt->title, "Figure title (\"\" for none; default names the panel)")
        ->each([opt](const std::string&) { opt->titleGiven = true; });
    CLI::Option* lesson = cmd->add_option("--lesson", opt->lesson, "A lesson's figure instead of a panel: " + lessonFigureList());
    cmd->add_option("--query", opt->query, "With --lesson vector_view or additive, or --panel qk: the query i (0-based; default 0)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--key", opt->key, "With --lesson additive or --panel qk: the key j (0-based; default 0)")->check(CLI::NonNegativeNumber);
    lesson->excludes(cmd->get_option("--panel"))->excludes(cmd->get_option("--per-head-range"))->excludes(cmd->get_option("--cmap"));
    cmd->callback([opt, model, cmd, &action] {
        // --model-text "" is a model render of the empty text ([CLS] [SEP]), as `model --text ""` is, not a
        // missing session.
        const bool modelGiven = cmd->get_option("--model-text")->count() > 0;
        action = [opt, model, modelGiven]() -> int {
            if (!model->bundle.empty()) {
                if (!opt->session.empty() || modelGiven)
                    return printError("render: --bundle draws a bundle; give no session or --model-text with it"), kExitBadInput;
                return renderBundleFromCli(model->bundle, opt->panel, std::to_string(model->layer), opt->head == "all" ? "0" : opt->head,
                                           opt->out, opt->scale,
                                           opt->titleGiven ? std::optional<std::string>(opt->title) : std::nullopt);
            }
            model->query = opt->query;  // --panel qk's cell (the options are the lessons' too)
            model->key = opt->key;
            if (modelRenderRequested(*model) || modelGiven)
                return renderModelFromCli(*model, opt->panel, opt->head, opt->out, opt->scale,
                                          opt->titleGiven ? std::optional<std::string>(opt->title) : std::nullopt);
            if (opt->session.empty()) return printError("render: a SESSION.json (or --model-text) is required"), kExitBadInput;
            const std::optional<fig::FigureFormat> format = fig::formatFromPath(opt->out);
            if (!format) return printError("-o " + attn::clipForMessage(opt->out, 200) + ": expected a .png, .svg or .pdf file name"), kExitBadInput;
            if (!opt->lesson.empty()) return renderLesson(*opt, *format);
            fig::FigureOptions fo;
            const std::optional<fig::PanelKind> kind = fig::panelKindFromString(opt->panel);
            if (!kind) return printError("--panel: expected one of " + fig::panelKindList() + ", got '" + attn::clipForMessage(opt->panel) + "'"), kExitBadInput;
            fo.panel = *kind;
            if (opt->head != "all") {
                if (!parseHead(opt->head, fo.head))
                    return printError("--head: expected a head index ≥ 0 or 'all', got '" + attn::clipForMessage(opt->head) + "'"), kExitBadInput;
            }
            if (!opt->cmap.empty()) {
                fo.cmap = attn::colormapFromString(opt->cmap);
                if (!fo.cmap)
                    return printError("--cmap: expected viridis, magma, cividis or rdbu, got '" + attn::clipForMessage(opt->cmap) + "'"), kExitBadInput;
            }
            fo.annotate = opt->annotate;
            fo.sharedRange = !opt->perHeadRange;
            if (opt->titleGiven) fo.title = opt->title;
            int rc = kExitOk;
            std::optional<LoadedSession> ls = loadForFigure(*opt, rc);
            if (!ls) return rc;
            fo.fixedWeightsRange = view::viewFixesWeightsRange(ls->session.viewJson);  // as the window draws it
            fo.weightsScale = view::viewWeightsScale(ls->session.viewJson);
            attn::Expected<fig::Figure> f = fig::buildFigure(ls->session, ls->result, fo);
            if (!f) return printError(opt->session + ": " + f.status().message), kExitBadInput;
            return writeOrReport(*f, opt->out, *format, opt->scale);
        };
    });
}

} // namespace app
