// Two formulas lesson (attnscope/lessons/two_formulas.h).
#include "attnscope/lessons/two_formulas.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

Expected<LayoutComparison> compareLayouts(const AttentionInput& in, const AttentionConfig& cfg)
{
    AttentionConfig other = cfg;
    other.layout = cfg.layout == Layout::Row ? Layout::Column : Layout::Row;
    const AttentionInput flipped = transposedInput(in);
    auto a = compute(in, cfg);
    if (!a) return a.status();
    auto b = compute(flipped, other);
    if (!b) return b.status();

    LayoutComparison c;
    c.row = cfg.layout == Layout::Row ? std::move(*a) : std::move(*b);
    c.column = cfg.layout == Layout::Row ? std::move(*b) : std::move(*a);
    c.maxAbsDiffOutput = maxAbsDiff(c.row.output, Matrix(c.column.output.transpose()));
    for (std::size_t h = 0; h < c.row.heads.size() && h < c.column.heads.size(); ++h)
        c.maxAbsDiffWeights = std::max(c.maxAbsDiffWeights, maxAbsDiff(c.row.heads[h].weights,
                                                                        Matrix(c.column.heads[h].weights.transpose())));
    return c;
}

namespace {

// Part (b) of the wrong-formula demonstration: the other formula applied to the stored head matrices.
void literalOtherFormula(const HeadResult& hr, Layout L, float scale, WrongFormulaDemo& demo)
{
    const Matrix& Q = hr.Q;
    const Matrix& K = hr.K;
    const Matrix& V = hr.V;
    auto fail = [&](const ProductShape& p) {
        demo.literalSteps.push_back(p);
        demo.literal = LiteralFormula::ShapeMismatch;
    };
    if (L == Layout::Column) {
        // Tokens are columns, but softmax(Q·Kᵀ)·V is written for tokens as rows.
        if (Q.cols() != K.cols()) {
            ProductShape p = makeProduct("Q·Kᵀ", "Q", Q.rows(), Q.cols(), "Kᵀ", K.cols(), K.rows(), "QKᵀ", 0, 0);
            return fail(p);
        }
        const Matrix scores = productDouble(Q, Matrix(K.transpose())) * scale;  // [d_q, d_k]: features × features
        demo.literalSteps.push_back(makeProduct("Q·Kᵀ", "Q", Q.rows(), Q.cols(), "Kᵀ", K.cols(), K.rows(), "QKᵀ",
                                                scores.rows(), scores.cols()));
        Matrix A(scores.rows(), scores.cols());
        std::vector<double> line, w;
        std::vector<std::uint8_t> none(scores.cols(), 0);
        for (Eigen::Index r = 0; r < scores.rows(); ++r) {
            line.assign(scores.row(r).data(), scores.row(r).data() + scores.cols());
            softmaxInto(line, none, kNegInf, w);
            for (Eigen::Index c = 0; c < scores.cols(); ++c) A(r, c) = float(w[c]);
        }
        demo.literalSteps.push_back(makeProduct("softmax along each row", "QKᵀ", A.rows(), A.cols(), "", 0, 0, "A",
                                                A.rows(), A.cols()));
        if (A.cols() != V.rows()) {
            ProductShape p = makeProduct("A·V", "A", A.rows(), A.cols(), "V", V.rows(), V.cols(), "", 0, 0);
            return fail(p);
        }
        demo.literalOutput = productDouble(A, V);
        demo.literalSteps.push_back(makeProduct("A·V", "A", A.rows(), A.cols(), "V", V.rows(), V.cols(), "output",
                                                demo.literalOutput.rows(), demo.literalOutput.cols()));
        demo.literal = LiteralFormula::Applies;
    } else {
        // Tokens are rows, but V·softmax(Kᵀ·Q)  is written for tokens as columns.
        if (K.rows() != Q.rows()) {
            ProductShape p = makeProduct("Kᵀ·Q", "Kᵀ", K.cols(), K.rows(), "Q", Q.rows(), Q.cols(), "KᵀQ", 0, 0);
            return fail(p);
        }
        const Matrix scores = productDouble(Matrix(K.transpose()), Q) * scale;  // [d_k, d_q]
        demo.literalSteps.push_back(makeProduct("Kᵀ·Q", "Kᵀ", K.cols(), K.rows(), "Q", Q.rows(), Q.cols(), "KᵀQ",
                                                scores.rows(), scores.cols()));
        Matrix A(scores.rows(), scores.cols());
        std::vector<double> line(scores.rows()), w;
        std::vector<std::uint8_t> none(scores.rows(), 0);
        for (Eigen::Index c = 0; c < scores.cols(); ++c) {
            for (Eigen::Index r = 0; r < scores.rows(); ++r) line[r] = scores(r, c);
            softmaxInto(line, none, kNegInf, w);
            for (Eigen::Index r = 0; r < scores.rows(); ++r) A(r, c) = float(w[r]);
        }
        demo.literalSteps.push_back(makeProduct("softmax down each column", "KᵀQ", A.rows(), A.cols(), "", 0, 0, "A",
                                                A.rows(), A.cols()));
        if (V.cols() != A.rows()) {
            ProductShape p = makeProduct("V·A", "V", V.rows(), V.cols(), "A", A.rows(), A.cols(), "", 0, 0);
            return fail(p);
        }
        demo.literalOutput = productDouble(V, A);
        demo.literalSteps.push_back(makeProduct("V·A", "V", V.rows(), V.cols(), "A", A.rows(), A.cols(), "output",
                                                demo.literalOutput.rows(), demo.literalOutput.cols()));
        demo.literal = LiteralFormula::Applies;
    }
}

} // namespace

Expected<WrongFormulaDemo> wrongFormulaDemo(const AttentionInput& in, const AttentionConfig& cfg, int head)
{
    auto res = compute(in, cfg);
    if (!res) return res.status();
    const AttentionResult& r = *res;
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("head", head, int(r.heads.size()), "H"));
    const HeadResult& hr = r.heads[head];
    const Layout L = cfg.layout;

    WrongFormulaDemo demo;
    demo.dataLayout = L;
    demo.head = head;
    demo.scoresInLayout = hr.scores;
    demo.rightWeightsInLayout = hr.weights;
    demo.rightOutputInLayout = hr.output;

    const Matrix scores = tokenRows(hr.scores, L), right = tokenRows(hr.weights, L), V = tokenRows(hr.V, L);
    const MaskMatrix masked = tokenRows(hr.masked, L);
    const int T = int(scores.rows()), S = int(scores.cols());

    // (a) softmax over the queries of each key (the column of the token-rows scores) instead of the keys.
    Matrix wrong(T, S);
    std::vector<double> line(T), w;
    std::vector<std::uint8_t> m(T);
    for (int j = 0; j < S; ++j) {
        for (int i = 0; i < T; ++i) {
            line[i] = scores(i, j);
            m[i] = masked.size() > 0 ? masked(i, j) : 0;
        }
        softmaxInto(line, m, in.mask.fill, w);
        for (int i = 0; i < T; ++i) wrong(i, j) = float(w[i]);
    }
    const Matrix wrongOut = productDouble(wrong, V);
    demo.wrongWeightsInLayout = inLayout(wrong, L);
    demo.wrongOutputInLayout = inLayout(wrongOut, L);
    demo.rightSumsOverKeys = right.cast<double>().rowwise().sum().cast<float>();
    demo.wrongSumsOverKeys = wrong.cast<double>().rowwise().sum().cast<float>();
    demo.wrongSumsOverQueries = wrong.cast<double>().colwise().sum().transpose().cast<float>();
    demo.maxAbsWeightDiff = maxAbsDiff(right, wrong);
    demo.maxAbsOutputDiff = maxAbsDiff(tokenRows(hr.output, L), wrongOut);

    if (cfg.score != Score::Additive) literalOtherFormula(hr, L, r.scale, demo);
    return demo;
}

} // namespace attn
