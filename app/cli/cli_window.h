// The window's command-line options (on the root command) and `bench --gui`.
#pragma once

#include "window.h"

namespace CLI { class App; }

namespace app {

struct WindowCli {
    WindowOptions options;
    std::string size = "1280x800";
    std::string backend = "cpu";
    bool benchGui = false;
    int benchFrames = 200;
    int benchModelTokens = 8192;  // bench --gui: the decoder forward's tokens (issue 18's case)
    int benchLargeN = -1;         // bench --gui: the large case's n (GuiBenchOptions::largeN)
    bool benchOffscreen = false;  // bench --gui --offscreen
    bool benchJson = false;  // bench --json (registered here only when app/cli_bench.cpp does not)
};

// Adds SESSION, --screenshot, --frames, --reference, --threshold, --size, --state-dir, --no-autosave,
// --no-restore, --lesson, --open, --test-hooks, --offscreen, --backend to `root`, and --gui, --gui-frames,
// --gui-model-tokens, --gui-large-n, --offscreen to its "bench" subcommand.
void addWindowOptions(CLI::App& root, WindowCli& cli);
// Runs the window (after parsing, when no subcommand was given). Bad --size, or --offscreen without --screenshot:
// kExitBadInput with a message.
int runWindowFromCli(WindowCli& cli);
// Runs `bench --gui` with the bench's --backend (or the root's): kExitBadInput when that backend cannot run.
int runGuiBenchFromCli(const CLI::App& root, const WindowCli& cli);

} // namespace app
