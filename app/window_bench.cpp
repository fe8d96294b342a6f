// `attnscope bench --gui` (window.h runGuiBench): the window's frame rate while editing and the edit-to-picture
// latency, measured on a real GL context. Reports numbers; asserts nothing about speed.
#include "window.h"

#include "cli/cli.h"
#include "messages.h"
#include "panels/panels.h"
#include "panels/style.h"
#include "platform/platform.h"
#include "cli/bench_bounds.h"
#include "render/heatmap_gl.h"
#include "state/app_state.h"
#include "state/model_state.h"

#include <glad/gl.h>
#include <imgui.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

namespace app {

namespace {

struct Summary {
    double median = 0, p95 = 0, max = 0;
    std::size_t count = 0;
};
// Median, 95th percentile (nearest rank) and maximum.
Summary summarize(std::vector<double> v)
{
    Summary s;
    s.count = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    s.median = v[v.size() / 2];
    s.p95 = v[std::min(v.size() - 1, static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(v.size()))) - 1)];
    s.max = v.back();
    return s;
}
nlohmann::json toJson(const Summary& s, bool withMax)
{
    nlohmann::json j = {{"median", s.median}, {"p95", s.p95}};
    if (withMax) j["max"] = s.max;
    return j;
}

attn::Session benchSession(int n, int dModel, int heads)
{
    attn::Session s;
    s.config.heads = heads;
    s.input.X = makeFilled(FillKind::RandomNormal, n, dModel, 1);
    s.input.Wq = makeFilled(FillKind::Xavier, dModel, dModel, 2);
    s.input.Wk = makeFilled(FillKind::Xavier, dModel, dModel, 3);
    s.input.Wv = makeFilled(FillKind::Xavier, dModel, dModel, 4);
    return s;
}

double msSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The decoder the model case runs: SmolLM2 when installed (defaultDecoderPath), else the tiny test model of the
// source tree (a context of 128 tokens).
std::string benchDecoderPath()
{
    const std::string installed = defaultDecoderPath();
    if (std::filesystem::path(installed).extension() == ".gguf") return installed;
    return std::string(ATTNSCOPE_SOURCE_DIR) + "/tests/model/data/tiny_llama.gguf";
}

} // namespace

int runGuiBench(const GuiBenchOptions& opt, const Bounds& bounds)
{
    const int frames = opt.frames, modelTokens = opt.modelTokens;
    const attn::Backend backend = opt.backend;
    const bool json = opt.json;
    Platform platform;
    PlatformOptions po;
    po.vsync = false;  // measure our frame time, not the display's refresh
    po.offscreen = opt.offscreen;
    attn::Status st = platform.init(po);
    if (!st.ok()) {
        printError(st.message);
        return kExitFailure;
    }
    setupImGuiStyle();
    GlHeatmapRenderer renderer;
    if (!(st = renderer.init()).ok()) {
        printError(st.message);
        return kExitFailure;
    }
    setHeatmapRenderer(&renderer);
    AppState state;
    state.autosave = false;
    state.doc.backend = backend;
    state.doc.startWorker();  // as in the window: the frame loop never waits for a compute

    // One frame as the window draws it: show a finished compute / start the next, draw every panel, render,
    // wait for the GPU (glFinish) so that the time covers the whole picture.
    AppState* drawn = &state;  // the state the frames draw
    auto runFrame = [&] {
        platform.pollEvents(0.0);
        const bool shown = drawn->doc.recomputeIfNeeded();
        platform.beginFrame();
        drawAllPanels(*drawn);
        platform.renderFrame();
        glFinish();
        platform.swapBuffers();
        renderer.endFrame();
        return shown;
    };
    // Loads a session, waits for its first result and draws a few frames (textures, font atlas, layout).
    auto load = [&](int n, int dModel, int heads) {
        state.doc.setSession(benchSession(n, dModel, heads), "");
        state.doc.waitForCompute();
        for (int i = 0; i < 5; ++i) runFrame();
    };
    // Frames with nothing changing, every panel drawn, alternating between `a` and `b` in blocks of 10 so
    // that both see the same machine load (the first 3 frames of a block, which upload the textures of
    // the other state's maps, are not counted).
    auto steadyFrames = [&](AppState& a, AppState& b, int count, Summary& sa, Summary& sb) {
        std::vector<double> ma, mb;
        for (int block = 0; static_cast<int>(std::min(ma.size(), mb.size())) < count; ++block) {
            drawn = block % 2 == 0 ? &a : &b;
            for (int i = 0; i < 10; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                runFrame();
                if (i >= 3) (block % 2 == 0 ? ma : mb).push_back(msSince(t0));
            }
        }
        drawn = &state;
        sa = summarize(ma);
        sb = summarize(mb);
    };
    // Dragging a cell of X: one edit per frame (at most 60 frames/s) for `dragFrames` frames, then frames
    // until the last edit shows.
    // An edit's latency runs from the edit to the end of the first frame that shows a result of it (or of a
    // later edit: the worker coalesces). Frames that start while a compute runs also count "while computing".
    struct Drag {
        std::vector<double> frameMs, latencyMs, computingFrameMs;
        std::vector<double> shownFrameMs;  // the frames that took a new result and drew it
        // Edit to the frame that drew its maps: with a large result of the device, they come after the result
        // (Document::mapsArriving); otherwise with it (the same as latencyMs).
        std::vector<double> mapsLatencyMs;
    };
    auto drag = [&](int dragFrames) {
        Drag d;
        std::vector<std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> open;  // revision, edit time
        std::vector<std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> noMaps;  // shown, maps not yet
        state.doc.beginGesture();
        for (int i = 0; !(i >= dragFrames && open.empty() && noMaps.empty()); ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            if (i < dragFrames) {
                state.doc.setCellInGesture(MatrixId::X, 3, 5, 0.5f + 0.01f * static_cast<float>(i));
                open.emplace_back(state.doc.revision(), t0);
            }
            const bool computing = state.doc.computing();
            const bool shown = runFrame();
            const auto t1 = std::chrono::steady_clock::now();
            const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
            if (shown) d.shownFrameMs.push_back(ms);
            // Frames at most 60 per second, as with vsync in the window (where the frame loop then sleeps and
            // leaves the cores to the compute); a frame that takes longer starts the next at once.
            std::this_thread::sleep_until(t0 + std::chrono::microseconds(16667));
            d.frameMs.push_back(ms);
            if (computing) d.computingFrameMs.push_back(ms);
            const std::uint64_t shownRev = state.doc.resultRevision();
            while (!open.empty() && open.front().first <= shownRev) {
                d.latencyMs.push_back(std::chrono::duration<double, std::milli>(t1 - open.front().second).count());
                noMaps.push_back(open.front());
                open.erase(open.begin());
            }
            // (A result whose maps the device lost is computed again: mapsArriving stays true until they come.)
            if (!state.doc.mapsArriving()) {
                for (const auto& e : noMaps) d.mapsLatencyMs.push_back(std::chrono::duration<double, std::milli>(t1 - e.second).count());
                noMaps.clear();
            }
        }
        return d;
    };
    // A drag's figures: edit to picture and to its maps, frames while computing, frames that took a result and drew it.
    struct EditSummary {
        Summary latency, maps, computing, shown;
    };
    auto summarizeEdits = [](const Drag& d) {
        return EditSummary{summarize(d.latencyMs), summarize(d.mapsLatencyMs), summarize(d.computingFrameMs), summarize(d.shownFrameMs)};
    };

    // 1. n=64, d_model=64, h=4: a drag.
    load(64, 64, 4);
    const Drag drag64 = drag(frames);
    const Summary frame64 = summarize(drag64.frameMs), lat64 = summarize(drag64.latencyMs);

    // 2. n=1024, d_model=512, h=8: dragging a cell (the case).
    load(1024, 512, 8);
    const double ranges1024 = state.doc.ranges().ms;
    const double compute1024 = state.doc.resultComputeMs() - ranges1024;  // the job's time less its colour ranges
    const Drag drag1024 = drag(std::max(20, frames / 4));
    const Summary frame1024 = summarize(drag1024.frameMs), lat1024 = summarize(drag1024.latencyMs),
                  busy1024 = summarize(drag1024.computingFrameMs);

    // 3. n=4096, d_model=512, h=8: every panel, steady; then edits, frames while each computes.
    load(4096, 512, 8);
    // The colour ranges of the result just shown, computed on the worker after the compute (part of
    // edit_to_picture_ms: every head's scores and weights are scanned).
    const double ranges4096 = state.doc.ranges().ms;
    const double compute4096 = state.doc.resultComputeMs() - ranges4096;
    // The edits come after a pause, as a person's do: the worker has then given its spare buffer the new shapes
    // (compute_worker.h), and the first edit computes into memory that is already mapped.
    state.doc.waitForWorkerIdle();
    const Drag drag4096 = drag(3);
    // The last edit's job on the worker, in parts: the compute, the colour ranges, the pooled parts of the maps on
    // screen; and the bound of the work it had left (one X cell: its token's Q/K/V row, one score row and column a
    // head, every weight rescaled (read + write), the output row corrections, concat·W^O (a full product); then
    // the ranges read the scores, weights and mask flags of the heads they scan whole (none where they are
    // updated from the changed cells), and the pooling reads the maps it pools).
    struct EditJob {
        double ms = 0, computeMs = 0, rangesMs = 0, poolMs = 0, bytes = 0, flops = 0, boundMs = 0;
        bool incremental = false;
        int scoresUpdated = 0, weightsUpdated = 0;  // heads whose range was updated from what changed
    } job4096;
    {
        const attn::AttentionResult& r = state.doc.result();
        job4096.ms = state.doc.resultComputeMs();
        job4096.rangesMs = state.doc.ranges().ms;
        job4096.poolMs = state.doc.pooledMs();
        job4096.computeMs = job4096.ms - job4096.rangesMs - job4096.poolMs;
        job4096.incremental = r.incremental;
        job4096.scoresUpdated = state.doc.ranges().scoresUpdated;
        job4096.weightsUpdated = state.doc.ranges().weightsUpdated;
        // (The bench's sessions are row-major: a head's Q is T × d_q and its K S × d_k, also while its maps are still
        // on the device.)
        const double H = double(r.heads.size()), T = double(r.heads.empty() ? 0 : r.heads[0].Q.rows()),
                     S = double(r.heads.empty() ? 0 : r.heads[0].K.rows());
        const double pooledValues = H * T * S + T * S;  // the heads grid's thumbnails and the current head's weights
        // The ranges of a head scanned whole read its scores (or weights) and half the mask flags' bytes each;
        // a head's range updated from the changed cells reads next to nothing.
        const double scanned = 2 * H - double(job4096.scoresUpdated) - double(job4096.weightsUpdated);
        job4096.bytes = H * T * S * 2 * 4 + scanned * T * S * 4.5 + pooledValues * 4;
        job4096.flops = 2.0 * double(r.concat.rows()) * double(r.concat.cols()) * double(r.output.cols());
        if (bounds.memGBs > 0 && bounds.sgemmGflops > 0)
            job4096.boundMs = job4096.bytes / (bounds.memGBs * 1e6) + job4096.flops / (bounds.sgemmGflops * 1e6);
    }
    // 4. Every panel, nothing changing: n=4096 (above) against n=64, d_model=64, h=4, side by side.
    AppState small;
    small.autosave = false;
    small.doc.backend = backend;
    small.doc.setSession(benchSession(64, 64, 4), "");
    small.doc.waitForCompute();
    Summary steady4096, steady64;
    steadyFrames(state, small, std::max(20, frames / 4), steady4096, steady64);
    const Summary busy4096 = summarize(drag4096.computingFrameMs), lat4096 = summarize(drag4096.latencyMs);

    // 5. A decoder's forward on the model worker (issue 18: frame p95 ≤ 50 ms while n = 8192 runs): every panel
    // drawn, the model panel showing the run's progress, at most 60 frames/s as in the window; the frames that
    // start while the forward runs are counted.
    AppState modelState;
    modelState.autosave = false;
    modelState.doc.backend = backend;
    modelState.model.backend = backend;
    modelState.doc.setSession(benchSession(64, 64, 4), "");
    modelState.doc.waitForCompute();
    ModelStartup startup;
    startup.dir = benchDecoderPath();
    startup.async = true;
    for (int i = 0; i < modelTokens; ++i) startup.text += " word";  // one token each in SmolLM2's vocabulary
    startModelMode(modelState, startup);
    std::vector<double> forwardFrames;
    drawn = &modelState;
    while (modelState.model.active && !modelState.model.hasRun() && modelState.model.error.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool computing = modelState.model.computing();
        runFrame();
        if (computing) forwardFrames.push_back(msSince(t0));
        std::this_thread::sleep_until(t0 + std::chrono::microseconds(16667));
    }
    drawn = &state;
    const Summary forward = summarize(forwardFrames);
    const ModelState& mm = modelState.model;
    const std::size_t forwardTokens = mm.hasRun() ? mm.shownRun().tokens.size() : 0;
    const std::string forwardError = mm.active ? mm.error : "cannot open " + startup.dir;

    // 6. The large case (issue 34: the window on a GPU at n = 8192, d_model 512, 8 heads): from the session's
    // opening to the first frame that draws its result (the heads grid and the current head's whole maps, pooled,
    // on screen), the job's parts on the worker, then edits as in 3 with the frames while each computes and the
    // frames that take each new result and draw it (the "within one frame of the result" of the issue).
    struct Large {
        int n = 0;
        double openToPictureMs = 0, firstFrameMs = 0, jobMs = 0, rangesMs = 0, poolMs = 0;
        double openToMapsMs = 0;  // to the frame that drew the maps (after the result when they stayed on the device)
        EditSummary edits;
        // Zoomed in (view zoom 8: the maps drawn as tiles of readable cells, not pooled): the first frame after the
        // zoom, then three edits as above.
        double zoomFirstFrameMs = 0;
        EditSummary zoomed;
        std::string backend, error;
        long deviceFills = 0, hostUploads = 0;
    } large;
    GlHeatmapRenderer::FillStats before;
    large.n = opt.largeN >= 0 ? opt.largeN : (state.doc.result().backend == attn::Backend::Cuda ? 8192 : 0);
    if (large.n > 0) {
        before = renderer.fillStats();
        const auto t0 = std::chrono::steady_clock::now();
        state.doc.setSession(benchSession(large.n, 512, 8), "");
        for (;;) {
            const auto f0 = std::chrono::steady_clock::now();
            const bool shown = runFrame();
            if (shown && !state.doc.lastError().ok()) {
                large.error = state.doc.lastError().message;
                break;
            }
            if (shown && state.doc.resultRevision() == state.doc.revision()) {
                large.firstFrameMs = msSince(f0);
                break;
            }
            std::this_thread::sleep_until(f0 + std::chrono::microseconds(16667));
        }
        large.openToPictureMs = msSince(t0);
        while (large.error.empty() && state.doc.mapsArriving()) {
            const auto f0 = std::chrono::steady_clock::now();
            runFrame();
            std::this_thread::sleep_until(f0 + std::chrono::microseconds(16667));
        }
        large.openToMapsMs = msSince(t0);
    }
    if (large.n > 0 && large.error.empty()) {
        large.jobMs = state.doc.resultComputeMs();
        large.rangesMs = state.doc.ranges().ms;
        large.poolMs = state.doc.pooledMs();
        large.backend = attn::backendDescription(state.doc.result().backend);
        for (int i = 0; i < 5; ++i) runFrame();
        state.doc.waitForWorkerIdle();
        const Drag d = drag(3);
        large.edits = summarizeEdits(d);
        state.view.zoom = 8.0f;
        const auto z0 = std::chrono::steady_clock::now();
        runFrame();
        large.zoomFirstFrameMs = msSince(z0);
        for (int i = 0; i < 3; ++i) runFrame();
        state.doc.waitForWorkerIdle();
        const Drag dz = drag(3);
        large.zoomed = summarizeEdits(dz);
        state.view.zoom = 1.0f;
        large.deviceFills = renderer.fillStats().deviceFills - before.deviceFills;
        large.hostUploads = renderer.fillStats().hostUploads - before.hostUploads;
    }

    const std::string rendererName = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
    const GlHeatmapRenderer::FillStats& fs = renderer.fillStats();
    const double ratio = steady64.median > 0 ? steady4096.median / steady64.median : 0.0;
    if (json) {
        nlohmann::json j;
        j["problem"] = {{"n", 1024}, {"d_model", 512}, {"heads", 8}};
        j["backend"] = attn::backendDescription(state.doc.backend);
        j["renderer"] = rendererName;
        if (platform.offscreen()) j["offscreen"] = platform.offscreenDescription();
        j["frame_ms"] = toJson(frame1024, false);
        j["edit_to_picture_ms"] = toJson(lat1024, false);
        j["frame_ms_while_computing"] = toJson(busy1024, true);
        j["compute_ms"] = compute1024;
        j["display_ranges_ms"] = ranges1024;
        j["n4096"] = {{"compute_ms", compute4096},
                      {"display_ranges_ms", ranges4096},
                      {"frame_ms_while_computing", toJson(busy4096, true)},
                      {"edit_to_picture_ms", toJson(lat4096, false)},
                      {"edit_job", {{"ms", job4096.ms},
                                    {"compute_ms", job4096.computeMs},
                                    {"display_ranges_ms", job4096.rangesMs},
                                    {"pooling_ms", job4096.poolMs},
                                    {"incremental", job4096.incremental},
                                    {"score_ranges_updated_heads", job4096.scoresUpdated},
                                    {"weight_ranges_updated_heads", job4096.weightsUpdated},
                                    {"bytes", job4096.bytes},
                                    {"flops", job4096.flops},
                                    {"bound_ms", job4096.boundMs},
                                    {"over_bound", job4096.boundMs > 0 ? job4096.ms / job4096.boundMs : 0.0}}}};
        j["bounds"] = {{"sgemm_gflops", bounds.sgemmGflops}, {"memory_gbs", bounds.memGBs}};
        j["n64"] = {{"frame_ms", toJson(frame64, false)}, {"edit_to_picture_ms", toJson(lat64, false)}};
        j["all_panels_frame_ms"] = {{"n4096", toJson(steady4096, true)}, {"n64", toJson(steady64, true)},
                                    {"ratio_n4096_to_n64", ratio}};
        j["model_forward"] = {{"model", mm.active ? mm.modelName() : startup.dir},
                              {"tokens", forwardTokens},
                              {"forward_ms", mm.lastRunMs},
                              {"frame_ms_while_forward", toJson(forward, true)},
                              {"frames", forward.count}};
        if (!forwardError.empty()) j["model_forward"]["error"] = forwardError;
        if (!large.error.empty())
            j["large"] = {{"n", large.n}, {"error", large.error}};
        else if (large.n > 0)
            j["large"] = {{"n", large.n},
                          {"d_model", 512},
                          {"heads", 8},
                          {"backend", large.backend},
                          {"open_to_picture_ms", large.openToPictureMs},
                          {"open_to_maps_ms", large.openToMapsMs},
                          {"first_frame_ms", large.firstFrameMs},
                          {"job_ms", large.jobMs},
                          {"display_ranges_ms", large.rangesMs},
                          {"pooling_ms", large.poolMs},
                          {"edit_to_picture_ms", toJson(large.edits.latency, true)},
                          {"edit_to_maps_ms", toJson(large.edits.maps, true)},
                          {"frame_ms_while_computing", toJson(large.edits.computing, true)},
                          {"frame_showing_result_ms", toJson(large.edits.shown, true)},
                          {"zoomed", {{"first_frame_ms", large.zoomFirstFrameMs},
                                      {"edit_to_picture_ms", toJson(large.zoomed.latency, true)},
                                      {"edit_to_maps_ms", toJson(large.zoomed.maps, true)},
                                      {"frame_showing_result_ms", toJson(large.zoomed.shown, true)}}},
                          {"heatmap_device_fills", large.deviceFills},
                          {"heatmap_host_uploads", large.hostUploads}};
        j["heatmap_uploads"] = {{"host_tiles", fs.hostUploads}, {"device", fs.deviceFills}, {"rows_uploaded", fs.rowsUploaded},
                                {"rows_unchanged", fs.rowsSkipped}};
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("gui bench (%s, renderer: %s); computes on a worker thread, frames never wait\n",
                    attn::backendDescription(state.doc.backend).c_str(), rendererName.c_str());
        std::printf("n=64 d_model=64 h=4, dragging a cell: frame median %.2f ms (%.1f frames/s) p95 %.2f ms; edit to picture "
                    "median %.1f ms\n",
                    frame64.median, 1000.0 / std::max(1e-9, frame64.median), frame64.p95, lat64.median);
        std::printf("n=1024 d_model=512 h=8, dragging a cell (compute %.1f ms): frame median %.1f p95 %.1f ms; edit to picture "
                    "median %.1f p95 %.1f ms; frames while computing median %.1f p95 %.1f max %.1f ms\n",
                    compute1024, frame1024.median, frame1024.p95, lat1024.median, lat1024.p95, busy1024.median, busy1024.p95,
                    busy1024.max);
        std::printf("n=4096 d_model=512 h=8 (compute %.1f ms, then colour ranges %.1f ms): frames while computing median %.1f "
                    "p95 %.1f max %.1f ms\n",
                    compute4096, ranges4096, busy4096.median, busy4096.p95, busy4096.max);
        std::printf("n=4096 last edit's job: %.1f ms (compute %.1f%s, colour ranges %.1f (scores of %d heads updated, weights of %d), pooling %.1f); bound %.1f ms "
                    "(%.2f GB at %.1f GB/s, %.2f GFLOP at %.1f GFLOP/s)\n",
                    job4096.ms, job4096.computeMs, job4096.incremental ? " incremental" : " full", job4096.rangesMs, job4096.scoresUpdated, job4096.weightsUpdated, job4096.poolMs,
                    job4096.boundMs, job4096.bytes * 1e-9, bounds.memGBs, job4096.flops * 1e-9, bounds.sgemmGflops);
        std::printf("every panel, nothing changing: n=4096 median %.2f ms, n=64 median %.2f ms: ratio %.2f\n", steady4096.median,
                    steady64.median, ratio);
        if (!forwardError.empty())
            std::printf("decoder forward: %s\n", forwardError.c_str());
        else
            std::printf("decoder forward on the model worker (%s, n=%zu, %.0f ms): %zu frames, median %.1f p95 %.1f max %.1f ms\n",
                        mm.modelName().c_str(), forwardTokens, mm.lastRunMs, forward.count, forward.median, forward.p95,
                        forward.max);
        if (!large.error.empty())
            std::printf("n=%d d_model=512 h=8: %s\n", large.n, large.error.c_str());
        else if (large.n > 0)
            std::printf("n=%d d_model=512 h=8 (%s): open to picture %.0f ms, to its maps %.0f ms (job %.0f ms: colour ranges "
                        "%.1f, pooling %.1f; first frame %.1f ms); edit to picture median %.0f max %.0f ms, to its maps median "
                        "%.0f ms; frames while computing p95 %.1f max %.1f ms; frames showing a result median %.1f max %.1f ms; "
                        "heatmaps %ld filled from device memory, %ld uploaded\n",
                        large.n, large.backend.c_str(), large.openToPictureMs, large.openToMapsMs, large.jobMs, large.rangesMs,
                        large.poolMs, large.firstFrameMs, large.edits.latency.median, large.edits.latency.max, large.edits.maps.median,
                        large.edits.computing.p95, large.edits.computing.max, large.edits.shown.median, large.edits.shown.max, large.deviceFills,
                        large.hostUploads);
        if (large.n > 0 && large.error.empty())
            std::printf("n=%d zoomed in (view zoom 8): first frame %.1f ms; edit to picture median %.0f ms; frames showing a "
                        "result max %.1f ms\n",
                        large.n, large.zoomFirstFrameMs, large.zoomed.latency.median, large.zoomed.shown.max);
        std::printf("heatmap textures: %ld tiles uploaded from host memory (%ld rows sent, %ld unchanged rows kept), %ld filled "
                    "from device memory (CUDA-OpenGL interop)\n",
                    fs.hostUploads, fs.rowsUploaded, fs.rowsSkipped, fs.deviceFills);
    }
    setHeatmapRenderer(nullptr);
    renderer.shutdown();
    platform.shutdown();
    return kExitOk;
}

} // namespace app
