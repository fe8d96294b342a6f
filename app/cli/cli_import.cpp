// `attnscope import SESSION.json --slot Wq --from FILE [--tensor NAME] [--transpose] [--rows a:b] [--cols a:b]
//  [--head i --heads h] -o NEW.json`, and `attnscope import --list FILE`.
#include "cli/cli.h"
#include "io/array_io.h"
#include "io/session_arrays.h"

#include <attnscope/preset_io.h>

#include <CLI/CLI.hpp>

#include <iostream>

namespace app {

namespace {

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Lists the arrays in a file, one "name  dtype  shape" per line.
int listFile(const std::string& path)
{
    if (endsWith(path, ".safetensors")) {
        attn::Expected<std::vector<io::TensorInfo>> t = io::listSafetensors(path);
        if (!t) return printError(t.status().message), kExitBadInput;
        for (const io::TensorInfo& i : *t) std::cout << i.name << "  " << io::toString(i.dtype) << "  " << io::shapeString(i.shape) << "\n";
        return kExitOk;
    }
    if (endsWith(path, ".npz")) {
        attn::Expected<std::vector<std::string>> names = io::listNpz(path);
        if (!names) return printError(names.status().message), kExitBadInput;
        for (const std::string& n : *names) {
            attn::Expected<io::Array> a = io::readNpz(path, n);
            if (a) std::cout << n << "  " << io::toString(a->dtype) << "  " << io::shapeString(a->shape) << "\n";
            else std::cout << n << "  (unreadable: " << a.status().message << ")\n";
        }
        return kExitOk;
    }
    attn::Expected<io::Array> a = io::readNpy(path);
    if (!a) return printError(a.status().message), kExitBadInput;
    std::cout << "(array)  " << io::toString(a->dtype) << "  " << io::shapeString(a->shape) << "\n";
    return kExitOk;
}

} // namespace

void addImportCommand(CLI::App& root, CommandAction& action)
{
    struct Options {
        std::string session, slot, from, tensor, rows, cols, out, list;
        bool transpose = false;
        int head = -1, heads = 0;
    };
    auto opt = std::make_shared<Options>();
    std::string slots;
    for (const std::string& n : io::slotNames()) slots += (slots.empty() ? "" : ", ") + n;
    CLI::App* cmd = root.add_subcommand(
        "import", "Put a matrix from .npy / .npz / .safetensors into one input of a session and save it as a new session");
    cmd->add_option("session", opt->session, "Session file (JSON)");
    cmd->add_option("--slot", opt->slot, "The input to replace: " + slots);
    cmd->add_option("--from", opt->from, "FILE.npy, FILE.npz or FILE.safetensors");
    cmd->add_option("--tensor,--array", opt->tensor, "Array name in an .npz, tensor name in a .safetensors");
    cmd->add_flag("--transpose", opt->transpose,
                  "Transpose first (PyTorch nn.Linear weights are out×in; attnscope's W is d_model × H·d_k)");
    cmd->add_option("--rows", opt->rows, "Row range a:b (half-open, after --transpose)");
    cmd->add_option("--cols", opt->cols, "Column range a:b (half-open, after --transpose)");
    cmd->add_option("--head", opt->head, "Keep head i's block of columns (after the ranges); needs --heads")->check(CLI::NonNegativeNumber);
    cmd->add_option("--heads", opt->heads, "Number of equal column blocks for --head")->check(CLI::PositiveNumber);
    cmd->add_option("-o,--output", opt->out, "Where to write the new session (JSON)");
    cmd->add_option("--list", opt->list, "Only list the arrays / tensors in this file, with dtype and shape");
    cmd->callback([opt, &action] {
        action = [opt]() -> int {
            if (!opt->list.empty()) return listFile(opt->list);
            for (const auto& [value, flag] : {std::pair{&opt->session, "SESSION"}, std::pair{&opt->slot, "--slot"},
                                              std::pair{&opt->from, "--from"}, std::pair{&opt->out, "-o"}})
                if (value->empty()) return printError(std::string("import: ") + flag + " is required"), kExitBadInput;
            if ((opt->head >= 0) != (opt->heads > 0))
                return printError("import: --head and --heads go together"), kExitBadInput;
            io::SliceSpec spec;
            spec.transpose = opt->transpose;
            spec.head = opt->head;
            spec.heads = std::max(1, opt->heads);
            for (const auto& [text, range, name] : {std::tuple{&opt->rows, &spec.rows, "--rows"}, std::tuple{&opt->cols, &spec.cols, "--cols"}}) {
                if (text->empty()) continue;
                attn::Expected<io::Range> r = io::parseRange(*text, name);
                if (!r) return printError(r.status().message), kExitBadInput;
                *range = *r;
            }
            attn::Expected<attn::Session> s = attn::loadSession(opt->session);
            if (!s) return printError(s.status().message), kExitBadInput;

            const bool st = endsWith(opt->from, ".safetensors"), npz = endsWith(opt->from, ".npz");
            if ((st || npz) && opt->tensor.empty())
                return printError(opt->from + ": --tensor NAME is required (see: attnscope import --list " + opt->from + ")"),
                       kExitBadInput;
            attn::Expected<io::Array> a = st ? io::readSafetensors(opt->from, opt->tensor)
                                          : npz ? io::readNpz(opt->from, opt->tensor)
                                                : io::readNpy(opt->from);
            if (!a) return printError(a.status().message), kExitBadInput;  // missing, unreadable or corrupt: bad input
            const std::string source = opt->from + (opt->tensor.empty() ? "" : "[" + opt->tensor + "]");
            attn::Expected<attn::Matrix> m = io::toMatrix(*a, spec, source);
            if (!m) return printError(m.status().message), kExitBadInput;
            if (attn::Status set = io::setSlot(*s, opt->slot, *m); !set.ok())
                return printError(opt->session + ": " + set.message), kExitBadInput;
            // The written session must load: parse what would be written with the same checks every reader
            // applies (e.g. a 5-row X imported into a session with 4 token labels is refused here, not later).
            const std::string text = attn::sessionToJson(*s) + "\n";
            if (attn::Expected<attn::Session> check = attn::parseSession(text, opt->out); !check)
                return printError("import: the new session would not load, so it was not written: " +
                                  check.status().message),
                       kExitBadInput;
            if (attn::Status w = attn::writeFileAtomic(opt->out, text); !w.ok()) return printError(w.message), kExitCannotWrite;
            std::fprintf(stderr, "attnscope: %s ← %s %s (%ld×%ld); wrote %s\n", opt->slot.c_str(), source.c_str(),
                         io::toString(a->dtype), long(m->rows()), long(m->cols()), opt->out.c_str());
            return kExitOk;
        };
    });
}

} // namespace app
