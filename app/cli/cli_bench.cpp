// `attnscope bench`: times the full recompute of the fast path(s) against the naive reference on the same
// random problem in the same run, and prints both with their ratio and the per-phase split; each phase's
// rate (GFLOP/s or GB/s) next to this machine's bound, measured in the same run (SGEMM rate, memory
// bandwidth); the cost of one edit (incremental recompute); the peak memory. With a GPU: the CUDA path twice, every
// map copied to the host and every map kept on the device (AttentionConfig::mapsOnDevice), beside the GPU's
// measured bounds (attnscope/gpu_bounds.h) and the copied path's share of the pinned host-link bound.
// `--json`: one JSON object.
#include "cli/backend_option.h"
#include "cli/cli.h"
#include "cli/bench_bounds.h"

#include <attnscope/attention.h>
#include <attnscope/gpu_bounds.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
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
    bool json = false;     // one JSON object on stdout instead of the table
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
    std::size_t resultBytes = 0;  // bytes of the matrices the result holds
    bool mapsOnDevice = false;    // the result left its maps on the device
};

double msSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::size_t bytesOf(const attn::AttentionResult& r)
{
    auto m = [](const auto& x) { return std::size_t(x.size()) * sizeof(typename std::decay_t<decltype(x)>::Scalar); };
    std::size_t b = m(r.Q) + m(r.K) + m(r.V) + m(r.concat) + m(r.output);
    for (const attn::HeadResult& h : r.heads)
        b += m(h.Q) + m(h.K) + m(h.V) + m(h.scores) + m(h.masked) + m(h.weights) + m(h.output);
    return b;
}

// Runs compute() `repeat` times into one reused result (as the window does) and keeps the median run.
// Incremental recompute is off: every run computes everything.
attn::Expected<Sample> timeRuns(const attn::AttentionInput& in, attn::AttentionConfig cfg, int repeat)
{
    cfg.incremental = false;
    attn::AttentionResult r;
    std::vector<std::pair<double, attn::PhaseTimings>> runs;
    for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        attn::Status s = attn::compute(in, cfg, r);
        const double ms = msSince(t0);
        if (!s.ok()) return s;
        runs.emplace_back(ms, r.timings);
    }
    std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    Sample out;
    out.medianMs = runs[runs.size() / 2].first;
    out.minMs = runs.front().first;
    out.phases = runs[runs.size() / 2].second;
    out.backend = r.backend;
    out.resultBytes = bytesOf(r);
    out.mapsOnDevice = r.mapsOnDevice;
    return out;
}

// One edit as in the window: a cell of X (one token's embedding) changes, then compute() into the result
// that holds the previous one. Median over `edits` edits of different tokens.
struct EditSample {
    double medianMs = 0;
    double maxMs = 0;
    int incremental = 0;  // how many of the edits were served incrementally
    int edits = 0;
};

attn::Expected<EditSample> timeEdits(attn::AttentionInput in, const attn::AttentionConfig& cfg, int edits, unsigned seed)
{
    attn::AttentionResult r;
    ATTNSCOPE_RETURN_IF_ERROR(attn::compute(in, cfg, r));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> row(0, int(in.X.rows()) - 1), col(0, int(in.X.cols()) - 1);
    std::vector<double> ms;
    EditSample out;
    for (int e = 0; e < edits; ++e) {
        in.X(row(rng), col(rng)) += 0.25f;
        const auto t0 = std::chrono::steady_clock::now();
        ATTNSCOPE_RETURN_IF_ERROR(attn::compute(in, cfg, r));
        ms.push_back(msSince(t0));
        out.incremental += r.incremental;
    }
    std::sort(ms.begin(), ms.end());
    out.medianMs = ms[ms.size() / 2];
    out.maxMs = ms.back();
    out.edits = edits;
    return out;
}

} // namespace

// The machine's bounds, measured here with the same library and threads as the core: the SGEMM rate of a
// large square Eigen product (what the projections, QKᵀ, PV and W^O can reach at best) and the memory
// bandwidth of a streaming read+write over buffers far larger than the caches (what softmax can reach).
Bounds measureBounds()
{
    Bounds b;
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    {
        // Every core multiplies its own 1024×1024 pair (single-threaded Eigen here: the app is not built
        // with OpenMP), as the core's row-block tasks do.
        const int n = 1024;
        std::vector<attn::Matrix> a(threads), c(threads), out(threads);
        std::mt19937 rng(7);
        for (unsigned t = 0; t < threads; ++t) {
            a[t] = randomMatrix(rng, n, n, 1.0f);
            c[t] = randomMatrix(rng, n, n, 1.0f);
            out[t].resize(n, n);
        }
        double best = 1e30;
        for (int rep = 0; rep < 4; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            std::vector<std::thread> team;
            for (unsigned t = 0; t < threads; ++t) team.emplace_back([&, t] { out[t].noalias() = a[t] * c[t]; });
            for (std::thread& th : team) th.join();
            best = std::min(best, msSince(t0));
        }
        b.sgemmGflops = threads * 2.0 * n * n * double(n) / (best * 1e6);
    }
    {
        // Each thread scales its slice of a 256 MiB buffer into another (read 4 B + write 4 B per float).
        const std::size_t count = std::size_t(64) << 20;
        std::vector<float> src(count, 1.0f), dst(count, 0.0f);
        double best = 1e30;
        for (int rep = 0; rep < 4; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            std::vector<std::thread> team;
            for (unsigned t = 0; t < threads; ++t)
                team.emplace_back([&, t] {
                    const std::size_t lo = count * t / threads, hi = count * (t + 1) / threads;
                    Eigen::Map<Eigen::ArrayXf>(dst.data() + lo, Eigen::Index(hi - lo)) =
                        Eigen::Map<const Eigen::ArrayXf>(src.data() + lo, Eigen::Index(hi - lo)) * 1.0001f;
                });
            for (std::thread& th : team) th.join();
            best = std::min(best, msSince(t0));
        }
        b.memGBs = 2.0 * double(count) * sizeof(float) / (best * 1e6);
    }
    return b;
}

double peakRssMb()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

namespace {

// Work of each phase of one compute, for the rates: floating-point operations (GEMM phases) or bytes moved
// (softmax: read the scores, write the weights and the mask flags).
struct Work {
    double projFlop = 0, scoresFlop = 0, softmaxBytes = 0, pvFlop = 0, outputFlop = 0;
};

Work workOf(const BenchOptions& o, bool skipCausalScores)
{
    const double n = o.n, m = o.dModel, h = o.heads, d = double(o.dModel) / o.heads;
    // Causal: PV (and QKᵀ when the hidden scores are skipped) runs over the keys up to each query's block
    // only; ~half of the pairs.
    const double pairs = o.causal ? n * (n + 1) / 2 : n * n;
    Work w;
    w.projFlop = 2 * n * m * 3 * m;
    w.scoresFlop = 2 * h * (skipCausalScores ? pairs : n * n) * d;
    w.softmaxBytes = h * n * n * (4 + 4 + 1);
    w.pvFlop = 2 * h * pairs * d;
    w.outputFlop = 2 * n * m * m;
    return w;
}


// The CUDA path's work: its batched GEMMs compute every score and every P·V pair, masked or not, and its softmax
// reads the scores and the mask (one byte a cell, shared by the heads) and writes the weights.
Work gpuWorkOf(const BenchOptions& o)
{
    const double n = o.n, m = o.dModel, h = o.heads, d = double(o.dModel) / o.heads;
    Work w;
    w.projFlop = 2 * n * m * 3 * m;
    w.scoresFlop = 2 * h * n * n * d;
    w.softmaxBytes = h * n * n * (4 + 4) + (o.causal ? n * n : 0);
    w.pvFlop = 2 * h * n * n * d;
    w.outputFlop = 2 * n * m * m;
    return w;
}

double kernelsMs(const attn::PhaseTimings& p) { return p.projections + p.scores + p.softmax + p.pv + p.output + p.checks; }

// The resident memory now (not the peak), from /proc/self/statm; 0 where unavailable.
double currentRssMb()
{
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long pages = 0, resident = 0;
    const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
    std::fclose(f);
    return got == 2 ? double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1 << 20) : 0;
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
    std::printf("   proj %.2f  scores %.2f  softmax %.2f  PV %.2f  W^O %.2f  copies %.2f", p.projections, p.scores,
                p.softmax, p.pv, p.output, p.copies);
    if (p.checks > 0) std::printf("  checks %.2f", p.checks);
    std::printf("\n");
}

double rate(double work, double ms, double unit) { return ms > 0 ? work / (ms * 1e-3) / unit : 0; }

void printRates(const Sample& s, const Work& w, const Bounds& b)
{
    const auto& p = s.phases;
    std::printf("\nphase rates of cpu eigen (median run) next to this machine's bound:\n");
    auto gemm = [&](const char* name, double flop, double ms) {
        std::printf("  %-12s %8.2f ms %8.1f GFLOP/s  (SGEMM %.1f GFLOP/s: %3.0f%%)\n", name, ms, rate(flop, ms, 1e9),
                    b.sgemmGflops, 100 * rate(flop, ms, 1e9) / b.sgemmGflops);
    };
    gemm("projections", w.projFlop, p.projections);
    gemm("scores", w.scoresFlop, p.scores);
    std::printf("  %-12s %8.2f ms %8.1f GB/s     (memory %.1f GB/s: %3.0f%%)\n", "softmax", p.softmax,
                rate(w.softmaxBytes, p.softmax, 1e9), b.memGBs, 100 * rate(w.softmaxBytes, p.softmax, 1e9) / b.memGBs);
    gemm("PV", w.pvFlop, p.pv);
    gemm("W^O", w.outputFlop, p.output);
}

nlohmann::ordered_json pathJson(const Sample& s, const Work* w)
{
    const auto& p = s.phases;
    nlohmann::ordered_json j;
    j["median_ms"] = s.medianMs;
    j["min_ms"] = s.minMs;
    if (p.projections + p.scores + p.softmax + p.pv + p.output + p.copies > 0) {
        j["phases_ms"] = {{"projections", p.projections}, {"scores", p.scores}, {"softmax", p.softmax},
                          {"pv", p.pv},                   {"output", p.output}, {"copies", p.copies}};
        if (s.backend == attn::Backend::Cuda) {
            // Device time by CUDA events: the kernels (products, softmax, the finiteness check) against the copies
            // (uploads, downloads, and the host's slicing of the small per-head views).
            j["phases_ms"]["checks"] = p.checks;
            j["kernels_ms"] = kernelsMs(p);
            j["copies_ms"] = p.copies;
            // The copies in parts, so that the link's share and the host's can be told apart.
            j["copies_parts_ms"] = {{"upload", p.copyParts.upload},
                                    {"download", p.copyParts.download},
                                    {"maps", p.copyParts.maps},
                                    {"host", p.copyParts.host}};
            j["maps_on_device"] = s.mapsOnDevice;
        }
        if (w)
            j["phase_rates"] = {{"projections_gflops", rate(w->projFlop, p.projections, 1e9)},
                                {"scores_gflops", rate(w->scoresFlop, p.scores, 1e9)},
                                {"softmax_gbs", rate(w->softmaxBytes, p.softmax, 1e9)},
                                {"pv_gflops", rate(w->pvFlop, p.pv, 1e9)},
                                {"output_gflops", rate(w->outputFlop, p.output, 1e9)}};
    } else {
        j["phases_ms"] = nlohmann::ordered_json::object();  // the reference does not time its phases
    }
    return j;
}

// Each phase's rate of a CUDA path as a fraction of the GPU's bound: the products against the SGEMM rate, the
// softmax against the device-memory bandwidth.
nlohmann::ordered_json gpuFractions(const Sample& s, const Work& w, const attn::GpuBounds& b)
{
    const auto& p = s.phases;
    auto of = [](double r, double bound) { return bound > 0 ? r / bound : 0.0; };
    return {{"projections", of(rate(w.projFlop, p.projections, 1e9), b.sgemmGflops)},
            {"scores", of(rate(w.scoresFlop, p.scores, 1e9), b.sgemmGflops)},
            {"softmax", of(rate(w.softmaxBytes, p.softmax, 1e9), b.deviceMemoryGBs)},
            {"pv", of(rate(w.pvFlop, p.pv, 1e9), b.sgemmGflops)},
            {"output", of(rate(w.outputFlop, p.output, 1e9), b.sgemmGflops)}};
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

    // What the process holds before any compute: code and libraries (a CUDA build maps cuBLAS, ~150 MB).
    const double baselineRssMb = currentRssMb();
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

    if (!o.json) {
        std::printf("attnscope bench: self-attention, n=%d, d_model=%d, heads=%d (d_k=%d), %s, W^O on\n", o.n, o.dModel,
                    o.heads, o.dModel / o.heads, o.causal ? "causal mask" : "no mask");
        std::printf("times in ms: median and min of %d run(s) (reference: %d); ratio = reference median / median\n\n",
                    o.repeat, o.referenceRepeat);
        std::printf("%-22s %10s %10s %10s   %s\n", "path", "median", "min", "speed-up", "phases of the median run (ms)");
    }

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
    Sample eigen, eigenSkip;
    EditSample edit;
    double rssMb = peakRssMb();
    if (!o.skipCpu) {
        auto r = timeRuns(in, cfg, o.repeat);
        if (!r) {
            printError("bench: " + r.status().message);
            return kExitBadInput;
        }
        eigen = *r;
        if (o.causal) {
            // The same with the scores the causal mask hides skipped (triangular QKᵀ blocks).
            attn::AttentionConfig skip = cfg;
            skip.skipCausalMaskedScores = true;
            auto rs = timeRuns(in, skip, o.repeat);
            if (!rs) {
                printError("bench: " + rs.status().message);
                return kExitBadInput;
            }
            eigenSkip = *rs;
        }
        // The peak while the fast path computed (the reference, if timed, ran before with the same sizes).
        // Taken before the edit timing: glibc keeps freed large blocks for reuse, which would add a result.
        rssMb = peakRssMb();
        auto e = timeEdits(in, cfg, std::max(5, o.repeat), o.seed + 1);
        if (!e) {
            printError("bench: " + e.status().message);
            return kExitBadInput;
        }
        edit = *e;
    }
    if (!o.json) {
        if (!o.skipReference) printRow("cpu reference (loops)", ref, refMs);
        if (!o.skipCpu) printRow("cpu eigen", eigen, refMs);
        if (!o.skipCpu && o.causal) printRow("cpu eigen, skip masked", eigenSkip, refMs);
    }

    Sample gpu, gpuKept;
    bool haveGpu = false;
    if (requested != attn::Backend::Cpu) {
        cfg.backend = requested;
        auto g = timeRuns(in, cfg, o.repeat);
        if (!g) {
            printError("bench: " + g.status().message);
            return g.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
        }
        reportBackendChoice(requested, g->backend);
        if (g->backend == attn::Backend::Cuda) {
            gpu = *g;
            haveGpu = true;
            // The same with every map left on the device (what the window and DeviceMaps read from).
            attn::AttentionConfig kept = cfg;
            kept.backend = attn::Backend::Cuda;
            kept.mapsOnDevice = true;
            auto k = timeRuns(in, kept, o.repeat);
            if (!k) {
                printError("bench: " + k.status().message);
                return k.status().code == attn::StatusCode::Internal ? kExitFailure : kExitBadInput;
            }
            gpuKept = *k;
            if (!o.json) {
                printRow("cuda, maps copied", gpu, refMs);
                printRow("cuda, maps on device", gpuKept, refMs);
                if (!o.skipCpu)
                    std::printf("\ncuda vs cpu eigen: %.1fx (maps copied), %.1fx (maps on device)\n", eigen.medianMs / gpu.medianMs,
                                eigen.medianMs / gpuKept.medianMs);
            }
        }
    }
    // The GPU's bounds, measured after the timed runs so that its buffers come and go outside them.
    attn::GpuBounds gpuBounds;
    std::string gpuBoundsError;
    if (haveGpu) {
        auto b = attn::measureGpuBounds();
        if (b) gpuBounds = *b;
        else gpuBoundsError = b.status().message;
    }
    const Work gpuWork = gpuWorkOf(o);
    // Every byte the copied path brings back (every head's scores and weights, Q, K, V, the concat and the
    // output) over the pinned device-to-host bandwidth: the least time any copy of them can take.
    const double gpuBytes = double(o.heads) * o.n * double(o.n) * 4 * 2 + double(o.n) * o.dModel * 4 * 5;
    const double linkBoundMs = gpuBounds.deviceToHostGBs > 0 ? gpuBytes / (gpuBounds.deviceToHostGBs * 1e6) : 0;
    // The same bytes into the result's own (pageable) buffers: through pinned staging they cross the link, then the
    // host's memory by memcpy, so the slower of the two rates bounds them.
    const double hostPathGBs = std::min(gpuBounds.deviceToHostGBs, gpuBounds.hostMemcpyGBs);
    const double hostPathBoundMs = hostPathGBs > 0 ? gpuBytes / (hostPathGBs * 1e6) : 0;

    const Work work = workOf(o, false), workSkip = workOf(o, true);
    const Bounds bounds = o.skipCpu ? Bounds{} : measureBounds();
    const double resultMb = double(eigen.resultBytes) / (1 << 20);
    if (o.json) {
        nlohmann::ordered_json j;
        j["problem"] = {{"n", o.n}, {"d_model", o.dModel}, {"heads", o.heads}, {"causal", o.causal}};
        j["paths"] = nlohmann::ordered_json::object();
        if (!o.skipCpu) j["paths"]["cpu eigen"] = pathJson(eigen, &work);
        if (!o.skipCpu && o.causal) j["paths"]["cpu eigen, causal scores skipped"] = pathJson(eigenSkip, &workSkip);
        if (!o.skipReference) j["paths"]["reference"] = pathJson(ref, nullptr);
        if (haveGpu) {
            j["paths"]["cuda"] = pathJson(gpu, &gpuWork);
            j["paths"]["cuda, maps on device"] = pathJson(gpuKept, &gpuWork);
            if (gpuBoundsError.empty()) {
                for (const char* name : {"cuda", "cuda, maps on device"})
                    j["paths"][name]["phase_fraction_of_gpu_bounds"] = gpuFractions(name == std::string("cuda") ? gpu : gpuKept,
                                                                                   gpuWork, gpuBounds);
                j["gpu_bounds"] = {{"device", gpuBounds.device},
                                   {"sgemm_gflops", gpuBounds.sgemmGflops},
                                   {"device_memory_gbs", gpuBounds.deviceMemoryGBs},
                                   {"pinned_host_to_device_gbs", gpuBounds.hostToDeviceGBs},
                                   {"pinned_device_to_host_gbs", gpuBounds.deviceToHostGBs},
                                   {"pageable_device_to_host_gbs", gpuBounds.pageableDeviceToHostGBs},
                                   {"host_memcpy_gbs", gpuBounds.hostMemcpyGBs},
                                   {"host_register_gbs", gpuBounds.hostRegisterGBs},
                                   {"host_threads", gpuBounds.hostThreads},
                                   {"sgemm_n", gpuBounds.sgemmN},
                                   {"copy_mib", double(gpuBounds.copyBytes) / (1 << 20)}};
            } else {
                j["gpu_bounds_error"] = gpuBoundsError;
            }
            j["gpu_copies"] = {{"copied_mb", gpuBytes / (1 << 20)},
                               {"pinned_link_bound_ms", linkBoundMs},
                               {"pageable_bound_ms", hostPathBoundMs},
                               {"copied_path_over_pageable_bound", hostPathBoundMs > 0 ? hostPathBoundMs / gpu.medianMs : 0.0},
                               {"copied_path_ms", gpu.medianMs},
                               {"copied_path_over_link_bound", linkBoundMs > 0 ? linkBoundMs / gpu.medianMs : 0.0},
                               {"copies_phase_over_link_bound", linkBoundMs > 0 && gpu.phases.copies > 0 ? linkBoundMs / gpu.phases.copies : 0.0},
                               {"maps_on_device_ms", gpuKept.medianMs},
                               {"copied_over_maps_on_device", gpuKept.medianMs > 0 ? gpu.medianMs / gpuKept.medianMs : 0.0}};
            j["gpu_backend"] = attn::backendDescription(attn::Backend::Cuda);
        }
        j["peak_rss_mb"] = rssMb;
        j["baseline_rss_mb"] = baselineRssMb;
        if (!o.skipCpu) {
            j["result_mb"] = resultMb;
            j["peak_rss_over_result"] = resultMb > 0 ? rssMb / resultMb : 0.0;
            j["peak_rss_above_baseline_over_result"] = resultMb > 0 ? (rssMb - baselineRssMb) / resultMb : 0.0;
            j["bounds"] = {{"sgemm_gflops", bounds.sgemmGflops}, {"memory_gbs", bounds.memGBs}};
            j["edit_x_cell"] = {{"median_ms", edit.medianMs}, {"max_ms", edit.maxMs},
                                {"incremental", edit.incremental}, {"edits", edit.edits}};
            if (!o.skipReference) j["ratios"]["reference_over_cpu_eigen"] = refMs / eigen.medianMs;
            j["ratios"]["full_over_edit"] = edit.medianMs > 0 ? eigen.medianMs / edit.medianMs : 0.0;
            if (haveGpu) {
                j["ratios"]["cpu_eigen_over_cuda"] = eigen.medianMs / gpu.medianMs;
                j["ratios"]["cpu_eigen_over_cuda_maps_on_device"] = eigen.medianMs / gpuKept.medianMs;
            }
            if (o.causal) j["ratios"]["cpu_eigen_over_skipped"] = eigen.medianMs / eigenSkip.medianMs;
        }
        j["backend"] = attn::backendDescription(attn::Backend::Cpu);
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    if (!o.skipCpu) {
        printRates(eigen, work, bounds);
        if (o.causal) {
            std::printf("with the causally masked scores skipped:");
            printRates(eigenSkip, workSkip, bounds);
        }
        std::printf("\none edit (a cell of X, then compute into the previous result): median %.2f ms, max %.2f ms "
                    "(%d of %d incremental)\n",
                    edit.medianMs, edit.maxMs, edit.incremental, edit.edits);
        std::printf("peak RSS %.1f MB (%.1f MB before computing); the result holds %.1f MB: peak %.2fx, above the "
                    "start %.2fx\n",
                    rssMb, baselineRssMb, resultMb, resultMb > 0 ? rssMb / resultMb : 0.0,
                    resultMb > 0 ? (rssMb - baselineRssMb) / resultMb : 0.0);
    }
    if (haveGpu) {
        if (gpuBoundsError.empty()) {
            std::printf("\nGPU bounds (%s): SGEMM %.0f GFLOP/s (FP32, TF32 off), device memory %.0f GB/s, pinned host link "
                        "%.1f GB/s to the device, %.1f GB/s to the host\n",
                        gpuBounds.device.c_str(), gpuBounds.sgemmGflops, gpuBounds.deviceMemoryGBs, gpuBounds.hostToDeviceGBs,
                        gpuBounds.deviceToHostGBs);
            std::printf("cuda, maps copied: %.1f MB back in %.2f ms, the pinned link's bound %.2f ms: %.2f of it "
                        "(kernels %.2f ms, copies %.2f ms)\n",
                        gpuBytes / (1 << 20), gpu.medianMs, linkBoundMs, linkBoundMs / gpu.medianMs, kernelsMs(gpu.phases),
                        gpu.phases.copies);
            std::printf("cuda, maps on device: %.2f ms (kernels %.2f ms, copies %.2f ms)\n", gpuKept.medianMs,
                        kernelsMs(gpuKept.phases), gpuKept.phases.copies);
            for (const Sample* g : {&gpu, &gpuKept}) {
                const attn::PhaseTimings::CopyParts& c = g->phases.copyParts;
                std::printf("  copies of %s: upload %.2f, Q/K/V/concat/output %.2f, maps and mask %.2f, host views %.2f ms\n",
                            g == &gpu ? "maps copied" : "maps on device", c.upload, c.download, c.maps, c.host);
            }
        } else {
            std::printf("\nGPU bounds not measured: %s\n", gpuBoundsError.c_str());
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
    cmd->add_flag("--json", o->json, "Print one JSON object instead of the table (with --gui: the window's numbers)");
    cmd->callback([o, &action] { action = [o] { return runBench(*o); }; });
}

} // namespace app
