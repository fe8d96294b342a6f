// Lesson 4 (seeds 002/003): heads. Column blocks of W^Q/W^K/W^V and Q/K/V per head, what grouped-query
// attention shares (KV heads), seed 003's block-identity selector, each head's contribution to the output
// through its block of W^O, and one head vs h heads on the same input.
#include "lessons/lesson_panels.h"

#include <attnscope/layout.h>

#include <algorithm>
#include <string>

namespace app {

namespace {

GridOptions blocks(const LessonInputs& in, const std::vector<attn::HeadBlock>& hb, char which)
{
    GridOptions o = gridOptions(in, LessonMap::Projection);
    o.cell = 26.0f;
    for (const attn::HeadBlock& b : hb) {
        // Grouped-query attention: the heads of a group share one K/V block, shown once (one per KV head).
        const bool firstOfGroup = &b == &hb.front() || (&b - 1)->kvHead != b.kvHead;
        if (which == 'q') o.colBlocks.push_back({b.qBegin, b.qEnd});
        if (which == 'k' && firstOfGroup) o.colBlocks.push_back({b.kBegin, b.kEnd});
        if (which == 'v' && firstOfGroup) o.colBlocks.push_back({b.vBegin, b.vEnd});
    }
    return o;
}

// A grid in its own group, beside the previous one (`spacing` pixels apart) when it still fits the panel's
// width, else on a new line.
GridHit gridBeside(bool first, float spacing, const char* id, const std::string& title, const attn::Matrix& m,
                   const GridOptions& o)
{
    if (!first) sameLineIfFits(gridWidth(title.c_str(), m, o), spacing);
    ImGui::BeginGroup();
    const GridHit hit = drawMatrixGrid(id, title.c_str(), m, o);
    ImGui::EndGroup();
    return hit;
}

} // namespace

// Row layout: the head blocks are column ranges. Column layout stores everything transposed, so the panel
// shows the token-rows view (attn::tokenRows) to keep one picture.
void drawHeadsPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::Heads, ImVec2(900, 760), open)) return;
    if (!lessonHasResult(in, "Open a session (e.g. lesson_heads_block_identity) to see its heads.")) return;
    const attn::Session& s = *in.session;
    const attn::AttentionResult& r = *in.result;
    auto d = attn::validate(s.input, s.config);
    if (!d) {
        errorText(d.status().message);
        ImGui::End();
        return;
    }
    const auto hb = attn::headBlocks(*d);
    const attn::Layout L = s.config.layout;
    if (d->kvHeads() == d->H)
        textWrapped("H = %d heads of d_k = %d, d_v = %d (colour strip: which head owns each column)", d->H, d->dk, d->dv);
    else
        textWrapped("H = %d query heads over H_kv = %d key/value heads of d_k = %d, d_v = %d (colour strip: which head "
                    "owns each column; on W^K, W^V, K and V, which KV head)", d->H, d->kvHeads(), d->dk, d->dv);
    // Grouped sessions: what is shared, first; multi-head ones: what grouping would do, at the end.
    const bool grouped = d->kvHeads() != d->H;
    auto kvSection = [&] {
        sectionTitle("Key/value heads");
        textWrapped("%s", attn::groupedQueryText(*d).c_str());
    };
    if (grouped) kvSection();

    sectionTitle("Column blocks per head");
    if (s.config.mode != attn::Mode::Direct) {
        gridBeside(true, 20, "Wq", "W^Q", attn::tokenRows(s.input.Wq, L), blocks(in, hb, 'q'));
        gridBeside(false, 20, "Wk", "W^K", attn::tokenRows(s.input.Wk, L), blocks(in, hb, 'k'));
        gridBeside(false, 20, "Wv", "W^V", attn::tokenRows(s.input.Wv, L), blocks(in, hb, 'v'));
    }
    gridBeside(true, 20, "Q", "Q", attn::tokenRows(r.Q, L), blocks(in, hb, 'q'));
    gridBeside(false, 20, "K", "K", attn::tokenRows(r.K, L), blocks(in, hb, 'k'));
    gridBeside(false, 20, "V", "V", attn::tokenRows(r.V, L), blocks(in, hb, 'v'));

    sectionTitle("Seed 003's block identity: Q W_h = Q_h");
    clampSelection(r, st);
    if (d->H > 1) ImGui::SliderInt("head h", &st.head, 0, d->H - 1);
    const int width = d->H * d->dq;
    auto sel = attn::headSelector(width, d->H, st.head);
    if (sel) {
        GridOptions o = gridOptions(in, LessonMap::Projection);
        o.cell = 18.0f;
        o.values = false;
        gridBeside(true, 20, "Wh", "W_" + std::to_string(st.head + 1) + "  [H d_k, d_k]", *sel, o);
        gridBeside(false, 20, "Qh", "Q_" + std::to_string(st.head + 1) + " = Q W_" + std::to_string(st.head + 1),
                   attn::tokenRows(r.heads[st.head].Q, L), gridOptions(in, LessonMap::Projection));
    } else {
        errorText(sel.status().message);
    }

    sectionTitle("Each head's contribution to the output");
    st.contributions.refresh(in.revision, 0, [&] { return attn::headContributions(s.input, r); });
    const attn::HeadContributions* c = st.contributions.value ? &*st.contributions.value : nullptr;
    if (!c) {
        errorText(st.contributions.error);
    } else {
        for (std::size_t h = 0; h < c->perHead.size(); ++h) {
            const std::string title = "head " + std::to_string(h) + "  |.| = " + attn::formatValue(c->norms[h], 3);
            GridOptions o = gridOptions(in, LessonMap::Output);
            o.cell = 26.0f;
            gridBeside(h == 0, 16, ("c" + std::to_string(h)).c_str(), title, c->perHead[h], o);
        }
        textWrapped("sum of contributions + b_o vs output: max |difference| = %s",
                    attn::formatValue(c->maxAbsDiff, 3).c_str());
        noteText(s.input.Wo.size() > 0 ? "contribution_h = O_h W^O[rows of head h]: the output is their sum plus b_o."
                                       : "No W^O: each head's contribution is its block of the concatenation.");
    }

    sectionTitle("One head vs h heads on the same Q, K, V");
    if (s.config.score == attn::Score::Additive) {
        noteText("Needs a dot-product score (QK^T = sum_h Q_h K_h^T).");
    } else {
        ImGui::SetNextItemWidth(120);
        ImGui::InputInt("h", &st.compareHeads);
        st.compareHeads = std::max(1, st.compareHeads);
        st.headCounts.refresh(in.revision, st.compareHeads,
                              [&] { return attn::compareHeadCounts(s.input, s.config, st.compareHeads); });
        const attn::HeadsComparison* cmp = st.headCounts.value ? &*st.headCounts.value : nullptr;
        if (!cmp) {
            errorText(st.headCounts.error);
        } else {
            gridBeside(true, 20, "one", "1 head: output", cmp->oneHead.output, gridOptions(in, LessonMap::Output));
            gridBeside(false, 20, "many", std::to_string(cmp->heads) + " heads: output", cmp->multiHead.output,
                       gridOptions(in, LessonMap::Output));
            textWrapped("QK^T vs sum_h Q_h K_h^T: max |difference| = %s; outputs differ by up to %s",
                        attn::formatValue(cmp->maxAbsDecompositionDiff, 3).c_str(),
                        attn::formatValue(cmp->maxAbsOutputDiff, 3).c_str());
            noteText("One head scores with all of Q and K, so its scores are the sum of every head's Q_h K_h^T "
                     "(the cross terms of seed 003's figure mix into every block); h heads keep them apart.");
        }
    }
    if (!grouped) kvSection();
    ImGui::End();
}

} // namespace app
