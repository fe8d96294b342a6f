// The chain: X (and X_kv) → W^Q, W^K, W^V → Q, K, V → per head: scores → mask → weights → output → concat →
// W^O → output, laid out left to right, every matrix titled with its name and shape. All numbers come from
// the document's last good attn::AttentionResult; display ranges from attn::displayRange (Document::ranges).
//
// Three ways to lay it out (view/chain_view.h): "fit" (the default: the current head's maps sized to the
// window, inputs and controls collapsing to strips when the map needs the room, and a heads grid), "full
// chain" (every head stacked, every editor open, cells of a fixed size), and focus (one map fills the
// window: double-click it; Esc goes back).
//
// [SECTION] Ranges, labels and specs for each kind of matrix
// [SECTION] Interaction: key padding, custom mask painting, hover, zoom, focus
// [SECTION] Tooltips and the formula
// [SECTION] One map of the chain
// [SECTION] Columns: inputs, Q K V, a head, the final output
// [SECTION] The fit plan and the sidebar strip
// [SECTION] drawChainPanel
#include "panels/matrix_editor.h"
#include "panels/model_panels.h"
#include "panels/panels.h"
#include "render/heads_grid.h"
#include "render/heatmap_view.h"
#include "view/heatmap_description.h"

#include <attnscope/device_maps.h>

#include <imgui.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace app {
namespace {

// -----------------------------------------------------------------------------------------------------
// [SECTION] Ranges, labels and specs for each kind of matrix
// -----------------------------------------------------------------------------------------------------

bool symmetricFor(const AppState& s, HeatmapKind k) { return attn::isDiverging(s.view.colormaps[static_cast<int>(k)]); }

// Display ranges are computed by core once per result, with the result (Document::ranges(): on the compute
// worker, not in a frame: at n=4096, h=8 that is 256M values per kind of map). They belong to the
// document itself, so no cache here can hold another document's ranges.
void updateRangeOptions(AppState& s)
{
    RangeOptions o;
    o.projection = symmetricFor(s, HeatmapKind::Projection);
    o.scores = symmetricFor(s, HeatmapKind::Scores);
    o.weights = symmetricFor(s, HeatmapKind::Weights);
    o.output = symmetricFor(s, HeatmapKind::Output);
    o.shared = s.view.sharedRange;
    s.doc.setRangeOptions(o);
}

// The texture generation of this document's shown result: a process-wide counter, renewed when the
// result changes, so that no two documents (two windows, tests) give the renderer one (key, generation).
std::uint64_t resultStamp(AppState& s)
{
    static std::atomic<std::uint64_t> next{1};
    ChainView& v = s.chain;
    if (v.stamp == 0 || v.stampedGeneration != s.doc.resultGeneration()) {
        v.stamp = next.fetch_add(1);
        v.stampedGeneration = s.doc.resultGeneration();
    }
    return v.stamp;
}

// The weights' colour scale for this result (the view's choice; Auto resolved by the number of keys).
attn::WeightsScale weightsScaleOf(const AppState& s)
{
    if (!s.doc.hasResult() || s.doc.result().heads.empty()) return attn::resolveWeightsScale(s.view.weightsScale, 0);
    // The keys from the stored shape, not the weights themselves: a result whose maps are still on the device has
    // the same scale as once they are here.
    const auto [rows, cols] = storedMapShape(s.doc.result());
    const bool col = s.doc.session().config.layout == attn::Layout::Column;
    return attn::resolveWeightsScale(s.view.weightsScale, static_cast<long>(col ? rows : cols));
}

bool rowMaxShown(const AppState& s) { return weightsScaleOf(s) == attn::WeightsScale::RowMax; }

// The texture generation of a map of `kind` of the shown result (a row-max view of the weights is other data).
std::uint64_t generationOf(AppState& s, HeatmapKind kind)
{
    const bool rowMax = kind == HeatmapKind::Weights && rowMaxShown(s);
    return resultStamp(s) * 8 + static_cast<std::uint64_t>(kind) + (rowMax ? 4 : 0);
}

// Head `head`'s weights as coloured: the result's, or each query over its largest (attn::rowMaxNormalized, made
// once per result and head, when shown).
const attn::Matrix& weightsShown(AppState& s, int head)
{
    const attn::Matrix& w = s.doc.result().heads[static_cast<std::size_t>(head)].weights;
    if (!rowMaxShown(s)) return w;
    ChainView& v = s.chain;
    const std::size_t H = s.doc.result().heads.size();
    if (v.rowMax.size() != H) v.rowMax.assign(H, {});
    if (v.rowMaxStamps.size() != H) v.rowMaxStamps.assign(H, 0);
    const std::size_t h = static_cast<std::size_t>(head);
    if (v.rowMaxStamps[h] != resultStamp(s)) {
        v.rowMax[h] = attn::rowMaxNormalized(w, s.doc.session().config.layout != attn::Layout::Column);
        v.rowMaxStamps[h] = resultStamp(s);
    }
    return v.rowMax[h];
}

// The range a map is drawn with under the view's range mode (auto: the result's; locked: the one it had
// when locked; fixed: weights 0…1, their whole domain), and for the weights under a log or row-max scale
// that scale's range (attn::weightsRange).
attn::DisplayRange rangeFor(AppState& s, HeatmapKind kind, const std::string& key, const attn::DisplayRange& autoRange)
{
    if (kind == HeatmapKind::Weights) {
        const attn::WeightsScale sc = weightsScaleOf(s);
        if (sc == attn::WeightsScale::Log || sc == attn::WeightsScale::RowMax) return attn::weightsRange(sc, autoRange);
    }
    const RangeMode mode = kind == HeatmapKind::Weights ? s.view.weightsRange : s.view.otherRanges;
    if (mode == RangeMode::Fixed && kind == HeatmapKind::Weights) return view::drawnRange(view::MapKind::Weights, autoRange, true);
    if (mode != RangeMode::Locked) return autoRange;
    auto [it, added] = s.chain.locked.try_emplace(key, autoRange);
    (void)added;
    return it->second;
}

bool isColumn(const AppState& s) { return s.doc.session().config.layout == attn::Layout::Column; }

const std::vector<std::string>* queryLabels(const AppState& s)
{
    const auto& t = s.doc.session().queryTokens;
    return t.empty() ? nullptr : &t;
}
const std::vector<std::string>* keyLabels(const AppState& s)
{
    const auto& t = s.doc.session().keyTokens;
    return t.empty() ? nullptr : &t;
}

// Full chain: about 200 px for the largest token count, between 3 and 25 px (25 fits "0.25" in the value
// font), times the zoom.
float fullCellSize(const AppState& s)
{
    const Sizes z = s.doc.sizes();
    const int n = std::max({z.T, z.S, 1});
    return std::clamp(200.0f / static_cast<float>(n), 3.0f, 25.0f) * s.view.zoom;
}

HeatmapSpec baseSpec(AppState& s, const std::string& key, const attn::Matrix& m, HeatmapKind kind, const attn::DisplayRange& range, float cell)
{
    HeatmapSpec spec;
    spec.key = key;
    spec.src.values = &m;
    spec.src.range = rangeFor(s, kind, key, range);
    spec.src.colormap = s.view.colormaps[static_cast<int>(kind)];
    spec.src.generation = generationOf(s, kind);
    spec.cellPx = cell;
    spec.showValues = s.view.showValues;
    return spec;
}

// The heatmap of a map described by view::describeMap (the description the exported figures use too):
// its numbers, masked cells, token labels, axis kinds (hover links queries and keys across the panels),
// head separators; axis titles on the query × key maps.
HeatmapSpec specFrom(AppState& s, const std::string& key, const view::MapDescription& d, HeatmapKind kind,
                     const attn::DisplayRange& range, float cell)
{
    assert(d.whole());  // the chain shows whole result matrices (per-head blocks are the figures')
    HeatmapSpec spec = baseSpec(s, key, *d.source, kind, range, cell);
    spec.src.mask = d.masked;
    const auto axis = [](view::AxisKind k) { return k == view::AxisKind::Query ? Axis::Query : k == view::AxisKind::Key ? Axis::Key : Axis::Feature; };
    const auto hover = [&](view::AxisKind k) { return k == view::AxisKind::Query ? s.hoverQuery : k == view::AxisKind::Key ? s.hoverKey : -1; };
    spec.rowAxis = axis(d.row.kind);
    spec.colAxis = axis(d.col.kind);
    spec.rowLabels = d.row.tokens;
    spec.colLabels = d.col.tokens;
    spec.highlightRow = hover(d.row.kind);
    spec.highlightCol = hover(d.col.kind);
    if (d.headBlock > 0) (d.row.kind == view::AxisKind::Feature ? spec.rowBlock : spec.colBlock) = d.headBlock;
    if (d.row.kind != view::AxisKind::Feature && d.col.kind != view::AxisKind::Feature) {
        spec.rowTitle = view::plainText(d.row.title);
        spec.colTitle = view::plainText(d.col.title);
        // Padded keys: their labels struck through.
        const auto& pad = s.doc.session().input.mask.keyPadding;
        (d.row.kind == view::AxisKind::Key ? spec.rowLabelMarked : spec.colLabelMarked) = pad;
    }
    return spec;
}

// "weights  7×7  [n × n_kv]": the map's name and shape, each axis named by its size.
std::string shapeTitle(const AppState& s, const view::MapDescription& d)
{
    const bool sideKeys = s.doc.session().config.mode != attn::Mode::Self;
    const auto sizeName = [&](const view::AxisDescription& a) {
        return a.kind == view::AxisKind::Query ? std::string("n") : a.kind == view::AxisKind::Key ? std::string(sideKeys ? "n_kv" : "n")
                                                                                                   : view::plainText(a.title);
    };
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s  %ld×%ld  [%s × %s]", view::plainText(d.name).c_str(), static_cast<long>(d.rows),
                  static_cast<long>(d.cols), sizeName(d.row).c_str(), sizeName(d.col).c_str());
    return buf;
}

// Marks a per-head heatmap as also held in device memory (a result of the CUDA backend), so the GL renderer
// can fill its texture from there instead of uploading the host copy. Not while the worker computes: it may
// be overwriting those device buffers with the next result (the host copy is the shown result's own).
void fromDevice(HeatmapSpec& spec, const attn::AttentionResult& r, attn::DeviceMatrix which, int head, bool computing)
{
    spec.src.deviceGeneration = computing ? 0 : r.deviceGeneration;
    spec.src.deviceMatrix = which;
    spec.src.deviceHead = head;
}

// (query, key) of a hovered cell of a query × key map.
std::pair<int, int> queryKeyOf(const AppState& s, const HeatmapHit& hit)
{
    return isColumn(s) ? std::pair{hit.col, hit.row} : std::pair{hit.row, hit.col};
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Interaction: key padding, custom mask painting, hover, zoom, focus
// -----------------------------------------------------------------------------------------------------

void toggleKeyPadding(AppState& s, int key)
{
    if (key < 0) return;
    s.doc.edit([&](attn::Session& ss) {
        auto& pad = ss.input.mask.keyPadding;
        const int S = ss.config.mode == attn::Mode::Self ? static_cast<int>(ss.input.X.rows())
                      : ss.config.mode == attn::Mode::Cross ? static_cast<int>(ss.input.Xkv.rows())
                                                            : static_cast<int>(ss.input.K.rows());
        if (static_cast<int>(pad.size()) != S) pad.assign(static_cast<std::size_t>(S), 0);
        if (key < S) pad[static_cast<std::size_t>(key)] ^= 1;
        if (std::none_of(pad.begin(), pad.end(), [](std::uint8_t v) { return v != 0; })) pad.clear();
    });
}

// Painting the custom mask on the weights (canonical T×S storage).
void paintCustomMask(AppState& s, const HeatmapHit& hit)
{
    const auto [q, k] = queryKeyOf(s, hit);
    if (!s.paintMask || q < 0) return;
    const Sizes z = s.doc.sizes();
    const int S = s.doc.session().config.mode == attn::Mode::Self ? z.T : z.S;
    const attn::MaskMatrix& cur = s.doc.session().input.mask.custom;
    if (hit.pressed) {
        const bool was = cur.rows() == z.T && cur.cols() == S && cur(q, k);
        s.paintValue = was ? 0 : 1;
        s.doc.beginGesture();
    }
    if (s.paintValue < 0 || !hit.held) return;
    const bool now = cur.rows() == z.T && cur.cols() == S && cur(q, k);
    if (now == (s.paintValue == 1)) return;
    s.doc.applyInGesture([&](attn::Session& ss) {
        auto& m = ss.input.mask.custom;
        if (m.rows() != z.T || m.cols() != S) m = attn::MaskMatrix::Zero(z.T, S);
        m(q, k) = static_cast<std::uint8_t>(s.paintValue);
    });
}

void noteHover(AppState& s, const HeatmapSpec& spec, const HeatmapHit& hit)
{
    if (hit.row < 0) return;
    if (spec.rowAxis == Axis::Query) s.nextHoverQuery = hit.row;
    if (spec.rowAxis == Axis::Key) s.nextHoverKey = hit.row;
    if (spec.colAxis == Axis::Query) s.nextHoverQuery = hit.col;
    if (spec.colAxis == Axis::Key) s.nextHoverKey = hit.col;
}

// Ctrl+wheel zooms the map under the mouse only (ChainView::mapZoom); the sidebar's zoom slider scales them
// all. Each wheel notch zooms by 1.25×, within 0.25…8 (from a few pixels per cell to very large cells).
void handleZoom(AppState& s, const std::string& key, const HeatmapHit& hit)
{
    if (hit.zoomWheel == 0) return;
    float& z = s.chain.mapZoom[key];
    if (z <= 0) z = 1.0f;
    z = std::clamp(z * std::pow(1.25f, hit.zoomWheel), 0.25f, 8.0f);
}

float mapZoomOf(const AppState& s, const std::string& key)
{
    const auto it = s.chain.mapZoom.find(key);
    return it == s.chain.mapZoom.end() || it->second <= 0 ? 1.0f : it->second;
}

// A map larger than its box at its cells (hundreds of tokens, or Q, K, V beside them) opens fitted: the whole map
// in its box, cells under a pixel max-pooled. The wheel zooms it about the pointer, 2× a notch, up to cells with
// their values (kMaxCell, or the layout's own cell when larger); ChainView::mapCell keeps the zoom per map.
//
// A thin map (n × d: Q, K, V and the head output at hundreds of tokens) fitted with square cells would be a
// hairline (1024 × 8 in a 400 px box: 3 px across). Its sides are fitted each on its own ("apart"): the long side
// to the box (pooled there), the short side's cells as wide as the box allows (up to kThinCellMax), so the strip
// gets the room the layout gave it. So is the head output beside the weights (MapStyle::rowsLevel): its rows are
// the weights' rows, fitted to their height. The wheel zooms the side with the smaller cells; the other side's
// cells stay as they are until the zoomed side's catch up with them.
struct FittedZoom {
    bool fitted = false;   // the map is larger than its box: it opens whole and the wheel zooms it
    bool whole = true;     // shown whole (not zoomed)
    float fit = 1;         // the whole map's smaller cell side (the side the wheel zooms)
    float fitW = 1, fitH = 1;  // the whole map's cell width and height (both = fit: square cells)
    float maxCell = kMaxCell;
    float cell = 1;        // the zoomed side's cell size shown
    float cellW() const { return std::max(fitW, cell); }
    float cellH() const { return std::max(fitH, cell); }
    bool apart() const { return fitW != fitH; }
    // A side whose cells are larger than the zoomed side's: its labels stay off (they would take the other side's
    // room, and say little: the hover names each cell).
    bool rowsStretched() const { return cellH() > cell; }
    bool colsStretched() const { return cellW() > cell; }
};

// A map at least this many times longer than wide whose short side a square fit leaves under kThinSide pixels is
// thin (FittedZoom). 4: the thin maps of the chain are n × d with n in the hundreds (ratio 16-128) or a model's
// 12-token head output, 12 × 64 (5.3); a near-square map (200 × 56) keeps square cells.
constexpr float kThinRatio = 4.0f;
constexpr float kThinSide = 48.0f;  // = the fit layout's smallest box (chain_layout.cpp, kMinView)
// A thin map's short side's cells at most this wide, or the map's own cell when larger (a model's head output beside
// weights of 30 px rows keeps its rows level with theirs): its values do not print along a pooled long side, and 8
// columns of 52 px (the full chain's 420 px box) read as a block, not a strip. 24 = a small map's readable cell.
constexpr float kThinCellMax = 24.0f;

struct MapStyle;
FittedZoom fittedZoom(const AppState& s, const std::string& key, const view::MapDescription& d, const MapStyle& style);

void zoomFitted(AppState& s, const std::string& key, const FittedZoom& fz, const HeatmapHit& hit)
{
    if (hit.zoomWheel == 0) return;
    const float cell = std::clamp(fz.cell * std::pow(2.0f, hit.zoomWheel), fz.fit, fz.maxCell);
    // About the pointer: heatmap_view keeps the cell under the mouse where it was when the cell size changes.
    s.chain.mapCell[key] = cell;
}

void arrow()
{
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::Dummy(ImVec2(1, 30));
    ImGui::TextDisabled("→");
    ImGui::EndGroup();
    ImGui::SameLine();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Tooltips and the formula
// -----------------------------------------------------------------------------------------------------

// Cells of head `head`'s map of `kind` for a tooltip: query q's keys [k0, k0 + n) (in query × key terms), from the
// host's maps, or, for a result whose maps are still on the device, read there (one small tile: what a hovered cell
// needs at once, rather than waiting for the whole maps). Empty when they are in neither place.
std::vector<float> mapCells(const AppState& s, int head, attn::MapKind kind, int q, int k0, int n)
{
    const attn::AttentionResult& res = s.doc.result();
    const attn::HeadResult& hr = res.heads[static_cast<std::size_t>(head)];
    const attn::Matrix& m = kind == attn::MapKind::Scores ? hr.scores : hr.weights;
    const bool col = isColumn(s);
    std::vector<float> out;
    if (m.size() > 0) {
        for (int j = k0; j < k0 + n; ++j) out.push_back(col ? m(j, q) : m(q, j));
        return out;
    }
    attn::Matrix tile;
    if (!res.mapsOnDevice || !attn::DeviceMaps(res).tile(kind, 0, head, attn::MapRect{q, k0, 1, n}, tile).ok()) return out;
    out.assign(tile.data(), tile.data() + tile.size());
    return out;
}

// Whether query q's key k is masked in head `head`: the host's mask, or the device's (a 1×1 tile) while the maps
// are there; nullopt when neither can say.
std::optional<bool> maskedCell(const AppState& s, int head, int q, int k)
{
    const attn::AttentionResult& res = s.doc.result();
    const attn::HeadResult& hr = res.heads[static_cast<std::size_t>(head)];
    if (hr.masked.size() > 0) return (isColumn(s) ? hr.masked(k, q) : hr.masked(q, k)) != 0;
    attn::MaskMatrix tile;
    if (!res.mapsOnDevice || !attn::DeviceMaps(res).maskTile(0, head, attn::MapRect{q, k, 1, 1}, tile).ok()) return std::nullopt;
    return tile(0, 0) != 0;
}

constexpr const char* kMapsComing = "maps coming from the GPU…";

void hoverWeightTooltip(const AppState& s, int head, int q, int k, bool showWeight)
{
    const attn::AttentionResult& res = s.doc.result();
    ImGui::BeginTooltip();
    // Indices are 0-based; a token's own label (a preset's "x3") is quoted apart from it, so that the two
    // numberings do not read as one.
    ImGui::Text("query '%s' (index %d)   key '%s' (index %d)", axisLabel(queryLabels(s), q).c_str(), q,
                axisLabel(keyLabels(s), k).c_str(), k);
    const attn::Score sc = s.doc.session().config.score;
    const std::vector<float> score = mapCells(s, head, attn::MapKind::Scores, q, k, 1);
    const std::string scoreText = score.empty() ? kMapsComing : attn::formatValue(score[0], 5);
    if (sc == attn::Score::Additive) ImGui::Text("score w_vᵀ·tanh(q·A_q + k·A_k) = %s", scoreText.c_str());
    else ImGui::Text("score = (q·k) × scale = %s", scoreText.c_str());
    ImGui::Text("scale = %s", attn::formatValue(res.scale, 5).c_str());
    const std::optional<bool> masked = maskedCell(s, head, q, k);
    ImGui::Text("masked: %s", !masked ? kMapsComing : *masked ? "yes (score replaced by the fill)" : "no");
    if (showWeight) {
        const std::vector<float> p = mapCells(s, head, attn::MapKind::Weights, q, k, 1);
        ImGui::Text("softmax weight p = %s", p.empty() ? kMapsComing : attn::formatValue(p[0], 5).c_str());
    }
    ImGui::EndTooltip();
}

void hoverOutputTooltip(const AppState& s, int head, int q, int f)
{
    const attn::HeadResult& hr = s.doc.result().heads[static_cast<std::size_t>(head)];
    const bool col = isColumn(s);
    const auto [mapRows, mapCols] = storedMapShape(s.doc.result());
    const int S = static_cast<int>(col ? mapRows : mapCols);
    ImGui::BeginTooltip();
    ImGui::Text("output[%d][%d] of query '%s' = Σ_j p_%dj · v_j[%d]", q, f, axisLabel(queryLabels(s), q).c_str(), q, f);
    // The terms, as core computed them (at most 12 listed: the rest are summarised).
    constexpr int kMaxTerms = 12;
    const std::vector<float> weights = mapCells(s, head, attn::MapKind::Weights, q, 0, std::min(S, kMaxTerms));
    if (weights.empty() && S > 0) ImGui::TextDisabled("  weights p: %s", kMapsComing);
    for (int j = 0; j < static_cast<int>(weights.size()); ++j) {
        const float p = weights[static_cast<std::size_t>(j)];
        const float v = col ? hr.V(f, j) : hr.V(j, f);
        ImGui::Text("  j=%d '%s':  p = %s  ×  v = %s", j, axisLabel(keyLabels(s), j).c_str(), attn::formatValue(p, 4).c_str(),
                    attn::formatValue(v, 4).c_str());
    }
    if (S > kMaxTerms) ImGui::Text("  … %d more keys", S - kMaxTerms);
    ImGui::Text("= %s", attn::formatValue(col ? hr.output(f, q) : hr.output(q, f), 5).c_str());
    ImGui::EndTooltip();
}

void valueTooltip(const AppState& s, const HeatmapSpec& spec, const HeatmapHit& hit, const char* name)
{
    const attn::Matrix& m = *spec.src.values;
    ImGui::BeginTooltip();
    const int tok = spec.rowAxis != Axis::Feature ? hit.row : hit.col;
    const bool isQuery = spec.rowAxis == Axis::Query || spec.colAxis == Axis::Query;
    ImGui::Text("%s[%d][%d] = %s", name, hit.row, hit.col, attn::formatValue(m(hit.row, hit.col), 6).c_str());
    ImGui::Text("%s '%s'", isQuery ? "query" : "key", axisLabel(isQuery ? queryLabels(s) : keyLabels(s), tok).c_str());
    ImGui::EndTooltip();
}

// The formula, written for the matrices as shown: in Column layout W^Q is shown h·d_k × d_model and X
// d_model × n, so Q = W^Q·X (no transpose), and the output W^O·[…].
std::string formulaText(const AppState& s)
{
    const attn::AttentionConfig& cfg = s.doc.session().config;
    const bool col = cfg.layout == attn::Layout::Column;
    std::string sc;
    switch (cfg.score) {
    case attn::Score::ScaledDot: sc = cfg.scale ? (col ? "KᵀQ·s" : "QKᵀ·s") : (col ? "KᵀQ/√d_k" : "QKᵀ/√d_k"); break;
    case attn::Score::Dot: sc = cfg.scale ? (col ? "KᵀQ·s" : "QKᵀ·s") : (col ? "KᵀQ" : "QKᵀ"); break;
    case attn::Score::Additive: sc = "w_vᵀ·tanh(q·A_q + k·A_k)"; break;
    }
    if (s.doc.session().input.mask.any()) sc += " + mask";
    std::string f = col ? "V·softmax(" + sc + ")" : "softmax(" + sc + ")·V";
    const int H = s.doc.session().config.heads;
    const int kv = s.doc.session().config.kvHeads;
    if (H > 1 && kv > 0 && kv < H)  // grouped-query attention
        f = "concat over " + std::to_string(H) + " heads (sharing " + std::to_string(kv) + " K/V head" + (kv > 1 ? "s" : "") +
            ") of " + f;
    else if (H > 1) f = "concat over " + std::to_string(H) + " heads of " + f;
    if (s.doc.present(MatrixId::Wo)) f = col ? "W^O·[" + f + "]" : "[" + f + "]·W^O";
    std::string prefix;
    switch (cfg.mode) {
    case attn::Mode::Self: prefix = col ? "Q = W^Q·X, K = W^K·X, V = W^V·X;   " : "Q = X·W^Q, K = X·W^K, V = X·W^V;   "; break;
    case attn::Mode::Cross: prefix = col ? "Q = W^Q·X, K = W^K·X_kv, V = W^V·X_kv;   " : "Q = X·W^Q, K = X_kv·W^K, V = X_kv·W^V;   "; break;
    case attn::Mode::Direct: prefix = "Q, K, V given;   "; break;
    }
    return prefix + "output = " + f;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] One map of the chain
// -----------------------------------------------------------------------------------------------------

// The maps of the chain, by key: "proj/Q", "proj/K", "proj/V", "scores/h", "weights/h", "headout/h",
// "concat", "output".
using view::MapKind;

struct MapRef {
    MapKind kind = MapKind::Weights;
    int head = 0;
};

std::string mapKey(MapRef m)
{
    switch (m.kind) {
    case MapKind::Q: return "proj/Q";
    case MapKind::K: return "proj/K";
    case MapKind::V: return "proj/V";
    case MapKind::Scores: return "scores/" + std::to_string(m.head);
    case MapKind::Weights: return "weights/" + std::to_string(m.head);
    case MapKind::HeadOut: return "headout/" + std::to_string(m.head);
    case MapKind::Concat: return "concat";
    case MapKind::Output: return "output";
    default: return "";  // inputs are editors, and per-head Q/K/V blocks are the figures', not maps of the chain
    }
}

std::optional<MapRef> mapFromKey(const std::string& key, int heads)
{
    const auto headOf = [&](std::size_t prefix) -> std::optional<int> {
        const int h = std::atoi(key.c_str() + prefix);
        return h >= 0 && h < heads ? std::optional<int>(h) : std::nullopt;
    };
    if (key == "proj/Q") return MapRef{MapKind::Q, 0};
    if (key == "proj/K") return MapRef{MapKind::K, 0};
    if (key == "proj/V") return MapRef{MapKind::V, 0};
    if (key == "concat") return MapRef{MapKind::Concat, 0};
    if (key == "output") return MapRef{MapKind::Output, 0};
    if (key.rfind("scores/", 0) == 0) if (auto h = headOf(7)) return MapRef{MapKind::Scores, *h};
    if (key.rfind("weights/", 0) == 0) if (auto h = headOf(8)) return MapRef{MapKind::Weights, *h};
    if (key.rfind("headout/", 0) == 0) if (auto h = headOf(8)) return MapRef{MapKind::HeadOut, *h};
    return std::nullopt;
}

struct MapStyle {
    float cell = 24;
    bool rowLabels = true;     // false: the map to the left shows the same rows
    bool colorbar = true;      // false: a map of the same range follows (full chain: heads sharing a range)
    bool reserveColorbar = false;  // no colorbar, but its width kept (heads line up)
    float maxSize = 420;       // larger maps scroll inside this area (its width, and its height unless maxHeight)
    float maxHeight = 0;       // > 0: a map fitted apart's area's height apart from its width (FittedZoom: Q, K,
                               // V a third of the panel's height); other maps keep a square area
    bool rowsLevel = false;    // fitted, its rows fill maxHeight (the head output: its rows are the weights' beside it)
    float minColBand = 0;      // cells at least this far below the map's top (level with the map to the left)
    float colorbarWidth = kColorbarWidth;  // fit: 0, packed to its tick labels
    bool thumb = false;        // a thumbnail: the short title ("scores"), the shape in its tooltip
};

FittedZoom fittedZoom(const AppState& s, const std::string& key, const view::MapDescription& d, const MapStyle& style)
{
    FittedZoom fz;
    const float rows = static_cast<float>(std::max<long>(1, static_cast<long>(d.rows)));
    const float cols = static_cast<float>(std::max<long>(1, static_cast<long>(d.cols)));
    // The label bands at readable cells (heatmap_view: at most 70 px of labels, an axis title, spacing).
    const float bands = 70.0f + 2.0f * ImGui::GetFontSize();
    const float box = style.maxSize;
    // Cells that fit their box (a map only its labels push past it scrolls a little, as before): readable cells.
    if (cols * style.cell <= box && rows * style.cell <= box) return fz;
    fz.fitted = true;
    const float labelled = ImGui::GetFontSize() * 0.8f;  // cells under this have no labels: the box is all cells
    const float square = std::min(box / cols, box / rows);
    // Fitted apart, the box may be taller than wide (MapStyle::maxHeight); any other map's is square, as before.
    // Cells held level with a neighbour's start minColBand below the box's top: that band is not theirs.
    const float boxH = (style.maxHeight > 0 ? style.maxHeight : box) - style.minColBand;
    const bool tall = rows >= cols;
    const float nLong = tall ? rows : cols, nShort = tall ? cols : rows;
    const float shortMax = std::max(kThinCellMax, style.cell);
    if (style.rowsLevel && style.maxHeight > 0) {
        fz.fitH = boxH / rows;
        fz.fitW = std::min(box / cols, std::max(shortMax, fz.fitH));
    } else if (nLong >= kThinRatio * nShort && nShort * square < kThinSide) {
        const float boxLong = tall ? boxH : box, boxShort = tall ? box : boxH;
        const float fitLong = boxLong / nLong;
        // Long-side cells with labels (a short map in a tall box) leave the labels' band off the short side.
        const float room = fitLong >= labelled ? boxShort - bands : boxShort;
        const float fitShort = std::clamp(room / nShort, fitLong, shortMax);
        fz.fitW = tall ? fitShort : fitLong;
        fz.fitH = tall ? fitLong : fitShort;
    } else {
        // Square cells; under 0.8 of the font no labels, so the whole box is cells.
        fz.fitW = fz.fitH = square >= labelled ? std::max(1.0f, std::min((box - bands) / cols, (box - bands) / rows)) : square;
    }
    fz.fit = std::min(fz.fitW, fz.fitH);
    fz.maxCell = std::max({kMaxCell, style.cell, fz.fit});
    // Whole, unless the session asks for the sidebar's zoom (a saved view of zoom 8 opens 8× in, as before).
    fz.cell = s.view.zoom == 1.0f ? fz.fit : std::clamp(style.cell, fz.fit, fz.maxCell);
    if (const auto it = s.chain.mapCell.find(key); it != s.chain.mapCell.end()) fz.cell = std::clamp(it->second, fz.fit, fz.maxCell);
    fz.whole = fz.cell <= fz.fit * 1.001f;
    return fz;
}

// What a map fitted apart shows, longest first: "1024 × 8, whole map, rows pooled 9.5:1" (rows max-pooled, k
// a pixel), "whole map, rows pooled 9.5:1", "rows pooled 9.5:1", "rows 9.5:1", "9.5:1"; zoomed in, "1024 × 8, zoomed
// in, …". Zoomed or not, the line is there: zooming moves no map below it.
std::vector<std::string> thinMapCaptions(const view::MapDescription& d, const FittedZoom& fz)
{
    char shape[64];
    std::snprintf(shape, sizeof shape, "%ld × %ld, ", static_cast<long>(d.rows), static_cast<long>(d.cols));
    const std::string state = fz.whole ? "whole map" : "zoomed in";
    const auto ratio = [](float cell) {
        // Two significant digits ("1.02:1": a 64-column map in 63 pixels is pooled, if barely).
        const float k = 1.0f / cell;
        char buf[32];
        std::snprintf(buf, sizeof buf, k < 1.995f ? "%.2f:1" : k < 9.95f ? "%.1f:1" : "%.0f:1", static_cast<double>(k));
        return std::string(buf);
    };
    const bool rows = fz.cellH() < 1.0f, cols = fz.cellW() < 1.0f;
    if (!rows && !cols) return {shape + state, state};
    // The side pooled (both: rows first, "rows pooled 6:1, columns 2:1").
    const std::string first = rows ? "rows" : "columns", k = ratio(rows ? fz.cellH() : fz.cellW());
    const std::string pooled = first + " pooled " + k + (rows && cols ? ", columns " + ratio(fz.cellW()) : "");
    return {shape + state + ", " + pooled, state + ", " + pooled, pooled, first + " " + k, k};
}

// The caption under a thin map: the longest of `captions` that fits in `width` pixels (the map's box or its title,
// whichever is wider: it must not widen the chain's row); its tooltip has the longest.
void drawThinCaption(const std::vector<std::string>& captions, float width)
{
    std::string shown;
    for (const std::string& c : captions)
        if (ImGui::CalcTextSize(c.c_str()).x <= width) {
            shown = c;
            break;
        }
    ImGui::TextDisabled("%s", shown.c_str());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s: the wheel zooms about the pointer; double-click goes back to the whole map", captions.front().c_str());
}

// A map's colorbar, right after its box (or the room of one, MapStyle::reserveColorbar) and level with its cells:
// drawn inside the map's group, before its title's width is known to the line, so that a title wider than the map
// (an n × d strip: "output  149×64  [n × d_v]") does not push the bar away from the map (it was 22-111 px off).
void drawMapColorbar(AppState& state, const MapStyle& style, MapRef m, const std::string& key, const std::string& rectName,
                     const HeatmapSpec& spec, const HeatmapHit& hit)
{
    if (!style.colorbar && !style.reserveColorbar) return;
    ImGui::SameLine();
    if (!style.colorbar) {
        ImGui::Dummy(ImVec2(kColorbarWidth, 1));
        return;
    }
    // A spacer in a group, not a moved cursor: the line keeps its top, so what follows the map on its line (or
    // under it) is placed as if the bar were not there.
    ImGui::BeginGroup();
    const float dy = hit.cellsMin.y - ImGui::GetCursorScreenPos().y;
    if (dy > ImGui::GetStyle().ItemSpacing.y) ImGui::Dummy(ImVec2(1.0f, dy - ImGui::GetStyle().ItemSpacing.y));
    const auto [barMin, barMax] =
        drawColorbar(("cb/" + key).c_str(), spec.src.colormap, spec.src.range,
                     std::min(std::max(style.maxSize, style.maxHeight), std::max(40.0f, hit.cellsMax.y - hit.cellsMin.y)),
                     style.colorbarWidth, m.kind == MapKind::Weights && rowMaxShown(state) ? "÷ row max" : nullptr);
    state.recordRect("colorbar/" + rectName, barMin, barMax);
    ImGui::EndGroup();
}

// Part `p` of map m of a result whose maps are still on the device, pooled there (attn::DeviceMaps::pooledStored),
// kept per map until the result or the part changes; null when the device cannot (busy with the next compute, or
// no longer holding the result).
const attn::Matrix* devicePooled(AppState& state, MapRef m, const PoolPart& p)
{
    const attn::AttentionResult& r = state.doc.result();
    ChainView::DevicePooled& k = state.chain.devicePooled[mapKey(m)];
    if (k.generation == state.doc.resultGeneration() && k.part == p && k.values.size() > 0) return &k.values;
    const attn::MapKind kind = m.kind == MapKind::Scores ? attn::MapKind::Scores : attn::MapKind::Weights;
    attn::Matrix out;
    if (!attn::DeviceMaps(r).pooledStored(kind, 0, m.head, attn::MapRect{p.r0, p.c0, p.rows, p.cols}, p.outRows, p.outCols, out).ok())
        return nullptr;
    k = ChainView::DevicePooled{state.doc.resultGeneration(), p, std::move(out)};
    return &k.values;
}

// Draws one map of the chain at the cursor: its title, the cells, its colorbar; handles hover, tooltips,
// painting, key padding and the double-click that puts it in focus. Returns the height of its column
// label band (the cells' offset below the title); `cellsShown`, when given, gets the height of its cells on screen.
float drawMap(AppState& state, MapRef m, const MapStyle& style, float* cellsShown = nullptr)
{
    const attn::AttentionResult& r = state.doc.result();
    const ResultRanges& rg = state.doc.ranges();
    const bool col = isColumn(state);
    const std::string key = mapKey(m);
    const std::size_t h = static_cast<std::size_t>(m.head);
    const attn::Expected<view::MapDescription> described = view::describeMap(state.doc.session(), r, m.kind, m.head);
    if (!described) {
        ImGui::TextDisabled("%s", described.status().message.c_str());
        return 0;
    }
    const view::MapDescription& d = *described;
    const std::string name = view::plainText(d.name);
    // The result is shown before its maps are back from the device (Document::mapsArriving): the map is drawn from
    // the device (pooled parts made there, full-size cells through the interop) at the shape describeMap gives it.
    // Not when they were lost there, nor as the row-max view, which is made on the host from the maps.
    const bool onDevice = (m.kind == MapKind::Scores || m.kind == MapKind::Weights) && d.source->size() == 0 && r.mapsOnDevice;
    if (onDevice && (state.doc.mapsLost() || (m.kind == MapKind::Weights && rowMaxShown(state)))) {
        const auto [rows, cols] = storedMapShape(r);
        ImGui::TextDisabled("%s  %ld×%ld: %s", name.c_str(), static_cast<long>(rows), static_cast<long>(cols),
                            state.doc.mapsLost() ? "its maps were lost on the GPU (compute again)" : kMapsComing);
        state.recordRect("mapscoming/" + mapKey(m), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        return 0;
    }
    const std::string t = shapeTitle(state, d);
    HeatmapKind kind = HeatmapKind::Output;
    const attn::DisplayRange* range = &rg.output;
    switch (m.kind) {
    case MapKind::Q: kind = HeatmapKind::Projection, range = &rg.q; break;
    case MapKind::K: kind = HeatmapKind::Projection, range = &rg.k; break;
    case MapKind::V: kind = HeatmapKind::Projection, range = &rg.v; break;
    case MapKind::Scores: kind = HeatmapKind::Scores, range = &rg.scores[h]; break;
    case MapKind::Weights: kind = HeatmapKind::Weights, range = &rg.weights[h]; break;
    case MapKind::HeadOut: range = &rg.headOut[h]; break;
    case MapKind::Concat: range = &rg.concat; break;
    default: break;
    }
    HeatmapSpec spec = specFrom(state, key, d, kind, *range, style.cell);
    if (m.kind == MapKind::Scores) fromDevice(spec, r, attn::DeviceMatrix::Scores, m.head, state.doc.computing());
    if (m.kind == MapKind::Weights) fromDevice(spec, r, attn::DeviceMatrix::Weights, m.head, state.doc.computing());
    if (m.kind == MapKind::Weights && rowMaxShown(state)) {
        spec.src.values = &weightsShown(state, m.head);  // hover and tooltips still read the weights themselves
        spec.src.deviceGeneration = 0;
    }
    if (m.kind == MapKind::HeadOut) fromDevice(spec, r, attn::DeviceMatrix::Output, m.head, state.doc.computing());
    if (onDevice) spec.src.shapeRows = static_cast<int>(d.rows), spec.src.shapeCols = static_cast<int>(d.cols);
    if (!style.rowLabels) spec.rowLabelsShown = false;
    const FittedZoom fz = fittedZoom(state, key, d, style);
    spec.maxWidth = style.maxSize;
    spec.maxHeight = fz.apart() && style.maxHeight > 0 ? style.maxHeight : style.maxSize;
    if (fz.fitted) {
        spec.wheelZooms = true;
        spec.cellPx = fz.cellW();
        spec.cellPxY = fz.cellH();
        // The short side's labels would take the long side's room (and say little: the hover names each cell).
        if (fz.rowsStretched()) spec.rowLabelsShown = false;
        if (fz.colsStretched()) spec.colLabelsShown = false;
    } else if (const float local = mapZoomOf(state, key); local != 1.0f) {
        // Zoomed on its own: the map keeps its unzoomed footprint and its cells scroll inside it, so that
        // the maps around it stay where they were.
        const float bands = 80.0f;  // room for the label bands (at most 70 px, heatmap_view) and spacing
        spec.maxWidth = std::min(style.maxSize, float(spec.src.cols()) * style.cell + bands);
        spec.maxHeight = std::min(style.maxSize, float(spec.src.rows()) * style.cell + bands);
        spec.cellPx = style.cell * local;
    }
    spec.minColBand = style.minColBand;

    ImGui::BeginGroup();
    if (style.thumb) {
        const std::string shortName = t.substr(0, t.find("  "));
        ImGui::TextUnformatted(shortName.c_str());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s (double-click the map to see it whole)", t.c_str());
    } else {
        ImGui::TextUnformatted(t.c_str());
    }
    const bool projection = m.kind == MapKind::Q || m.kind == MapKind::K || m.kind == MapKind::V;
    const std::string rectName = projection ? name : key;
    // A whole map narrower than its title and caption (an n × d map, a thin strip) keeps the caption in its
    // title's tooltip: the caption must not widen the chain's row past the window.
    const char* wholeText = style.thumb ? "whole" : "whole map";
    const float titleW = ImGui::GetItemRectSize().x;
    const bool captionFits = !fz.whole || (!fz.apart() && static_cast<float>(d.cols) * fz.cell + ImGui::GetStyle().ScrollbarSize >=
                                                           titleW + ImGui::CalcTextSize(wholeText).x + 8.0f);
    // A thin map's caption goes under it (below).
    const std::vector<std::string> thinCaptions = fz.apart() ? thinMapCaptions(d, fz) : std::vector<std::string>();
    if (fz.fitted && !captionFits && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s: %s (the wheel zooms about the pointer)", t.c_str(), thinCaptions.empty() ? "whole map" : thinCaptions.front().c_str());
    if (fz.fitted && captionFits) {
        // What a fitted map shows: the whole map, or which part of it (and the way back).
        ImGui::SameLine();
        if (fz.whole) {
            // A thumbnail's short title keeps its column narrow: "whole" there, the shape in its tooltip.
            ImGui::TextDisabled("%s", wholeText);
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("%ld × %ld, whole map: the wheel zooms about the pointer; double-click goes back to the whole map",
                                  static_cast<long>(d.rows), static_cast<long>(d.cols));
        } else {
            ImGui::PushID(key.c_str());  // one "fit" button per map, apart from the toolbar's "fit" layout
            if (ImGui::SmallButton("fit")) state.chain.mapCell[key] = fz.fit;
            ImGui::PopID();
            state.recordRect("fit/" + rectName, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("Back to the whole map (or double-click it)");
        }
    }
    const float top = ImGui::GetCursorScreenPos().y;
    // A fitted map's pooled picture comes with the result from the worker; what this frame pooled is asked of
    // the next results (state/pooled_parts.h).
    // Maps still on the device: a part not pooled on the worker is pooled there now (a kernel; only the pooled cells
    // cross the bus), or left blank while the device is busy.
    spec.prepooled = [&state, source = spec.src.values, onDevice, &m](const PoolPart& p) -> const attn::Matrix* {
        if (const attn::Matrix* ready = state.doc.prepooled(source, p)) return ready;
        return onDevice ? devicePooled(state, m, p) : nullptr;
    };
    const HeatmapHit hit = drawHeatmap(spec);
    if (!hit.pooled.empty()) state.doc.wantPooled(spec.src.values, hit.pooled);
    state.recordRect("heatmap/" + rectName, hit.cellsMin, hit.cellsMax);
    if (cellsShown) *cellsShown = std::min(hit.cellsMax.y, hit.viewMax.y) - hit.cellsMin.y;
    if (fz.fitted) state.recordRect("mapbox/" + rectName, hit.viewMin, hit.viewMax);
    drawMapColorbar(state, style, m, key, rectName, spec, hit);
    if (!thinCaptions.empty()) drawThinCaption(thinCaptions, std::max(titleW, hit.viewMax.x - hit.viewMin.x));
    noteHover(state, spec, hit);
    if (fz.fitted) zoomFitted(state, key, fz, hit);
    else handleZoom(state, key, hit);
    if (hit.row >= 0) {
        const float cw = (hit.cellsMax.x - hit.cellsMin.x) / static_cast<float>(spec.src.cols());
        const float ch = (hit.cellsMax.y - hit.cellsMin.y) / static_cast<float>(spec.src.rows());
        const ImVec2 c0(hit.cellsMin.x + cw * static_cast<float>(hit.col), hit.cellsMin.y + ch * static_cast<float>(hit.row));
        state.recordRect("hover/" + key + "/" + std::to_string(hit.row) + "/" + std::to_string(hit.col), c0, ImVec2(c0.x + cw, c0.y + ch));
        switch (m.kind) {
        case MapKind::Scores:
        case MapKind::Weights: {
            const auto [q, k] = queryKeyOf(state, hit);
            hoverWeightTooltip(state, m.head, q, k, m.kind == MapKind::Weights);
            break;
        }
        case MapKind::HeadOut: hoverOutputTooltip(state, m.head, col ? hit.col : hit.row, col ? hit.row : hit.col); break;
        default: valueTooltip(state, spec, hit, name.c_str()); break;
        }
        // Double-click: a zoomed fitted map goes back to whole; any other map alone fills the window (Esc goes
        // back); again: back.
        if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
            if (fz.fitted && !fz.whole) state.chain.mapCell[key] = fz.fit;
            else state.chain.focus = state.chain.focus == key ? "" : key;
        }
    }
    // A decoder layer opened from the model: right-click a score or weight → "Why here?" (qk_panel.cpp).
    if ((m.kind == MapKind::Scores || m.kind == MapKind::Weights) && hit.row >= 0 && hit.col >= 0 &&
        state.model.isDecoder() && state.model.openLayer >= 0 && !state.model.showView &&
        ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
        const auto [q, k] = queryKeyOf(state, hit);
        offerQkMenu(state, state.model.openLayer, m.head, q, k, false);
    }
    if (m.kind == MapKind::Weights) paintCustomMask(state, hit);
    if (m.kind == MapKind::Scores || m.kind == MapKind::Weights) {
        if (hit.colLabelClicked >= 0 && !col) toggleKeyPadding(state, hit.colLabelClicked);
        if (hit.rowLabelClicked >= 0 && col) toggleKeyPadding(state, hit.rowLabelClicked);
    }
    ImGui::EndGroup();
    return hit.cellsMin.y - top;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Columns: inputs, Q K V, a head, the final output
// -----------------------------------------------------------------------------------------------------

const ImVec2 kEditorMax(260, 230);  // wider or taller inputs scroll inside this box

std::vector<MatrixId> inputIds(const AppState& state)
{
    const attn::Session& ss = state.doc.session();
    std::vector<MatrixId> ids;
    if (ss.config.mode == attn::Mode::Direct) {
        ids = {MatrixId::Q, MatrixId::K, MatrixId::V};
    } else {
        ids.push_back(MatrixId::X);
        if (ss.config.mode == attn::Mode::Cross) ids.push_back(MatrixId::Xkv);
        for (MatrixId id : {MatrixId::Wq, MatrixId::Wk, MatrixId::Wv}) ids.push_back(id);
        for (MatrixId id : {MatrixId::Bq, MatrixId::Bk, MatrixId::Bv})
            if (state.doc.present(id)) ids.push_back(id);
    }
    if (ss.config.score == attn::Score::Additive)
        for (MatrixId id : {MatrixId::Aq, MatrixId::Ak, MatrixId::Wv_additive}) ids.push_back(id);
    return ids;
}

// Full chain: every editor of the inputs (W^O is drawn with the final output).
void drawInputEditors(AppState& state)
{
    ImGui::BeginGroup();
    for (MatrixId id : inputIds(state)) drawMatrixEditor(state, id, kEditorMax);
    ImGui::EndGroup();
}

// An editor opened from the strip: at most 30 % of the chain's width (at least 160 px), so that on a narrow window
// it scrolls inside its box and the weights keep their room (issue 21: at 900×600 with the sidebar and X open they
// got 12-pixel cells and the output went off the right edge). The fit plan uses the same width.
ImVec2 stripEditorMax()
{
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    // Of the width beside the whole sidebar, whether it shows or not: beside the strip, at 900 px, the wider
    // editor still pushed the final column off the edge.
    const float chain = vp->WorkSize.x - kControlsWidth - 2 * ImGui::GetStyle().WindowPadding.x;
    return ImVec2(std::clamp(0.3f * chain, 160.0f, kEditorMax.x), kEditorMax.y);
}

// Fit: the inputs (W^O included) either open as editors, or collapsed to a strip of their names, each a
// button that opens (or closes) that one editor beside the strip.
void drawInputsFit(AppState& state, bool collapsed)
{
    std::vector<MatrixId> ids = inputIds(state);
    for (MatrixId id : {MatrixId::Wo, MatrixId::Bo})
        if (state.doc.present(id)) ids.push_back(id);
    ImGui::BeginGroup();
    if (!collapsed) {
        for (MatrixId id : ids) drawMatrixEditor(state, id, kEditorMax);
        ImGui::EndGroup();
        return;
    }
    ImGui::BeginGroup();
    for (MatrixId id : ids) {
        const char* name = matrixName(id);
        bool& open = state.chain.inputOpen[static_cast<int>(id)];
        // The click toggles `open` between the push and the pop: pop what was pushed.
        const bool highlighted = open;
        if (highlighted) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
        if (ImGui::Button(name, ImVec2(kInputsStripWidth, 0))) {
            open = !open;
            // The latest request wins: an editor opened on a window too narrow for it beside a sidebar the user
            // brought back lets the fit layout fold the sidebar again (» returns it), instead of squeezing the
            // weights into a scrolling box of 12-pixel cells (900×600, issue 21).
            if (open && state.chain.sidebar == Collapse::Shown) state.chain.sidebar = Collapse::Auto;
        }
        if (highlighted) ImGui::PopStyleColor();
        state.recordRect(std::string("strip/") + name, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: click to %s its editor", matrixTitle(state, id).c_str(), open ? "close" : "open");
    }
    ImGui::EndGroup();
    bool any = false;
    for (MatrixId id : ids) any = any || state.chain.inputOpen[static_cast<int>(id)];
    if (any) {
        ImGui::SameLine();
        ImGui::BeginGroup();
        for (MatrixId id : ids)
            if (state.chain.inputOpen[static_cast<int>(id)]) drawMatrixEditor(state, id, stripEditorMax());
        ImGui::EndGroup();
    }
    ImGui::EndGroup();
}

// The open inputs column's width, from the matrices (not measured from a previous frame, so that the plan
// never depends on how many frames have been drawn): each editor is its title, or its cells (42 px each,
// panels/matrix_editor.cpp, plus the row index band) up to kEditorMax and a scrollbar.
float inputsColumnWidth(const AppState& state, ImVec2 editorMax = kEditorMax)
{
    std::vector<MatrixId> ids = inputIds(state);
    for (MatrixId id : {MatrixId::Wo, MatrixId::Bo})
        if (state.doc.present(id)) ids.push_back(id);
    float w = 0;
    for (MatrixId id : ids) {
        const int cols = isColumn(state) ? state.doc.rows(id) : state.doc.cols(id);  // as shown
        const float cells = std::min(editorMax.x, 40.0f + 42.0f * static_cast<float>(cols)) + ImGui::GetStyle().ScrollbarSize;
        w = std::max({w, cells, ImGui::CalcTextSize(matrixTitle(state, id).c_str()).x});
    }
    return w;
}

void drawQkvColumn(AppState& state, const MapStyle& style)
{
    ImGui::BeginGroup();
    for (MapKind k : {MapKind::Q, MapKind::K, MapKind::V}) drawMap(state, {k, 0}, style);
    ImGui::EndGroup();
}

// Concat (several heads or W^O) and the final output; in the full chain W^O's editor between them.
void drawFinalColumn(AppState& state, const MapStyle& style, bool editors)
{
    ImGui::BeginGroup();
    drawMap(state, {MapKind::Concat, 0}, style);
    if (editors && state.doc.present(MatrixId::Wo)) {
        drawMatrixEditor(state, MatrixId::Wo, kEditorMax);
        if (state.doc.present(MatrixId::Bo)) drawMatrixEditor(state, MatrixId::Bo, kEditorMax);
    }
    drawMap(state, {MapKind::Output, 0}, style);
    ImGui::EndGroup();
}

bool hasFinalColumn(const AppState& state) { return state.doc.result().heads.size() > 1 || state.doc.present(MatrixId::Wo); }

int currentHead(const AppState& state)
{
    const int H = static_cast<int>(state.doc.result().heads.size());
    return std::clamp(state.view.head, 0, std::max(0, H - 1));
}

// Every head's weights, one shared range; a click makes that head current. The grid takes at most `width` pixels
// across (its labels and colorbar included): the room under the current head's maps, left of the final column
// (issue 36: at 1280x800 SmolLM2's nine 96 px thumbnails pushed concat and the final output off the window's edge).
// Cells are at most `maxCell` (the plan's grid cell).
void drawHeadsGridRow(AppState& state, float width, float maxCell)
{
    const attn::AttentionResult& r = state.doc.result();
    const ResultRanges& rg = state.doc.ranges();
    const int H = static_cast<int>(r.heads.size());
    HeadsGridSpec g;
    g.id = "heads";
    g.current = currentHead(state);
    g.colormap = state.view.colormaps[static_cast<int>(HeatmapKind::Weights)];
    std::vector<attn::DisplayRange> ranges;
    for (int h = 0; h < H; ++h) ranges.push_back(rg.weights[static_cast<std::size_t>(h)]);
    const attn::DisplayRange shared = attn::unionRange(ranges, symmetricFor(state, HeatmapKind::Weights));
    g.range = rangeFor(state, HeatmapKind::Weights, "heads", shared);
    // Each head's share of the width, less the spacing after it and the grid's colorbar (kColorbarWidth, wider for
    // its longest tick label, "0.0001" on the log scale, and the spacing before it).
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float colorbar = spacing + std::max(kColorbarWidth, 20.0f + ImGui::CalcTextSize("0.0001").x);
    const float share = std::floor((width - colorbar) / static_cast<float>(std::max(1, H)) - spacing);
    // A label wider than a thumbnail would widen it: then the heads are numbered only ("4", not "head 4"), and
    // the KV groups too ("KV 1" → "1"), the line above the grid saying what they are.
    const bool shortLabels = ImGui::CalcTextSize(("head " + std::to_string(H - 1)).c_str()).x > share;
    const bool shortGroups = ImGui::CalcTextSize("KV 00").x > share;
    // Thumbnails stay thumbnails: a head with more rows or columns than `side` pixels (at most 96, at least 8) is
    // pooled to that many cells (each the largest weight of its block), instead of a scrolling map of its own.
    const int side = static_cast<int>(std::clamp(share, 8.0f, 96.0f));
    // The stored shape, so that a result whose maps are still on the device is laid out as it will be.
    const auto [mapRows, mapCols] = storedMapShape(r);
    const Eigen::Index n = H > 0 ? std::max(mapRows, mapCols) : 0;
    const Eigen::Index cols = H > 0 ? std::max<Eigen::Index>(1, mapCols) : 1;
    const float cell = std::clamp(std::floor(share / static_cast<float>(cols)), 3.0f, std::max(3.0f, maxCell));
    g.cellPx = cell;
    const bool pooled = float(n) * cell > float(side);
    const attn::AttentionConfig& cfg = state.doc.session().config;
    // Maps still on the device (Document::mapsArriving): pooled thumbnails come from there (the worker's parts, or
    // the device's pool kernel now: a thumbnail's cells cross the bus, not the map); whole small maps wait for them.
    const bool onDevice = H > 0 && r.heads[0].weights.size() == 0 && r.mapsOnDevice;
    if (onDevice && !pooled) {
        ImGui::TextDisabled("all heads' weights: %s", state.doc.mapsLost() ? "lost on the GPU (compute again)" : kMapsComing);
        state.recordRect("mapscoming/headsgrid", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        return;
    }
    const auto gridPart = [side](Eigen::Index rows, Eigen::Index cols) {
        return PoolPart{0, 0, int(rows), int(cols), int(std::min<Eigen::Index>(rows, side)), int(std::min<Eigen::Index>(cols, side))};
    };
    // The part of head h's weights (as coloured) a thumbnail shows.
    const auto partOf = [&](const attn::Matrix& w) { return onDevice ? gridPart(mapRows, mapCols) : gridPart(w.rows(), w.cols()); };
    ChainView& v = state.chain;
    if (pooled && (v.gridPooledStamp != generationOf(state, HeatmapKind::Weights) || v.gridPooledSide != side ||
                   v.gridPooled.size() != static_cast<std::size_t>(H))) {
        v.gridPooled.clear();
        for (int h = 0; h < H; ++h) {
            const attn::Matrix& w = weightsShown(state, h);
            const PoolPart part = partOf(w);
            // Pooled with the result on the worker when an earlier frame asked for it (state/pooled_parts.h).
            const attn::Matrix* ready = state.doc.prepooled(&w, part);
            attn::Matrix thumb;
            if (ready) thumb = *ready;
            else if (!onDevice) thumb = attn::poolMax(w, part.outRows, part.outCols);
            else if (!rowMaxShown(state))  // the row-max view is made on the host from the maps: it waits for them
                (void)attn::DeviceMaps(r).pooledStored(attn::MapKind::Weights, 0, h, attn::MapRect{0, 0, part.rows, part.cols},
                                                       part.outRows, part.outCols, thumb);
            v.gridPooled.push_back(std::move(thumb));
        }
        v.gridPooledStamp = generationOf(state, HeatmapKind::Weights);
        v.gridPooledSide = side;
    }
    if (pooled) {
        g.cellPx = 1.0f;
        for (int h = 0; h < H; ++h) {
            const attn::Matrix& w = weightsShown(state, h);
            state.doc.wantPooled(&w, partOf(w));
        }
    }
    for (int h = 0; h < H; ++h) {
        const attn::HeadResult& hr = r.heads[static_cast<std::size_t>(h)];
        HeadsGridItem it;
        it.key = "grid/weights/" + std::to_string(h);
        it.label = (shortLabels ? "" : "head ") + std::to_string(h);  // 0-based, as everywhere (the model grid, --head, figures)
        it.values = pooled ? &v.gridPooled[static_cast<std::size_t>(h)] : &weightsShown(state, h);
        it.mask = pooled ? nullptr : &hr.masked;  // masked weights are 0: the pooled maxima show them as such
        it.generation = generationOf(state, HeatmapKind::Weights);
        // Grouped-query attention: bracket the query heads that share a KV head (0-based, as the heads).
        if (cfg.kvHeads > 0 && cfg.kvHeads < H && H % cfg.kvHeads == 0)
            it.group = (shortGroups ? "" : "KV ") + std::to_string(h / (H / cfg.kvHeads));
        g.items.push_back(std::move(it));
    }
    const char* note = shortLabels ? "heads 0–%d, all their weights (click one to show it above)"
                                   : "all heads' weights (one colour range; click a head to show it above)";
    ImGui::TextDisabled(note, H - 1);
    ImGui::BeginGroup();
    // The grid's colorbar is drawn here, in a group of its own: its "log" then sits under the bar, not on a line of
    // its own under the whole grid (a line the fit plan would have to keep free).
    g.colorbar = false;
    const HeadsGridHit hit = drawHeadsGrid(g);
    float tallest = 40.0f;  // drawHeadsGrid's colorbar height: its tallest thumbnail, at least 40 px
    for (const auto& [a, b] : hit.rects) tallest = std::max(tallest, b.y - a.y);
    if (H > 0) {
        ImGui::SameLine();
        ImGui::BeginGroup();
        drawColorbar("heads/cb", g.colormap, g.range, tallest);
        ImGui::EndGroup();
    }
    ImGui::EndGroup();
    state.recordRect("headsgrid/all", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());  // its colorbar included
    for (std::size_t i = 0; i < hit.rects.size(); ++i)
        state.recordRect("headsgrid/" + std::to_string(i), hit.rects[i].first, hit.rects[i].second);
    if (hit.clicked >= 0) state.view.head = hit.clicked;
    if (hit.hovered >= 0 && hit.row >= 0 && pooled) {
        ImGui::SetTooltip("head %d: %lld tokens shown in %d px, each cell the largest weight of its block\nclick: show this head above",
                          hit.hovered, static_cast<long long>(n), side);
    } else if (hit.hovered >= 0 && hit.row >= 0 && !onDevice) {
        const auto [q, k] = isColumn(state) ? std::pair{hit.col, hit.row} : std::pair{hit.row, hit.col};
        ImGui::BeginTooltip();
        ImGui::Text("head %d: query '%s', key '%s': weight %s", hit.hovered, axisLabel(queryLabels(state), q).c_str(),
                    axisLabel(keyLabels(state), k).c_str(),
                    attn::formatValue(r.heads[static_cast<std::size_t>(hit.hovered)].weights(hit.row, hit.col), 5).c_str());
        ImGui::EndTooltip();
    }
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] The fit plan and the sidebar strip
// -----------------------------------------------------------------------------------------------------

float labelBand(const std::vector<std::string>* labels, int n)
{
    float w = 0;
    for (int i = 0; i < std::min(n, 64); ++i) w = std::max(w, ImGui::CalcTextSize(axisLabel(labels, i).c_str()).x);
    // + the axis title's line and the 2 px heatmap_view leaves after it: the plan's label band (this + 6) is then the
    // band drawn; 2 px short, a weights map sized to its box overflowed it and scrolled, its colorbar 18 px away.
    return std::min(w, 70.0f) + ImGui::GetFontSize() + 2.0f;
}

} // namespace

void planChainLayout(AppState& state)
{
    ChainView& v = state.chain;
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    v.planned = false;
    // The model view covers the chain: the chain's plan must not collapse the sidebar under it.
    const bool modelView = state.model.active && state.model.showView;
    if (!state.view.fit || modelView || !state.doc.hasResult() || state.doc.result().heads.empty()) {
        v.plan = FitPlan{};
        // The model view has its own controls: the sidebar has a few lines to say there, and folds to its strip
        // unless the user brought it back (» sets Shown) or the run has warnings to show (a text cut at the context).
        const bool warnings = state.model.drun && !state.model.drun->warnings.empty();
        v.plan.sidebarCollapsed = v.sidebar == Collapse::Hidden || (modelView && v.sidebar == Collapse::Auto && !warnings);
        return;
    }
    const attn::AttentionResult& r = state.doc.result();
    const attn::HeadResult& hr = r.heads[static_cast<std::size_t>(currentHead(state))];
    FitInput in;
    in.width = vp->Size.x;
    in.height = vp->Size.y;
    const float pad = 2 * ImGui::GetStyle().WindowPadding.x;
    in.chainWidth = vp->WorkSize.x - kControlsWidth - pad;
    // Title lines: the toolbar and the formula (and a possible error line).
    in.chainHeight = vp->WorkSize.y - kStatusBarHeight - 2 * ImGui::GetStyle().WindowPadding.y - 3 * ImGui::GetFrameHeightWithSpacing();
    in.sidebarWidth = kControlsWidth - kStripWidth;
    in.inputsWidth = inputsColumnWidth(state);
    bool anyOpen = false;
    for (const auto& [id, open] : v.inputOpen) anyOpen = anyOpen || open;
    in.stripWidth = kInputsStripWidth + (anyOpen ? inputsColumnWidth(state, stripEditorMax()) : 0.0f);
    // The stored shape: a result whose maps are still on the device is planned as it will be drawn.
    const auto [mapRows, mapCols] = storedMapShape(r);
    in.wRows = static_cast<int>(mapRows);
    in.wCols = static_cast<int>(mapCols);
    in.wVisible = static_cast<int>(mapRows * mapCols);
    if (hr.weights.size() > 0 && hr.masked.size() == hr.weights.size()) {
        in.wVisible -= static_cast<int>(hr.masked.cast<int>().sum());
        v.knownVisible = in.wVisible, v.knownRows = in.wRows, v.knownCols = in.wCols;
    } else if (hr.weights.size() == 0 && v.knownRows == in.wRows && v.knownCols == in.wCols && v.knownVisible >= 0) {
        in.wVisible = v.knownVisible;  // maps still on the device: its masked cells are not here to count
    }
    in.oRows = static_cast<int>(hr.output.rows());
    in.oCols = static_cast<int>(hr.output.cols());
    in.qkvRows = static_cast<int>(r.Q.rows() + r.K.rows() + r.V.rows());
    in.qkvCols = static_cast<int>(std::max({r.Q.cols(), r.K.cols(), r.V.cols()}));
    if (hasFinalColumn(state)) {
        in.finalRows = static_cast<int>(r.output.rows());
        in.finalCols = static_cast<int>(std::max(r.output.cols(), r.concat.cols()));
    }
    in.heads = static_cast<int>(r.heads.size());
    in.outputLabels = isColumn(state);
    in.fontSize = ImGui::GetFontSize();
    in.labelBand = std::max(labelBand(queryLabels(state), in.wRows), labelBand(keyLabels(state), in.wCols));
    v.plan = planFitLayout(in, v.inputs, v.sidebar);
    // Focus: the one map gets the whole window, the sidebar too unless the user asked for it.
    if (!v.focus.empty() && v.sidebar == Collapse::Auto) v.plan.sidebarCollapsed = true;
    v.planned = true;
}

float controlsWidth(const AppState& state) { return state.chain.plan.sidebarCollapsed ? kStripWidth : kControlsWidth; }

// The controls sidebar, or the strip it collapses to (one button that brings it back).
void drawControlsOrStrip(AppState& state)
{
    if (!state.chain.plan.sidebarCollapsed) {
        drawControlsPanel(state);
        return;
    }
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(vp->WorkPos);
    ImGui::SetNextWindowSize(ImVec2(kStripWidth, vp->WorkSize.y - kStatusBarHeight));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(2, 6));
    ImGui::Begin("##controls strip", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoBringToFrontOnFocus);
    if (ImGui::Button("»", ImVec2(kStripWidth - 4, 40))) state.chain.sidebar = Collapse::Shown;
    state.recordRect("sidebar/expand", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Show the controls (mode, heads, masks, sizes, colormaps)");
    ImGui::End();
    ImGui::PopStyleVar();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] drawChainPanel
// -----------------------------------------------------------------------------------------------------

namespace {

// The toolbar: the sidebar's collapse button, fit / full chain, colour range modes.
void drawToolbar(AppState& state)
{
    ChainView& v = state.chain;
    const bool collapsed = v.plan.sidebarCollapsed;
    if (!collapsed) {
        if (ImGui::SmallButton("«")) v.sidebar = Collapse::Hidden;
        state.recordRect("sidebar/collapse", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("Hide the controls (more room for the maps)");
        ImGui::SameLine();
    }
    if (ImGui::RadioButton("fit", state.view.fit)) state.view.fit = true;
    state.recordRect("view/fit", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("The current head's maps sized to the window; double-click a map to focus it");
    ImGui::SameLine();
    if (ImGui::RadioButton("full chain", !state.view.fit)) state.view.fit = false;
    state.recordRect("view/full", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Every head and every input, cells of a fixed size (Ctrl+wheel zooms)");
    if (state.view.fit) {
        ImGui::SameLine();
        bool strip = v.plan.inputsCollapsed;
        if (ImGui::Checkbox("inputs as a strip", &strip)) v.inputs = strip ? Collapse::Hidden : Collapse::Shown;
        state.recordRect("view/inputs_strip", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(110);
    const char* wModes[] = {"auto", "locked", "0…1"};
    int wm = static_cast<int>(state.view.weightsRange);
    if (ImGui::Combo("weights range", &wm, wModes, 3)) {
        state.view.weightsRange = static_cast<RangeMode>(wm);
        v.locked.clear();
    }
    state.recordRect("view/weights_range", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::SetNextItemWidth(120);
    // "auto: log" says what the automatic choice is for this many keys.
    const attn::WeightsScale resolved = weightsScaleOf(state);
    const std::string autoName = std::string("auto: ") + (resolved == attn::WeightsScale::Log ? "log" : "linear");
    const char* scales[] = {autoName.c_str(), "linear", "log", "row max"};
    int sc = static_cast<int>(state.view.weightsScale);
    if (ImGui::Combo("scale", &sc, scales, 4)) state.view.weightsScale = static_cast<attn::WeightsScale>(sc);
    state.recordRect("view/weights_scale", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("The weights' colour scale: linear 0…1, log 1e-4…1 (auto past %ld keys), or each query over its largest weight",
                          attn::kLogScaleKeys);
    ImGui::SameLine();
    bool lock = state.view.otherRanges == RangeMode::Locked;
    if (ImGui::Checkbox("lock other ranges", &lock)) {
        state.view.otherRanges = lock ? RangeMode::Locked : RangeMode::Auto;
        v.locked.clear();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Keep every map's colour range while you edit, so before and after compare");
}

void drawFocus(AppState& state, MapRef m)
{
    // The whole window for one map: the largest cell with which it and its bands fit (at most 160 px).
    const attn::Expected<view::MapDescription> d = view::describeMap(state.doc.session(), state.doc.result(), m.kind, m.head);
    if (!d) return;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // The widest label band plus an axis title, and the two text lines above the map (this note, its title).
    const float bands = 70.0f + 2 * ImGui::GetFontSize();
    const float lines = 2 * ImGui::GetTextLineHeightWithSpacing();
    const float cw = (avail.x - bands - kColorbarWidth) / std::max<float>(1, static_cast<float>(d->cols));
    const float ch = (avail.y - bands - lines) / std::max<float>(1, static_cast<float>(d->rows));
    MapStyle st;
    st.cell = std::clamp(std::floor(std::min(cw, ch)), 2.0f, 160.0f);
    st.maxSize = avail.x - kColorbarWidth - 16;
    st.maxHeight = avail.y - lines - 8;
    ImGui::TextDisabled("focus: %s   (double-click or Esc: back to the chain)", mapKey(m).c_str());
    drawMap(state, m, st);
    state.recordRect("focus/" + mapKey(m), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
}

void drawFit(AppState& state)
{
    const FitPlan& p = state.chain.plan;
    const int head = currentHead(state);
    const int H = static_cast<int>(state.doc.result().heads.size());
    // Ctrl+wheel zooms from the fitted sizes (maps then larger than their room scroll inside it).
    const float zoom = state.view.zoom;
    MapStyle small;
    small.cell = p.smallCell * zoom;
    small.thumb = p.smallCell < ImGui::GetFontSize() * 0.8f;  // thumbnails: no labels, no colorbar
    small.colorbar = !small.thumb;
    small.colorbarWidth = 0;
    if (!p.fits) small.maxSize = p.smallView;  // hundreds of tokens: small boxes, so that the weights stay on screen
    drawInputsFit(state, p.inputsCollapsed);
    arrow();
    MapStyle qkv = small;
    if (!p.fits) qkv.maxHeight = p.qkvViewHeight;  // Q, K, V stacked share the panel's height
    drawQkvColumn(state, qkv);
    arrow();
    ImGui::BeginGroup();
    if (H > 1) ImGui::TextDisabled("head %d of heads 0–%d  (click another in the grid below)", head, H - 1);
    drawMap(state, {MapKind::Scores, head}, small);
    ImGui::SameLine();
    MapStyle big;
    big.cell = p.cell * zoom;
    big.colorbarWidth = 0;
    // The plan sized the maps to the window: they need no scrolling box of their own, unless zoomed or
    // too large even at the smallest cells (thousands of tokens).
    if (zoom == 1.0f && p.fits) big.maxSize = 1e6f;
    if (!p.fits) big.maxSize = p.bigView;
    float weightsShown = 0;
    const float band = drawMap(state, {MapKind::Weights, head}, big, &weightsShown);
    ImGui::SameLine();
    // Row layout: the output has the weights' rows (queries), level with them and without labels of its
    // own. Column layout: it has its own rows (features), so its own labels.
    if (!isColumn(state)) {
        big.rowLabels = false;
        big.minColBand = band;
    }
    if (!p.fits) big.maxSize = p.outputView;
    // In its own box, the output (n × d_v) is as tall as the weights beside it: fitted apart (FittedZoom), its rows
    // are the weights' rows, pooled alike.
    if (!p.fits && !isColumn(state)) {
        big.maxHeight = std::max(p.outputView, weightsShown + band);
        big.rowsLevel = true;
    }
    drawMap(state, {MapKind::HeadOut, head}, big);
    const attn::HeadResult& hr = state.doc.result().heads[static_cast<std::size_t>(head)];
    if (!hr.fullyMaskedQueries.empty())
        ImGui::TextColored(ImVec4(1, 0.7f, 0.3f, 1), "%zu quer%s fully masked: weights 0, output 0", hr.fullyMaskedQueries.size(),
                           hr.fullyMaskedQueries.size() == 1 ? "y" : "ies");
    ImGui::EndGroup();
    const ImVec2 headMin = ImGui::GetItemRectMin(), headMax = ImGui::GetItemRectMax();
    // The right edge of the room under the current head's maps: the final column's arrow, or the panel's edge.
    float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (hasFinalColumn(state)) {
        arrow();
        right = ImGui::GetItemRectMin().x - ImGui::GetStyle().ItemSpacing.x;
        drawFinalColumn(state, small, false);
    }
    if (H > 1) {
        // The heads grid under the current head's maps, in that room: drawn after the final column, so that it never
        // moves the final column (as one group with the head's maps, a grid wider than they are pushed it right).
        ImGui::SetCursorScreenPos(ImVec2(headMin.x, headMax.y + ImGui::GetStyle().ItemSpacing.y));
        ImGui::BeginGroup();
        drawHeadsGridRow(state, right - headMin.x, p.gridCell);
        ImGui::EndGroup();
    }
}

void drawFull(AppState& state)
{
    const attn::AttentionResult& r = state.doc.result();
    const int H = static_cast<int>(r.heads.size());
    MapStyle st;
    st.cell = fullCellSize(state);
    drawInputEditors(state);
    arrow();
    drawQkvColumn(state, st);
    arrow();
    ImGui::BeginGroup();
    for (int h = 0; h < H; ++h) {
        ImGui::PushID(h);
        if (H > 1) {
            const int w = static_cast<int>(isColumn(state) ? r.heads[static_cast<std::size_t>(h)].Q.rows() : r.heads[static_cast<std::size_t>(h)].Q.cols());
            ImGui::TextDisabled("head %d of heads 0–%d  (%s %d…%d of Q)", h, H - 1, isColumn(state) ? "rows" : "columns", h * w, (h + 1) * w - 1);
        }
        // Heads sharing one range show its colorbar once, under the last head; the others keep its room.
        MapStyle hs = st;
        hs.colorbar = h == H - 1 || !state.view.sharedRange;
        hs.reserveColorbar = !hs.colorbar;
        drawMap(state, {MapKind::Scores, h}, hs);
        ImGui::SameLine();
        drawMap(state, {MapKind::Weights, h}, hs);
        ImGui::SameLine();
        hs.reserveColorbar = false;
        drawMap(state, {MapKind::HeadOut, h}, hs);
        const attn::HeadResult& hr = r.heads[static_cast<std::size_t>(h)];
        if (!hr.fullyMaskedQueries.empty())
            ImGui::TextColored(ImVec4(1, 0.7f, 0.3f, 1), "%zu quer%s fully masked: weights 0, output 0",
                               hr.fullyMaskedQueries.size(), hr.fullyMaskedQueries.size() == 1 ? "y" : "ies");
        ImGui::PopID();
    }
    ImGui::EndGroup();
    if (hasFinalColumn(state)) {
        arrow();
        drawFinalColumn(state, st, true);
    }
}

} // namespace

void drawChainPanel(AppState& state)
{
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const float left = controlsWidth(state);
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + left, vp->WorkPos.y));
    ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x - left, vp->WorkSize.y - kStatusBarHeight));
    ImGui::Begin("Attention chain", nullptr,
                 ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                     ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoBringToFrontOnFocus);
    // The panel's own rectangle (the tests check that the maps stay inside it).
    state.recordRect("panel/chain", ImGui::GetWindowPos(),
                     ImVec2(ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y));
    ChainView& v = state.chain;
    // A model layer: where it is in the model, and the way back (before focus mode takes its Esc).
    drawModelBreadcrumb(state);
    const int H = state.doc.hasResult() ? static_cast<int>(state.doc.result().heads.size()) : 0;
    std::optional<MapRef> focus = v.focus.empty() ? std::nullopt : mapFromKey(v.focus, H);
    if (!v.focus.empty() && !focus) v.focus.clear();  // the map is gone (fewer heads)
    if (focus && keyPressed(ImGuiKey_Escape, false) && !ImGui::GetIO().WantTextInput) {
        v.focus.clear();
        focus.reset();
    }
    if (!focus) drawToolbar(state);
    const std::string formula = formulaText(state);
    ImGui::TextUnformatted(formula.c_str());
    state.recordRect("formula", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (!state.doc.lastError().ok())
        ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "Not computed: %s (showing the last good result)",
                           state.doc.lastError().message.c_str());
    ImGui::Separator();

    // While the worker computes, the last complete result is shown, unless its shape (sizes, heads, layout…)
    // no longer matches the session's: the panels then wait for the new one rather than mix the two.
    const bool ready = state.doc.hasResult() && !(state.doc.computing() && !state.doc.resultMatchesShape());
    if (!ready) {
        if (!focus) {
            if (state.view.fit) drawInputsFit(state, v.plan.inputsCollapsed);
            else drawInputEditors(state);
            ImGui::SameLine();
        }
        ImGui::TextDisabled(state.doc.hasResult() ? "(computing…)" : "(no result yet)");
        ImGui::End();
        return;
    }
    updateRangeOptions(state);
    if (focus) drawFocus(state, *focus);
    else if (state.view.fit && v.planned) drawFit(state);
    else drawFull(state);
    ImGui::End();
}

} // namespace app
