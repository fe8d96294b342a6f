#include "state/app_state.h"

#include "messages.h"
#include "state/paths.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>

namespace app {
using json = nlohmann::json;

namespace {
struct LessonEntry {
    const char* name;
    const char* label;
};
constexpr LessonEntry kLessons[kLessonCount] = {
    {"vector_view", "From vector to matrix (seeds 000/001)"},
    {"two_formulas", "The two formulas (seeds 000/001)"},
    {"scaling", "Why 1/sqrt(d_k) (seeds 002/003)"},
    {"heads", "Heads (seeds 002/003)"},
    {"additive", "Additive attention (seed 004)"},
    {"masks", "Masks (seed 004)"},
    {"image_patches", "Image patches (seed 003)"},
};
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
} // namespace

const char* lessonName(LessonId id) { return kLessons[int(id)].name; }
const char* lessonMenuLabel(LessonId id) { return kLessons[int(id)].label; }

int lessonFromName(const std::string& name)
{
    for (int i = 0; i < kLessonCount; ++i)
        if (name == kLessons[i].name) return i;
    return -1;
}

namespace {

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
    json open = json::array();
    for (int i = 0; i < kLessonCount; ++i)
        if (v.lessons[i]) open.push_back(kLessons[i].name);
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
    state.view = viewFromJson(s->viewJson);
    if (state.view.lessonQuery >= 0) state.lesson.query = state.view.lessonQuery;  // clamped when drawn
    // Presets are read-only templates: the document opened from one has no path, so Save asks for one
    // instead of overwriting the preset.
    std::error_code ec;
    const bool preset = !state.presetsDir.empty() &&
                        std::filesystem::equivalent(std::filesystem::path(path).parent_path(), state.presetsDir, ec);
    state.doc.setSession(std::move(*s), preset ? "" : path);
    state.filePath = preset ? "" : path;
    if (!preset) addRecent(state, path);
    postInfo(std::string(preset ? "opened preset " : "opened ") + path);
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

} // namespace app
