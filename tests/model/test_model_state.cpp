// The window's model mode without a window: ModelState (text, ablation, chain-view edits flowing back) and a
// few headless frames of the model panels (null backend: the CPU heatmap fallback draws the thumbnails).
#include "../gui/headless_imgui.h"

#include "panels/model_panels.h"
#include "panels/panels.h"
#include "state/app_state.h"
#include "state/model_state.h"

#include <gtest/gtest.h>

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
    app::AppState m_state;
};

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
    EXPECT_EQ(m.run->ablated.size(), 1u);
    EXPECT_EQ(m.run->hidden[2], h2);                   // layer 2's input is untouched
    EXPECT_EQ(m.layerGeneration[1], gen1);             // so is layer 1's thumbnail
    EXPECT_EQ(m.run->attention[2].heads[5].weights.cwiseAbs().maxCoeff(), 0.0f);
    EXPECT_NE(m.cosine, cos0);
    EXPECT_EQ(m.cosineBefore, cos0);
    EXPECT_EQ(m.lastChange, "ablated layer 2 head 5");
    // The cosine came from A and B recomputed from layer 2 on: the same as two whole runs with the ablation.
    {
        auto a = attn::runModel(*m.model, m.textA, std::nullopt, {attn::Backend::Cpu, {{2, 5}}});
        auto b = attn::runModel(*m.model, m.textB, std::nullopt, {attn::Backend::Cpu, {{2, 5}}});
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_EQ(m.cosine, attn::cosineSimilarity(a->embedding, b->embedding));
        for (std::size_t l = 0; l < m.model->layers.size(); ++l)  // the chain view's X is the pair run's again
            m.model->layers[l].attention.X = m.run->hidden[l];
    }
    app::toggleAblation(m_state, 2, 5);
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
    EXPECT_EQ(m.model->layers[4].attention.Wq, m_state.doc.session().input.Wq);
    EXPECT_EQ(m.run->hidden[4], h4);
    EXPECT_EQ(m.run->attention[3].heads[0].weights, layer3);  // below the edit: not recomputed
    EXPECT_GT((m.run->hidden[6] - out).cwiseAbs().maxCoeff(), 1e-5f);
    EXPECT_EQ(m.lastChange, "edited layer 4's weights");
    // Undo in the chain view flows back as well.
    ASSERT_TRUE(m_state.doc.undo());
    app::syncModelEdits(m_state);
    EXPECT_LE((m.run->hidden[6] - out).cwiseAbs().maxCoeff(), 1e-6f);
}

TEST_F(ModelMode, BadTextKeepsTheLastGoodRun)
{
    app::ModelState& m = m_state.model;
    const auto tokens = m.run->encoding.tokens;
    m.textA = "bad \xff utf-8";
    app::rerunModel(m_state, "edited the text");
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

} // namespace
