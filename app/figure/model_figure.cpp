// Model figures: see model_figure.h.
#include "figure/model_figure.h"

#include "figure/painter.h"

#include <attnscope/colormap.h>

#include <cairo-pdf.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace app::fig {

namespace {

attn::Status checkLayerHead(const RunView& run, int layer, int head)
{
    const int L = run.maps().layers();
    if (layer < 0 || layer >= L)
        return attn::invalidArgument("--layer " + std::to_string(layer) + ": the model has " + std::to_string(L) +
                                     " layers (0.." + std::to_string(L - 1) + ")");
    const int H = run.maps().heads();
    if (head < 0 || head >= H)
        return attn::invalidArgument("--head " + std::to_string(head) + ": the model has " + std::to_string(H) +
                                     " heads (0.." + std::to_string(H - 1) + ")");
    return {};
}

bool isAblated(const RunView& run, int l, int h) { return run.isAblated(l, h); }

// The model view's thumbnails, as in the window's grid (view/model_grid.h): a head of more than
// kModelViewCells tokens is drawn max-pooled to that many cells (each cell the largest weight of its block), so
// that a 512-token text gives a readable figure of sane size instead of 72 maps of 512² cells (25107×12710 px at
// scale 2, over the 100-megapixel limit). Labels then name each block's token indices ("8–15").
constexpr int kModelViewCells = 64;
// One head's figure pools past 1024 cells a side (a bundle of 4096 tokens: a 1024² image, 16 tokens a cell).
constexpr int kHeadFigureCells = 1024;

// A head's weights, or past `maxCells` a side their max-pooled overview (labels then name each block's token indices).
attn::Expected<Heatmap> headHeatmap(const RunView& run, int l, int h, bool small, int maxCells)
{
    Heatmap hm;
    const attn::AttentionMaps& maps = run.maps();
    const int T = maps.queries(), S = maps.keys();
    const bool pool = T > maxCells || S > maxCells;
    if (pool)
        ATTNSCOPE_RETURN_IF_ERROR(maps.pooled(attn::MapKind::Weights, l, h, attn::MapRect{0, 0, T, S}, maxCells, maxCells, hm.values));
    else
        ATTNSCOPE_RETURN_IF_ERROR(maps.whole(attn::MapKind::Weights, l, h, hm.values));
    if (small) {
        // Formatted, then moved in: GCC 12 reports a false -Wrestrict for string assign/insert of a literal here
        // (GCC bug 105329).
        char buf[64];
        std::snprintf(buf, sizeof buf, "L%d H%d%s", l, h, isAblated(run, l, h) ? " (off)" : "");
        hm.title = std::string(buf);
    }
    if (pool) {
        auto blocks = [](int n, Eigen::Index cells) {
            std::vector<std::string> out;
            for (Eigen::Index b = 0; b < cells; ++b)
                out.push_back(std::to_string(b * n / cells) + "–" + std::to_string((b + 1) * n / cells - 1));
            return out;
        };
        hm.rowLabels = blocks(T, hm.values.rows());
        hm.colLabels = blocks(S, hm.values.cols());
    } else {
        hm.rowLabels = run.tokens;
        hm.colLabels = run.keyTokens;
        hm.rowLabelsAreTokens = hm.colLabelsAreTokens = true;
    }
    if (!small) {
        hm.rowAxis = "query";
        hm.colAxis = "key";
    }
    hm.cmap = attn::Colormap::Viridis;
    hm.range = {0.0f, 1.0f, 0};  // weights are probabilities: one fixed scale makes heads comparable
    return hm;
}

} // namespace

Figure buildLayerHeadFigure(const LayerHeadMap& map)
{
    Figure f;
    f.title = map.title;
    f.subtitle = map.subtitle;
    Heatmap h;
    h.values = map.values;
    for (Eigen::Index l = 0; l < map.values.rows(); ++l) h.rowLabels.push_back("L" + std::to_string(l));
    h.colLabels = map.colLabels;
    for (Eigen::Index c = Eigen::Index(h.colLabels.size()); c < map.values.cols(); ++c) h.colLabels.push_back("H" + std::to_string(c));
    h.rowAxis = "layer";
    h.colAxis = "head";
    h.cmap = map.cmap;
    h.range = map.range;
    f.panels.push_back(std::move(h));
    f.colorbarLabel = map.colorbarLabel;
    f.annotate = true;
    return f;
}

LayerHeadMap signedMap(attn::Matrix values)
{
    LayerHeadMap m;
    m.range = attn::displayRange(values, nullptr, true);
    m.values = std::move(values);
    m.cmap = attn::Colormap::RdBu;
    return m;
}

Figure buildQkFigure(const std::string& modelName, const attn::QkCell& cell, const std::string& queryToken,
                     const std::string& keyToken, int expandTop)
{
    std::vector<int> expanded;
    for (const attn::Vector* side : {&cell.keyComponents, &cell.queryComponents})
        for (int c : attn::strongestQkComponents(*side, expandTop)) {
            const int l = attn::qkComponentLayer(cell.components[static_cast<std::size_t>(c)]);
            if (l >= 0 && l < cell.layer && std::find(expanded.begin(), expanded.end(), l) == expanded.end()) expanded.push_back(l);
        }
    std::sort(expanded.begin(), expanded.end());
    const attn::QkGroups g = attn::groupQkByLayer(cell, expanded);
    Figure f;
    char line[256];
    std::snprintf(line, sizeof line, "%s: why L%d.H%d attends from query %d '%s' to key %d '%s'", modelName.c_str(), cell.layer,
                  cell.head, cell.query, clipLabel(queryToken, kMaxLabelChars).c_str(), cell.key,
                  clipLabel(keyToken, kMaxLabelChars).c_str());
    f.title = clipLabel(line, kMaxTitleChars);
    if (cell.softcap > 0)  // the soft-cap is not linear: the parts sum to the score before it
        std::snprintf(line, sizeof line,
                      "score before the soft-cap %.3f (capped %.3f, weight %.4f) = the sum of either side; earlier layers "
                      "summed, those of the strongest components head by head", cell.score, cell.cappedScore, cell.weight);
    else
        std::snprintf(line, sizeof line,
                      "score %.3f (weight %.4f) = the sum of either side; earlier layers summed, those of the strongest "
                      "components head by head", cell.score, cell.weight);
    f.subtitle = line;
    f.columns = 3;
    f.sharedAxes = true;
    // Each panel its own range: the sides' few large parts (13 of a score of 9) would wash out the matrix's.
    f.sharedColorbar = false;
    f.annotate = true;
    auto panel = [&](const char* title, attn::Matrix values, std::vector<std::string> cols, const char* colAxis) {
        Heatmap h;
        h.title = title;
        h.range = attn::displayRange(values, nullptr, true);
        h.values = std::move(values);
        h.rowLabels = g.names;
        h.colLabels = std::move(cols);
        h.rowLabelsAreTokens = h.colLabelsAreTokens = true;  // every name shown, none thinned
        h.rowAxis = "component";
        h.colAxis = colAxis;
        h.cmap = attn::Colormap::RdBu;
        h.colorbarLabel = "share of the score";
        f.panels.push_back(std::move(h));
    };
    panel("query side", attn::Matrix(g.queryComponents), {"q"}, "");
    panel("query side \u00d7 key side", g.matrix, g.names, "key side");
    panel("key side", attn::Matrix(g.keyComponents), {"k"}, "");
    return f;
}

LayerHeadMap fractionMap(attn::Matrix values)
{
    LayerHeadMap m = signedMap(std::move(values));
    m.range = {std::min(-1.0f, m.range.lo), std::max(1.0f, m.range.hi), 0};
    return m;
}

LayerHeadMap attributionMap(const attn::DirectLogitAttribution& d)
{
    const Eigen::Index L = d.heads.rows(), H = d.heads.cols();
    const bool bias = d.attnBias.size() == L && L > 0 && d.attnBias.cwiseAbs().maxCoeff() > 0;
    attn::Matrix table(L, H + 1 + (bias ? 1 : 0));
    table.leftCols(H) = d.heads;
    table.col(H) = d.mlp;
    if (bias) table.col(H + 1) = d.attnBias;
    LayerHeadMap m = signedMap(std::move(table));
    for (Eigen::Index h = 0; h < H; ++h) m.colLabels.push_back("H" + std::to_string(h));
    m.colLabels.push_back("MLP");
    if (bias) m.colLabels.push_back("b^O");
    return m;
}

attn::Expected<Figure> buildModelFigure(const std::string& modelName, const RunView& run,
                                        const ModelFigureOptions& opt)
{
    Figure f;
    f.colorbarLabel = "attention weight";
    if (opt.kind == ModelFigureKind::ModelView) {
        const int L = run.maps().layers(), H = run.maps().heads();
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < H; ++h) {
                attn::Expected<Heatmap> hm = headHeatmap(run, l, h, true, kModelViewCells);
                if (!hm) return hm.status();
                f.panels.push_back(std::move(*hm));
            }
        f.columns = std::max(1, H);
        f.sharedAxes = true;  // token labels on the outer edges only
        const bool pooled = run.maps().queries() > kModelViewCells || run.maps().keys() > kModelViewCells;
        f.title = opt.title.value_or(modelName + ": attention of every layer (rows) × head (columns)" +
                                     (pooled ? std::string(", each cell the largest weight of a block of tokens") : std::string()));
        return f;
    }
    ATTNSCOPE_RETURN_IF_ERROR(checkLayerHead(run, opt.layer, opt.head));
    attn::Expected<Heatmap> hm = headHeatmap(run, opt.layer, opt.head, false, kHeadFigureCells);
    if (!hm) return hm.status();
    f.panels.push_back(std::move(*hm));
    f.title = opt.title.value_or(modelName + ": layer " + std::to_string(opt.layer) + ", head " + std::to_string(opt.head) +
                                 (isAblated(run, opt.layer, opt.head) ? " (ablated)" : ""));
    return f;
}

// ---- Lines view -------------------------------------------------------------------------------------------

namespace {

struct LinesLayout {
    double width = 0, height = 0, top = 0, row = 14, leftX = 0, rightX = 0, labelWidth = 0;
};

constexpr double kLabelSize = 9.0;
constexpr attn::Rgb8 kLineColor{31, 100, 200};

LinesLayout layoutLines(const RunView& run, const std::string& title)
{
    LinesLayout L;
    for (const std::string& t : run.tokens) L.labelWidth = std::max(L.labelWidth, measureText({{t, 0}}, {kLabelSize}).width);
    for (const std::string& t : run.keyTokens)
        L.labelWidth = std::max(L.labelWidth, measureText({{t, 0}}, {kLabelSize}).width);
    const double titleWidth = title.empty() ? 0 : measureText({{title, 0}}, {10.0, true}).width;
    const double body = 2 * (L.labelWidth + 6) + 140;
    L.width = std::max(body, titleWidth) + 24;
    L.top = (title.empty() ? 12 : 34) + 16;  // title, then the "query" / "key" column headings
    L.leftX = (L.width - body) / 2 + L.labelWidth + 6;
    L.rightX = L.leftX + 140;
    L.height = L.top + L.row * double(std::max(run.tokens.size(), run.keyTokens.size())) + 12;
    return L;
}

void drawLines(Painter& p, const RunView& run, const attn::Matrix& w, const std::string& title, const LinesLayout& L)
{
    p.fillRect(0, 0, L.width, L.height, {255, 255, 255});
    if (!title.empty()) p.text({{title, 0}}, {10.0, true}, L.width / 2, 10, HAlign::Center, VAlign::Top);
    const TextStyle heading{8.0, false, {110, 110, 110}};
    p.text({{"query", 0}}, heading, L.leftX - 6, L.top - 4, HAlign::Right, VAlign::Bottom);
    p.text({{"key", 0}}, heading, L.rightX + 6, L.top - 4, HAlign::Left, VAlign::Bottom);
    auto y = [&](Eigen::Index i) { return L.top + L.row * (double(i) + 0.5); };
    // Faint lines first so strong ones stay on top; the colour is blended towards white by the weight
    // (opacity = weight, over the white background), which every back end draws the same way.
    std::vector<std::pair<float, std::pair<Eigen::Index, Eigen::Index>>> order;
    for (Eigen::Index i = 0; i < w.rows(); ++i)
        for (Eigen::Index j = 0; j < w.cols(); ++j)
            if (w(i, j) > 0.01f) order.push_back({w(i, j), {i, j}});  // < 1 % is invisible at this opacity
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [v, ij] : order) {
        const float a = std::clamp(v, 0.0f, 1.0f);
        const attn::Rgb8 c{std::uint8_t(255 - a * (255 - kLineColor.r)), std::uint8_t(255 - a * (255 - kLineColor.g)),
                           std::uint8_t(255 - a * (255 - kLineColor.b))};
        p.line(L.leftX, y(ij.first), L.rightX, y(ij.second), c, 0.6 + 1.6 * a);
    }
    for (std::size_t i = 0; i < run.tokens.size(); ++i)
        p.text({{run.tokens[i], 0}}, {kLabelSize}, L.leftX - 6, y(Eigen::Index(i)), HAlign::Right, VAlign::Middle);
    for (std::size_t j = 0; j < run.keyTokens.size(); ++j)
        p.text({{run.keyTokens[j], 0}}, {kLabelSize}, L.rightX + 6, y(Eigen::Index(j)), HAlign::Left, VAlign::Middle);
}

cairo_status_t appendBytes(void* closure, const unsigned char* data, unsigned int length)
{
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
}

} // namespace

namespace {

// Draws `draw` on a page of width × height points as PNG (scaled), SVG or PDF bytes.
attn::Expected<std::string> renderPainted(double width, double height, FigureFormat format, double scale, const char* what,
                                          const std::function<void(Painter&)>& draw)
{
    if (format == FigureFormat::Svg) {
        SvgPainter p(width, height);
        draw(p);
        return p.finish();
    }
    std::string out;
    cairo_surface_t* surface = nullptr;
    if (format == FigureFormat::Pdf) {
        surface = cairo_pdf_surface_create_for_stream(appendBytes, &out, width, height);
    } else {
        if (!(scale >= kMinScale && scale <= kMaxScale) || width * height * scale * scale > kMaxPixels)
            return attn::invalidArgument("scale: expected a value in [0.25, 16] giving at most 100 megapixels");
        surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, int(std::ceil(width * scale)), int(std::ceil(height * scale)));
    }
    cairo_t* cr = cairo_create(surface);
    if (format == FigureFormat::Png) cairo_scale(cr, scale, scale);
    CairoPainter painter(cr);
    draw(painter);
    cairo_destroy(cr);
    cairo_status_t st = CAIRO_STATUS_SUCCESS;
    if (format == FigureFormat::Pdf) cairo_surface_finish(surface);
    else st = cairo_surface_write_to_png_stream(surface, appendBytes, &out);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (st != CAIRO_STATUS_SUCCESS)
        return attn::makeError(attn::StatusCode::Internal, std::string(what) + ": " + cairo_status_to_string(st));
    return out;
}

// A token as a label: its spaces and line breaks visible.
std::string visibleToken(const std::string& t)
{
    std::string out = "'";
    for (char c : t) out += c == '\n' ? std::string("\u21b5") : std::string(1, c);
    return out + "'";
}

} // namespace

attn::Expected<std::string> renderLinesFigure(const std::string& modelName, const RunView& run,
                                              const ModelFigureOptions& opt, FigureFormat format, double scale)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkLayerHead(run, opt.layer, opt.head));
    const int n = std::max(run.maps().queries(), run.maps().keys());
    if (n > kMaxLinesTokens)
        return attn::invalidArgument("the lines view draws at most " + std::to_string(kMaxLinesTokens) + " tokens, these maps have " +
                                     std::to_string(n) + ": draw the head's map instead (--panel weights)");
    attn::Matrix w;
    ATTNSCOPE_RETURN_IF_ERROR(run.maps().whole(attn::MapKind::Weights, opt.layer, opt.head, w));
    const std::string title = opt.title.value_or(modelName + ": layer " + std::to_string(opt.layer) + ", head " +
                                                 std::to_string(opt.head) + " (query → key)");
    const LinesLayout L = layoutLines(run, title);
    return renderPainted(L.width, L.height, format, scale, "lines figure",
                         [&](Painter& p) { drawLines(p, run, w, title, L); });
}

attn::Expected<std::string> renderNextFigure(const std::string& title, const std::vector<NextTokenBar>& bars,
                                             FigureFormat format, double scale)
{
    if (bars.empty()) return attn::invalidArgument("next-token figure: no predictions");
    const TextStyle label{kLabelSize};
    double labelW = 0;
    for (const NextTokenBar& b : bars) labelW = std::max(labelW, measureText({{visibleToken(b.token), 0}}, label).width);
    const double barMax = 220, row = 16, top = title.empty() ? 12 : 34;
    const double titleW = title.empty() ? 0 : measureText({{title, 0}}, {10.0, true}).width;
    const double width = std::max(labelW + barMax + 70, titleW) + 24, height = top + row * double(bars.size()) + 12;
    const double x0 = (width - (labelW + barMax + 70)) / 2 + labelW + 6;
    return renderPainted(width, height, format, scale, "next-token figure", [&](Painter& p) {
        p.fillRect(0, 0, width, height, {255, 255, 255});
        if (!title.empty()) p.text({{title, 0}}, {10.0, true}, width / 2, 10, HAlign::Center, VAlign::Top);
        for (std::size_t i = 0; i < bars.size(); ++i) {
            const double y = top + row * double(i);
            const float pr = std::clamp(bars[i].p, 0.0f, 1.0f);
            p.text({{visibleToken(bars[i].token), 0}}, label, x0 - 6, y + row / 2, HAlign::Right, VAlign::Middle);
            p.fillRect(x0, y + 2, barMax, row - 4, {236, 238, 242});
            p.fillRect(x0, y + 2, barMax * pr, row - 4, kLineColor);
            p.text({{attn::formatValue(bars[i].p, 3), 0}}, label, x0 + barMax + 6, y + row / 2, HAlign::Left, VAlign::Middle);
        }
    });
}

} // namespace app::fig
