// Loading and computing a session for the headless subcommands, within the memory budget.
#include "cli/cli_session.h"

#include "cli/cli.h"

#include <cstdio>

namespace app {

std::string humanSize(std::uint64_t b)
{
    char buf[64];
    if (b >= (std::uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(1ull << 30));
    else if (b >= (std::uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1ull << 20));
    else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
    return buf;
}

std::uint64_t resultValueCount(const attn::Dims& d)
{
    const std::uint64_t T = std::uint64_t(d.T), S = std::uint64_t(d.S), H = std::uint64_t(d.H);
    const std::uint64_t perHead = T * std::uint64_t(d.dq) + S * std::uint64_t(d.dk) + S * std::uint64_t(d.dv) +
                                  3 * T * S + T * std::uint64_t(d.dv);
    return H * perHead + T * H * std::uint64_t(d.dv) + T * std::uint64_t(d.O);
}

std::optional<LoadedSession> loadForCli(const std::string& path, bool compute, int& rc, const OutputEstimator& estimate,
                                        std::size_t budgetBytes, const std::string& what, const std::string& instead)
{
    attn::Expected<attn::Session> s = attn::loadSession(path);
    if (!s) {
        printError(s.status().message);
        rc = kExitBadInput;
        return std::nullopt;
    }
    LoadedSession out{std::move(*s), {}};
    attn::AttentionConfig cfg = out.session.config;
    cfg.backend = attn::Backend::Cpu;
    cfg.memoryBudgetBytes = budgetBytes;
    if (estimate) {
        attn::Expected<attn::Dims> d = attn::validate(out.session.input, cfg);
        if (!d) {
            printError(path + ": " + d.status().message);
            rc = kExitBadInput;
            return std::nullopt;
        }
        const std::size_t budget = budgetBytes ? budgetBytes : attn::defaultMemoryBudget();
        const OutputEstimate e = estimate(out.session, *d);
        const std::uint64_t computeBytes = compute ? std::uint64_t(attn::estimateBytes(*d)) : 0;
        const std::uint64_t need = e.peakBytes + computeBytes;
        // A computation over the budget on its own is left to attn::compute, whose message names it.
        if (need > budget && computeBytes <= budget) {
            printError(path + ": " + what + " would be about " + humanSize(e.fileBytes) + " and need about " +
                       humanSize(need) + " of memory to make, over the memory budget of " + humanSize(budget) + "; " +
                       instead + ", or raise --memory-budget");
            rc = kExitBadInput;
            return std::nullopt;
        }
    }
    if (!compute) return out;
    const attn::Status st = attn::compute(out.session.input, cfg, out.result);
    if (!st.ok()) {
        printError(path + ": " + st.message);
        rc = st.code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
        return std::nullopt;
    }
    for (const std::string& w : out.result.warnings) std::fprintf(stderr, "attnscope: warning: %s\n", w.c_str());
    return out;
}

} // namespace app
