// An ImGui context with no platform or renderer backend, for the headless panel tests (STYLE 7a): a
// 1280×800 display at 60 Hz, the named keys mapped, and the font atlas built as a renderer would build it.
#pragma once

#include "panels/style.h"

#include <imgui.h>

inline ImGuiIO& createHeadlessImGui()
{
    ImGui::CreateContext();
    app::setupImGuiStyle();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(1280, 800);
    io.DeltaTime = 1.0f / 60.0f;
    // Keyboard navigation is on: ImGui 1.86 wants its named keys mapped (a platform backend would do this).
    for (int k = 0; k < ImGuiKey_COUNT; ++k) io.KeyMap[k] = k;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
    return io;
}
