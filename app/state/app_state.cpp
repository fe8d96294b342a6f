#include "state/app_state.h"

#include "messages.h"
#include "state/paths.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

namespace app {
using json = nlohmann::json;

namespace {
const char* kKindNames[kHeatmapKinds] = {"projections", "scores", "weights", "outputs"};

void addRecent(AppState& state, const std::string& path)
{
    std::error_code ec;
    const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
    auto& r = state.recentFiles;
    r.erase(std::remove(r.begin(), r.end(), abs), r.end());
    r.insert(r.begin(), abs);
    if (r.size() > AppState::kMaxRecent) r.resize(AppState::kMaxRecent);
    saveUserState(state);
}

const char* rangeModeName(RangeMode m) { return m == RangeMode::Fixed ? "fixed" : m == RangeMode::Locked ? "locked" : "auto"; }
std::optional<RangeMode> rangeModeFromName(const std::string& s)
{
    if (s == "fixed") return RangeMode::Fixed;
    if (s == "locked") return RangeMode::Locked;
    if (s == "auto") return RangeMode::Auto;
    return std::nullopt;
}

} // namespace

std::string viewToJson(const ViewOptions& v)
{
    json j;
    for (int k = 0; k < kHeatmapKinds; ++k) j["colormaps"][kKindNames[k]] = attn::toString(v.colormaps[k]);
    j["shared_range"] = v.sharedRange;
    j["show_values"] = v.showValues;
    j["zoom"] = v.zoom;
    j["layout"] = v.fit ? "fit" : "full";
    j["head"] = v.head;
    j["weights_range"] = rangeModeName(v.weightsRange);
    j["ranges"] = rangeModeName(v.otherRanges);
    j["weights_scale"] = attn::toString(v.weightsScale);
    json open = json::array();
    for (int i = 0; i < kLessonCount; ++i)
        if (v.lessons[i]) open.push_back(lessonName(LessonId(i)));
    if (open.size() == 1) j["lesson"] = open[0];
    else if (!open.empty()) j["lesson"] = open;
    return j.dump();
}

ViewOptions viewFromJson(const std::string& text)
{
    ViewOptions v;
    const json j = json::parse(text, nullptr, false);
    if (!j.is_object()) return v;
    if (j.contains("colormaps") && j["colormaps"].is_object())
        for (int k = 0; k < kHeatmapKinds; ++k) {
            const auto& c = j["colormaps"];
            if (c.contains(kKindNames[k]) && c[kKindNames[k]].is_string())
                if (auto m = attn::colormapFromString(c[kKindNames[k]].get<std::string>())) v.colormaps[k] = *m;
        }
    if (j.contains("shared_range") && j["shared_range"].is_boolean()) v.sharedRange = j["shared_range"].get<bool>();
    if (j.contains("show_values") && j["show_values"].is_boolean()) v.showValues = j["show_values"].get<bool>();
    if (j.contains("zoom") && j["zoom"].is_number()) v.zoom = std::clamp(j["zoom"].get<float>(), 0.25f, 8.0f);
    if (j.contains("layout") && j["layout"].is_string()) v.fit = j["layout"].get<std::string>() != "full";
    if (j.contains("head") && j["head"].is_number_integer()) v.head = std::max(0, j["head"].get<int>());
    if (j.contains("weights_range") && j["weights_range"].is_string())
        if (auto m = rangeModeFromName(j["weights_range"].get<std::string>())) v.weightsRange = *m;
    if (j.contains("weights_scale") && j["weights_scale"].is_string())
        if (auto m = attn::weightsScaleFromString(j["weights_scale"].get<std::string>())) v.weightsScale = *m;
    if (j.contains("ranges") && j["ranges"].is_string())
        if (auto m = rangeModeFromName(j["ranges"].get<std::string>()); m && *m != RangeMode::Fixed) v.otherRanges = *m;
    if (j.contains("lesson")) {
        // A name or a list of names; unknown names are ignored (a newer file may name lessons we lack).
        const json names = j["lesson"].is_array() ? j["lesson"] : json::array({j["lesson"]});
        for (const auto& n : names)
            if (n.is_string())
                if (int i = lessonFromName(n.get<std::string>()); i >= 0) v.lessons[i] = true;
    }
    if (j.contains("query") && j["query"].is_number_integer()) v.lessonQuery = std::max(-1, j["query"].get<int>());
    return v;
}

bool openSession(AppState& state, const std::string& path)
{
    auto s = attn::loadSession(path);
    if (!s.ok()) {
        state.loadError = s.status().message;
        postError("cannot open session: " + s.status().message);
        return false;
    }
    state.doc.setViewJson(viewToJson(state.view));  // the undo step keeps the view as the user left it
    state.view = viewFromJson(s->viewJson);
    if (state.view.lessonQuery >= 0) state.lesson.query = state.view.lessonQuery;  // clamped when drawn
    // Presets are read-only templates: the document opened from one has no path, so Save asks for one
    // instead of overwriting the preset.
    const bool preset = isPreset(state, path);
    state.doc.setSession(std::move(*s), preset ? "" : path);
    noteSessionLoaded(state.edit);
    if (!preset) addRecent(state, path);
    postInfo(std::string(preset ? "opened preset " : "opened ") + path);
    state.filePath = preset ? "" : path;  // last: `path` may be state.filePath itself (the file panel's Open)
    return true;
}

void followDocumentView(AppState& state)
{
    DocUiState& ui = state.docUi;
    if (state.doc.sessionSerial() != ui.viewSerial) {
        // The first frame adopts the view as the window set it up (the command line's --lesson included).
        const bool first = ui.viewSerial == ~std::uint64_t(0);
        ui.viewSerial = state.doc.sessionSerial();
        const std::string& json = state.doc.session().viewJson;
        if (!first && !json.empty()) {  // a session made in the app (a model layer) has none: keep the current view
            state.view = viewFromJson(json);
            if (state.view.lessonQuery >= 0) state.lesson.query = state.view.lessonQuery;
        }
        return;
    }
    std::string json = viewToJson(state.view);
    if (json != state.doc.session().viewJson) state.doc.setViewJson(std::move(json));
}

bool isPreset(const AppState& state, const std::string& path)
{
    std::error_code ec;
    return !state.presetsDir.empty() &&
           std::filesystem::equivalent(std::filesystem::path(path).parent_path(), state.presetsDir, ec);
}

bool requestOpen(AppState& state, const std::string& path)
{
    if (!state.doc.modified()) return openSession(state, path);
    DocUiState& ui = state.docUi;
    ui.pendingOpen = path;
    ui.saveError.clear();
    if (!state.doc.path().empty()) {
        ui.saveAsPath = state.doc.path();
    } else if (ui.saveAsPath.empty()) {
        // A file name from the session's name ("Causal decoder, 2 heads" → causal_decoder_2_heads.json).
        std::string stem;
        for (char c : state.doc.session().name) {
            const unsigned char u = static_cast<unsigned char>(c);
            if (std::isalnum(u)) stem.push_back(static_cast<char>(std::tolower(u)));
            else if (!stem.empty() && stem.back() != '_') stem.push_back('_');
        }
        while (!stem.empty() && stem.back() == '_') stem.pop_back();
        ui.saveAsPath = (stem.empty() ? std::string("untitled") : stem) + ".json";
    }
    return true;
}

bool saveSessionAs(AppState& state, const std::string& path)
{
    attn::Status st = attn::saveSession(path, state.doc.sessionForSave(viewToJson(state.view)));
    if (!st.ok()) {
        postError("cannot save: " + st.message);
        return false;
    }
    state.doc.setPath(path);
    state.doc.markSaved();
    addRecent(state, path);
    postInfo("saved " + path);
    return true;
}

void loadUserState(AppState& state)
{
    if (state.stateDir.empty()) return;
    auto text = attn::readFile(state.stateDir + "/app.json", std::size_t(1) << 20);
    if (!text.ok()) return;
    const json j = json::parse(*text, nullptr, false);
    if (!j.is_object() || !j.contains("recent") || !j["recent"].is_array()) return;
    state.recentFiles.clear();
    for (const auto& r : j["recent"])
        if (r.is_string() && state.recentFiles.size() < AppState::kMaxRecent) state.recentFiles.push_back(r.get<std::string>());
}

void saveUserState(const AppState& state)
{
    if (state.stateDir.empty() || !state.autosave) return;
    json j;
    j["recent"] = state.recentFiles;
    attn::Status st = attn::writeFileAtomic(state.stateDir + "/app.json", j.dump(2));
    if (!st.ok()) postWarningOnce("app.json", "cannot save the recent files: " + st.message);
}

std::string autosavePath(const AppState& state)
{
    return state.stateDir.empty() ? std::string() : state.stateDir + "/autosave.json";
}

bool autosaveIfNeeded(AppState& state, double now, bool force)
{
    const std::uint64_t rev = state.doc.revision();
    if (rev != state.seenRevision) {
        state.seenRevision = rev;
        state.lastChangeTime = now;
    }
    if (std::optional<BackgroundSaver::Outcome> o = state.autosaver.take(); o && !o->status.ok()) {
        postWarningOnce("autosave", "autosave failed: " + o->status.message);
        if (state.savedRevision == o->revision) state.savedRevision = ~std::uint64_t(0);  // not saved: try again
    }
    if (!state.autosave || state.stateDir.empty() || state.showRestoreOffer) return false;
    if (state.model.openLayer >= 0) return false;  // a model layer: see app_state.h
    if (rev == state.savedRevision) return false;
    if (!force && now - state.lastChangeTime < kAutosaveDelaySeconds) return false;
    attn::Session s = state.doc.sessionForSave(viewToJson(state.view));
    if (!force) {
        state.autosaver.save(autosavePath(state), std::move(s), rev);
        state.savedRevision = rev;
        return true;
    }
    state.autosaver.flush();  // an older write must not land after this one
    attn::Status st = attn::saveSession(autosavePath(state), s);
    if (!st.ok()) {
        postWarningOnce("autosave", "autosave failed: " + st.message);
        return false;
    }
    state.savedRevision = rev;
    return true;
}

std::string runMarkerPath(const AppState& state)
{
    return state.stateDir.empty() || !state.autosave ? std::string() : state.stateDir + "/running";
}

bool beginRun(AppState& state)
{
    const std::string p = runMarkerPath(state);
    if (p.empty()) return false;
    std::error_code ec;
    const bool crashed = std::filesystem::exists(p, ec);
    attn::Status st = attn::writeFileAtomic(p, "attnscope is running; removed when its window closes\n");
    if (!st.ok()) postWarningOnce("running", "cannot write the crash marker: " + st.message);
    return crashed;
}

void endRun(AppState& state)
{
    const std::string p = runMarkerPath(state);
    if (p.empty()) return;
    std::error_code ec;
    std::filesystem::remove(p, ec);
}

void requestQuit(AppState& state)
{
    if (state.doc.modified()) state.quitPrompt = true;
    else state.quitConfirmed = true;
}

} // namespace app
