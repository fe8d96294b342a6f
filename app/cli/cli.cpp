// Command-line dispatcher: builds the CLI11 parser from each subcommand's registration function.
#include "cli/cli.h"
#include "cli/cli_window.h"

#include <attnscope/preset_io.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

namespace app {

void printError(const std::string& message) { std::fprintf(stderr, "attnscope: %s\n", message.c_str()); }

int runCli(int argc, char** argv)
{
    CLI::App root{"attnscope: see and edit transformer attention.\n"
                  "With no subcommand it opens the window; the subcommands run without one.",
                  "attnscope"};
    root.set_version_flag("--version", "attnscope " ATTNSCOPE_VERSION);  // the CMake project's VERSION
    root.footer(kExitCodesHelp);
    root.require_subcommand(0, 1);

    CommandAction action;
    addComputeCommand(root, action);
    addBenchCommand(root, action);
    addRenderCommand(root, action);
    addExportCommand(root, action);
    addImportCommand(root, action);
    addCodeCommand(root, action);
    addModelCommand(root, action);
    WindowCli window;
    addWindowOptions(root, window);
    for (CLI::App* sub : root.get_subcommands([](CLI::App*) { return true; })) sub->footer(kExitCodesHelp);

    try {
        root.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return root.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return root.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return root.exit(e);
    } catch (const CLI::ParseError& e) {
        printError(attn::clipForMessage(e.what(), 300));  // CLI11 echoes the bad value, which may be huge
        std::fprintf(stderr, "Run 'attnscope --help' for usage.\n");
        return kExitBadInput;
    }

    try {
        if (window.benchGui) return runGuiBenchFromCli(root, window);
        if (action) return action();
        return runWindowFromCli(window);
    } catch (const std::exception& e) {
        // Nothing below should throw; if something does (e.g. std::bad_alloc), say so instead of aborting.
        printError(std::string("unexpected error: ") + e.what());
        return kExitFailure;
    }
}

} // namespace app
