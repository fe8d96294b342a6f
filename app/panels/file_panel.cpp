// Files: a path field with Open / Save, the recent files, the modal shown when a file fails to load (the
// current session stays as it was), and the one that asks before a file replaces unsaved changes.
#include "messages.h"
#include "panels/glyph_atlas.h"
#include "panels/panels.h"
#include "panels/path_field.h"
#include "state/paths.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cctype>

namespace app {

namespace {

// "Unsaved changes": Save (to the document's path, or to a path typed here for an untitled session) then
// open, Discard then open (the discarded session stays in the undo history), or Cancel.
void drawUnsavedPrompt(AppState& state)
{
    DocUiState& ui = state.docUi;
    if (ui.pendingOpen.empty()) return;
    ImGui::OpenPopup("Unsaved changes");
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.4f), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    ImGui::SetNextWindowSize(ImVec2(std::min(560.0f, vp->WorkSize.x - 40.0f), 0), ImGuiCond_Appearing);
    if (!ImGui::BeginPopupModal("Unsaved changes", nullptr, ImGuiWindowFlags_NoSavedSettings)) return;
    const bool untitled = state.doc.path().empty();
    const bool preset = isPreset(state, ui.pendingOpen);
    std::string what = fileName(ui.pendingOpen);
    if (preset) {
        what = "the preset " + what;
        for (const PresetEntry& p : ui.presets)  // its display name, when the Presets menu has listed it
            if (p.path == ui.pendingOpen) what = "the preset \u201c" + p.name + "\u201d";
    }
    if (untitled)
        ImGui::TextWrapped("The untitled session has unsaved edits. Opening %s replaces it.", what.c_str());
    else
        ImGui::TextWrapped("%s has unsaved edits. Opening %s replaces it.", fileName(state.doc.path()).c_str(), what.c_str());
    ImGui::TextDisabled("Discarded edits stay in the undo history: Edit → Undo (Ctrl+Z) brings them back.");
    if (untitled) {
        ImGui::TextUnformatted("Save as");
        ImGui::SameLine();
        ImGui::SetNextItemWidth(-1);
        wantGlyphs(ui.saveAsPath);
        ImGui::InputText("##saveas", &ui.saveAsPath);
        state.recordRect("unsaved/path", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
    if (!ui.saveError.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", ui.saveError.c_str());
    ImGui::Spacing();
    bool close = false;
    if (ImGui::Button(untitled ? "Save as, then open" : "Save, then open", ImVec2(170, 0)) && !ui.saveAsPath.empty()) {
        if (saveSessionAs(state, ui.saveAsPath)) {
            openSession(state, ui.pendingOpen);
            close = true;
        } else {
            ui.saveError = "could not save to " + ui.saveAsPath + " (see the message log)";
        }
    }
    state.recordRect("unsaved/save", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    if (ImGui::Button("Discard, then open", ImVec2(170, 0))) {
        openSession(state, ui.pendingOpen);
        close = true;
    }
    state.recordRect("unsaved/discard", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(120, 0)) || keyPressed(ImGuiKey_Escape)) close = true;
    state.recordRect("unsaved/cancel", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (close) {
        ui.pendingOpen.clear();
        ui.saveError.clear();
        ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
}

// "Quit with unsaved edits?": Save then quit (a session with a file), Quit without saving, or Cancel.
void drawQuitPrompt(AppState& state)
{
    if (!state.quitPrompt) return;
    ImGui::OpenPopup("Quit?");
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.4f), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    ImGui::SetNextWindowSize(ImVec2(std::min(520.0f, vp->WorkSize.x - 40.0f), 0), ImGuiCond_Appearing);
    if (!ImGui::BeginPopupModal("Quit?", nullptr, ImGuiWindowFlags_NoSavedSettings)) return;
    const bool untitled = state.doc.path().empty();
    if (untitled) ImGui::TextWrapped("The untitled session has unsaved edits.");
    else ImGui::TextWrapped("%s has unsaved edits.", fileName(state.doc.path()).c_str());
    state.recordRect("quit/prompt", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::Spacing();
    bool close = false;
    if (!untitled) {
        if (ImGui::Button("Save, then quit", ImVec2(150, 0))) {
            if (saveSessionAs(state, state.doc.path())) state.quitConfirmed = true;
            close = true;
        }
        ImGui::SameLine();
    }
    if (ImGui::Button("Quit without saving", ImVec2(170, 0))) {
        state.quitConfirmed = true;
        close = true;
    }
    state.recordRect("quit/discard", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(100, 0)) || keyPressed(ImGuiKey_Escape)) close = true;
    state.recordRect("quit/cancel", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (untitled) ImGui::TextDisabled("To keep it: Cancel, then File → Open / save….");
    if (close) {
        state.quitPrompt = false;
        ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
}

} // namespace

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
                requestOpen(state, state.filePath);
                if (state.loadError.empty()) state.showFilePanel = false;  // opened, or the prompt asks first
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

    drawUnsavedPrompt(state);
    drawQuitPrompt(state);

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
                state.doc.setViewJson(viewToJson(state.view));  // the undo step keeps the view
                state.view = viewFromJson(s->viewJson);
                const std::string original = s->name;
                state.doc.setSession(std::move(*s), "");
                state.doc.markUnsaved();  // recovered work: opening another session asks first
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
