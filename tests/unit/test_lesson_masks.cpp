// Tests of the masks lesson (attnscope/lessons/masks.h): masked softmax: masked weights exactly 0, rows renormalised, fully masked rows reported.
#include "lesson_test_util.h"

#include "attnscope/lessons/masks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

TEST(LessonMasks, ReproducesTheSeedsMaskedSoftmax)
{
    // Seed 004 prints masked_softmax(rand(2, 2, 4), [[1, 3], [2, 4]]); flattened, the rows have valid
    // lengths 1, 3, 2, 4 and these weights (4 decimals). Scores ln(w) reproduce them; the masked tail
    // gets junk scores that must not matter.
    const float w[4][4] = {{1.0f, 0, 0, 0}, {0.4125f, 0.3273f, 0.2602f, 0}, {0.5254f, 0.4746f, 0, 0},
                           {0.3117f, 0.2130f, 0.1801f, 0.2952f}};
    const int lens[4] = {1, 3, 2, 4};
    Matrix scores(4, 4);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) scores(i, j) = j < lens[i] ? std::log(w[i][j]) : 5.0f + float(i + j);
    for (float fill : {-std::numeric_limits<float>::infinity(), -1e6f}) {  // attnscope's default; d2l's value
        MaskSpec mask;
        mask.validLens = {1, 3, 2, 4};
        mask.fill = fill;
        auto m = maskedSoftmax(scores, mask);
        ASSERT_TRUE(m.ok()) << m.status().message;
        EXPECT_EQ(m->maskedNonZero, 0);
        for (int i = 0; i < 4; ++i) {
            EXPECT_NEAR(m->rowSums[i], 1.0f, 1e-6f);
            for (int j = 0; j < 4; ++j) {
                if (j >= lens[i]) {
                    EXPECT_EQ(m->weights(i, j), 0.0f);  // exactly 0, not merely small
                    EXPECT_EQ(m->masked(i, j), 1);
                } else {
                    EXPECT_NEAR(m->weights(i, j), w[i][j], 1e-4f);
                }
            }
        }
    }
}

TEST(LessonMasks, AgreesWithComputeForCausalAndPadding)
{
    Session s;
    s.config.mode = Mode::Direct;
    s.input.Q = uniformMatrix(5, 3, 81, 2.0f);
    s.input.K = uniformMatrix(5, 3, 82, 2.0f);
    s.input.V = uniformMatrix(5, 2, 83);
    s.input.mask.causal = true;
    s.input.mask.keyPadding = {0, 0, 0, 0, 1};
    AttentionResult r = mustCompute(s.input, s.config);
    auto m = maskedSoftmax(r.heads[0].scores, s.input.mask);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->masked, r.heads[0].masked);
    EXPECT_LT((m->weights - r.heads[0].weights).cwiseAbs().maxCoeff(), 1e-6f);
    EXPECT_TRUE(m->fullyMaskedRows.empty());
}

TEST(LessonMasks, FullyMaskedRowIsZeroAndReported)
{
    MaskSpec mask;
    mask.validLens = {0, 2};
    auto m = maskedSoftmax(Matrix::Ones(2, 3), mask);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->fullyMaskedRows, std::vector<int>{0});
    EXPECT_EQ(m->rowSums[0], 0.0f);
    EXPECT_NEAR(m->weights(1, 0), 0.5f, 1e-7f);
}

TEST(LessonMasks, ValidatesTheMask)
{
    MaskSpec mask;
    mask.validLens = {1, 2, 3};
    EXPECT_EQ(maskedSoftmax(Matrix::Ones(2, 3), mask).status().message,
              "mask.valid_lens: expected 1 or T = 2 values, got 3");
    mask.validLens.clear();
    mask.keyPadding = {1};
    EXPECT_EQ(maskedSoftmax(Matrix::Ones(2, 3), mask).status().message, "mask.key_padding: expected 3 flags (S), got 1");
    EXPECT_FALSE(maskedSoftmax(Matrix(), MaskSpec{}).ok());
}
