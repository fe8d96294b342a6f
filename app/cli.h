// The command line: `attnscope [SESSION.json] [options]` opens the window; subcommands run headless.
// Each subcommand lives in its own cli_<name>.cpp and registers itself through an add<Name>Command function.
#pragma once

#include <functional>
#include <string>

namespace CLI { class App; }

namespace app {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // an operation failed for a reason outside the input (I/O, device)
inline constexpr int kExitBadInput = 2;  // bad input: the one-line message on stderr says what and where
inline constexpr int kExitCannotWrite = 3;

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
