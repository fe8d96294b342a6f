// Tests of the vector view lesson (attnscope/lessons/vector_view.h): the vector view (o_i = Σ_j â_ij·v_j equals row i of the matrix version) and the shapes of every product.
#include "lesson_test_util.h"

#include "attnscope/lessons/vector_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

TEST(LessonVectorView, SumOfWeightedValuesIsTheMatrixRowForEveryQuery)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = seedExample(layout);
        AttentionResult r = mustCompute(s.input, s.config);
        for (int i = 0; i < 4; ++i) {
            auto v = vectorView(r, Score::ScaledDot, 0, i);
            ASSERT_TRUE(v.ok()) << v.status().message;
            EXPECT_LT(v->maxAbsDiff, kSumTol);
            EXPECT_NEAR(v->weightSum, 1.0f, 1e-6f);  // weights are a distribution
            for (int j = 0; j < 4; ++j)               // a_ij = q_i·k_j, scaled by 1/√3
                EXPECT_NEAR(v->rawScores[j] * v->scale, v->scaledScores[j], 1e-5f);
            // Each weighted v_j really is â_ij·v_j.
            for (int j = 0; j < 4; ++j)
                for (int c = 0; c < 3; ++c)
                    EXPECT_FLOAT_EQ(v->weightedValues(j, c), v->weights[j] * v->values(j, c));
        }
    }
}

TEST(LessonVectorView, ReproducesTheSeedsFirstOutputRow)
{
    // Seed 000 prints o_1 = [3.9492, 7.8588, 3.9577] (4 decimals, so within 5e-5 plus float rounding).
    Session s = seedExample();
    AttentionResult r = mustCompute(s.input, s.config);
    auto v = vectorView(r, Score::ScaledDot, 0, 0);
    ASSERT_TRUE(v.ok());
    EXPECT_NEAR(v->vectorSum[0], 3.9492f, 1e-4f);
    EXPECT_NEAR(v->vectorSum[1], 7.8588f, 1e-4f);
    EXPECT_NEAR(v->vectorSum[2], 3.9577f, 1e-4f);
    // q_1 = x_1·W^Q = [2, 1, 3] and k_1 = x_1·W^K = [3, 1, 2]: a_11 = 6 + 1 + 6 = 13.
    EXPECT_FLOAT_EQ(v->rawScores[0], 13.0f);
}

TEST(LessonVectorView, MaskedKeysHaveZeroWeight)
{
    Session s = seedExample();
    s.input.mask.causal = true;
    // The reference path: the Eigen path's vectorised exp clamps its input at about -88.4, so a masked
    // (-inf) score gets a weight of 2.9e-39 instead of 0 there (reported to core; see the report).
    s.config.cpuPath = CpuPath::Reference;
    AttentionResult r = mustCompute(s.input, s.config);
    auto v = vectorView(r, Score::ScaledDot, 0, 1);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->masked, (std::vector<std::uint8_t>{0, 0, 1, 1}));
    EXPECT_EQ(v->weights[2], 0.0f);
    EXPECT_EQ(v->weights[3], 0.0f);
    EXPECT_LT(v->maxAbsDiff, kSumTol);
}

TEST(LessonVectorView, RejectsOutOfRangeIndices)
{
    Session s = seedExample();
    AttentionResult r = mustCompute(s.input, s.config);
    auto badHead = vectorView(r, Score::ScaledDot, 1, 0);
    ASSERT_FALSE(badHead.ok());
    EXPECT_EQ(badHead.status().message, "head: expected 0 ≤ head < H = 1, got 1");
    auto badQuery = vectorView(r, Score::ScaledDot, 0, -1);
    ASSERT_FALSE(badQuery.ok());
    EXPECT_EQ(badQuery.status().message, "query: expected 0 ≤ query < T = 4, got -1");
    EXPECT_FALSE(vectorView(AttentionResult{}, Score::ScaledDot, 0, 0).ok());
}

TEST(LessonProductShapes, GroupedQueryProjectionsAreKvHeadsWide)
{
    Dims d;
    d.T = 5; d.S = 5; d.M = 6; d.H = 6; d.Hkv = 2; d.dq = 3; d.dk = 3; d.dv = 4; d.O = 24;
    auto steps = productShapes(d, Layout::Row, Mode::Self, true);
    ASSERT_GE(steps.size(), 3u);
    EXPECT_EQ(steps[0].outCols, 18);  // Q: H·d_q
    EXPECT_EQ(steps[1].outCols, 6);   // K: H_kv·d_k
    EXPECT_EQ(steps[2].outCols, 8);   // V: H_kv·d_v
    EXPECT_EQ(steps.back().lhsCols, 24);  // concat·W^O: H·d_v
}

TEST(LessonProductShapes, EveryProductsInnerSizesAgree)
{
    Dims d;
    d.T = 5; d.S = 7; d.M = 6; d.H = 2; d.dq = 3; d.dk = 3; d.dv = 4; d.O = 9;
    for (Layout layout : {Layout::Row, Layout::Column})
        for (Mode mode : {Mode::Self, Mode::Cross, Mode::Direct}) {
            if (mode == Mode::Self) d.S = d.T; else d.S = 7;
            auto steps = productShapes(d, layout, mode, true);
            ASSERT_FALSE(steps.empty());
            for (const ProductShape& p : steps) {
                if (p.rhsName.empty()) continue;  // element-wise (softmax) or concat
                EXPECT_EQ(p.lhsCols, p.rhsRows) << p.text;
                EXPECT_EQ(p.outRows, p.lhsRows) << p.text;
                EXPECT_EQ(p.outCols, p.rhsCols) << p.text;
            }
            // With the additive score the same steps hold, the score step being the two projections to A.
            d.A = 5;
            for (const ProductShape& p : productShapes(d, layout, mode, true, Score::Additive)) {
                if (p.rhsName.empty()) continue;
                EXPECT_EQ(p.lhsCols, p.rhsRows) << p.text;
            }
            // The last step gives the output: T×O in Row, O×T in Column.
            EXPECT_EQ(steps.back().outRows, layout == Layout::Row ? d.T : d.O);
            EXPECT_EQ(steps.back().outCols, layout == Layout::Row ? d.O : d.T);
        }
}

TEST(LessonProductShapes, SeedExampleShapes)
{
    Session s = seedExample();
    auto d = validate(s.input, s.config);
    ASSERT_TRUE(d.ok());
    auto row = productShapes(*d, Layout::Row, Mode::Self, false);
    ASSERT_EQ(row.size(), 6u);
    EXPECT_EQ(row[3].text, "Q·Kᵀ: [4, 3]·[3, 4] → [4, 4]");
    EXPECT_EQ(row[5].text, "A·V: [4, 4]·[4, 3] → [4, 3]");
    auto col = productShapes(*d, Layout::Column, Mode::Self, false);
    EXPECT_EQ(col[3].text, "Kᵀ·Q: [4, 3]·[3, 4] → [4, 4]");
    EXPECT_EQ(col[5].text, "V·A: [3, 4]·[4, 4] → [3, 4]");
}
