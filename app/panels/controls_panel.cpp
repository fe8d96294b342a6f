// Controls: layout, mode, heads, score, scale, masks, fill, sizes, tokens, colormaps. Every change is one
// undo step on the document; typed values out of range are refused in place with the reason.
#include "messages.h"
#include "panels/glyph_atlas.h"
#include "panels/model_panels.h"
#include "panels/panels.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace app {
namespace {

bool radio(const char* label, bool active)
{
    const bool clicked = ImGui::RadioButton(label, active);
    return clicked && !active;
}

void errorLine(const std::string& e)
{
    if (!e.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", e.c_str());
}

// An integer size field: returns true with the new value when the user committed an accepted one.
bool sizeField(AppState& state, const char* label, int value, int lo, int hi, int* out)
{
    std::string& error = state.docUi.sizeError;
    int v = value;
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt(label, &v, 1, 8, ImGuiInputTextFlags_EnterReturnsTrue) || (v != value && ImGui::IsItemDeactivatedAfterEdit())) {
        if (v < lo || v > hi) {
            error = std::string(label) + ": expected " + std::to_string(lo) + "…" + std::to_string(hi) + ", got " + std::to_string(v);
            postWarning(error);
            return false;
        }
        *out = v;
        return v != value;
    }
    return false;
}

void applySizes(AppState& state, const Sizes& z)
{
    attn::Status st = state.doc.setSizes(z);
    if (!st.ok()) {
        state.docUi.sizeError = st.message;
        postWarning(st.message);
    } else {
        state.docUi.sizeError.clear();
    }
}

void drawSizes(AppState& state)
{
    const Sizes z = state.doc.sizes();
    const attn::AttentionConfig& cfg = state.doc.session().config;
    const bool direct = cfg.mode == attn::Mode::Direct;
    Sizes nz = z;
    int v = 0;
    if (sizeField(state, "n (queries)", z.T, 1, kMaxTokens, &v)) { nz.T = v; if (cfg.mode == attn::Mode::Self) nz.S = v; applySizes(state, nz); return; }
    if (cfg.mode != attn::Mode::Self && sizeField(state, "n_kv (keys)", z.S, 1, kMaxTokens, &v)) { nz.S = v; applySizes(state, nz); return; }
    if (!direct && sizeField(state, "d_model", z.M, 1, kMaxWidth, &v)) { nz.M = v; applySizes(state, nz); return; }
    if (direct && cfg.score == attn::Score::Additive && sizeField(state, "d_q (per head)", z.dq, 1, kMaxWidth, &v)) { nz.dq = v; applySizes(state, nz); return; }
    if (sizeField(state, "d_k (per head)", z.dk, 1, kMaxWidth, &v)) {
        nz.dk = v;
        if (!(direct && cfg.score == attn::Score::Additive)) nz.dq = v;
        applySizes(state, nz);
        return;
    }
    if (sizeField(state, "d_v (per head)", z.dv, 1, kMaxWidth, &v)) { nz.dv = v; applySizes(state, nz); return; }
    if (state.doc.present(MatrixId::Wo) && sizeField(state, "d_out", z.O, 1, kMaxWidth, &v)) { nz.O = v; applySizes(state, nz); return; }
    if (cfg.score == attn::Score::Additive && sizeField(state, "a (additive)", z.A, 1, kMaxWidth, &v)) { nz.A = v; applySizes(state, nz); return; }
    errorLine(state.docUi.sizeError);
}

// KV heads (grouped-query attention): only the divisors of H are offered; H is multi-head attention, 1
// multi-query. Each KV head keeps d_k and d_v: W^K, W^V (K, V in direct mode) grow or shrink by whole KV heads.
// Drawn on the heads line, and only with several heads (one head has nothing to share), so that the panel's
// layout below does not move.
void drawKvHeads(AppState& state)
{
    const Sizes z = state.doc.sizes();
    if (z.H < 2) return;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(44);
    const std::string current = std::to_string(z.Hkv);
    if (ImGui::BeginCombo("kv", current.c_str())) {
        for (int kv = 1; kv <= z.H; ++kv) {
            if (z.H % kv != 0) continue;
            const std::string label = kv == z.H ? std::to_string(kv) + " (MHA)" : kv == 1 ? "1 (MQA)" : std::to_string(kv);
            if (ImGui::Selectable(label.c_str(), kv == z.Hkv) && kv != z.Hkv) {
                const attn::Status st = state.doc.setKvHeads(kv);
                state.docUi.sizeError = st.ok() ? "" : st.message;
                if (!st.ok()) postWarning(st.message);
            }
        }
        ImGui::EndCombo();
    }
    state.recordRect("control/kv_heads", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("KV heads (grouped-query attention): the %d query heads share this many key/value heads\n"
                          "(groups of H / H_kv query heads read the same K and V). %d = multi-head, 1 = multi-query.",
                          z.H, z.H);
}

// Heads: each head keeps d_k and d_v (whole heads are added, with seeded weights, or removed), unless "keep
// d_model×d_model" is on: then the projections keep their shape and are split into the new number of heads.
void drawHeads(AppState& state)
{
    const attn::AttentionConfig& cfg = state.doc.session().config;
    int heads = cfg.heads;
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt("heads", &heads, 1, 1, ImGuiInputTextFlags_EnterReturnsTrue) || (heads != cfg.heads && ImGui::IsItemDeactivatedAfterEdit())) {
        if (heads != cfg.heads) {
            const attn::Status st = state.doc.setHeads(heads, state.docUi.keepDModel && cfg.mode != attn::Mode::Direct);
            state.docUi.sizeError = st.ok() ? "" : st.message;
            if (!st.ok()) postWarning(st.message);
        }
    }
    state.recordRect("control/heads", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    drawKvHeads(state);  // "KV heads", on the same line
    if (cfg.mode != attn::Mode::Direct) {
        ImGui::Checkbox("keep d_model×d_model", &state.docUi.keepDModel);
        state.recordRect("control/keep_dmodel", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("On: W^Q, W^K, W^V keep their shape and are split into the heads (d_k = width / h).\n"
                              "Off: every head keeps d_k and d_v; new heads get seeded random weights, removed\n"
                              "heads' weights come back when the heads are increased again.");
    }
}

void drawTokens(AppState& state)
{
    const attn::Session& ss = state.doc.session();
    const bool selfMode = ss.config.mode == attn::Mode::Self;
    auto editList = [&](const char* id, bool keys) {
        const auto& list = keys ? ss.keyTokens : ss.queryTokens;
        const int n = keys ? state.doc.sizes().S : state.doc.sizes().T;
        ImGui::PushID(id);
        for (int i = 0; i < n; ++i) {
            std::string label = i < static_cast<int>(list.size()) ? list[static_cast<std::size_t>(i)] : std::to_string(i);
            ImGui::PushID(i);
            ImGui::SetNextItemWidth(62);
            wantGlyphs(label);
            if (ImGui::InputText("##t", &label, ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll)) {
                state.doc.edit([&](attn::Session& s) {
                    auto& l = keys ? s.keyTokens : s.queryTokens;
                    if (static_cast<int>(l.size()) != n) {
                        l.resize(static_cast<std::size_t>(n));
                        for (int k = 0; k < n; ++k)
                            if (l[static_cast<std::size_t>(k)].empty()) l[static_cast<std::size_t>(k)] = std::to_string(k);
                    }
                    l[static_cast<std::size_t>(i)] = label;
                    if (s.config.mode == attn::Mode::Self) s.keyTokens = s.queryTokens;
                });
            }
            ImGui::PopID();
            if ((i + 1) % 4 != 0 && i + 1 < n) ImGui::SameLine();
            if (i >= 63) {  // label fields for very long sequences would fill the panel
                ImGui::TextDisabled("… %d more", n - 64);
                break;
            }
        }
        ImGui::PopID();
    };
    ImGui::TextDisabled(selfMode ? "tokens" : "query tokens");
    editList("q", false);
    ImGui::SetNextItemWidth(200);
    wantGlyphs(state.docUi.sentence);
    ImGui::InputTextWithHint("##sentence", "type a sentence…", &state.docUi.sentence);
    state.recordRect("control/sentence", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("One token per word. Each distinct word gets one embedding row: the row it already had,\n"
                          "or one seeded by the word (the same word always gets the same vector).");
    ImGui::SameLine();
    if (ImGui::Button("Set")) {
        attn::Status st = state.doc.setTokensFromSentence(state.docUi.sentence, false);
        state.docUi.tokenError = st.ok() ? "" : st.message;
    }
    state.recordRect("control/sentence_set", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (!selfMode) {
        ImGui::TextDisabled("key tokens");
        editList("k", true);
        ImGui::SetNextItemWidth(200);
        wantGlyphs(state.docUi.keySentence);
        ImGui::InputTextWithHint("##ksentence", "key sentence…", &state.docUi.keySentence);
        ImGui::SameLine();
        if (ImGui::Button("Set##k")) {
            attn::Status st = state.doc.setTokensFromSentence(state.docUi.keySentence, true);
            state.docUi.tokenError = st.ok() ? "" : st.message;
        }
    }
    errorLine(state.docUi.tokenError);
}

// A label cut to `n` characters (with "…") so that a row of boxes keeps its columns.
std::string truncated(const std::string& s, std::size_t n)
{
    if (s.size() <= n) return s;
    std::size_t cut = n - 1;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    return s.substr(0, cut) + "…";
}

// "k3", "q0": a token without a label. (Not "k" + std::to_string(i): GCC 12's -Wrestrict misfires on it.)
std::string indexName(char prefix, int i)
{
    std::string s = std::to_string(i);
    s.insert(s.begin(), prefix);
    return s;
}

// Key padding as its own control: a checkbox turns it on (no key padded yet), then one checkbox per key,
// labelled with the key's token. Clicking a key's label on the scores or weights toggles it too.
void drawKeyPadding(AppState& state, int S)
{
    const attn::Session& ss = state.doc.session();
    const attn::MaskSpec& m = ss.input.mask;
    bool on = !m.keyPadding.empty();
    if (ImGui::Checkbox("key padding", &on))
        state.doc.edit([&](attn::Session& s) {
            if (on) s.input.mask.keyPadding.assign(static_cast<std::size_t>(S), 0);
            else s.input.mask.keyPadding.clear();
        });
    state.recordRect("control/key_padding", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("Masks chosen keys for every query (a batch's <pad> tokens).\n"
                          "Also: click a key's label on the scores or weights.");
    if (!on) return;
    const auto pad = m.keyPadding;
    const auto& keys = ss.keyTokens;
    for (int k = 0; k < S && k < static_cast<int>(pad.size()); ++k) {
        ImGui::PushID(k);
        bool p = pad[static_cast<std::size_t>(k)] != 0;
        const std::string name = k < static_cast<int>(keys.size()) ? keys[static_cast<std::size_t>(k)] : indexName('k', k);
        if (ImGui::Checkbox(truncated(name, 7).c_str(), &p))
            state.doc.edit([&](attn::Session& s) {
                if (static_cast<int>(s.input.mask.keyPadding.size()) > k) s.input.mask.keyPadding[static_cast<std::size_t>(k)] = p ? 1 : 0;
            });
        if (k == 0) state.recordRect("control/key_padding/0", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("key %d (%s): masked for every query when checked", k, name.c_str());
        ImGui::PopID();
        if (k >= 62 && k + 1 < S) {  // boxes for very long sequences would fill the panel
            ImGui::TextDisabled("… %d more (click key labels on the weights)", S - 63);
            break;
        }
        if (k % 3 != 2 && k + 1 < S) ImGui::SameLine(10.0f + static_cast<float>((k + 1) % 3) * 82.0f);
    }
}

void drawMasks(AppState& state)
{
    const attn::Session& ss = state.doc.session();
    const attn::MaskSpec& m = ss.input.mask;
    const Sizes z = state.doc.sizes();
    const int S = ss.config.mode == attn::Mode::Self ? z.T : z.S;
    bool causal = m.causal;
    if (ImGui::Checkbox("causal", &causal)) state.doc.edit([&](attn::Session& s) { s.input.mask.causal = causal; });
    state.recordRect("control/causal", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());

    drawKeyPadding(state, S);

    bool valid = !m.validLens.empty();
    if (ImGui::Checkbox("valid lengths", &valid))
        state.doc.edit([&](attn::Session& s) {
            if (valid) s.input.mask.validLens.assign(static_cast<std::size_t>(z.T), S);
            else s.input.mask.validLens.clear();
        });
    state.recordRect("control/valid_lengths", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (valid) {
        // One box per query, labelled with the query it belongs to (the token, or its index).
        const auto lens = m.validLens;
        const auto& q = ss.queryTokens;
        for (int i = 0; i < static_cast<int>(lens.size()) && i < 64; ++i) {
            int v = lens[static_cast<std::size_t>(i)];
            ImGui::PushID(i);
            const std::string name = i < static_cast<int>(q.size()) && lens.size() > 1 ? q[static_cast<std::size_t>(i)]
                                     : lens.size() > 1                                ? indexName('q', i)
                                                                                      : "all queries";
            ImGui::AlignTextToFramePadding();
            ImGui::TextUnformatted(lens.size() > 1 ? truncated(name, 8).c_str() : name.c_str());
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("query %d (%s): keys from this index on are masked", i, name.c_str());
            ImGui::SameLine(lens.size() == 1 ? 0.0f : i % 2 == 0 ? 70.0f : 195.0f);  // two columns
            ImGui::SetNextItemWidth(50);
            if (ImGui::InputInt("##vl", &v, 0, 0, ImGuiInputTextFlags_EnterReturnsTrue) || (v != lens[static_cast<std::size_t>(i)] && ImGui::IsItemDeactivatedAfterEdit())) {
                if (v < 0 || v > S) {
                    state.docUi.validError = "valid length of query " + std::to_string(i) + " (" + name + "): expected 0…" + std::to_string(S) + ", got " + std::to_string(v);
                    postWarning(state.docUi.validError);
                } else {
                    state.docUi.validError.clear();
                    state.doc.edit([&](attn::Session& s) {
                        if (s.input.mask.validLens.size() == 1) s.input.mask.validLens.assign(static_cast<std::size_t>(z.T), s.input.mask.validLens[0]);
                        s.input.mask.validLens[static_cast<std::size_t>(i)] = v;
                    });
                }
            }
            if (i == 0) state.recordRect("control/valid_length/0", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
            ImGui::PopID();
            if (i % 2 == 0 && i + 1 < static_cast<int>(lens.size()) && i + 1 < 64) ImGui::SameLine(132.0f);
        }
        errorLine(state.docUi.validError);
    }
    bool paint = state.paintMask;
    if (ImGui::Checkbox("paint custom mask", &paint)) state.paintMask = paint;
    state.recordRect("control/paint_mask", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Click or drag on the weights to mask (1) or unmask (0) cells.");
    if (m.custom.size() > 0) {
        // Whether painting or not, the mask stays in force until cleared: say so, with the way to clear it.
        const long masked = static_cast<long>(m.custom.cast<int>().sum());
        ImGui::PushStyleColor(ImGuiCol_Text, masked > 0 ? ImVec4(1.0f, 0.8f, 0.35f, 1.0f) : ImVec4(0.6f, 0.6f, 0.6f, 1.0f));
        ImGui::TextWrapped("custom mask %s: %ld of %ld cells masked%s", masked > 0 ? "active" : "set", masked,
                           static_cast<long>(m.custom.size()), paint ? "" : " (not painting)");
        ImGui::PopStyleColor();
        if (ImGui::Button("clear custom mask")) state.doc.edit([](attn::Session& s) { s.input.mask.custom.resize(0, 0); });
        state.recordRect("control/clear_custom_mask", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    } else if (paint) {
        ImGui::TextDisabled("click the weights to mask cells");
    }
    ImGui::TextUnformatted("fill");
    const float fill = m.fill;
    ImGui::SameLine();
    if (radio("-inf", std::isinf(fill))) state.doc.edit([](attn::Session& s) { s.input.mask.fill = -std::numeric_limits<float>::infinity(); });
    ImGui::SameLine();
    if (radio("-1e6", fill == -1e6f)) state.doc.edit([](attn::Session& s) { s.input.mask.fill = -1e6f; });
    ImGui::SameLine();
    if (radio("-1e9", fill == -1e9f)) state.doc.edit([](attn::Session& s) { s.input.mask.fill = -1e9f; });
}

void drawColormaps(AppState& state)
{
    static const char* kinds[kHeatmapKinds] = {"Q, K, V", "scores", "weights", "outputs"};
    const attn::Colormap maps[] = {attn::Colormap::Viridis, attn::Colormap::Magma, attn::Colormap::Cividis, attn::Colormap::RdBu};
    for (int k = 0; k < kHeatmapKinds; ++k) {
        ImGui::SetNextItemWidth(110);
        if (ImGui::BeginCombo(kinds[k], attn::toString(state.view.colormaps[k]))) {
            for (attn::Colormap c : maps)
                if (ImGui::Selectable(attn::toString(c), c == state.view.colormaps[k])) state.view.colormaps[k] = c;
            ImGui::EndCombo();
        }
    }
    ImGui::Checkbox("shared colour range over heads", &state.view.sharedRange);
    ImGui::Checkbox("values in cells", &state.view.showValues);
    ImGui::SetNextItemWidth(110);
    ImGui::SliderFloat("zoom", &state.view.zoom, 0.25f, 8.0f, "%.2f", ImGuiSliderFlags_Logarithmic);
}

} // namespace

void drawControlsPanel(AppState& state)
{
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(vp->WorkPos);
    ImGui::SetNextWindowSize(ImVec2(kControlsWidth, vp->WorkSize.y - kStatusBarHeight));
    ImGui::Begin("Controls", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                          ImGuiWindowFlags_NoBringToFrontOnFocus);
    if (bundleViewShown(state)) {  // the bundle's summary, not the controls of the session under its view
        drawBundleSidebar(state);
        ImGui::End();
        return;
    }
    if (modelViewShown(state)) {  // the model's controls, not those of the session under the model view
        drawModelSidebar(state);
        ImGui::End();
        return;
    }
    const attn::Session& ss = state.doc.session();
    const attn::AttentionConfig& cfg = ss.config;
    if (!ss.name.empty()) ImGui::TextWrapped("%s", ss.name.c_str());
    // A model layer opened in the chain view (state/model_state.h): its shape, score function, masks and
    // tokens are the model's, so the controls that would change them (and break the link) are disabled.
    const bool modelLayer = state.model.openLayer >= 0 && (state.model.model || state.model.decoder);
    if (modelLayer) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextWrapped("layer %d of %s: its shape is the model's", state.model.openLayer, state.model.modelName().c_str());
        ImGui::PopStyleColor();
        state.recordRect("control/model_link", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("Layout, mode, heads, score, masks, sizes and tokens are fixed by the model; edit any number\n"
                              "of X or the weights in the chain view, and the text in the model view.");
    }
    ImGui::BeginDisabled(modelLayer);

    ImGui::TextUnformatted("layout");
    ImGui::SameLine();
    if (radio("row", cfg.layout == attn::Layout::Row)) state.doc.edit([](attn::Session& s) { s.config.layout = attn::Layout::Row; });
    ImGui::SameLine();
    if (radio("column", cfg.layout == attn::Layout::Column)) state.doc.edit([](attn::Session& s) { s.config.layout = attn::Layout::Column; });
    state.recordRect("control/layout_column", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());

    ImGui::TextUnformatted("mode  ");
    ImGui::SameLine();
    if (radio("self", cfg.mode == attn::Mode::Self)) state.doc.setMode(attn::Mode::Self);
    ImGui::SameLine();
    if (radio("cross", cfg.mode == attn::Mode::Cross)) state.doc.setMode(attn::Mode::Cross);
    ImGui::SameLine();
    if (radio("direct", cfg.mode == attn::Mode::Direct)) state.doc.setMode(attn::Mode::Direct);

    drawHeads(state);

    ImGui::TextUnformatted("score");
    if (radio("scaled dot", cfg.score == attn::Score::ScaledDot)) state.doc.setScore(attn::Score::ScaledDot);
    ImGui::SameLine();
    if (radio("dot", cfg.score == attn::Score::Dot)) state.doc.setScore(attn::Score::Dot);
    ImGui::SameLine();
    if (radio("additive", cfg.score == attn::Score::Additive)) state.doc.setScore(attn::Score::Additive);

    if (cfg.score != attn::Score::Additive) {
        bool over = cfg.scale.has_value();
        if (ImGui::Checkbox("scale override", &over))
            state.doc.edit([&](attn::Session& s) {
                if (over) s.config.scale = state.doc.hasResult() ? state.doc.result().scale : 1.0f;
                else s.config.scale.reset();
            });
        if (over) {
            ImGui::SameLine();
            float sc = cfg.scale.value_or(1.0f);
            ImGui::SetNextItemWidth(90);
            if (ImGui::InputFloat("##scale", &sc, 0, 0, "%.5g", ImGuiInputTextFlags_EnterReturnsTrue)) {
                if (!std::isfinite(sc)) {
                    state.docUi.scaleError = "scale: expected a finite number";
                    postWarning(state.docUi.scaleError);
                } else {
                    state.docUi.scaleError.clear();
                    state.doc.edit([&](attn::Session& s) { s.config.scale = sc; });
                }
            }
        }
        errorLine(state.docUi.scaleError);
    }
    bool wo = state.doc.present(MatrixId::Wo);
    if (ImGui::Checkbox("W^O", &wo)) state.doc.setPresent(MatrixId::Wo, wo);
    if (wo) {
        bool bo = state.doc.present(MatrixId::Bo);
        ImGui::SameLine();
        if (ImGui::Checkbox("b^O", &bo)) state.doc.setPresent(MatrixId::Bo, bo);
    }
    if (cfg.mode != attn::Mode::Direct) {
        ImGui::TextDisabled("biases");
        for (MatrixId id : {MatrixId::Bq, MatrixId::Bk, MatrixId::Bv}) {
            ImGui::SameLine();
            bool on = state.doc.present(id);
            if (ImGui::Checkbox(matrixName(id), &on)) state.doc.setPresent(id, on);
        }
    }

    if (ImGui::CollapsingHeader("Masks", ImGuiTreeNodeFlags_DefaultOpen)) drawMasks(state);
    if (ImGui::CollapsingHeader("Sizes", ImGuiTreeNodeFlags_DefaultOpen)) drawSizes(state);
    if (ImGui::CollapsingHeader("Tokens")) drawTokens(state);
    ImGui::EndDisabled();
    if (ImGui::CollapsingHeader("Colormaps and view")) drawColormaps(state);
    if (!ss.description.empty() && ImGui::CollapsingHeader("About this session")) ImGui::TextWrapped("%s", ss.description.c_str());
    ImGui::End();
}

} // namespace app
