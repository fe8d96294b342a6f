// The menu bar: File (open, save, export, open a model or bundle, a decoder's text, recent, quit), Presets (the files of assets/presets, listed at run time by
// their session name and description), Edit (undo, redo), Backend, View (panels, options). Opening asks first
// when there are unsaved changes (requestOpen).
#include "panels/panels.h"
#include "state/paths.h"

#include <imgui.h>

#include <algorithm>
#include <cfloat>

namespace app {
namespace {

// The presets of state.presetsDir with their names and descriptions, read once per folder (the files are
// small; a file that does not parse is listed by its file name, and opening it shows why).
const std::vector<PresetEntry>& presets(AppState& state)
{
    DocUiState& ui = state.docUi;
    if (ui.presetsListed && ui.presetsListedFrom == state.presetsDir) return ui.presets;
    ui.presets.clear();
    for (const std::string& f : listJsonFiles(state.presetsDir)) {
        PresetEntry e{f, fileName(f), ""};
        if (auto s = attn::loadSession(f); s.ok()) {
            if (!s->name.empty()) e.name = s->name;
            e.description = s->description;
        }
        ui.presets.push_back(std::move(e));
    }
    std::stable_sort(ui.presets.begin(), ui.presets.end(),
                     [](const PresetEntry& a, const PresetEntry& b) { return a.name < b.name; });
    ui.presetsListed = true;
    ui.presetsListedFrom = state.presetsDir;
    return ui.presets;
}

// The first sentence of a description (two when the first is as short as "Seed 004."), at most about 70
// characters (the full text is the tooltip).
std::string summary(const std::string& d)
{
    std::size_t end = d.find(". ");
    if (end != std::string::npos && end < 16) end = d.find(". ", end + 2);
    end = end == std::string::npos ? d.size() : end + 1;
    if (end > 72) {
        end = d.rfind(' ', 70);
        if (end == std::string::npos) end = 70;
        return d.substr(0, end) + " …";
    }
    return d.substr(0, end);
}

} // namespace

void drawMainMenu(AppState& state)
{
    followDocumentView(state);  // the menu is drawn first each frame: undo across an open brings its view back
    if (!ImGui::BeginMainMenuBar()) return;
    const bool fileOpen = ImGui::BeginMenu("File");
    state.recordRect("menu/file", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (fileOpen) {
        if (ImGui::MenuItem("Open / save…", "Ctrl+O")) state.showFilePanel = true;
        if (ImGui::MenuItem("Save", "Ctrl+S", false, !state.doc.path().empty())) saveSessionAs(state, state.doc.path());
        if (ImGui::MenuItem("Export…", "Ctrl+E")) state.exportDialog.open = true;
        if (ImGui::MenuItem("Open model or bundle…")) state.model.showOpenDialog = true;
        state.recordRect("menu/open_model", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        // A decoder's text from a file (a long text: issue 18); an encoder reads two sentences, typed.
        if (ImGui::MenuItem("Open text…", nullptr, false, state.model.isDecoder())) state.model.showTextDialog = true;
        state.recordRect("menu/open_text", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (!state.model.isDecoder() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
            ImGui::SetTooltip("the text of a decoder language model: open one first (Open model or bundle…)");
        if (ImGui::BeginMenu("Recent", !state.recentFiles.empty())) {
            for (const std::string& r : std::vector<std::string>(state.recentFiles))
                if (ImGui::MenuItem(r.c_str())) requestOpen(state, r);
            ImGui::EndMenu();
        }
        ImGui::Separator();
        if (ImGui::MenuItem("Quit", "Ctrl+Q")) requestQuit(state);
        ImGui::EndMenu();
    }
    // Fourteen presets with a line of description each are taller than a 600-pixel window: scroll instead.
    ImGui::SetNextWindowSizeConstraints(ImVec2(0, 0), ImVec2(FLT_MAX, ImGui::GetMainViewport()->WorkSize.y - 8.0f));
    const bool presetsOpen = ImGui::BeginMenu("Presets");
    state.recordRect("menu/presets", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (presetsOpen) {
        const std::vector<PresetEntry> list = presets(state);  // a copy: opening one may re-list
        if (list.empty()) ImGui::TextDisabled("no presets found in %s", state.presetsDir.c_str());
        for (const PresetEntry& p : list) {
            ImGui::PushID(p.path.c_str());
            const bool chosen = ImGui::MenuItem(p.name.c_str());
            state.recordRect("preset/" + fileName(p.path), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
            if (ImGui::IsItemHovered() && !p.description.empty()) {
                ImGui::BeginTooltip();
                ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
                ImGui::TextUnformatted(p.description.c_str());
                ImGui::TextDisabled("%s", fileName(p.path).c_str());
                ImGui::PopTextWrapPos();
                ImGui::EndTooltip();
            }
            if (!p.description.empty()) {
                ImGui::Indent();
                ImGui::TextDisabled("%s", summary(p.description).c_str());
                ImGui::Unindent();
            }
            ImGui::PopID();
            if (chosen) requestOpen(state, p.path);
        }
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Edit")) {
        if (ImGui::MenuItem("Undo", "Ctrl+Z", false, state.doc.canUndo())) state.doc.undo();
        if (ImGui::MenuItem("Redo", "Ctrl+Y", false, state.doc.canRedo())) state.doc.redo();
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Backend")) {
        // Where the core computes; the status bar shows the one that computed the current result.
        DocUiState& ui = state.docUi;
        if (!ui.cudaProbed) {
            for (attn::Backend b : attn::availableBackends()) ui.cudaUsable = ui.cudaUsable || b == attn::Backend::Cuda;
            ui.cudaWhy = attn::cudaBuilt() ? attn::backendDescription(attn::Backend::Cuda)
                                           : "this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)";
            ui.cudaProbed = true;
        }
        const bool cudaUsable = ui.cudaUsable;
        const std::string& cudaWhy = ui.cudaWhy;
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
        if (ImGui::MenuItem("Model view", nullptr, &state.model.showView, state.model.active) && state.model.showView)
            state.bundle.showView = false;  // one of the two views over the chain view at a time
        if (ImGui::MenuItem("Bundle view", nullptr, &state.bundle.showView, state.bundle.active()) && state.bundle.showView)
            state.model.showView = false;
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
