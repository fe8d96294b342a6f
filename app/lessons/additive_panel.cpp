// Lesson 5 (seed 004): additive (Bahdanau) attention, score = w_vᵀ·tanh(q·A_q + k·A_k), term by term for
// the selected (query, key) pair, with A_q, A_k and w_v editable through the document.
#include "lessons/lesson_panels.h"

#include <string>

namespace app {

namespace {

// Edits one matrix of the additive parameters in place: returns true when a value changed.
bool editMatrix(const char* id, attn::Matrix& m)
{
    bool changed = false;
    ImGui::PushID(id);
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
        for (Eigen::Index c = 0; c < m.cols(); ++c) {
            ImGui::PushID(int(r * m.cols() + c));
            if (c) ImGui::SameLine();
            ImGui::SetNextItemWidth(52);
            changed |= ImGui::DragFloat("##v", &m(r, c), 0.01f, -10.0f, 10.0f, "%.2f");
            ImGui::PopID();
        }
    }
    ImGui::PopID();
    return changed;
}

} // namespace

void drawAdditivePanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::Additive, ImVec2(760, 720), open)) return;
    if (!lessonHasResult(in,
                         "This lesson needs a session with score \"additive\": open the preset lesson_additive (queries "
                         "of size 4 and keys of size 3, hidden size 5, as in seed 004).",
                         in.session && in.session->config.score == attn::Score::Additive))
        return;
    const attn::Session& s = *in.session;
    const attn::AttentionResult& r = *in.result;
    clampSelection(r, st);
    const attn::HeadResult& h = r.heads[st.head];
    const bool rowLayout = r.layout == attn::Layout::Row;

    noteText("Hover a score cell to choose the (query, key) pair. Queries and keys may have different sizes: "
             "A_q and A_k map both to the hidden size first.");
    GridOptions so = gridOptions(in, LessonMap::Scores);
    so.highlightRow = rowLayout ? st.query : st.key;
    so.highlightCol = rowLayout ? st.key : st.query;
    so.rowLabels = rowLayout ? s.queryTokens : s.keyTokens;
    so.colLabels = rowLayout ? s.keyTokens : s.queryTokens;
    GridHit hit = drawMatrixGrid("scores", "scores", h.scores, so);
    if (hit.row >= 0) {  // the hovered pair (it stays selected when the mouse leaves the grid)
        st.query = rowLayout ? hit.row : hit.col;
        st.key = rowLayout ? hit.col : hit.row;
    }

    auto b = attn::additiveBreakdown(s.input, r, st.head, st.query, st.key);
    if (!b) {
        errorText(b.status().message);
        ImGui::End();
        return;
    }
    textWrapped("score(%s, %s) = w_v^T tanh(q A_q + k A_k) = %s   (computed by attention: %s)",
                tokenLabel(s.queryTokens, st.query).c_str(), tokenLabel(s.keyTokens, st.key).c_str(),
                attn::formatValue(b->score, 5).c_str(), attn::formatValue(b->resultScore, 5).c_str());
    GridOptions vo = gridOptions(in, LessonMap::Projection);
    vo.cell = 44.0f;
    const std::string qTitle = "q  (d_q = " + std::to_string(b->q.size()) + ")";
    const std::string kTitle = "k  (d_k = " + std::to_string(b->k.size()) + ")";
    drawVectorCells("q", qTitle.c_str(), b->q, vo);
    drawVectorCells("k", kTitle.c_str(), b->k, vo);
    drawVectorCells("qp", "q A_q", b->qProjected, vo);
    drawVectorCells("kp", "k A_k", b->kProjected, vo);
    drawVectorCells("hid", "hidden = q A_q + k A_k", b->hidden, vo);
    drawVectorCells("act", "tanh(hidden)", b->activated, vo);
    drawVectorCells("wv", "w_v", s.input.additive.wv, vo);
    drawVectorCells("prod", "w_v * tanh(hidden): these sum to the score", b->products, vo);

    sectionTitle("Edit A_q, A_k and w_v");
    if (!in.applySession) {
        noteText("(editing is not available in this view)");
    } else {
        attn::Session edited = s;
        bool changed = false;
        ImGui::TextUnformatted(rowLayout ? "A_q  [d_q, A]" : "A_q  [A, d_q]");
        changed |= editMatrix("Aq", edited.input.additive.Aq);
        ImGui::TextUnformatted(rowLayout ? "A_k  [d_k, A]" : "A_k  [A, d_k]");
        changed |= editMatrix("Ak", edited.input.additive.Ak);
        ImGui::TextUnformatted("w_v  [A]");
        attn::Matrix wv(1, edited.input.additive.wv.size());
        wv.row(0) = edited.input.additive.wv.transpose();
        if (editMatrix("wv", wv)) {
            edited.input.additive.wv = wv.row(0).transpose();
            changed = true;
        }
        if (changed) in.applySession(std::move(edited));
    }
    ImGui::End();
}

} // namespace app
