// The window's model mode without a window: ModelState (text, ablation, chain-view edits flowing back, the
// worker thread that runs them) and a few headless frames of the model panels (null backend: the CPU heatmap
// fallback draws the thumbnails).
#include "../gui/headless_imgui.h"

#include "messages.h"
#include "panels/model_panels.h"
#include "panels/panels.h"
#include "state/app_state.h"
#include "state/model_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

namespace {

class ModelMode : public ::testing::Test {
protected:
    void SetUp() override
    {
        app::ModelStartup st;
        st.text = "The cat sat on the mat.";
        st.pair = "A dog lay on the rug.";
        st.dir = ATTNSCOPE_MODEL_DIR;
        app::startModelMode(m_state, st);
        ASSERT_TRUE(m_state.model.active) << "scripts/setup.sh installs the model into build/models";
        ASSERT_TRUE(m_state.model.run.has_value());
    }
    // A second copy of the model for synchronous runs (the oracle of the worker's): the window's belongs to
    // its worker thread.
    static attn::Model& syncModel()
    {
        static attn::Model model = [] {
            auto m = attn::loadModel(ATTNSCOPE_MODEL_DIR);
            EXPECT_TRUE(m.ok()) << m.status().message;
            return m.ok() ? std::move(*m) : attn::Model{};
        }();
        return model;
    }
    app::AppState m_state;
};

// The shown runs equal synchronous runs of the request they are shown for (same weights: the model's own), bit
// for bit: the model sizes its thread teams by the machine's load, but its work is split into blocks that
// depend on the sizes alone and Eigen's products run on one thread each (core/src/compute.cpp), so every run
// of the same request adds in the same order whatever the team (this test runs under `ctest -j2` load).
void expectSame(const attn::Matrix& got, const attn::Matrix& want, const std::string& what)
{
    ASSERT_EQ(got.rows(), want.rows()) << what;
    ASSERT_EQ(got.cols(), want.cols()) << what;
    EXPECT_TRUE(got == want) << what << ": largest difference " << (want.size() ? (got - want).cwiseAbs().maxCoeff() : 0.0f);
}

void expectSameRun(const attn::ModelRun& got, const attn::ModelRun& want, const char* what)
{
    ASSERT_EQ(got.encoding.tokens, want.encoding.tokens) << what;
    ASSERT_EQ(got.hidden.size(), want.hidden.size()) << what;
    for (std::size_t l = 0; l < got.hidden.size(); ++l)
        expectSame(got.hidden[l], want.hidden[l], std::string(what) + " layer " + std::to_string(l));
    ASSERT_EQ(got.attention.size(), want.attention.size()) << what;
    for (std::size_t l = 0; l < got.attention.size(); ++l)
        for (std::size_t h = 0; h < got.attention[l].heads.size(); ++h)
            expectSame(got.attention[l].heads[h].weights, want.attention[l].heads[h].weights,
                        std::string(what) + " " + std::to_string(l) + ":" + std::to_string(h));
    expectSame(attn::Matrix(got.embedding), attn::Matrix(want.embedding), std::string(what) + " embedding");
}

TEST_F(ModelMode, StartsWithThePairAndACosine)
{
    const app::ModelState& m = m_state.model;
    EXPECT_EQ(m.run->encoding.tokens.size(), 17u);
    ASSERT_TRUE(m.hasCosine);
    // Two different sentences of similar meaning: clearly related, clearly not the same.
    EXPECT_GT(m.cosine, 0.1f);
    EXPECT_LT(m.cosine, 0.99f);
}

TEST_F(ModelMode, AblationTogglesAndChangesTheCosineFromThatLayerOn)
{
    app::ModelState& m = m_state.model;
    const attn::Matrix h2 = m.run->hidden[2];
    const std::uint64_t gen1 = m.layerGeneration[1];
    const float cos0 = m.cosine;
    app::toggleAblation(m_state, 2, 5);
    app::finishModelRuns(m_state);
    EXPECT_EQ(m.run->ablated.size(), 1u);
    EXPECT_EQ(m.run->hidden[2], h2);                   // layer 2's input is untouched
    EXPECT_EQ(m.layerGeneration[1], gen1);             // so is layer 1's thumbnail
    EXPECT_EQ(m.run->attention[2].heads[5].weights.cwiseAbs().maxCoeff(), 0.0f);
    EXPECT_NE(m.cosine, cos0);
    EXPECT_EQ(m.cosineBefore, cos0);
    EXPECT_EQ(m.lastChange, "ablated layer 2 head 5");
    // The cosine came from A and B recomputed from layer 2 on: the same as two whole runs with the ablation.
    {
        auto a = attn::runModel(syncModel(), m.textA, std::nullopt, {attn::Backend::Cpu, {{2, 5}}});
        auto b = attn::runModel(syncModel(), m.textB, std::nullopt, {attn::Backend::Cpu, {{2, 5}}});
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_EQ(m.cosine, attn::cosineSimilarity(a->embedding, b->embedding));
    }
    app::toggleAblation(m_state, 2, 5);
    app::finishModelRuns(m_state);
    EXPECT_TRUE(m.run->ablated.empty());
    EXPECT_NEAR(m.cosine, cos0, 1e-6f);
}

TEST_F(ModelMode, ChainViewEditsFlowBackIntoTheModel)
{
    app::ModelState& m = m_state.model;
    app::openLayerInChain(m_state, 4);
    ASSERT_EQ(m.openLayer, 4);
    EXPECT_EQ(m_state.doc.session().input.X, m.run->hidden[4]);
    EXPECT_EQ(m_state.doc.session().config.heads, 12);
    EXPECT_EQ(m_state.doc.session().queryTokens, m.run->encoding.tokens);
    const attn::Matrix h4 = m.run->hidden[4], out = m.run->hidden[6];
    const attn::Matrix layer3 = m.run->attention[3].heads[0].weights;
    m_state.doc.edit([](attn::Session& s) { s.input.Wq(0, 0) += 5.0f; s.input.Wk(1, 2) -= 3.0f; });
    app::syncModelEdits(m_state);
    app::finishModelRuns(m_state);
    EXPECT_EQ(m.wanted.weights[4]->Wq, m_state.doc.session().input.Wq);
    EXPECT_EQ(m.run->hidden[4], h4);
    EXPECT_EQ(m.run->attention[3].heads[0].weights, layer3);  // below the edit: not recomputed
    EXPECT_GT((m.run->hidden[6] - out).cwiseAbs().maxCoeff(), 1e-5f);
    EXPECT_EQ(m.lastChange, "edited layer 4's weights");
    // Undo in the chain view flows back as well.
    ASSERT_TRUE(m_state.doc.undo());
    app::syncModelEdits(m_state);
    app::finishModelRuns(m_state);
    EXPECT_LE((m.run->hidden[6] - out).cwiseAbs().maxCoeff(), 1e-6f);
}

// Item: an X edit of the opened layer pins that layer's input; layers l…L−1 recompute from it (the core's
// PinnedInput, checked against a naive forward in test_model_files), the embedding follows, layers below stay.
TEST_F(ModelMode, ChainViewXEditsFlowOnFromThatLayer)
{
    app::ModelState& m = m_state.model;
    app::openLayerInChain(m_state, 3);
    const attn::Matrix h2 = m.run->hidden[2], out = m.run->hidden[6];
    const attn::Vector emb = m.embedding;
    const std::uint64_t gen2 = m.layerGeneration[2], gen3 = m.layerGeneration[3];
    m_state.doc.edit([](attn::Session& s) { s.input.X(2, 7) += 4.0f; s.input.X(5, 0) = -3.0f; });
    app::syncModelEdits(m_state);
    app::finishModelRuns(m_state);
    EXPECT_EQ(m.lastChange, "edited layer 3's X");
    EXPECT_EQ(m.run->hidden[3], m_state.doc.session().input.X);
    EXPECT_EQ(m.run->hidden[2], h2);
    EXPECT_EQ(m.layerGeneration[2], gen2);
    EXPECT_GT(m.layerGeneration[3], gen3);
    EXPECT_GT((m.run->hidden[6] - out).cwiseAbs().maxCoeff(), 1e-4f);
    EXPECT_NE(m.embedding, emb);
    // The same as a synchronous run with that input pinned.
    auto want = attn::runModel(syncModel(), m.textA, m.textB);
    ASSERT_TRUE(want.ok());
    ASSERT_TRUE(attn::recomputeFrom(syncModel(), 3, *want, attn::PinnedInput{3, m_state.doc.session().input.X}).ok());
    expectSameRun(*m.run, *want, "pinned X");
    // A later ablation below the pin keeps it: layer 3's input stays the edited X.
    app::toggleAblation(m_state, 1, 0);
    app::finishModelRuns(m_state);
    EXPECT_EQ(m.run->hidden[3], m_state.doc.session().input.X);
    EXPECT_NE(m.run->hidden[2], h2);
}

// Item: the runs happen on the worker thread. A burst of requests while the frame loop takes nothing runs at
// most twice (the one that started, then the last), the last request's state is what ends up shown, and
// every run shown on the way is a complete, consistent run of the request it is shown for.
TEST_F(ModelMode, ABurstOfRequestsCoalescesAndTheLastWins)
{
    app::ModelState& m = m_state.model;
    const long before = m.runsStarted();
    for (int i = 0; i < 20; ++i) app::toggleAblation(m_state, i % 6, i / 6);  // 20 different heads, all on
    EXPECT_TRUE(m.computing());
    app::finishModelRuns(m_state);
    EXPECT_FALSE(m.computing());
    EXPECT_LE(m.runsStarted() - before, 2);  // a job waits until the finished one is taken: no queue
    EXPECT_EQ(m.run->ablated.size(), 20u);
    EXPECT_EQ(m.shown.id, m.wanted.id);
    EXPECT_EQ(m.lastChange, "ablated layer 1 head 3");  // the last request's
    attn::ModelOptions o;
    o.ablate = m.wanted.ablated;
    auto want = attn::runModel(syncModel(), m.textA, m.textB, o);
    ASSERT_TRUE(want.ok());
    expectSameRun(*m.run, *want, "after the burst");
    // Frames that take whatever finished between requests: each shown run matches its own request.
    for (int frame = 0; frame < 6; ++frame) {
        app::toggleAblation(m_state, 5, frame);
        app::syncModelEdits(m_state);  // a frame: takes a finished run, if any
        ASSERT_TRUE(m.run.has_value());
        EXPECT_EQ(m.run->ablated, m.shown.ablated) << frame;
        for (const auto& [l, h] : m.run->ablated)
            EXPECT_EQ(m.run->attention[std::size_t(l)].heads[std::size_t(h)].weights.cwiseAbs().maxCoeff(), 0.0f);
    }
    app::finishModelRuns(m_state);
    o.ablate = m.wanted.ablated;
    auto last = attn::runModel(syncModel(), m.textA, m.textB, o);
    ASSERT_TRUE(last.ok());
    expectSameRun(*m.run, *last, "after the frames");
    auto a = attn::runModel(syncModel(), m.textA, std::nullopt, o);
    auto b = attn::runModel(syncModel(), m.textB, std::nullopt, o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(m.cosine, attn::cosineSimilarity(a->embedding, b->embedding));
}

// Item: while a model layer is the chain view's session, the controls that would break the link are disabled
// (a click on "causal" changes nothing) and one line says why; a hand-made session gets them back.
TEST_F(ModelMode, ControlsThatWouldBreakTheModelLinkAreDisabled)
{
    ImGuiIO& io = createHeadlessImGui();
    m_state.recordRects = true;
    app::openLayerInChain(m_state, 2);
    auto frame = [&](bool mouseDown) {
        io.MouseDown[0] = mouseDown;
        ImGui::NewFrame();
        app::drawControlsPanel(m_state);
        ImGui::Render();
    };
    auto clickCausal = [&] {
        frame(false);
        ASSERT_EQ(m_state.rects.count("control/causal"), 1u);
        const app::UiRect r = m_state.rects["control/causal"];
        io.MousePos = ImVec2((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2);
        frame(false);
        frame(true);
        frame(false);
    };
    clickCausal();
    EXPECT_EQ(m_state.rects.count("control/model_link"), 1u);
    EXPECT_FALSE(m_state.doc.session().input.mask.causal);
    EXPECT_EQ(m_state.model.openLayer, 2);
    // A hand-made session: the same click sets the causal mask.
    attn::Session hand;
    hand.input.X = attn::Matrix::Ones(3, 4);
    hand.input.Wq = hand.input.Wk = hand.input.Wv = attn::Matrix::Identity(4, 4);
    m_state.doc.setSession(std::move(hand), "");
    app::syncModelEdits(m_state);  // the session's shapes left the model's: unlinked
    EXPECT_EQ(m_state.model.openLayer, -1);
    m_state.rects.clear();
    clickCausal();
    EXPECT_EQ(m_state.rects.count("control/model_link"), 0u);
    EXPECT_TRUE(m_state.doc.session().input.mask.causal);
    ImGui::DestroyContext();
}

TEST_F(ModelMode, BadTextKeepsTheLastGoodRun)
{
    app::ModelState& m = m_state.model;
    const auto tokens = m.run->encoding.tokens;
    m.textA = "bad \xff utf-8";
    app::rerunModel(m_state, "edited the text");
    app::finishModelRuns(m_state);
    EXPECT_EQ(m.error, "text: invalid UTF-8 at byte 4");
    EXPECT_EQ(m.run->encoding.tokens, tokens);
}

TEST_F(ModelMode, PanelsDrawHeadless)
{
    ImGuiIO& io = createHeadlessImGui();
    // The 72 thumbnails drawn cell by cell (the CPU fallback) exceed 64k vertices; the window's OpenGL backend
    // sets this flag too, so ImGui splits the draw list.
    io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
    for (int frame = 0; frame < 3; ++frame) {
        ImGui::NewFrame();
        app::drawModelPanel(m_state);
        app::drawModelOpenDialog(m_state);
        ImGui::Render();
    }
    // Hovering the third token's row in the lines view selects it (its lines only are drawn).
    m_state.recordRects = true;
    ImGui::NewFrame();
    app::drawModelPanel(m_state);
    ImGui::Render();
    ASSERT_EQ(m_state.rects.count("model/lines"), 1u);
    const app::UiRect r = m_state.rects["model/lines"];
    const float row = (r.y1 - r.y0) / float(m_state.model.run->encoding.tokens.size());
    io.MousePos = ImVec2(r.x0 + 10, r.y0 + row * 2.5f);
    ImGui::NewFrame();
    app::drawModelPanel(m_state);
    ImGui::Render();
    EXPECT_EQ(m_state.model.hoverToken, 2);
    m_state.model.showOpenDialog = true;
    ImGui::NewFrame();
    app::drawMainMenu(m_state);
    app::drawModelOpenDialog(m_state);
    ImGui::Render();
    ImGui::DestroyContext();
    SUCCEED();
}

// [SECTION] Opening a model in the background (File → Open model…)

// Frames until the open request in flight has finished: the outcome pollOpenModel returned, or nothing when
// none came within a minute (a generous bound: the load takes well under a second; it only guards a hang).
std::optional<attn::Status> pollUntilOpened(app::AppState& state)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        if (std::optional<attn::Status> st = app::pollOpenModel(state)) return st;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a frame's pause, not a wait for the result
    }
    return std::nullopt;
}

std::size_t errorsLogged()
{
    const auto& log = app::messageLog();
    return static_cast<std::size_t>(std::count_if(log.begin(), log.end(), [](const app::Message& msg) {
        return msg.level == app::MessageLevel::Error;
    }));
}

// Item: the request returns at once and says it is loading while the previous model stays usable; polling
// installs the new model (a new worker, the first run on the fields' text) and closes the dialog.
TEST_F(ModelMode, OpenRequestLoadsInTheBackgroundAndInstallsOnPoll)
{
    app::ModelState& m = m_state.model;
    const std::shared_ptr<const attn::Model> before = m.model;
    m.showOpenDialog = true;
    app::requestOpenModel(m_state, ATTNSCOPE_MODEL_DIR);
    EXPECT_TRUE(m.loading());  // until a poll takes the result, however fast the read
    EXPECT_EQ(m.loadingDir(), ATTNSCOPE_MODEL_DIR);
    EXPECT_EQ(m.model, before);
    // The previous model still runs while the new one is read.
    app::toggleAblation(m_state, 1, 2);
    app::finishModelRuns(m_state);
    EXPECT_EQ(m.model, before);
    ASSERT_EQ(m.run->ablated.size(), 1u);
    const std::optional<attn::Status> st = pollUntilOpened(m_state);
    ASSERT_TRUE(st.has_value()) << "the load did not finish";
    EXPECT_TRUE(st->ok()) << st->message;
    EXPECT_FALSE(m.loading());
    EXPECT_FALSE(m.showOpenDialog);
    EXPECT_TRUE(m.openError.empty());
    ASSERT_NE(m.model, before);
    EXPECT_EQ(m.dir, ATTNSCOPE_MODEL_DIR);
    EXPECT_EQ(m.model->layers.size(), 6u);
    // A run of the new model follows, on the fields' text, with no ablation (a fresh model).
    EXPECT_FALSE(m.run.has_value());
    app::finishModelRuns(m_state);
    ASSERT_TRUE(m.run.has_value());
    EXPECT_TRUE(m.run->ablated.empty());
    EXPECT_EQ(m.lastChange, "opened " + m.model->name);
    auto want = attn::runModel(syncModel(), m.textA, m.textB);
    ASSERT_TRUE(want.ok());
    expectSameRun(*m.run, *want, "after the background open");
    EXPECT_FALSE(app::pollOpenModel(m_state).has_value());  // nothing more in flight
}

// Item: a directory that does not load ends with openModel's message (posted and kept for the dialog, which
// stays open) and the previous model still installed, with its run.
TEST_F(ModelMode, OpenRequestOfABadDirectoryKeepsThePreviousModel)
{
    app::ModelState& m = m_state.model;
    const std::shared_ptr<const attn::Model> before = m.model;
    const auto tokens = m.run->encoding.tokens;
    m.showOpenDialog = true;
    const std::size_t errors = errorsLogged();
    app::requestOpenModel(m_state, "no/such/model");
    const std::optional<attn::Status> st = pollUntilOpened(m_state);
    ASSERT_TRUE(st.has_value()) << "the load did not finish";
    EXPECT_FALSE(st->ok());
    EXPECT_EQ(m.openError.rfind("model directory no/such/model does not exist", 0), 0u) << m.openError;
    EXPECT_EQ(st->message, m.openError);
    ASSERT_EQ(errorsLogged(), errors + 1);
    EXPECT_EQ(app::messageLog().back().text, m.openError);
    EXPECT_TRUE(m.showOpenDialog);
    EXPECT_FALSE(m.loading());
    EXPECT_EQ(m.model, before);
    EXPECT_EQ(m.dir, ATTNSCOPE_MODEL_DIR);
    ASSERT_TRUE(m.run.has_value());
    EXPECT_EQ(m.run->encoding.tokens, tokens);
    // The synchronous path says the same.
    EXPECT_EQ(app::openModel(m_state, "no/such/model").message, m.openError);
    EXPECT_EQ(m.model, before);
    // A new request clears the old message.
    app::requestOpenModel(m_state, ATTNSCOPE_MODEL_DIR);
    EXPECT_TRUE(m.openError.empty());
    ASSERT_TRUE(pollUntilOpened(m_state).has_value());
}

// Item: two requests in a row, the second wins: the first one's result is discarded, whether it fails (no
// error shown) or succeeds (not installed), and the first finishing early changes nothing.
TEST_F(ModelMode, OfTwoOpenRequestsTheSecondWins)
{
    app::ModelState& m = m_state.model;
    const std::shared_ptr<const attn::Model> before = m.model;
    const std::size_t errors = errorsLogged();
    app::requestOpenModel(m_state, "no/such/model");
    app::requestOpenModel(m_state, ATTNSCOPE_MODEL_DIR);
    EXPECT_EQ(m.loadingDir(), ATTNSCOPE_MODEL_DIR);
    std::optional<attn::Status> st = pollUntilOpened(m_state);
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->ok()) << st->message;
    EXPECT_EQ(errorsLogged(), errors);  // the bad directory's failure was never shown
    EXPECT_TRUE(m.openError.empty());
    EXPECT_NE(m.model, before);
    // The other way round: the good directory's model, read first, is not installed.
    const std::shared_ptr<const attn::Model> second = m.model;
    app::requestOpenModel(m_state, ATTNSCOPE_MODEL_DIR);
    app::requestOpenModel(m_state, "no/such/model");
    st = pollUntilOpened(m_state);
    ASSERT_TRUE(st.has_value());
    EXPECT_FALSE(st->ok());
    EXPECT_EQ(m.openError.rfind("model directory no/such/model does not exist", 0), 0u) << m.openError;
    EXPECT_EQ(m.model, second);
    // A cancelled request ends with nothing installed either (its load, maybe still reading, is joined when it
    // has finished or, at the latest, when the state goes away: the end of this test).
    app::requestOpenModel(m_state, ATTNSCOPE_MODEL_DIR);
    app::cancelOpenModel(m_state);
    EXPECT_FALSE(m.loading());
    EXPECT_FALSE(app::pollOpenModel(m_state).has_value());
    EXPECT_EQ(m.model, second);
    // Frames drop the discarded loads once they have finished (a minute bounds a hang, as above).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!m.retiredLoads.empty() && std::chrono::steady_clock::now() < deadline) {
        app::syncModelEdits(m_state);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_TRUE(m.retiredLoads.empty());
    EXPECT_FALSE(m.loading());
    EXPECT_EQ(m.model, second);
}

// Item: a failed request leaves the dialog open with its message in it (the log's toast goes away).
TEST_F(ModelMode, OpenDialogShowsWhyARequestFailed)
{
    createHeadlessImGui();
    m_state.recordRects = true;
    app::ModelState& m = m_state.model;
    m.showOpenDialog = true;
    app::requestOpenModel(m_state, "no/such/model");
    ASSERT_TRUE(pollUntilOpened(m_state).has_value());
    ImGui::NewFrame();
    app::drawModelOpenDialog(m_state);
    ImGui::Render();
    ImGui::DestroyContext();
    EXPECT_TRUE(m.showOpenDialog);
    EXPECT_EQ(m_state.rects.count("model/open"), 1u);
    EXPECT_EQ(m_state.rects.count("model/open_error"), 1u);
    EXPECT_EQ(m_state.rects.count("model/open_loading"), 0u);
}

} // namespace
