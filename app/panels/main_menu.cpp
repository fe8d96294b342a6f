// The menu bar: File (open, save, export, recent, presets listed from assets/presets at run time), Edit (undo,
// redo), View (panels, options).
#include "panels/panels.h"
#include "state/paths.h"

#include <imgui.h>

namespace app {

void drawMainMenu(AppState& state)
{
    if (!ImGui::BeginMainMenuBar()) return;
    if (ImGui::BeginMenu("File")) {
        if (ImGui::MenuItem("Open / save…", "Ctrl+O")) state.showFilePanel = true;
        if (ImGui::MenuItem("Save", "Ctrl+S", false, !state.doc.path().empty())) saveSessionAs(state, state.doc.path());
        if (ImGui::MenuItem("Export…", "Ctrl+E")) state.exportDialog.open = true;
        if (ImGui::MenuItem("Open model…")) state.model.showOpenDialog = true;
        if (ImGui::BeginMenu("Recent", !state.recentFiles.empty())) {
            for (const std::string& r : std::vector<std::string>(state.recentFiles))
                if (ImGui::MenuItem(r.c_str())) openSession(state, r);
            ImGui::EndMenu();
        }
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Presets")) {
        const auto files = listJsonFiles(state.presetsDir);
        if (files.empty()) ImGui::TextDisabled("no presets found");
        for (const std::string& f : files)
            if (ImGui::MenuItem(fileName(f).c_str())) openSession(state, f);
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Edit")) {
        if (ImGui::MenuItem("Undo", "Ctrl+Z", false, state.doc.canUndo())) state.doc.undo();
        if (ImGui::MenuItem("Redo", "Ctrl+Shift+Z", false, state.doc.canRedo())) state.doc.redo();
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Backend")) {
        // Where the core computes; the status bar shows the one that computed the current result.
        static std::string cudaWhy;
        static bool cudaUsable = false, probed = false;
        if (!probed) {
            for (attn::Backend b : attn::availableBackends()) cudaUsable = cudaUsable || b == attn::Backend::Cuda;
            cudaWhy = attn::cudaBuilt() ? attn::backendDescription(attn::Backend::Cuda)
                                        : "this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)";
            probed = true;
        }
        struct Item {
            const char* label;
            attn::Backend backend;
            bool enabled;
        };
        const Item items[] = {{"CPU", attn::Backend::Cpu, true},
                              {"CUDA", attn::Backend::Cuda, cudaUsable},
                              {"Auto (CUDA when a GPU is present)", attn::Backend::Auto, true}};
        for (const Item& it : items) {
            if (ImGui::MenuItem(it.label, nullptr, state.doc.backend == it.backend, it.enabled) &&
                state.doc.backend != it.backend) {
                state.doc.backend = it.backend;
                state.doc.markDirty();
            }
            if (it.backend == attn::Backend::Cuda && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
                ImGui::SetTooltip("%s", cudaWhy.c_str());
        }
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
        ImGui::MenuItem("Values in cells", nullptr, &state.view.showValues);
        ImGui::MenuItem("Shared colour range over heads", nullptr, &state.view.sharedRange);
        ImGui::MenuItem("Message log", nullptr, &state.showLog);
        ImGui::MenuItem("Model view", nullptr, &state.model.showView, state.model.active);
        ImGui::Separator();
        if (ImGui::BeginMenu("Lessons")) {
            for (int i = 0; i < kLessonCount; ++i)
                ImGui::MenuItem(lessonMenuLabel(LessonId(i)), nullptr, &state.view.lessons[i]);
            ImGui::EndMenu();
        }
        ImGui::EndMenu();
    }
    ImGui::EndMainMenuBar();
}

} // namespace app
