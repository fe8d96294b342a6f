// The window over a result shown before its maps are back from the device (Document::mapsArriving): every panel is
// drawn headless with a result whose HeadResults hold no scores, weights or mask, as a compute on the device that kept
// them there gives (faked here on the CPU: this build's tests have no device, and the fake's maps come back through
// the worker's fetch when the test opens its gate). Nothing may crash or read an empty map; the chain's scores and
// weights are drawn from the device at the shape the maps will have (the row-max view says they are coming), the fit plan is the one the maps will have, the heads grid of a large session shows
// its thumbnails or says they are coming, tooltips read through the device or say so, lessons wait, the export
// dialog's figure computes its own result and a figure of the shown result is refused with a message. Then the maps
// arrive and the same panels draw them.
#include "../gui/headless_imgui.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/app_state.h"
#include "state/export_actions.h"

#include <attnscope/attention.h>

#include <imgui.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// Draws no cells (a large session's maps would be a million rectangles each on the CPU fallback).
class NoCells : public app::HeatmapRenderer {
public:
    void drawCells(ImDrawList*, ImVec2, ImVec2, const std::string&, const app::HeatmapSource&) override {}
};

// A "device" on the CPU: computes on the CPU, then keeps the maps aside and hands the result over as a CUDA result
// whose maps stayed on the device (a generation no device holds, so DeviceMaps' reads are Unavailable, as for a result
// the device has since replaced); the fetch waits for the test's gate, then gives the maps back.
class FakeDevice {
public:
    attn::Status compute(attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out)
    {
        attn::AttentionConfig cpu = cfg;
        cpu.backend = attn::Backend::Cpu;
        cpu.mapsOnDevice = false;
        cpu.incremental = false;  // the buffer's maps were handed to the fetch: nothing in it to update
        out.cache = attn::IncrementalCache();
        const attn::Status st = attn::compute(in, cpu, out);
        if (!st.ok() || !cfg.mapsOnDevice) return st;
        std::lock_guard<std::mutex> l(m_mutex);
        m_kept.assign(out.heads.size(), {});
        for (std::size_t h = 0; h < out.heads.size(); ++h) {
            std::swap(m_kept[h].scores, out.heads[h].scores);
            std::swap(m_kept[h].weights, out.heads[h].weights);
            std::swap(m_kept[h].masked, out.heads[h].masked);
        }
        out.backend = attn::Backend::Cuda;
        out.deviceGeneration = ++m_generation;
        out.mapsOnDevice = true;
        return st;
    }
    attn::Status fetch(attn::AttentionResult& r)
    {
        std::unique_lock<std::mutex> l(m_mutex);
        m_cv.wait(l, [this] { return m_open; });
        for (std::size_t h = 0; h < r.heads.size() && h < m_kept.size(); ++h) {
            std::swap(r.heads[h].scores, m_kept[h].scores);
            std::swap(r.heads[h].weights, m_kept[h].weights);
            std::swap(r.heads[h].masked, m_kept[h].masked);
        }
        r.mapsOnDevice = false;
        return attn::Status::success();
    }
    void open()
    {
        {
            std::lock_guard<std::mutex> l(m_mutex);
            m_open = true;
        }
        m_cv.notify_all();
    }
    void close()
    {
        std::lock_guard<std::mutex> l(m_mutex);
        m_open = false;
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_open = false;
    std::vector<attn::HeadResult> m_kept;
    std::uint64_t m_generation = 1u << 20;  // far from any the device could have published in this process
};

attn::Session session(int n)
{
    attn::Session s;
    s.name = "maps arriving";
    s.config.heads = 2;
    s.input.X = attn::Matrix::Random(n, 8);
    s.input.Wq = s.input.Wk = s.input.Wv = attn::Matrix::Random(8, 8);
    s.input.mask.causal = true;
    return s;
}

void frames(app::AppState& state, int k)
{
    for (int i = 0; i < k; ++i) {
        state.doc.recomputeIfNeeded();
        ImGui::NewFrame();
        app::drawAllPanels(state);
        ImGui::Render();
    }
}

bool has(const app::AppState& state, const std::string& rect) { return state.rects.count(rect) > 0; }

// Hovers the middle of a recorded rect for two frames (its tooltip drawn).
void hover(app::AppState& state, const std::string& rect)
{
    ASSERT_TRUE(has(state, rect)) << rect;
    const app::UiRect r = state.rects.at(rect);
    ImGui::GetIO().MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
    frames(state, 2);
    ImGui::GetIO().MousePos = ImVec2(-1, -1);
}

void checkWhileArriving(int n, bool lessons)
{
    SCOPED_TRACE("n = " + std::to_string(n) + (lessons ? ", lessons open" : ""));
    createHeadlessImGui();
    NoCells cells;
    app::setHeatmapRenderer(&cells);
    {
        FakeDevice device;
        app::AppState state;
        state.autosave = false;
        state.recordRects = true;
        if (lessons)
            for (bool& open : state.view.lessons) open = true;
        state.doc.setSession(session(n), "");
        state.doc.backend = attn::Backend::Cuda;
        state.doc.mapsOnDeviceFromBytes = 0;  // small maps too stay on the device first (the window's threshold is 64 MiB)
        state.doc.startWorker([&](attn::AttentionInput& in, const attn::AttentionConfig& cfg,
                                  attn::AttentionResult& out) { return device.compute(in, cfg, out); },
                              [&](attn::AttentionResult& r, const std::function<bool()>&) { return device.fetch(r); });
        const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(1);  // a hang, not a slow machine
        while (!state.doc.hasResult() && std::chrono::steady_clock::now() < end) {
            frames(state, 1);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(state.doc.hasResult());
        ASSERT_TRUE(state.doc.mapsArriving());
        frames(state, 3);
        // The chain: every head's scores and weights are drawn at the shape the maps will have, from the device (here
        // it can pool nothing: blank cells); none reads the empty maps, hovering them included.
        for (const char* kind : {"scores/", "weights/"}) {
            EXPECT_FALSE(has(state, std::string("mapscoming/") + kind + "0")) << kind;
            EXPECT_TRUE(has(state, std::string("heatmap/") + kind + "0")) << kind;
            hover(state, std::string("heatmap/") + kind + "0");
        }
        const app::UiRect drawn = state.rects.at("heatmap/weights/0");
        // The row-max view of the weights is made on the host from the maps: it waits for them.
        state.view.weightsScale = attn::WeightsScale::RowMax;
        frames(state, 2);
        EXPECT_TRUE(has(state, "mapscoming/weights/0"));
        state.view.weightsScale = attn::WeightsScale::Auto;
        frames(state, 2);
        ASSERT_TRUE(has(state, "heatmap/weights/0"));
        EXPECT_TRUE(has(state, "heatmap/headout/0"));
        const bool pooledGrid = n > 96;
        // The heads grid: a large session's pooled thumbnails (from the device; here it cannot read them, so empty),
        // a small one's whole maps wait.
        EXPECT_EQ(has(state, "headsgrid/0"), pooledGrid);
        EXPECT_EQ(has(state, "mapscoming/headsgrid"), !pooledGrid);
        const app::FitPlan planned = state.chain.plan;
        // Tooltips: the head's output (its terms read the weights through the device, or say they are coming), the
        // grid's thumbnail.
        hover(state, "heatmap/headout/0");
        if (pooledGrid) hover(state, "headsgrid/1");
        // A figure of the shown result is refused with a message; the export dialog's computes its own on the CPU.
        const attn::Expected<app::fig::Figure> refused = app::fig::buildFigure(state.doc.session(), state.doc.result(), app::fig::FigureOptions{});
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.status().message.find("still on the GPU"), std::string::npos) << refused.status().message;
        const std::string path = (std::filesystem::temp_directory_path() / ("attnscope_maps_arriving_" + std::to_string(n) + ".svg")).string();
        const attn::Expected<std::string> wrote = app::exportFigure(state.doc, app::fig::FigureOptions{}, path, 1.0);
        EXPECT_TRUE(wrote.ok()) << (wrote.ok() ? "" : wrote.status().message);
        std::filesystem::remove(path);

        // The maps arrive: the same panels draw them, laid out as planned.
        device.open();
        state.doc.waitForCompute();
        EXPECT_FALSE(state.doc.mapsArriving());
        EXPECT_FALSE(state.doc.result().mapsOnDevice);
        frames(state, 3);
        for (const char* kind : {"scores/", "weights/"}) {
            EXPECT_FALSE(has(state, std::string("mapscoming/") + kind + "0")) << kind;
            EXPECT_TRUE(has(state, std::string("heatmap/") + kind + "0")) << kind;
        }
        EXPECT_TRUE(has(state, "headsgrid/0"));
        EXPECT_FALSE(has(state, "mapscoming/headsgrid"));
        if (pooledGrid) {
            // A map larger than the window: its box is planned from the stored shape, whatever the maps hold. (A small
            // masked map's cells are planned from its unmasked count, which only the maps tell: the first result of a
            // session may grow once; below, the next ones keep the count.)
            EXPECT_EQ(state.chain.plan.cell, planned.cell) << "the fit plan did not wait for the maps";
            EXPECT_EQ(state.chain.plan.bigView, planned.bigView);
            // The map is as large as it was drawn before its maps came.
            const app::UiRect arrived = state.rects.at("heatmap/weights/0");
            EXPECT_FLOAT_EQ(arrived.x1 - arrived.x0, drawn.x1 - drawn.x0);
            EXPECT_FLOAT_EQ(arrived.y1 - arrived.y0, drawn.y1 - drawn.y0);
        }
        // An edit: the next result (same shape) is planned as the one before while its maps are on their way.
        const app::FitPlan before = state.chain.plan;
        device.close();
        state.doc.markDirty();
        const auto again = std::chrono::steady_clock::now() + std::chrono::minutes(1);
        while (!state.doc.mapsArriving() && std::chrono::steady_clock::now() < again) {
            frames(state, 1);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(state.doc.mapsArriving());
        frames(state, 2);
        EXPECT_TRUE(has(state, "heatmap/weights/0"));
        EXPECT_FALSE(has(state, "mapscoming/weights/0"));
        EXPECT_EQ(state.chain.plan.cell, before.cell);
        EXPECT_EQ(state.chain.plan.bigView, before.bigView);
        device.open();
        state.doc.waitForCompute();
        frames(state, 2);
        EXPECT_TRUE(has(state, "heatmap/weights/0"));
        hover(state, "heatmap/weights/0");
    }
    app::setHeatmapRenderer(nullptr);
    ImGui::DestroyContext();
}

TEST(MapsArriving, SmallSessionChainAndTooltipsCopeAndTheMapsFollow) { checkWhileArriving(6, false); }

// The lesson panels open (over the chain: the hovers land on them).
TEST(MapsArriving, SmallSessionLessonsWaitForTheMaps) { checkWhileArriving(6, true); }

TEST(MapsArriving, LargeSessionPooledGridAndFitPlanAsTheyWillBe) { checkWhileArriving(300, false); }

} // namespace
