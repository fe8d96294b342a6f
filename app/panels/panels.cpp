// The panel registry and the frame's panel pass.
#include "panels/panels.h"

#include "messages.h"
#include "panels/model_panels.h"

#include <imgui.h>

namespace app {
namespace {

// Every panel, drawn in this order each frame. Adding a panel is one line here.
using DrawFn = void (*)(AppState&);
constexpr DrawFn kPanelRegistry[] = {
    drawMainMenu,
    drawControlsOrStrip,
    drawChainPanel,
    drawLessonPanels,
    drawModelPanel,
    drawBundlePanel,
    drawModelOpenDialog,
    drawModelTextDialog,
    drawQkPanel,
    drawStatusBar,
    drawFilePanel,
    drawExportPanel,
    drawMessagesPanel,
    drawRestoreOffer,
};

void handleShortcuts(AppState& state)
{
    const ImGuiIO& io = ImGui::GetIO();
    // Text fields keep their own Ctrl+Z (ImGui's per-field undo).
    if (io.WantTextInput || !io.KeyCtrl) return;
    if (keyPressed(ImGuiKey_Z)) {
        if (io.KeyShift) state.doc.redo();
        else state.doc.undo();
    }
    if (keyPressed(ImGuiKey_Y)) state.doc.redo();
    if (letterPressed('S') && !state.doc.path().empty()) saveSessionAs(state, state.doc.path());
    if (letterPressed('O')) state.showFilePanel = true;
    if (letterPressed('E')) state.exportDialog.open = true;
    if (letterPressed('Q')) requestQuit(state);
}

} // namespace

void drawAllPanels(AppState& state)
{
    state.rects.clear();
    state.nextHoverQuery = -1;
    state.nextHoverKey = -1;
    handleShortcuts(state);
    planChainLayout(state);
    for (DrawFn f : kPanelRegistry) f(state);
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) state.paintValue = -1;
    state.hoverQuery = state.nextHoverQuery;
    state.hoverKey = state.nextHoverKey;
}

} // namespace app
