// Lesson 1 (seed 000/001): from the vector version o_i = Σ_j â_ij·v_j to the matrix version.
#include "lessons/lesson_panels.h"

#include <string>

namespace app {

namespace {

void drawShapes(const attn::Session& s)
{
    auto d = attn::validate(s.input, s.config);
    if (!d) return;
    sectionTitle("Shapes of every product");
    const auto steps = attn::productShapes(*d, s.config.layout, s.config.mode, s.input.Wo.size() > 0, s.config.score);
    for (const attn::ProductShape& p : steps) {
        ImGui::Bullet();   // BulletText does not wrap: a long shape line would widen the panel
        textWrapped("%s", p.text.c_str());
    }
}

} // namespace

void drawVectorViewPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::VectorView, ImVec2(760, 640), open)) return;
    if (!lessonHasResult(in, "Open a session (e.g. the preset lesson_vector_to_matrix) to see its vector view.")) return;
    const attn::Session& s = *in.session;
    const attn::AttentionResult& r = *in.result;
    clampSelection(r, st);

    const int H = int(r.heads.size());
    if (H > 1) ImGui::SliderInt("head", &st.head, 0, H - 1);
    auto v = attn::vectorView(r, s.config.score, st.head, st.query);
    if (!v) {
        errorText(v.status().message);
        ImGui::End();
        return;
    }
    const int S = int(v->weights.size());
    const std::string qLabel = tokenLabel(s.queryTokens, st.query);
    textWrapped("Query %d (%s):  o_%d = sum_j softmax_j(q_%d . k_j / sqrt(d_k)) v_j,  scale = %s", st.query, qLabel.c_str(),
                st.query, st.query, attn::formatValue(v->scale, 4).c_str());
    noteText("Click a row of the weight matrix to choose the query. The vector version (left) and row i of the "
             "matrix version (right) are computed separately and agree to float rounding.");

    // Left: the vector version, term by term.
    if (ImGui::BeginTable("terms", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableSetupColumn("key j");
        ImGui::TableSetupColumn("a_ij = q_i.k_j");
        ImGui::TableSetupColumn("scaled");
        ImGui::TableSetupColumn("weight");
        ImGui::TableSetupColumn("weight * v_j");
        ImGui::TableHeadersRow();
        for (int j = 0; j < S; ++j) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(tokenLabel(s.keyTokens, j).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(attn::formatValue(v->rawScores[j], 4).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(v->masked[j] ? "masked" : attn::formatValue(v->scaledScores[j], 4).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(attn::formatValue(v->weights[j], 4).c_str());
            ImGui::TableNextColumn();
            std::string row;
            for (Eigen::Index c = 0; c < v->weightedValues.cols(); ++c)
                row += (c ? "  " : "") + attn::formatValue(v->weightedValues(j, c), 4);
            ImGui::TextUnformatted(row.c_str());
        }
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted("sum");
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(attn::formatValue(v->weightSum, 4).c_str());
        ImGui::TableNextColumn();
        std::string row;
        for (Eigen::Index c = 0; c < v->vectorSum.size(); ++c) row += (c ? "  " : "") + attn::formatValue(v->vectorSum[c], 5);
        ImGui::TextUnformatted(("o_i = " + row).c_str());
        ImGui::EndTable();
    }

    sectionTitle("Weights of this query");
    drawWeightBars("bars", v->weights, s.keyTokens, &v->masked, ImGui::GetContentRegionAvail().x * 0.6f);

    sectionTitle("Matrix version");
    const attn::HeadResult& h = r.heads[st.head];
    const bool rowLayout = r.layout == attn::Layout::Row;
    GridOptions wo = gridOptions(in, LessonMap::Weights);
    wo.highlightRow = rowLayout ? st.query : -1;
    wo.highlightCol = rowLayout ? -1 : st.query;
    wo.mask = &h.masked;
    wo.rowLabels = rowLayout ? s.queryTokens : s.keyTokens;
    wo.colLabels = rowLayout ? s.keyTokens : s.queryTokens;
    ImGui::BeginGroup();
    GridHit hit = drawMatrixGrid("weights", rowLayout ? "softmax(QK^T/sqrt(d_k))  [T, S]" : "softmax(K^TQ/sqrt(d_k))  [S, T]",
                                 h.weights, wo);
    ImGui::EndGroup();
    if (hit.clicked) st.query = rowLayout ? hit.row : hit.col;
    GridOptions oo = gridOptions(in, LessonMap::Output);
    oo.highlightRow = rowLayout ? st.query : -1;
    oo.highlightCol = rowLayout ? -1 : st.query;
    const char* outTitle = rowLayout ? "head output  [T, d_v]" : "head output  [d_v, T]";
    sameLineIfFits(gridWidth(outTitle, h.output, oo));
    ImGui::BeginGroup();
    drawMatrixGrid("output", outTitle, h.output, oo);
    ImGui::EndGroup();
    ImGui::Text("vector version vs matrix row: max |difference| = %s", attn::formatValue(v->maxAbsDiff, 3).c_str());

    drawShapes(s);
    ImGui::End();
}

} // namespace app
