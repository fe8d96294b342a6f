// Lesson 2 (seed 000/001): softmax(QKᵀ/√d_k)·V with tokens as rows and V·softmax(KᵀQ/√d_k) with tokens as
// columns give transposed results; the wrong softmax axis and the literal other formula, labelled.
#include "lessons/lesson_panels.h"

#include <attnscope/layout.h>

#include <string>

namespace app {

namespace {

std::string sums(const attn::Vector& v)
{
    std::string s;
    for (Eigen::Index i = 0; i < v.size(); ++i) s += (i ? ", " : "") + attn::formatValue(v[i], 3);
    return "[" + s + "]";
}

std::string bracketShape(long r, long c) { return "[" + std::to_string(r) + ", " + std::to_string(c) + "]"; }

} // namespace

std::string wrongAxisParagraph(const attn::WrongFormulaDemo& demo)
{
    const attn::Layout L = demo.dataLayout;
    const long T = long(attn::queryCount(demo.scoresInLayout, L)), S = long(attn::keyCount(demo.scoresInLayout, L));
    const attn::Vector& sums = demo.wrongSumsOverKeys;
    const float lo = sums.size() ? sums.minCoeff() : 0.0f, hi = sums.size() ? sums.maxCoeff() : 0.0f;
    std::string a;
    if (L == attn::Layout::Row)
        a = "Tokens are rows: the scores QKᵀ are " + bracketShape(T, S) +
            " with query i in row i. The right softmax runs along each row, over the " + std::to_string(S) +
            " keys (torch.softmax(dim=1)). The wrong one ran down each column, over the " + std::to_string(T) +
            " queries (dim=0).";
    else
        a = "Tokens are columns: the scores KᵀQ are " + bracketShape(S, T) +
            " with query i in column i. The right softmax runs down each column, over the " + std::to_string(S) +
            " keys (torch.softmax(dim=0)). The wrong one ran along each row, over the " + std::to_string(T) +
            " queries (dim=1).";
    return a + " Every shape still fits, so nothing fails: each key's weights now sum to 1 over the queries, "
               "while each query's weights sum to between " +
           attn::formatValue(lo) + " and " + attn::formatValue(hi) +
           " instead of 1, so an output is no longer a weighted average of the values (largest weight change " +
           attn::formatValue(demo.maxAbsWeightDiff) + ", largest output change " +
           attn::formatValue(demo.maxAbsOutputDiff) + ").";
}

std::string literalFormulaParagraph(const attn::WrongFormulaDemo& demo)
{
    switch (demo.literal) {
    case attn::LiteralFormula::NotApplicable:
        return "The additive score has no QKᵀ product, so there is no literal other formula to misapply.";
    case attn::LiteralFormula::ShapeMismatch: {
        const attn::ProductShape& p = demo.literalSteps.back();
        return p.label + ": " + bracketShape(p.lhsRows, p.lhsCols) + "·" + bracketShape(p.rhsRows, p.rhsCols) +
               ": the inner sizes " + std::to_string(p.lhsCols) + " and " + std::to_string(p.rhsRows) +
               " differ, so the formula does not even apply to data laid out this way. Here the mistake is loud; "
               "with a square problem (n tokens = d features) it is silent.";
    }
    case attn::LiteralFormula::Applies: break;
    }
    // The first step is the score product; its inner size runs over the tokens.
    const attn::ProductShape& scores = demo.literalSteps.front();
    const bool column = demo.dataLayout == attn::Layout::Column;
    return std::string(column ? "softmax(Q·Kᵀ/√d_k)·V on tokens-as-columns data: Q·Kᵀ is "
                              : "V·softmax(Kᵀ·Q/√d_k) on tokens-as-rows data: Kᵀ·Q is ") +
           bracketShape(scores.lhsRows, scores.lhsCols) + "·" + bracketShape(scores.rhsRows, scores.rhsCols) + " → " +
           bracketShape(scores.outRows, scores.outCols) + ", a score for every pair of FEATURES (it sums over the " +
           std::to_string(scores.lhsCols) + " tokens), so the softmax weighs features, not tokens. The result " +
           bracketShape(demo.literalOutput.rows(), demo.literalOutput.cols()) +
           " has the right size to be mistaken for the answer, but its numbers are not attention.";
}

void drawTwoFormulasPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::TwoFormulas, ImVec2(820, 700), open)) return;
    if (!lessonHasResult(in, "Open a session (e.g. the preset lesson_two_formulas_column) to compare the two formulas.")) return;
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
    const GridOptions out = gridOptions(in, LessonMap::Output);
    ImGui::BeginGroup();
    drawMatrixGrid("row", "softmax(QK^T/sqrt(d_k)) V, tokens as rows  [T, O]", cmp->row.output, out);
    ImGui::EndGroup();
    const char* colTitle = "V softmax(K^TQ/sqrt(d_k)), tokens as columns  [O, T]";
    sameLineIfFits(gridWidth(colTitle, cmp->column.output, out), 30);
    ImGui::BeginGroup();
    drawMatrixGrid("col", colTitle, cmp->column.output, out);
    ImGui::EndGroup();
    textWrapped("max |row result - (column result)^T| = %s: the results are transposes of each other.",
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
    GridOptions w = gridOptions(in, LessonMap::Weights);
    w.range = attn::DisplayRange{0.0f, 1.0f, 0};
    ImGui::BeginGroup();
    drawMatrixGrid("right", "right weights", demo->rightWeightsInLayout, w);
    ImGui::EndGroup();
    sameLineIfFits(gridWidth("wrong-axis weights", demo->wrongWeightsInLayout, w), 30);
    ImGui::BeginGroup();
    drawMatrixGrid("wrong", "wrong-axis weights", demo->wrongWeightsInLayout, w);
    ImGui::EndGroup();
    textWrapped("%s", wrongAxisParagraph(*demo).c_str());
    textWrapped("each query's weights sum to:  right %s   wrong %s", sums(demo->rightSumsOverKeys).c_str(),
                sums(demo->wrongSumsOverKeys).c_str());

    sectionTitle("Mistake (b): the other formula applied literally");
    for (const attn::ProductShape& p : demo->literalSteps) {
        ImGui::Bullet();   // BulletText does not wrap: a long shape line would widen the panel
        textWrapped("%s", p.text.c_str());
    }
    if (demo->literal == attn::LiteralFormula::Applies) {
        errorText("Runs without error, and is wrong:");
        drawMatrixGrid("literal", "literal other formula", demo->literalOutput, out);
    }
    textWrapped("%s", literalFormulaParagraph(*demo).c_str());
    ImGui::End();
}

} // namespace app
