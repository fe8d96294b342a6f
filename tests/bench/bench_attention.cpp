// Google Benchmark micro-benchmarks of the core paths, side by side in one run:
//   build/tests/bench/attnscope_benchmarks [--benchmark_filter=...]
// Compare BM_Compute/Reference/N with BM_Compute/Eigen/N (same N) for the fast-path speed-up, and
// BM_RecomputeAfterEdit (incremental) with BM_RecomputeAfterEditFull for the cost of an edit in the window.
#include <attnscope/attention.h>

#include <benchmark/benchmark.h>

#include <random>

namespace {

attn::AttentionInput problem(int n, int dModel)
{
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 1.0f);
    auto m = [&](int r, int c, float s) {
        attn::Matrix x(r, c);
        for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = d(rng) * s;
        return x;
    };
    const float w = 1.0f / std::sqrt(float(dModel));
    attn::AttentionInput in;
    in.X = m(n, dModel, 1);
    in.Wq = m(dModel, dModel, w);
    in.Wk = m(dModel, dModel, w);
    in.Wv = m(dModel, dModel, w);
    in.Wo = m(dModel, dModel, w);
    in.mask.causal = true;
    return in;
}

void run(benchmark::State& state, attn::CpuPath path)
{
    const int n = static_cast<int>(state.range(0));
    const attn::AttentionInput in = problem(n, 64);
    attn::AttentionConfig cfg;
    cfg.heads = 4;
    cfg.cpuPath = path;
    attn::AttentionResult r;
    for (auto _ : state) {
        attn::Status s = attn::compute(in, cfg, r);
        if (!s.ok()) state.SkipWithError(s.message.c_str());
        benchmark::DoNotOptimize(r.output.data());
    }
    state.SetComplexityN(n);
}

void BM_ComputeReference(benchmark::State& s) { run(s, attn::CpuPath::Reference); }
void BM_ComputeEigen(benchmark::State& s) { run(s, attn::CpuPath::Fast); }
BENCHMARK(BM_ComputeReference)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ComputeEigen)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

// One edited cell then a recompute, as in the window (n = 64, d_model = 64, h = 4): incremental (the
// default) and everything recomputed, side by side.
void recomputeAfterEdit(benchmark::State& state, bool incremental)
{
    attn::AttentionInput in = problem(64, 64);
    attn::AttentionConfig cfg;
    cfg.heads = 4;
    cfg.incremental = incremental;
    attn::AttentionResult r;
    float v = 0;
    for (auto _ : state) {
        in.X(3, 5) = (v += 0.01f);
        attn::Status s = attn::compute(in, cfg, r);
        if (!s.ok()) state.SkipWithError(s.message.c_str());
        benchmark::DoNotOptimize(r.output.data());
    }
}
void BM_RecomputeAfterEdit(benchmark::State& s) { recomputeAfterEdit(s, true); }
void BM_RecomputeAfterEditFull(benchmark::State& s) { recomputeAfterEdit(s, false); }
BENCHMARK(BM_RecomputeAfterEdit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RecomputeAfterEditFull)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
