// The fit layout's plan (view/chain_view.h): the weights get their share of the window, collapsing what
// they need and no more, within the readable cell sizes; the user's choices are kept.
#include "view/chain_view.h"

#include <gtest/gtest.h>

#include <tuple>

namespace {

// Seed 004 translation (8 queries × 9 keys, d_k 8, d_v 4, one head) in a window of w × h, with the
// panels' real dimensions (262 px sidebar, menu and status bars, three toolbar lines).
app::FitInput seed004(float w, float h)
{
    app::FitInput in;
    in.width = w;
    in.height = h;
    in.chainWidth = w - 262 - 16;
    in.chainHeight = h - 20 - 24 - 16 - 3 * 27;
    in.sidebarWidth = 262 - app::kStripWidth;
    in.inputsWidth = 280;
    in.stripWidth = app::kInputsStripWidth;
    in.wRows = 8, in.wCols = 9, in.wVisible = 72;
    in.oRows = 8, in.oCols = 4;
    in.qkvRows = 8 + 9 + 9, in.qkvCols = 8;
    in.labelBand = 60;
    in.fontSize = 16;
    return in;
}

float share(const app::FitInput& in, const app::FitPlan& p)
{
    return static_cast<float>(in.wVisible) * p.cell * p.cell / (in.width * in.height);
}

} // namespace

TEST(FitLayout, WeightsGetTheirShareAtEverySize)
{
    for (auto [w, h] : {std::pair{900.0f, 600.0f}, {1280.0f, 800.0f}, {1600.0f, 1000.0f}}) {
        const app::FitInput in = seed004(w, h);
        const app::FitPlan p = app::planFitLayout(in, app::Collapse::Auto, app::Collapse::Auto);
        EXPECT_TRUE(p.fits) << w << "x" << h;
        EXPECT_GE(share(in, p), app::kTargetShare) << w << "x" << h << ": cell " << p.cell;
        EXPECT_LE(p.cell, app::kMaxCell);
        EXPECT_GE(p.smallCell, 6.0f);
    }
}

TEST(FitLayout, LargerWindowsNeverShrinkTheCells)
{
    float last = 0;
    for (float w = 900; w <= 2400; w += 100) {
        const app::FitInput in = seed004(w, w * 0.625f);
        const app::FitPlan p = app::planFitLayout(in, app::Collapse::Shown, app::Collapse::Shown);
        EXPECT_GE(p.cell, last) << "window " << w;
        last = p.cell;
    }
    EXPECT_EQ(last, app::kMaxCell) << "a 2400 px window gives the readable maximum";
}

TEST(FitLayout, CollapsesOnlyWhatTheMapNeeds)
{
    // A large window: nothing collapses.
    app::FitPlan p = app::planFitLayout(seed004(2400, 1500), app::Collapse::Auto, app::Collapse::Auto);
    EXPECT_FALSE(p.inputsCollapsed);
    EXPECT_FALSE(p.sidebarCollapsed);
    // A small one: the inputs go first, then the sidebar.
    p = app::planFitLayout(seed004(900, 600), app::Collapse::Auto, app::Collapse::Auto);
    EXPECT_TRUE(p.inputsCollapsed);
    // A tiny map (4×4) whose share needs cells past the maximum settles for comfortable cells.
    app::FitInput tiny = seed004(1280, 800);
    tiny.wRows = tiny.wCols = 4, tiny.wVisible = 16, tiny.oRows = 4, tiny.oCols = 3, tiny.qkvRows = 12, tiny.qkvCols = 3;
    p = app::planFitLayout(tiny, app::Collapse::Auto, app::Collapse::Auto);
    EXPECT_FALSE(p.inputsCollapsed);
    EXPECT_FALSE(p.sidebarCollapsed);
    EXPECT_GE(p.cell, app::kComfortCell);
}

TEST(FitLayout, TheUsersChoiceWins)
{
    const app::FitInput in = seed004(900, 600);
    app::FitPlan p = app::planFitLayout(in, app::Collapse::Shown, app::Collapse::Shown);
    EXPECT_FALSE(p.inputsCollapsed);
    EXPECT_FALSE(p.sidebarCollapsed);
    const app::FitPlan open = p;
    p = app::planFitLayout(in, app::Collapse::Hidden, app::Collapse::Hidden);
    EXPECT_TRUE(p.inputsCollapsed);
    EXPECT_TRUE(p.sidebarCollapsed);
    EXPECT_GT(p.cell, open.cell) << "collapsing gives the map room";
}

// A model's head in the chain view (SmolLM2, 14 tokens: Q, K, V are 9·64 = 576 columns wide, the head output 64,
// nine heads in the grid below): nothing fits whole at any cell, yet the weights are what the view is for. They
// come first: at 1280 × 800 whole in their box at cells well above the minimum, at 900 × 600 in a box of 180 px or
// more (the fixed parts of the row leave no more); the output scrolls in a box of its own. (The plan before gave
// the weights a 96 px box of 12 px cells at both sizes, the output's 64 columns counted whole.)
TEST(FitLayout, AModelHeadsWeightsComeBeforeItsWideProjections)
{
    // At 900 × 600 the cells are too small for labels, so the box holds cells only (issue 36): 170 px of cells, where
    // the 180 px box before held a label band too.
    for (auto [w, h, minCell, minBox] : {std::tuple{1280.0f, 800.0f, 20.0f, 0.0f}, {900.0f, 600.0f, 12.0f, 170.0f}}) {
        app::FitInput in = seed004(w, h);
        in.wRows = in.wCols = 14, in.wVisible = 14 * 15 / 2;
        in.oRows = 14, in.oCols = 64;
        in.qkvRows = 14 * 3, in.qkvCols = 576;
        in.heads = 9;
        const app::FitPlan p = app::planFitLayout(in, app::Collapse::Auto, app::Collapse::Auto);
        EXPECT_FALSE(p.fits) << w << "x" << h;
        EXPECT_GE(p.cell, minCell) << w << "x" << h;
        EXPECT_GE(p.bigView, minBox > 0 ? minBox : in.labelBand + 14 * p.cell) << w << "x" << h << ": the weights' box";
        EXPECT_GE(p.outputView, 48.0f) << w << "x" << h;
        EXPECT_LT(p.outputView, 64 * p.cell) << w << "x" << h << ": the output scrolls";
    }
}

// Issue 36, thin maps: at 1024 tokens Q, K and V (1024 × 8) are strips fitted along each side on their own
// (chain_panel): stacked, each with its title, caption line and scrollbar, their boxes share the panel's height
// (a third each, taller than the small maps' square boxes) and stay inside it.
TEST(FitLayout, ThinQKVBoxesShareThePanelsHeight)
{
    for (auto [w, h] : {std::pair{1280.0f, 800.0f}, {900.0f, 600.0f}}) {
        app::FitInput in = seed004(w, h);
        in.wRows = in.wCols = 1024, in.wVisible = 1024 * 1024;
        in.oRows = 1024, in.oCols = 8;
        in.qkvRows = 3 * 1024, in.qkvCols = 8;
        const app::FitPlan p = app::planFitLayout(in, app::Collapse::Auto, app::Collapse::Auto);
        ASSERT_FALSE(p.fits) << w << "x" << h;
        EXPECT_GT(p.qkvViewHeight, p.smallView) << w << "x" << h << ": taller than wide";
        const float title = 22, caption = 22, scrollbar = 14;  // chain_layout.cpp's kTitle, kScrollbar
        EXPECT_LE(3 * (title + p.qkvViewHeight + scrollbar + caption), in.chainHeight) << w << "x" << h;
    }
    // When everything fits, no box at all.
    EXPECT_GE(app::planFitLayout(seed004(1280, 800), app::Collapse::Auto, app::Collapse::Auto).qkvViewHeight, 1e5f);
}
