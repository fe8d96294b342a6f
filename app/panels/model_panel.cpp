// The model mode's window (docs/model.md): sentence fields, the model view (every layer × head, live, with
// ablation checkboxes; click a thumbnail to open that layer in the chain view), the lines view of one head
// (hover a token to highlight its attention) and the embedding / cosine panel. Also File → Open model….
// Every number comes from attnscope_model (state/model_state.h); nothing here does attention math.
#include "panels/model_panels.h"

#include "figure/figure_render.h"
#include "figure/model_figure.h"
#include "messages.h"
#include "panels/display_text.h"
#include "panels/glyph_atlas.h"
#include "panels/panels.h"
#include "render/heatmap_view.h"
#include "state/model_state.h"
#include "state/text_file.h"
#include "view/model_grid.h"

#include <attnscope/colormap.h>

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <filesystem>
#include <cfloat>
#include <cmath>
#include <cstdio>

namespace app {
namespace {

bool isAblated(const RunView& run, int l, int h) { return run.isAblated(l, h); }

// "5201 tokens: layer 12 of 30, 812 tokens/s, 9.4 s" for a decoder's forward under way (before its first layer
// is done: "layer 0 of 30, 9.4 s"); "1234 ms" otherwise.
std::string progressText(const ModelState& m)
{
    auto [done, total] = m.runProgress();
    const double ms = m.computingMs();
    if (!m.isDecoder()) return std::to_string(int(ms)) + " ms";
    if (total <= 0) done = 0, total = m.layers();  // the text is being tokenised, or layer 0 is under way
    const int tokens = m.runTokens();
    char buf[128];
    if (tokens == 0)
        std::snprintf(buf, sizeof buf, "tokenising the text, %.1f s", ms / 1000.0);
    else if (done > 0 && ms > 0)
        std::snprintf(buf, sizeof buf, "%d tokens: layer %d of %d, %.0f tokens/s, %.1f s", tokens, done, total,
                      double(tokens) * done / total / (ms / 1000.0), ms / 1000.0);
    else
        std::snprintf(buf, sizeof buf, "%d tokens: layer %d of %d, %.1f s", tokens, done, total, ms / 1000.0);
    return buf;
}

void drawSentenceFields(AppState& state)
{
    ModelState& m = state.model;
    // Typing reruns the model once the typing pauses (kTextDebounceSeconds), at any length: the forward runs
    // on the worker (the latest request wins), so the field never stalls, and a half-typed word is not run
    // on every keystroke. Enter, Tab or a click elsewhere run it at once.
    bool edited = false, left = false;
    if (m.isDecoder()) {
        // One text; the model predicts what follows it. The chat template wraps it as a user turn.
        ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("chat template").x - 40);
        edited |= ImGui::InputTextWithHint("##A", "text (the model predicts the next token)", &m.textA);
        state.recordRect("model/textA", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        left |= ImGui::IsItemDeactivatedAfterEdit();
        ImGui::SameLine();
        ImGui::BeginDisabled(m.decoder->chatTemplate.empty());
        if (ImGui::Checkbox("chat template", &m.chat)) left = true;
        ImGui::EndDisabled();
        if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
            ImGui::SetTooltip(m.decoder->chatTemplate.empty() ? "this model has no chat template"
                                                               : "wrap the text as one user turn, as the model was tuned to read it");
    } else {
        ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.45f);
        edited |= ImGui::InputTextWithHint("##A", "sentence A", &m.textA);
        state.recordRect("model/textA", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        left |= ImGui::IsItemDeactivatedAfterEdit();
        ImGui::SameLine();
        ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x);
        edited |= ImGui::InputTextWithHint("##B", "sentence B (optional)", &m.textB);
        left |= ImGui::IsItemDeactivatedAfterEdit();
    }
    wantGlyphs(m.textA);
    wantGlyphs(m.textB);
    const double now = ImGui::GetTime();
    if (edited) {
        m.textEditedAt = now;
        m.textPath.clear();  // the text is no longer the file's
    }
    if (left || (m.textEditedAt >= 0 && now - m.textEditedAt >= kTextDebounceSeconds)) {
        m.textEditedAt = -1;
        ++m.textReruns;
        rerunModel(state, "edited the text");  // re-tokenised
    }
    if (!m.error.empty()) ImGui::TextColored(ImVec4(0.85f, 0.2f, 0.2f, 1), "%s", m.error.c_str());
    // A decoder's long forward (tens of seconds): its progress, and a way to stop it (the shown run stays). The
    // first run's shows at once: there is nothing else to look at yet.
    if (m.isDecoder() && m.computing() && (m.computingMs() > 500 || !m.hasRun())) {
        const auto [done, total] = m.runProgress();
        ImGui::ProgressBar(total > 0 ? float(done) / float(total) : 0.0f, ImVec2(ImGui::GetContentRegionAvail().x - 90, 0),
                           ("computing: " + progressText(m)).c_str());
        state.recordRect("model/progress", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::SameLine();
        if (ImGui::Button("Cancel##run")) m.cancelRun();
        state.recordRect("model/cancel", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
}

// The mask a dense decoder run's thumbnails hatch: the model's rule (causal, its sliding window) for the run's n
// tokens, made once per length through the shown run's maps; null when they give none.
const attn::MaskMatrix* decoderThumbnailMask(ModelState& m, const RunView& run, int n)
{
    if (m.decoderMask.rows() != n || m.decoderMask.cols() != n) {
        const attn::AttentionMaps& maps = run.maps();
        if (maps.queries() != n || !maps.maskTile(0, 0, attn::MapRect{0, 0, n, n}, m.decoderMask).ok()) {
            m.decoderMask.resize(0, 0);
            return nullptr;
        }
    }
    return &m.decoderMask;
}

// The weights a thumbnail draws: the head's own, or (n above the thumbnail's pixels) their block maxima, pooled
// once per layer result and size (attn::poolMax) and kept in ModelState::thumbs.
// A decoder's kept weights are rows with a stride (attn::HeadWeights): drawn from a contiguous copy, made once
// per layer result as the pooled ones are.
const attn::Matrix& thumbnailValues(ModelState& m, const RunView& run, int l, int h, int heads, int shown, std::uint64_t generation)
{
    if (!run.isDecoderRun()) {
        const attn::Matrix& own = (*run.dense)[static_cast<std::size_t>(l)].heads[static_cast<std::size_t>(h)].weights;
        if (shown >= own.rows()) return own;
    }
    const attn::MatrixCMap w = run.headWeights(l, h);
    const std::size_t i = static_cast<std::size_t>(l * heads + h);
    if (m.thumbs.size() <= i) m.thumbs.resize(i + 1);
    ModelState::PooledThumb& t = m.thumbs[i];
    if (t.source != w.data() || t.generation != generation || t.side != shown || t.n != w.rows()) {
        t.values = attn::poolMax(w, shown, shown);  // a copy when nothing is pooled
        t.source = w.data();
        t.generation = generation;
        t.side = shown;
        t.n = w.rows();
    }
    return t.values;
}

// The grid: one thumbnail per (layer, head), a × in its corner (on hover) to ablate it. Laid out by planModelGrid
// (view/model_grid.h): the thumbnails fit the room whatever the token count, and the grid scrolls inside
// `size` when even the smallest readable thumbnails do not fit.
void drawModelGrid(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    const RunView run = m.shownRun();
    const int L = static_cast<int>(run.dense->size()), H = m.heads(), Hkv = m.kvHeads();
    const int n = static_cast<int>(run.tokens.size());
    ModelGridInput in;
    in.layers = L;
    in.heads = H;
    in.tokens = n;
    in.width = size.x - ImGui::GetStyle().ScrollbarSize;  // room for a vertical scrollbar, should it appear
    in.height = size.y;
    in.labelWidth = ImGui::CalcTextSize("L00").x + 12;
    in.headerHeight = ImGui::GetTextLineHeightWithSpacing() * (Hkv != H ? 2.0f : 1.0f);  // + a row of KV groups
    in.rowExtra = ImGui::GetStyle().ItemSpacing.y + 2;  // a gap (ablation is the × in each thumbnail's corner)
    const ModelGridPlan plan = planModelGrid(in);
    m.gridPlan = plan;
    ImGui::BeginChild("grid", size, false, ImGuiWindowFlags_HorizontalScrollbar);
    // The grid's visible box (tests scroll a thumbnail into it).
    state.recordRect("model/grid", ImGui::GetWindowPos(), ImVec2(ImGui::GetWindowPos().x + ImGui::GetWindowSize().x,
                                                                 ImGui::GetWindowPos().y + ImGui::GetWindowSize().y));
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    // Grouped-query attention: a bracket over the query heads that share a key/value head ("kv 0").
    const float headY = o.y + (Hkv != H ? ImGui::GetTextLineHeightWithSpacing() : 0.0f);
    if (Hkv != H && Hkv > 0) {
        const int group = H / Hkv;
        for (int g = 0; g < Hkv; ++g) {
            const float x0 = o.x + in.labelWidth + plan.pitchX * float(g * group);
            const float x1 = o.x + in.labelWidth + plan.pitchX * float((g + 1) * group - 1) + plan.thumb;
            const float y = o.y + ImGui::GetTextLineHeight() * 0.5f;
            const ImU32 col = IM_COL32(150, 170, 200, 255);
            dl->AddLine(ImVec2(x0, y + 5), ImVec2(x0, y), col);
            dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), col);
            dl->AddLine(ImVec2(x1, y), ImVec2(x1, y + 5), col);
            const std::string t = "kv " + std::to_string(g);
            const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
            const float tx = (x0 + x1 - ts.x) / 2;
            dl->AddRectFilled(ImVec2(tx - 3, o.y), ImVec2(tx + ts.x + 3, o.y + ts.y), ImGui::GetColorU32(ImGuiCol_WindowBg));
            dl->AddText(ImVec2(tx, o.y), col, t.c_str());
        }
        state.recordRect("model/kv_groups", ImVec2(o.x + in.labelWidth, o.y),
                         ImVec2(o.x + in.labelWidth + plan.pitchX * float(H), headY));
    }
    for (int h = 0; h < H; ++h) {
        const std::string t = "H" + std::to_string(h);
        const float x = o.x + in.labelWidth + plan.pitchX * float(h) + (plan.thumb - ImGui::CalcTextSize(t.c_str()).x) / 2;
        dl->AddText(ImVec2(x, headY), ImGui::GetColorU32(ImGuiCol_Text), t.c_str());
    }
    for (int l = 0; l < L; ++l) {
        const float y = o.y + in.headerHeight + plan.pitchY * float(l);
        const std::string t = "L" + std::to_string(l);
        // A model whose layers differ (Gemma's sliding and global layers) says which each is: the label is
        // dimmed on a sliding layer, and the tooltip gives its window and RoPE base.
        const attn::DecoderConfig* dc = m.decoder && run.isDecoderRun() ? &m.decoder->config : nullptr;
        const bool perLayer = dc != nullptr && !dc->layerSpecs.empty() && dc->anyWindow() && l < dc->layers;
        const bool sliding = perLayer && dc->windowOf(l) > 0;
        const ImVec2 labelPos(o.x, y + (plan.thumb - ImGui::GetFontSize()) / 2);
        dl->AddText(labelPos, ImGui::GetColorU32(sliding ? ImGuiCol_TextDisabled : ImGuiCol_Text), t.c_str());
        if (perLayer) {
            const char* kind = sliding ? "s" : "g";
            dl->AddText(ImVec2(o.x, labelPos.y + ImGui::GetFontSize()), ImGui::GetColorU32(ImGuiCol_TextDisabled), kind);
            const ImVec2 lo(o.x, y), hi(o.x + in.labelWidth, y + plan.thumb);
            if (ImGui::IsMouseHoveringRect(lo, hi)) {
                if (sliding)
                    ImGui::SetTooltip("layer %d: sliding window (s): each query sees the last %d keys\nRoPE base %g", l,
                                      dc->windowOf(l), double(dc->ropeThetaOf(l)));
                else
                    ImGui::SetTooltip("layer %d: global (g): each query sees every earlier key\nRoPE base %g", l,
                                      double(dc->ropeThetaOf(l)));
            }
        }
        const std::uint64_t gen = m.layerGeneration.size() > std::size_t(l) ? m.layerGeneration[static_cast<std::size_t>(l)] : 0;
        for (int h = 0; h < H; ++h) {
            const ImVec2 p(o.x + in.labelWidth + plan.pitchX * float(h), y);
            ImGui::SetCursorScreenPos(p);
            ImGui::PushID(l * 1000 + h);
            HeatmapSpec spec;
            spec.key = "model/" + std::to_string(l) + "/" + std::to_string(h);
            spec.src.values = &thumbnailValues(m, run, l, h, H, plan.shown, gen);
            // A decoder's causal maps hatched above the diagonal (masked, not 0), where cells are not pooled.
            if (!plan.pooled && run.isDecoderRun()) {
                spec.src.mask = decoderThumbnailMask(m, run, static_cast<int>(run.headWeights(l, h).rows()));
            } else if (!plan.pooled) {
                const attn::HeadResult& head = (*run.dense)[static_cast<std::size_t>(l)].heads[static_cast<std::size_t>(h)];
                if (head.masked.size() > 0 && head.masked.rows() == head.weights.rows() && head.masked.cols() == head.weights.cols())
                    spec.src.mask = &head.masked;
            }
            // The weights' colour scale as the chain's (log past attn::kLogScaleKeys tokens by default); row max
            // needs each head's maps divided row by row, which the thumbnails do not keep: they stay linear then.
            const attn::WeightsScale scale = attn::resolveWeightsScale(state.view.weightsScale, n);
            spec.src.range = attn::weightsRange(scale == attn::WeightsScale::Log ? scale : attn::WeightsScale::Linear,
                                                attn::DisplayRange{0.0f, 1.0f, 0});
            spec.src.colormap = attn::Colormap::Viridis;
            // The texture changes only when its layer does (or the pooled size).
            spec.src.generation = gen;
            spec.cellPx = plan.cell;
            spec.showValues = false;
            spec.rowLabelsShown = spec.colLabelsShown = false;
            spec.maxWidth = spec.maxHeight = plan.thumb + 1;  // never a scrolling map of its own
            const HeatmapHit hit = drawHeatmap(spec);
            // The ablation switch: a × in the thumbnail's top-right corner, shown on hover and while ablated
            // (then the thumbnail is dimmed and crossed out).
            const bool ablated = isAblated(run, l, h);
            const float box = std::clamp(plan.thumb * 0.3f, 12.0f, 18.0f);
            const ImVec2 c0(hit.cellsMax.x - box, hit.cellsMin.y), c1(hit.cellsMax.x, hit.cellsMin.y + box);
            // (The thumbnail's button is active from the press on, which a plain IsWindowHovered would not allow.)
            const bool overThumb = ImGui::IsMouseHoveringRect(hit.cellsMin, hit.cellsMax) &&
                                   ImGui::IsWindowHovered(ImGuiHoveredFlags_AllowWhenBlockedByActiveItem);
            const bool overBox = overThumb && ImGui::IsMouseHoveringRect(c0, c1);
            if (ablated) {
                dl->AddRectFilled(hit.cellsMin, hit.cellsMax, IM_COL32(0, 0, 0, 150));
                dl->AddLine(hit.cellsMin, hit.cellsMax, IM_COL32(230, 70, 60, 220), 1.5f);
                dl->AddLine(ImVec2(hit.cellsMin.x, hit.cellsMax.y), ImVec2(hit.cellsMax.x, hit.cellsMin.y), IM_COL32(230, 70, 60, 220), 1.5f);
            }
            if (overThumb || ablated) {
                dl->AddRectFilled(c0, c1, overBox ? IM_COL32(230, 70, 60, 255) : IM_COL32(40, 40, 48, 230), 2.0f);
                const ImVec2 ts = ImGui::CalcTextSize("\u00d7");
                dl->AddText(ImVec2((c0.x + c1.x - ts.x) / 2, (c0.y + c1.y - ts.y) / 2), IM_COL32(255, 255, 255, 255), "\u00d7");
            }
            state.recordRect("model/ablate/" + std::to_string(l) + "/" + std::to_string(h), c0, c1);
            const bool selected = l == m.linesLayer && h == m.linesHead;
            if (selected)
                dl->AddRect(ImVec2(hit.cellsMin.x - 2, hit.cellsMin.y - 2), ImVec2(hit.cellsMax.x + 2, hit.cellsMax.y + 2),
                            IM_COL32(255, 200, 60, 255), 0, 0, 2.0f);
            if (overBox) {
                ImGui::SetTooltip(ablated ? "layer %d, head %d is ablated: click to restore it"
                                          : "click: ablate layer %d, head %d (its context zeroed before W^O)", l, h);
            } else if (hit.row >= 0) {
                if (plan.pooled) {
                    ImGui::SetTooltip("layer %d, head %d%s\n%d tokens, each cell the largest weight of its block\n"
                                      "click: open layer %d, head %d in the chain view; × (top right): ablate",
                                      l, h, isAblated(run, l, h) ? " (ablated)" : "", n, l, h);
                } else {
                    const float w = spec.src.values->coeff(hit.row, hit.col);
                    wantGlyphs(run.tokens[static_cast<std::size_t>(hit.row)]);
                    wantGlyphs(run.tokens[static_cast<std::size_t>(hit.col)]);
                    ImGui::SetTooltip("layer %d, head %d%s\nquery %d '%s' → key %d '%s': %.3f\n"
                                      "click: open layer %d, head %d in the chain view; × (top right): ablate%s",
                                      l, h, isAblated(run, l, h) ? " (ablated)" : "", hit.row,
                                      run.tokens[static_cast<std::size_t>(hit.row)].c_str(), hit.col,
                                      run.tokens[static_cast<std::size_t>(hit.col)].c_str(), w, l, h,
                                      m.isDecoder() ? "\nright-click: why does it attend here?" : "");
                }
            }
            state.recordRect(spec.key, hit.cellsMin, hit.cellsMax);
            if (hit.pressed && overBox) {
                toggleAblation(state, l, h);
            } else if (hit.pressed) {
                m.linesLayer = l;
                m.linesHead = h;
                openLayerInChain(state, l, h);
            }
            ImGui::PopID();
            if (ImGui::IsMouseHoveringRect(p, ImVec2(p.x + plan.thumb, p.y + plan.thumb)) && ImGui::IsWindowHovered() &&
                ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
                m.linesLayer = l;
                m.linesHead = h;
                // A decoder's cell (unpooled: one cell a token pair): "Why here?" too.
                if (m.isDecoder() && !plan.pooled && hit.row >= 0 && hit.col >= 0) offerQkMenu(state, l, h, hit.row, hit.col, true);
            }
        }
    }
    // The grid's whole extent, so that the child scrolls to every thumbnail.
    ImGui::SetCursorScreenPos(o);
    ImGui::Dummy(ImVec2(plan.contentWidth, plan.contentHeight));
    ImGui::EndChild();
}

// BertViz's head view of the model's run (drawLinesMap draws it).
void drawLinesView(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    if (m.longRun()) {
        ImGui::TextWrapped("%zu tokens: a long text keeps no per-head maps (the lines view draws every pair of tokens). "
                           "Click a thumbnail above to open that head's map, which zooms to single cells.",
                           m.drun->encoding.tokens.size());
        return;
    }
    const RunView run = m.shownRun();
    const attn::MatrixCMap w = run.headWeights(m.linesLayer, m.linesHead);
    // Wrapped: at 900 px the half-width child cut the sentence.
    ImGui::TextWrapped("Lines view: layer %d, head %d (right-click a thumbnail to pick; hover a token)", m.linesLayer, m.linesHead);
    drawLinesMap(state, size, run.tokens, run.tokens, w, m.hoverToken, m.linesRow);
}

// Export of the views as PNG / SVG / PDF (the format from the file name), through the same figure code as
// `attnscope render --model-text`. An existing file is overwritten only after a second click (Overwrite);
// where the file went is said under the row.
void saveModelFigure(AppState& state, fig::ModelFigureKind kind)
{
    ModelState& m = state.model;
    const std::string& path = m.exportPath;
    const std::optional<fig::FigureFormat> format = fig::formatFromPath(path);
    if (!format) {
        m.exportStatus = path + ": expected a .png, .svg or .pdf file name";
        postError(m.exportStatus);
        return;
    }
    fig::ModelFigureOptions fo;
    fo.kind = kind;
    fo.layer = m.linesLayer;
    fo.head = m.linesHead;
    attn::Expected<std::string> bytes = std::string();
    if (kind == fig::ModelFigureKind::Lines) bytes = fig::renderLinesFigure(m.modelName(), m.shownRun(), fo, *format, 2.0);
    else {
        auto f = fig::buildModelFigure(m.modelName(), m.shownRun(), fo);
        if (!f) {
            m.exportStatus = f.status().message;
            postError(m.exportStatus);
            return;
        }
        bytes = fig::renderFigure(*f, *format, 2.0);
    }
    attn::Status st = bytes.ok() ? attn::writeFileAtomic(path, *bytes) : bytes.status();
    std::error_code ec;
    const std::string where = std::filesystem::absolute(path, ec).string();
    if (st.ok()) {
        m.exportStatus = "saved " + (ec ? path : where);
        postMessage(MessageLevel::Info, m.exportStatus);
    } else {
        m.exportStatus = st.message;
        postError(st.message);
    }
}

void drawExportRow(AppState& state)
{
    ModelState& m = state.model;
    // The path on a line of its own and the buttons under it: side by side they ran off a 900-px window.
    ImGui::SetNextItemWidth(-1);
    if (ImGui::InputText("##exportpath", &m.exportPath)) m.overwriteKind = -1;
    const fig::ModelFigureKind kinds[] = {fig::ModelFigureKind::ModelView, fig::ModelFigureKind::Head, fig::ModelFigureKind::Lines};
    const char* labels[] = {"Save grid", "Save head", "Save lines"};
    for (int i = 0; i < 3; ++i) {
        if (i > 0) ImGui::SameLine();
        if (ImGui::Button(labels[i])) {
            std::error_code ec;
            if (std::filesystem::exists(m.exportPath, ec)) m.overwriteKind = i;  // ask first
            else saveModelFigure(state, kinds[i]);
        }
        state.recordRect(std::string("model/save/") + std::to_string(i), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
    if (m.overwriteKind >= 0) {
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "%s exists.", m.exportPath.c_str());
        state.recordRect("model/overwrite_prompt", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::SameLine();
        if (ImGui::Button("Overwrite")) {
            saveModelFigure(state, kinds[m.overwriteKind]);
            m.overwriteKind = -1;
        }
        state.recordRect("model/overwrite", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::SameLine();
        if (ImGui::Button("Cancel##overwrite")) m.overwriteKind = -1;
    } else if (!m.exportStatus.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s", m.exportStatus.c_str());
        ImGui::PopTextWrapPos();
        state.recordRect("model/save_status", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
}

void drawEmbeddingPanel(AppState& state)
{
    ModelState& m = state.model;
    ImGui::Text("Sentence embedding (%d values, mean of the last layer, L2-normalised)", int(m.embedding.size()));
    std::string head;
    for (Eigen::Index i = 0; i < std::min<Eigen::Index>(8, m.embedding.size()); ++i)
        head += attn::formatValue(m.embedding[i]) + "  ";
    ImGui::TextWrapped("[%s…]", head.c_str());
    if (m.hasCosine) {
        ImGui::Text("cos(A, B) = %.4f", m.cosine);
        if (m.hasCosineBefore && !m.lastChange.empty())
            ImGui::Text("%s: %.4f → %.4f (%+.4f)", m.lastChange.c_str(), m.cosineBefore, m.cosine, m.cosine - m.cosineBefore);
    } else {
        ImGui::TextDisabled("type sentence B to compare A and B (cosine similarity)");
    }
    const std::size_t ablated = m.run->ablated.size();
    ImGui::Text("%zu head%s ablated", ablated, ablated == 1 ? "" : "s");
    ImGui::Separator();
    ImGui::TextUnformatted("Export (PNG, SVG or PDF from the name; head and lines: the lines view's head)");
    drawExportRow(state);
}

} // namespace

// A token as a label: visible whitespace, something for an empty one.
std::string tokenLabel(const std::string& t)
{
    if (t.empty()) return "\u2205";
    std::string out;
    for (char c : t) {
        if (c == '\n') out += "\u21b5";
        else if (c == '\t') out += "\u21e5";
        else out += c;
    }
    out = visualOrder(out);  // right-to-left runs as ImGui can draw them (display_text.h)
    wantGlyphs(out);         // drawn next: its characters in the font atlas
    return out;
}

namespace {

// " (U+1F600)" after a token the window cannot draw whole (emoji and other characters past U+FFFF show as �).
std::string withCodes(const std::string& label)
{
    const std::string codes = codesPastTheBmp(label);
    return codes.empty() ? codes : " (" + codes + ")";
}

// "\nbytes E6 97 (part of a UTF-8 character)" for a decoder's token that cuts a character, which the strip shows as
// U+FFFD; "" otherwise (display_text.h).
std::string bytesLine(const ModelState& m, int id)
{
    if (!m.decoder) return "";
    const std::string note = partialCharacterNote(m.decoder->tokenizer.decode({id}));
    return note.empty() ? note : "\n" + note;
}

// The text coloured by surprise (−log p of each token given those before it): dark for what the model
// expected, red for what surprised it. A click shows the predictions after that token.
void drawSurpriseText(AppState& state, ImVec2 size)
{
    ModelState& m = state.model;
    const attn::DecoderRun& r = *m.drun;
    const int n = static_cast<int>(r.encoding.tokens.size());
    ImGui::BeginChild("surprise", size, false);
    const float right = ImGui::GetContentRegionAvail().x;
    const ImVec2 start = ImGui::GetCursorPos();
    float x = 0, y = 0;
    const float h = ImGui::GetTextLineHeightWithSpacing() + 2;
    const int selected = m.predictPosition < 0 ? n - 1 : m.predictPosition;
    for (int i = 0; i < n; ++i) {
        const std::string label = tokenLabel(r.encoding.tokens[static_cast<std::size_t>(i)]);
        const float w = ImGui::CalcTextSize(label.c_str()).x + 6;
        if (x > 0 && x + w > right) {
            x = 0;
            y += h;
        }
        ImGui::SetCursorPos(ImVec2(start.x + x, start.y + y));
        const float sur = i < static_cast<int>(r.surprise.size()) ? r.surprise[static_cast<std::size_t>(i)] : NAN;
        // 0 nats → the background, 10 nats (p ≈ 0.00005) and more → full red.
        const float t = std::isfinite(sur) ? std::clamp(sur / 10.0f, 0.0f, 1.0f) : 0.0f;
        const ImVec4 bg(0.16f + 0.64f * t, 0.18f + 0.02f * t, 0.22f - 0.1f * t, 1.0f);
        ImGui::PushStyleColor(ImGuiCol_Button, bg);
        ImGui::PushStyleColor(ImGuiCol_ButtonHovered, ImVec4(bg.x + 0.1f, bg.y + 0.1f, bg.z + 0.1f, 1));
        ImGui::PushStyleVar(ImGuiStyleVar_FramePadding, ImVec2(3, 1));
        ImGui::PushID(i);
        if (i == selected) ImGui::PushStyleColor(ImGuiCol_Border, ImVec4(1, 0.78f, 0.24f, 1));
        if (i == selected) ImGui::PushStyleVar(ImGuiStyleVar_FrameBorderSize, 1.5f);
        if (ImGui::Button(label.c_str())) {
            m.predictPosition = i == n - 1 ? -1 : i;
            m.hasBefore = false;  // the change in log p was of another position
        }
        if (i == selected) ImGui::PopStyleVar(), ImGui::PopStyleColor();
        if (ImGui::IsItemHovered()) {
            const int id = r.encoding.ids[static_cast<std::size_t>(i)];
            const std::string named = "'" + label + "'" + withCodes(label), bytes = bytesLine(m, id);
            if (std::isfinite(sur))
                ImGui::SetTooltip("token %d %s (id %d)%s\nsurprise %.2f nats: the model gave it p = %.3g\nclick: what it predicts after it",
                                  i, named.c_str(), id, bytes.c_str(), sur, std::exp(-sur));
            else
                ImGui::SetTooltip("token %d %s (id %d)%s: the first token, nothing before it to predict it\n"
                                  "click: what the model predicts after it", i, named.c_str(), id, bytes.c_str());
        }
        state.recordRect("model/token/" + std::to_string(i), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::PopID();
        ImGui::PopStyleVar();
        ImGui::PopStyleColor(2);
        x += w + 3;
    }
    ImGui::EndChild();
}

// The next-token predictions of the selected position: top-k bars, each with its change in log p since the
// last ablation or edit; the temperature; Generate.
void drawPredictionsPanel(AppState& state)
{
    ModelState& m = state.model;
    updatePredictions(m);
    const attn::DecoderRun& r = *m.drun;
    const int n = static_cast<int>(r.encoding.tokens.size());
    const int pos = m.predictPosition < 0 ? n - 1 : m.predictPosition;
    ImGui::TextWrapped("Text coloured by surprise (red: the model did not expect it); click a token");  // wraps at 900 px
    // As tall as the wrapped tokens, up to a third of the panel (then it scrolls).
    int lines = 1;
    {
        const float right = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ScrollbarSize;
        float x = 0;
        for (const std::string& t : r.encoding.tokens) {
            const float w = ImGui::CalcTextSize(tokenLabel(t).c_str()).x + 9;
            if (x > 0 && x + w > right) x = 0, ++lines;
            x += w;
        }
    }
    const float lineH = ImGui::GetTextLineHeightWithSpacing() + 2;
    const float textHeight = std::min(ImGui::GetContentRegionAvail().y * 0.34f, float(lines) * lineH + 4);
    drawSurpriseText(state, ImVec2(0, std::max(textHeight, lineH + 4)));
    ImGui::Separator();
    const std::string after = tokenLabel(r.encoding.tokens[static_cast<std::size_t>(pos)]);
    ImGui::Text("Next token after '%s'%s (token %d%s)", after.c_str(), withCodes(after).c_str(), pos, pos == n - 1 ? ", the last" : "");
    state.recordRect("model/next_title", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (m.hasBefore && !m.lastChange.empty()) ImGui::TextDisabled("Δ log p: since %s", m.lastChange.c_str());
    const float barW = std::max(60.0f, ImGui::GetContentRegionAvail().x - 170);
    for (std::size_t i = 0; i < m.predictions.size(); ++i) {
        const attn::TokenProbability& t = m.predictions[i];
        const std::string shown = tokenLabel(t.token);
        const std::string label = "'" + shown + "'" + withCodes(shown) + "  " + attn::formatValue(t.p, 3);
        ImGui::ProgressBar(t.p, ImVec2(barW, 0), label.c_str());
        state.recordRect("model/next/" + std::to_string(i), ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("id %d, logit %.3f, p = %.4f at temperature %.2f%s\nclick: make it the target that head importance\n"
                              "and logit attribution explain", t.id, t.logit, t.p, m.temperature, bytesLine(m, t.id).c_str());
        if (ImGui::IsItemClicked()) setWhyTargetId(state, t.id);
        if (m.why.target == t.id) {
            ImGui::SameLine();
            ImGui::TextDisabled("target");
        }
        if (m.hasBefore && m.beforeLogits.size() == m.shownLogits.size()) {
            const float d = attn::logProbability(m.shownLogits, t.id) - attn::logProbability(m.beforeLogits, t.id);
            ImGui::SameLine();
            const ImVec4 col = std::fabs(d) < 0.005f ? ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled)
                                                     : d > 0 ? ImVec4(0.45f, 0.85f, 0.45f, 1) : ImVec4(1.0f, 0.45f, 0.4f, 1);
            ImGui::TextColored(col, "%+.2f", d);
        }
    }
    ImGui::SetNextItemWidth(120);
    ImGui::SliderInt("top k", &m.topK, 1, 30);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(140);
    ImGui::SliderFloat("temperature", &m.temperature, 0.05f, 3.0f, "%.2f", ImGuiSliderFlags_Logarithmic);
    const bool busy = m.generateLeft > 0;
    ImGui::BeginDisabled(busy);
    if (ImGui::Button("Generate")) generateTokens(state, 1);
    state.recordRect("model/generate", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip(m.sample ? "append a token sampled at the temperature" : "append the most probable token");
    ImGui::SameLine();
    if (ImGui::Button("Generate 10")) generateTokens(state, 10);
    ImGui::EndDisabled();
    ImGui::SameLine();
    if (busy) {
        if (ImGui::Button("Stop")) m.generateLeft = 0;
        ImGui::SameLine();
    }
    ImGui::Checkbox("sample", &m.sample);
    const std::size_t ablated = r.ablated.size();
    ImGui::Text("%zu head%s ablated", ablated, ablated == 1 ? "" : "s");
    ImGui::Separator();
    ImGui::TextUnformatted("Export (PNG, SVG or PDF from the name; head and lines: the lines view's head)");
    drawExportRow(state);
}

} // namespace

// Before the first run is shown (an async start, issue 18: a long text's first forward takes tens of seconds):
// the text, the run's progress with Cancel, and what will appear; or, when it failed or was cancelled, why, with
// Run to start it again.
void drawFirstRunPlaceholder(AppState& state)
{
    ModelState& m = state.model;
    drawSentenceFields(state);  // the text, its error, the progress bar and Cancel
    ImGui::Separator();
    ImGui::PushTextWrapPos(0.0f);
    if (m.computing()) {
        ImGui::TextUnformatted("The model is reading the text for the first time. The grid of every layer and head, "
                               "the lines view and the next-token predictions appear when the run is whole.");
        state.recordRect("model/first_run", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (m.isDecoder() && m.runTokens() > kLazyTokens)
            ImGui::TextDisabled("%d tokens: a long text, run lazily (no %d×%d map is kept; each is rebuilt on demand).",
                                m.runTokens(), m.runTokens(), m.runTokens());
    } else {
        ImGui::TextUnformatted("No run to show yet.");
        state.recordRect("model/first_run", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::Button("Run")) rerunModel(state, "ran the text");
        state.recordRect("model/run", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
    ImGui::PopTextWrapPos();
}

void drawModelPanel(AppState& state)
{
    ModelState& m = state.model;
    if (!m.active || !m.showView) return;
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const float left = controlsWidth(state);  // the sidebar, or its strip when the user collapsed it
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + left, vp->WorkPos.y));
    ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x - left, vp->WorkSize.y - kStatusBarHeight));
    const std::string kv = m.kvHeads() != m.heads() ? " over " + std::to_string(m.kvHeads()) + " KV heads" : std::string();
    const std::string title = "Model: " + m.modelName() + " (" + std::to_string(m.layers()) + " layers × " +
                              std::to_string(m.heads()) + " heads" + kv + ")" +
                              (m.computing() ? "   computing… " + progressText(m) : "") +
                              (m.loading() ? "   loading " + m.loadingDir() + "…" : "") + "###model";
    wantGlyphs(title);  // a model file's name in any script
    ImGui::SetNextWindowBgAlpha(1.0f);  // opaque: it covers the chain view
    ImGui::Begin(title.c_str(), nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse);
    if (!m.hasRun()) {
        drawFirstRunPlaceholder(state);
        ImGui::End();
        return;
    }
    drawSentenceFields(state);
    ImGui::Separator();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const ImVec2 gridSize(avail.x, avail.y * 0.62f);
    if (m.longRun()) pollBundleThumbs(m.longView);
    if (m.longRun() && m.longView.active()) {
        // A long text (lazy run, issue 18): the grid and a head's zoomable map from the run's maps, as a bundle's.
        if (m.longView.headOpen) drawMapsHeadView(state, m.longView, gridSize);
        else drawMapsGrid(state, m.longView, gridSize);
    } else if (m.isDecoder()) {
        // A decoder's grid area also shows why it predicts what it does (tabs: panels/why_panel.cpp).
        const float y0 = ImGui::GetCursorPosY();
        if (!drawWhyView(state, gridSize)) drawModelGrid(state, ImVec2(gridSize.x, gridSize.y - (ImGui::GetCursorPosY() - y0)));
    } else {
        drawModelGrid(state, gridSize);
    }
    ImGui::Separator();
    const ImVec2 rest = ImGui::GetContentRegionAvail();
    ImGui::BeginChild("lines", ImVec2(rest.x * 0.5f, std::max(rest.y, 120.0f)));
    drawLinesView(state, ImVec2(rest.x * 0.5f, std::max(rest.y, 120.0f)));
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("embedding", ImVec2(0, std::max(rest.y, 120.0f)));
    if (m.isDecoder()) drawPredictionsPanel(state);
    else drawEmbeddingPanel(state);
    ImGui::EndChild();
    ImGui::End();
}

bool modelViewShown(const AppState& state)
{
    const ModelState& m = state.model;
    return m.active && m.showView;  // before the first run too: the panel then shows its progress
}

namespace {

// The sidebar's last row, with a run or before one: another model, and a decoder's text from a file.
void drawOpenButtons(AppState& state)
{
    ModelState& m = state.model;
    if (ImGui::Button("Open model…")) m.showOpenDialog = true;
    if (m.isDecoder()) {
        ImGui::SameLine();
        if (ImGui::Button("Open text…")) m.showTextDialog = true;  // as File → Open text…
        state.recordRect("model/sidebar_open_text", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    }
}

// The decoder's weight matrices by storage type: "weights: 5.1 bits a weight, Q4_1 79%, Q8_0 21%" (each type and
// its share joined by a no-break space, so that the sidebar's wrapping keeps them together), each type's matrices,
// weights and bytes on hover.
void drawWeightFormats(AppState& state)
{
    const ModelState& m = state.model;
    if (m.weightFormats.empty()) return;
    char text[64];
    std::snprintf(text, sizeof text, "weights: %.2g bits a weight", attn::bitsPerWeight(m.weightFormats));
    std::string line = text;
    for (const attn::WeightFormat& f : m.weightFormats) {
        std::snprintf(text, sizeof text, ", %s\u00a0%.0f%%", attn::ggmlTypeName(f.type), 100.0 * f.share);
        line += text;
    }
    ImGui::TextDisabled("%s", line.c_str());
    state.recordRect("control/model_weights", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (!ImGui::IsItemHovered()) return;
    ImGui::BeginTooltip();
    ImGui::TextUnformatted("The weight matrices (projections, feed-forward, embedding, LM head) as the model holds them;\n"
                           "norms and biases are float32. The maps are those of these weights.");
    if (m.decoder->format != "gguf")
        ImGui::TextUnformatted("A Hugging Face directory's weights are float32 in memory, whatever their dtype on disk.");
    if (ImGui::BeginTable("weight_formats", 5, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
        for (const char* h : {"storage", "matrices", "weights", "bytes", "bits a weight"}) ImGui::TableSetupColumn(h);
        ImGui::TableHeadersRow();
        for (const attn::WeightFormat& f : m.weightFormats) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(attn::ggmlTypeName(f.type));
            ImGui::TableNextColumn();
            ImGui::Text("%d", f.matrices);
            ImGui::TableNextColumn();
            ImGui::Text("%.1f M", double(f.weights) / 1e6);
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(formatBytes(f.bytes).c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%.2f", f.bitsPerWeight());
        }
        ImGui::EndTable();
    }
    const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    state.recordRect("model/weights_tooltip", pos, ImVec2(pos.x + size.x, pos.y + size.y));
    ImGui::EndTooltip();
}

} // namespace

void drawModelSidebar(AppState& state)
{
    ModelState& m = state.model;
    ImGui::TextWrapped("%s", m.modelName().c_str());
    state.recordRect("control/model_summary", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::PushTextWrapPos(0.0f);  // the sidebar is narrow: the summary lines wrap
    if (m.isDecoder()) {
        const attn::DecoderConfig& c = m.decoder->config;
        ImGui::TextDisabled("%s decoder, %d layers × %d heads", c.architecture.c_str(), c.layers, c.heads);
        if (c.kvHeads != c.heads) ImGui::TextDisabled("grouped-query: %d heads share each of %d KV heads", c.heads / c.kvHeads, c.kvHeads);
        ImGui::TextDisabled("d_model %d, d_k %d per head, vocabulary %d", c.hidden, c.headDim, c.vocab);
        ImGui::TextDisabled("context %d tokens, %s", c.maxPositions, m.decoder->format.c_str());
        drawWeightFormats(state);
    } else {
        const attn::ModelConfig& c = m.model->config;
        ImGui::TextDisabled("%s, %d layers × %d heads", c.modelType.empty() ? "model" : c.modelType.c_str(), c.layers, c.heads);
        ImGui::TextDisabled("d_model %d, d_k %d per head", c.hidden, c.heads > 0 ? c.hidden / c.heads : 0);
    }
    ImGui::PopTextWrapPos();
    ImGui::Separator();
    if (!m.hasRun()) {
        ImGui::TextWrapped(m.computing() ? "First run under way: the views appear when it is whole."
                                         : "No run yet: see the model window.");
        ImGui::Separator();
        drawOpenButtons(state);
        return;
    }
    const RunView run = m.shownRun();
    const std::size_t n = run.tokens.size();
    if (m.isDecoder()) {
        ImGui::TextWrapped("%zu of %d tokens (the model's context)%s", n, m.decoder->config.maxPositions,
                           m.longRun() ? ", a long text: maps rebuilt on demand" : "");
        state.recordRect("model/token_count", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (!m.textPath.empty())
            ImGui::TextDisabled("text from %s", std::filesystem::path(m.textPath).filename().string().c_str());
        // The run's warnings (a text cut at the context) stay here while the run is shown, not only as a toast.
        for (const std::string& w : m.drun->warnings) {
            ImGui::PushTextWrapPos(0.0f);
            ImGui::TextColored(ImVec4(0.95f, 0.7f, 0.25f, 1), "%s", w.c_str());
            ImGui::PopTextWrapPos();
            state.recordRect("model/run_warning", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        }
    } else {
        ImGui::Text("%zu token%s%s", n, n == 1 ? "" : "s", m.textB.empty() ? "" : " (A and B)");
    }
    const std::size_t k = run.ablated.size();
    ImGui::Text("%zu head%s ablated", k, k == 1 ? "" : "s");
    ImGui::BeginDisabled(k == 0);
    if (ImGui::Button("Restore all heads")) {
        while (!m.wanted.ablated.empty()) {
            const auto [l, h] = m.wanted.ablated.back();
            toggleAblation(state, l, h);
        }
    }
    ImGui::EndDisabled();
    ImGui::Separator();
    if (m.longRun())
        ImGui::TextWrapped("A long text: no map is kept whole; each thumbnail is made from Q, K and the softmax's "
                           "statistics, and appears when done. Click one to open that head's map: the wheel zooms from "
                           "the whole map (each pixel the largest weight of its block) to single cells.");
    else
    ImGui::TextWrapped(m.isDecoder() ? "Click a thumbnail: open that layer and head in the chain view (edit its Q, K, V "
                                       "and W^O; Esc or Back returns here). Right-click: show its lines. The × in its "
                                       "corner (on hover) ablates it: watch the predictions move."
                                     : "Click a thumbnail: open that layer and head in the chain view (edit its X and "
                                       "weights; Esc or Back returns here). Right-click: show its lines. The × in its "
                                       "corner (on hover) ablates it.");
    ImGui::Separator();
    drawOpenButtons(state);
}

void drawModelStatus(AppState& state, const std::string& backend)
{
    const ModelState& m = state.model;
    const std::size_t n = m.hasRun() ? m.shownRun().tokens.size() : static_cast<std::size_t>(m.runTokens());
    const std::string heads = std::to_string(m.heads()) + (m.kvHeads() != m.heads() ? " (" + std::to_string(m.kvHeads()) + " kv)" : "");
    if (m.computing())
        ImGui::Text("%s   |   model %s: computing… %.0f ms   |   %zu tokens  layers=%d  heads=%s", backend.c_str(),
                    m.modelName().c_str(), m.computingMs(), n, m.layers(), heads.c_str());
    else if (!m.hasRun())
        ImGui::Text("%s   |   model %s: no run yet   |   layers=%d  heads=%s", backend.c_str(), m.modelName().c_str(),
                    m.layers(), heads.c_str());
    else
        ImGui::Text("%s   |   model %s: run %.0f ms   |   %zu tokens  layers=%d  heads=%s", backend.c_str(),
                    m.modelName().c_str(), m.lastRunMs, n, m.layers(), heads.c_str());
    state.recordRect("status/model", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
}

void drawModelBreadcrumb(AppState& state)
{
    ModelState& m = state.model;
    if (m.openLayer < 0 || (!m.model && !m.decoder) || m.showView) return;
    const bool back = ImGui::Button("< Back");
    state.recordRect("model/back", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    const int H = state.doc.hasResult() ? static_cast<int>(state.doc.result().heads.size()) : m.heads();
    ImGui::Text("%s › layer %d › head %d", m.modelName().c_str(), m.openLayer, std::clamp(state.view.head, 0, std::max(0, H - 1)));
    state.recordRect("model/breadcrumb", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::TextDisabled(m.isDecoder() ? "(Esc or Back: the model view; right-click a weight: why it attends there)"
                                      : "(Esc or Back: the model view)");
    // Esc goes back unless a field is being typed in (it cancels that) or a map fills the window (Esc leaves
    // that first, in the chain panel).
    const bool esc = ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false) && !ImGui::GetIO().WantTextInput &&
                     state.chain.focus.empty();
    if (back || esc) m.showView = true;
}

void drawModelOpenDialog(AppState& state)
{
    ModelState& m = state.model;
    // Once per frame: installs a model whose files finished reading, and chain-view edits of the opened layer
    // flow back into the model.
    syncModelEdits(state);
    if (!m.showOpenDialog) return;
    if (m.dirField.empty()) m.dirField = defaultDecoderPath();
    // 560 pixels wide; as tall as its lines (a "loading" line or an error comes and goes).
    ImGui::SetNextWindowSizeConstraints(ImVec2(560, 0), ImVec2(560, FLT_MAX));
    if (ImGui::Begin("Open model", &m.showOpenDialog, ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::TextWrapped("A .gguf file (a decoder: llama, qwen2, gpt2 architectures), or a Hugging Face directory: a BERT "
                           "encoder or a gpt2 / llama / mistral / qwen2 decoder (config.json, model.safetensors or its "
                           "shards, tokenizer.json). Or an attention bundle (.safetensors of attn.<layer> maps, "
                           "docs/bundle.md) that another program saved.");
        ImGui::SetNextItemWidth(-1);
        wantGlyphs(m.dirField);
        const bool enter = ImGui::InputText("##dir", &m.dirField, ImGuiInputTextFlags_EnterReturnsTrue);
        state.recordRect("model/open_dir", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        // The files are read in the background (the window keeps drawing): Open again for the same directory
        // would only restart that read; another directory replaces the request.
        const bool same = m.loading() && m.loadingDir() == m.dirField;
        ImGui::BeginDisabled(same);
        const bool open = ImGui::Button("Open");
        ImGui::EndDisabled();
        state.recordRect("model/open", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if ((open || enter) && !same) {
            if (isBundlePath(m.dirField)) {
                // An attention bundle (docs/bundle.md): only its header is read, so it opens at once.
                const attn::Status s = openBundleInWindow(state, m.dirField);
                m.openError = s.ok() ? std::string() : s.message;
                if (s.ok()) m.showOpenDialog = false;
            } else {
                requestOpenModel(state, m.dirField);
            }
        }
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) m.showOpenDialog = false;
        if (m.loading()) {
            ImGui::TextDisabled("loading %s… %.1f s", m.loadingDir().c_str(), m.loadingMs() / 1000.0);
            state.recordRect("model/open_loading", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        } else if (!m.openError.empty()) {
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(0.85f, 0.2f, 0.2f, 1), "%s", m.openError.c_str());
            ImGui::PopTextWrapPos();
            state.recordRect("model/open_error", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        }
    }
    ImGui::End();
    if (!m.showOpenDialog) cancelOpenModel(state);  // closed (Cancel or its ×) while reading: the request ends
}

void drawModelTextDialog(AppState& state)
{
    ModelState& m = state.model;
    if (!m.showTextDialog) return;
    if (!m.isDecoder()) {  // the model was replaced by an encoder while the dialog was open
        m.showTextDialog = false;
        return;
    }
    if (m.textPathField.empty()) m.textPathField = m.textPath;
    ImGui::SetNextWindowSizeConstraints(ImVec2(560, 0), ImVec2(560, FLT_MAX));
    if (ImGui::Begin("Open text", &m.showTextDialog, ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_AlwaysAutoResize)) {
        const int context = m.decoder->config.maxPositions;
        const std::string lazy = context > kLazyTokens ? " Past " + std::to_string(kLazyTokens) +
                                                             " tokens it runs lazily (maps rebuilt on demand)."
                                                       : std::string();
        ImGui::TextWrapped("A UTF-8 text file (up to %s) becomes the text of %s, as if typed.%s Past the model's "
                           "context of %d tokens it is cut there.",
                           formatBytes(kMaxTextFileBytes).c_str(), m.modelName().c_str(), lazy.c_str(), context);
        ImGui::SetNextItemWidth(-1);
        wantGlyphs(m.textPathField);
        const bool enter = ImGui::InputTextWithHint("##textpath", "path/to/text.txt", &m.textPathField,
                                                    ImGuiInputTextFlags_EnterReturnsTrue);
        state.recordRect("model/open_text_path", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        ImGui::BeginDisabled(m.textPathField.empty());
        const bool open = ImGui::Button("Open");
        ImGui::EndDisabled();
        state.recordRect("model/open_text", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        // The file is read here, on the frame (4 MiB at most, a regular file: readFile never blocks on a pipe);
        // its tokens are made and run on the worker.
        if ((open || enter) && !m.textPathField.empty()) (void)openModelText(state, m.textPathField);
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) m.showTextDialog = false;
        if (!m.textOpenError.empty()) {
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(0.85f, 0.2f, 0.2f, 1), "%s", m.textOpenError.c_str());
            ImGui::PopTextWrapPos();
            state.recordRect("model/open_text_error", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
            ImGui::TextDisabled("The text and the run shown stay as they were.");
        }
    }
    ImGui::End();
    if (!m.showTextDialog) m.textOpenError.clear();  // a new dialog starts without the old file's error
}

} // namespace app
