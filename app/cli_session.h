// Shared by the export, import, render and code subcommands: load a session and compute it, with the
// command line's one-line error messages and exit codes.
#pragma once

#include <attnscope/preset_io.h>
#include <attnscope/types.h>

#include <optional>
#include <string>

namespace app {

struct LoadedSession {
    attn::Session session;
    attn::AttentionResult result;
};

// Loads `path` and (when `compute`) computes it on the CPU. On failure prints the message and stores the
// exit code (kExitBadInput for bad input, kExitFailure otherwise) in `rc`, and returns nullopt.
std::optional<LoadedSession> loadForCli(const std::string& path, bool compute, int& rc);

} // namespace app
