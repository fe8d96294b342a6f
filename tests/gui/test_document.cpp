// The document: edits keep shapes consistent, undo/redo restore exactly, the layout only transposes at the
// boundary, and every number comes from attn::compute.
#include "state/document.h"

#include <attnscope/preset_io.h>

#include <gtest/gtest.h>

namespace {

attn::Session seed000()
{
    auto s = attn::loadSession(std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json");
    EXPECT_TRUE(s.ok());
    return s.ok() ? *s : attn::Session{};
}

TEST(Document, ComputesSeed000ThroughCore)
{
    app::Document d;
    d.setSession(seed000(), "");
    ASSERT_TRUE(d.recomputeIfNeeded());
    ASSERT_TRUE(d.hasResult());
    // The same numbers as attn::compute on the file's inputs.
    const attn::Session s = seed000();
    auto direct = attn::compute(s.input, s.config);
    ASSERT_TRUE(direct.ok());
    EXPECT_TRUE(d.result().output.isApprox(direct->output));
    EXPECT_FALSE(d.recomputeIfNeeded()) << "no input changed: no recompute";
}

TEST(Document, EditUndoRedo)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.recomputeIfNeeded();
    const attn::Matrix before = d.result().output;
    attn::Matrix x = d.session().input.X;
    x(0, 0) = 5.0f;
    ASSERT_TRUE(d.setMatrix(app::MatrixId::X, x).ok());
    ASSERT_TRUE(d.recomputeIfNeeded());
    EXPECT_FALSE(d.result().output.isApprox(before));
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.cell(app::MatrixId::X, 0, 0), 1.0f);
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.result().output.isApprox(before));
    ASSERT_TRUE(d.redo());
    EXPECT_EQ(d.cell(app::MatrixId::X, 0, 0), 5.0f);
    EXPECT_FALSE(d.redo());
}

TEST(Document, WrongShapeOrNanRefused)
{
    app::Document d;
    d.setSession(seed000(), "");
    const auto st = d.setMatrix(app::MatrixId::Wq, attn::Matrix::Zero(2, 2));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message, "W^Q: expected 4×3, got 2×2 (change the sizes first)");
    attn::Matrix x = d.session().input.X;
    x(1, 1) = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(d.setMatrix(app::MatrixId::X, x).ok());
    EXPECT_FALSE(d.canUndo()) << "a refused edit adds no undo step";
}

TEST(Document, ResizeKeepsValues)
{
    app::Document d;
    d.setSession(seed000(), "");
    app::Sizes z = d.sizes();
    EXPECT_EQ(z.n, 4);
    EXPECT_EQ(z.dModel, 4);
    EXPECT_EQ(z.dk, 3);
    z.n = 6;
    z.dModel = 5;
    ASSERT_TRUE(d.setSizes(z).ok());
    EXPECT_EQ(d.rows(app::MatrixId::X), 6);
    EXPECT_EQ(d.cols(app::MatrixId::Wq), 3);
    EXPECT_EQ(d.rows(app::MatrixId::Wq), 5);
    EXPECT_EQ(d.cell(app::MatrixId::X, 1, 1), 2.0f);  // kept
    EXPECT_EQ(d.cell(app::MatrixId::X, 5, 4), 0.0f);  // new
    EXPECT_EQ(d.session().queryTokens.size(), 6u);
    EXPECT_EQ(d.session().keyTokens.size(), 6u);
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.lastError().ok()) << d.lastError().message;
    z.n = 0;
    const auto st = d.setSizes(z);
    EXPECT_EQ(st.message, "n: expected an integer in [1, 8192], got 0");
}

TEST(Document, HeadsKeepHeadBlocks)
{
    app::Document d;
    attn::Session s = seed000();
    d.setSession(s, "");
    app::Sizes z = d.sizes();
    z.heads = 2;  // d_k stays 3 per head: widths grow to 6, head 0 keeps its columns
    ASSERT_TRUE(d.setSizes(z).ok());
    EXPECT_EQ(d.cols(app::MatrixId::Wq), 6);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c) EXPECT_EQ(d.cell(app::MatrixId::Wq, r, c), s.input.Wq(r, c));
    d.recomputeIfNeeded();
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;
    EXPECT_EQ(d.result().heads.size(), 2u);
}

TEST(Document, ColumnLayoutTransposesOnlyAtTheBoundary)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.recomputeIfNeeded();
    const attn::Matrix rowOut = d.result().output;
    d.edit([](attn::Session& s) { s.config.layout = attn::Layout::Column; });
    EXPECT_EQ(d.cell(app::MatrixId::X, 1, 1), 2.0f) << "storage stays canonical";
    ASSERT_TRUE(d.recomputeIfNeeded());
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;
    EXPECT_TRUE(d.result().output.isApprox(rowOut.transpose())) << "same numbers up to the transpose";
    const attn::Session saved = d.sessionForSave("{}");
    EXPECT_EQ(saved.input.X.rows(), 4);
    EXPECT_TRUE(saved.input.Wq.isApprox(d.session().input.Wq.transpose()));
    // And back through a file: the same document.
    app::Document e;
    e.setSession(saved, "");
    EXPECT_TRUE(e.session().input.Wq.isApprox(d.session().input.Wq));
}

TEST(Document, ModesCreateWhatTheyNeed)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.recomputeIfNeeded();
    const attn::Matrix out = d.result().output;
    d.setMode(attn::Mode::Direct);
    EXPECT_EQ(d.rows(app::MatrixId::Q), 4);
    ASSERT_TRUE(d.recomputeIfNeeded());
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;
    EXPECT_TRUE(d.result().output.isApprox(out)) << "direct mode starts from the projections just computed";
    d.setMode(attn::Mode::Cross);
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.lastError().ok()) << d.lastError().message;
    d.setScore(attn::Score::Additive);
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.lastError().ok()) << d.lastError().message;
    EXPECT_EQ(d.result().heads.size(), 1u);
}

TEST(Document, TokensFromSentence)
{
    app::Document d;
    d.setSession(seed000(), "");
    ASSERT_TRUE(d.setTokensFromSentence("the cat sat", false).ok());
    EXPECT_EQ(d.sizes().n, 3);
    EXPECT_EQ(d.session().keyTokens, (std::vector<std::string>{"the", "cat", "sat"}));
    EXPECT_EQ(d.setTokensFromSentence("   ", false).message, "tokens: the sentence has no words");
}

TEST(Document, BlockIdentityFill)
{
    const attn::Matrix m = app::makeFilled(app::FillKind::Identity, 2, 4, 0);
    attn::Matrix expect(2, 4);
    expect << 1, 0, 1, 0, 0, 1, 0, 1;
    EXPECT_EQ(m, expect);
    const attn::Matrix a = app::makeFilled(app::FillKind::Xavier, 8, 8, 7), b = app::makeFilled(app::FillKind::Xavier, 8, 8, 7);
    EXPECT_EQ(a, b) << "same seed, same matrix";
}

} // namespace
