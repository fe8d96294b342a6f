// Files: a path field with Open / Save, the recent files, the presets, and the modal shown when a file
// fails to load (the current session stays as it was).
#include "messages.h"
#include "panels/panels.h"
#include "panels/path_field.h"
#include "state/paths.h"

#include <imgui.h>
#include <imgui_stdlib.h>

namespace app {

void requestOpen(AppState& state, const std::string& path) { openSession(state, path); }

void drawFilePanel(AppState& state)
{
    if (state.showFilePanel) {
        const ImGuiViewport* vp = ImGui::GetMainViewport();
        ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + 60), ImGuiCond_Appearing, ImVec2(0.5f, 0));
        ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Appearing);
        if (ImGui::Begin("Open / save session", &state.showFilePanel, ImGuiWindowFlags_NoCollapse)) {
            const bool enter = drawPathField(state, "file/path", state.filePath, "path/to/session.json", -120);
            ImGui::SameLine();
            if ((ImGui::Button("Open") || enter) && !state.filePath.empty()) {
                if (openSession(state, state.filePath)) state.showFilePanel = false;
            }
            state.recordRect("file/open", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
            ImGui::SameLine();
            if (ImGui::Button("Save") && !state.filePath.empty()) saveSessionAs(state, state.filePath);
            if (!state.recentFiles.empty()) {
                ImGui::TextDisabled("Recent files");
                for (const std::string& r : state.recentFiles)
                    if (ImGui::Selectable(r.c_str())) state.filePath = r;
            }
            ImGui::TextDisabled("Tip: drop a .json file on the window to open it.");
        }
        ImGui::End();
    }

    if (!state.loadError.empty()) ImGui::OpenPopup("Cannot open session");
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.4f), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    ImGui::SetNextWindowSize(ImVec2(520, 0), ImGuiCond_Appearing);
    if (ImGui::BeginPopupModal("Cannot open session", nullptr, ImGuiWindowFlags_NoSavedSettings)) {
        ImGui::TextWrapped("%s", state.loadError.c_str());
        ImGui::Spacing();
        ImGui::TextDisabled("The current session is unchanged.");
        if (ImGui::Button("OK", ImVec2(120, 0)) || keyPressed(ImGuiKey_Escape) || keyPressed(ImGuiKey_Enter)) {
            state.loadError.clear();
            ImGui::CloseCurrentPopup();
        }
        ImGui::EndPopup();
    }
}

void drawRestoreOffer(AppState& state)
{
    if (!state.showRestoreOffer) return;
    ImGui::OpenPopup("Restore session?");
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.4f), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    if (ImGui::BeginPopupModal("Restore session?", nullptr, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings)) {
        ImGui::TextUnformatted("The session from last time was saved automatically.");
        ImGui::TextDisabled("%s", state.restorePath.c_str());
        const bool restore = ImGui::Button("Restore it", ImVec2(140, 0));
        state.recordRect("restore/yes", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (restore) {
            auto s = attn::loadSession(state.restorePath);
            if (s.ok()) {
                state.view = viewFromJson(s->viewJson);
                const std::string original = s->name;
                state.doc.setSession(std::move(*s), "");
                postInfo("restored the autosaved session" + (original.empty() ? std::string() : " '" + original + "'"));
            } else {
                state.loadError = s.status().message;
                postError("cannot restore the autosaved session: " + s.status().message);
            }
            state.showRestoreOffer = false;
            ImGui::CloseCurrentPopup();
        }
        ImGui::SameLine();
        if (ImGui::Button("Start fresh", ImVec2(140, 0))) {
            state.showRestoreOffer = false;
            ImGui::CloseCurrentPopup();
        }
        ImGui::EndPopup();
    }
}

} // namespace app
