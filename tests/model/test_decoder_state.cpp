// The window's model mode with a decoder language model, without a window: ModelState over the tiny llama GGUF
// (tests/model/data/tiny_llama.gguf: 4 query heads over 2 KV heads) and SmolLM2 when installed. The worker's
// shown runs equal synchronous forwards of the same request; ablations, typing, Generate and chain-view edits
// (W^O, pinned Q/K/V) flow into the predictions.
#include "decoder_window_test.h"

#include "panels/model_panels.h"
#include "panels/panels.h"
#include "state/app_state.h"
#include "state/file_drop.h"
#include "state/model_state.h"
#include "state/text_file.h"
#include "view/run_view.h"

#include <attnscope/decoder.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using testutil::syncRun;
const std::string& kTiny = testutil::kTinyLlama;

// Within 1e-5 of the largest logit: the worker may reuse a prefix (appendTokens) where the oracle runs whole,
// and the products then sum the same numbers in another blocking.
void expectSameLogits(const attn::Vector& got, const attn::Vector& want, const std::string& what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    const float tol = 1e-5f * std::max(1.0f, want.cwiseAbs().maxCoeff());
    EXPECT_LE((got - want).cwiseAbs().maxCoeff(), tol) << what;
}

class DecoderMode : public ::testing::Test {
protected:
    void SetUp() override
    {
        auto m = attn::loadDecoder(kTiny);
        ASSERT_TRUE(m.ok()) << m.status().message;
        oracle = std::move(*m);
        app::ModelStartup st;
        st.text = "the cat sat on";
        st.dir = kTiny;
        app::startModelMode(state, st);
        ASSERT_TRUE(state.model.active);
        ASSERT_TRUE(state.model.isDecoder());
        ASSERT_TRUE(state.model.drun.has_value()) << state.model.error;
    }
    app::AppState state;
    attn::DecoderModel oracle;
};

TEST_F(DecoderMode, OpensWithPredictionsOfTheLastToken)
{
    app::ModelState& m = state.model;
    EXPECT_EQ(m.layers(), oracle.config.layers);
    EXPECT_EQ(m.heads(), 4);
    EXPECT_EQ(m.kvHeads(), 2);
    const attn::DecoderRun want = syncRun(oracle, "the cat sat on");
    EXPECT_EQ(m.drun->encoding.ids, want.encoding.ids);
    expectSameLogits(m.drun->lastLogits, want.lastLogits, "opened");
    app::updatePredictions(m);
    const auto top = attn::topTokens(oracle, want.lastLogits, m.topK, 1.0f);
    ASSERT_EQ(m.predictions.size(), top.size());
    EXPECT_EQ(m.predictions[0].id, top[0].id);
    // A click on token 1: the predictions after it (its logits, not the last position's).
    m.predictPosition = 1;
    app::updatePredictions(m);
    auto at1 = attn::logitsAt(oracle, want, 1);
    ASSERT_TRUE(at1.ok());
    expectSameLogits(m.shownLogits, *at1, "token 1");
    EXPECT_EQ(m.predictions[0].id, attn::topTokens(oracle, *at1, 1)[0].id);
}

TEST_F(DecoderMode, AnAblationMovesThePredictionsAndSaysByHowMuch)
{
    app::ModelState& m = state.model;
    app::updatePredictions(m);
    const attn::Vector before = m.shownLogits;
    app::toggleAblation(state, 1, 3);
    app::finishModelRuns(state);
    ASSERT_EQ(m.drun->ablated.size(), 1u);
    const attn::DecoderRun want = syncRun(oracle, "the cat sat on", {{1, 3}});
    expectSameLogits(m.drun->lastLogits, want.lastLogits, "ablated 1.3");
    EXPECT_TRUE(m.hasBefore);
    expectSameLogits(m.beforeLogits, before, "the logits before the ablation");
    EXPECT_GT((m.shownLogits - m.beforeLogits).cwiseAbs().maxCoeff(), 1e-4f) << "ablating a head changed nothing";
    // Restoring it gives the unablated run back.
    app::toggleAblation(state, 1, 3);
    app::finishModelRuns(state);
    expectSameLogits(m.drun->lastLogits, syncRun(oracle, "the cat sat on").lastLogits, "restored");
}

TEST_F(DecoderMode, TypingAndGenerateAppendToTheText)
{
    app::ModelState& m = state.model;
    m.textA = "the cat sat on the";
    app::rerunModel(state, "edited the text");
    app::finishModelRuns(state);
    attn::DecoderRun want = syncRun(oracle, "the cat sat on the");
    EXPECT_EQ(m.drun->encoding.ids, want.encoding.ids);
    expectSameLogits(m.drun->lastLogits, want.lastLogits, "typed");
    // Generate 2: the top token twice, each predicted from the text so far.
    std::string expected = m.textA;
    for (int i = 0; i < 2; ++i) {
        const attn::DecoderRun r = syncRun(oracle, expected);
        expected += oracle.tokenizer.tokenText(attn::topTokens(oracle, r.lastLogits, 1)[0].id);
    }
    app::generateTokens(state, 2);
    app::finishModelRuns(state);
    EXPECT_EQ(m.textA, expected);
    EXPECT_EQ(m.generateLeft, 0);
    const attn::DecoderRun whole = syncRun(oracle, expected);
    EXPECT_EQ(m.drun->encoding.ids, whole.encoding.ids);
    expectSameLogits(m.drun->lastLogits, whole.lastLogits, "generated");
    // What the grid, the lines view and the figures read of the grown run (its maps kept with room for more
    // tokens, rows with a stride): the whole run's maps, within the rounding of the other blocking.
    ASSERT_GT(m.drun->weights.at(0).at(0).capacity(), m.drun->weights[0][0].size()) << "appends grow into spare room";
    const app::RunView shown = m.shownRun();
    const auto wholeMaps = attn::decoderMaps(oracle, whole);
    for (int l = 0; l < oracle.config.layers; ++l)
        for (int h = 0; h < oracle.config.heads; ++h) {
            attn::Matrix tile, want;
            ASSERT_TRUE(wholeMaps->whole(attn::MapKind::Weights, l, h, want).ok());
            ASSERT_TRUE(shown.maps().whole(attn::MapKind::Weights, l, h, tile).ok());
            EXPECT_LE((tile - want).cwiseAbs().maxCoeff(), 1e-5f) << "L" << l << " H" << h;
            EXPECT_LE((attn::Matrix(shown.headWeights(l, h)) - want).cwiseAbs().maxCoeff(), 1e-5f) << "L" << l << " H" << h;
        }
}

TEST_F(DecoderMode, ALayerInTheChainViewEditsFlowBack)
{
    app::ModelState& m = state.model;
    app::openLayerInChain(state, 1, 3);
    ASSERT_EQ(m.openLayer, 1);
    EXPECT_EQ(state.view.head, 3);
    const attn::Session& s = state.doc.session();
    EXPECT_EQ(s.config.mode, attn::Mode::Direct);
    EXPECT_EQ(s.config.heads, 4);
    EXPECT_EQ(s.config.kvHeads, 2);
    EXPECT_TRUE(s.input.mask.causal);
    const int n = static_cast<int>(m.drun->encoding.ids.size());
    EXPECT_EQ(s.input.Q.rows(), n);
    EXPECT_EQ(s.input.Q.cols(), 4 * oracle.config.headDim);
    EXPECT_EQ(s.input.K.cols(), 2 * oracle.config.headDim);

    // An edit of W^O: the layers from 1 on and the predictions follow (oracle: the same edit, a whole forward).
    attn::Session edited = s;
    edited.input.Wo.row(0) *= 3.0f;
    state.doc.setSession(edited, "");
    app::syncModelEdits(state);
    app::finishModelRuns(state);
    oracle.layers[1].Wo = attn::WeightMatrix(edited.input.Wo);
    expectSameLogits(m.drun->lastLogits, syncRun(oracle, "the cat sat on").lastLogits, "W^O edited");

    // An edit of K (after RoPE): pinned, layers 1… recomputed from it.
    edited.input.K(n - 1, 0) += 2.0f;
    state.doc.setSession(edited, "");
    app::syncModelEdits(state);
    app::finishModelRuns(state);
    attn::DecoderRun want = syncRun(oracle, "the cat sat on");
    attn::AttentionInput in;
    attn::AttentionConfig cfg;
    ASSERT_TRUE(attn::decoderLayerInput(oracle, want, 1, in, cfg).ok());
    in.K(n - 1, 0) += 2.0f;
    want.pinned = attn::DecoderRun::PinnedQKV{1, in.Q, in.K, in.V};
    ASSERT_TRUE(attn::recomputeDecoderFrom(oracle, 1, want).ok());
    expectSameLogits(m.drun->lastLogits, want.lastLogits, "K pinned");
}

TEST_F(DecoderMode, PanelsDrawHeadlessAndAClickedTokenShowsItsPredictions)
{
    testutil::HeadlessModelWindow win(state);
    for (int i = 0; i < 3; ++i) win.frame();
    EXPECT_EQ(state.rects.count("model/kv_groups"), 1u);
    EXPECT_EQ(state.rects.count("model/next/0"), 1u);
    win.click("model/token/1");
    EXPECT_EQ(state.model.predictPosition, 1);
    // The × in a thumbnail's corner ablates that head (and a second click restores it); the thumbnail itself
    // still opens the layer.
    win.click("model/ablate/1/2");
    app::finishModelRuns(state);
    ASSERT_EQ(state.model.drun->ablated.size(), 1u);
    EXPECT_EQ(state.model.drun->ablated[0], std::make_pair(1, 2));
    EXPECT_EQ(state.model.openLayer, -1) << "the × opened the layer too";
    win.click("model/ablate/1/2");
    app::finishModelRuns(state);
    EXPECT_TRUE(state.model.drun->ablated.empty());
}

// File → Open text… (issue 18): a text file runs as the text; past the context it is cut, and the warning stays
// with the run; a file that is not a text leaves the text and its run as they were.
class OpenText : public DecoderMode {
protected:
    void SetUp() override
    {
        DecoderMode::SetUp();
        dir = std::filesystem::temp_directory_path() / ("attnscope_open_text_" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
    }
    void TearDown() override
    {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    std::string write(const std::string& name, const std::string& bytes)
    {
        const std::filesystem::path p = dir / name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p.string();
    }
    std::filesystem::path dir;
};

TEST_F(OpenText, TheFileRunsAsTheText)
{
    app::ModelState& m = state.model;
    const std::string path = write("story.txt", "the dog ran to");
    ASSERT_TRUE(app::openModelText(state, path).ok()) << m.textOpenError;
    app::finishModelRuns(state);
    EXPECT_EQ(m.textA, "the dog ran to");
    EXPECT_EQ(m.textPath, path);
    EXPECT_TRUE(m.textOpenError.empty());
    ASSERT_TRUE(m.drun.has_value());
    EXPECT_EQ(m.drun->encoding.ids, syncRun(oracle, "the dog ran to").encoding.ids);
    EXPECT_TRUE(m.drun->warnings.empty());
}

TEST_F(OpenText, PastTheContextTheTextIsCutWithAWarningThatStaysWithTheRun)
{
    app::ModelState& m = state.model;
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the cat sat on the mat. ";
    ASSERT_TRUE(app::openModelText(state, write("long.txt", text)).ok()) << m.textOpenError;
    app::finishModelRuns(state);
    const int context = oracle.config.maxPositions;
    ASSERT_TRUE(m.drun.has_value()) << m.error;
    EXPECT_EQ(m.drun->encoding.ids.size(), static_cast<std::size_t>(context));
    EXPECT_FALSE(m.drun->lazy) << "the text is long, but its run is " << context << " tokens: dense maps";
    ASSERT_EQ(m.drun->warnings.size(), 1u);
    EXPECT_NE(m.drun->warnings[0].find("the model's context is " + std::to_string(context) + ": truncated to the first " +
                                       std::to_string(context)), std::string::npos) << m.drun->warnings[0];
    // The sidebar shows it while the run is shown (the toast fades).
    testutil::HeadlessModelWindow win(state);
    for (int i = 0; i < 2; ++i) win.frame();
    EXPECT_TRUE(state.rects.count("model/run_warning")) << "no warning line in the sidebar";
}

TEST_F(OpenText, AFileThatIsNotATextKeepsTheTextAndItsRun)
{
    app::ModelState& m = state.model;
    const std::vector<int> ids = m.drun->encoding.ids;
    const long runs = m.runsStarted();
    const std::pair<std::string, std::string> bad[] = {
        {write("latin1.txt", "caf\xE9"), "not UTF-8 (byte 0xe9 at offset 3"},
        {write("model.bin", std::string("GGUF\0\0", 6)), "a binary file (a NUL byte at offset 4)"},
        {write("empty.txt", ""), "the file is empty"},
        {(dir / "missing.txt").string(), "cannot open"},
        {write("huge.txt", std::string(app::kMaxTextFileBytes + 1, 'a')), "a text is read up to 4 MiB"},
    };
    for (const auto& [path, why] : bad) {
        m.showTextDialog = true;
        const attn::Status st = app::openModelText(state, path);
        EXPECT_FALSE(st.ok()) << path;
        EXPECT_NE(st.message.find(why), std::string::npos) << st.message;
        EXPECT_EQ(m.textOpenError, st.message);
        EXPECT_TRUE(m.showTextDialog) << "the dialog stays open with the error";
        app::finishModelRuns(state);
        EXPECT_EQ(m.textA, "the cat sat on");
        ASSERT_TRUE(m.drun.has_value());
        EXPECT_EQ(m.drun->encoding.ids, ids);
        EXPECT_EQ(m.runsStarted(), runs) << "a refused file ran";
    }
    // The dialog draws the error (headless).
    testutil::HeadlessModelWindow win(state);
    for (int i = 0; i < 2; ++i) win.frame();
    EXPECT_TRUE(state.rects.count("model/open_text_error"));
}

TEST(OpenTextWithoutADecoder, SaysToOpenOneFirst)
{
    app::AppState state;
    const attn::Status st = app::openModelText(state, "whatever.txt");
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message.find("open a decoder model first"), std::string::npos) << st.message;
    EXPECT_FALSE(state.model.active);
}

// The window's start (issue 18, ModelStartup::async): startModelMode returns once the first run is sent; the
// frames show the run's progress until it is taken, then the views, and --model-layer is applied then.
TEST(DecoderAsyncStart, TheWindowDrawsBeforeTheRunAndTheLayerOpensWhenItIsShown)
{
    app::AppState state;
    app::ModelStartup st;
    st.text = "the cat sat on";
    st.dir = kTiny;
    st.openLayer = 1;
    st.async = true;
    app::startModelMode(state, st);
    app::ModelState& m = state.model;
    ASSERT_TRUE(m.active);
    // Nothing is taken from the worker outside the frame loop: no run yet, whether or not it has finished.
    EXPECT_FALSE(m.hasRun());
    EXPECT_EQ(m.openLayer, -1) << "--model-layer applied before there was a run";
    EXPECT_TRUE(app::modelViewShown(state));
    testutil::HeadlessModelWindow win(state);
    win.frame();  // the panel is drawn before the frame takes the run (drawModelOpenDialog syncs after it)
    EXPECT_EQ(state.rects.count("model/first_run"), 1u);
    EXPECT_EQ(state.rects.count("model/textA"), 1u) << "the text is shown while it runs";
    app::finishModelRuns(state);
    app::syncModelEdits(state);  // as the next frame does
    ASSERT_TRUE(m.hasRun()) << m.error;
    EXPECT_EQ(m.openLayer, 1);
    EXPECT_FALSE(m.startupLeft.has_value());
}

TEST(DecoderAsyncStart, AFirstRunThatFailsShowsWhyAndRunStartsItAgain)
{
    app::AppState state;
    app::ModelStartup st;
    st.text = "caf\xE9";  // not UTF-8: the tokenizer refuses it on the worker
    st.dir = kTiny;
    st.openLayer = 1;
    st.async = true;
    app::startModelMode(state, st);
    app::ModelState& m = state.model;
    app::finishModelRuns(state);
    app::syncModelEdits(state);
    EXPECT_FALSE(m.hasRun());
    EXPECT_NE(m.error.find("UTF-8"), std::string::npos) << m.error;
    EXPECT_FALSE(m.startupLeft.has_value()) << "the start-up's layer waits for a run that will not come";
    EXPECT_EQ(m.openLayer, -1);
    testutil::HeadlessModelWindow win(state);
    win.frame();
    EXPECT_EQ(state.rects.count("model/first_run"), 1u);
    ASSERT_EQ(state.rects.count("model/run"), 1u) << "no Run button";
    m.textA = "the cat";
    win.click("model/run");
    app::finishModelRuns(state);
    ASSERT_TRUE(m.hasRun()) << m.error;
    EXPECT_TRUE(m.error.empty()) << m.error;
    win.frame();
    EXPECT_EQ(state.rects.count("model/next/0"), 1u) << "the predictions after the run";
}

TEST(DecoderDrop, AGgufOrAFolderIsAModel)
{
    EXPECT_EQ(app::dropKindOf("/x/m.GGUF"), app::DropKind::Model);
    EXPECT_EQ(app::dropKindOf(ATTNSCOPE_DECODER_DATA "/tiny_llama"), app::DropKind::Model);
    EXPECT_EQ(app::dropKindOf("/x/s.json"), app::DropKind::Session);
}

TEST(SampleToken, TheSameSeedDrawsTheSameTokenAndZeroTemperatureTheTop)
{
    attn::Vector logits(5);
    logits << 0.1f, 2.0f, -1.0f, 2.0f, 0.5f;
    EXPECT_EQ(attn::sampleToken(logits, 0.0f, 7), 1);  // the first of the equal maxima
    int counts[5] = {0, 0, 0, 0, 0};
    for (std::uint64_t s = 0; s < 4000; ++s) {
        const int id = attn::sampleToken(logits, 1.0f, s);
        ASSERT_GE(id, 0);
        ASSERT_LT(id, 5);
        ++counts[id];
        EXPECT_EQ(id, attn::sampleToken(logits, 1.0f, s));
    }
    // p = softmax(logits): 0.061, 0.405, 0.020, 0.405, 0.091; 4000 draws are within 5 standard deviations.
    EXPECT_NEAR(counts[1], 1620, 160);
    EXPECT_NEAR(counts[3], 1620, 160);
    EXPECT_NEAR(counts[2], 80, 45);
    EXPECT_EQ(attn::sampleToken(attn::Vector(), 1.0f, 1), -1);
}

TEST(SmolLM2Window, TheCapitalOfFranceIsParisOnTop)
{
    if (!std::filesystem::exists(ATTNSCOPE_SMOLLM2)) GTEST_SKIP() << "SmolLM2 is not installed (scripts/setup.sh installs it)";
    app::AppState state;
    app::ModelStartup st;
    st.text = "The capital of France is";
    st.dir = ATTNSCOPE_SMOLLM2;
    app::startModelMode(state, st);
    ASSERT_TRUE(state.model.drun.has_value()) << state.model.error;
    app::updatePredictions(state.model);
    ASSERT_FALSE(state.model.predictions.empty());
    EXPECT_EQ(state.model.predictions[0].token, " Paris");
    EXPECT_EQ(state.model.kvHeads(), 3);
}

} // namespace
