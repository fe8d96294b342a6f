// Status bar: backend (attn::backendDescription), last compute time (result.timings.total) or "computing… N ms"
// while the worker computes newer inputs, sizes, whether the shown result's maps are still coming from the GPU, errors.
#include "panels/model_panels.h"
#include "panels/panels.h"

#include <imgui.h>

namespace app {

void drawStatusBar(AppState& state)
{
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y - kStatusBarHeight));
    ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, kStatusBarHeight));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 3));
    ImGui::Begin("##status", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                                          ImGuiWindowFlags_NoBringToFrontOnFocus);
    std::string& backend = state.edit.backendText;  // described once per backend: it probes the device
    const attn::Backend b = state.doc.hasResult() ? state.doc.result().backend : state.doc.backend;
    if (backend.empty() || b != state.edit.backendOf) {
        backend = attn::backendDescription(b);
        state.edit.backendOf = b;
    }
    const Sizes z = state.doc.sizes();
    // "heads=9 (3 kv)" for grouped-query attention.
    const std::string heads = std::to_string(z.H) + (z.Hkv != z.H ? " (" + std::to_string(z.Hkv) + " kv)" : std::string());
    if (bundleViewShown(state)) {
        drawBundleStatus(state, backend);
    } else if (modelViewShown(state)) {
        drawModelStatus(state, backend);  // the model's figures, not those of the session under the view
    } else if (state.doc.computing()) {
        // The views still show the last complete result; this says that a newer one is on its way.
        ImGui::Text("%s   |   computing… %.0f ms   |   n=%d  n_kv=%d  heads=%s  d_k=%d  d_v=%d", backend.c_str(),
                    state.doc.computingMs(), z.T, z.S, heads.c_str(), z.dk, z.dv);
    } else {
        // Four significant digits below 1 s ("0.060", "12.13", "123.4"): the same width in DejaVu Sans, whose
        // digits are equally wide, so that a compute slowed down by machine load does not shift the rest of
        // the bar in screenshot tests (a 4-token compute took 12 ms once under load 9: 0.15% of the pixels).
        const double ms = state.doc.hasResult() ? state.doc.result().timings.total : 0.0;
        const int decimals = ms < 10 ? 3 : ms < 100 ? 2 : ms < 1000 ? 1 : 0;
        ImGui::Text("%s   |   compute %.*f ms   |   n=%d  n_kv=%d  heads=%s  d_k=%d  d_v=%d", backend.c_str(), decimals, ms, z.T,
                    z.S, heads.c_str(), z.dk, z.dv);
    }
    // A result on the device is shown before its maps are back (Document::mapsArriving): say that they are coming.
    if (!bundleViewShown(state) && !modelViewShown(state) && (state.doc.mapsArriving() || state.doc.mapsLost())) {
        ImGui::SameLine();
        ImGui::TextDisabled("  |  %s", state.doc.mapsArriving() ? "maps coming from the GPU…" : "maps lost on the GPU: compute again");
    }
    if (!state.doc.path().empty()) {
        ImGui::SameLine();
        ImGui::TextDisabled("  |  %s", state.doc.path().c_str());
    }
    if (!state.doc.lastError().ok()) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "  |  error: %s", state.doc.lastError().message.c_str());
    }
    ImGui::End();
    ImGui::PopStyleVar();
}

} // namespace app
