// The test hooks of the window (--test-hooks DIR, see test_hooks.h): what the end-to-end tests read.
#include "test_hooks.h"

#include "panels/glyph_atlas.h"
#include "screenshot.h"
#include "state/model_state.h"

#include <imgui.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace app {
namespace {

// Temporary file + rename (readers never see half a file), without fsync: this runs every frame or every few.
void replaceFile(const std::string& path, const std::string& text)
{
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f << text;
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
}

void writeLayout(const AppState& state, const GlHeatmapRenderer& renderer, const std::string& dir, int captures)
{
    nlohmann::json j;
    const GlHeatmapRenderer::FillStats& fs = renderer.fillStats();
    j["heatmap_fills"] = {{"host", fs.hostUploads}, {"device", fs.deviceFills}, {"device_fallbacks", fs.deviceFallbacks}};
    for (const auto& [name, r] : state.rects) j["rects"][name] = {r.x0, r.y0, r.x1, r.y1};
    j["captures"] = captures;
    const GlyphAtlasStats glyphs = glyphAtlasStats();  // what the window's font can draw (panels/glyph_atlas.h)
    j["glyph_atlas"] = {{"glyphs", glyphs.glyphs}, {"added", glyphs.added}, {"unavailable", glyphs.unavailable},
                        {"rebuilds", glyphs.rebuilds}, {"last_build_ms", glyphs.lastBuildMs},
                        {"fonts", glyphs.fonts}};
    j["generation"] = state.doc.resultGeneration();
    j["revision"] = state.doc.revision();
    j["saved_revision"] = state.savedRevision;
    j["error"] = state.doc.lastError().message;
    j["load_error"] = state.loadError;
    j["restore_offer"] = state.showRestoreOffer;
    if (state.doc.present(MatrixId::X)) j["X00"] = state.doc.cell(MatrixId::X, 0, 0);  // what the test edits
    if (const ModelState& md = state.model; md.active) {  // the model mode: its text and the run shown
        nlohmann::json mj;
        mj["text_bytes"] = md.textA.size();
        mj["text_path"] = md.textPath;
        mj["text_open_error"] = md.textOpenError;  // File → Open text…'s refusal
        mj["has_run"] = md.hasRun();
        mj["tokens"] = md.hasRun() ? md.shownRun().tokens.size() : 0;
        mj["computing"] = md.computing();
        mj["error"] = md.error;
        mj["warnings"] = md.drun ? md.drun->warnings : std::vector<std::string>();
        if (md.qk.open) {  // "Why here?": the cell asked, and what the panel shows of it (core's numbers)
            const QkResults& r = md.qk.results;
            nlohmann::json q;
            q["layer"] = md.qk.cell.layer;
            q["head"] = md.qk.cell.head;
            q["query"] = md.qk.cell.query;
            q["key"] = md.qk.cell.key;
            q["current"] = r.of == md.qk.cell;  // the results are of the cell (and patch) asked
            q["computing"] = qkComputing(md);
            q["error"] = r.error;
            q["patch_error"] = r.patchError;
            if (r.cell) {
                q["score"] = r.cell->score;
                if (r.cell->softcap > 0) q["capped_score"] = r.cell->cappedScore;
                q["weight"] = r.cell->weight;
                const std::vector<int> k = attn::strongestQkComponents(r.cell->keyComponents, 1);
                const std::vector<int> qq = attn::strongestQkComponents(r.cell->queryComponents, 1);
                if (!k.empty()) q["top_key"] = r.cell->components[static_cast<std::size_t>(k[0])];
                if (!qq.empty()) q["top_query"] = r.cell->components[static_cast<std::size_t>(qq[0])];
            }
            q["row"] = md.qk.cell.row;
            if (r.row) {
                q["row_keys"] = r.row->scores.size();
                q["row_other"] = md.qk.rowOther >= 0 ? md.qk.rowOther : attn::runnerUpKey(*r.row, md.qk.cell.key);
            }
            if (r.patch && r.of.query < r.patch->original.rows() && r.of.key < r.patch->original.cols()) {
                q["patch_component"] = r.patch->component;
                q["patch_side"] = attn::toString(r.patch->side);
                q["patch_weight_original"] = r.patch->original(r.of.query, r.of.key);
                q["patch_weight_patched"] = r.patch->patched(r.of.query, r.of.key);
            }
            mj["qk"] = std::move(q);
        }
        j["model"] = std::move(mj);
    }
    const ImVec2 m = ImGui::GetIO().MousePos;
    j["mouse"] = {m.x, m.y};
    replaceFile(dir + "/layout.json", j.dump(1));
}

} // namespace

void writeTestHooks(const std::string& dir, const AppState& state, const GlHeatmapRenderer& renderer, int frame,
                    bool recomputed, int fbw, int fbh, int& captures)
{
    // frame.ppm: the picture of each frame that shows a new result, or when the test asks for one by
    // creating capture.request; layout.json: widget rectangles, counters and the mouse, every 3 frames too.
    // frame: the frames drawn so far, every frame (layout.json is every third). A test holds a key or button down
    // until a frame has polled it (ImGui 1.86 reads the key state once a frame: a press and release between two frames
    // is lost) and releases it before several have (a key held past io.KeyRepeatDelay repeats).
    replaceFile(dir + "/frame", std::to_string(frame));
    std::error_code ec;
    const std::string request = dir + "/capture.request";
    const bool requested = std::filesystem::exists(request, ec);
    if (recomputed || requested || frame == 2) {
        writeImage(dir + "/frame.ppm", captureFramebuffer(fbw, fbh));
        ++captures;
        std::filesystem::remove(request, ec);
    }
    if (recomputed || requested || frame <= 2 || frame % 3 == 0) writeLayout(state, renderer, dir, captures);
}

} // namespace app
