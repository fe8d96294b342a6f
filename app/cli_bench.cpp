// `attnscope bench`: times the full recompute of the fast path(s) against the naive reference on the same
// random problem in the same run, and prints both with their ratio and the per-phase split.
#include "backend_option.h"
#include "cli.h"

#include <attnscope/attention.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

namespace app {
namespace {

struct BenchOptions {
    int n = 1024;
    int dModel = 512;
    int heads = 8;
    bool causal = false;
    std::string backend = "cpu";
    int repeat = 5;
    int referenceRepeat = 1;
    bool skipReference = false;
    bool skipCpu = false;  // time only the GPU (and the reference unless skipped): large n on a GPU machine
    unsigned seed = 1;
};

attn::Matrix randomMatrix(std::mt19937& rng, int rows, int cols, float stddev)
{
    std::normal_distribution<float> dist(0.0f, stddev);
    attn::Matrix m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
    return m;
}

struct Sample {
    double medianMs = 0;
    double minMs = 0;
    attn::PhaseTimings phases;  // of the median run
    attn::Backend backend = attn::Backend::Cpu;
};

// Runs compute() `repeat` times into one reused result (as the window does) and keeps the median run.
attn::Expected<Sample> timeRuns(const attn::AttentionInput& in, const attn::AttentionConfig& cfg, int repeat)
{
    attn::AttentionResult r;
    std::vector<std::pair<double, attn::PhaseTimings>> runs;
    for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        attn::Status s = attn::compute(in, cfg, r);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (!s.ok()) return s;
        runs.emplace_back(ms, r.timings);
    }
    std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    Sample out;
    out.medianMs = runs[runs.size() / 2].first;
    out.minMs = runs.front().first;
    out.phases = runs[runs.size() / 2].second;
    out.backend = r.backend;
    return out;
}

void printRow(const char* name, const Sample& s, double refMs)
{
    const auto& p = s.phases;
    std::printf("%-22s %10.2f %10.2f", name, s.medianMs, s.minMs);
    if (refMs > 0) std::printf(" %9.1fx", refMs / s.medianMs);
    else std::printf(" %10s", "-");
    // The reference (plain loops, the oracle) does not time its phases: say so rather than print zeros.
    if (p.projections + p.scores + p.softmax + p.pv + p.output + p.copies <= 0) {
        std::printf("   (not timed per phase)\n");
        return;
    }
    std::printf("   proj %.2f  scores %.2f  softmax %.2f  PV %.2f  W^O %.2f  copies %.2f\n", p.projections, p.scores,
                p.softmax, p.pv, p.output, p.copies);
}

int runBench(const BenchOptions& o)
{
    if (o.n < 1 || o.dModel < 1 || o.heads < 1 || o.repeat < 1) {
        printError("bench: --n, --d-model, --heads and --repeat must be at least 1");
        return kExitBadInput;
    }
    if (o.dModel % o.heads != 0) {
        printError("bench: --heads " + std::to_string(o.heads) + " does not divide --d-model " + std::to_string(o.dModel));
        return kExitBadInput;
    }
    const attn::Backend requested = parseBackend(o.backend);
    if (int rc = checkBackendUsable(requested); rc != kExitOk) return rc;
    if (o.skipCpu && requested == attn::Backend::Cpu) {
        printError("bench: --skip-cpu needs --backend cuda or auto (with --backend cpu nothing would be timed)");
        return kExitBadInput;
    }

    std::mt19937 rng(o.seed);
    attn::AttentionInput in;
    // Xavier-like scaling keeps scores in a realistic range, so softmax is not trivially one-hot.
    const float wStd = 1.0f / std::sqrt(float(o.dModel));
    in.X = randomMatrix(rng, o.n, o.dModel, 1.0f);
    in.Wq = randomMatrix(rng, o.dModel, o.dModel, wStd);
    in.Wk = randomMatrix(rng, o.dModel, o.dModel, wStd);
    in.Wv = randomMatrix(rng, o.dModel, o.dModel, wStd);
    in.Wo = randomMatrix(rng, o.dModel, o.dModel, wStd);
    in.mask.causal = o.causal;

    attn::AttentionConfig cfg;
    cfg.heads = o.heads;
    cfg.backend = attn::Backend::Cpu;

    std::printf("attnscope bench: self-attention, n=%d, d_model=%d, heads=%d (d_k=%d), %s, W^O on\n", o.n, o.dModel,
                o.heads, o.dModel / o.heads, o.causal ? "causal mask" : "no mask");
    std::printf("times in ms: median and min of %d run(s) (reference: %d); ratio = reference median / median\n\n",
                o.repeat, o.referenceRepeat);
    std::printf("%-22s %10s %10s %10s   %s\n", "path", "median", "min", "speed-up", "phases of the median run (ms)");

    double refMs = 0;
    Sample ref;
    if (!o.skipReference) {
        cfg.cpuPath = attn::CpuPath::Reference;
        auto r = timeRuns(in, cfg, o.referenceRepeat);
        if (!r) {
            printError("bench: " + r.status().message);
            return kExitBadInput;
        }
        ref = *r;
        refMs = ref.medianMs;
    }
    cfg.cpuPath = attn::CpuPath::Fast;
    Sample eigen;
    if (!o.skipCpu) {
        auto r = timeRuns(in, cfg, o.repeat);
        if (!r) {
            printError("bench: " + r.status().message);
            return kExitBadInput;
        }
        eigen = *r;
    }
    if (!o.skipReference) printRow("cpu reference (loops)", ref, refMs);
    if (!o.skipCpu) printRow("cpu eigen", eigen, refMs);

    if (requested != attn::Backend::Cpu) {
        cfg.backend = requested;
        auto gpu = timeRuns(in, cfg, o.repeat);
        if (!gpu) {
            printError("bench: " + gpu.status().message);
            return gpu.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
        }
        reportBackendChoice(requested, gpu->backend);
        if (gpu->backend == attn::Backend::Cuda) {
            printRow("cuda", *gpu, refMs);
            if (!o.skipCpu) std::printf("\ncuda vs cpu eigen: %.1fx\n", eigen.medianMs / gpu->medianMs);
        }
    }
    std::printf("\nbackend: %s\n", attn::backendDescription(attn::Backend::Cpu).c_str());
    return kExitOk;
}

} // namespace

void addBenchCommand(CLI::App& root, CommandAction& action)
{
    auto o = std::make_shared<BenchOptions>();
    CLI::App* cmd = root.add_subcommand("bench", "Time the fast path(s) against the naive reference, side by side");
    cmd->add_option("--n", o->n, "Number of tokens (queries = keys)")->capture_default_str()->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--d-model", o->dModel, "Model width (projections are d_model × d_model)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 16));
    cmd->add_option("--heads", o->heads, "Number of heads")->capture_default_str()->check(CLI::Range(1, 4096));
    cmd->add_flag("--causal", o->causal, "Apply a causal mask");
    addBackendOption(*cmd, o->backend);
    cmd->add_option("--repeat", o->repeat, "Runs of each fast path")->capture_default_str()->check(CLI::Range(1, 1000));
    cmd->add_option("--reference-repeat", o->referenceRepeat, "Runs of the reference")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    cmd->add_flag("--skip-reference", o->skipReference, "Do not time the reference (for large n)");
    cmd->add_flag("--skip-cpu", o->skipCpu, "Do not time the CPU paths either: GPU only (e.g. n=16384 on a GPU)");
    cmd->add_option("--seed", o->seed, "Random seed of the problem")->capture_default_str();
    cmd->callback([o, &action] { action = [o] { return runBench(*o); }; });
}

} // namespace app
