#include "panels/path_field.h"

#include "messages.h"
#include "panels/glyph_atlas.h"
#include "panels/panels.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cstdlib>
#include <filesystem>

namespace app {

namespace {

namespace fs = std::filesystem;

// How many folder entries are read at most while typing (a folder of 100 000 files must not stall a frame).
constexpr std::size_t kMaxEntriesScanned = 4096;

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// "~/x" → "$HOME/x" (only to read the folder; the choices keep what the user typed).
std::string expandHome(const std::string& p)
{
    const char* home = std::getenv("HOME");
    if (home && *home && (p == "~" || p.rfind("~/", 0) == 0)) return std::string(home) + p.substr(1);
    return p;
}

void addUnique(std::vector<std::string>& out, const std::string& s, std::size_t max)
{
    if (out.size() < max && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

} // namespace

std::vector<std::string> pathCompletions(const std::string& typed, const std::vector<std::string>& recent, std::size_t max)
{
    std::vector<std::string> out;
    const std::string needle = lower(typed);
    for (const std::string& r : recent)
        if (needle.empty() || lower(r).find(needle) != std::string::npos) addUnique(out, r, max);
    if (typed.empty()) return out;

    const std::size_t slash = typed.rfind('/');
    const std::string dirPart = slash == std::string::npos ? "" : typed.substr(0, slash + 1);  // kept as typed
    const std::string tail = slash == std::string::npos ? typed : typed.substr(slash + 1);
    const std::string dir = dirPart.empty() ? "." : expandHome(dirPart);
    std::vector<std::pair<std::string, bool>> entries;  // name, is a folder
    std::error_code ec;
    fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    for (std::size_t scanned = 0; !ec && it != fs::directory_iterator() && scanned < kMaxEntriesScanned; it.increment(ec), ++scanned) {
        const std::string name = it->path().filename().string();
        if (name.rfind(tail, 0) != 0) continue;
        if (name[0] == '.' && (tail.empty() || tail[0] != '.')) continue;
        std::error_code e2;
        entries.emplace_back(name, it->is_directory(e2));
    }
    std::sort(entries.begin(), entries.end());
    for (const auto& [name, folder] : entries) addUnique(out, dirPart + name + (folder ? "/" : ""), max);
    return out;
}

std::string commonPrefix(const std::vector<std::string>& choices)
{
    if (choices.empty()) return "";
    std::string p = choices[0];
    for (const std::string& c : choices) {
        std::size_t n = 0;
        while (n < p.size() && n < c.size() && p[n] == c[n]) ++n;
        p.resize(n);
    }
    return p;
}

DesktopChooser& desktopChooser(AppState& state)
{
    if (!state.edit.chooser) state.edit.chooser = std::make_unique<DesktopChooser>();
    return *state.edit.chooser;
}

bool startDesktopChooser(AppState& state, const char* rectName, ChooserKind kind, const std::string& suggestedName)
{
    DesktopChooser& chooser = desktopChooser(state);
    if (!chooser.start(kind, kind == ChooserKind::Save ? "Save session as" : "Open session", suggestedName)) return false;
    state.edit.chooserFor = rectName;
    state.edit.chooserKind = kind;
    return true;
}

bool drawPathField(AppState& state, const char* rectName, std::string& path, const char* hint, float width, ChooserKind browseKind)
{
    PathFieldState& pf = state.edit.pathFields[rectName];
    DesktopChooser& chooser = desktopChooser(state);
    // The one chooser of the window answers the field that opened it. A file chosen in an Open dialog is
    // taken at once (as Enter would), one chosen in a Save dialog fills the field for the Save button.
    bool chosen = false;
    if (std::optional<ChooserResult> r = state.edit.chooserFor == rectName ? chooser.take() : std::nullopt) {
        if (!r->path.empty()) {
            path = r->path;
            chosen = state.edit.chooserKind == ChooserKind::Open;
        } else if (r->unavailable) {
            postInfo("the desktop's file chooser is not available (" + r->message + "); type the path instead");
        } else if (!r->message.empty()) {
            postError(r->message);
        }
    }
    const bool browse = chooser.mayBeAvailable();
    const float browseW = browse ? ImGui::CalcTextSize("Browse…").x + ImGui::GetStyle().FramePadding.x * 2 : 0.0f;
    const float avail = width < 0 ? ImGui::GetContentRegionAvail().x + width : width;
    ImGui::SetNextItemWidth(std::max(60.0f, avail - (browse ? browseW + ImGui::GetStyle().ItemSpacing.x : 0.0f)));
    if (pf.refocus) {
        ImGui::SetKeyboardFocusHere();
        pf.refocus = false;
    }
    // Tab completes as far as the choices agree; Up/Down move through them (Enter then takes the one shown).
    auto keys = [](ImGuiInputTextCallbackData* d) {
        auto* p = static_cast<PathFieldState*>(d->UserData);
        std::string replacement;
        if (d->EventFlag == ImGuiInputTextFlags_CallbackCompletion) {
            const std::string pre = commonPrefix(p->choices);
            if (pre.size() > static_cast<std::size_t>(d->BufTextLen)) replacement = pre;
        } else if (d->EventFlag == ImGuiInputTextFlags_CallbackHistory && !p->choices.empty()) {
            const int n = static_cast<int>(p->choices.size());
            p->highlighted = d->EventKey == ImGuiKey_UpArrow ? (p->highlighted <= 0 ? n - 1 : p->highlighted - 1)
                                                             : (p->highlighted + 1) % n;
            replacement = p->choices[static_cast<std::size_t>(p->highlighted)];
            p->listedFor = replacement;  // the list stays the one being walked through
        }
        if (!replacement.empty()) {
            d->DeleteChars(0, d->BufTextLen);
            d->InsertChars(0, replacement.c_str());
        }
        return 0;
    };
    ImGui::PushID(rectName);  // several fields may share a window
    wantGlyphs(path);  // a folder's name in any script
    const bool enter = ImGui::InputTextWithHint("##path", hint, &path,
                                                ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_CallbackCompletion |
                                                    ImGuiInputTextFlags_CallbackHistory,
                                                keys, &pf);
    const ImVec2 fieldMin = ImGui::GetItemRectMin(), fieldMax = ImGui::GetItemRectMax();
    state.recordRect(rectName, fieldMin, fieldMax);
    const bool active = ImGui::IsItemActive();
    if (browse) {
        ImGui::SameLine();
        ImGui::BeginDisabled(chooser.busy());
        if (ImGui::Button("Browse…")) startDesktopChooser(state, rectName, browseKind, fs::path(path).filename().string());
        state.recordRect(std::string(rectName) + "/browse", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::EndDisabled();
        if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
            ImGui::SetTooltip(chooser.busy() ? "the desktop's file chooser is open" : "the desktop's file chooser");
    }
    ImGui::PopID();

    if (!pf.listed || pf.listedFor != path) {
        pf.choices = pathCompletions(path, state.recentFiles);
        pf.listedFor = path;
        pf.listed = true;
        pf.highlighted = -1;
    }
    if (enter) pf.open = false;
    else if (active) pf.open = true;
    // The list under the field, while typing (and while the pointer is on it, so that a click can land).
    if (!pf.open || pf.choices.empty() || (!active && !pf.listHovered)) {
        if (!active && !pf.listHovered) pf.open = false;
        pf.listHovered = false;
        return enter || chosen;
    }
    ImGui::SetNextWindowPos(ImVec2(fieldMin.x, fieldMax.y + 2));
    ImGui::SetNextWindowSizeConstraints(ImVec2(fieldMax.x - fieldMin.x, 0), ImVec2(FLT_MAX, 300));
    ImGui::Begin((std::string("##choices/") + rectName).c_str(), nullptr,
                 ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoSavedSettings |
                     ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_Tooltip);
    for (std::size_t i = 0; i < pf.choices.size(); ++i) {
        const std::string& c = pf.choices[i];
        if (ImGui::Selectable(c.c_str(), static_cast<int>(i) == pf.highlighted)) {
            path = c;
            // A folder: go on typing in it; a file: done.
            pf.refocus = !c.empty() && c.back() == '/';
            pf.open = pf.refocus;
        }
        state.recordRect(std::string(rectName) + "/choice/" + std::to_string(i), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
    pf.listHovered = ImGui::IsWindowHovered();
    ImGui::End();
    return enter || chosen;
}

} // namespace app
