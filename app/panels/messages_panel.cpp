// Toasts (bottom right, non-modal, a few seconds each) and the message log window.
#include "messages.h"
#include "panels/glyph_atlas.h"
#include "panels/panels.h"

#include <imgui.h>

namespace app {

namespace {
ImVec4 levelColor(MessageLevel l)
{
    switch (l) {
    case MessageLevel::Info: return ImVec4(0.75f, 0.85f, 1.0f, 1);
    case MessageLevel::Warning: return ImVec4(1.0f, 0.8f, 0.35f, 1);
    case MessageLevel::Error: return ImVec4(1.0f, 0.45f, 0.4f, 1);
    }
    return ImVec4(1, 1, 1, 1);
}
} // namespace

void drawMessagesPanel(AppState& state)
{
    const double now = ImGui::GetTime();
    const std::vector<Message> toasts = activeToasts(now);
    if (!toasts.empty()) {
        const ImGuiViewport* vp = ImGui::GetMainViewport();
        ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x - 10, vp->WorkPos.y + vp->WorkSize.y - kStatusBarHeight - 10),
                                ImGuiCond_Always, ImVec2(1, 1));
        ImGui::SetNextWindowBgAlpha(0.92f);
        ImGui::Begin("##toasts", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoFocusOnAppearing |
                                              ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoMove);
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + 460);
        for (const Message& m : toasts) {
            wantGlyphs(m.text);  // a path or a token in any script
            ImGui::TextColored(levelColor(m.level), "%s", m.text.c_str());
        }
        ImGui::PopTextWrapPos();
        ImGui::End();
    }
    if (state.showLog) {
        ImGui::SetNextWindowSize(ImVec2(600, 300), ImGuiCond_FirstUseEver);
        if (ImGui::Begin("Message log", &state.showLog)) {
            for (const Message& m : messageLog()) {
                wantGlyphs(m.text);
                ImGui::TextColored(levelColor(m.level), "[%7.1f s] %s", m.time, m.text.c_str());
            }
            if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY()) ImGui::SetScrollHereY(1.0f);
        }
        ImGui::End();
    }
}

} // namespace app
