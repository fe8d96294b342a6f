// Figure layout and drawing, and the PNG / SVG / PDF / RGBA outputs.
//
// [SECTION] Design constants
// [SECTION] Layout
// [SECTION] Drawing
// [SECTION] Outputs
#include "figure/figure_render.h"

#include "figure/painter.h"

#include <attnscope/preset_io.h>

#include <cairo-pdf.h>
#include <cairo.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

namespace app::fig {

// -----------------------------------------------------------------------------------------------------
// [SECTION] Design constants (points). Chosen by looking at the rendered figures at print size: labels of
// 8 pt match a paper's caption size, and heatmaps of ~240 pt fill one column of a two-column paper.
// -----------------------------------------------------------------------------------------------------
namespace {

constexpr double kMargin = 12;
constexpr double kTitleSize = 11.5;
constexpr double kSubtitleSize = 8.5;
constexpr double kPanelTitleSize = 9;
constexpr double kAxisTitleSize = 8;
constexpr double kMaxLabelSize = 8;
constexpr double kMinLabelSize = 4.5;   // smaller is unreadable in print; labels are thinned instead
constexpr double kTickSize = 7;
constexpr double kLabelGap = 3;         // label to heatmap edge
constexpr double kPanelGapX = 16;
constexpr double kPanelGapY = 12;
constexpr double kColorbarGap = 10;     // heatmap to colorbar
constexpr double kColorbarWidth = 9;
constexpr double kTickLength = 3;
constexpr double kMaxCell = 22;         // beyond this, big cells look empty
constexpr double kMaxAnnotatedCell = 28; // annotated cells hold a number: allow them a little more room
constexpr double kMinCell = 2;
constexpr double kAnnotateMinCell = 20; // "0.25" at 6.5 pt is ~16 pt wide
constexpr int kColorbarSteps = 128;     // finer than a 256-entry LUT needs for a visually smooth bar

constexpr attn::Rgb8 kInk{34, 34, 34};
constexpr attn::Rgb8 kMutedInk{96, 96, 96};
constexpr attn::Rgb8 kFrame{60, 60, 60};
constexpr attn::Rgb8 kWhite{255, 255, 255};
constexpr attn::Rgb8 kHatch{205, 205, 205};  // lighter than kMaskedColor so the hatching reads as "no data"

// core's formatValue with the typographic minus sign (U+2212) that print typesetting uses for numbers.
std::string displayValue(float v, int significant = 3)
{
    std::string s = attn::formatValue(v, significant), out;
    for (char c : s) out += c == '-' ? std::string("\u2212") : std::string(1, c);
    return out;
}

struct LabelPlan {
    double size = kMaxLabelSize;
    int stride = 1;          // every stride-th label shown
    double extent = 0;       // space the labels take away from the heatmap (width for rows, height for columns)
    double angle = 0;        // column labels: 0, 45 (token labels that do not fit) or 90 (index labels)
    double overhang = 0;     // column labels at 45°: how far the first one reaches left of its cell centre
};

LabelPlan planLabels(const std::vector<std::string>& labels, double cell, bool columns, bool tokens)
{
    LabelPlan p;
    p.size = std::clamp(cell * 0.8, kMinLabelSize, kMaxLabelSize);
    const double lineH = measureText({{"Ag", 0}}, {p.size}).height;
    p.stride = std::max(1, int(std::ceil(lineH * 0.95 / cell)));
    for (std::size_t i = 0; i < labels.size(); i += std::size_t(p.stride))
        p.extent = std::max(p.extent, measureText({{labels[i], 0}}, {p.size}).width);
    if (columns) {
        const double widest = p.extent;
        if (widest <= cell * p.stride - 2) {
            p.extent = lineH;
        } else if (tokens) {
            // 45°, ending at the cell centre: easier to read than 90° and still compact.
            constexpr double kSin45 = 0.70710678;
            p.angle = 45;
            p.extent = (widest + lineH) * kSin45;
            p.overhang = p.extent;
        } else {
            p.angle = 90;
        }
    }
    return p;
}

struct PanelPlan {
    LabelPlan rows, cols;
    bool showRows = true, showCols = true;
    double left = 0, top = 0, bottom = 0, right = 0;  // space around the heatmap
    double cbTickWidth = 0;
};

double axisTitleHeight() { return measureText({{"Ag", 0}}, {kAxisTitleSize}).height; }

// Colorbar ticks: about one per 20 pt (at most 8: more is clutter), but at least three when the range
// allows (niceTicks may return fewer than asked for when the step rounds up).
std::vector<float> colorbarTicks(const attn::DisplayRange& r, double height)
{
    constexpr int kMaxTicks = 8, kMaxAsk = 12;
    std::vector<float> ticks;
    for (int n = std::clamp(int(height / 20), 2, kMaxTicks); n <= kMaxAsk; ++n) {
        ticks = attn::rangeTicks(r, n);
        if (ticks.size() >= 3) break;
    }
    return ticks;
}

double colorbarTickWidth(const attn::DisplayRange& r, double height)
{
    double w = 0;
    for (float t : colorbarTicks(r, height))
        w = std::max(w, measureText({{displayValue(t), 0}}, {kTickSize}).width);
    return w;
}

double colorbarBlockWidth(double tickWidth, bool label)
{
    return kColorbarGap + kColorbarWidth + kTickLength + 2 + tickWidth + (label ? 4 + axisTitleHeight() : 0);
}

bool anyMasked(const Figure& f)
{
    for (const Heatmap& h : f.panels)
        for (Eigen::Index i = 0; i < h.masked.size(); ++i)
            if (h.masked.data()[i]) return true;
    return false;
}

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] Layout
// -----------------------------------------------------------------------------------------------------
namespace {

struct FullLayout {
    FigureLayout pub;
    std::vector<PanelPlan> plans;
    double titleY = 0, subtitleY = 0, centerX = 0;
    Rect legend;  // the "masked" swatch (w = 0: none)
};

FullLayout computeLayout(const Figure& f)
{
    FullLayout L;
    const int n = int(f.panels.size());
    const int ncols = std::max(1, std::min(f.columns, n));
    const int nrows = n == 0 ? 0 : (n + ncols - 1) / ncols;

    Eigen::Index maxCells = 1;
    for (const Heatmap& h : f.panels) maxCells = std::max({maxCells, h.values.rows(), h.values.cols()});
    const double target = n == 1 ? 240.0 : ncols >= 4 ? 120.0 : 160.0;
    double cell = std::clamp(target / double(maxCells), kMinCell, f.annotate ? kMaxAnnotatedCell : kMaxCell);
    if (f.annotate && cell < kAnnotateMinCell) {
        // Grow to fit the numbers unless that makes the figure absurdly large (then annotations are dropped).
        if (kAnnotateMinCell * double(maxCells) <= 600) cell = kAnnotateMinCell;
        else L.pub.annotationsFit = false;
    }

    const double axisH = axisTitleHeight();
    L.plans.resize(std::size_t(n));
    std::vector<double> colLeft(std::size_t(ncols), 0), colBody(std::size_t(ncols), 0);
    std::vector<double> rowTop(std::size_t(nrows), 0), rowBody(std::size_t(nrows), 0), rowBottom(std::size_t(nrows), 0);
    for (int i = 0; i < n; ++i) {
        const Heatmap& h = f.panels[std::size_t(i)];
        PanelPlan& p = L.plans[std::size_t(i)];
        const int gr = i / ncols, gc = i % ncols;
        p.showRows = !f.sharedAxes || gc == 0;
        p.showCols = !f.sharedAxes || i + ncols >= n;
        p.rows = planLabels(h.rowLabels, cell, false, h.rowLabelsAreTokens);
        p.cols = planLabels(h.colLabels, cell, true, h.colLabelsAreTokens);
        if (p.showRows) p.left = p.rows.extent + kLabelGap + (h.rowAxis.empty() ? 0 : axisH + 4);
        if (p.showCols && gc == 0) p.left = std::max(p.left, p.cols.overhang - cell / 2);
        if (p.showCols) p.bottom = p.cols.extent + kLabelGap + (h.colAxis.empty() ? 0 : axisH + 3);
        if (!h.title.empty()) p.top = measureText(parseRichText(h.title), {kPanelTitleSize, true}).height + 4;
        const double hmW = double(h.values.cols()) * cell, hmH = double(h.values.rows()) * cell;
        if (!f.sharedColorbar) {
            p.cbTickWidth = colorbarTickWidth(h.range, hmH);
            p.right = colorbarBlockWidth(p.cbTickWidth, !h.colorbarLabel.empty());
        }
        colLeft[std::size_t(gc)] = std::max(colLeft[std::size_t(gc)], p.left);
        colBody[std::size_t(gc)] = std::max(colBody[std::size_t(gc)], hmW + p.right);
        rowTop[std::size_t(gr)] = std::max(rowTop[std::size_t(gr)], p.top);
        rowBody[std::size_t(gr)] = std::max(rowBody[std::size_t(gr)], hmH);
        rowBottom[std::size_t(gr)] = std::max(rowBottom[std::size_t(gr)], p.bottom);
    }

    // Title block.
    double y = kMargin;
    const TextExtent title = f.title.empty() ? TextExtent{} : measureText({{f.title, 0}}, {kTitleSize, true});
    const TextExtent subtitle = f.subtitle.empty() ? TextExtent{} : measureText({{f.subtitle, 0}}, {kSubtitleSize});
    if (!f.title.empty()) {
        L.titleY = y;
        y += title.height + 1;
    }
    if (!f.subtitle.empty()) {
        L.subtitleY = y;
        y += subtitle.height;
    }
    if (!f.title.empty() || !f.subtitle.empty()) y += 8;

    // Grid.
    std::vector<double> colX(static_cast<std::size_t>(ncols)), rowY(static_cast<std::size_t>(nrows));
    double x = kMargin;
    for (int c = 0; c < ncols; ++c) {
        colX[std::size_t(c)] = x;
        x += colLeft[std::size_t(c)] + colBody[std::size_t(c)] + (c + 1 < ncols ? kPanelGapX : 0);
    }
    const double gridRight = x;
    for (int r = 0; r < nrows; ++r) {
        rowY[std::size_t(r)] = y;
        y += rowTop[std::size_t(r)] + rowBody[std::size_t(r)] + rowBottom[std::size_t(r)] + (r + 1 < nrows ? kPanelGapY : 0);
    }
    double bottom = y;
    double hmLeft = 1e30, hmRight = 0;
    for (int i = 0; i < n; ++i) {
        const Heatmap& h = f.panels[std::size_t(i)];
        const int gr = i / ncols, gc = i % ncols;
        PanelLayout pl;
        pl.cell = cell;
        // A panel narrower than its grid column (chain figures mix shapes) is centred in it.
        const double spare = colBody[std::size_t(gc)] - (double(h.values.cols()) * cell + L.plans[std::size_t(i)].right);
        pl.heatmap = {colX[std::size_t(gc)] + colLeft[std::size_t(gc)] + spare / 2, rowY[std::size_t(gr)] + rowTop[std::size_t(gr)],
                      double(h.values.cols()) * cell, double(h.values.rows()) * cell};
        if (!f.sharedColorbar)
            pl.colorbar = {pl.heatmap.x + pl.heatmap.w + kColorbarGap, pl.heatmap.y, kColorbarWidth, pl.heatmap.h};
        hmLeft = std::min(hmLeft, pl.heatmap.x);
        hmRight = std::max(hmRight, pl.heatmap.x + pl.heatmap.w);
        L.pub.panels.push_back(pl);
    }
    double right = gridRight;
    const bool masked = anyMasked(f);
    const double legendH = measureText({{"masked", 0}}, {kTickSize}).height;
    if (f.sharedColorbar && n > 0) {
        const double top = L.pub.panels.front().heatmap.y;
        const double bot = L.pub.panels.back().heatmap.y + L.pub.panels.back().heatmap.h;
        double h = bot - top;
        if (masked) h = std::max(h - legendH - 8, 40.0);  // room for the legend under the bar
        L.pub.colorbar = {gridRight + kColorbarGap, top, kColorbarWidth, h};
        const double tw = colorbarTickWidth(f.panels.front().range, h);
        right = gridRight + colorbarBlockWidth(tw, !f.colorbarLabel.empty());
        if (masked) L.legend = {L.pub.colorbar.x, top + h + 8, legendH, legendH};
    } else if (masked) {
        L.legend = {hmLeft, bottom + 6, legendH, legendH};
        bottom += 6 + legendH;
    }
    L.pub.width = std::max({right, kMargin + title.width, kMargin + subtitle.width}) + kMargin;
    L.pub.height = std::max(bottom, L.legend.y + L.legend.h) + kMargin;
    L.centerX = n > 0 ? (hmLeft + hmRight) / 2 : L.pub.width / 2;
    // Keep the centred title inside the page.
    const double half = std::max(title.width, subtitle.width) / 2;
    L.centerX = std::clamp(L.centerX, kMargin + half, L.pub.width - kMargin - half);
    return L;
}

} // namespace

FigureLayout layoutFigure(const Figure& f) { return computeLayout(f).pub; }

// -----------------------------------------------------------------------------------------------------
// [SECTION] Drawing
// -----------------------------------------------------------------------------------------------------
namespace {

// 45° hatching inside a rectangle: lines x + y = k (local coordinates), clipped analytically.
void hatch(Painter& p, const Rect& r, double spacing)
{
    for (double k = spacing / 2; k < r.w + r.h; k += spacing) {
        const double x0 = std::max(0.0, k - r.h), x1 = std::min(r.w, k);
        if (x1 <= x0) continue;
        p.line(r.x + x0, r.y + (k - x0), r.x + x1, r.y + (k - x1), kHatch, 0.5);
    }
}

// `fill` may overlap the neighbours (no seams between masked cells); the hatching stays inside `r`.
void drawMaskedCell(Painter& p, const Rect& r, double cell, const Rect& fill)
{
    p.fillRect(fill.x, fill.y, fill.w, fill.h, attn::kMaskedColor);
    hatch(p, r, std::max(2.0, cell / 3.5));
}

void drawColorbar(Painter& p, const Rect& r, attn::Colormap cmap, const attn::DisplayRange& range, const std::string& label,
                  double tickWidth)
{
    const double step = r.h / kColorbarSteps;
    for (int i = 0; i < kColorbarSteps; ++i) {
        const float t = (float(i) + 0.5f) / float(kColorbarSteps);
        // Each strip overlaps the next by a fraction so no hairline gaps show between them.
        p.fillRect(r.x, r.y + r.h - (i + 1) * step, r.w, step + (i + 1 < kColorbarSteps ? step * 0.5 : 0),
                   attn::colormapColor(cmap, t));
    }
    p.strokeRect(r.x, r.y, r.w, r.h, kFrame, 0.5);
    const double span = double(range.hi) - double(range.lo);
    for (float t : colorbarTicks(range, r.h)) {
        // attn::normalize places a tick as it colours a value (a log range by its logarithm).
        const double y = span > 0 ? r.y + r.h * (1.0 - double(attn::normalize(t, range))) : r.y + r.h / 2;
        p.line(r.x + r.w, y, r.x + r.w + kTickLength, y, kFrame, 0.5);
        p.text({{displayValue(t), 0}}, {kTickSize, false, kInk}, r.x + r.w + kTickLength + 2, y, HAlign::Left,
               VAlign::Middle);
    }
    if (!label.empty())
        p.text(parseRichText(label), {kAxisTitleSize, false, kMutedInk}, r.x + r.w + kTickLength + 2 + tickWidth + 4,
               r.y + r.h / 2, HAlign::Center, VAlign::Top, 90);
}

// Annotation text: at most 7 pt and a third of the cell, shrunk so the text fills at most kAnnotationFill of
// the cell's width (a visible gap between neighbours).
constexpr double kAnnotationFill = 0.78;
double annotationBaseSize(double cell) { return std::min(7.0, cell * 0.32); }
double fittedAnnotationSize(const std::string& label, double cell)
{
    const double base = annotationBaseSize(cell);
    const double w = measureText({{label, 0}}, {base}).width;
    return w > cell * kAnnotationFill ? base * cell * kAnnotationFill / w : base;
}

// One size for the whole figure, so the numbers read as a table: the largest that fits every cell, but
// never below 85 % of the base size (a value that still does not fit then shrinks on its own).
double figureAnnotationSize(const Figure& f, double cell)
{
    const double base = annotationBaseSize(cell);
    double size = base;
    for (const Heatmap& h : f.panels)
        for (Eigen::Index i = 0; i < h.values.rows(); ++i)
            for (Eigen::Index j = 0; j < h.values.cols(); ++j)
                if (!(h.masked.size() > 0 && h.masked(i, j)))
                    size = std::min(size, std::max(0.85 * base, fittedAnnotationSize(displayValue(h.values(i, j), 2), cell)));
    return size;
}

void drawHeatmap(Painter& p, const Figure& f, const Heatmap& h, const PanelLayout& pl, const PanelPlan& plan,
                 bool annotate, double annotationSize)
{
    const double c = pl.cell;
    const Rect& hm = pl.heatmap;
    const Eigen::Index R = h.values.rows(), C = h.values.cols();
    const bool hasMask = h.masked.rows() == R && h.masked.cols() == C;
    // Cells overlap their right/bottom neighbours slightly so no background seams show in any viewer.
    const double overlap = std::min(0.25, c * 0.1);
    if (double(R) * double(C) > double(kMaxVectorCells)) {
        // One image per map (as matplotlib's imshow): masked cells take the mask colour without hatching, and
        // annotations never reach maps this large (cells are then far below kAnnotateMinCell).
        std::vector<attn::Rgb8> px(std::size_t(R) * std::size_t(C));
        for (Eigen::Index i = 0; i < R; ++i)
            for (Eigen::Index j = 0; j < C; ++j)
                px[std::size_t(i) * std::size_t(C) + std::size_t(j)] =
                    hasMask && h.masked(i, j) ? attn::kMaskedColor
                                              : attn::colormapColor(h.cmap, attn::normalize(h.values(i, j), h.range));
        p.image(hm.x, hm.y, hm.w, hm.h, int(C), int(R), px);
        annotate = false;
    } else {
    for (Eigen::Index i = 0; i < R; ++i)
        for (Eigen::Index j = 0; j < C; ++j) {
            const Rect r{hm.x + double(j) * c, hm.y + double(i) * c, c + (j + 1 < C ? overlap : 0), c + (i + 1 < R ? overlap : 0)};
            if (hasMask && h.masked(i, j)) continue;
            p.fillRect(r.x, r.y, r.w, r.h, attn::colormapColor(h.cmap, attn::normalize(h.values(i, j), h.range)));
        }
    if (hasMask)  // after the colours, so the overlap never covers hatching
        for (Eigen::Index i = 0; i < R; ++i)
            for (Eigen::Index j = 0; j < C; ++j)
                if (h.masked(i, j)) {
                    const Rect r{hm.x + double(j) * c, hm.y + double(i) * c, c, c};
                    drawMaskedCell(p, r, c, {r.x, r.y, c + (j + 1 < C ? overlap : 0), c + (i + 1 < R ? overlap : 0)});
                }
    }
    if (annotate) {
        for (Eigen::Index i = 0; i < R; ++i)
            for (Eigen::Index j = 0; j < C; ++j) {
                if (hasMask && h.masked(i, j)) continue;
                const std::string label = displayValue(h.values(i, j), 2);
                const double size = std::min(annotationSize, fittedAnnotationSize(label, c));
                const attn::Rgb8 bg = attn::colormapColor(h.cmap, attn::normalize(h.values(i, j), h.range));
                // Rec. 601 luma: dark text on light cells, white on dark ones.
                const double luma = 0.299 * bg.r + 0.587 * bg.g + 0.114 * bg.b;
                p.text({{label, 0}}, {size, false, luma > 140 ? kInk : kWhite}, hm.x + (double(j) + 0.5) * c,
                       hm.y + (double(i) + 0.5) * c, HAlign::Center, VAlign::Middle);
            }
    }
    p.strokeRect(hm.x, hm.y, hm.w, hm.h, kFrame, 0.6);

    const double axisH = axisTitleHeight();
    if (plan.showRows) {
        for (Eigen::Index i = 0; i < R && std::size_t(i) < h.rowLabels.size(); i += plan.rows.stride)
            p.text({{h.rowLabels[std::size_t(i)], 0}}, {plan.rows.size, false, kInk}, hm.x - kLabelGap,
                   hm.y + (double(i) + 0.5) * c, HAlign::Right, VAlign::Middle);
        if (!h.rowAxis.empty())
            p.text(parseRichText(h.rowAxis), {kAxisTitleSize, false, kMutedInk}, hm.x - plan.left, hm.y + hm.h / 2,
                   HAlign::Center, VAlign::Top, 90);
    }
    if (plan.showCols) {
        const double y0 = hm.y + hm.h + kLabelGap;
        for (Eigen::Index j = 0; j < C && std::size_t(j) < h.colLabels.size(); j += plan.cols.stride) {
            const double x = hm.x + (double(j) + 0.5) * c;
            if (plan.cols.angle != 0)
                p.text({{h.colLabels[std::size_t(j)], 0}}, {plan.cols.size, false, kInk}, x, y0, HAlign::Right,
                       plan.cols.angle == 90 ? VAlign::Middle : VAlign::Top, plan.cols.angle);
            else
                p.text({{h.colLabels[std::size_t(j)], 0}}, {plan.cols.size, false, kInk}, x, y0, HAlign::Center, VAlign::Top);
        }
        if (!h.colAxis.empty())
            p.text(parseRichText(h.colAxis), {kAxisTitleSize, false, kMutedInk}, hm.x + hm.w / 2,
                   y0 + plan.cols.extent + 3 + axisH, HAlign::Center, VAlign::Bottom);
    }
    if (!h.title.empty())
        p.text(parseRichText(h.title), {kPanelTitleSize, true, kInk}, hm.x + hm.w / 2, hm.y - 4, HAlign::Center,
               VAlign::Bottom);
    if (!f.sharedColorbar) drawColorbar(p, pl.colorbar, h.cmap, h.range, h.colorbarLabel, plan.cbTickWidth);
}

void drawFigure(Painter& p, const Figure& f, const FullLayout& L)
{
    p.fillRect(0, 0, L.pub.width, L.pub.height, kWhite);
    if (!f.title.empty())
        p.text({{f.title, 0}}, {kTitleSize, true, kInk}, L.centerX, L.titleY, HAlign::Center, VAlign::Top);
    if (!f.subtitle.empty())
        p.text({{f.subtitle, 0}}, {kSubtitleSize, false, kMutedInk}, L.centerX, L.subtitleY, HAlign::Center, VAlign::Top);
    const double annotationSize =
        f.annotate && !L.pub.panels.empty() ? figureAnnotationSize(f, L.pub.panels.front().cell) : 0.0;
    for (std::size_t i = 0; i < f.panels.size(); ++i)
        drawHeatmap(p, f, f.panels[i], L.pub.panels[i], L.plans[i], f.annotate && L.pub.annotationsFit, annotationSize);
    if (f.sharedColorbar && !f.panels.empty()) {
        const Rect& r = L.pub.colorbar;
        drawColorbar(p, r, f.panels.front().cmap, f.panels.front().range, f.colorbarLabel,
                     colorbarTickWidth(f.panels.front().range, r.h));
    }
    if (L.legend.w > 0) {
        drawMaskedCell(p, L.legend, L.legend.w, L.legend);
        p.strokeRect(L.legend.x, L.legend.y, L.legend.w, L.legend.h, kFrame, 0.5);
        p.text({{"masked", 0}}, {kTickSize, false, kInk}, L.legend.x + L.legend.w + 3, L.legend.y + L.legend.h / 2,
               HAlign::Left, VAlign::Middle);
    }
}

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] Outputs
// -----------------------------------------------------------------------------------------------------
std::optional<FigureFormat> formatFromPath(const std::string& path)
{
    const std::size_t dot = path.rfind('.');
    if (dot == std::string::npos) return std::nullopt;
    std::string ext = path.substr(dot + 1);
    for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (ext == "png") return FigureFormat::Png;
    if (ext == "svg") return FigureFormat::Svg;
    if (ext == "pdf") return FigureFormat::Pdf;
    return std::nullopt;
}

namespace {

cairo_status_t appendToString(void* closure, const unsigned char* data, unsigned int length)
{
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
}

attn::Status checkScale(double scale, const FigureLayout& l, int& w, int& h)
{
    if (!(scale >= kMinScale && scale <= kMaxScale))
        return attn::invalidArgument("scale: expected a value in [" + attn::formatValue(float(kMinScale)) + ", " +
                                     attn::formatValue(float(kMaxScale)) + "], got " + attn::formatValue(float(scale)));
    const double pw = std::ceil(l.width * scale), ph = std::ceil(l.height * scale);
    if (pw > kMaxImageSide || ph > kMaxImageSide)
        return attn::invalidArgument("scale " + attn::formatValue(float(scale)) + " gives a " + std::to_string(long(pw)) +
                                     "×" + std::to_string(long(ph)) + " image; cairo draws at most " +
                                     std::to_string(long(kMaxImageSide)) +
                                     " pixels per side: pick fewer heads (--head N), one panel, or write SVG or PDF");
    if (pw * ph > kMaxPixels)
        return attn::invalidArgument("scale " + attn::formatValue(float(scale)) + " gives a " + std::to_string(long(pw)) +
                                     "×" + std::to_string(long(ph)) + " image, over the limit of 100 megapixels: use --scale " +
                                     attn::formatValue(float(std::max(kMinScale, std::floor(scale * std::sqrt(kMaxPixels / (pw * ph)) * 100) / 100))) +
                                     " or less, or write SVG or PDF (vector, any size)");
    w = int(pw);
    h = int(ph);
    return {};
}

// Draws onto a new ARGB32 image surface; the caller destroys it.
attn::Expected<cairo_surface_t*> rasterize(const Figure& f, double scale)
{
    const FullLayout L = computeLayout(f);
    int w = 0, h = 0;
    ATTNSCOPE_RETURN_IF_ERROR(checkScale(scale, L.pub, w, h));
    cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surface);
        return attn::makeError(attn::StatusCode::Internal, "cannot allocate a " + std::to_string(w) + "×" + std::to_string(h) + " image");
    }
    cairo_t* cr = cairo_create(surface);
    cairo_scale(cr, scale, scale);
    CairoPainter painter(cr);
    drawFigure(painter, f, L);
    cairo_destroy(cr);
    cairo_surface_flush(surface);
    return surface;
}

} // namespace

attn::Expected<std::string> renderFigure(const Figure& f, FigureFormat format, double scale)
{
    std::string out;
    if (format == FigureFormat::Svg) {
        const FullLayout L = computeLayout(f);
        SvgPainter painter(L.pub.width, L.pub.height);
        drawFigure(painter, f, L);
        return painter.finish();
    }
    if (format == FigureFormat::Pdf) {
        const FullLayout L = computeLayout(f);
        cairo_surface_t* surface = cairo_pdf_surface_create_for_stream(appendToString, &out, L.pub.width, L.pub.height);
        cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATOR, "attnscope");
        if (!f.title.empty()) cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_TITLE, f.title.c_str());
        cairo_t* cr = cairo_create(surface);
        CairoPainter painter(cr);
        drawFigure(painter, f, L);
        cairo_destroy(cr);
        cairo_surface_finish(surface);
        const cairo_status_t st = cairo_surface_status(surface);
        cairo_surface_destroy(surface);
        if (st != CAIRO_STATUS_SUCCESS)
            return attn::makeError(attn::StatusCode::Internal, std::string("PDF rendering failed: ") + cairo_status_to_string(st));
        return out;
    }
    attn::Expected<cairo_surface_t*> surface = rasterize(f, scale);
    if (!surface) return surface.status();
    const cairo_status_t st = cairo_surface_write_to_png_stream(*surface, appendToString, &out);
    cairo_surface_destroy(*surface);
    if (st != CAIRO_STATUS_SUCCESS)
        return attn::makeError(attn::StatusCode::Internal, std::string("PNG encoding failed: ") + cairo_status_to_string(st));
    return out;
}

attn::Status writeFigure(const Figure& f, const std::string& path, FigureFormat format, double scale)
{
    attn::Expected<std::string> bytes = renderFigure(f, format, scale);
    if (!bytes) return bytes.status();
    return attn::writeFileAtomic(path, *bytes);
}

attn::Expected<RgbaImage> renderFigureRgba(const Figure& f, double scale)
{
    attn::Expected<cairo_surface_t*> surface = rasterize(f, scale);
    if (!surface) return surface.status();
    RgbaImage img;
    img.width = cairo_image_surface_get_width(*surface);
    img.height = cairo_image_surface_get_height(*surface);
    img.pixels.resize(std::size_t(img.width) * std::size_t(img.height) * 4);
    const unsigned char* data = cairo_image_surface_get_data(*surface);
    const int stride = cairo_image_surface_get_stride(*surface);
    for (int y = 0; y < img.height; ++y)
        for (int x = 0; x < img.width; ++x) {
            // Cairo ARGB32: native-endian 32-bit words, premultiplied; the figure background is opaque white,
            // so alpha is 255 and no un-premultiplying is needed.
            std::uint32_t px;
            std::memcpy(&px, data + std::size_t(y) * std::size_t(stride) + std::size_t(x) * 4, 4);
            std::uint8_t* o = &img.pixels[(std::size_t(y) * std::size_t(img.width) + std::size_t(x)) * 4];
            o[0] = std::uint8_t(px >> 16);
            o[1] = std::uint8_t(px >> 8);
            o[2] = std::uint8_t(px);
            o[3] = std::uint8_t(px >> 24);
        }
    cairo_surface_destroy(*surface);
    return img;
}

attn::Status writePngRgba(const std::string& path, const RgbaImage& img)
{
    if (img.width <= 0 || img.height <= 0 || img.pixels.size() != std::size_t(img.width) * std::size_t(img.height) * 4)
        return attn::invalidArgument(path + ": image of " + std::to_string(img.width) + "×" + std::to_string(img.height) +
                                     " needs " + std::to_string(std::size_t(std::max(img.width, 0)) * std::size_t(std::max(img.height, 0)) * 4) +
                                     " bytes of RGBA, got " + std::to_string(img.pixels.size()));
    cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, img.width, img.height);
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surface);
        return attn::makeError(attn::StatusCode::Internal, path + ": cannot allocate a " + std::to_string(img.width) + "×" +
                                                               std::to_string(img.height) + " image");
    }
    cairo_surface_flush(surface);
    unsigned char* data = cairo_image_surface_get_data(surface);
    const int stride = cairo_image_surface_get_stride(surface);
    for (int y = 0; y < img.height; ++y)
        for (int x = 0; x < img.width; ++x) {
            const std::uint8_t* p = &img.pixels[(std::size_t(y) * std::size_t(img.width) + std::size_t(x)) * 4];
            // Cairo wants premultiplied alpha (exact for the opaque pixels of a window).
            auto pre = [&](std::uint8_t c) { return std::uint32_t((unsigned(c) * p[3] + 127) / 255); };
            const std::uint32_t px = std::uint32_t(p[3]) << 24 | pre(p[0]) << 16 | pre(p[1]) << 8 | pre(p[2]);
            std::memcpy(data + std::size_t(y) * std::size_t(stride) + std::size_t(x) * 4, &px, 4);
        }
    cairo_surface_mark_dirty(surface);
    std::string out;
    const cairo_status_t st = cairo_surface_write_to_png_stream(surface, appendToString, &out);
    cairo_surface_destroy(surface);
    if (st != CAIRO_STATUS_SUCCESS)
        return attn::makeError(attn::StatusCode::Internal, path + ": PNG encoding failed: " + cairo_status_to_string(st));
    return attn::writeFileAtomic(path, out);
}

} // namespace app::fig
