// compute(): validation, memory budget, backend dispatch, and the checks every path's result must pass.
#include "attnscope/attention.h"
#include "cpu/fast_path.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#endif

namespace attn {
namespace {

// Eigen's products run on one thread each: core's own thread teams (attention_eigen.cpp, the model's forward)
// split the work into blocks that do not depend on the team's size. Eigen's own parallel product splits and
// blocks its sums by the thread count, so a product left outside a team (a small one, the model's ablation
// product) would sum in another order whenever the count changes, and the model sizes its teams by the
// machine's load: the same run would differ in its last bits from one call to the next.
const bool kEigenProductsOnOneThread = [] {
    Eigen::setNbThreads(1);
    return true;
}();

std::string humanBytes(std::size_t b)
{
    char buf[64];
    const double gib = double(b) / double(1ull << 30);
    if (gib >= 1.0) std::snprintf(buf, sizeof buf, "%.1f GiB", gib);
    else std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1ull << 20));
    return buf;
}

// Locates the first non-finite value of m, if any, after the fast path's one-pass check (cpu::fast::allFinite).
// Eigen's own allFinite() is not vectorised (13 ns a value here). The reference path's result is checked whole
// after the call (the CPU's fast path checks inside its passes; a CUDA result is checked by kernels on the device,
// core/cuda/backend.cpp: done here, on an H200, it was most of the CUDA path's time, 108 ms a call at n = 1024 and
// 2.1 s at 4096 against kernels of 0.3 and 1.9 ms, still 17.6 and 231 ms with this vectorised one).
bool findNonFinite(const Matrix& m, Eigen::Index& r, Eigen::Index& c)
{
    if (cpu::fast::allFinite(m)) return false;
    for (r = 0; r < m.rows(); ++r)
        for (c = 0; c < m.cols(); ++c)
            if (!std::isfinite(m(r, c))) return true;
    return false;
}

// Inputs are finite (validate checks), but products can still overflow float32. Such a result would show
// inf/NaN; refuse it with a message saying where it first went wrong.
Status checkResultFinite(const AttentionResult& out)
{
    Eigen::Index r = 0, c = 0;
    auto fail = [&](const std::string& what) {
        return invalidArgument(what + "[" + std::to_string(r) + "][" + std::to_string(c) +
                               "] overflowed float32 (|value| > 3.4e38); scale the inputs down");
    };
    if (findNonFinite(out.Q, r, c)) return fail("Q");
    if (findNonFinite(out.K, r, c)) return fail("K");
    if (findNonFinite(out.V, r, c)) return fail("V");
    for (std::size_t h = 0; h < out.heads.size(); ++h) {
        const std::string head = "head " + std::to_string(h) + " ";
        if (findNonFinite(out.heads[h].scores, r, c)) return fail(head + "scores");
        if (findNonFinite(out.heads[h].weights, r, c)) return fail(head + "weights");
        if (findNonFinite(out.heads[h].output, r, c)) return fail(head + "output");
    }
    if (findNonFinite(out.output, r, c)) return fail("output");
    return {};
}

void addMaskWarnings(AttentionResult& out)
{
    const bool multi = out.heads.size() > 1;
    for (std::size_t h = 0; h < out.heads.size(); ++h)
        for (int q : out.heads[h].fullyMaskedQueries)
            out.warnings.push_back((multi ? "head " + std::to_string(h) + ", " : std::string()) + "query " +
                                   std::to_string(q) +
                                   ": every key is masked (fill -inf); its weights and output are set to 0");
}

} // namespace

std::size_t defaultMemoryBudget()
{
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || pageSize <= 0) return std::size_t(4) << 30;  // unknown: assume a modest 8 GiB machine
    return std::size_t(pages) * std::size_t(pageSize) / 2;
}

Status compute(const AttentionInput& in, const AttentionConfig& cfg, AttentionResult& out)
{
    const auto t0 = std::chrono::steady_clock::now();
    Expected<Dims> dims = validate(in, cfg);
    if (!dims) return dims.status();
    const Dims& d = *dims;

    const std::size_t budget = cfg.memoryBudgetBytes ? cfg.memoryBudgetBytes : defaultMemoryBudget();
    const std::size_t need = estimateBytes(d);
    if (need > budget)
        return makeError(StatusCode::ResourceExhausted,
                         "problem too large: " + std::to_string(d.H) + " head(s) × " + std::to_string(d.T) + " queries × " +
                             std::to_string(d.S) + " keys needs about " + humanBytes(need) +
                             ", over the memory budget of " + humanBytes(budget) +
                             "; reduce n or heads, or raise the budget");

    out.warnings.clear();
    out.timings = {};
    out.deviceGeneration = 0;  // set by the CUDA backend when the result stays on the device
    out.mapsOnDevice = false;  // set by the CUDA backend with cfg.mapsOnDevice
    Backend use = cfg.backend;
    std::string fallbackWarning;
    if (use == Backend::Auto) {
        use = Backend::Cpu;
#ifdef ATTNSCOPE_WITH_CUDA
        if (cuda::deviceAvailable(nullptr)) use = Backend::Cuda;
#endif
    }
    if (use == Backend::Cuda) {
#ifdef ATTNSCOPE_WITH_CUDA
        std::string why;
        if (!cuda::deviceAvailable(&why))
            return makeError(StatusCode::Unavailable, "backend cuda: " + why);
        Status s = cfg.softcap > 0 ? makeError(StatusCode::Unsupported, "the score soft-cap runs on the CPU only")
                                   : cuda::compute(in, cfg, d, out);
        if (s.ok()) {
            out.backend = Backend::Cuda;
        } else if (cfg.backend == Backend::Auto && s.code != StatusCode::InvalidArgument) {
            // Auto promised a result whenever the CPU can give one: a device failure (out of device memory,
            // a driver error) falls back to the CPU, and the result says why.
            fallbackWarning = "CUDA failed (" + s.message + "); computed on the CPU instead";
            use = Backend::Cpu;
        } else {
            return s;
        }
#else
        return makeError(StatusCode::Unavailable,
                         "backend cuda: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)");
#endif
    }
    if (use == Backend::Cpu) {
        out.warnings.clear();
        out.timings = {};
        out.deviceGeneration = 0;
        out.mapsOnDevice = false;
        if (cfg.cpuPath == CpuPath::Reference) {
            out.cache.state.reset();
            out.incremental = false;
            cpu::computeReference(in, cfg, d, out);
            out.backend = Backend::Cpu;
            ATTNSCOPE_RETURN_IF_ERROR(checkResultFinite(out));
        } else {
            // The fast path checks finiteness inside the passes that produce each value (see attention_eigen.cpp).
            Status s = cpu::computeEigen(in, cfg, d, out);
            out.backend = Backend::Cpu;
            if (!s.ok()) {
                out.cache.state.reset();
                return s;
            }
        }
    } else {
        out.cache.state.reset();  // a device result: the next CPU compute starts from scratch
        out.incremental = false;
        // Its finiteness was checked on the device (backend.cpp, finitenessStatus), with checkResultFinite's message.
    }
    if (!fallbackWarning.empty()) out.warnings.push_back(fallbackWarning);
    addMaskWarnings(out);
    out.timings.total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return {};
}

Expected<AttentionResult> compute(const AttentionInput& in, const AttentionConfig& cfg)
{
    AttentionResult r;
    ATTNSCOPE_RETURN_IF_ERROR(compute(in, cfg, r));
    return r;
}

} // namespace attn
