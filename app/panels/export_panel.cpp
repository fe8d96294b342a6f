// The Export dialog (File → Export…, Ctrl+E): figures with a live preview, arrays out, arrays in, the
// session as NumPy / PyTorch code, and a screenshot of the window. Drawing only: every action is a call
// into state/export_actions.h, which the tests exercise without ImGui.
#include "messages.h"
#include "panels/glyph_atlas.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/export_actions.h"

#include "io/session_arrays.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace app {
namespace {

const ImVec4 kErrorColor(1.0f, 0.45f, 0.4f, 1.0f);  // as the status bar and the message log
constexpr float kOptionsWidth = 330.0f;                  // the Figure tab's left column
constexpr float kLabelWidth = 110.0f;                    // option labels, so the fields line up

constexpr fig::PanelKind kPanelKinds[] = {fig::PanelKind::X,      fig::PanelKind::Xkv,     fig::PanelKind::Wq,
                                          fig::PanelKind::Wk,     fig::PanelKind::Wv,      fig::PanelKind::Wo,
                                          fig::PanelKind::Q,      fig::PanelKind::K,       fig::PanelKind::V,
                                          fig::PanelKind::Scores, fig::PanelKind::Weights, fig::PanelKind::Output,
                                          fig::PanelKind::Final,  fig::PanelKind::Chain};
constexpr attn::Colormap kColormaps[] = {attn::Colormap::Viridis, attn::Colormap::Magma, attn::Colormap::Cividis,
                                         attn::Colormap::RdBu};
constexpr const char* kFormatNames[] = {"PNG", "SVG", "PDF"};  // in FigureFormat order
constexpr const char* kDataFormatNames[] = {".npz (one file)", ".safetensors (one file)", "folder of .npy files",
                                            "folder of .csv files"};  // in DataFormat order

// A label in the left column and the field after it on the same line.
void label(const char* text)
{
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(text);
    ImGui::SameLine(kLabelWidth);
    ImGui::SetNextItemWidth(-1);
}

void drawMessage(const ActionMessage& m)
{
    if (m.text.empty()) return;
    ImGui::PushTextWrapPos(0.0f);
    if (m.error) ImGui::TextColored(kErrorColor, "%s", m.text.c_str());
    else ImGui::TextUnformatted(m.text.c_str());
    ImGui::PopTextWrapPos();
}

// Shows the outcome in the dialog and posts it to the log (errors also as a toast, mirrored to stderr).
void report(ActionMessage& m, const attn::Expected<std::string>& r)
{
    m = r ? ActionMessage{*r, false} : ActionMessage{r.status().message, true};
    if (r) postInfo(*r);
    else postError(r.status().message);
}

// A path field whose default follows the options until the user types in it; "Default" brings it back.
void pathField(const char* id, std::string& path, bool& automatic, const std::string& defaultPath, const char* hint)
{
    if (automatic) path = defaultPath;
    label("File");
    ImGui::SetNextItemWidth(-70);
    wantGlyphs(path);
    if (ImGui::InputTextWithHint(id, hint, &path)) automatic = false;
    // The full path only on hover: always shown, it would put the checkout's folder into the screenshot tests.
    if (ImGui::IsItemHovered() && !path.empty()) {
        std::error_code ec;
        const std::filesystem::path abs = std::filesystem::absolute(path, ec);
        ImGui::SetTooltip("%s", ec ? path.c_str() : abs.lexically_normal().string().c_str());
    }
    ImGui::SameLine();
    ImGui::BeginDisabled(automatic);
    if (ImGui::Button((std::string("Default") + id).c_str())) automatic = true;
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("Next to the session file, or in the current folder:\n%s", defaultPath.c_str());
}

// ---- Figure -------------------------------------------------------------------------------------------

void drawFigureOptions(AppState& state, ExportState& st)
{
    fig::FigureOptions& fo = st.figure;
    label("Panel");
    if (ImGui::BeginCombo("##panel", fig::toString(fo.panel))) {
        for (fig::PanelKind k : kPanelKinds)
            if (ImGui::Selectable(fig::toString(k), k == fo.panel)) fo.panel = k;
        ImGui::EndCombo();
    }
    const int heads = state.doc.sizes().H;
    label("Head");
    const std::string headText = fo.head < 0 ? std::string(fo.panel == fig::PanelKind::Chain ? "all (chain: head 0)" : "all")
                                             : std::to_string(fo.head);
    if (ImGui::BeginCombo("##head", headText.c_str())) {
        if (ImGui::Selectable("all", fo.head < 0)) fo.head = -1;
        for (int h = 0; h < heads; ++h)
            if (ImGui::Selectable(std::to_string(h).c_str(), fo.head == h)) fo.head = h;
        ImGui::EndCombo();
    }
    label("Colormap");
    const std::string defaultCmap = std::string("default (") + attn::toString(fig::defaultColormap(fo.panel)) + ")";
    if (ImGui::BeginCombo("##cmap", fo.cmap ? attn::toString(*fo.cmap) : defaultCmap.c_str())) {
        if (ImGui::Selectable(defaultCmap.c_str(), !fo.cmap)) fo.cmap.reset();
        for (attn::Colormap c : kColormaps)
            if (ImGui::Selectable(attn::toString(c), fo.cmap == c)) fo.cmap = c;
        ImGui::EndCombo();
    }
    label("Range");
    if (ImGui::RadioButton("shared", fo.sharedRange)) fo.sharedRange = true;
    ImGui::SameLine();
    if (ImGui::RadioButton("per head", !fo.sharedRange)) fo.sharedRange = false;
    label("Cells");
    ImGui::Checkbox("annotate values", &fo.annotate);
    label("Title");
    ImGui::Checkbox("default", &st.titleDefault);
    if (!st.titleDefault) {
        ImGui::SetCursorPosX(kLabelWidth);
        ImGui::SetNextItemWidth(-1);
        wantGlyphs(st.title);
        ImGui::InputTextWithHint("##title", "(empty: no title)", &st.title);
    }
    ImGui::Separator();
    label("Format");
    int format = static_cast<int>(st.format);
    if (ImGui::Combo("##format", &format, kFormatNames, IM_ARRAYSIZE(kFormatNames))) {
        st.format = static_cast<fig::FigureFormat>(format);
        if (!st.figurePathAuto) st.figurePath = replaceExtension(st.figurePath, figureExtension(st.format));
    }
    label("PNG scale");
    ImGui::BeginDisabled(st.format != fig::FigureFormat::Png);
    if (ImGui::InputDouble("##scale", &st.scale, 0.5, 1.0, "%.2f px/pt"))
        st.scale = std::clamp(st.scale, fig::kMinScale, fig::kMaxScale);
    ImGui::EndDisabled();
    if (st.format == fig::FigureFormat::Png && st.preview.widthPt > 0)
        ImGui::TextDisabled("%.0f × %.0f px (%.0f dpi)", std::ceil(st.preview.widthPt * st.scale),
                            std::ceil(st.preview.heightPt * st.scale), st.scale * 72);
    else if (st.preview.widthPt > 0)
        ImGui::TextDisabled("%.0f × %.0f pt, vector with real text", st.preview.widthPt, st.preview.heightPt);
}

// Under options and preview, across the dialog: the path, the button and the outcome.
void drawFigureExport(AppState& state, ExportState& st)
{
    const fig::FigureOptions opt = figureOptions(st, state.view.weightsRange == RangeMode::Fixed, state.view.weightsScale);
    pathField("##figpath", st.figurePath, st.figurePathAuto, defaultFigurePath(state.doc, opt, st.format), "figure.pdf");
    if (!st.figurePathAuto)
        if (const auto f = fig::formatFromPath(st.figurePath)) st.format = *f;  // the typed extension wins
    const bool exportClicked = ImGui::Button("Export figure", ImVec2(200, 0));
    state.recordRect("export/figure", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (exportClicked) report(st.figureMessage, exportFigure(state.doc, opt, st.figurePath, st.scale));
    drawMessage(st.figureMessage);
}

void drawFigurePreview(AppState& state, ExportState& st)
{
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    FigurePreview& p = st.preview;
    updatePreview(p, state.doc, figureOptions(st, state.view.weightsRange == RangeMode::Fixed, state.view.weightsScale), avail.x, avail.y, ImGui::GetTime());
    if (p.textureVersion != p.version) {
        p.texture = p.image.pixels.empty() ? nullptr
                                           : uploadRgbaImage("export/preview", p.image.width, p.image.height, p.image.pixels.data());
        p.textureVersion = p.version;
    }
    if (!p.error.empty()) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(kErrorColor, "%s", p.error.c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    if (p.image.width <= 0 || p.image.height <= 0) return;
    // The image was rendered to fit this box; it is drawn smaller only when the box shrank since.
    const float s = std::min({1.0f, avail.x / float(p.image.width), avail.y / float(p.image.height)});
    const ImVec2 size(float(p.image.width) * s, float(p.image.height) * s);
    const ImVec2 a = ImGui::GetCursorScreenPos();
    if (p.texture) {
        ImGui::Image(p.texture, size);
    } else {
        ImGui::Dummy(size);  // the null renderer (tests): a frame where the picture would be
        ImGui::GetWindowDrawList()->AddRect(a, ImVec2(a.x + size.x, a.y + size.y), ImGui::GetColorU32(ImGuiCol_Border));
    }
    state.recordRect("export/preview", a, ImVec2(a.x + size.x, a.y + size.y));
    if (st.figure.annotate && !p.annotationsFit)
        ImGui::TextDisabled("Cells are too small here for values; they are printed when they fit.");
}

void drawFigureTab(AppState& state, ExportState& st)
{
    // Room under the two columns for the path row, the button and two lines of message.
    const float bottom = 2 * ImGui::GetFrameHeightWithSpacing() + 2 * ImGui::GetTextLineHeightWithSpacing();
    ImGui::BeginChild("##figure_options", ImVec2(kOptionsWidth, -bottom));
    drawFigureOptions(state, st);
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("##figure_preview", ImVec2(0, -bottom), true);
    drawFigurePreview(state, st);
    ImGui::EndChild();
    drawFigureExport(state, st);
}

// ---- Data ---------------------------------------------------------------------------------------------

void drawDataTab(AppState& state, ExportState& st)
{
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted("Every input and every result matrix per head, named as in the session file (X, Wq, ..., "
                           "h0_weights, output), float32 in the session's layout: the same arrays as `attnscope export`.");
    ImGui::PopTextWrapPos();
    ImGui::Spacing();
    label("Format");
    int f = static_cast<int>(st.dataFormat);
    if (ImGui::Combo("##dataformat", &f, kDataFormatNames, IM_ARRAYSIZE(kDataFormatNames))) st.dataFormat = static_cast<DataFormat>(f);
    label("Arrays");
    ImGui::Checkbox("inputs only (no results)", &st.inputsOnly);
    pathField("##datapath", st.dataPath, st.dataPathAuto, defaultDataPath(state.doc, st.dataFormat), "arrays.npz");
    const bool clicked = ImGui::Button("Export arrays", ImVec2(200, 0));
    state.recordRect("export/data", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (clicked) report(st.dataMessage, exportData(state.doc, st.dataFormat, st.dataPath, st.inputsOnly));
    drawMessage(st.dataMessage);
}

// ---- Import -------------------------------------------------------------------------------------------

void drawImportTab(AppState& state, ExportState& st)
{
    label("Into");
    if (ImGui::BeginCombo("##slot", st.importSlot.c_str())) {
        for (const std::string& s : io::slotNames())
            if (ImGui::Selectable(s.c_str(), s == st.importSlot)) st.importSlot = s;
        ImGui::EndCombo();
    }
    const std::string shapeKey = std::to_string(state.doc.revision()) + "|" + st.importSlot;
    if (shapeKey != st.slotShapeKey) {
        st.slotShapeKey = shapeKey;
        st.slotShape = slotShape(state.doc, st.importSlot);
    }
    ImGui::SetCursorPosX(kLabelWidth);
    if (st.slotShape.empty()) ImGui::TextDisabled("not in this session (its mode or score has no %s)", st.importSlot.c_str());
    else ImGui::TextDisabled("currently %s (as in the session file)", st.slotShape.c_str());

    label("From");
    ImGui::SetNextItemWidth(-70);
    ImGui::InputTextWithHint("##importpath", "weights.npy, arrays.npz or model.safetensors", &st.importPath);
    ImGui::SameLine();
    if (ImGui::Button("Load", ImVec2(-1, 0))) {
        attn::Expected<std::vector<ArrayEntry>> list = listArrays(st.importPath);
        st.importNames.clear();
        st.importInfo.clear();
        st.importName = 0;
        st.importListedPath.clear();
        if (list) {
            for (const ArrayEntry& e : *list) {
                st.importNames.push_back(e.name);
                st.importInfo.push_back(e.info);
            }
            st.importListedPath = st.importPath;
            st.importMessage = {};
        } else {
            st.importMessage = {list.status().message, true};
        }
    }
    const bool listed = !st.importListedPath.empty() && st.importListedPath == st.importPath;
    label("Array");
    if (!listed) {
        ImGui::TextDisabled("press Load to list the arrays in the file");
    } else {
        st.importName = std::clamp(st.importName, 0, int(st.importNames.size()) - 1);
        auto itemText = [&](int i) {
            return (st.importNames[i].empty() ? std::string("(the array)") : st.importNames[i]) + "   " + st.importInfo[i];
        };
        if (ImGui::BeginCombo("##arrayname", itemText(st.importName).c_str())) {
            for (int i = 0; i < int(st.importNames.size()); ++i)
                if (ImGui::Selectable(itemText(i).c_str(), i == st.importName)) st.importName = i;
            ImGui::EndCombo();
        }
    }
    label("Transpose");
    ImGui::Checkbox("first (PyTorch nn.Linear weights are out × in)", &st.importTranspose);
    label("Rows");
    ImGui::SetNextItemWidth(120);
    ImGui::InputTextWithHint("##rows", "a:b (all)", &st.importRows);
    ImGui::SameLine();
    ImGui::TextUnformatted("Cols");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(120);
    ImGui::InputTextWithHint("##cols", "a:b (all)", &st.importCols);
    label("Head slice");
    ImGui::Checkbox("##headslice", &st.importHeadSlice);
    ImGui::BeginDisabled(!st.importHeadSlice);
    ImGui::SameLine();
    ImGui::TextUnformatted("keep block");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90);
    ImGui::InputInt("##importhead", &st.importHead);
    ImGui::SameLine();
    ImGui::TextUnformatted("of");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90);
    ImGui::InputInt("##importheads", &st.importHeads);
    st.importHeads = std::max(1, st.importHeads);
    st.importHead = std::clamp(st.importHead, 0, st.importHeads - 1);
    ImGui::EndDisabled();
    ImGui::TextDisabled("Applied in this order: transpose, rows and cols (half-open, as Python slices), head slice.");

    const bool clicked = ImGui::Button("Import", ImVec2(200, 0));
    state.recordRect("export/import", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (clicked) {
        ImportRequest r;
        r.slot = st.importSlot;
        r.path = st.importPath;
        if (listed) r.name = st.importNames[std::size_t(st.importName)];
        r.transpose = st.importTranspose;
        r.rows = st.importRows;
        r.cols = st.importCols;
        if (st.importHeadSlice) {
            r.head = st.importHead;
            r.heads = st.importHeads;
        }
        report(st.importMessage, importArray(state.doc, r));
    }
    drawMessage(st.importMessage);
}

// ---- Code, screenshot ---------------------------------------------------------------------------------

void drawCodeTab(AppState& state, ExportState& st)
{
    if (ImGui::RadioButton("NumPy", st.codeLang == io::CodeLang::NumPy)) st.codeLang = io::CodeLang::NumPy;
    ImGui::SameLine();
    if (ImGui::RadioButton("PyTorch", st.codeLang == io::CodeLang::Torch)) st.codeLang = io::CodeLang::Torch;
    if (updateCode(st, state.doc)) {
        // ImGui measures the whole text every frame; a session of thousands of tokens makes megabytes of
        // code, so the box shows the start and Copy copies all of it.
        constexpr std::size_t kMaxShownBytes = std::size_t(256) << 10;
        st.codeShown = st.code.size() <= kMaxShownBytes
                           ? st.code
                           : st.code.substr(0, st.code.rfind('\n', kMaxShownBytes)) + "\n# ... (" +
                                 std::to_string(st.code.size() >> 10) + " KiB in all: Copy copies the whole program)\n";
    }
    ImGui::SameLine(0, 30);
    ImGui::BeginDisabled(st.code.empty());
    if (ImGui::Button("Copy", ImVec2(100, 0))) {
        ImGui::SetClipboardText(st.code.c_str());
        postInfo(std::string("copied the ") + (st.codeLang == io::CodeLang::NumPy ? "NumPy" : "PyTorch") + " program");
    }
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::TextDisabled("a standalone program that rebuilds this session and computes the same attention");
    drawMessage(st.codeMessage);
    ImGui::InputTextMultiline("##code", &st.codeShown, ImVec2(-1, -1), ImGuiInputTextFlags_ReadOnly);
}

void drawScreenshotTab(AppState& state, ExportState& st)
{
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted("A PNG of the whole window at its size in pixels, as it is drawn now (without this dialog).");
    ImGui::PopTextWrapPos();
    ImGui::Spacing();
    pathField("##shotpath", st.screenshotPath, st.screenshotPathAuto, defaultScreenshotPath(state.doc), "window.png");
    if (ImGui::Button("Save window screenshot (PNG)")) st.screenshotRequest = true;
    state.recordRect("export/screenshot", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    drawMessage(st.screenshotMessage);
}

} // namespace

void drawExportPanel(AppState& state)
{
    ExportState& st = state.exportDialog;
    if (!st.open) return;
    if (st.screenshotRequest) {
        // This frame is the screenshot: the dialog stays out of it, and the window loop captures the frame
        // after rendering (window.cpp).
        st.screenshotRequest = false;
        st.screenshotReady = true;
        return;
    }
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.5f), ImGuiCond_Appearing,
                            ImVec2(0.5f, 0.5f));
    ImGui::SetNextWindowSize(ImVec2(std::min(940.0f, vp->WorkSize.x - 40), std::min(640.0f, vp->WorkSize.y - 40)), ImGuiCond_Appearing);
    ImGui::SetNextWindowBgAlpha(1.0f);  // opaque: the chain's numbers behind the options made them hard to read
    if (ImGui::Begin("Export", &st.open, ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings)) {
        state.recordRect("export/window", ImGui::GetWindowPos(),
                         ImVec2(ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y));
        if (ImGui::BeginTabBar("##export_tabs")) {
            struct Tab {
                const char* name;
                ExportTab tab;
                void (*draw)(AppState&, ExportState&);
            };
            const Tab tabs[] = {{"Figure", ExportTab::Figure, drawFigureTab},
                                {"Data", ExportTab::Data, drawDataTab},
                                {"Import", ExportTab::Import, drawImportTab},
                                {"Code", ExportTab::Code, drawCodeTab},
                                {"Window screenshot", ExportTab::Screenshot, drawScreenshotTab}};
            for (const Tab& t : tabs) {
                const ImGuiTabItemFlags flags = st.selectTab && st.tab == t.tab ? ImGuiTabItemFlags_SetSelected : 0;
                const bool selected = ImGui::BeginTabItem(t.name, nullptr, flags);
                state.recordRect(std::string("export/tab/") + t.name, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
                if (selected) {
                    if (!st.selectTab) st.tab = t.tab;
                    t.draw(state, st);
                    ImGui::EndTabItem();
                }
            }
            st.selectTab = false;
            ImGui::EndTabBar();
        }
    }
    ImGui::End();
}

} // namespace app
