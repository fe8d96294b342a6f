// `attnscope code SESSION.json [--lang numpy|torch] [-o FILE.py]`
#include "cli/cli.h"
#include "io/code_snippet.h"

#include <attnscope/preset_io.h>

#include <CLI/CLI.hpp>

#include <iostream>

namespace app {

void addCodeCommand(CLI::App& root, CommandAction& action)
{
    struct Options {
        std::string session, lang = "numpy", out;
    };
    auto opt = std::make_shared<Options>();
    CLI::App* cmd = root.add_subcommand("code", "Print a NumPy or PyTorch program that rebuilds the session and computes the same attention");
    cmd->add_option("session", opt->session, "Session file (JSON)")->required();
    cmd->add_option("--lang", opt->lang, "numpy | torch (default numpy)")->check(CLI::IsMember({"numpy", "torch"}));
    cmd->add_option("-o,--output", opt->out, "Write the program here instead of stdout");
    cmd->callback([opt, &action] {
        action = [opt]() -> int {
            attn::Expected<attn::Session> s = attn::loadSession(opt->session);
            if (!s) return printError(s.status().message), kExitBadInput;
            attn::Expected<std::string> code =
                io::sessionCode(*s, opt->lang == "torch" ? io::CodeLang::Torch : io::CodeLang::NumPy);
            if (!code) return printError(opt->session + ": " + code.status().message), kExitBadInput;
            if (opt->out.empty()) {
                std::cout << *code << std::flush;
                if (!std::cout.good()) return printError("cannot write the program to stdout"), kExitCannotWrite;
                return kExitOk;
            }
            if (attn::Status w = attn::writeFileAtomic(opt->out, *code); !w.ok()) return printError(w.message), kExitCannotWrite;
            return kExitOk;
        };
    });
}

} // namespace app
