// The --backend option shared by compute, bench and the window.
#pragma once

#include <attnscope/types.h>

#include <string>

namespace CLI { class App; }

namespace app {

// Adds `--backend auto|cpu|cuda` (validated by CLI11) bound to `value`.
void addBackendOption(CLI::App& cmd, std::string& value);
attn::Backend parseBackend(const std::string& value);
// kExitOk when the requested backend can run here; otherwise prints why and returns kExitBadInput
// (e.g. --backend cuda without a device).
int checkBackendUsable(attn::Backend requested);
// With --backend auto, says once on stderr which backend was used.
void reportBackendChoice(attn::Backend requested, attn::Backend used);

} // namespace app
