// Tests of the two formulas lesson (attnscope/lessons/two_formulas.h): both formulas give transposed results; the wrong softmax axis and the literal other formula.
#include "lesson_test_util.h"

#include "attnscope/layout.h"
#include "attnscope/lessons/two_formulas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

TEST(LessonFormulas, TransposedInputTwiceIsTheInput)
{
    Session s = seedExample();
    s.input.mask.custom = MaskMatrix::Zero(4, 4);
    s.input.mask.custom(1, 2) = 1;
    AttentionInput twice = transposedInput(transposedInput(s.input));
    EXPECT_EQ(twice.X, s.input.X);
    EXPECT_EQ(twice.Wq, s.input.Wq);
    EXPECT_EQ(twice.mask.custom, s.input.mask.custom);
    EXPECT_EQ(transposedInput(s.input).Wq, Matrix(s.input.Wq.transpose()));
}

TEST(LessonFormulas, BothFormulasGiveTransposedResults)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = seedExample(layout);
        s.input.Wo = uniformMatrix(3, 5, 7);
        if (layout == Layout::Column) s.input.Wo.transposeInPlace();
        auto c = compareLayouts(s.input, s.config);
        ASSERT_TRUE(c.ok()) << c.status().message;
        EXPECT_EQ(c->row.output.rows(), 4);
        EXPECT_EQ(c->column.output.rows(), 5);  // O×T: tokens are columns
        EXPECT_LT(c->maxAbsDiffOutput, kSumTol);
        EXPECT_LT(c->maxAbsDiffWeights, 1e-6f);
    }
}

TEST(LessonFormulas, WrongSoftmaxAxisNormalisesOverQueries)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = seedExample(layout);
        auto demo = wrongFormulaDemo(s.input, s.config, 0);
        ASSERT_TRUE(demo.ok()) << demo.status().message;
        for (int j = 0; j < 4; ++j) EXPECT_NEAR(demo->wrongSumsOverQueries[j], 1.0f, 1e-6f);
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(demo->rightSumsOverKeys[i], 1.0f, 1e-6f);
        float worst = 0;
        for (int i = 0; i < 4; ++i) worst = std::max(worst, std::abs(demo->wrongSumsOverKeys[i] - 1.0f));
        EXPECT_GT(worst, 0.05f) << "the seed example's wrong weights should not be a distribution per query";
        EXPECT_GT(demo->maxAbsOutputDiff, 0.1f);

        // Independent check of the wrong weights: exp(s_ij) / Σ_i exp(s_ij) over the queries of key j.
        const Matrix sc = layout == Layout::Row ? demo->scoresInLayout : Matrix(demo->scoresInLayout.transpose());
        const Matrix wr = layout == Layout::Row ? demo->wrongWeightsInLayout : Matrix(demo->wrongWeightsInLayout.transpose());
        for (int j = 0; j < 4; ++j) {
            double z = 0;
            for (int i = 0; i < 4; ++i) z += std::exp(double(sc(i, j)));
            for (int i = 0; i < 4; ++i) EXPECT_NEAR(wr(i, j), std::exp(double(sc(i, j))) / z, 1e-6);
        }
        EXPECT_EQ(demo->dataLayout, layout);  // the panel's paragraph names the axes (test_lesson_panels_smoke)
    }
}

TEST(LessonFormulas, LiteralOtherFormulaOnSquareDataAppliesButIsWrong)
{
    // Seed 000 with tokens as columns and the row formula: Q [3, 4]·Kᵀ [4, 3] → [3, 3] over features.
    Session s = seedExample(Layout::Column);
    auto demo = wrongFormulaDemo(s.input, s.config, 0);
    ASSERT_TRUE(demo.ok());
    ASSERT_EQ(demo->literal, LiteralFormula::Applies);
    EXPECT_EQ(demo->literalSteps.front().text, "Q·Kᵀ: [3, 4]·[4, 3] → [3, 3]");
    ASSERT_EQ(demo->literalOutput.rows(), 3);
    ASSERT_EQ(demo->literalOutput.cols(), 4);
    // Same shape as the right answer (d_v × T), different numbers.
    EXPECT_GT((demo->literalOutput - demo->rightOutputInLayout).cwiseAbs().maxCoeff(), 0.1f);
}

TEST(LessonFormulas, LiteralOtherFormulaReportsShapeMismatch)
{
    Session s;
    s.config.mode = Mode::Direct;
    s.input.Q = uniformMatrix(3, 2, 1);
    s.input.K = uniformMatrix(5, 2, 2);
    s.input.V = uniformMatrix(5, 4, 3);
    auto demo = wrongFormulaDemo(s.input, s.config, 0);
    ASSERT_TRUE(demo.ok());
    ASSERT_EQ(demo->literal, LiteralFormula::ShapeMismatch);
    const ProductShape& failed = demo->literalSteps.back();  // Kᵀ·Q: [2, 5]·[3, 2], inner sizes 5 and 3
    EXPECT_NE(failed.lhsCols, failed.rhsRows) << failed.text;
    // Part (a) still works for T ≠ S: the wrong weights are S sums over T = 3 queries.
    EXPECT_EQ(demo->wrongSumsOverQueries.size(), 5);
}

TEST(LessonFormulas, WrongAxisKeepsMaskedEntriesZero)
{
    Session s = seedExample();
    s.input.mask.keyPadding = {0, 0, 0, 1};
    auto demo = wrongFormulaDemo(s.input, s.config, 0);
    ASSERT_TRUE(demo.ok());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(demo->wrongWeightsInLayout(i, 3), 0.0f);
    EXPECT_EQ(demo->wrongSumsOverQueries[3], 0.0f);  // a key masked for every query has no distribution
}
