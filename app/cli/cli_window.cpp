#include "cli/cli_window.h"

#include "cli/backend_option.h"
#include "cli/bench_bounds.h"
#include "cli/cli.h"
#include "state/app_state.h"
#include "state/model_state.h"
#include "state/paths.h"
#include "state/text_file.h"

#include <attnscope/decoder.h>  // supportedDecoderArchitectures
#include <CLI/CLI.hpp>

#include <cstdio>

namespace app {

namespace {
std::vector<std::string> lessonNames()
{
    std::vector<std::string> names;
    for (int i = 0; i < kLessonCount; ++i) names.emplace_back(lessonName(LessonId(i)));
    return names;
}
} // namespace

void addWindowOptions(CLI::App& root, WindowCli& cli)
{
    WindowOptions& o = cli.options;
    // The defaults name the folders found (presets, models), so --help shows where an installed program looks.
    const std::string presets = presetsDirectory();
    root.add_option("session", o.sessionPath,
                    "Session file to open (default: the seed 000 preset, " +
                        (presets.empty() ? std::string("not found: no assets/presets beside the program")
                                         : presets + "/seed000_worked_example.json") + ")");
    root.add_option("--screenshot", o.screenshotPath, "Render --frames frames, save the window as PNG, exit");
    root.add_option("--frames", o.frames, "Frames to render before the screenshot")->check(CLI::Range(1, 100000));
    root.add_option("--reference", o.referencePath, "With --screenshot: baseline PNG to compare with (written when missing, and the run fails)");
    root.add_option("--threshold", o.threshold, "With --reference: largest fraction of differing pixels that passes")->check(CLI::Range(0.0, 1.0));
    root.add_option("--size", cli.size, "Window size WxH (default 1280x800)");
    root.add_option("--state-dir", o.stateDir, "Folder for the autosave and recent files (default $XDG_STATE_HOME/attnscope)");
    root.add_flag("--no-autosave{false}", o.autosave, "Do not save the session automatically");
    root.add_flag("--no-restore{false}", o.restoreOffer, "Do not offer the autosaved session back at start");
    root.add_option("--lesson", o.lessons,
                    "Open a lesson panel at start (repeatable): vector_view, two_formulas, scaling, heads, additive, "
                    "masks, image_patches")
        ->check(CLI::IsMember(lessonNames()))
        ->allow_extra_args(false);
    root.add_option("--screenshot-lesson", o.screenshotLesson,
                    "With --screenshot: open this lesson panel and save only the panel (a lesson view as PNG)")
        ->check(CLI::IsMember(lessonNames()));
    root.add_option("--open", o.open,
                    "Open a window at start (repeatable): export (File → Export…), file (Open / save), log (messages)")
        ->check(CLI::IsMember({"export", "file", "log"}))
        ->allow_extra_args(false);
    root.add_option("--test-hooks", o.testHooksDir, "Write widget rectangles and frames into DIR (end-to-end tests)");
    root.add_flag("--offscreen", o.offscreen,
                  "With --screenshot: render without a display, into an off-screen OpenGL context from EGL (a GPU's EGL "
                  "device, or Mesa's surfaceless platform)");
    // The text goes into the window's text field, which needs UTF-8 (ImGui asserts on typing into other bytes).
    const auto utf8 = [](const std::string& s) {
        const std::string bad = invalidUtf8Byte(s);
        return bad.empty() ? bad : "not UTF-8 (" + bad + "); expected UTF-8 text";
    };
    root.add_option("--model-text", o.model.text, "Open the model mode with this sentence A (docs/model.md)")->check(utf8);
    root.add_option("--model-text-file", "Open the model mode with the text of this file (a long text: a decoder runs it "
                                         "lazily past 1024 tokens, truncated past the model's context)")
        ->each([&o](const std::string& path) {
            auto text = readTextFile(path);  // as File → Open text… reads it (UTF-8, at most 4 MiB)
            if (!text) throw CLI::ValidationError("--model-text-file", text.status().message);
            o.model.text = std::move(*text);
        });
    root.add_option("--pair", o.model.pair, "With --model-text: sentence B")->check(utf8);
    root.add_option("--model-dir", o.model.dir, "The model directory (default: " + defaultModelDirectory() + ")");
    root.add_option("--model", o.model.dir,
                    std::string("The model: a .gguf file (a decoder language model) or a Hugging Face directory (bert, ") +
                        attn::supportedDecoderArchitectures() + "); --model-dir is the same");
    root.add_option("--model-layer", o.model.openLayer, "With --model-text: open this layer in the chain view");
    root.add_option("--why", o.model.why,
                    "With a decoder: show this view over the grid (docs/interp.md): attention, importance, dla, lens, "
                    "types or patching")
        ->check(CLI::IsMember({"attention", "importance", "dla", "lens", "types", "patching"}));
    root.add_option("--patch-from", o.model.patchFrom,
                    "With a decoder: patch each head from this clean prompt into the text (of equal token length)");
    root.add_option("--targets", o.model.targets, "With --patch-from: the metric's tokens A,B (logit(A) − logit(B))");
    addBackendOption(root, cli.backend);
    if (CLI::App* bench = root.get_subcommand("bench")) {
        bench->add_flag("--gui", cli.benchGui, "Benchmark the window instead: frames/s while editing, edit-to-picture latency");
        bench->add_option("--gui-frames", cli.benchFrames, "Frames to time with --gui")->check(CLI::Range(10, 100000));
        bench->add_option("--gui-model-tokens", cli.benchModelTokens,
                          "With --gui: the tokens of the decoder forward run while frames are timed (cut at the model's "
                          "context; default 8192)")
            ->check(CLI::Range(1, 1 << 20));
        bench->add_option("--gui-large-n", cli.benchLargeN,
                          "With --gui: n of the large case (d_model 512, 8 heads: the whole map pooled, edits, frames "
                          "while computing); 0 leaves it out (default: 8192 with --backend cuda, else left out)")
            ->check(CLI::Range(0, 65536));
        bench->add_flag("--offscreen", cli.benchOffscreen,
                        "With --gui: render without a display, into an off-screen OpenGL context from EGL");
        // `bench --json` belongs to the bench command (app/cli_bench.cpp); it is added here only when that file
        // does not, so that `bench --gui --json` works either way.
        if (bench->get_option_no_throw("--json") == nullptr)
            bench->add_flag("--json", cli.benchJson, "Print one JSON object instead of the table");
    }
}

int runWindowFromCli(WindowCli& cli)
{
    int w = 0, h = 0;
    char x = 0;
    if (std::sscanf(cli.size.c_str(), "%d%c%d", &w, &x, &h) != 3 || (x != 'x' && x != 'X') || w < 320 || h < 240 ||
        w > 16384 || h > 16384) {
        printError("--size: expected WxH with W in 320…16384 and H in 240…16384, got \"" + cli.size + "\"");
        return kExitBadInput;
    }
    cli.options.width = w;
    cli.options.height = h;
    cli.options.backend = parseBackend(cli.backend);
    if (cli.options.offscreen && cli.options.screenshotPath.empty()) {
        // Nothing could end an off-screen window but a signal: it has no close button and no input.
        printError("--offscreen: expected --screenshot PATH too (an off-screen window renders its frames, saves the "
                   "picture and exits), got no --screenshot");
        return kExitBadInput;
    }
    if (int rc = checkBackendUsable(cli.options.backend); rc != kExitOk) return rc;
    return runWindow(cli.options);
}

int runGuiBenchFromCli(const CLI::App& root, const WindowCli& cli)
{
    // `bench --gui --backend cuda` sets the bench subcommand's --backend; `--backend cuda bench --gui` the root's.
    std::string name = cli.backend;
    if (const CLI::App* bench = root.get_subcommand("bench"))
        if (const CLI::Option* o = bench->get_option_no_throw("--backend"); o && o->count() > 0) name = o->as<std::string>();
    const attn::Backend backend = parseBackend(name);
    if (int rc = checkBackendUsable(backend); rc != kExitOk) return rc;
    bool json = cli.benchJson;
    if (const CLI::App* bench = root.get_subcommand("bench"))
        if (const CLI::Option* o = bench->get_option_no_throw("--json"); o && o->count() > 0) json = true;
    GuiBenchOptions o;
    o.frames = cli.benchFrames;
    o.backend = backend;
    o.json = json;
    o.modelTokens = cli.benchModelTokens;
    o.largeN = cli.benchLargeN;
    o.offscreen = cli.benchOffscreen || cli.options.offscreen;
    return runGuiBench(o, measureBounds());
}

} // namespace app
