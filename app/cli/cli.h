// The command line: `attnscope [SESSION.json] [options]` opens the window; subcommands run headless.
// Each subcommand lives in its own cli_<name>.cpp and registers itself through an add<Name>Command function.
#pragma once

#include <functional>
#include <string>

namespace CLI { class App; }

namespace app {

// Exit codes shared by every subcommand (README "Exit codes", and --help):
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // an unexpected internal error (a bug, or a backend failing at run time)
inline constexpr int kExitBadInput = 2;  // bad input or usage, including a missing or unreadable input file;
                                         // the one-line message on stderr says what and where
inline constexpr int kExitCannotWrite = 3;  // the output could not be written (no such folder, no permission, disk full)
// The same text for --help of the root command.
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 ok; 2 bad input or usage (also a missing or unreadable input); 3 the output could not be\n"
    "written; 1 unexpected internal error.";

// A registered subcommand's action: runs after parsing, returns the exit code.
using CommandAction = std::function<int()>;

// Subcommand registration. Each adds its CLI11 subcommand and stores its action into `action` when the
// subcommand is selected.
void addComputeCommand(CLI::App& root, CommandAction& action);
void addBenchCommand(CLI::App& root, CommandAction& action);
void addRenderCommand(CLI::App& root, CommandAction& action);  // figures: PNG / SVG / PDF
void addExportCommand(CLI::App& root, CommandAction& action);  // arrays out: .npz / .safetensors / .npy / .csv
void addImportCommand(CLI::App& root, CommandAction& action);  // a matrix in from .npy / .npz / .safetensors
void addCodeCommand(CLI::App& root, CommandAction& action);    // NumPy / PyTorch program for a session
void addModelCommand(CLI::App& root, CommandAction& action);   // a trained transformer (docs/model.md)

// Parses argv and runs the selected subcommand (or the window). Never throws.
int runCli(int argc, char** argv);

// Prints "attnscope: <message>" on stderr (one line), the form every error message of the CLI takes.
void printError(const std::string& message);

} // namespace app
