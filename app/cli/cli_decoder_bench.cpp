// `attnscope model --model FILE.gguf|DIR --bench [--tokens N] [--repeats R] [--backend cpu|cuda|auto]`: a decoder's
// forward, appending one token and an ablation toggle, each beside its bound measured in the same run
// (docs/performance.md, "Decoder models"); with --backend cuda (or auto and a GPU) the same on the device, every
// layer there (runDecoderDeviceBench).
#include "cli/backend_option.h"
#include "cli/bench_bounds.h"
#include "cli/cli.h"
#include "cli/cli_decoder.h"
#include "state/model_state.h"  // kLazyTokens

#include <attnscope/attention.h>  // backendDescription, availableBackends
#include <attnscope/decoder.h>
#include <attnscope/gpu_bounds.h>
#include <attnscope/interp.h>
#include <attnscope/qk_attribution.h>
#include <attnscope/recycled_buffers.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace app {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The bench's forward is lazy past this many tokens, as the window's runs are. attnscope_emulated
// (tests/parity/CMakeLists.txt) builds with fewer, so that its tests reach the lazy sections (the fused attention, Auto,
// the pooled maps read on the device) with texts that the emulated kernels run in seconds.
#ifdef ATTNSCOPE_BENCH_LAZY_TOKENS
constexpr int kBenchLazyTokens = ATTNSCOPE_BENCH_LAZY_TOKENS;
#else
constexpr int kBenchLazyTokens = kLazyTokens;
#endif

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Multiply-adds ×2 of one forward over n tokens: the linear layers (Q, K, V, W^O, feed-forward, the LM head at every
// position) and the causal attention (q·k and weights·V over the n(n+1)/2 visible pairs of each query head).
double forwardFlop(const attn::DecoderConfig& c, double n)
{
    const double M = c.hidden, D = c.headDim, H = c.heads, Hkv = c.kvHeads, F = c.intermediate, V = c.vocab;
    const double ffnMats = c.gatedFfn() ? 3 : 2;
    const double linear = 2 * n * M * (H * D + 2 * Hkv * D) + 2 * n * H * D * M + 2 * n * M * F * ffnMats;
    double total = 2 * n * M * V;
    for (int l = 0; l < c.layers; ++l) {
        // Visible pairs: n(n+1)/2 causal; a sliding window of w keeps at most w keys per query.
        const double w = c.windowOf(l);
        const double pairs = w > 0 && w < n ? w * (w + 1) / 2 + (n - w) * w : n * (n + 1) / 2;
        total += linear + 2 * 2 * H * D * pairs;
    }
    return total;
}

// Bytes of weights one token's step reads: every matrix once, as the model holds it (a GGUF's tensors in their
// own format, W^O and a directory's weights in float32).
double weightBytes(const attn::DecoderModel& m) { return double(m.streamedWeightBytes()); }

// A real text, repeated to n tokens: the timings do not depend on the words, but the maps look like a text's.
attn::Status benchIds(const attn::DecoderModel& model, int n, std::vector<int>& ids)
{
    std::string text;
    ids.clear();
    while (static_cast<int>(ids.size()) < n) {
        text += "The quick brown fox jumps over the lazy dog, and the capital of France is Paris. ";
        auto enc = attn::encodeForDecoder(model, text, false);
        if (!enc) return enc.status();
        ids = enc->ids;
    }
    ids.resize(static_cast<std::size_t>(n));
    return attn::Status::success();
}

json phasesOf(const attn::DecoderRun::DeviceTimings& t)
{
    return {{"embed_ms", t.embed}, {"layers_ms", t.layers}, {"head_ms", t.head}, {"copies_ms", t.copies}, {"wall_ms", t.total},
            {"bytes_back_mb", t.bytesBack / 1e6}, {"bytes_up_mb", t.bytesUp / 1e6}, {"device_activations_mb", t.deviceBytes / 1e6}};
}

// One way of running a lazy forward on the device (DecoderOptions o), timed: `untimed` forwards of ids, then
// `repeats` timed ones, the last left in `run` with its phases; then as many appends of the last token to a forward of
// the others (again after `untimed`), on a run of their own. The first error stops it and is kept in `error`.
struct PathTiming {
    std::vector<double> forward, layers, append;
    double firstMs = 0;  // the first forward's wall time
    attn::DecoderRun::DeviceTimings phases;
    std::string error;
};
PathTiming timePath(attn::DecoderModel& model, const std::vector<int>& ids, const attn::DecoderOptions& o, attn::Backend backend,
                    int repeats, int untimed, attn::DecoderRun& run)
{
    PathTiming t;
    attn::Status st = attn::Status::success();
    for (int r = 0; r < untimed + repeats && st.ok(); ++r) {
        const auto t0 = Clock::now();
        st = attn::runDecoder(model, ids, o, run);
        if (r == 0) t.firstMs = msSince(t0);
        if (r >= untimed && st.ok()) t.forward.push_back(msSince(t0)), t.layers.push_back(run.deviceTimings.layers);
    }
    t.phases = run.deviceTimings;
    const std::vector<int> shorter(ids.begin(), ids.end() - 1);
    attn::DecoderRun grown;
    for (int r = 0; r < untimed + repeats && st.ok(); ++r) {
        st = attn::runDecoder(model, shorter, o, grown);
        const auto t0 = Clock::now();
        if (st.ok()) st = attn::appendTokens(model, {ids.back()}, grown, backend);
        if (r >= untimed && st.ok()) t.append.push_back(msSince(t0));
    }
    if (!st.ok()) t.error = st.message;
    return t;
}

// The largest |a − b| over a and b of one shape, relative to max(1, the largest |b|) when `relative` (the parity suite's
// hidden states and logits); infinity for different shapes or nothing to compare, so that neither can pass as equal.
double maxDiff(const attn::Matrix& a, const attn::Matrix& b, bool relative)
{
    if (a.rows() != b.rows() || a.cols() != b.cols() || a.size() == 0) return INFINITY;
    const double d = (a - b).cwiseAbs().maxCoeff();
    return relative ? d / std::max(1.0, double(b.cwiseAbs().maxCoeff())) : d;
}

// A dense run on the device (`dev`, made with options `o`) against the same tokens run on the CPU: its final norm and
// last logits (relative, as the parity suite measures them), every layer's heads' weights and the surprise (absolute).
// An error is reported in the JSON, not fatal.
json cpuParity(attn::DecoderModel& model, const attn::DecoderRun& dev, attn::DecoderOptions o)
{
    o.backend = attn::Backend::Cpu;
    attn::DecoderRun cpu;
    const auto t0 = Clock::now();
    if (attn::Status s = attn::runDecoder(model, dev.encoding.ids, o, cpu); !s.ok()) return {{"error", s.message}};
    const double cpuMs = msSince(t0);
    double weights = dev.weights.size() == cpu.weights.size() ? 0.0 : INFINITY;
    for (std::size_t l = 0; l < std::min(dev.weights.size(), cpu.weights.size()); ++l)
        for (std::size_t h = 0; h < std::min(dev.weights[l].size(), cpu.weights[l].size()); ++h)
            weights = std::max(weights, maxDiff(dev.weights[l][h].toMatrix(), cpu.weights[l][h].toMatrix(), false));
    double surprise = dev.surprise.size() == cpu.surprise.size() ? 0.0 : INFINITY;
    for (std::size_t i = 1; i < std::min(dev.surprise.size(), cpu.surprise.size()); ++i)  // token 0 has none (NaN)
        surprise = std::max(surprise, double(std::abs(dev.surprise[i] - cpu.surprise[i])));
    return {{"tokens", dev.encoding.ids.size()},
            {"cpu_ms", cpuMs},
            {"final_norm_rel", maxDiff(dev.finalHidden, cpu.finalHidden, true)},
            {"last_logits_rel", maxDiff(attn::Matrix(dev.lastLogits), attn::Matrix(cpu.lastLogits), true)},
            {"weights_abs", weights},
            {"surprise_abs", surprise}};
}

// `model --bench --backend cuda` (or auto with a device): the decoder forward on the GPU (issue 34), every layer
// there. The forward at n tokens (lazy past kBenchLazyTokens, 1024, as on the CPU) with its phases from CUDA events; the
// cost of bringing every head's n×n weights back to the host (a dense forward against a lazy one at min(n, 1024) tokens,
// kBenchLazyTokens again);
// an appended token (the new rows on the device: the kept K and V read in place there, and uploaded from the run
// when another call came between) and an ablation toggle; the head-importance scan: every head ablated in turn at
// min(n, 128) tokens, each a recompute from its layer with the last logits only.
int runDecoderDeviceBench(const ModelOptionsCli& opt, attn::DecoderModel& model, double loadMs, attn::Backend backend)
{
    const attn::DecoderConfig& c = model.config;
    const int n = std::min(opt.benchTokens, c.maxPositions);
    if (n < 3) return printError("--tokens: expected at least 3, got " + std::to_string(opt.benchTokens)), kExitBadInput;
    std::vector<int> ids;
    if (attn::Status s = benchIds(model, n, ids); !s.ok()) return printError(s.message), kExitFailure;
    attn::DecoderOptions mo;
    mo.backend = backend;
    mo.lazy = n > kBenchLazyTokens;
    // The forward's figures below are the products' (as in every measurement before DeviceAttention::Auto); the
    // fused kernel and Auto's choice are timed after them (`fused_attention`, `auto_attention`).
    mo.deviceAttention = attn::DeviceAttention::Products;
    const int repeats = std::max(1, mo.lazy ? std::min(opt.repeats, 3) : opt.repeats);
    attn::DecoderRun run;
    // The first forward dequantizes and uploads the weights (once per model).
    auto t0 = Clock::now();
    if (attn::Status s = attn::runDecoder(model, ids, mo, run); !s.ok()) return printError(s.message), kExitFailure;
    const double firstMs = msSince(t0);
    if (run.backend != attn::Backend::Cuda)
        return printError("model --bench: the forward ran on the CPU" + (run.warnings.empty() ? std::string() : " (" + run.warnings.front() + ")")),
               kExitFailure;
    std::vector<double> forward, embed, layers, head, copies;
    // Each repeat replaces the run before it: its copies land in that run's buffers (attnscope/recycled_buffers.h).
    const long recycledBefore = attn::RecycledBuffers::instance().taken();
    for (int r = 0; r < repeats; ++r) {
        t0 = Clock::now();
        if (attn::Status s = attn::runDecoder(model, ids, mo, run); !s.ok()) return printError(s.message), kExitFailure;
        forward.push_back(msSince(t0));
        embed.push_back(run.deviceTimings.embed);
        layers.push_back(run.deviceTimings.layers);
        head.push_back(run.deviceTimings.head);
        copies.push_back(run.deviceTimings.copies);
    }
    const attn::DecoderRun::DeviceTimings forwardPhases = run.deviceTimings;
    const long recycled = attn::RecycledBuffers::instance().taken() - recycledBefore;
    // A lazy run's maps as the window's grid asks for them: every head of the last layer, its whole map max-pooled
    // to at most 256 × 256, read on the device (from the run's Q, K and log-sum-exp still there) and on the host
    // (LazyMaps over the copies that came back), with the largest difference between the two.
    json mapsJson;
    if (mo.lazy) {
        const int ml = c.layers - 1, side = std::min(n, 256);
        const auto onDevice = attn::decoderMaps(model, run);
        const auto onHost = attn::decoderMaps(model, run, false);
        std::vector<attn::Matrix> a(static_cast<std::size_t>(c.heads)), b(a.size());
        auto timeAll = [&](const attn::AttentionMaps& maps, std::vector<attn::Matrix>& out) -> attn::Expected<double> {
            const auto t = Clock::now();
            for (int h = 0; h < c.heads; ++h)
                ATTNSCOPE_RETURN_IF_ERROR(maps.pooled(attn::MapKind::Weights, ml, h, attn::MapRect{0, 0, n, n}, side, side, out[static_cast<std::size_t>(h)]));
            return msSince(t);
        };
        const auto dMs = timeAll(*onDevice, a);
        const auto hMs = timeAll(*onHost, b);
        double diff = 0;  // a head whose maps differ in shape (or are empty) counts as infinitely far, as in maxDiff
        for (std::size_t h = 0; dMs && hMs && h < a.size(); ++h) diff = std::max(diff, maxDiff(a[h], b[h], false));
        // Reported, not fatal: the forward's figures above stand without it.
        if (!dMs || !hMs)
            mapsJson = {{"error", (dMs ? hMs.status() : dMs.status()).message}};
        else
            mapsJson = {{"layer", ml},
                        {"heads", c.heads},
                        {"pooled_to", side},
                        {"device_ms", *dMs},
                        {"host_ms", *hMs},
                        {"device_reads", attn::decoderMapsDeviceReads(*onDevice)},
                        {"max_abs_diff", diff}};
    }
    // A lazy forward again with each layer's attention in one kernel (DeviceAttention::Fused: no score written),
    // timed beside the products above, and how far its results are from theirs (the last layer's lse, the final
    // norm, the last logits), and its appends (a run keeps its choice: a token's few queries make one block a head).
    // Then as a user's run goes (DeviceAttention::Auto, the default), its choices forgotten first, so that its first
    // forward (and first append, a shape of one query) times both paths on each shape's first layer. After the maps
    // above: these calls replace the products' run on the device. Their errors are reported, not fatal: the figures
    // above stand without them.
    PathTiming fusedT, autoT;
    double fusedDiffLse = 0, fusedDiffFinal = 0, fusedDiffLogits = 0;
    if (mo.lazy) {
        attn::DecoderOptions fo = mo, ao = mo;
        fo.deviceAttention = attn::DeviceAttention::Fused;
        ao.deviceAttention = attn::DeviceAttention::Auto;
        attn::DecoderRun fused, automatic;
        fusedT = timePath(model, ids, fo, backend, repeats, 0, fused);
        if (fusedT.error.empty()) {
            const attn::LazyLayer &a = *fused.lazyLayers.back(), &b = *run.lazyLayers.back();
            fusedDiffLse = maxDiff(attn::Matrix(a.lse), attn::Matrix(b.lse), false);
            fusedDiffFinal = maxDiff(fused.finalHidden, run.finalHidden, false);
            fusedDiffLogits = maxDiff(attn::Matrix(fused.lastLogits), attn::Matrix(run.lastLogits), false);
        }
        attn::forgetDeviceAttentionChoices();
        autoT = timePath(model, ids, ao, backend, repeats, 1, automatic);
    }
    // Dense against lazy at min(n, kBenchLazyTokens): what bringing every head's weights back costs.
    const int nd = std::min(n, kBenchLazyTokens);
    const std::vector<int> denseIds(ids.begin(), ids.begin() + nd);
    std::vector<double> dense, lazy;
    attn::DecoderRun d, l;
    attn::DecoderOptions dOpt = mo, lOpt = mo;
    dOpt.lazy = false;
    lOpt.lazy = true;
    for (int r = 0; r < repeats; ++r) {
        t0 = Clock::now();
        if (attn::Status s = attn::runDecoder(model, denseIds, dOpt, d); !s.ok()) return printError(s.message), kExitFailure;
        dense.push_back(msSince(t0));
        t0 = Clock::now();
        if (attn::Status s = attn::runDecoder(model, denseIds, lOpt, l); !s.ok()) return printError(s.message), kExitFailure;
        lazy.push_back(msSince(t0));
    }
    // An appended token, to two forwards over n − 1 tokens: to the last one, whose K and V the device holds (read in
    // place), then to the first, whose K and V the second replaced (uploaded from the run); and an ablation toggle
    // in the middle layer (to the new predictions).
    std::vector<double> append, appendUploaded, ablate;
    attn::DecoderRun::DeviceTimings appendPhases, appendUploadedPhases;
    const int layer = c.layers / 2;
    for (int r = 0; r < repeats; ++r) {
        attn::DecoderRun grown, replaced;
        for (attn::DecoderRun* g : {&replaced, &grown})
            if (attn::Status s = attn::runDecoder(model, std::vector<int>(ids.begin(), ids.end() - 1), mo, *g); !s.ok())
                return printError(s.message), kExitFailure;
        t0 = Clock::now();
        if (attn::Status s = attn::appendTokens(model, {ids.back()}, grown, backend); !s.ok()) return printError(s.message), kExitFailure;
        append.push_back(msSince(t0));
        appendPhases = grown.deviceTimings;
        t0 = Clock::now();
        if (attn::Status s = attn::appendTokens(model, {ids.back()}, replaced, backend); !s.ok()) return printError(s.message), kExitFailure;
        appendUploaded.push_back(msSince(t0));
        appendUploadedPhases = replaced.deviceTimings;
        run.ablated = {{layer, r % c.heads}};
        t0 = Clock::now();
        if (attn::Status s = attn::recomputeDecoderFrom(model, layer, run, backend, attn::SurpriseUpdate::Deferred); !s.ok())
            return printError(s.message), kExitFailure;
        ablate.push_back(msSince(t0));
    }
    // The head-importance scan (attn::headImportance of a run on the device: each layer's heads ablated as
    // variants stacked in one batched recompute of the layers above, last logits only).
    const int ns = std::min(n, 128);
    attn::DecoderRun scan;
    attn::DecoderOptions sOpt = mo;
    sOpt.lazy = false;
    if (attn::Status s = attn::runDecoder(model, std::vector<int>(ids.begin(), ids.begin() + ns), sOpt, scan); !s.ok())
        return printError(s.message), kExitFailure;
    const int scanTarget = static_cast<int>(std::max_element(scan.lastLogits.data(), scan.lastLogits.data() + scan.lastLogits.size()) -
                                            scan.lastLogits.data());
    attn::Matrix importance;
    t0 = Clock::now();
    if (attn::Status s = attn::headImportance(model, scan, scanTarget, importance); !s.ok()) return printError(s.message), kExitFailure;
    const double scanMs = msSince(t0);
    // The scan's dense run of ns tokens (the device's) against the same tokens on the CPU: the parity suite's measures
    // (tests/parity/test_decoder_device.cpp, on the tiny models) at the real model's scale and depth.
    const json parityJson = cpuParity(model, scan, sOpt);
    // The GPU's bounds, measured after the timed runs (attnscope/gpu_bounds.h): the forward's products at the SGEMM
    // rate, the copies back at the pinned device-to-host rate, the scan's products at the SGEMM rate.
    attn::GpuBounds gb;
    std::string gbError;
    if (auto measured = attn::measureGpuBounds()) gb = *measured;
    else gbError = measured.status().message;
    const double flop = forwardFlop(c, n);
    const double fwd = median(forward);
    auto over = [](double bound, double ms) { return bound > 0 && ms > 0 ? bound / ms : 0.0; };
    const double forwardBoundMs = gb.sgemmGflops > 0 ? flop / (gb.sgemmGflops * 1e6) : 0;
    const double copiesBoundMs = gb.deviceToHostGBs > 0 ? forwardPhases.bytesBack / (gb.deviceToHostGBs * 1e6) : 0;
    const double scanBoundMs = gb.sgemmGflops > 0 ? attn::headScanFlops(c, ns) / (gb.sgemmGflops * 1e6) : 0;
    json j;
    j["model"] = model.name;
    j["backend"] = attn::backendDescription(attn::Backend::Cuda);
    j["tokens"] = n;
    j["lazy"] = mo.lazy;
    j["repeats"] = repeats;
    j["load_ms"] = loadMs;
    j["first_forward_ms"] = firstMs;  // with the weights dequantized and uploaded (once per model)
    j["device_weights_mb"] = double(model.denseWeightBytes()) / 1e6;
    j["forward_ms"] = fwd;
    j["forward_ms_min"] = *std::min_element(forward.begin(), forward.end());
    j["forward_phases"] = {{"embed_ms", median(embed)}, {"layers_ms", median(layers)}, {"head_ms", median(head)},
                           {"copies_ms", median(copies)}, {"bytes_back_mb", forwardPhases.bytesBack / 1e6},
                           {"device_activations_mb", forwardPhases.deviceBytes / 1e6}};
    if (!fusedT.error.empty()) {
        j["fused_attention"] = {{"error", fusedT.error}};
    } else if (!fusedT.forward.empty()) {
        const double ff = median(fusedT.forward);
        j["fused_attention"] = {{"forward_ms", ff},
                                {"forward_phases", phasesOf(fusedT.phases)},
                                {"layers_ms", median(fusedT.layers)},
                                {"forward_over_bound", over(forwardBoundMs, ff)},
                                // > 1: the fused kernel's layers are faster than the products'
                                {"layers_products_over_fused", median(fusedT.layers) > 0 ? median(layers) / median(fusedT.layers) : 0.0},
                                {"append_token_ms", median(fusedT.append)},
                                {"max_abs_diff", {{"last_layer_lse", fusedDiffLse}, {"final_norm", fusedDiffFinal}, {"last_logits", fusedDiffLogits}}}};
    }
    if (!autoT.error.empty()) {
        j["auto_attention"] = {{"error", autoT.error}};
    } else if (!autoT.forward.empty()) {
        json choices = json::array();
        for (const attn::DeviceAttentionChoice& ch : attn::deviceAttentionChoices())
            choices.push_back({{"queries", ch.queries}, {"keys", ch.keys}, {"window", ch.window}, {"products_ms", ch.productsMs},
                               {"fused_ms", ch.fusedMs}, {"fused", ch.fused}});
        const double af = median(autoT.forward);
        j["auto_attention"] = {{"first_forward_ms", autoT.firstMs},  // with each shape's timing of both paths
                               {"forward_ms", af},
                               {"layers_ms", median(autoT.layers)},
                               {"forward_over_bound", over(forwardBoundMs, af)},
                               {"append_token_ms", median(autoT.append)},
                               // per shape of attention (queries and keys up to these powers of two; window 0: none):
                               // one layer's time by each path, and the one kept
                               {"choices", choices}};
    }
    j["forward_buffers_recycled"] = recycled;  // over the repeats: host buffers the copies found mapped
    j["forward_gflop"] = flop / 1e9;
    // The rate reached (forwardFlop counts the causal half of the scores; the device computes them whole).
    j["forward_tflops"] = flop / (fwd * 1e9);
    j["forward_bound_ms"] = forwardBoundMs;  // the products at the measured SGEMM rate
    j["forward_over_bound"] = over(forwardBoundMs, fwd);  // ≥ 0.5 at 8192 tokens is the goal
    j["copies_bound_ms"] = copiesBoundMs;  // bytes back at the pinned device-to-host rate (the copies are pageable)
    j["copies_over_bound"] = over(copiesBoundMs, median(copies));
    j["weights_back"] = {{"tokens", nd}, {"dense_ms", median(dense)}, {"lazy_ms", median(lazy)},
                         {"dense", phasesOf(d.deviceTimings)}, {"lazy", phasesOf(l.deviceTimings)}};
    if (!mapsJson.is_null()) j["lazy_maps_pooled"] = mapsJson;  // every head of a layer, on the device and on the host
    // The new rows only; in place: nothing of the kept text crosses the bus. Uploaded: every layer's K and V go up
    // (bound: those bytes at the pinned host-to-device rate; the copies are from pageable memory).
    j["append_token_ms"] = median(append);
    j["append"] = {{"in_place", phasesOf(appendPhases)}, {"uploaded", phasesOf(appendUploadedPhases)}};
    j["append_token_uploaded_ms"] = median(appendUploaded);
    j["append_upload_bound_ms"] = gb.hostToDeviceGBs > 0 ? appendUploadedPhases.bytesUp / (gb.hostToDeviceGBs * 1e6) : 0;
    j["ablation_layer"] = layer;
    j["ablation_toggle_ms"] = median(ablate);
    j["cpu_parity"] = parityJson;  // the scan's dense run on the device against the CPU's
    j["head_scan"] = {{"tokens", ns}, {"heads", c.layers * c.heads}, {"total_ms", scanMs},
                      {"per_head_ms", scanMs / (c.layers * c.heads)}, {"goal_ms", 1000}, {"bound_ms", scanBoundMs},
                      {"over_bound", over(scanBoundMs, scanMs)}};
    if (gbError.empty())
        j["gpu_bounds"] = {{"device", gb.device},
                           {"sgemm_gflops", gb.sgemmGflops},
                           {"device_memory_gbs", gb.deviceMemoryGBs},
                           {"pinned_host_to_device_gbs", gb.hostToDeviceGBs},
                           {"pinned_device_to_host_gbs", gb.deviceToHostGBs},
                           {"pageable_device_to_host_gbs", gb.pageableDeviceToHostGBs},
                           {"host_memcpy_gbs", gb.hostMemcpyGBs},
                           {"host_register_gbs", gb.hostRegisterGBs},
                           {"host_threads", gb.hostThreads}};
    else
        j["gpu_bounds_error"] = gbError;
    j["peak_rss_mb"] = peakRssMb();
    std::cout << j.dump(2) << "\n";
    return kExitOk;
}

} // namespace

int runDecoderBench(const ModelOptionsCli& opt, const std::string& path)
{
    const auto tLoad = Clock::now();
    auto model = loadDecoderFor(opt, path);
    if (!model) return printError(model.status().message), kExitBadInput;
    const double loadMs = msSince(tLoad);
    const attn::Backend backend = parseBackend(opt.backend);
    if (int rc = checkBackendUsable(backend); rc != kExitOk) return rc;
    const auto avail = attn::availableBackends();
    if (backend != attn::Backend::Cpu && std::find(avail.begin(), avail.end(), attn::Backend::Cuda) != avail.end())
        return runDecoderDeviceBench(opt, *model, loadMs, backend);
    const attn::DecoderConfig& c = model->config;
    const int n = std::min(opt.benchTokens, c.maxPositions);
    if (n < 3) return printError("--tokens: expected at least 3, got " + std::to_string(opt.benchTokens)), kExitBadInput;
    std::vector<int> ids;
    if (attn::Status s = benchIds(*model, n, ids); !s.ok()) return printError(s.message), kExitFailure;
    // Past kBenchLazyTokens (1024) the forward is lazy (issue 18: no n×n map; dense maps of 4096 tokens would need ~50 GB),
    // and a forward takes seconds: three repeats.
    attn::DecoderOptions mo;
    mo.lazy = n > kBenchLazyTokens;
    const int repeats = mo.lazy ? std::min(opt.repeats, 3) : opt.repeats;
    attn::DecoderRun run;
    std::vector<double> forward, append, appendAfterForward, ablate, surprise;
    if (attn::Status s = attn::runDecoder(*model, ids, mo, run); !s.ok()) return printError(s.message), kExitFailure;
    // Peak memory of the model and one n-token run (issue 18: ≤ 450 MB for SmolLM2 at 128 tokens), before the
    // bench's own copies of runs, the bounds' buffers (512 MB) and the interpretability scans, which peak_rss_mb at
    // the end counts too.
    const double peakRssRunsMb = peakRssMb();
    // Appending one token to n−1: the prefix's run is copied (not timed), then the step is timed. `prefix` is what
    // typing and Generate append to: a run that an append made (a forward over n−2 tokens, then one appended), whose
    // maps have room for more tokens (HeadWeights); `fresh` is a forward's over n−1 tokens, whose maps move into a
    // buffer with room at the first append (append_after_forward_ms).
    attn::DecoderRun prefix, fresh;
    const std::vector<int> head(ids.begin(), ids.end() - 1);
    if (attn::Status s = attn::runDecoder(*model, head, mo, fresh); !s.ok()) return printError(s.message), kExitFailure;
    if (attn::Status s = attn::runDecoder(*model, std::vector<int>(ids.begin(), ids.end() - 2), mo, prefix); !s.ok())
        return printError(s.message), kExitFailure;
    if (attn::Status s = attn::appendTokens(*model, {ids[ids.size() - 2]}, prefix); !s.ok()) return printError(s.message), kExitFailure;
    {
        attn::DecoderRun grown = prefix;
        if (attn::Status s = attn::appendTokens(*model, {ids.back()}, grown); !s.ok()) return printError(s.message), kExitFailure;
    }
    // The products of one appended token, each weight once, as an append streams them (Q, K, V, W^O and the
    // feed-forward of every layer, then the LM head) on one row; `hot`: layer 0's weights L times and the LM head
    // a second time, from the caches: the kernels' own rate without the memory's. Beside the append they say how
    // much of it is products, and how much of the products is waiting for memory (streamed − hot).
    auto appendProducts = [&](bool hot) {
        const attn::Matrix x = attn::Matrix::Constant(1, c.hidden, 0.01f), xa = attn::Matrix::Constant(1, model->layers[0].Wo.inputs(), 0.01f);
        // The feed-forward's down projection reads F values (W_down, or GPT-2's c_proj).
        const attn::Matrix xf = attn::Matrix::Constant(1, c.intermediate, 0.01f);
        attn::Matrix out;
        if (hot) attn::product(x, model->unembedding(), out);
        const attn::ProductBurst burst;  // as appendTokens runs them
        const auto t0 = Clock::now();
        for (int l = 0; l < c.layers; ++l) {
            const std::size_t i = hot ? 0 : static_cast<std::size_t>(l);
            const attn::DecoderLayer& L = model->layers[i];
            for (const attn::WeightMatrix* w : {&L.Wq, &L.Wk, &L.Wv, &L.Wgate, &L.Wup, &L.Wfc})
                if (!w->empty()) attn::product(x, *w, out);
            attn::product(xa, L.Wo, out);
            for (const attn::WeightMatrix* w : {&L.Wdown, &L.Wproj})
                if (!w->empty()) attn::product(xf, *w, out);
        }
        attn::product(x, model->unembedding(), out);
        return msSince(t0);
    };
    std::vector<double> products, productsHot;
    std::fprintf(stderr, "measuring the machine's bounds...\n");
    Bounds bounds = measureBounds();
    // An ablation toggle in the middle layer: recompute from it.
    const int layer = c.layers / 2;
    // The three are timed in turn within each repeat, so that a change of the machine's speed during the run (a
    // shared virtual machine's clock varies by 2× between minutes here) touches each of them alike and their
    // ratios stay comparable.
    for (int r = 0; r < repeats; ++r) {
        auto t0 = Clock::now();
        attn::Status s = attn::runDecoder(*model, ids, mo, run);
        forward.push_back(msSince(t0));
        if (!s.ok()) return printError(s.message), kExitFailure;
        attn::DecoderRun grown = prefix;
        t0 = Clock::now();
        s = attn::appendTokens(*model, {ids.back()}, grown);
        append.push_back(msSince(t0));
        if (!s.ok()) return printError(s.message), kExitFailure;
        grown = fresh;
        t0 = Clock::now();
        s = attn::appendTokens(*model, {ids.back()}, grown);
        appendAfterForward.push_back(msSince(t0));
        if (!s.ok()) return printError(s.message), kExitFailure;
        products.push_back(appendProducts(false));
        productsHot.push_back(appendProducts(true));
        run.ablated = {{layer, r % c.heads}};
        // The new predictions first (what the window shows at once), then every position's surprise.
        t0 = Clock::now();
        s = attn::recomputeDecoderFrom(*model, layer, run, attn::Backend::Cpu, attn::SurpriseUpdate::Deferred);
        ablate.push_back(msSince(t0));
        if (!s.ok()) return printError(s.message), kExitFailure;
        t0 = Clock::now();
        s = attn::updateDecoderSurprise(*model, run);
        surprise.push_back(msSince(t0));
        if (!s.ok()) return printError(s.message), kExitFailure;
    }
    // One head's map as the views ask for it (issue 18): the whole map max-pooled to 1024 × 1024 (the overview a
    // click shows), and a 64 × 64 tile of cells (a zoomed view), from the run's maps through the tile seam.
    std::vector<double> headMap, headTile;
    {
        run.ablated.clear();
        if (attn::Status s = attn::recomputeDecoderFrom(*model, layer, run); !s.ok()) return printError(s.message), kExitFailure;
        const auto maps = attn::decoderMaps(*model, run);
        attn::Matrix out;
        for (int r = 0; r < repeats; ++r) {
            auto t0 = Clock::now();
            attn::Status s = maps->pooled(attn::MapKind::Weights, layer, r % c.heads, attn::MapRect{0, 0, n, n}, 1024, 1024, out);
            headMap.push_back(msSince(t0));
            if (!s.ok()) return printError(s.message), kExitFailure;
            t0 = Clock::now();
            const int side = std::min(64, n);
            s = maps->tile(attn::MapKind::Weights, layer, r % c.heads, attn::MapRect{n - side, n - side, side, side}, out);
            headTile.push_back(msSince(t0));
            if (!s.ok()) return printError(s.message), kExitFailure;
        }
    }
    // Every thumbnail of the grid (issue 18: L × H maps, each max-pooled to 128 × 128 as the window's grid asks for
    // them, kBundleThumbCells), once: their bound is the causal q·k products they are computed from at the SGEMM rate.
    double thumbsMs = 0;
    {
        const auto maps = attn::decoderMaps(*model, run);
        attn::Matrix out;
        const int side = std::min(128, n);
        const auto t0 = Clock::now();
        for (int l = 0; l < c.layers; ++l)
            for (int h = 0; h < c.heads; ++h)
                if (attn::Status s = maps->pooled(attn::MapKind::Weights, l, h, attn::MapRect{0, 0, n, n}, side, side, out);
                    !s.ok())
                    return printError(s.message), kExitFailure;
        thumbsMs = msSince(t0);
    }
    // Why does this head attend here? (issue 35) at n tokens: a cell and a whole query row of the last layer (the
    // most components: embed, every earlier head and MLP), and the composition scores of every head pair (once per
    // repeat, at most 3), each beside its FLOP bound. A lazy run keeps no per-head contexts: not timed.
    std::vector<double> qkCell, qkRow, composition;
    std::string qkUnavailable;
    if (!mo.lazy) {
        const int ql = c.layers - 1;
        for (int r = 0; r < repeats; ++r) {
            auto t0 = Clock::now();
            auto cell = attn::qkAttribution(*model, run, ql, r % c.heads, n - 1, n - 2);
            // A run the decomposition refuses (Unsupported; every family is decomposed since issue 35): not timed,
            // the JSON says why (qk_unavailable).
            if (!cell && cell.status().code == attn::StatusCode::Unsupported) {
                qkUnavailable = cell.status().message;
                qkCell.clear();
                qkRow.clear();
                break;
            }
            qkCell.push_back(msSince(t0));
            if (!cell) return printError(cell.status().message), kExitFailure;
            t0 = Clock::now();
            auto row = attn::qkAttributionRow(*model, run, ql, r % c.heads, n - 1);
            qkRow.push_back(msSince(t0));
            if (!row) return printError(row.status().message), kExitFailure;
        }
        for (int r = 0; r < (qkUnavailable.empty() ? std::min(repeats, 3) : 0); ++r) {
            const auto t0 = Clock::now();
            auto scores = attn::compositionScores(*model);
            composition.push_back(msSince(t0));
            if (!scores) return printError(scores.status().message), kExitFailure;
        }
    }
    // The interpretability views on a 20-token text (issue 20): the head-importance scan beside its SGEMM bound
    // (headScanFlops / the measured rate), and the cheap views. The scan and the lens take seconds on SmolLM2, so
    // they are timed at most 3 times.
    attn::DecoderRun small;
    const std::vector<int> smallIds(ids.begin(), ids.begin() + std::min<std::ptrdiff_t>(20, std::ptrdiff_t(ids.size())));
    if (attn::Status s = attn::runDecoder(*model, smallIds, {}, small); !s.ok()) return printError(s.message), kExitFailure;
    const auto target = attn::interpTarget(*model, small);
    if (!target) return printError(target.status().message), kExitFailure;
    std::vector<double> importance, firstRow, dla, lens, types;
    for (int r = 0; r < std::min(repeats, 3); ++r) {
        attn::Matrix map;
        auto t0 = Clock::now();
        // The first row (the last layer) is what the window shows first.
        double first = -1;
        attn::Status s = attn::headImportance(*model, small, target->id, map, [&](int) {
            if (first < 0) first = msSince(t0);
            return true;
        });
        importance.push_back(msSince(t0));
        firstRow.push_back(first);
        if (!s.ok()) return printError(s.message), kExitFailure;
        t0 = Clock::now();
        auto l = attn::logitLens(*model, small, 1);
        lens.push_back(msSince(t0));
        if (!l) return printError(l.status().message), kExitFailure;
    }
    // Patching from a clean text of the same length (one token changed) into the 20 tokens, on the metric
    // logit(top) − logit(second): the same scan as importance, plus the clean run's forward.
    std::vector<double> patching;
    {
        std::vector<int> cleanIds = smallIds;
        cleanIds[cleanIds.size() / 2] = (cleanIds[cleanIds.size() / 2] + 1) % c.vocab;
        const auto top2 = attn::topTokens(*model, small.lastLogits, 2, 1.0f);
        for (int r = 0; r < std::min(repeats, 2) && top2.size() == 2; ++r) {
            attn::Matrix map;
            auto t0 = Clock::now();
            attn::DecoderRun clean;
            attn::Status s = attn::runDecoder(*model, cleanIds, {}, clean);
            if (s.ok()) s = attn::activationPatching(*model, clean, small, top2[0].id, top2[1].id, map);
            patching.push_back(msSince(t0));
            // A clean run whose metric equals the corrupted one's is refused: that is no failure of the bench.
            if (!s.ok() && s.message.find("difference") == std::string::npos) return printError(s.message), kExitFailure;
        }
    }
    for (int r = 0; r < repeats; ++r) {
        auto t0 = Clock::now();
        auto d = attn::directLogitAttribution(*model, small, target->id);
        dla.push_back(msSince(t0));
        if (!d) return printError(d.status().message), kExitFailure;
        t0 = Clock::now();
        const attn::HeadTypes t = attn::headTypes(small);
        types.push_back(msSince(t0));
        if (t.sink.rows() != c.layers) return printError("head types: no rows"), kExitFailure;
    }
    // The bounds again after the timings: the best of both is the machine's (its speed drifts during a run).
    const Bounds after = measureBounds();
    bounds.sgemmGflops = std::max(bounds.sgemmGflops, after.sgemmGflops);
    bounds.memGBs = std::max(bounds.memGBs, after.memGBs);
    const double scanBoundMs = attn::headScanFlops(c, static_cast<int>(smallIds.size())) / (bounds.sgemmGflops * 1e6);
    const double flop = forwardFlop(c, n);
    const double boundMs = flop / (bounds.sgemmGflops * 1e6);
    const double fwd = median(forward), app1 = median(append), abl = median(ablate);
    const double appendBoundMs = weightBytes(*model) / (bounds.memGBs * 1e6);
    json j;
    j["model"] = model->name;
    j["tokens"] = n;
    j["lazy"] = mo.lazy;  // no n×n map kept (issue 18)
    j["repeats"] = repeats;
    j["load_ms"] = loadMs;
    j["forward_ms"] = fwd;
    j["forward_ms_min"] = *std::min_element(forward.begin(), forward.end());
    j["forward_gflop"] = flop / 1e9;
    j["bound_ms"] = boundMs;
    j["forward_over_bound"] = boundMs / fwd;  // share of the SGEMM bound reached (1 = at the bound)
    j["append_token_ms"] = app1;
    j["append_after_forward_ms"] = median(appendAfterForward);  // the first append after a forward (the maps move)
    j["append_bound_ms"] = appendBoundMs;
    j["append_over_bound"] = app1 / appendBoundMs;  // ≤ 1.5 is issue 17's goal
    j["append_products_ms"] = median(products);         // the append's weight products alone, streamed
    j["append_products_hot_ms"] = median(productsHot);  // the same from the caches (the kernels' rate)
    j["weights_mb"] = weightBytes(*model) / 1e6;                   // streamed per appended token
    j["dense_weights_mb"] = double(model->denseWeightBytes()) / 1e6;  // float32 the model holds in memory
    j["ablation_layer"] = layer;
    j["ablation_toggle_ms"] = abl;  // to the new predictions (the last position's logits)
    j["ablation_over_forward"] = abl / fwd;
    j["ablation_surprise_ms"] = median(surprise);  // then every position's surprise (the LM head at every position)
    j["ablation_goal"] = double(c.layers - layer) / c.layers;  // (L − l) / L
    j["head_map_ms"] = median(headMap);    // a head's whole map pooled to 1024²: ≤ 150 ms at 8192 is issue 18's goal
    j["head_tile_ms"] = median(headTile);  // a zoomed 64 × 64 tile: ≤ 30 ms
    j["thumbnails_ms"] = thumbsMs;  // all L × H thumbnails: ≤ 1.5 × their bound at 4096 is issue 18's goal
    j["thumbnails_bound_ms"] = c.layers * c.heads * 2.0 * c.headDim * n * (n + 1.0) / 2 / (bounds.sgemmGflops * 1e6);
    j["interp_tokens"] = static_cast<int>(smallIds.size());
    j["head_importance_ms"] = median(importance);
    j["head_importance_first_row_ms"] = median(firstRow);  // ≤ 300 is issue 20's goal
    j["head_scan_bound_ms"] = scanBoundMs;
    j["head_scan_over_bound"] = scanBoundMs / median(importance);  // share of the SGEMM bound reached
    j["dla_ms"] = median(dla);
    if (!patching.empty()) {
        j["patching_ms"] = median(patching);
        j["patching_over_bound"] = scanBoundMs / median(patching);
    }
    j["logit_lens_ms"] = median(lens);
    // The lens's products alone: every layer's n residual rows against the V×M unembedding.
    j["logit_lens_bound_ms"] = 2.0 * c.layers * double(smallIds.size()) * c.hidden * double(c.vocab) / (bounds.sgemmGflops * 1e6);
    j["head_types_ms"] = median(types);
    if (!qkUnavailable.empty()) j["qk_unavailable"] = qkUnavailable;
    if (!qkCell.empty()) {
        // The bounds count float multiply-adds at the SGEMM rate; the decomposition runs in double (its sum rule is
        // checked to 1e-4 of the score), so about 2× its bound is its floor. Goals at 128 tokens on SmolLM2: a cell
        // ≤ 50 ms, a row ≤ 500 ms, composition ≤ 2 s.
        const double rate = bounds.sgemmGflops * 1e6;
        j["qk_layer"] = c.layers - 1;
        j["qk_cell_ms"] = median(qkCell);
        j["qk_cell_bound_ms"] = attn::qkCellFlops(c, c.layers - 1) / rate;
        j["qk_row_ms"] = median(qkRow);
        j["qk_row_bound_ms"] = attn::qkRowFlops(c, c.layers - 1, n) / rate;
        j["composition_ms"] = median(composition);
        j["composition_bound_ms"] = attn::compositionFlops(c) / rate;
    }
    j["peak_rss_run_mb"] = peakRssRunsMb;
    j["peak_rss_mb"] = peakRssMb();
    j["bounds"] = {{"sgemm_gflops", bounds.sgemmGflops}, {"memory_gbs", bounds.memGBs}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
}

} // namespace app
