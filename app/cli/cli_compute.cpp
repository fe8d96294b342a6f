// `attnscope compute SESSION.json [-o RESULT.json] [--backend auto|cpu|cuda] [--reference]`
#include "cli/backend_option.h"
#include "cli/cli.h"
#include "cli/cli_session.h"

#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

namespace app {

void addComputeCommand(CLI::App& root, CommandAction& action)
{
    struct Options {
        std::string session;
        std::string out;
        std::string backend = "cpu";
        bool reference = false;
        double memoryBudgetMiB = 0;
    };
    auto opt = std::make_shared<Options>();
    CLI::App* cmd = root.add_subcommand("compute", "Compute attention for a session file and print the result as JSON");
    cmd->add_option("session", opt->session, "Session file (JSON, see docs/session-format.md)")->required();
    cmd->add_option("-o,--output", opt->out, "Write the result here instead of stdout");
    addBackendOption(*cmd, opt->backend);
    cmd->add_option("--memory-budget", opt->memoryBudgetMiB,
                    "Refuse problems needing more than this many MiB (default: half the machine's RAM)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--reference", opt->reference, "Use the naive reference implementation (the test oracle)");
    cmd->callback([opt, &action] {
        action = [opt]() -> int {
            attn::Expected<attn::Session> s = attn::loadSession(opt->session);
            if (!s) {
                printError(s.status().message);
                return kExitBadInput;  // unreadable, malformed or invalid: all bad input
            }
            attn::AttentionConfig cfg = s->config;
            cfg.backend = parseBackend(opt->backend);
            cfg.cpuPath = opt->reference ? attn::CpuPath::Reference : attn::CpuPath::Fast;
            cfg.memoryBudgetBytes = static_cast<std::size_t>(opt->memoryBudgetMiB * 1024.0 * 1024.0);
            if (int rc = checkBackendUsable(cfg.backend); rc != kExitOk) return rc;
            // The result JSON is estimated before computing (issue 13, finding 4: n = 16384 ran 128 s and died
            // at 17 GB). Measured on a 2-head n = 512 result: ~20 bytes of text a number ("0.123456791043" and a
            // comma), and nlohmann's DOM holds ~16 bytes a value plus array slack while the text is built, so
            // 24 bytes of file and 80 bytes of peak memory a number are upper estimates.
            // A computation over the budget on its own is left to attn::compute, whose message names it.
            const std::size_t budget = cfg.memoryBudgetBytes ? cfg.memoryBudgetBytes : attn::defaultMemoryBudget();
            if (attn::Expected<attn::Dims> d = attn::validate(s->input, cfg); d && attn::estimateBytes(*d) <= budget) {
                const std::uint64_t values = resultValueCount(*d);
                const std::uint64_t file = values * 24, peak = values * 80 + attn::estimateBytes(*d);
                if (peak > budget) {
                    printError(opt->session + ": the result JSON would be about " + humanSize(file) + " (" +
                               std::to_string(values) + " numbers) and need about " + humanSize(peak) +
                               " of memory to write, over the memory budget of " + humanSize(budget) +
                               "; write the arrays instead (attnscope export SESSION -o OUT.npz, 4 bytes a number), "
                               "or raise --memory-budget");
                    return kExitBadInput;
                }
            }
            attn::AttentionResult r;
            attn::Status st = attn::compute(s->input, cfg, r);
            if (!st.ok()) {
                printError(opt->session + ": " + st.message);
                return st.code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
            }
            reportBackendChoice(cfg.backend, r.backend);
            for (const std::string& w : r.warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
            const std::string text = attn::resultToJson(r) + "\n";
            if (opt->out.empty()) {
                std::cout << text << std::flush;
                if (!std::cout.good()) return printError("cannot write the result to stdout"), kExitCannotWrite;
                return kExitOk;
            }
            attn::Status w = attn::writeFileAtomic(opt->out, text);
            if (!w.ok()) {
                printError(w.message);
                return kExitCannotWrite;
            }
            return kExitOk;
        };
    });
}

} // namespace app
