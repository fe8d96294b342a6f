// `attnscope export SESSION.json -o OUT.npz|OUT.safetensors|DIR/ [--format npz|safetensors|npy|csv]`
// Writes every input and every result matrix (per head) as named arrays (names: io/session_arrays.h).
#include "cli.h"
#include "cli_session.h"
#include "io/array_io.h"
#include "io/session_arrays.h"

#include <CLI/CLI.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

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
        std::string session, out, format;
        bool inputsOnly = false;
    };
    auto opt = std::make_shared<Options>();
    CLI::App* cmd = root.add_subcommand(
        "export", "Write a session's inputs and every result matrix (per head) as NumPy / safetensors / CSV arrays");
    cmd->add_option("session", opt->session, "Session file (JSON)")->required();
    cmd->add_option("-o,--output", opt->out, "OUT.npz, OUT.safetensors, or a folder DIR/ (one file per array)")->required();
    cmd->add_option("--format", opt->format, "npz | safetensors (one file) or npy | csv (one file per array into DIR/); "
                                             "default from the extension, npy for a folder")
        ->check(CLI::IsMember({"npz", "safetensors", "npy", "csv"}));
    cmd->add_flag("--inputs-only", opt->inputsOnly, "Only the session's inputs, not the computed results");
    cmd->callback([opt, &action] {
        action = [opt]() -> int {
            std::string format = opt->format;
            const bool toDir = endsWith(opt->out, "/") || isDirectory(opt->out);
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
            if (perFile != toDir) {
                printError("--format " + format + (perFile ? " writes one file per array: -o must be a folder (end it with '/')"
                                                           : " writes one file: -o must not be a folder"));
                return kExitBadInput;
            }
            int rc = kExitOk;
            std::optional<LoadedSession> ls = loadForCli(opt->session, !opt->inputsOnly, rc);
            if (!ls) return rc;
            const std::vector<io::NamedArray> arrays = io::sessionArrays(ls->session, opt->inputsOnly ? nullptr : &ls->result);
            attn::Status st;
            if (format == "npz") st = io::writeNpz(opt->out, arrays);
            else if (format == "safetensors") st = io::writeSafetensors(opt->out, arrays);
            else {
                std::string dir = opt->out;
                if (!endsWith(dir, "/")) dir += "/";
                if (!isDirectory(dir) && ::mkdir(dir.c_str(), 0777) != 0) {
                    printError(dir + ": cannot create folder: " + std::strerror(errno));
                    return kExitFailure;
                }
                for (const io::NamedArray& a : arrays) {
                    const std::string path = dir + a.name + "." + format;
                    st = format == "npy" ? io::writeNpy(path, a) : attn::writeFileAtomic(path, io::encodeCsv(a));
                    if (!st.ok()) break;
                }
            }
            if (!st.ok()) {
                printError(st.message);
                return kExitFailure;
            }
            std::fprintf(stderr, "attnscope: wrote %zu arrays to %s\n", arrays.size(), opt->out.c_str());
            return kExitOk;
        };
    });
}

} // namespace app
