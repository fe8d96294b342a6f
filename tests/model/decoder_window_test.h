// Shared by the window's decoder tests (test_decoder_state.cpp, test_why_state.cpp): the tiny llama GGUF, a
// synchronous forward on a model of the test's own (the oracle of what the worker shows), and the model panel
// drawn headless with clicks on recorded widget rectangles.
#pragma once

#include "../gui/headless_imgui.h"

#include "panels/model_panels.h"
#include "state/app_state.h"

#include <attnscope/decoder.h>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace testutil {

inline const std::string kTinyLlama = std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama.gguf";

// A synchronous forward of `text` (chat off) under `ablate`.
inline attn::DecoderRun syncRun(attn::DecoderModel& model, const std::string& text,
                                const std::vector<std::pair<int, int>>& ablate = {})
{
    auto enc = attn::encodeForDecoder(model, text, false);
    EXPECT_TRUE(enc.ok()) << enc.status().message;
    attn::DecoderOptions o;
    o.ablate = ablate;
    auto run = attn::runDecoder(model, enc->ids, o);
    EXPECT_TRUE(run.ok()) << run.status().message;
    return run.ok() ? std::move(*run) : attn::DecoderRun{};
}

// The model panel (the open dialogs, the sidebar) in a headless ImGui context: frame() draws one frame; click(key) presses
// and releases the mouse at a fraction (fx, fy) of the widget rectangle recorded under `key`.
class HeadlessModelWindow {
public:
    explicit HeadlessModelWindow(app::AppState& state) : m_state(state), m_io(createHeadlessImGui())
    {
        m_io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
        state.recordRects = true;
    }
    ~HeadlessModelWindow() { ImGui::DestroyContext(); }
    HeadlessModelWindow(const HeadlessModelWindow&) = delete;
    HeadlessModelWindow& operator=(const HeadlessModelWindow&) = delete;

    void frame()
    {
        ImGui::NewFrame();
        app::drawModelPanel(m_state);
        app::drawModelOpenDialog(m_state);
        app::drawModelTextDialog(m_state);
        app::drawQkPanel(m_state);  // "Why here?" and the maps' right-click menu
        if (app::modelViewShown(m_state)) {  // the sidebar, as the controls window draws it in model mode
            ImGui::Begin("Controls");
            app::drawModelSidebar(m_state);
            ImGui::End();
        }
        ImGui::Render();
    }
    void click(const std::string& key, float fx = 0.5f, float fy = 0.5f)
    {
        ASSERT_EQ(m_state.rects.count(key), 1u) << key;
        const app::UiRect b = m_state.rects[key];
        m_io.MousePos = ImVec2(b.x0 + (b.x1 - b.x0) * fx, b.y0 + (b.y1 - b.y0) * fy);
        frame();
        m_io.MouseDown[0] = true;
        frame();
        m_io.MouseDown[0] = false;
        frame();
    }

private:
    app::AppState& m_state;
    ImGuiIO& m_io;
};

} // namespace testutil
