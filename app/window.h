// The attnscope window: `attnscope [SESSION.json] [--screenshot OUT.png --frames N] [--size WxH] ...`.
#pragma once

#include "state/model_state.h"

#include <attnscope/types.h>

#include <string>
#include <vector>

namespace app {

struct WindowOptions {
    std::string sessionPath;       // "" = the default preset (seed 000)
    int width = 1280, height = 800;
    std::string screenshotPath;    // non-empty: render `frames` frames, save the window as PNG, exit
    int frames = 5;
    std::string referencePath;     // with --screenshot: compare with this baseline (missing: write it, fail)
    double threshold = 0.01;       // largest fraction of differing pixels that still passes
    std::string stateDir;          // overrides the XDG state folder
    bool autosave = true;          // --no-autosave
    bool restoreOffer = true;      // --no-restore
    std::vector<std::string> lessons;  // --lesson NAME...: lesson panels to open at start (lessonName names)
    std::string screenshotLesson;  // --screenshot-lesson NAME: open that lesson and save only its panel
    std::vector<std::string> open;     // --open NAME...: windows to open at start: export, file, log
    std::string testHooksDir;      // --test-hooks DIR: layout.json + frame.ppm after each recompute (tests)
    attn::Backend backend = attn::Backend::Cpu;
    bool offscreen = false;        // --offscreen: no display, an EGL context (with --screenshot only)
    ModelStartup model;            // --model-text/--pair/--model-dir: open the model mode at start
};

// Runs the window until it is closed (or the screenshot is taken). Returns an exit code (cli.h).
int runWindow(const WindowOptions& opt);

// `attnscope bench --gui`: frames per second while editing at n=64, d_model=64, h=4, and the edit-to-new-
// picture latency at n=1024, d_model=512, h=8, computed on `backend`, and how the heatmap textures were
// filled (host uploads vs device fills); the frame times while a decoder's forward of `modelTokens` tokens
// runs on the model worker (SmolLM2 when installed, else the tiny test model, cut at its context); and the large
// case (largeN: opening to picture, edits, frames while computing). Off screen (an EGL context, no display) when
// asked. Prints a small table (or JSON); returns an exit code.
struct Bounds;  // cli/bench_bounds.h
// `bounds` (cli/bench_bounds.h, measured by the caller) are printed beside the edit's figures.
struct GuiBenchOptions {
    int frames = 200;
    attn::Backend backend = attn::Backend::Cpu;
    bool json = false;
    int modelTokens = 8192;
    // The large case (the window on a GPU at n = 8192, issue 34): n, or 0 to leave it out; -1: 8192 when the
    // backend is CUDA, else left out (on a CPU it takes minutes and about 10 GB).
    int largeN = -1;
    bool offscreen = false;  // an EGL context instead of a window (Platform)
};
int runGuiBench(const GuiBenchOptions& opt, const Bounds& bounds);

} // namespace app
