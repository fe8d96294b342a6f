// Lesson 6 (seed 004): the look-ahead mask, key padding and valid-length masked softmax. Masked weights are
// exactly 0 and every row renormalises over the keys left.
#include "lessons/lesson_panels.h"

#include <algorithm>
#include <string>

namespace app {

namespace {

void presetButton(const LessonInputs& in, LessonState& st, const char* label, const char* file)
{
    if (!ImGui::Button(label) || !in.applySession) return;
    auto s = attn::loadSession(in.presetDir + "/" + file);
    if (s) {
        st.presetError.clear();
        in.applySession(std::move(*s));
    } else {
        st.presetError = s.status().message;  // kept until the next successful load
    }
}

} // namespace

void drawMasksPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::Masks, ImVec2(760, 700), open)) return;
    presetButton(in, st, "look-ahead preset", lesson(LessonId::Masks).preset);
    ImGui::SameLine();
    presetButton(in, st, "key padding preset", "lesson_mask_key_padding.json");
    ImGui::SameLine();
    presetButton(in, st, "valid lengths (seed 004) preset", "lesson_masked_softmax.json");
    if (!st.presetError.empty()) errorText(st.presetError);
    if (!lessonHasResult(in, "Open a session to see its masks.")) return;
    const attn::Session& s = *in.session;
    const attn::AttentionResult& r = *in.result;
    clampSelection(r, st);
    const attn::HeadResult& h = r.heads[st.head];
    const bool rowLayout = r.layout == attn::Layout::Row;
    const attn::MaskSpec& m = s.input.mask;
    const int T = int(rowLayout ? h.scores.rows() : h.scores.cols());
    const int S = int(rowLayout ? h.scores.cols() : h.scores.rows());

    // Mask controls: each edit goes to the document as a new session.
    sectionTitle("Masks of this session");
    attn::Session edited = s;
    bool changed = ImGui::Checkbox("look-ahead (causal): key j > query i is masked", &edited.input.mask.causal);
    bool padding = !m.keyPadding.empty();
    if (ImGui::Checkbox("key padding", &padding)) {
        edited.input.mask.keyPadding = padding ? std::vector<std::uint8_t>(S, 0) : std::vector<std::uint8_t>{};
        changed = true;
    }
    if (padding && int(edited.input.mask.keyPadding.size()) == S) {
        const ImGuiStyle& style = ImGui::GetStyle();
        for (int j = 0; j < S; ++j) {
            const std::string label = tokenLabel(s.keyTokens, j);
            sameLineIfFits(ImGui::GetFrameHeight() + style.ItemInnerSpacing.x + ImGui::CalcTextSize(label.c_str()).x);
            bool on = edited.input.mask.keyPadding[j] != 0;
            ImGui::PushID(j);
            if (ImGui::Checkbox(label.c_str(), &on)) {
                edited.input.mask.keyPadding[j] = on ? 1 : 0;
                changed = true;
            }
            ImGui::PopID();
        }
    }
    bool lens = !m.validLens.empty();
    if (ImGui::Checkbox("valid lengths per query", &lens)) {
        edited.input.mask.validLens = lens ? std::vector<int>(T, S) : std::vector<int>{};
        changed = true;
    }
    if (lens && int(edited.input.mask.validLens.size()) == T) {
        for (int i = 0; i < T; ++i) {
            sameLineIfFits(70.0f);
            ImGui::PushID(1000 + i);
            ImGui::SetNextItemWidth(70);
            if (ImGui::InputInt("##len", &edited.input.mask.validLens[i])) {
                edited.input.mask.validLens[i] = std::clamp(edited.input.mask.validLens[i], 0, S);
                changed = true;
            }
            ImGui::PopID();
        }
    }
    ImGui::Text("masked scores take %s before the softmax", attn::formatValue(m.fill, 3).c_str());
    if (changed && in.applySession) in.applySession(std::move(edited));

    // What the masks did: core's weights, and core's masked-softmax summary of the same scores.
    const attn::Matrix scores = rowLayout ? h.scores : attn::Matrix(h.scores.transpose());
    attn::MaskSpec rowMask = m;
    if (!rowLayout) rowMask.custom = attn::MaskMatrix(m.custom.transpose());
    auto ms = attn::maskedSoftmax(scores, rowMask);
    GridOptions go = gridOptions(in, LessonMap::Scores);
    go.mask = &h.masked;
    go.rowLabels = rowLayout ? s.queryTokens : s.keyTokens;
    go.colLabels = rowLayout ? s.keyTokens : s.queryTokens;
    ImGui::BeginGroup();
    drawMatrixGrid("scores", "scores (x = masked)", h.scores, go);
    ImGui::EndGroup();
    GridOptions wo = go;
    wo.colormap = in.colormap(LessonMap::Weights);
    wo.symmetric = false;
    wo.range = attn::DisplayRange{0.0f, 1.0f, 0};
    sameLineIfFits(gridWidth("weights", h.weights, wo), 30);
    ImGui::BeginGroup();
    drawMatrixGrid("weights", "weights", h.weights, wo);
    ImGui::EndGroup();
    if (!ms) {
        errorText(ms.status().message);
    } else {
        std::string sums;
        for (Eigen::Index i = 0; i < ms->rowSums.size(); ++i) sums += (i ? ", " : "") + attn::formatValue(ms->rowSums[i], 4);
        ImGui::Text("row sums: [%s]", sums.c_str());
        ImGui::Text("masked entries with a non-zero weight: %d", ms->maskedNonZero);
        if (!ms->fullyMaskedRows.empty())
            errorText(std::to_string(ms->fullyMaskedRows.size()) + " queries have every key masked: their weights are 0.");
    }
    noteText("Seed 004: masking sets the masked scores to -inf (or a large negative number) before the softmax, so "
             "exp gives exactly 0 there and the remaining weights of the row renormalise to sum to 1.");
    ImGui::End();
}

} // namespace app
