// Shared by the export, import, render and code subcommands: load a session and compute it, with the
// command line's one-line error messages and exit codes; and the output budget every writer checks.
#pragma once

#include <attnscope/attention.h>
#include <attnscope/preset_io.h>
#include <attnscope/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace app {

struct LoadedSession {
    attn::Session session;
    attn::AttentionResult result;
};

// What an output will need, estimated from the sizes alone before anything is computed or drawn.
struct OutputEstimate {
    std::uint64_t fileBytes = 0;   // about this big on disk
    std::uint64_t peakBytes = 0;   // about this much memory while it is made (besides the computation)
};
// Called with the validated sizes before computing; returns the estimate of the output to make.
using OutputEstimator = std::function<OutputEstimate(const attn::Session&, const attn::Dims&)>;

// The numbers in a computed result (per head Q, K, V, scores, mask, weights, output; concat; output).
std::uint64_t resultValueCount(const attn::Dims& d);

// Loads `path` and (when `compute`) computes it on the CPU. When `estimate` is given, the output it
// describes plus the computation must fit in `budgetBytes` (0 = attn::defaultMemoryBudget()), or nothing
// is computed and the message says how big the output would be and `instead` (what to do). On failure
// prints the message and stores the exit code (kExitBadInput for bad input, kExitFailure for an internal
// error) in `rc`, and returns nullopt.
std::optional<LoadedSession> loadForCli(const std::string& path, bool compute, int& rc,
                                        const OutputEstimator& estimate = {}, std::size_t budgetBytes = 0,
                                        const std::string& what = "", const std::string& instead = "");

// "1.2 GiB" / "3.4 MiB" / "512 bytes".
std::string humanSize(std::uint64_t bytes);

} // namespace app
