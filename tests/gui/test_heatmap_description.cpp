// One description of each heatmap (view/heatmap_description.h), read by the window and the figures: on
// every preset, in both layouts, each figure panel shows exactly its description's numbers, masks, labels
// and axis titles; the window's maps of all heads hold the per-head blocks the figures show.
#include "figure/figure.h"
#include "view/heatmap_description.h"

#include <attnscope/attention.h>
#include <attnscope/layout.h>

#include <gtest/gtest.h>

#include <filesystem>

namespace {

int g_checked = 0;  // panels compared

void checkPreset(const attn::Session& s)
{
    auto r = attn::compute(s.input, s.config);
    ASSERT_TRUE(r.ok()) << r.status().message;
    using app::fig::PanelKind;
    for (PanelKind k : {PanelKind::X, PanelKind::Xkv, PanelKind::Wq, PanelKind::Wv, PanelKind::Wo, PanelKind::Q, PanelKind::K,
                        PanelKind::V, PanelKind::Scores, PanelKind::Weights, PanelKind::Output, PanelKind::Final}) {
        for (int head = 0; head < static_cast<int>(r->heads.size()); ++head) {
            app::fig::FigureOptions o;
            o.panel = k;
            o.head = head;
            auto f = app::fig::buildFigure(s, *r, o);
            if (!f) continue;  // a panel this session has not (xkv in self mode, ...): the same error both ways
            ASSERT_EQ(f->panels.size(), 1u);
            const app::fig::Heatmap& h = f->panels[0];
            const std::string what = s.name + " panel " + app::fig::toString(k) + " head " + std::to_string(head);
            // The window's Q/K/V and concat show every head: the figure's head is that map's block.
            if (k == PanelKind::Q || k == PanelKind::K || k == PanelKind::V) {
                ++g_checked;
                auto all = app::view::describeMap(s, *r, k == PanelKind::Q ? app::view::MapKind::Q : k == PanelKind::K ? app::view::MapKind::K
                                                                                                                           : app::view::MapKind::V, 0);
                ASSERT_TRUE(all.ok()) << what;
                const bool col = s.config.layout == attn::Layout::Column;
                const attn::Matrix& m = *all->source;
                const attn::Matrix block = col ? attn::Matrix(m.middleRows(head * h.values.rows(), h.values.rows()))
                                               : attn::Matrix(m.middleCols(head * h.values.cols(), h.values.cols()));
                EXPECT_EQ(block, h.values) << what << ": the figure's head block of the window's map";
                EXPECT_EQ(all->row.title == "query" || all->row.title == "key", h.rowAxis == "query" || h.rowAxis == "key") << what;
            }
            if (k == PanelKind::Scores || k == PanelKind::Weights) {
                ++g_checked;
                auto d = app::view::describeMap(s, *r, k == PanelKind::Scores ? app::view::MapKind::Scores : app::view::MapKind::Weights, head);
                ASSERT_TRUE(d.ok()) << what;
                EXPECT_EQ(d->values(), h.values) << what;
                EXPECT_EQ(d->row.title, h.rowAxis) << what;
                EXPECT_EQ(d->col.title, h.colAxis) << what;
                ASSERT_NE(d->masked, nullptr) << what;
                EXPECT_EQ(*d->masked, h.masked) << what;
                EXPECT_EQ(d->row.tokens != nullptr, h.rowLabelsAreTokens) << what;
                // Queries and keys where the layout puts them: Row: queries on rows; Column: keys on rows.
                const bool col = s.config.layout == attn::Layout::Column;
                EXPECT_EQ(d->row.kind, col ? app::view::AxisKind::Key : app::view::AxisKind::Query) << what;
            }
        }
    }
}

} // namespace

TEST(HeatmapDescription, FiguresShowTheDescriptionOnEveryPresetInBothLayouts)
{
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(ATTNSCOPE_PRESETS_DIR)) {
        if (e.path().extension() != ".json") continue;
        auto s = attn::loadSession(e.path().string());
        ASSERT_TRUE(s.ok()) << s.status().message;
        checkPreset(*s);
        // The same session in the other layout (restated by core's one orientation seam).
        attn::Session other = *s;
        other.config.layout = s->config.layout == attn::Layout::Row ? attn::Layout::Column : attn::Layout::Row;
        attn::restateInput(other.input, s->config.layout, other.config.layout);
        checkPreset(other);
        ++n;
    }
    EXPECT_GE(n, 5);
    EXPECT_GE(g_checked, 10 * n) << "panels compared";
}

TEST(HeatmapDescription, ErrorsNameTheMap)
{
    auto s = attn::loadSession(std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json");
    ASSERT_TRUE(s.ok());
    auto r = attn::compute(s->input, s->config);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(app::view::describeMap(*s, *r, app::view::MapKind::Xkv, 0).status().message, "panel xkv: the session is not in cross mode");
    EXPECT_EQ(app::view::describeMap(*s, *r, app::view::MapKind::Wo, 0).status().message, "panel wo: the session has no W_O");
    EXPECT_EQ(app::view::describeMap(*s, *r, app::view::MapKind::Weights, 1).status().message, "head 1: the result has 1 head");
    EXPECT_EQ(app::view::plainText("h·d_{k}"), "h·d_k");
}
