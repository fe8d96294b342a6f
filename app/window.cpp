// The frame loop: events → recompute (only when an input changed) → panels → render → screenshot/hooks →
// swap → autosave.
#include "window.h"

#include "cli/cli.h"
#include "messages.h"
#include "panels/panels.h"
#include "panels/style.h"
#include "platform/platform.h"
#include "render/heatmap_gl.h"
#include "screenshot.h"
#include "state/export_actions.h"
#include "state/file_drop.h"
#include "state/paths.h"
#include "test_hooks.h"

#include <glad/gl.h>
#include <imgui.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>

namespace app {
namespace {

volatile std::sig_atomic_t g_terminate = 0;
void onTerminate(int) { g_terminate = 1; }

double nowSeconds()
{
    static const auto t0 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
    po.offscreen = opt.offscreen;
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
    state.model.backend = opt.backend;  // a decoder's layers run where the attention core does
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
    const bool bundleGiven = isBundlePath(opt.sessionPath);  // `attnscope FILE.safetensors`: a bundle's views
    if (bundleGiven) {
        state.bundle.waitForThumbs = screenshotMode;  // the screenshot shows every thumbnail
        (void)openBundleInWindow(state, opt.sessionPath);  // on failure: the message is posted, the session stays
    } else if (!opt.sessionPath.empty()) {
        openSession(state, opt.sessionPath);  // on failure: error modal, default session kept
    }
    // The autosave is offered back only when the last run did not close cleanly (a crash, a kill): after a
    // clean close its session was what the user chose to leave.
    const bool crashed = beginRun(state);
    const bool modelMode = !opt.model.text.empty() || !opt.model.dir.empty() || bundleGiven;  // not over the model view
    if (opt.sessionPath.empty() && !modelMode && crashed && opt.restoreOffer && !screenshotMode && !state.stateDir.empty()) {
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
    if (!opt.model.text.empty() || !opt.model.dir.empty()) {
        ModelStartup startup = opt.model;
        startup.waitForViews = screenshotMode;  // the screenshot shows the scans finished
        // The window appears at once on the first run's progress (a 6000-token text takes tens of seconds);
        // a screenshot waits for the run instead, so that it shows the finished views.
        startup.async = !screenshotMode;
        startModelMode(state, startup);
    }
    for (const std::string& name : opt.open) {
        if (name == "export") state.exportDialog.open = true;
        else if (name == "file") state.showFilePanel = true;
        else if (name == "log") state.showLog = true;
    }
    // Computes run on a worker thread, so that the frame loop never waits for them. Screenshots compute in
    // the frame loop instead: each frame then shows the result of its inputs, so captures are deterministic.
    if (!screenshotMode) state.doc.startWorker();
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
    bool clean = false;  // closed by the user (not a signal): the next start offers no restore
    for (;;) {
        if (g_terminate) platform.requestClose();
        if (platform.shouldClose() && !g_terminate && !screenshotMode && !state.quitConfirmed) {
            platform.cancelClose();  // the close button: ask first when edits are unsaved
            requestQuit(state);
        }
        if (state.quitConfirmed) clean = true, platform.requestClose();
        if (platform.shouldClose()) break;
        // Wait for events when idle (a few frames after the last input, so ImGui settles), else poll.
        const bool busy = screenshotMode || !opt.testHooksDir.empty() || idleFrames < 3 || state.doc.computing() ||
                          state.model.computing() || state.model.loading();
        platform.pollEvents(busy ? 0.0 : 0.1);
        const double now = nowSeconds();
        setMessageClock(ImGui::GetTime());
        for (const FileDrop& d : platform.takeDroppedFiles()) handleFileDrop(state, d.paths, ImVec2(float(d.x), float(d.y)));
        if (auto d = takeDropRequest(opt.testHooksDir)) handleFileDrop(state, d->paths, d->pos);  // the test's drops

        state.model.backend = state.doc.backend;  // the Backend menu's choice, for the model's next run
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
        if (!opt.testHooksDir.empty()) writeTestHooks(opt.testHooksDir, state, renderer, frame, recomputed, fbw, fbh, captures);
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
    if (clean || screenshotMode) endRun(state);
    setHeatmapRenderer(nullptr);
    renderer.shutdown();
    platform.shutdown();
    return exitCode;
}

} // namespace app
