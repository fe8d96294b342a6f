// The document: edits keep shapes consistent, undo/redo restore exactly, the layout only transposes at the
// boundary, and every number comes from attn::compute.
#include "state/app_state.h"
#include "state/document.h"

#include <attnscope/preset_io.h>

#include <gtest/gtest.h>

#include <cmath>

namespace {

attn::Session preset(const std::string& name)
{
    auto s = attn::loadSession(std::string(ATTNSCOPE_PRESETS_DIR) + "/" + name);
    EXPECT_TRUE(s.ok()) << name;
    return s.ok() ? *s : attn::Session{};
}

attn::Session seed000() { return preset("seed000_worked_example.json"); }

// Head block h (columns [h·d, (h+1)·d)) of a document matrix.
attn::Matrix headBlock(const app::Document& d, app::MatrixId id, int h, int width)
{
    attn::Matrix m(d.rows(id), width);
    for (int r = 0; r < m.rows(); ++r)
        for (int c = 0; c < width; ++c) m(r, c) = d.cell(id, r, h * width + c);
    return m;
}

attn::Matrix whole(const app::Document& d, app::MatrixId id) { return headBlock(d, id, 0, d.cols(id)); }

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
    EXPECT_EQ(z.T, 4);
    EXPECT_EQ(z.M, 4);
    EXPECT_EQ(z.dk, 3);
    z.T = 6;
    z.M = 5;
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
    z.T = 0;
    const auto st = d.setSizes(z);
    EXPECT_EQ(st.message, "n: expected an integer in [1, 8192], got 0");
}

TEST(Document, HeadsKeepHeadBlocks)
{
    app::Document d;
    attn::Session s = seed000();
    d.setSession(s, "");
    app::Sizes z = d.sizes();
    z.H = 2;  // d_k stays 3 per head: widths grow to 6, head 0 keeps its columns
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
    EXPECT_EQ(d.sizes().T, 3);
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

// ---- Edits are never lost (issue 11) ------------------------------------------------------------------

TEST(Document, OpeningIsOneUndoStepThatBringsThePreviousSessionBack)
{
    app::Document d;
    d.setSession(seed000(), "/tmp/mine.json");
    EXPECT_FALSE(d.canUndo()) << "the first session replaces only the built-in one: nothing to undo";
    EXPECT_FALSE(d.modified());
    attn::Matrix x = d.session().input.X;
    x(0, 0) = 7.0f;
    ASSERT_TRUE(d.setMatrix(app::MatrixId::X, x).ok());
    EXPECT_TRUE(d.modified());

    d.setSession(preset("seed004_translation_cross.json"), "");  // as opening a preset does
    EXPECT_EQ(d.session().name, "Seed 004: translation as cross-attention");
    EXPECT_EQ(d.path(), "");
    EXPECT_FALSE(d.modified()) << "a session just opened has nothing unsaved";

    ASSERT_TRUE(d.undo()) << "opening is one undo step";
    EXPECT_EQ(d.session().name, seed000().name);
    EXPECT_EQ(d.session().input.X, x) << "the edited session comes back, edit included";
    EXPECT_EQ(d.path(), "/tmp/mine.json") << "and its path (Save must not write it over the preset's)";
    EXPECT_TRUE(d.modified());
    ASSERT_TRUE(d.undo()) << "the edit before the open is still in the history";
    EXPECT_EQ(d.cell(app::MatrixId::X, 0, 0), 1.0f);
    EXPECT_FALSE(d.modified()) << "back where the file was opened";

    ASSERT_TRUE(d.redo());
    ASSERT_TRUE(d.redo());
    EXPECT_EQ(d.session().name, "Seed 004: translation as cross-attention");
    EXPECT_EQ(d.path(), "");
    EXPECT_FALSE(d.redo());
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.lastError().ok()) << d.lastError().message;
}

TEST(Document, SavingMarksTheSessionUnmodified)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.edit([](attn::Session& s) { s.input.mask.causal = true; });
    ASSERT_TRUE(d.modified());
    d.markSaved();
    EXPECT_FALSE(d.modified());
    ASSERT_TRUE(d.undo());
    EXPECT_TRUE(d.modified()) << "undoing past the save differs from the file";
    ASSERT_TRUE(d.redo());
    EXPECT_FALSE(d.modified()) << "redo is back at the saved state";
    d.markUnsaved();  // as a restored autosave is
    EXPECT_TRUE(d.modified());
    d.edit([](attn::Session& s) { s.input.mask.causal = false; });
    ASSERT_TRUE(d.undo());
    EXPECT_TRUE(d.modified()) << "still in no file";
}

TEST(Document, ResetSessionClearsTheHistory)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.edit([](attn::Session& s) { s.input.mask.causal = true; });
    const std::uint64_t serial = d.sessionSerial();
    d.resetSession(preset("seed003_block_identity_heads.json"), "");
    EXPECT_NE(d.sessionSerial(), serial);
    EXPECT_FALSE(d.canUndo());
    EXPECT_FALSE(d.modified());
}

// The app around the document: opening asks first when there are unsaved changes, and undo across an open
// brings the view options of the session it returns to.
class OpenPrompt : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_state.presetsDir = ATTNSCOPE_PRESETS_DIR;
        ASSERT_TRUE(app::openSession(m_state, m_state.presetsDir + "/seed000_worked_example.json"));
    }
    std::string path(const char* name) const { return m_state.presetsDir + "/" + name; }
    app::AppState m_state;
};

TEST_F(OpenPrompt, UnmodifiedSessionsOpenAtOnce)
{
    app::requestOpen(m_state, path("seed004_translation_cross.json"));
    EXPECT_TRUE(m_state.docUi.pendingOpen.empty()) << "nothing unsaved: no question";
    EXPECT_EQ(m_state.doc.session().name, "Seed 004: translation as cross-attention");
    ASSERT_TRUE(m_state.doc.undo()) << "still one undo step";
    EXPECT_EQ(m_state.doc.session().name, "Seed 000: the worked example");
}

TEST_F(OpenPrompt, UnsavedChangesAskFirst)
{
    m_state.doc.edit([](attn::Session& s) { s.input.mask.causal = true; });
    const std::string seed004 = path("seed004_translation_cross.json");
    app::requestOpen(m_state, seed004);
    EXPECT_EQ(m_state.docUi.pendingOpen, seed004) << "the prompt waits for an answer";
    EXPECT_EQ(m_state.doc.session().name, "Seed 000: the worked example") << "nothing opened yet";
    EXPECT_EQ(m_state.docUi.saveAsPath, "seed_000_the_worked_example.json") << "an untitled session gets a file name";
}

TEST_F(OpenPrompt, UndoAcrossAnOpenBringsItsViewBack)
{
    app::followDocumentView(m_state);
    m_state.view.colormaps[int(app::HeatmapKind::Weights)] = attn::Colormap::Magma;  // the user's choice
    app::followDocumentView(m_state);  // a frame: the view is kept with the session
    ASSERT_TRUE(app::openSession(m_state, path("lesson_mask_look_ahead.json")));
    app::followDocumentView(m_state);
    EXPECT_TRUE(m_state.view.lessons[int(app::LessonId::Masks)]) << "the lesson preset opens its panel";
    EXPECT_EQ(m_state.view.colormaps[int(app::HeatmapKind::Weights)], attn::Colormap::Viridis);
    ASSERT_TRUE(m_state.doc.undo());
    app::followDocumentView(m_state);
    EXPECT_FALSE(m_state.view.lessons[int(app::LessonId::Masks)]) << "undo: the lesson panel closes again";
    EXPECT_EQ(m_state.view.colormaps[int(app::HeatmapKind::Weights)], attn::Colormap::Magma);
    ASSERT_TRUE(m_state.doc.redo());
    app::followDocumentView(m_state);
    EXPECT_TRUE(m_state.view.lessons[int(app::LessonId::Masks)]);
}

// ---- Predictable heads (issue 11) --------------------------------------------------------------------

TEST(Document, HeadsRoundTrip1To2To3To1KeepsEveryWeight)
{
    app::Document d;
    const attn::Session s = seed000();  // 1 head, d_k = d_v = 3, d_model = 4
    d.setSession(s, "");
    ASSERT_TRUE(d.setHeads(2, false).ok());
    EXPECT_EQ(d.sizes().dk, 3) << "the per-head sizes stay";
    EXPECT_EQ(d.sizes().dv, 3);
    EXPECT_EQ(headBlock(d, app::MatrixId::Wq, 0, 3), s.input.Wq) << "head 0 keeps its weights";
    const attn::Matrix newWq = headBlock(d, app::MatrixId::Wq, 1, 3), newWv = headBlock(d, app::MatrixId::Wv, 1, 3);
    EXPECT_GT(newWq.cwiseAbs().maxCoeff(), 0.0f) << "a new head is not a dead (all-zero) head";
    EXPECT_NE(newWq, headBlock(d, app::MatrixId::Wk, 1, 3)) << "W^Q and W^K of a new head differ";
    // Xavier: std = sqrt(2 / (4 + 3)) ≈ 0.53; 12 values drawn from it stay well within 5 std.
    EXPECT_LT(newWq.cwiseAbs().maxCoeff(), 5.0f * std::sqrt(2.0f / 7.0f));
    ASSERT_TRUE(d.setHeads(3, false).ok());
    EXPECT_EQ(d.sizes().dk, 3) << "2→3 keeps d_k too (it used to change it behind the user's back)";
    EXPECT_EQ(headBlock(d, app::MatrixId::Wq, 0, 3), s.input.Wq);
    EXPECT_EQ(headBlock(d, app::MatrixId::Wq, 1, 3), newWq) << "2→3 keeps head 1";
    d.recomputeIfNeeded();
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;
    ASSERT_EQ(d.result().heads.size(), 3u);
    const attn::Matrix& w2 = d.result().heads[2].weights;
    EXPECT_GT(w2.maxCoeff() - w2.minCoeff(), 1e-3f) << "the new head's weights are not uniform";
    ASSERT_TRUE(d.setHeads(1, false).ok());
    EXPECT_EQ(whole(d, app::MatrixId::Wq), s.input.Wq) << "1→2→3→1 gives back the original weights exactly";
    EXPECT_EQ(whole(d, app::MatrixId::Wk), s.input.Wk);
    EXPECT_EQ(whole(d, app::MatrixId::Wv), s.input.Wv);
    EXPECT_EQ(d.session().input.X, s.input.X);

    ASSERT_TRUE(d.setHeads(2, false).ok());
    EXPECT_EQ(headBlock(d, app::MatrixId::Wq, 1, 3), newWq) << "a removed head's weights come back when re-added";
    EXPECT_EQ(headBlock(d, app::MatrixId::Wv, 1, 3), newWv);

    // Every change was one undo step: 2 → 1 → 3 → 2 → 1.
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.sizes().H, 1);
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.sizes().H, 3);
    EXPECT_EQ(headBlock(d, app::MatrixId::Wq, 1, 3), newWq) << "undo restores removed heads";
    ASSERT_TRUE(d.undo());
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.sizes().H, 1);
    EXPECT_EQ(whole(d, app::MatrixId::Wq), s.input.Wq);
    EXPECT_FALSE(d.undo());
}

// Grouped-query attention: the KV heads are offered as divisors of the heads; W^K and W^V (and b^K, b^V) grow
// or shrink by whole KV heads, W^Q and W^O keep H heads, and changing the heads keeps H_kv valid.
TEST(Document, KvHeadsResizeKeyValueSideByWholeKvHeads)
{
    app::Document d;
    d.setSession(preset("causal_decoder_2heads.json"), "");  // 2 heads of d_k = d_v = 4, d_model 8, W^O
    ASSERT_TRUE(d.setHeads(6, false).ok());
    d.setPresent(app::MatrixId::Bk, true);
    const app::Sizes z = d.sizes();
    ASSERT_EQ(z.H, 6);
    EXPECT_EQ(z.Hkv, 6) << "multi-head to start with";
    const attn::Matrix wk = whole(d, app::MatrixId::Wk);

    ASSERT_TRUE(d.setKvHeads(2).ok());
    EXPECT_EQ(d.session().config.kvHeads, 2);
    EXPECT_EQ(d.sizes().Hkv, 2);
    EXPECT_EQ(d.sizes().dk, 4) << "each KV head keeps d_k";
    EXPECT_EQ(d.cols(app::MatrixId::Wq), 24) << "W^Q keeps 6 heads";
    EXPECT_EQ(d.cols(app::MatrixId::Wk), 8);
    EXPECT_EQ(d.cols(app::MatrixId::Wv), 8);
    EXPECT_EQ(d.cols(app::MatrixId::Bk), 8);
    EXPECT_EQ(d.rows(app::MatrixId::Wo), 24) << "W^O reads the concatenation of 6 heads";
    EXPECT_EQ(whole(d, app::MatrixId::Wk), attn::Matrix(wk.leftCols(8))) << "KV heads 0 and 1 keep their weights";
    d.recomputeIfNeeded();
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;
    ASSERT_EQ(d.result().heads.size(), 6u);
    EXPECT_EQ(d.result().heads[1].K, d.result().heads[0].K) << "heads 0-2 share KV head 0";
    EXPECT_NE(d.result().heads[3].K, d.result().heads[2].K);

    EXPECT_FALSE(d.setKvHeads(4).ok()) << "4 does not divide 6";
    EXPECT_EQ(d.sizes().Hkv, 2);

    // Heads 6 → 4: H_kv 2 still divides; 4 → 3: the largest divisor of 3 below 2 is 1 (multi-query).
    ASSERT_TRUE(d.setHeads(4, false).ok());
    EXPECT_EQ(d.sizes().Hkv, 2);
    ASSERT_TRUE(d.setHeads(3, false).ok());
    EXPECT_EQ(d.sizes().Hkv, 1);
    EXPECT_EQ(d.cols(app::MatrixId::Wk), 4);
    d.recomputeIfNeeded();
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;

    // Back to multi-head: the KV heads removed earlier come back.
    ASSERT_TRUE(d.setHeads(6, false).ok());
    ASSERT_TRUE(d.setKvHeads(6).ok());
    EXPECT_EQ(d.session().config.kvHeads, 0) << "H_kv = H is stored as the default";
    EXPECT_EQ(whole(d, app::MatrixId::Wk), wk);
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.sizes().Hkv, 1);
}

TEST(Document, RemovedHeadsBiasesComeBack)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.setPresent(app::MatrixId::Bq, true);
    ASSERT_TRUE(d.setHeads(2, false).ok());
    EXPECT_EQ(d.cols(app::MatrixId::Bq), 6);
    EXPECT_EQ(d.cell(app::MatrixId::Bq, 0, 4), 0.0f) << "a new head's bias starts at zero";
    attn::Matrix b = whole(d, app::MatrixId::Bq);
    b(0, 4) = 2.5f;
    ASSERT_TRUE(d.setMatrix(app::MatrixId::Bq, b).ok());
    ASSERT_TRUE(d.setHeads(1, false).ok());
    EXPECT_EQ(d.cols(app::MatrixId::Bq), 3);
    ASSERT_TRUE(d.setHeads(2, false).ok());
    EXPECT_EQ(whole(d, app::MatrixId::Bq), b) << "the removed head's bias came back";
}

TEST(Document, NewHeadsAreSeededTheSameEveryTime)
{
    app::Document a, b;
    a.setSession(seed000(), "");
    b.setSession(seed000(), "");
    ASSERT_TRUE(a.setHeads(3, false).ok());
    ASSERT_TRUE(b.setHeads(2, false).ok());
    ASSERT_TRUE(b.setHeads(3, false).ok());
    EXPECT_EQ(whole(a, app::MatrixId::Wq), whole(b, app::MatrixId::Wq)) << "same head index, same numbers";
    EXPECT_EQ(whole(a, app::MatrixId::Wv), whole(b, app::MatrixId::Wv));
}

TEST(Document, HeadsWithWoGrowItsRowsByHead)
{
    app::Document d;
    const attn::Session s = preset("causal_decoder_2heads.json");
    d.setSession(s, "");
    ASSERT_GT(s.input.Wo.size(), 0);
    const app::Sizes z = d.sizes();
    ASSERT_TRUE(d.setHeads(3, false).ok());
    EXPECT_EQ(d.rows(app::MatrixId::Wo), 3 * z.dv);
    ASSERT_TRUE(d.setHeads(2, false).ok());
    EXPECT_EQ(whole(d, app::MatrixId::Wo), s.input.Wo) << "W^O's rows of the first heads are kept";
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.lastError().ok()) << d.lastError().message;
}

TEST(Document, KeepDModelSplitsTheSameMatrices)
{
    app::Document d;
    const attn::Session s = preset("seed003_block_identity_heads.json");  // W 6×6, 3 heads of 2
    d.setSession(s, "");
    ASSERT_TRUE(d.setHeads(2, true).ok());
    EXPECT_EQ(d.sizes().H, 2);
    EXPECT_EQ(d.sizes().dk, 3);
    EXPECT_EQ(whole(d, app::MatrixId::Wq), s.input.Wq) << "d_model×d_model kept, every value kept";
    const attn::Status st = d.setHeads(4, true);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message.find("not divisible by 4"), std::string::npos) << st.message;
    EXPECT_EQ(d.sizes().H, 2) << "a refused change changes nothing";
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.sizes().H, 3);
    EXPECT_FALSE(d.undo()) << "the refused change added no undo step";
    EXPECT_EQ(d.setHeads(0, false).message, "heads: expected an integer in [1, 64], got 0");
}

// ---- Tokens that mean something (issue 11) -----------------------------------------------------------

TEST(Document, SentenceGivesEachWordOneSeededRow)
{
    app::Document d;
    d.setSession(seed000(), "");
    ASSERT_TRUE(d.setTokensFromSentence("the cat saw the dog", false).ok());
    const attn::Matrix& x = d.session().input.X;
    ASSERT_EQ(x.rows(), 5);
    EXPECT_EQ(x.row(0), x.row(3)) << "\"the\" twice is the same vector";
    EXPECT_NE(x.row(0), x.row(1));
    EXPECT_GT(x.row(4).cwiseAbs().maxCoeff(), 0.0f) << "a new word is not a zero row";
    EXPECT_EQ(d.session().keyTokens, d.session().queryTokens) << "self mode: keys are the queries";

    app::Document e;  // another document, another time: the same words give the same rows
    e.setSession(seed000(), "");
    ASSERT_TRUE(e.setTokensFromSentence("dog the", false).ok());
    EXPECT_EQ(e.session().input.X.row(0), x.row(4));
    EXPECT_EQ(e.session().input.X.row(1), x.row(0));

    // Rows of words already present are kept (edits included); the change is one undo step.
    attn::Matrix edited = x;
    edited(1, 0) = 9.0f;  // "cat"
    ASSERT_TRUE(d.setMatrix(app::MatrixId::X, edited).ok());
    ASSERT_TRUE(d.setTokensFromSentence("a cat", false).ok());
    EXPECT_EQ(d.session().input.X.row(1), edited.row(1));
    ASSERT_TRUE(d.undo());
    EXPECT_EQ(d.session().input.X, edited);
}

TEST(Document, KeySentenceInCrossModeSetsXkvRows)
{
    app::Document d;
    d.setSession(preset("seed004_translation_cross.json"), "");
    const attn::Matrix x = d.session().input.X;
    ASSERT_TRUE(d.setTokensFromSentence("le chat le", true).ok());
    const attn::Matrix& kv = d.session().input.Xkv;
    ASSERT_EQ(kv.rows(), 3);
    EXPECT_EQ(kv.row(0), kv.row(2));
    EXPECT_EQ(d.session().input.X, x) << "the queries are untouched";
    d.recomputeIfNeeded();
    EXPECT_TRUE(d.lastError().ok()) << d.lastError().message;
}

TEST(Document, WordSeedIsFnv1a)
{
    // FNV-1a 64-bit test vectors (Fowler, Noll, Vo): a fixed hash, the same on every platform and run.
    EXPECT_EQ(app::wordSeed(""), 0xcbf29ce484222325ull);
    EXPECT_EQ(app::wordSeed("a"), 0xaf63dc4c8601ec8cull);
    EXPECT_EQ(app::seededNormal(3, 4, 42, 1.0f), app::seededNormal(3, 4, 42, 1.0f));
    EXPECT_NE(app::seededNormal(3, 4, 42, 1.0f), app::seededNormal(3, 4, 43, 1.0f));
}

TEST(Document, AdditiveDefaultsDoNotSaturateTanh)
{
    // Before issue 11: A_q = A_k = I and w_v = 1 saturated tanh on seed 004, and every score was ≈ the same.
    app::Document d;
    d.setSession(preset("seed004_translation_cross.json"), "");
    d.recomputeIfNeeded();
    d.setScore(attn::Score::Additive);
    d.recomputeIfNeeded();
    ASSERT_TRUE(d.lastError().ok()) << d.lastError().message;
    const attn::Matrix& sc = d.result().heads[0].scores;
    const float bound = d.session().input.additive.wv.cwiseAbs().sum();  // |score| ≤ Σ|w_v|, reached when saturated
    EXPECT_GT(sc.maxCoeff() - sc.minCoeff(), 0.1f * bound) << "scores vary";
    EXPECT_LT(sc.cwiseAbs().maxCoeff(), 0.9f * bound) << "tanh is not saturated";
}

} // namespace
