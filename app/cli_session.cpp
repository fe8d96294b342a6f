// Loading and computing a session for the headless subcommands.
#include "cli_session.h"

#include "cli.h"

#include <attnscope/attention.h>

#include <cstdio>

namespace app {

std::optional<LoadedSession> loadForCli(const std::string& path, bool compute, int& rc)
{
    attn::Expected<attn::Session> s = attn::loadSession(path);
    if (!s) {
        printError(s.status().message);
        rc = kExitBadInput;
        return std::nullopt;
    }
    LoadedSession out{std::move(*s), {}};
    if (!compute) return out;
    attn::AttentionConfig cfg = out.session.config;
    cfg.backend = attn::Backend::Cpu;
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
