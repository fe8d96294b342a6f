#include "cli/backend_option.h"

#include "cli/cli.h"

#include <attnscope/attention.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>

namespace app {

void addBackendOption(CLI::App& cmd, std::string& value)
{
    cmd.add_option("--backend", value, "Compute backend: auto (GPU if present, else CPU), cpu, cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
}

attn::Backend parseBackend(const std::string& value)
{
    if (value == "auto") return attn::Backend::Auto;
    if (value == "cuda") return attn::Backend::Cuda;
    return attn::Backend::Cpu;
}

int checkBackendUsable(attn::Backend requested)
{
    if (requested != attn::Backend::Cuda) return kExitOk;
    const auto avail = attn::availableBackends();
    if (std::find(avail.begin(), avail.end(), attn::Backend::Cuda) != avail.end()) return kExitOk;
    printError("--backend cuda: " + attn::backendDescription(attn::Backend::Cuda) +
               "; use --backend auto or cpu");
    return kExitBadInput;
}

void reportBackendChoice(attn::Backend requested, attn::Backend used)
{
    if (requested != attn::Backend::Auto) return;
    if (used == attn::Backend::Cuda)
        std::fprintf(stderr, "attnscope: backend auto: using %s\n", attn::backendDescription(attn::Backend::Cuda).c_str());
    else
        std::fprintf(stderr, "attnscope: backend auto: no usable CUDA device (%s), using %s\n",
                     attn::backendDescription(attn::Backend::Cuda).c_str(),
                     attn::backendDescription(attn::Backend::Cpu).c_str());
}

} // namespace app
