// Lesson 2 (seed 000/001): softmax(QKᵀ/√d_k)·V with tokens as rows and V·softmax(KᵀQ/√d_k) with tokens as
// columns give transposed results; the wrong softmax axis and the literal other formula, labelled.
#include "panels/lesson_panels.h"

#include <string>

namespace app {

namespace {

std::string sums(const attn::Vector& v)
{
    std::string s;
    for (Eigen::Index i = 0; i < v.size(); ++i) s += (i ? ", " : "") + attn::formatValue(v[i], 3);
    return "[" + s + "]";
}

} // namespace

void drawFormulasPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    ImGui::SetNextWindowSize(ImVec2(820, 700), ImGuiCond_FirstUseEver);
    if (!ImGui::Begin(kFormulasTitle, open)) {
        ImGui::End();
        return;
    }
    if (!in.session || !in.result || in.result->heads.empty()) {
        noteText("Open a session (e.g. the preset lesson_two_formulas_column) to compare the two formulas.");
        ImGui::End();
        return;
    }
    const attn::Session& s = *in.session;
    clampSelection(*in.result, st);

    // Both formulas on the same data, once per document revision.
    st.layouts.refresh(in.revision, 0, [&] { return attn::compareLayouts(s.input, s.config); });
    if (!st.layouts.value) {
        errorText(st.layouts.error);
        ImGui::End();
        return;
    }
    const attn::LayoutComparison* cmp = &*st.layouts.value;
    ImGui::Text("This session stores tokens as %s.", s.config.layout == attn::Layout::Row ? "ROWS" : "COLUMNS");
    sectionTitle("The same data, both formulas");
    ImGui::BeginGroup();
    drawMatrixGrid("row", "softmax(QK^T/sqrt(d_k)) V, tokens as rows  [T, O]", cmp->row.output, GridOptions{});
    ImGui::EndGroup();
    ImGui::SameLine(0, 30);
    ImGui::BeginGroup();
    drawMatrixGrid("col", "V softmax(K^TQ/sqrt(d_k)), tokens as columns  [O, T]", cmp->column.output, GridOptions{});
    ImGui::EndGroup();
    ImGui::Text("max |row result - (column result)^T| = %s: the results are transposes of each other.",
                attn::formatValue(cmp->maxAbsDiffOutput, 3).c_str());

    // The mistakes.
    const int H = int(in.result->heads.size());
    if (H > 1) ImGui::SliderInt("head", &st.head, 0, H - 1);
    st.wrongFormula.refresh(in.revision, st.head, [&] { return attn::wrongFormulaDemo(s.input, s.config, st.head); });
    if (!st.wrongFormula.value) {
        errorText(st.wrongFormula.error);
        ImGui::End();
        return;
    }
    const attn::WrongFormulaDemo* demo = &*st.wrongFormula.value;
    sectionTitle("Mistake (a): softmax along the wrong axis");
    GridOptions w;
    w.range = attn::DisplayRange{0.0f, 1.0f, 0};
    ImGui::BeginGroup();
    drawMatrixGrid("right", "right weights", demo->rightWeightsInLayout, w);
    ImGui::EndGroup();
    ImGui::SameLine(0, 30);
    ImGui::BeginGroup();
    drawMatrixGrid("wrong", "wrong-axis weights", demo->wrongWeightsInLayout, w);
    ImGui::EndGroup();
    ImGui::TextWrapped("%s", demo->wrongAxisText.c_str());
    ImGui::Text("each query's weights sum to:  right %s   wrong %s", sums(demo->rightSumsOverKeys).c_str(),
                sums(demo->wrongSumsOverKeys).c_str());

    sectionTitle("Mistake (b): the other formula applied literally");
    for (const attn::ProductShape& p : demo->literalSteps) ImGui::BulletText("%s", p.text.c_str());
    if (demo->literalApplies) {
        errorText("Runs without error, and is wrong:");
        drawMatrixGrid("literal", "literal other formula", demo->literalOutput, GridOptions{});
    }
    ImGui::TextWrapped("%s", demo->literalText.c_str());
    ImGui::End();
}

} // namespace app
