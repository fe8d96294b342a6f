// The frame loop: events → recompute (only when an input changed) → panels → render → screenshot/hooks →
// swap → autosave.
#include "window.h"

#include "cli.h"
#include "messages.h"
#include "panels/panels.h"
#include "panels/style.h"
#include "platform/platform.h"
#include "render/heatmap_gl.h"
#include "screenshot.h"
#include "state/export_actions.h"
#include "state/paths.h"

#include <glad/gl.h>
#include <imgui.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

namespace app {
namespace {

volatile std::sig_atomic_t g_terminate = 0;
void onTerminate(int) { g_terminate = 1; }

double nowSeconds()
{
    static const auto t0 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void writeLayout(const AppState& state, const GlHeatmapRenderer& renderer, const std::string& dir, int captures)
{
    nlohmann::json j;
    const GlHeatmapRenderer::FillStats& fs = renderer.fillStats();
    j["heatmap_fills"] = {{"host", fs.hostUploads}, {"device", fs.deviceFills}, {"device_fallbacks", fs.deviceFallbacks}};
    for (const auto& [name, r] : state.rects) j["rects"][name] = {r.x0, r.y0, r.x1, r.y1};
    j["captures"] = captures;
    j["generation"] = state.doc.resultGeneration();
    j["revision"] = state.doc.revision();
    j["saved_revision"] = state.savedRevision;
    j["error"] = state.doc.lastError().message;
    j["load_error"] = state.loadError;
    j["restore_offer"] = state.showRestoreOffer;
    if (state.doc.present(MatrixId::X)) j["X00"] = state.doc.cell(MatrixId::X, 0, 0);  // what the test edits
    const ImVec2 m = ImGui::GetIO().MousePos;
    j["mouse"] = {m.x, m.y};
    // Temporary file + rename (readers never see half a file), without fsync: this runs every few frames.
    const std::string tmp = dir + "/layout.json.tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f << j.dump(1);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, dir + "/layout.json", ec);
}

// The rectangle of lesson panel `lesson` in framebuffer pixels, cut out of `frame`.
Image cropToLesson(const AppState& state, int lesson, const Image& frame)
{
    const ImGuiIO& io = ImGui::GetIO();
    const float sx = io.DisplaySize.x > 0 ? float(frame.width) / io.DisplaySize.x : 1.0f;
    const float sy = io.DisplaySize.y > 0 ? float(frame.height) / io.DisplaySize.y : 1.0f;
    const UiRect& r = state.lessonRects[lesson];
    return cropImage(frame, int(std::lround(r.x0 * sx)), int(std::lround(r.y0 * sy)), int(std::lround((r.x1 - r.x0) * sx)),
                     int(std::lround((r.y1 - r.y0) * sy)));
}

// "Save this view as PNG": the armed capture's panel, from the frame just rendered.
void saveViewCapture(AppState& state, const Image& frame)
{
    const AppState::ViewCapture cap = *state.viewCapture;
    state.viewCapture.reset();
    const Image img = cropToLesson(state, cap.lesson, frame);
    std::string& status = state.lessonPngStatus[cap.lesson];
    const attn::Status st = img.width == 0 ? attn::invalidArgument("the panel is outside the window") : writeImage(cap.path, img);
    state.lessonPngFailed[cap.lesson] = !st.ok();
    if (st.ok()) {
        status = "saved " + cap.path + " (" + std::to_string(img.width) + "×" + std::to_string(img.height) + " pixels)";
        postInfo(status);
    } else {
        status = "cannot save " + std::string(lessonMenuLabel(LessonId(cap.lesson))) + ": " + st.message;
        postError(status);
    }
}

// Screenshot mode: compare with the reference and report. Returns the exit code.
int finishScreenshot(const WindowOptions& opt, const Image& img)
{
    attn::Status st = writeImage(opt.screenshotPath, img);
    if (!st.ok()) {
        printError(st.message);
        return kExitFailure;
    }
    std::fprintf(stderr, "attnscope: wrote %s (%d×%d)\n", opt.screenshotPath.c_str(), img.width, img.height);
    if (opt.referencePath.empty()) return kExitOk;
    std::error_code ec;
    if (!std::filesystem::exists(opt.referencePath, ec)) {
        writeImage(opt.referencePath, img);
        printError("reference " + opt.referencePath + " did not exist: wrote the actual image there. Look at it, "
                   "commit it if it is right, and run again. FAILING this run.");
        return kExitFailure;
    }
    auto ref = readPng(opt.referencePath);
    if (!ref.ok()) {
        printError(ref.status().message);
        return kExitFailure;
    }
    auto d = compareImages(img, *ref);
    if (!d.ok()) {
        printError(d.status().message);
        return kExitFailure;
    }
    std::fprintf(stderr, "attnscope: %.4f%% of pixels differ from %s (threshold %.4f%%, max channel difference %d)\n",
                 d->differingFraction * 100, opt.referencePath.c_str(), opt.threshold * 100, d->maxChannelDiff);
    if (d->differingFraction > opt.threshold) {
        printError("screenshot differs from the reference " + opt.referencePath + " beyond the threshold");
        return kExitFailure;
    }
    return kExitOk;
}

// File → Export… → "Save window screenshot": this frame was drawn without the dialog; it is read back here,
// after rendering and before the swap, like --screenshot.
void saveRequestedScreenshot(ExportState& st, int width, int height)
{
    st.screenshotReady = false;
    const Image shot = captureFramebuffer(width, height);
    fig::RgbaImage rgba;
    rgba.width = shot.width;
    rgba.height = shot.height;
    rgba.pixels.resize(std::size_t(shot.width) * std::size_t(shot.height) * 4);
    for (std::size_t i = 0, n = std::size_t(shot.width) * std::size_t(shot.height); i < n; ++i) {
        std::copy_n(shot.rgb.data() + i * 3, 3, rgba.pixels.data() + i * 4);
        rgba.pixels[i * 4 + 3] = 255;
    }
    const attn::Expected<std::string> r = saveWindowScreenshot(st.screenshotPath, rgba);
    st.screenshotMessage = r ? ActionMessage{*r, false} : ActionMessage{r.status().message, true};
    if (r) postInfo(*r);
    else postError(r.status().message);
}

} // namespace

int runWindow(const WindowOptions& opt)
{
    Platform platform;
    PlatformOptions po;
    po.width = opt.width;
    po.height = opt.height;
    po.vsync = opt.screenshotPath.empty();
    attn::Status st = platform.init(po);
    if (!st.ok()) {
        printError(st.message);
        return kExitFailure;
    }
    const std::string fontWarning = setupImGuiStyle();
    if (!fontWarning.empty()) postWarning(fontWarning);
    GlHeatmapRenderer renderer;
    st = renderer.init();
    if (!st.ok()) {
        printError(st.message);
        return kExitFailure;
    }
    setHeatmapRenderer(&renderer);

    AppState state;
    state.doc.backend = opt.backend;
    const bool screenshotMode = !opt.screenshotPath.empty();
    // Screenshots and tests never touch the user's state unless given a state folder.
    state.autosave = opt.autosave && (!screenshotMode || !opt.stateDir.empty());
    state.stateDir = (state.autosave || !opt.stateDir.empty()) ? stateDirectory(opt.stateDir) : "";
    state.presetsDir = presetsDirectory();
    state.recordRects = !opt.testHooksDir.empty();
    loadUserState(state);

    const std::string defaultPreset = state.presetsDir.empty() ? "" : state.presetsDir + "/seed000_worked_example.json";
    if (!defaultPreset.empty()) {
        auto s = attn::loadSession(defaultPreset);
        if (s.ok()) {
            state.view = viewFromJson(s->viewJson);
            state.doc.setSession(std::move(*s), "");
        }
    }
    if (!opt.sessionPath.empty()) {
        openSession(state, opt.sessionPath);  // on failure: error modal, default session kept
    } else if (opt.restoreOffer && !screenshotMode && !state.stateDir.empty()) {
        std::error_code ec;
        const std::string a = autosavePath(state);
        if (std::filesystem::exists(a, ec)) {
            state.showRestoreOffer = true;
            state.restorePath = a;
        }
    }
    for (const std::string& name : opt.lessons)
        if (int i = lessonFromName(name); i >= 0) state.view.lessons[i] = true;
    const int screenshotLesson = opt.screenshotLesson.empty() ? -1 : lessonFromName(opt.screenshotLesson);
    if (screenshotLesson >= 0) {
        state.view.lessons[screenshotLesson] = true;
        state.lessonSaveRows = false;  // the saved panel shows the lesson, not the window's save row
    }
    if (!opt.model.text.empty() || !opt.model.dir.empty()) startModelMode(state, opt.model);
    for (const std::string& name : opt.open) {
        if (name == "export") state.exportDialog.open = true;
        else if (name == "file") state.showFilePanel = true;
        else if (name == "log") state.showLog = true;
    }
    // The autosave file holds what was there before; this session becomes it from the first change.
    state.savedRevision = state.doc.revision();
    state.seenRevision = state.doc.revision();

    int exitCode = kExitOk;
    int frame = 0;
    int idleFrames = 0;
    int captures = 0;
    // SIGTERM/SIGINT close the window the normal way, so the final autosave runs.
    std::signal(SIGTERM, onTerminate);
    std::signal(SIGINT, onTerminate);
    while (!platform.shouldClose()) {
        if (g_terminate) platform.requestClose();
        // Wait for events when idle (a few frames after the last input, so ImGui settles), else poll.
        const bool busy = screenshotMode || !opt.testHooksDir.empty() || idleFrames < 3;
        platform.pollEvents(busy ? 0.0 : 0.1);
        const double now = nowSeconds();
        setMessageClock(ImGui::GetTime());
        for (const std::string& p : platform.takeDroppedFiles()) requestOpen(state, p);

        const bool recomputed = state.doc.recomputeIfNeeded();
        const std::uint64_t revBefore = state.doc.revision();
        platform.beginFrame(screenshotMode);
        drawAllPanels(state);
        platform.renderFrame();
        ++frame;
        const ImGuiIO& io = ImGui::GetIO();
        const bool input = io.MouseDelta.x != 0 || io.MouseDelta.y != 0 || io.MouseDown[0] || io.InputQueueCharacters.Size > 0 ||
                           io.MouseWheel != 0 || ImGui::IsAnyItemActive();
        idleFrames = (input || recomputed || state.doc.revision() != revBefore) ? 0 : idleFrames + 1;

        int fbw = 0, fbh = 0;
        platform.framebufferSize(fbw, fbh);
        if (state.exportDialog.screenshotReady) saveRequestedScreenshot(state.exportDialog, fbw, fbh);
        if (!opt.testHooksDir.empty()) {
            // frame.ppm: the picture of each frame that shows a new result, or when the test asks for one by
            // creating capture.request; layout.json: widget rectangles, counters and the mouse, every 3 frames too.
            std::error_code ec;
            const std::string request = opt.testHooksDir + "/capture.request";
            const bool requested = std::filesystem::exists(request, ec);
            if (recomputed || requested || frame == 2) {
                writeImage(opt.testHooksDir + "/frame.ppm", captureFramebuffer(fbw, fbh));
                ++captures;
                std::filesystem::remove(request, ec);
            }
            if (recomputed || requested || frame <= 2 || frame % 3 == 0) writeLayout(state, renderer, opt.testHooksDir, captures);
        }
        if (state.viewCapture && state.viewCapture->armed) saveViewCapture(state, captureFramebuffer(fbw, fbh));
        if (screenshotMode && frame >= opt.frames) {
            const Image shot = captureFramebuffer(fbw, fbh);
            exitCode = finishScreenshot(opt, screenshotLesson < 0 ? shot : cropToLesson(state, screenshotLesson, shot));
            platform.requestClose();
        }
        platform.swapBuffers();
        renderer.endFrame();
        autosaveIfNeeded(state, now, false);
    }
    autosaveIfNeeded(state, nowSeconds(), true);
    setHeatmapRenderer(nullptr);
    renderer.shutdown();
    platform.shutdown();
    return exitCode;
}

int runGuiBench(int frames, attn::Backend backend)
{
    Platform platform;
    PlatformOptions po;
    po.vsync = false;  // measure our frame time, not the display's refresh
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

    auto makeSession = [](int n, int dModel, int heads) {
        attn::Session s;
        s.config.heads = heads;
        s.input.X = makeFilled(FillKind::RandomNormal, n, dModel, 1);
        s.input.Wq = makeFilled(FillKind::Xavier, dModel, dModel, 2);
        s.input.Wk = makeFilled(FillKind::Xavier, dModel, dModel, 3);
        s.input.Wv = makeFilled(FillKind::Xavier, dModel, dModel, 4);
        return s;
    };
    // One frame: recompute if needed, draw everything, render, wait for the GPU (glFinish) so the time covers
    // the whole picture.
    auto runFrame = [&] {
        platform.pollEvents(0.0);
        state.doc.recomputeIfNeeded();
        platform.beginFrame();
        drawAllPanels(state);
        platform.renderFrame();
        glFinish();
        platform.swapBuffers();
        renderer.endFrame();
    };
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
    };

    // 1. Editing at n=64, d_model=64, h=4: one cell edit per frame (a scrub), every frame recomputes.
    state.doc.setSession(makeSession(64, 64, 4), "");
    for (int i = 0; i < 5; ++i) runFrame();  // warm-up: textures, font atlas
    std::vector<double> frameMs, compute64Ms;
    for (int i = 0; i < frames; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        state.doc.setCellInGesture(MatrixId::X, i % 64, (i * 7) % 64, 0.01f * static_cast<float>(i % 100));
        runFrame();
        frameMs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        compute64Ms.push_back(state.doc.result().timings.total);
    }
    const double med64 = median(frameMs);
    std::printf("gui bench (%s, renderer: %s)\n", attn::backendDescription(state.doc.backend).c_str(),
                reinterpret_cast<const char*>(glGetString(GL_RENDERER)));
    std::printf("editing n=64 d_model=64 h=4: median frame %.2f ms = %.1f frames/s over %d frames (median compute %.3f ms)\n",
                med64, 1000.0 / med64, frames, median(compute64Ms));

    // 2. Edit-to-new-picture latency at n=1024, d_model=512, h=8: the edit, the recompute and the first frame
    //    that shows the new result, finished on the GPU.
    state.doc.setSession(makeSession(1024, 512, 8), "");
    for (int i = 0; i < 3; ++i) runFrame();
    std::vector<double> latMs, computeMs;
    const int edits = std::max(3, frames / 20);
    for (int i = 0; i < edits; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        state.doc.setCellInGesture(MatrixId::X, i, i, 0.5f + 0.1f * static_cast<float>(i));
        runFrame();
        latMs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        computeMs.push_back(state.doc.result().timings.total);
    }
    std::printf("edit to new picture n=1024 d_model=512 h=8: median %.1f ms over %d edits (median compute %.1f ms)\n",
                median(latMs), edits, median(computeMs));
    const GlHeatmapRenderer::FillStats& fs = renderer.fillStats();
    std::printf("heatmap textures: %ld uploaded from host memory, %ld filled from device memory (CUDA-OpenGL interop)\n",
                fs.hostUploads, fs.deviceFills);
    setHeatmapRenderer(nullptr);
    renderer.shutdown();
    platform.shutdown();
    return kExitOk;
}

} // namespace app
