// `attnscope export SESSION.json -o OUT.npz|OUT.safetensors|DIR/ [--format npz|safetensors|npy|csv]`
// Writes every input and every result matrix (per head) as named arrays (names: io/session_arrays.h).
#include "cli/cli.h"
#include "cli/cli_model.h"
#include "cli/cli_session.h"
#include "io/array_io.h"
#include "io/session_arrays.h"

#include <CLI/CLI.hpp>

#include <sys/stat.h>

#include <cstdint>

namespace app {

namespace {

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isDirectory(const std::string& path)
{
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

void addExportCommand(CLI::App& root, CommandAction& action)
{
    struct Options {
        std::string session, out, format, bundle, layer, head;
        bool inputsOnly = false;
        double memoryBudgetMiB = 0;
    };
    auto opt = std::make_shared<Options>();
    CLI::App* cmd = root.add_subcommand(
        "export", "Write a session's inputs and every result matrix (per head) as NumPy / safetensors / CSV arrays");
    cmd->add_option("session", opt->session, "Session file (JSON; or --bundle)");
    cmd->add_option("--bundle", opt->bundle, "An attention bundle (docs/bundle.md) instead of a session: its maps as arrays "
                                             "weights_L<l>_H<h> (one map with --layer and --head: OUT.npy)");
    cmd->add_option("--layer", opt->layer, "With --bundle: only this layer (0-based; default every layer)");
    cmd->add_option("--head", opt->head, "With --bundle: only this head (0-based; default every head)");
    cmd->add_option("-o,--output", opt->out, "OUT.npz, OUT.safetensors, or a folder DIR/ (one file per array); with --bundle "
                                             "also OUT.npy (one map)")->required();
    cmd->add_option("--format", opt->format, "npz | safetensors (one file) or npy | csv (one file per array into DIR/); "
                                             "default from the extension, npy for a folder")
        ->check(CLI::IsMember({"npz", "safetensors", "npy", "csv"}));
    cmd->add_flag("--inputs-only", opt->inputsOnly, "Only the session's inputs, not the computed results");
    cmd->add_option("--memory-budget", opt->memoryBudgetMiB,
                    "Refuse exports needing more than this many MiB (default: half the machine's RAM)")
        ->check(CLI::PositiveNumber);
    cmd->callback([opt, &action] {
        action = [opt]() -> int {
            std::string format = opt->format;
            const bool toDir = endsWith(opt->out, "/") || isDirectory(opt->out);
            if (!opt->bundle.empty() && !opt->session.empty())
                return printError("export: give a SESSION.json or --bundle FILE, not both"), kExitBadInput;
            if (opt->bundle.empty() && opt->session.empty())
                return printError("export: a SESSION.json (or --bundle FILE) is required"), kExitBadInput;
            if (opt->bundle.empty() && (!opt->layer.empty() || !opt->head.empty()))
                return printError("export: --layer and --head choose a bundle's maps (--bundle FILE)"), kExitBadInput;
            if (!opt->bundle.empty() && format.empty() && !toDir && endsWith(opt->out, ".npy")) format = "npy";
            if (format.empty()) {
                if (toDir) format = "npy";
                else if (endsWith(opt->out, ".npz")) format = "npz";
                else if (endsWith(opt->out, ".safetensors")) format = "safetensors";
                else {
                    printError("-o " + opt->out + ": cannot tell the format; use .npz, .safetensors, a folder ending "
                               "in '/', or --format");
                    return kExitBadInput;
                }
            }
            const bool perFile = format == "npy" || format == "csv";
            if (!opt->bundle.empty()) {
                if (perFile && !toDir && format == "csv")
                    return printError("--format csv writes one file per array: -o must be a folder (end it with '/')"), kExitBadInput;
                return exportBundleFromCli(opt->bundle, opt->layer, opt->head, opt->out, format, toDir, opt->memoryBudgetMiB);
            }
            if (perFile != toDir) {
                printError("--format " + format + (perFile ? " writes one file per array: -o must be a folder (end it with '/')"
                                                           : " writes one file: -o must not be a folder"));
                return kExitBadInput;
            }
            int rc = kExitOk;
            // Arrays are 4 bytes a number on disk; while a file is built it is held about three times (the
            // encoded arrays, the zip buffer, the finished file), hence 12 bytes a number of peak memory.
            const bool inputsOnly = opt->inputsOnly;
            auto estimate = [inputsOnly](const attn::Session& s, const attn::Dims& d) {
                std::uint64_t values = inputsOnly ? 0 : resultValueCount(d);
                for (const io::NamedArray& a : io::sessionArrays(s, nullptr))
                    values += a.matrix ? std::uint64_t(a.matrix->size()) : a.vector ? std::uint64_t(a.vector->size())
                              : a.mask ? std::uint64_t(a.mask->size()) : a.ints.size();
                return OutputEstimate{values * 4, values * 12};
            };
            std::optional<LoadedSession> ls =
                loadForCli(opt->session, !opt->inputsOnly, rc, estimate,
                           std::size_t(opt->memoryBudgetMiB * 1024.0 * 1024.0), "the export",
                           "export fewer arrays (--inputs-only), or compute the results in NumPy from the exported "
                           "inputs (attnscope code)");
            if (!ls) return rc;
            const std::vector<io::NamedArray> arrays = io::sessionArrays(ls->session, opt->inputsOnly ? nullptr : &ls->result);
            attn::Status st;
            if (format == "npz") st = io::writeNpz(opt->out, arrays);
            else if (format == "safetensors") st = io::writeSafetensors(opt->out, arrays);
            else st = io::writeArraysToFolder(opt->out, arrays, format == "csv");
            if (!st.ok()) {
                printError(st.message);
                return st.code == attn::StatusCode::InvalidArgument ? kExitBadInput : kExitCannotWrite;
            }
            std::fprintf(stderr, "attnscope: wrote %zu arrays to %s\n", arrays.size(), opt->out.c_str());
            return kExitOk;
        };
    });
}

} // namespace app
