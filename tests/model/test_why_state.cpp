// The window's "why" views of a decoder (issue 20), without a window: ModelState over the tiny llama GGUF. What the
// worker shows (head importance, attribution, logit lens, head types, patching) equals the core's functions run
// synchronously on a model of the test's own; switching views keeps the predictions' "before"; an ablation
// restarts the scan on the new run; typed targets and patching settings are checked; the tabs draw headless
// and a click on a map's head opens it.
#include "decoder_window_test.h"

#include "panels/model_panels.h"
#include "panels/panels.h"
#include "state/app_state.h"
#include "state/model_state.h"

#include <attnscope/decoder.h>
#include <attnscope/interp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace {

using testutil::syncRun;
const std::string& kTiny = testutil::kTinyLlama;

// The worker's maps come from the same functions on the same numbers (the run may have been made by appending
// where the oracle runs whole: products then sum in another blocking), so 1e-4 of the largest value.
void expectNear(const attn::Matrix& got, const attn::Matrix& want, const std::string& what)
{
    ASSERT_EQ(got.rows(), want.rows()) << what;
    ASSERT_EQ(got.cols(), want.cols()) << what;
    const float tol = 1e-4f * std::max(1.0f, want.cwiseAbs().maxCoeff());
    for (Eigen::Index i = 0; i < want.rows(); ++i)
        for (Eigen::Index j = 0; j < want.cols(); ++j)
            EXPECT_NEAR(got(i, j), want(i, j), tol) << what << " at layer " << i << ", head " << j;
}

class WhyMode : public ::testing::Test {
protected:
    void SetUp() override
    {
        auto m = attn::loadDecoder(kTiny);
        ASSERT_TRUE(m.ok()) << m.status().message;
        oracle = std::move(*m);
        app::ModelStartup st;
        st.text = kText;
        st.dir = kTiny;
        app::startModelMode(state, st);
        ASSERT_TRUE(state.model.drun.has_value()) << state.model.error;
    }
    const std::string kText = "the cat sat on the mat and the cat";
    app::AppState state;
    attn::DecoderModel oracle;
};

TEST_F(WhyMode, HeadImportanceIsTheCoresScanOfTheShownRun)
{
    app::setWhyView(state, app::WhyView::Importance);
    app::finishScans(state);
    const app::WhyState& w = state.model.why;
    ASSERT_TRUE(w.results.valid) << w.results.error;
    ASSERT_TRUE(w.scan.importance.done) << w.scan.error;
    EXPECT_EQ(w.scan.request, state.model.shown.id);
    const attn::DecoderRun run = syncRun(oracle, kText);
    auto target = attn::interpTarget(oracle, run, -1);
    ASSERT_TRUE(target.ok());
    EXPECT_EQ(w.results.target.id, target->id);
    EXPECT_EQ(w.scan.importanceTarget, target->id);
    attn::Matrix want;
    ASSERT_TRUE(attn::headImportance(oracle, run, target->id, want).ok());
    expectNear(w.scan.importance.values, want, "importance");
    // No row is left pending once done.
    EXPECT_EQ(w.scan.importance.pending.cast<int>().sum(), 0);

    // An ablation: a new run, and the scan is redone on it (the ablated head itself scores 0).
    app::toggleAblation(state, 1, 2);
    app::finishScans(state);
    ASSERT_TRUE(state.model.why.scan.importance.done) << state.model.why.scan.error;
    const attn::DecoderRun ablated = syncRun(oracle, kText, {{1, 2}});
    auto t2 = attn::interpTarget(oracle, ablated, -1);
    ASSERT_TRUE(attn::headImportance(oracle, ablated, t2->id, want).ok());
    expectNear(state.model.why.scan.importance.values, want, "importance after the ablation");
    EXPECT_EQ(state.model.why.scan.importance.values(1, 2), 0.0f);
}

TEST_F(WhyMode, SwitchingViewsKeepsThePredictionsChangeAndAFinishedScan)
{
    app::ModelState& m = state.model;
    app::toggleAblation(state, 0, 1);
    app::finishModelRuns(state);
    ASSERT_TRUE(m.hasBefore);
    const std::string change = m.lastChange;
    const attn::Vector before = m.beforeLogits;
    app::setWhyView(state, app::WhyView::Importance);
    app::finishScans(state);
    EXPECT_TRUE(m.hasBefore) << "showing a view is not a change of the model";
    EXPECT_EQ(m.lastChange, change);
    EXPECT_TRUE(m.beforeLogits.isApprox(before));
    ASSERT_TRUE(m.why.scan.importance.done);
    const long scans = m.why.scan.importance.scans;
    const attn::Matrix importance = m.why.scan.importance.values;
    // Away and back: the finished map of the same run and target is kept, not scanned again.
    app::setWhyView(state, app::WhyView::LogitLens);
    app::finishScans(state);
    app::setWhyView(state, app::WhyView::Importance);
    app::finishScans(state);
    EXPECT_EQ(m.why.scan.importance.scans, scans);
    EXPECT_TRUE(m.why.scan.importance.done);
    EXPECT_TRUE(m.why.scan.importance.values.isApprox(importance));
    EXPECT_EQ(m.why.scan.request, m.shown.id);
}

TEST_F(WhyMode, AttributionLensAndTypesAreTheCoresOfTheShownRun)
{
    app::setWhyView(state, app::WhyView::Dla);
    app::finishScans(state);
    const app::InterpResults& r = state.model.why.results;
    ASSERT_TRUE(r.valid) << r.error;
    const attn::DecoderRun run = syncRun(oracle, kText);
    auto dla = attn::directLogitAttribution(oracle, run, r.target.id);
    ASSERT_TRUE(dla.ok());
    expectNear(r.dla.heads, dla->heads, "dla heads");
    EXPECT_NEAR(r.dla.logit, dla->logit, 1e-4f * std::max(1.0f, std::fabs(dla->logit)));
    const attn::HeadTypes types = attn::headTypes(run);
    expectNear(r.types.induction, types.induction, "induction");
    expectNear(r.types.previous, types.previous, "previous");
    EXPECT_TRUE(r.types.hasRepeats);  // "the cat" comes twice
    // The lens is computed while its view is shown.
    app::setWhyView(state, app::WhyView::LogitLens);
    app::finishScans(state);
    ASSERT_EQ(r.lens.top.size(), std::size_t(oracle.config.layers));
    // The lens's last layer at the last position is the model's own top prediction.
    const auto top = attn::topTokens(oracle, run.lastLogits, 1, 1.0f);
    ASSERT_FALSE(r.lens.top.back().empty());
    EXPECT_EQ(r.lens.top.back().back().front().id, top[0].id);
}

TEST_F(WhyMode, TypedTargetsAndPatchingSettingsAreChecked)
{
    app::ModelState& m = state.model;
    app::setWhyView(state, app::WhyView::Importance);
    app::finishScans(state);
    // A prediction clicked as the target: the scan is about it.
    const auto top = attn::topTokens(oracle, m.drun->lastLogits, 2, 1.0f);
    app::setWhyTargetId(state, top[1].id);
    app::finishScans(state);
    EXPECT_EQ(m.why.results.target.id, top[1].id);
    EXPECT_EQ(m.why.scan.importanceTarget, top[1].id);
    // Not one token: the field says why and nothing is sent.
    const long runs = m.runsStarted();
    app::setWhyTarget(state, "the cat sat");
    EXPECT_NE(m.why.targetError.find("tokens"), std::string::npos) << m.why.targetError;
    EXPECT_EQ(m.runsStarted(), runs);

    // Patching: a clean prompt of another length is refused with both lengths named.
    app::setWhyView(state, app::WhyView::Patching);
    app::setPatching(state, "the dog", top[0].token, top[1].token);
    EXPECT_NE(m.why.patchError.find("equal lengths"), std::string::npos) << m.why.patchError;
    app::setPatching(state, kText, top[0].token, top[0].token);
    EXPECT_NE(m.why.patchError.find("same token"), std::string::npos) << m.why.patchError;
}

TEST_F(WhyMode, PatchingIsTheCoresScanOfTheTwoRuns)
{
    app::ModelState& m = state.model;
    const attn::DecoderRun corrupted = syncRun(oracle, kText);
    // A clean prompt of the same token length (the tiny fixture's BPE splits words its own way): the text with
    // its last word replaced by the first of these that keeps the length.
    std::string clean;
    for (const char* word : {"mat", "sat", "on", "and", "the", "dog", "hat"}) {
        const std::string c = kText.substr(0, kText.rfind(' ') + 1) + word;
        auto enc = attn::encodeForDecoder(oracle, c, false);
        if (c != kText && enc.ok() && enc->ids.size() == corrupted.encoding.ids.size()) {
            clean = c;
            break;
        }
    }
    ASSERT_FALSE(clean.empty()) << "no clean prompt of the text's length";
    const attn::DecoderRun cleanRun = syncRun(oracle, clean);
    const auto topClean = attn::topTokens(oracle, cleanRun.lastLogits, 1, 1.0f);
    const auto topCorrupt = attn::topTokens(oracle, corrupted.lastLogits, 2, 1.0f);
    const int a = topClean[0].id;
    const int b = topCorrupt[0].id != a ? topCorrupt[0].id : topCorrupt[1].id;
    app::setWhyView(state, app::WhyView::Patching);
    app::setPatching(state, clean, oracle.tokenizer.tokenText(a), oracle.tokenizer.tokenText(b));
    ASSERT_TRUE(m.why.patchError.empty()) << m.why.patchError;
    app::finishScans(state);
    ASSERT_TRUE(m.why.scan.patching.done) << m.why.scan.error;
    attn::Matrix want;
    attn::PatchingMetric metric;
    ASSERT_TRUE(attn::activationPatching(oracle, cleanRun, corrupted, a, b, want, &metric).ok());
    expectNear(m.why.scan.patching.values, want, "patching");
    EXPECT_NEAR(m.why.scan.metric.clean, metric.clean, 1e-4f * std::max(1.0f, std::fabs(metric.clean)));
    EXPECT_NEAR(m.why.scan.metric.corrupted, metric.corrupted, 1e-4f * std::max(1.0f, std::fabs(metric.corrupted)));
}

TEST_F(WhyMode, TabsDrawHeadlessAndAClickOnTheMapOpensTheHead)
{
    testutil::HeadlessModelWindow win(state);
    auto frame = [&] { win.frame(); };
    auto click = [&](const std::string& key, float fx = 0.5f, float fy = 0.5f) { win.click(key, fx, fy); };
    for (int i = 0; i < 3; ++i) frame();
    // Every tab draws (the scans and the cheap views finish in between).
    for (const char* tab : {"Logit attribution", "Logit lens", "Head types", "Patching", "Head importance"}) {
        click(std::string("why/tab/") + tab);
        app::finishScans(state);
        frame();
        frame();
    }
    EXPECT_EQ(state.model.why.view, app::WhyView::Importance);
    ASSERT_EQ(state.rects.count("why/map/importance"), 1u);
    // The map is layers × heads (or heads × layers when that gives larger cells): a click on the last layer's
    // head 0 opens it.
    const int L = state.model.layers(), H = state.model.heads();
    if (state.rects.count("why/map/importance/across"))
        click("why/map/importance", (float(L) - 0.5f) / float(L), 0.5f / float(H));
    else
        click("why/map/importance", 0.5f / float(H), (float(L) - 0.5f) / float(L));
    EXPECT_EQ(state.model.openLayer, L - 1);
    EXPECT_EQ(state.view.head, 0);
}

} // namespace

namespace {

// "Why here?" (issue 35): a right-click on a thumbnail's cell offers it; the panel's numbers are core's
// decomposition of the shown run; remove from keys is core's patchPattern; an ablation recomputes it (the ablated
// head's part is then 0); a masked cell gets core's message; Close stops it.
TEST_F(WhyMode, WhyHereIsTheCoresDecompositionOfTheShownRunAndFollowsIt)
{
    testutil::HeadlessModelWindow win(state);
    ImGuiIO& io = ImGui::GetIO();
    for (int i = 0; i < 3; ++i) win.frame();
    const int n = static_cast<int>(state.model.drun->encoding.ids.size());
    ASSERT_EQ(state.rects.count("model/1/2"), 1u);
    ASSERT_FALSE(state.model.gridPlan.pooled);
    // Right-click query n−1, key 2 of layer 1, head 2's thumbnail, then "Why here?".
    const app::UiRect t = state.rects["model/1/2"];
    io.MousePos = ImVec2(t.x0 + (t.x1 - t.x0) * (2.5f / float(n)), t.y0 + (t.y1 - t.y0) * ((float(n) - 0.5f) / float(n)));
    win.frame();
    io.MouseDown[1] = true;
    win.frame();
    io.MouseDown[1] = false;
    win.frame();
    win.frame();
    const long runs = state.model.runsStarted();
    win.click("qk/menu/why");
    ASSERT_TRUE(state.model.qk.open);
    EXPECT_EQ(state.model.qk.cell, (app::QkRequest{1, 2, n - 1, 2, {}, attn::QkSide::Key}));
    app::finishScans(state);
    const app::QkResults& r = state.model.qk.results;
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.cell.has_value());
    EXPECT_EQ(r.of, state.model.qk.cell);
    EXPECT_FALSE(app::qkComputing(state.model));
    // On the run shown: no forward (the worker decomposes a copy of the shown run, not its own older buffer).
    EXPECT_EQ(state.model.runsStarted(), runs);
    attn::DecoderRun run = syncRun(oracle, kText);
    auto want = attn::qkAttribution(oracle, run, 1, 2, n - 1, 2);
    ASSERT_TRUE(want.ok()) << want.status().message;
    EXPECT_EQ(r.cell->components, want->components);
    EXPECT_NEAR(r.cell->score, want->score, 1e-4f * std::abs(want->score) + 1e-5f);
    for (Eigen::Index c = 0; c < want->keyComponents.size(); ++c) {
        EXPECT_NEAR(r.cell->keyComponents[c], want->keyComponents[c], 1e-4f) << want->components[std::size_t(c)];
        EXPECT_NEAR(r.cell->queryComponents[c], want->queryComponents[c], 1e-4f) << want->components[std::size_t(c)];
    }
    ASSERT_FALSE(r.pairs.empty());
    EXPECT_EQ(r.pairs[0].value, r.cell->matrix(r.pairs[0].query, r.pairs[0].key));
    for (int i = 0; i < 2; ++i) win.frame();  // the panel draws its bars

    // Remove the strongest key-side component from the keys (its bar's button): core's patched pattern.
    const std::string top = r.cell->components[std::size_t(attn::strongestQkComponents(r.cell->keyComponents, 1)[0])];
    win.click("qk/remove/key/" + top);
    EXPECT_EQ(state.model.qk.cell.patchComponent, top);
    app::finishScans(state);
    ASSERT_TRUE(r.patch.has_value()) << r.patchError;
    auto patch = attn::patchPattern(oracle, run, 1, 2, top, attn::QkSide::Key);
    ASSERT_TRUE(patch.ok());
    EXPECT_LE((r.patch->patched - patch->patched).cwiseAbs().maxCoeff(), 1e-4f);
    for (int i = 0; i < 2; ++i) win.frame();  // original and patched side by side
    EXPECT_EQ(state.rects.count("qk/patch/patched"), 1u);

    // The row mode: the query's whole row is core's; the cell's key is compared with the runner-up, then with a
    // key clicked in the row's list.
    win.click("qk/row/toggle");
    EXPECT_TRUE(state.model.qk.cell.row);
    app::finishScans(state);
    ASSERT_TRUE(r.row.has_value()) << r.rowError;
    auto wantRow = attn::qkAttributionRow(oracle, run, 1, 2, n - 1);
    ASSERT_TRUE(wantRow.ok());
    ASSERT_EQ(r.row->scores.size(), wantRow->scores.size());
    EXPECT_LE((r.row->keyComponents - wantRow->keyComponents).cwiseAbs().maxCoeff(), 1e-4f);
    for (int i = 0; i < 2; ++i) win.frame();
    EXPECT_EQ(state.rects.count("qk/row/contrast"), 1u);
    EXPECT_EQ(state.model.qk.rowOther, -1);  // the runner-up
    // Another key than the cell's and the runner-up: the heaviest of the rest (the list shows the 12 heaviest).
    const int runnerUp = attn::runnerUpKey(*r.row, 2);
    ASSERT_GE(runnerUp, 0);
    int pick = -1;
    for (int j = r.row->firstKey; j <= n - 1; ++j)
        if (j != 2 && j != runnerUp && (pick < 0 || r.row->weights[j - r.row->firstKey] > r.row->weights[pick - r.row->firstKey])) pick = j;
    ASSERT_GE(pick, 0);
    ASSERT_EQ(state.rects.count("qk/row/key/" + std::to_string(pick)), 1u);
    win.click("qk/row/key/" + std::to_string(pick));
    EXPECT_EQ(state.model.qk.rowOther, pick);

    // An ablation of L0.H1: the panel's cell is recomputed on the new run, where that head wrote nothing.
    app::toggleAblation(state, 0, 1);
    app::finishScans(state);
    ASSERT_TRUE(r.cell.has_value()) << r.error;
    EXPECT_EQ(r.request, state.model.shown.id);
    const auto at = std::find(r.cell->components.begin(), r.cell->components.end(), "L0.H1") - r.cell->components.begin();
    EXPECT_EQ(r.cell->keyComponents[at], 0.0f);
    run = syncRun(oracle, kText, {{0, 1}});
    want = attn::qkAttribution(oracle, run, 1, 2, n - 1, 2);
    ASSERT_TRUE(want.ok());
    EXPECT_NEAR(r.cell->score, want->score, 1e-4f * std::abs(want->score) + 1e-5f);
    EXPECT_TRUE(r.patch.has_value());  // the patch follows the run too

    // A masked cell: core's message, no crash, the window draws on.
    app::openQkCell(state, 1, 2, 2, n - 1);
    app::finishScans(state);
    EXPECT_NE(r.error.find("is after query 2"), std::string::npos) << r.error;
    EXPECT_FALSE(r.cell.has_value());
    for (int i = 0; i < 2; ++i) win.frame();
    EXPECT_EQ(state.rects.count("qk/error"), 1u);

    // Close: the panel goes, and the worker's results with it.
    win.click("qk/close");
    EXPECT_FALSE(state.model.qk.open);
    app::finishScans(state);
    EXPECT_EQ(r.of.layer, -1);
    state.rects.clear();  // (drawAllPanels clears them each frame; this window draws only the model's panels)
    win.frame();
    EXPECT_EQ(state.rects.count("qk/window"), 0u);
}

TEST_F(WhyMode, AMapIsSavedAsAFigureAndAnArrayAskingBeforeOverwriting)
{
    testutil::HeadlessModelWindow win(state);
    auto frame = [&] { win.frame(); };
    auto click = [&](const std::string& key) { win.click(key); };
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("attnscope_why_save_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    app::setWhyView(state, app::WhyView::Importance);
    app::finishScans(state);
    for (int i = 0; i < 3; ++i) frame();
    state.model.why.exportPath = (dir / "imp.svg").string();
    click("why/save/0");
    click("why/save/1");
    ASSERT_TRUE(std::filesystem::exists(dir / "imp.svg")) << state.model.why.exportStatus;
    ASSERT_TRUE(std::filesystem::exists(dir / "imp.npy")) << state.model.why.exportStatus;
    // The .npy holds the map: L × H float32 (header then L·H·4 bytes).
    EXPECT_GE(std::filesystem::file_size(dir / "imp.npy"), std::uintmax_t(state.model.layers() * state.model.heads() * 4));
    const auto svgSize = std::filesystem::file_size(dir / "imp.svg");
    EXPECT_GT(svgSize, 1000u);
    // Again: asked first; the file is rewritten only after Overwrite.
    std::filesystem::resize_file(dir / "imp.svg", 0);
    click("why/save/0");
    EXPECT_EQ(state.model.why.overwriteKind, 0);
    EXPECT_EQ(std::filesystem::file_size(dir / "imp.svg"), 0u);
    click("why/overwrite");
    EXPECT_EQ(std::filesystem::file_size(dir / "imp.svg"), svgSize);
    std::filesystem::remove_all(dir);
}

TEST_F(WhyMode, AProbeTheVocabularyCannotMakeLeavesTheText)
{
    // The tiny fixture's 300-token vocabulary has too few word tokens for 20: the text stays, nothing is run.
    app::ModelState& m = state.model;
    const long runs = m.runsStarted();
    app::fillInductionProbe(state, 3);
    app::finishModelRuns(state);
    EXPECT_EQ(m.textA, kText);
    EXPECT_EQ(m.runsStarted(), runs);
    EXPECT_FALSE(attn::inductionProbe(oracle, 20, 3).ok());
}

// SmolLM2 on the probe: induction heads appear (a head in the middle layers puts most of its weight on the token
// after the current token's earlier copy), as they do in every trained language model studied so far.
TEST(SmolLM2Why, TheInductionProbeShowsInductionHeads)
{
    if (!std::filesystem::exists(ATTNSCOPE_SMOLLM2)) GTEST_SKIP() << "SmolLM2 is not installed (scripts/setup.sh installs it)";
    app::AppState state;
    app::ModelStartup st;
    st.text = "hello";
    st.dir = ATTNSCOPE_SMOLLM2;
    app::startModelMode(state, st);
    ASSERT_TRUE(state.model.drun.has_value()) << state.model.error;
    app::setWhyView(state, app::WhyView::HeadTypes);
    app::fillInductionProbe(state, 1);
    app::finishScans(state);
    const app::InterpResults& r = state.model.why.results;
    ASSERT_TRUE(r.valid) << r.error;
    // The text is the probe: [BOS] r r, 20 word tokens twice.
    auto probe = attn::inductionProbe(*state.model.decoder, 20, 1);
    ASSERT_TRUE(probe.ok()) << probe.status().message;
    EXPECT_EQ(state.model.textA, probe->text);
    EXPECT_EQ(state.model.drun->encoding.ids, probe->ids);
    EXPECT_TRUE(r.types.hasRepeats);
    Eigen::Index l = 0, h = 0;
    const float best = r.types.induction.maxCoeff(&l, &h);
    std::printf("strongest induction head: layer %d head %d, score %.3f; mean %.3f\n", int(l), int(h), best,
                r.types.induction.mean());
    EXPECT_GT(best, 0.5f);
}

} // namespace
