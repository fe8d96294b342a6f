#include "state/file_drop.h"

#include "state/model_state.h"

#include "messages.h"
#include "io/array_io.h"
#include "state/export_actions.h"

#include <attnscope/preset_io.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace app {

namespace {

std::string lowerExtension(const std::string& path)
{
    std::string e = std::filesystem::path(path).extension().string();
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return e;
}

// The array to import from a file that may hold several: the only one, else the one named as the slot or
// as the matrix. Errors list what the file holds.
attn::Expected<std::string> pickArray(const std::string& path, MatrixId id)
{
    attn::Expected<std::vector<ArrayEntry>> entries = listArrays(path);
    if (!entries) return entries.status();
    if (entries->size() == 1) return (*entries)[0].name;
    for (const ArrayEntry& e : *entries)
        if (e.name == slotName(id) || e.name == matrixName(id)) return e.name;
    std::string names;
    for (const ArrayEntry& e : *entries) names += (names.empty() ? "" : ", ") + e.name;
    return attn::invalidArgument(std::filesystem::path(path).filename().string() + " holds " + std::to_string(entries->size()) + " arrays (" +
                                 (names.empty() ? std::string("none") : names) + ") and none is named " + slotName(id) +
                                 ": choose one in File → Export… → Import");
}

// The shape of array `name` in `path` ("5×5", a 1-D array "1×n" as the importer reads it), "" when unknown.
std::string arrayShape(const std::string& path, const std::string& name)
{
    const std::string ext = lowerExtension(path);
    std::vector<std::int64_t> shape;
    if (ext == ".safetensors") {
        attn::Expected<std::vector<io::TensorInfo>> t = io::listSafetensors(path);  // the header only
        if (!t) return "";
        for (const io::TensorInfo& i : *t)
            if (i.name == name) shape = i.shape;
    } else {
        attn::Expected<io::Array> a = ext == ".npz" ? io::readNpz(path, name) : io::readNpy(path);
        if (!a) return "";
        shape = a->shape;
    }
    if (shape.size() == 1) return "1×" + std::to_string(shape[0]);
    if (shape.size() == 2) return std::to_string(shape[0]) + "×" + std::to_string(shape[1]);
    return "";
}

bool isVectorSlot(MatrixId id)
{
    return id == MatrixId::Bq || id == MatrixId::Bk || id == MatrixId::Bv || id == MatrixId::Bo || id == MatrixId::Wv_additive;
}

DropOutcome importOnto(AppState& state, const std::string& path, MatrixId id)
{
    DropOutcome out{path, false, ""};
    const std::string what = "cannot import " + path + " into " + matrixName(id) + ": ";
    attn::Expected<std::string> name = pickArray(path, id);
    if (!name) {
        out.message = what + name.status().message;
        return out;
    }
    // A drop replaces the matrix as it is: the shapes must agree (File → Export… → Import can transpose and
    // slice). Said plainly here; core's message for a whole session would derive sizes from the new array.
    const std::string now = slotShape(state.doc, slotName(id)), given = arrayShape(path, *name);
    if (!now.empty() && !given.empty() && now != given && !isVectorSlot(id)) {
        out.message = what + "expected " + now + " (" + matrixName(id) + " as the session holds it), got " + given +
                      " (" + std::filesystem::path(path).filename().string() + (name->empty() ? "" : "[" + *name + "]") + ")";
        return out;
    }
    ImportRequest r;
    r.slot = slotName(id);
    r.path = path;
    r.name = *name;
    attn::Expected<std::string> done = importArray(state.doc, r);
    if (!done) {
        out.message = what + done.status().message;
        return out;
    }
    out.ok = true;
    out.message = *done;
    return out;
}

} // namespace

DropKind dropKindOf(const std::string& path)
{
    const std::string e = lowerExtension(path);
    if (e == ".json") return DropKind::Session;
    if (e == ".npy" || e == ".npz" || e == ".safetensors") return DropKind::Array;
    std::error_code ec;
    if (e == ".gguf" || std::filesystem::is_directory(path, ec)) return DropKind::Model;
    return DropKind::Unknown;
}

std::optional<MatrixId> editorAt(const std::vector<EditorRect>& editors, ImVec2 pos)
{
    std::optional<MatrixId> hit;
    for (const EditorRect& e : editors)
        if (pos.x >= e.min.x && pos.x < e.max.x && pos.y >= e.min.y && pos.y < e.max.y) hit = e.id;
    return hit;
}

const char* slotName(MatrixId id)
{
    switch (id) {
    case MatrixId::X: return "X";
    case MatrixId::Xkv: return "X_kv";
    case MatrixId::Wq: return "Wq";
    case MatrixId::Wk: return "Wk";
    case MatrixId::Wv: return "Wv";
    case MatrixId::Wo: return "Wo";
    case MatrixId::Q: return "Q";
    case MatrixId::K: return "K";
    case MatrixId::V: return "V";
    case MatrixId::Aq: return "additive_Wq";
    case MatrixId::Ak: return "additive_Wk";
    case MatrixId::Bq: return "bq";
    case MatrixId::Bk: return "bk";
    case MatrixId::Bv: return "bv";
    case MatrixId::Bo: return "bo";
    case MatrixId::Wv_additive: return "additive_wv";
    }
    return "?";
}

std::vector<DropOutcome> handleFileDrop(AppState& state, const std::vector<std::string>& paths, ImVec2 pos)
{
    std::vector<DropOutcome> out;
    // The editors of the last frame, unless no frame drew any since (then the list is of an older layout).
    const bool current = ImGui::GetCurrentContext() && state.edit.editorsFrame == ImGui::GetFrameCount();
    const std::optional<MatrixId> target = current ? editorAt(state.edit.editors, pos) : std::nullopt;
    for (const std::string& path : paths) {
        DropOutcome o{path, false, ""};
        switch (dropKindOf(path)) {
        case DropKind::Session:
            // As File → Open: asks first when there are unsaved changes; openSession posts its own outcome
            // and shows the load-error modal on failure.
            o.ok = requestOpen(state, path);
            o.message = !o.ok                                 ? "cannot open session: " + state.loadError
                        : state.docUi.pendingOpen == path ? "asking before " + path + " replaces unsaved changes"
                                                          : "opened " + path;
            out.push_back(std::move(o));
            continue;
        case DropKind::Model:
            // As File → Open model…: read in the background, installed when read (or its error posted then).
            requestOpenModel(state, path);
            state.model.dirField = path;
            o.ok = true;
            o.message = "opening model " + path + "…";
            break;
        case DropKind::Array:
            if (target) {
                o = importOnto(state, path, *target);
            } else if (isBundlePath(path)) {
                // A .safetensors outside the matrix editors: an attention bundle (docs/bundle.md).
                const attn::Status s = openBundleInWindow(state, path);
                o.ok = s.ok();
                o.message = s.ok() ? "opened bundle " + path : "cannot open bundle " + path + ": " + s.message;
                out.push_back(std::move(o));
                continue;  // openBundleInWindow posted its outcome
            } else
                o.message = "dropped " + path + " outside the matrix editors: drop an array file onto the matrix "
                            "(X, W^Q, …) it should replace (a .safetensors bundle of attention opens anywhere)";
            break;
        case DropKind::Unknown: {
            const std::string ext = lowerExtension(path);
            o.message = "cannot open " + path + ": expected a session (.json), a model (.gguf or a model folder) or, "
                        "dropped onto a matrix, an array (.npy, .npz, .safetensors); got " + (ext.empty() ? std::string("no extension") : "'" + ext + "'");
            break;
        }
        }
        if (o.ok) postInfo(o.message);
        else postError(o.message);
        out.push_back(std::move(o));
    }
    return out;
}

std::optional<DropRequest> takeDropRequest(const std::string& hooksDir)
{
    const std::string path = hooksDir + "/drop.request";
    std::error_code ec;
    if (hooksDir.empty() || !std::filesystem::exists(path, ec)) return std::nullopt;
    attn::Expected<std::string> text = attn::readFile(path, std::size_t(1) << 20);
    std::filesystem::remove(path, ec);
    if (!text) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object() || !j.contains("paths") || !j["paths"].is_array()) return std::nullopt;
    DropRequest r;
    for (const auto& p : j["paths"])
        if (p.is_string()) r.paths.push_back(p.get<std::string>());
    r.pos = ImVec2(j.value("x", -1.0f), j.value("y", -1.0f));
    return r;
}

} // namespace app
