// Controls: layout, mode, heads, score, scale, masks, fill, sizes, tokens, colormaps. Every change is one
// undo step on the document; typed values out of range are refused in place with the reason.
#include "messages.h"
#include "panels/panels.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace app {
namespace {

// Per-field refusal messages, shown under the field until the next valid change.
std::string g_sizeError, g_scaleError, g_validError, g_tokenError;
std::string g_sentence, g_keySentence;

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
bool sizeField(const char* label, int value, int lo, int hi, int* out)
{
    int v = value;
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt(label, &v, 1, 8, ImGuiInputTextFlags_EnterReturnsTrue) || (v != value && ImGui::IsItemDeactivatedAfterEdit())) {
        if (v < lo || v > hi) {
            g_sizeError = std::string(label) + ": expected " + std::to_string(lo) + "…" + std::to_string(hi) + ", got " + std::to_string(v);
            postWarning(g_sizeError);
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
        g_sizeError = st.message;
        postWarning(st.message);
    } else {
        g_sizeError.clear();
    }
}

void drawSizes(AppState& state)
{
    const Sizes z = state.doc.sizes();
    const attn::AttentionConfig& cfg = state.doc.session().config;
    const bool direct = cfg.mode == attn::Mode::Direct;
    Sizes nz = z;
    int v = 0;
    if (sizeField("n (queries)", z.n, 1, kMaxTokens, &v)) { nz.n = v; if (cfg.mode == attn::Mode::Self) nz.nkv = v; applySizes(state, nz); return; }
    if (cfg.mode != attn::Mode::Self && sizeField("n_kv (keys)", z.nkv, 1, kMaxTokens, &v)) { nz.nkv = v; applySizes(state, nz); return; }
    if (!direct && sizeField("d_model", z.dModel, 1, kMaxWidth, &v)) { nz.dModel = v; applySizes(state, nz); return; }
    if (direct && cfg.score == attn::Score::Additive && sizeField("d_q (per head)", z.dq, 1, kMaxWidth, &v)) { nz.dq = v; applySizes(state, nz); return; }
    if (sizeField("d_k (per head)", z.dk, 1, kMaxWidth, &v)) {
        nz.dk = v;
        if (!(direct && cfg.score == attn::Score::Additive)) nz.dq = v;
        applySizes(state, nz);
        return;
    }
    if (sizeField("d_v (per head)", z.dv, 1, kMaxWidth, &v)) { nz.dv = v; applySizes(state, nz); return; }
    if (state.doc.present(MatrixId::Wo) && sizeField("d_out", z.dOut, 1, kMaxWidth, &v)) { nz.dOut = v; applySizes(state, nz); return; }
    if (cfg.score == attn::Score::Additive && sizeField("a (additive)", z.additive, 1, kMaxWidth, &v)) { nz.additive = v; applySizes(state, nz); return; }
    errorLine(g_sizeError);
}

// Heads: keeps the total projected width when the new count divides it (splitting d_model into heads, as
// seed 003 does), else keeps the per-head widths (the matrices grow, new heads start at zero).
void setHeads(AppState& state, int heads)
{
    const Sizes z = state.doc.sizes();
    Sizes nz = z;
    nz.heads = heads;
    const int tq = z.heads * z.dq, tk = z.heads * z.dk, tv = z.heads * z.dv;
    if (tk % heads == 0 && tv % heads == 0 && tq % heads == 0) {
        nz.dq = tq / heads;
        nz.dk = tk / heads;
        nz.dv = tv / heads;
    }
    applySizes(state, nz);
}

void drawTokens(AppState& state)
{
    const attn::Session& ss = state.doc.session();
    const bool selfMode = ss.config.mode == attn::Mode::Self;
    auto editList = [&](const char* id, bool keys) {
        const auto& list = keys ? ss.keyTokens : ss.queryTokens;
        const int n = keys ? state.doc.sizes().nkv : state.doc.sizes().n;
        ImGui::PushID(id);
        for (int i = 0; i < n; ++i) {
            std::string label = i < static_cast<int>(list.size()) ? list[static_cast<std::size_t>(i)] : std::to_string(i);
            ImGui::PushID(i);
            ImGui::SetNextItemWidth(62);
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
    ImGui::InputTextWithHint("##sentence", "type a sentence…", &g_sentence);
    ImGui::SameLine();
    if (ImGui::Button("Set")) {
        attn::Status st = state.doc.setTokensFromSentence(g_sentence, false);
        g_tokenError = st.ok() ? "" : st.message;
    }
    if (!selfMode) {
        ImGui::TextDisabled("key tokens");
        editList("k", true);
        ImGui::SetNextItemWidth(200);
        ImGui::InputTextWithHint("##ksentence", "key sentence…", &g_keySentence);
        ImGui::SameLine();
        if (ImGui::Button("Set##k")) {
            attn::Status st = state.doc.setTokensFromSentence(g_keySentence, true);
            g_tokenError = st.ok() ? "" : st.message;
        }
    }
    errorLine(g_tokenError);
}

void drawMasks(AppState& state)
{
    const attn::Session& ss = state.doc.session();
    const attn::MaskSpec& m = ss.input.mask;
    const Sizes z = state.doc.sizes();
    const int S = ss.config.mode == attn::Mode::Self ? z.n : z.nkv;
    bool causal = m.causal;
    if (ImGui::Checkbox("causal", &causal)) state.doc.edit([&](attn::Session& s) { s.input.mask.causal = causal; });
    state.recordRect("control/causal", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine();
    ImGui::TextDisabled("(?)");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Key padding: click a key's label on the scores or weights.");

    bool valid = !m.validLens.empty();
    if (ImGui::Checkbox("valid lengths", &valid))
        state.doc.edit([&](attn::Session& s) {
            if (valid) s.input.mask.validLens.assign(static_cast<std::size_t>(z.n), S);
            else s.input.mask.validLens.clear();
        });
    if (valid) {
        const auto lens = m.validLens;
        for (int i = 0; i < static_cast<int>(lens.size()) && i < 64; ++i) {
            int v = lens[static_cast<std::size_t>(i)];
            ImGui::PushID(i);
            ImGui::SetNextItemWidth(58);
            if (ImGui::InputInt("##vl", &v, 0, 0, ImGuiInputTextFlags_EnterReturnsTrue) || (v != lens[static_cast<std::size_t>(i)] && ImGui::IsItemDeactivatedAfterEdit())) {
                if (v < 0 || v > S) {
                    g_validError = "valid length of query " + std::to_string(i) + ": expected 0…" + std::to_string(S) + ", got " + std::to_string(v);
                    postWarning(g_validError);
                } else {
                    g_validError.clear();
                    state.doc.edit([&](attn::Session& s) {
                        if (s.input.mask.validLens.size() == 1) s.input.mask.validLens.assign(static_cast<std::size_t>(z.n), s.input.mask.validLens[0]);
                        s.input.mask.validLens[static_cast<std::size_t>(i)] = v;
                    });
                }
            }
            ImGui::PopID();
            if ((i + 1) % 4 != 0) ImGui::SameLine();
        }
        ImGui::NewLine();
        errorLine(g_validError);
    }
    bool paint = state.paintMask;
    if (ImGui::Checkbox("paint custom mask on the weights", &paint)) state.paintMask = paint;
    if (m.custom.size() > 0) {
        ImGui::SameLine();
        if (ImGui::SmallButton("clear")) state.doc.edit([](attn::Session& s) { s.input.mask.custom.resize(0, 0); });
    }
    if (!m.keyPadding.empty()) {
        if (ImGui::SmallButton("clear key padding")) state.doc.edit([](attn::Session& s) { s.input.mask.keyPadding.clear(); });
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
    const attn::Session& ss = state.doc.session();
    const attn::AttentionConfig& cfg = ss.config;
    if (!ss.name.empty()) ImGui::TextWrapped("%s", ss.name.c_str());
    // A model layer opened in the chain view (state/model_state.h): its shape, score function, masks and
    // tokens are the model's, so the controls that would change them (and break the link) are disabled.
    const bool modelLayer = state.model.openLayer >= 0 && state.model.model;
    if (modelLayer) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextWrapped("layer %d of %s: its shape is the model's", state.model.openLayer, state.model.model->name.c_str());
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

    int heads = cfg.heads;
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt("heads", &heads, 1, 1, ImGuiInputTextFlags_EnterReturnsTrue) || (heads != cfg.heads && ImGui::IsItemDeactivatedAfterEdit())) {
        if (heads < 1 || heads > kMaxHeads) {
            g_sizeError = "heads: expected 1…" + std::to_string(kMaxHeads) + ", got " + std::to_string(heads);
            postWarning(g_sizeError);
        } else if (heads != cfg.heads) {
            setHeads(state, heads);
        }
    }

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
                    g_scaleError = "scale: expected a finite number";
                    postWarning(g_scaleError);
                } else {
                    g_scaleError.clear();
                    state.doc.edit([&](attn::Session& s) { s.config.scale = sc; });
                }
            }
        }
        errorLine(g_scaleError);
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
