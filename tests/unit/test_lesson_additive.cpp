// Tests of the additive lesson (attnscope/lessons/additive.h): the additive score term by term equals the computed score.
#include "lesson_test_util.h"

#include "attnscope/layout.h"
#include "attnscope/lessons/additive.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

Session additiveSession(Layout layout)
{
    // Seed 004's sizes: query_size 4, key_size 3, hidden 5, value 2; 2 queries, 3 key-value pairs.
    Session s;
    s.config.mode = Mode::Direct;
    s.config.score = Score::Additive;
    s.input.Q = uniformMatrix(2, 4, 71);
    s.input.K = uniformMatrix(3, 3, 72);
    s.input.V = uniformMatrix(3, 2, 73);
    s.input.additive.Aq = uniformMatrix(4, 5, 74);
    s.input.additive.Ak = uniformMatrix(3, 5, 75);
    s.input.additive.wv = Vector::LinSpaced(5, -1.0f, 1.5f);
    if (layout == Layout::Column) s.input = transposedInput(s.input);
    s.config.layout = layout;
    return s;
}

TEST(LessonAdditive, BreakdownAddsUpToTheComputedScore)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s = additiveSession(layout);
        AttentionResult r = mustCompute(s.input, s.config);
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j) {
                auto b = additiveBreakdown(s.input, r, 0, i, j);
                ASSERT_TRUE(b.ok()) << b.status().message;
                EXPECT_EQ(b->q.size(), 4);
                EXPECT_EQ(b->k.size(), 3);
                EXPECT_NEAR(b->score, b->resultScore, 1e-5f);
                EXPECT_LT((b->hidden - b->qProjected - b->kProjected).cwiseAbs().maxCoeff(), 1e-6f);
                for (int a = 0; a < 5; ++a) {
                    EXPECT_NEAR(b->activated[a], std::tanh(b->hidden[a]), 1e-6f);
                    EXPECT_LE(std::abs(b->activated[a]), 1.0f);
                }
                EXPECT_NEAR(b->products.sum(), b->score, 1e-5f);
            }
    }
}

TEST(LessonAdditive, RejectsBadIndicesAndShapes)
{
    Session s = additiveSession(Layout::Row);
    AttentionResult r = mustCompute(s.input, s.config);
    EXPECT_EQ(additiveBreakdown(s.input, r, 0, 0, 3).status().message, "key: expected 0 ≤ key < S = 3, got 3");
    AttentionInput wrong = s.input;
    wrong.additive.Aq = uniformMatrix(3, 5, 1);
    EXPECT_EQ(additiveBreakdown(wrong, r, 0, 0, 0).status().message, "Aq: expected 4×5 (d_q × A), got 3×5");
}
