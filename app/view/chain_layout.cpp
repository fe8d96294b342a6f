// The fit layout's arithmetic (chain_view.h): pure sizes in, cell sizes and collapses out, so that it can
// be tested without a window.
#include "view/chain_view.h"

#include <algorithm>
#include <cmath>

namespace app {
namespace {

// Widths the panel spends besides cells (ImGui's default style, as set up by panels/style.cpp): the
// spacing between items, an arrow between columns, a colorbar with its tick labels.
constexpr float kSpacing = 8.0f;
constexpr float kArrow = 14.0f + 2 * kSpacing;
// A colorbar packed to its tick labels (12 px bar, 8 px ticks, labels up to "-0.25": about 30 px), plus spacing.
constexpr float kColorbar = 52.0f + kSpacing;
constexpr float kTitle = 22.0f;                // a map's title line
constexpr float kMinSmallCell = 6.0f;          // thumbnails of Q, K, V, scores and the final maps
constexpr float kThumbTitle = 50.0f;           // a thumbnail's title ("scores", "output") in the UI font

float smallFor(float cell) { return std::clamp(std::round(cell * 0.5f), kMinCell, 24.0f); }

// The main row's width and the panel's height with large cells `c` and small cells `cs`. Small maps whose
// cells are too small for labels are thumbnails: no label bands and no colorbar (hover names each cell).
float widthOf(const FitInput& in, float inputsW, float c, float cs)
{
    const float band = in.labelBand + 6.0f;
    const bool thumbs = cs < in.fontSize * 0.8f;
    // A small map: its cells and bands, or a thumbnail under a short title ("scores": 50 px).
    const auto small = [&](int cols) { return thumbs ? std::max(cols * cs, kThumbTitle) : band + cols * cs + kColorbar; };
    float w = inputsW + kArrow + small(in.qkvCols);             // Q, K, V
    w += kArrow + small(in.wCols);                              // scores
    w += kSpacing + band + in.wCols * c + kColorbar;            // weights
    w += kSpacing + (in.outputLabels ? band : 0.0f) + in.oCols * c + kColorbar;  // head output
    if (in.finalCols > 0) w += kArrow + small(in.finalCols);
    return w + kSpacing;
}

float heightOf(const FitInput& in, float c, float cs)
{
    const float band = in.labelBand + 6.0f;
    const bool thumbs = cs < in.fontSize * 0.8f;
    const float smallBand = thumbs ? 0.0f : band;
    float h = kTitle + band + std::max(in.wRows, in.oRows) * c;
    h = std::max(h, 3 * (kTitle + smallBand) + in.qkvRows * cs);
    if (in.finalRows > 0) h = std::max(h, 2 * (kTitle + smallBand) + 2 * in.finalRows * cs);
    // The heads grid: its note, labels and thumbnails (its colorbar at least 40 px tall).
    if (in.heads > 1) h += kSpacing + kTitle + kTitle + std::max(40.0f, in.wRows * gridCellFor(cs));
    return h;
}

struct Fit {
    float cell = 0, small = 0;
    bool fits = false;
};

// The largest large cell in [kMinCell, kMaxCell] with which the panel fits, small cells at half of it.
// When that misses `target`, the small maps shrink (down to kMinSmallCell, thumbnails) first.
Fit largestCell(const FitInput& in, float avail, float inputsW, float target)
{
    const auto fits = [&](float c, float cs) { return widthOf(in, inputsW, c, cs) <= avail && heightOf(in, c, cs) <= in.chainHeight; };
    Fit f;
    for (float c = kMaxCell; c >= kMinCell; c -= 1.0f)
        if (fits(c, smallFor(c))) {
            f = {c, smallFor(c), true};
            break;
        }
    if (f.fits && f.cell >= target) return f;
    for (float c = std::min(kMaxCell, std::ceil(target)); c > std::max(f.cell, kMinCell - 1.0f); c -= 1.0f)
        for (float cs = smallFor(c); cs >= kMinSmallCell; cs -= 1.0f)
            if (fits(c, cs)) return {c, cs, true};
    if (!f.fits) f = {kMinCell, kMinSmallCell, false};
    return f;
}

constexpr float kScrollbar = 14.0f;  // a scrolling box's scrollbar (ImGui's default style)
constexpr float kMinView = 48.0f;    // the smallest box worth scrolling in

// The boxes of a plan that does not fit (chain_view.h, FitPlan::smallView/bigView/outputView): the row's fixed
// parts (inputs, arrows, label bands, colorbars, scrollbars, the spacing between its groups) come off the width
// first. The weights come first in the rest: their cells grow (up to `target`, never past the panel's height under
// the heads grid) while the small maps (Q/K/V, scores, the final column) and the head output keep boxes of at
// least kMinView; what the weights do not need goes to those boxes (the output's counting double, each small one
// at most 200 px). Weights too large to show whole at any cell keep the older shares (below). A model's head in the chain view is such a plan at any text length:
// Q, K and V are H·D = 576 columns wide and the head output 64, so nothing fits whole; with the output's full
// width counted as fixed and the small boxes served first (as before), its 14 × 14 weights got a 96 px box of
// 12 px cells at 1280 × 800.
void planViews(const FitInput& in, float avail, float inputsW, float target, FitPlan& p)
{
    if (p.fits) return;
    const float band = in.labelBand + 6.0f;
    const bool thumbs = p.smallCell < in.fontSize * 0.8f;
    const float smallDecor = (thumbs ? 0.0f : band + kColorbar) + kScrollbar;
    const int smalls = 2 + (in.finalCols > 0 ? 1 : 0);  // Q/K/V, scores, the final column
    const float outputDecor = (in.outputLabels ? band : 0.0f) + kColorbar + kScrollbar;
    // Spacing between the row's groups that the sums above leave out (the row ran ~30 px past a 1280-px window).
    const float between = kSpacing * 4;
    const float fixed = inputsW + kArrow * float(smalls) + kSpacing * 3 + between + float(smalls) * smallDecor + band +
                        kColorbar + kScrollbar + outputDecor;
    const float room = std::max(0.0f, avail - fixed);
    const float grid = in.heads > 1 ? kSpacing + 2 * kTitle + std::min(float(in.wRows) * p.gridCell, 96.0f) + kScrollbar : 0.0f;
    const float tall = std::max(kMinView * 2, in.chainHeight - kTitle * 2 - band - kScrollbar - grid);
    // The weights' box holds its label bands too (the box bounds the whole map).
    const float weightsRoom = std::max(kMinView * 2, room - float(smalls + 1) * kMinView);
    float cell = std::floor(std::min({(weightsRoom - band - kSpacing) / float(std::max(1, in.wCols)),
                                      (tall - band) / float(std::max(1, in.wRows)), kMaxCell}));
    // Cells too small for labels (under 0.8 of the font, heatmap_view) show none: the label bands' room goes to the
    // cells, up to the largest cell that still shows no labels (issue 36: a 42-token model head got 5 px cells in a
    // 200 px box over 300 px of empty window).
    const float noLabels = std::ceil(in.fontSize * 0.8f) - 1.0f;
    bool bare = false;
    if (cell < noLabels) {
        const float c = std::floor(std::min({(weightsRoom - kSpacing) / float(std::max(1, in.wCols)),
                                             (tall + band) / float(std::max(1, in.wRows)), noLabels}));
        if (c > cell) cell = c, bare = true;
    }
    if (cell > p.cell) p.cell = cell;
    const float need = (bare ? 0.0f : band) + float(std::max(in.wCols, in.wRows)) * p.cell + kSpacing;
    // Q, K and V stacked, each its title, caption line and scrollbar: a third of the panel's height each, for when
    // they are thin (n × d_k at hundreds of tokens, chain_panel's FittedZoom: their boxes may be taller than wide).
    p.qkvViewHeight = std::max(kMinView, std::floor((in.chainHeight - 3 * (2 * kTitle + kScrollbar)) / 3));
    if (need <= weightsRoom) {
        p.bigView = std::min(std::max(kMinView * 2, need), bare ? tall + band : tall);
        const float rest = std::max(0.0f, room - p.bigView);
        p.smallView = std::clamp(std::floor(rest / float(smalls + 2)), kMinView, 200.0f);
        p.outputView = std::min(std::max(kMinView, rest - float(smalls) * p.smallView), tall);
        return;
    }
    // Weights too large for their box at any readable cell (hundreds of tokens): every map opens whole, fitted to
    // its box (chain_panel), the weights without label bands. The small maps and the output (thin maps: n × d)
    // get up to an eighth of the room each, the weights the rest, as tall as the panel allows (issue 36: at
    // 1280×800 a 1024-token map had a sixth of the room for each small map and 1.5 sixths for a 1024 × 8 output,
    // and the weights 360 px of the window's 800).
    // The weights' label band, counted in `fixed`, is not drawn here (cells too small for labels): it is theirs too
    // (issue 36: a 149-token SmolLM2 head left 160 px of a 1280-px window empty right of its final column).
    // Its height: the panel's, less the line under the heads grid's thumbnails (the KV groups' brackets and names, or
    // its colorbar's "log") and the caption under the head output's strip (a thin map here), which `tall` leaves out
    // (at 1280x800 with the room above, SmolLM2's and Gemma 3's heads grids ran 20-40 px off the bottom).
    const float tallWhole = std::max(kMinView * 2, tall - kTitle * 2);
    p.smallView = std::clamp(std::floor(room / 8.0f), kMinView, 160.0f);
    p.outputView = std::min(p.smallView, tallWhole);
    p.bigView = std::min(std::max(kMinView * 2, room + band - float(smalls) * p.smallView - p.outputView), tallWhole + band);
}

} // namespace

FitPlan planFitLayout(const FitInput& in, Collapse inputs, Collapse sidebar)
{
    // The cell at which the weights take kTargetShare of the window (capped at the readable maximum).
    const float area = static_cast<float>(std::max(1, in.wVisible));
    float target = std::sqrt(kTargetShare * in.width * in.height / area);
    // A map so small that even the largest cells leave it under its share (seed 000's 4×4 at 1280×800):
    // comfortable cells are enough, nothing collapses for more.
    if (target > kMaxCell) target = kComfortCell;
    struct Option { bool inputsCollapsed, sidebarCollapsed; };
    // With the inputs kept shown (the user opened them), the sidebar may still go: {false, true}, only then
    // (in Auto the inputs collapse before the sidebar does).
    const Option order[] = {{false, false}, {true, false}, {true, true}, {false, true}};
    FitPlan best;
    bool have = false;
    for (const Option& o : order) {
        if ((inputs == Collapse::Shown && o.inputsCollapsed) || (inputs == Collapse::Hidden && !o.inputsCollapsed)) continue;
        if ((sidebar == Collapse::Shown && o.sidebarCollapsed) || (sidebar == Collapse::Hidden && !o.sidebarCollapsed)) continue;
        if (!o.inputsCollapsed && o.sidebarCollapsed && inputs != Collapse::Shown) continue;
        const float avail = in.chainWidth + (o.sidebarCollapsed ? in.sidebarWidth : 0.0f);
        const Fit f = largestCell(in, avail, o.inputsCollapsed ? in.stripWidth : in.inputsWidth, target);
        FitPlan p;
        p.cell = f.cell;
        p.smallCell = f.small;
        p.gridCell = gridCellFor(f.small);
        p.inputsCollapsed = o.inputsCollapsed;
        p.sidebarCollapsed = o.sidebarCollapsed;
        p.fits = f.fits;
        planViews(in, avail, o.inputsCollapsed ? in.stripWidth : in.inputsWidth, target, p);
        // Past the target, an option that fits over one that does not (whose boxes' cells planViews grew), then
        // the one with the largest cells (ties: the later one, with more room).
        if (!have || (p.fits && !best.fits) || (p.fits == best.fits && p.cell >= best.cell)) best = p;
        have = true;
        if (f.fits && f.cell >= target) return p;
    }
    return best;
}

} // namespace app
