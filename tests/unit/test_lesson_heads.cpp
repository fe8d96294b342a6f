// Tests of the heads lesson (attnscope/lessons/heads.h): head blocks, the block-identity selector, contributions through W^O, one head vs h heads.
#include "lesson_test_util.h"

#include "attnscope/layout.h"
#include "attnscope/lessons/heads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

TEST(LessonHeads, SelectorPicksTheHeadsColumns)
{
    const Matrix Q = uniformMatrix(3, 8, 21);
    for (int h = 0; h < 4; ++h) {
        auto W = headSelector(8, 4, h);
        ASSERT_TRUE(W.ok());
        EXPECT_EQ(Matrix(Q * *W), Matrix(Q.middleCols(2 * h, 2)));
    }
    EXPECT_EQ(headSelector(8, 3, 0).status().message, "heads: 3 does not divide width 8");
}

TEST(LessonHeads, BlockIdentityExampleSplitsQIntoHeads)
{
    // Seed 003: with W^Q = W^K = W^V = I, Q = X and head h sees exactly columns [h·d, (h+1)·d) of X.
    Session s;
    s.input.X = uniformMatrix(5, 8, 31);
    s.input.Wq = Matrix::Identity(8, 8);
    s.input.Wk = s.input.Wq;
    s.input.Wv = s.input.Wq;
    s.config.heads = 2;
    AttentionResult r = mustCompute(s.input, s.config);
    auto d = validate(s.input, s.config);
    ASSERT_TRUE(d.ok());
    auto blocks = headBlocks(*d);
    ASSERT_EQ(blocks.size(), 2u);
    for (const HeadBlock& b : blocks) {
        EXPECT_EQ(b.qEnd - b.qBegin, 4);
        EXPECT_EQ(r.heads[b.head].Q, Matrix(s.input.X.middleCols(b.qBegin, 4)));
    }
}

TEST(LessonHeads, ContributionsSumToOutputMinusBias)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Session s;
        s.input.X = uniformMatrix(5, 6, 41);
        s.input.Wq = uniformMatrix(6, 6, 42);
        s.input.Wk = uniformMatrix(6, 6, 43);
        s.input.Wv = uniformMatrix(6, 6, 44);
        s.input.Wo = uniformMatrix(6, 4, 45);
        s.input.bo = Vector::LinSpaced(4, -1.0f, 2.0f);
        s.config.heads = 3;
        if (layout == Layout::Column) s.input = transposedInput(s.input);
        s.config.layout = layout;
        AttentionResult r = mustCompute(s.input, s.config);
        auto c = headContributions(s.input, r);
        ASSERT_TRUE(c.ok()) << c.status().message;
        ASSERT_EQ(c->perHead.size(), 3u);
        EXPECT_LT(c->maxAbsDiff, kSumTol);
        // The sum really is the sum of the parts, and the output is that sum plus b_o.
        Matrix sum = Matrix::Zero(r.output.rows(), r.output.cols());
        for (const Matrix& p : c->perHead) sum += p;
        EXPECT_LT((sum - c->sum).cwiseAbs().maxCoeff(), kSumTol);
        EXPECT_EQ(c->perHead[0].rows(), r.output.rows());
        for (float n : c->norms) EXPECT_GT(n, 0.0f);
    }
}

TEST(LessonHeads, ContributionsWithoutWoAreConcatBlocks)
{
    Session s = seedExample();
    s.input.Wq = uniformMatrix(4, 4, 51);
    s.input.Wk = uniformMatrix(4, 4, 52);
    s.input.Wv = uniformMatrix(4, 4, 53);
    s.config.heads = 2;
    AttentionResult r = mustCompute(s.input, s.config);
    auto c = headContributions(s.input, r);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->sum, r.concat);
    EXPECT_EQ(c->perHead[1].leftCols(2), Matrix::Zero(4, 2));
}

TEST(LessonHeads, OneHeadScoresAreTheSumOfPerHeadScores)
{
    Session s;
    s.input.X = uniformMatrix(4, 6, 61);
    s.input.Wq = uniformMatrix(6, 6, 62);
    s.input.Wk = uniformMatrix(6, 6, 63);
    s.input.Wv = uniformMatrix(6, 6, 64);
    auto c = compareHeadCounts(s.input, s.config, 3);
    ASSERT_TRUE(c.ok()) << c.status().message;
    EXPECT_EQ(c->perHeadRawScores.size(), 3u);
    EXPECT_LT(c->maxAbsDecompositionDiff, kSumTol);
    EXPECT_GT(c->maxAbsOutputDiff, 1e-3f) << "three heads should attend differently from one";
    EXPECT_EQ(c->oneHead.heads.size(), 1u);
    EXPECT_EQ(c->multiHead.heads.size(), 3u);
    EXPECT_FALSE(compareHeadCounts(s.input, s.config, 4).ok());  // 4 does not divide 6
}

TEST(LessonHeads, GroupedQueryBlocksAndText)
{
    // 6 query heads of d_k = 2 sharing 2 KV heads (d_v = 3): W^K 4 wide, W^V 6 wide.
    Session s;
    s.input.X = uniformMatrix(4, 5, 71);
    s.input.Wq = uniformMatrix(5, 12, 72);
    s.input.Wk = uniformMatrix(5, 4, 73);
    s.input.Wv = uniformMatrix(5, 6, 74);
    s.config.heads = 6;
    s.config.kvHeads = 2;
    AttentionResult r = mustCompute(s.input, s.config);
    auto d = validate(s.input, s.config);
    ASSERT_TRUE(d.ok()) << d.status().message;
    auto blocks = headBlocks(*d);
    ASSERT_EQ(blocks.size(), 6u);
    for (const HeadBlock& b : blocks) {
        EXPECT_EQ(b.kvHead, b.head / 3);
        EXPECT_EQ(b.kEnd - b.kBegin, 2);
        EXPECT_EQ(b.vEnd - b.vBegin, 3);
        EXPECT_EQ(b.oBegin, b.head * 3);  // the concat keeps 6 heads
        // The head's K and V are its KV head's columns of the shared projections.
        EXPECT_EQ(r.heads[b.head].K, Matrix(r.K.middleCols(b.kBegin, 2)));
        EXPECT_EQ(r.heads[b.head].V, Matrix(r.V.middleCols(b.vBegin, 3)));
        EXPECT_EQ(r.heads[b.head].output, Matrix(r.concat.middleCols(b.oBegin, 3)));
    }
    const std::string text = groupedQueryText(*d);
    EXPECT_NE(text.find("Grouped-query attention (GQA): the 6 query heads share H_kv = 2 key/value heads, 3 query heads"),
              std::string::npos) << text;
    EXPECT_NE(text.find("are 4 and 6 wide instead of 12 and 18"), std::string::npos) << text;
    EXPECT_NE(text.find("shrink 3×"), std::string::npos) << text;
    s.config.kvHeads = 1;
    s.input.Wk = uniformMatrix(5, 2, 73);
    s.input.Wv = uniformMatrix(5, 3, 74);
    auto mqa = validate(s.input, s.config);
    ASSERT_TRUE(mqa.ok()) << mqa.status().message;
    EXPECT_EQ(groupedQueryText(*mqa).rfind("Multi-query attention (MQA): the 6 query heads share H_kv = 1 key/value head,", 0), 0u)
        << groupedQueryText(*mqa);
    // Multi-head: says what grouping would do. The one-vs-h comparison refuses a grouped session clearly.
    auto c = compareHeadCounts(s.input, s.config, 3);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().message.rfind("kv_heads: the one-vs-h-heads decomposition", 0), 0u) << c.status().message;
    s.config.kvHeads = 0;
    s.config.heads = 2;
    s.input.Wq = uniformMatrix(5, 4, 72);
    s.input.Wk = uniformMatrix(5, 4, 73);
    s.input.Wv = uniformMatrix(5, 6, 74);
    auto mha = validate(s.input, s.config);
    ASSERT_TRUE(mha.ok()) << mha.status().message;
    EXPECT_EQ(groupedQueryText(*mha).rfind("Multi-head attention: each of the 2 query heads has its own key and value head", 0), 0u)
        << groupedQueryText(*mha);
}
