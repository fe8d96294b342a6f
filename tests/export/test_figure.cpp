// Figures: every preset rendered to PNG, SVG and PDF and checked — PNG size and colormap colours at the cell
// centres, token labels as real text in SVG and PDF, PDF rasterised by pdftoppm matching the PNG.
#include "figure/figure.h"
#include "figure/figure_render.h"
#include "lessons/lesson_figure.h"
#include "view/heatmap_description.h"

#include <attnscope/attention.h>
#include <attnscope/colormap.h>
#include <attnscope/preset_io.h>

#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using namespace app::fig;

const char* const kPresets[] = {"seed000_worked_example", "seed004_translation_cross", "causal_decoder_2heads",
                                "seed003_block_identity_heads", "seed004_valid_lens"};

struct Loaded {
    attn::Session s;
    attn::AttentionResult r;
};

Loaded load(const std::string& preset)
{
    attn::Expected<attn::Session> s = attn::loadSession(std::string(ATTNSCOPE_SOURCE_DIR "/assets/presets/") + preset + ".json");
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.status().message);
    attn::Expected<attn::AttentionResult> r = attn::compute(s->input, s->config);
    EXPECT_TRUE(r.ok());
    return {*s, *r};
}

struct Image {
    int w = 0, h = 0;
    std::vector<std::uint32_t> px;  // cairo ARGB32 words (opaque figures: alpha 255)
    attn::Rgb8 at(double x, double y) const
    {
        const std::uint32_t v = px[std::size_t(int(y)) * std::size_t(w) + std::size_t(int(x))];
        return {std::uint8_t(v >> 16), std::uint8_t(v >> 8), std::uint8_t(v)};
    }
};

cairo_status_t readFromString(void* closure, unsigned char* data, unsigned int length)
{
    auto* src = static_cast<std::pair<const std::string*, std::size_t>*>(closure);
    if (src->second + length > src->first->size()) return CAIRO_STATUS_READ_ERROR;
    std::memcpy(data, src->first->data() + src->second, length);
    src->second += length;
    return CAIRO_STATUS_SUCCESS;
}

Image decodePng(const std::string& bytes)
{
    std::pair<const std::string*, std::size_t> src{&bytes, 0};
    cairo_surface_t* s = cairo_image_surface_create_from_png_stream(readFromString, &src);
    Image img;
    if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
        img.w = cairo_image_surface_get_width(s);
        img.h = cairo_image_surface_get_height(s);
        const int stride = cairo_image_surface_get_stride(s);
        const unsigned char* d = cairo_image_surface_get_data(s);
        img.px.resize(std::size_t(img.w) * std::size_t(img.h));
        for (int y = 0; y < img.h; ++y) std::memcpy(&img.px[std::size_t(y) * std::size_t(img.w)], d + std::size_t(y) * std::size_t(stride), std::size_t(img.w) * 4);
    }
    cairo_surface_destroy(s);
    return img;
}

int maxChannelDiff(attn::Rgb8 a, attn::Rgb8 b)
{
    return std::max({std::abs(a.r - b.r), std::abs(a.g - b.g), std::abs(a.b - b.b)});
}

// Every cell shows its colormap colour (unmasked) or the masked grey/hatch (masked), sampled at the
// horizontal centre and 15 % down from the top: away from the cell edges and from annotation text.
::testing::AssertionResult cellsMatch(const Figure& f, const FigureLayout& l, const Image& img, double scale, int tolerance)
{
    for (std::size_t p = 0; p < f.panels.size(); ++p) {
        const Heatmap& h = f.panels[p];
        const PanelLayout& pl = l.panels[p];
        for (Eigen::Index i = 0; i < h.values.rows(); ++i)
            for (Eigen::Index j = 0; j < h.values.cols(); ++j) {
                const double x = (pl.heatmap.x + (double(j) + 0.5) * pl.cell) * scale;
                const double y = (pl.heatmap.y + (double(i) + 0.15) * pl.cell) * scale;
                const attn::Rgb8 got = img.at(x, y);
                const bool masked = h.masked.size() > 0 && h.masked(i, j);
                if (masked) {
                    // Grey (r = g = b) between the masked fill (150) and the hatch lines (205), antialiased.
                    if (std::abs(got.r - got.g) > 2 || std::abs(got.g - got.b) > 2 || got.r < 148 || got.r > 207)
                        return ::testing::AssertionFailure() << "panel " << p << " masked cell (" << i << "," << j
                                                             << ") is rgb(" << int(got.r) << "," << int(got.g) << ","
                                                             << int(got.b) << "), expected grey hatching";
                    continue;
                }
                const attn::Rgb8 want = attn::colormapColor(h.cmap, attn::normalize(h.values(i, j), h.range));
                if (maxChannelDiff(got, want) > tolerance)
                    return ::testing::AssertionFailure()
                           << "panel " << p << " cell (" << i << "," << j << ") = " << h.values(i, j) << ": rgb("
                           << int(got.r) << "," << int(got.g) << "," << int(got.b) << "), expected rgb(" << int(want.r)
                           << "," << int(want.g) << "," << int(want.b) << ")";
            }
    }
    return ::testing::AssertionSuccess();
}

class FigurePreset : public ::testing::TestWithParam<const char*> {};

TEST_P(FigurePreset, PngHasTheLayoutSizeAndColormapColours)
{
    const Loaded L = load(GetParam());
    for (PanelKind kind : {PanelKind::Weights, PanelKind::Scores, PanelKind::Output}) {
        FigureOptions o;
        o.panel = kind;
        attn::Expected<Figure> f = buildFigure(L.s, L.r, o);
        ASSERT_TRUE(f.ok()) << f.status().message;
        const FigureLayout l = layoutFigure(*f);
        const double scale = 2.0;
        attn::Expected<std::string> png = renderFigure(*f, FigureFormat::Png, scale);
        ASSERT_TRUE(png.ok()) << png.status().message;
        const Image img = decodePng(*png);
        EXPECT_EQ(img.w, int(std::ceil(l.width * scale)));
        EXPECT_EQ(img.h, int(std::ceil(l.height * scale)));
        // The sample points are far from any edge, so they are drawn exactly: 0 difference expected, 1
        // allowed for rounding in cairo's colour conversion.
        EXPECT_TRUE(cellsMatch(*f, l, img, scale, 1)) << toString(kind);
    }
}

TEST_P(FigurePreset, SvgHasTokenLabelsAsText)
{
    const Loaded L = load(GetParam());
    attn::Expected<Figure> f = buildFigure(L.s, L.r, {});
    ASSERT_TRUE(f.ok());
    attn::Expected<std::string> svg = renderFigure(*f, FigureFormat::Svg, 1.0);
    ASSERT_TRUE(svg.ok());
    EXPECT_EQ(svg->rfind("<?xml", 0), 0u);
    for (const std::string& t : f->panels.front().rowLabels) {
        std::string esc;
        for (char c : t) esc += c == '<' ? std::string("&lt;") : c == '>' ? std::string("&gt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
        EXPECT_NE(svg->find(">" + esc + "</text>"), std::string::npos) << "label " << t;
    }
}

TEST_P(FigurePreset, PdfRasterisedMatchesThePng)
{
    if (std::system("pdftoppm -v > /dev/null 2>&1") != 0) GTEST_SKIP() << "pdftoppm (poppler-utils) not installed";
    const Loaded L = load(GetParam());
    FigureOptions o;
    o.annotate = true;
    attn::Expected<Figure> f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok());
    const fs::path dir = fs::temp_directory_path() / ("attnscope_fig_" + std::to_string(::getpid()) + GetParam());
    fs::create_directories(dir);
    ASSERT_TRUE(writeFigure(*f, (dir / "f.pdf").string(), FigureFormat::Pdf, 1.0).ok());
    // 144 dpi = scale 2 (72 pt per inch).
    const std::string cmd = "pdftoppm -r 144 -png -singlefile '" + (dir / "f.pdf").string() + "' '" + (dir / "r").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(dir / "r.png", std::ios::binary);
    const Image fromPdf = decodePng({std::istreambuf_iterator<char>(in), {}});
    attn::Expected<std::string> png = renderFigure(*f, FigureFormat::Png, 2.0);
    ASSERT_TRUE(png.ok());
    const Image direct = decodePng(*png);
    // pdftoppm rounds the page size to whole pixels independently of our ceil().
    ASSERT_LE(std::abs(fromPdf.w - direct.w), 1);
    ASSERT_LE(std::abs(fromPdf.h - direct.h), 1);
    const FigureLayout l = layoutFigure(*f);
    // Flat cell colours must agree exactly (±2 for colour rounding in poppler vs cairo).
    EXPECT_TRUE(cellsMatch(*f, l, fromPdf, 2.0, 2));
    // Text differs per pixel: cairo's image surface rounds glyph positions to whole pixels, poppler does
    // not. So compare 8×8-pixel block averages. Measured on the presets: mean 1.1–1.4, max 18–22 (glyph
    // edges); a 1-pixel shift of the whole page or a wrong colour makes the mean several times larger.
    constexpr int kBlock = 8;
    const int bw = std::min(fromPdf.w, direct.w) / kBlock, bh = std::min(fromPdf.h, direct.h) / kBlock;
    double sum = 0, worst = 0;
    for (int by = 0; by < bh; ++by)
        for (int bx = 0; bx < bw; ++bx) {
            double d[3] = {0, 0, 0};
            for (int y = by * kBlock; y < (by + 1) * kBlock; ++y)
                for (int x = bx * kBlock; x < (bx + 1) * kBlock; ++x) {
                    const attn::Rgb8 p = fromPdf.at(x, y), q = direct.at(x, y);
                    d[0] += p.r - q.r;
                    d[1] += p.g - q.g;
                    d[2] += p.b - q.b;
                }
            const double m = std::max({std::fabs(d[0]), std::fabs(d[1]), std::fabs(d[2])}) / (kBlock * kBlock);
            sum += m;
            worst = std::max(worst, m);
        }
    EXPECT_LT(sum / (double(bw) * bh), 2.5) << "mean block difference between PDF and PNG";
    EXPECT_LT(worst, 40.0) << "worst block difference between PDF and PNG";
    if (std::system("pdftotext -v > /dev/null 2>&1") == 0 && !L.s.queryTokens.empty()) {
        const std::string t = "pdftotext '" + (dir / "f.pdf").string() + "' '" + (dir / "f.txt").string() + "'";
        ASSERT_EQ(std::system(t.c_str()), 0);
        std::ifstream txt(dir / "f.txt");
        const std::string text{std::istreambuf_iterator<char>(txt), {}};
        EXPECT_NE(text.find(L.s.queryTokens.back()), std::string::npos) << "PDF text is not selectable: " << text;
    }
    fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Presets, FigurePreset, ::testing::ValuesIn(kPresets));

TEST(Figure, ChainAndGridLayouts)
{
    const Loaded L = load("causal_decoder_2heads");
    FigureOptions o;
    o.panel = PanelKind::Chain;
    attn::Expected<Figure> f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->panels.size(), 7u);  // X, Q, K, V, scores, weights, output
    EXPECT_FALSE(f->sharedColorbar);
    const FigureLayout l = layoutFigure(*f);
    for (const PanelLayout& p : l.panels) EXPECT_GT(p.colorbar.w, 0);
    o.panel = PanelKind::Weights;
    o.sharedRange = true;
    f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok());
    ASSERT_EQ(f->panels.size(), 2u);
    EXPECT_EQ(f->panels[0].range.lo, f->panels[1].range.lo);
    EXPECT_EQ(f->panels[0].range.hi, f->panels[1].range.hi);
    EXPECT_GT(layoutFigure(*f).colorbar.w, 0);
}

// Figures draw the weights as the window does (view::drawnRange): over 0…1 by default, over the data's own
// range when the session's view says "weights_range": "auto"; other maps keep their data's range.
TEST(Figure, WeightsRangeFollowsTheWindowsView)
{
    const Loaded L = load("seed004_translation_cross");
    FigureOptions o;
    o.panel = PanelKind::Weights;
    attn::Expected<Figure> f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->panels[0].range.lo, 0.0f);
    EXPECT_EQ(f->panels[0].range.hi, 1.0f);
    o.fixedWeightsRange = false;
    f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok());
    const float hi = f->panels[0].values.maxCoeff();
    EXPECT_FLOAT_EQ(f->panels[0].range.hi, hi) << "auto: the weights' own maximum";
    EXPECT_LT(hi, 1.0f);
    o.panel = PanelKind::Scores;
    o.fixedWeightsRange = true;
    f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok());
    EXPECT_GT(f->panels[0].range.hi - f->panels[0].range.lo, 1.0f) << "scores keep their data's range";

    EXPECT_TRUE(app::view::viewFixesWeightsRange("{}"));
    EXPECT_TRUE(app::view::viewFixesWeightsRange("{\"weights_range\": \"fixed\"}"));
    EXPECT_FALSE(app::view::viewFixesWeightsRange("{\"weights_range\": \"auto\"}"));
    EXPECT_FALSE(app::view::viewFixesWeightsRange("{\"weights_range\": \"locked\"}"));
    EXPECT_TRUE(app::view::viewFixesWeightsRange("not json")) << "a malformed view keeps the default";
}

// Issue 36: past attn::kLogScaleKeys keys the weights are coloured on a log scale, in figures as in the window,
// and the colorbar says so; the view's "weights_scale" chooses (row max: each query over its largest).
TEST(Figure, WeightsScaleFollowsTheWindowsView)
{
    Loaded L = load("seed004_translation_cross");
    FigureOptions o;
    o.panel = PanelKind::Weights;
    attn::Expected<Figure> f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->panels[0].range.scale, attn::ColorScale::Linear) << "a few keys: the fixed 0…1 scale";

    attn::Session big;
    big.input.X = attn::Matrix::Random(200, 4);
    big.input.Wq = big.input.Wk = big.input.Wv = attn::Matrix::Random(4, 4);
    attn::Expected<attn::AttentionResult> r = attn::compute(big.input, big.config);
    ASSERT_TRUE(r.ok());
    f = buildFigure(big, *r, o);
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->panels[0].range.scale, attn::ColorScale::Log) << "200 keys: log by default";
    EXPECT_FLOAT_EQ(f->panels[0].range.lo, attn::kLogWeightsLo);
    EXPECT_NE(f->colorbarLabel.find("log"), std::string::npos) << f->colorbarLabel;
    EXPECT_GT(layoutFigure(*f).colorbar.w, 0);

    o.weightsScale = attn::WeightsScale::RowMax;
    f = buildFigure(big, *r, o);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->panels[0].range.scale, attn::ColorScale::Linear);
    for (Eigen::Index q = 0; q < f->panels[0].values.rows(); ++q)
        EXPECT_FLOAT_EQ(f->panels[0].values.row(q).maxCoeff(), 1.0f) << "query " << q;

    EXPECT_EQ(app::view::viewWeightsScale("{}"), attn::WeightsScale::Auto);
    EXPECT_EQ(app::view::viewWeightsScale("{\"weights_scale\": \"log\"}"), attn::WeightsScale::Log);
    EXPECT_EQ(app::view::viewWeightsScale("{\"weights_scale\": \"row_max\"}"), attn::WeightsScale::RowMax);
    EXPECT_EQ(app::view::viewWeightsScale("{\"weights_scale\": 3}"), attn::WeightsScale::Auto);
}

TEST(Figure, BadRequestsGiveClearMessages)
{
    const Loaded L = load("causal_decoder_2heads");
    FigureOptions o;
    o.head = 2;
    EXPECT_EQ(buildFigure(L.s, L.r, o).status().message, "head 2: the session has 2 heads (0..1)");
    o.head = 0;
    o.panel = PanelKind::Xkv;
    EXPECT_EQ(buildFigure(L.s, L.r, o).status().message, "panel xkv: the session is not in cross mode");
    o.panel = PanelKind::Weights;
    attn::Expected<Figure> f = buildFigure(L.s, L.r, o);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(renderFigure(*f, FigureFormat::Png, 100).status().message, "scale: expected a value in [0.25, 16], got 100");
    const attn::Status st = writeFigure(*f, "/no/such/dir/f.pdf", FigureFormat::Pdf, 1);
    EXPECT_EQ(st.code, attn::StatusCode::IoError);
    EXPECT_NE(st.message.find("/no/such/dir/f.pdf: cannot write"), std::string::npos) << st.message;
}

// ---- Lesson figures --------------------------------------------------------------------------------------

Figure lessonFigure(const Loaded& L, app::LessonId lesson, int query = 0, int key = 0)
{
    LessonFigureOptions o;
    o.lesson = lesson;
    o.query = query;
    o.key = key;
    attn::Expected<Figure> f = buildLessonFigure(L.s, L.r, o);
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.status().message);
    return f.ok() ? *f : Figure{};
}

// Seed 000's worked example: o_1 = Σ_j â_1j·v_j is the first row of its output, and the figure shows both.
TEST(LessonFigure, VectorViewShowsTheWorkedExamplesFirstRow)
{
    const Loaded L = load("seed000_worked_example");
    const Figure f = lessonFigure(L, app::LessonId::VectorView);
    ASSERT_EQ(f.panels.size(), 5u);  // scores, weights, â·v, o_i, matrix row
    const attn::Matrix& sum = f.panels[3].values;
    ASSERT_EQ(sum.rows(), 1);
    ASSERT_EQ(sum.cols(), 3);
    const float expected[] = {3.9492f, 7.8588f, 3.9577f};
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(sum(0, c), expected[c], 5e-4f);
    // Float rounding only between the vector sum (double) and core's matrix product.
    EXPECT_LT((f.panels[3].values - f.panels[4].values).cwiseAbs().maxCoeff(), 1e-5f);
    EXPECT_NEAR(f.panels[1].values.sum(), 1.0f, 1e-6f) << "the weights of one query sum to 1";
    EXPECT_EQ(f.panels[1].colLabels, L.s.queryTokens) << "keys labelled with the tokens";
}

TEST(LessonFigure, TwoFormulasAreTransposesAndTheWrongAxisSumsOverQueries)
{
    const Loaded L = load("seed000_worked_example");
    const Figure f = lessonFigure(L, app::LessonId::TwoFormulas);
    ASSERT_EQ(f.panels.size(), 4u);
    const attn::Matrix rowOut = f.panels[0].values, colOut = f.panels[1].values;
    ASSERT_EQ(rowOut.rows(), colOut.cols());
    EXPECT_LT((rowOut - colOut.transpose()).cwiseAbs().maxCoeff(), 1e-5f);
    // Row layout: the right weights sum to 1 along each row (over keys), the wrong ones along each column.
    const attn::Matrix right = f.panels[2].values, wrong = f.panels[3].values;
    for (Eigen::Index i = 0; i < right.rows(); ++i) EXPECT_NEAR(right.row(i).sum(), 1.0f, 1e-5f);
    for (Eigen::Index j = 0; j < wrong.cols(); ++j) EXPECT_NEAR(wrong.col(j).sum(), 1.0f, 1e-5f);
    EXPECT_GT((right - wrong).cwiseAbs().maxCoeff(), 0.1f) << "the wrong axis changes the weights";
}

TEST(LessonFigure, HeadContributionsAddUpToTheOutput)
{
    const Loaded L = load("lesson_heads_one_vs_many");
    const Figure f = lessonFigure(L, app::LessonId::Heads);
    const std::size_t H = L.r.heads.size();
    ASSERT_GT(H, 1u);
    ASSERT_EQ(f.panels.size(), H + 1);
    attn::Matrix sum = attn::Matrix::Zero(f.panels[0].values.rows(), f.panels[0].values.cols());
    for (std::size_t h = 0; h < H; ++h) sum += f.panels[h].values;
    EXPECT_LT((sum - f.panels[H].values).cwiseAbs().maxCoeff(), 1e-4f);
    EXPECT_TRUE(f.sharedColorbar) << "one scale, so the heads' shares compare";
}

TEST(LessonFigure, AdditiveTermsSumToTheScore)
{
    const Loaded L = load("lesson_additive");
    const Figure f = lessonFigure(L, app::LessonId::Additive, 1, 2);
    ASSERT_EQ(f.panels.size(), 4u);
    const float score = f.panels[3].values.sum();
    const attn::HeadResult& h = L.r.heads[0];
    const bool column = L.s.config.layout == attn::Layout::Column;
    EXPECT_NEAR(score, column ? h.scores(2, 1) : h.scores(1, 2), 1e-4f);
    const Loaded dot = load("seed000_worked_example");
    LessonFigureOptions o;
    o.lesson = app::LessonId::Additive;
    EXPECT_EQ(buildLessonFigure(dot.s, dot.r, o).status().message,
              "lesson additive: the session's score is scaled_dot, not additive");
}

TEST(LessonFigure, MaskedWeightsAreExactlyZero)
{
    const Loaded L = load("lesson_masked_softmax");
    const Figure f = lessonFigure(L, app::LessonId::Masks);
    ASSERT_EQ(f.panels.size(), 2u);
    const Heatmap& w = f.panels[1];
    ASSERT_EQ(w.masked.rows(), w.values.rows());
    int masked = 0;
    for (Eigen::Index i = 0; i < w.values.rows(); ++i)
        for (Eigen::Index j = 0; j < w.values.cols(); ++j)
            if (w.masked(i, j)) {
                ++masked;
                EXPECT_EQ(w.values(i, j), 0.0f) << "weight (" << i << ", " << j << ") is masked";
            }
    EXPECT_GT(masked, 0);
}

// Every lesson figure renders to every format; the SVG carries the token labels as text.
TEST(LessonFigure, EveryLessonRendersWithTokenLabelsAsText)
{
    const std::pair<app::LessonId, const char*> cases[] = {
        {app::LessonId::VectorView, "lesson_vector_to_matrix"}, {app::LessonId::TwoFormulas, "lesson_two_formulas_column"},
        {app::LessonId::Heads, "lesson_heads_block_identity"},  {app::LessonId::Additive, "lesson_additive"},
        {app::LessonId::Masks, "lesson_mask_key_padding"},
    };
    for (const auto& [lesson, preset] : cases) {
        SCOPED_TRACE(preset);
        const Loaded L = load(preset);
        const Figure f = lessonFigure(L, lesson);
        ASSERT_FALSE(f.panels.empty());
        for (FigureFormat fmt : {FigureFormat::Png, FigureFormat::Svg, FigureFormat::Pdf})
            EXPECT_TRUE(renderFigure(f, fmt, 1).ok());
        const attn::Expected<std::string> svg = renderFigure(f, FigureFormat::Svg, 1);
        ASSERT_TRUE(svg.ok());
        ASSERT_FALSE(L.s.queryTokens.empty());
        EXPECT_NE(svg->find(L.s.queryTokens.front()), std::string::npos) << "token label not in the SVG text";
    }
}

TEST(LessonFigure, OutOfRangeRequestsNameTheLimit)
{
    const Loaded L = load("seed000_worked_example");
    LessonFigureOptions o;
    o.query = 4;
    EXPECT_EQ(buildLessonFigure(L.s, L.r, o).status().message, "lesson vector_view: query 4: the session has 4 queries (0..3)");
    o.query = 0;
    o.head = 1;
    EXPECT_EQ(buildLessonFigure(L.s, L.r, o).status().message, "lesson vector_view: head 1: the session has 1 head (0..0)");
    EXPECT_EQ(lessonFigureFromName("scaling"), std::nullopt);
    EXPECT_EQ(lessonFigureFromName("masks"), app::LessonId::Masks);
}

TEST(Figure, RgbaPreviewMatchesPngAndScreenshotWriterRoundTrips)
{
    const Loaded L = load("seed004_translation_cross");
    attn::Expected<Figure> f = buildFigure(L.s, L.r, {});
    ASSERT_TRUE(f.ok());
    attn::Expected<RgbaImage> rgba = renderFigureRgba(*f, 1.5);
    ASSERT_TRUE(rgba.ok());
    const Image png = decodePng(*renderFigure(*f, FigureFormat::Png, 1.5));
    ASSERT_EQ(rgba->width, png.w);
    ASSERT_EQ(rgba->height, png.h);
    const fs::path out = fs::temp_directory_path() / ("attnscope_shot_" + std::to_string(::getpid()) + ".png");
    ASSERT_TRUE(writePngRgba(out.string(), *rgba).ok());
    std::ifstream in(out, std::ios::binary);
    const Image shot = decodePng({std::istreambuf_iterator<char>(in), {}});
    fs::remove(out);
    ASSERT_EQ(shot.w, png.w);
    int differing = 0;
    for (int y = 0; y < png.h; ++y)
        for (int x = 0; x < png.w; ++x) {
            const std::uint8_t* p = &rgba->pixels[(std::size_t(y) * std::size_t(png.w) + std::size_t(x)) * 4];
            const attn::Rgb8 a = png.at(x, y), b = shot.at(x, y);
            differing += a.r != p[0] || a.g != p[1] || a.b != p[2] || maxChannelDiff(a, b) != 0;
        }
    EXPECT_EQ(differing, 0);
    RgbaImage bad{2, 2, std::vector<std::uint8_t>(3)};
    EXPECT_EQ(writePngRgba("x.png", bad).message, "x.png: image of 2×2 needs 16 bytes of RGBA, got 3");
}

} // namespace

// ---- Hardening (issue 13): each test failed before its fix ---------------------------------------------
namespace {

// A direct-mode session of n tokens (Q = K = V = a column of ramps), one head.
Loaded rampSession(int n, std::vector<std::string> tokens = {})
{
    attn::Session s;
    s.config.mode = attn::Mode::Direct;
    s.input.Q = attn::Matrix(n, 2);
    for (int i = 0; i < n; ++i) s.input.Q.row(i) << float(i % 7) / 7.0f, float(i % 5) / 5.0f;
    s.input.K = s.input.Q;
    s.input.V = s.input.Q;
    s.queryTokens = tokens;
    s.keyTokens = tokens;
    attn::Expected<attn::AttentionResult> r = attn::compute(s.input, s.config);
    EXPECT_TRUE(r.ok());
    return {s, *r};
}

std::size_t count(const std::string& text, const std::string& what)
{
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

} // namespace

// Finding 4: a 2048-token map was 4 M rectangles (SVG 3.3 GB, PDF OOM). Past kMaxVectorCells a map is one
// image; at or below it, still one rectangle per cell.
TEST(FigureHardening, LargeMapsAreOneImageInSvgAndPdf)
{
    const Loaded big = rampSession(200);  // 40 000 cells > 128×128
    attn::Expected<Figure> f = buildFigure(big.s, big.r, {});
    ASSERT_TRUE(f.ok()) << f.status().message;
    attn::Expected<std::string> svg = renderFigure(*f, FigureFormat::Svg, 1);
    ASSERT_TRUE(svg.ok());
    EXPECT_EQ(count(*svg, "<image "), 1u);
    EXPECT_LT(count(*svg, "<rect "), 200u);  // frame, colorbar strips; no cells
    EXPECT_LT(svg->size(), std::size_t(400000)) << "as rectangles it is ~4 MB";
    attn::Expected<std::string> pdf = renderFigure(*f, FigureFormat::Pdf, 1);
    ASSERT_TRUE(pdf.ok());
    EXPECT_NE(pdf->find("/Subtype /Image"), std::string::npos);
    // The image shows the same colours as the rectangles: compare the PNGs of both ways at a cell centre.
    const FigureLayout l = layoutFigure(*f);
    attn::Expected<std::string> png = renderFigure(*f, FigureFormat::Png, 2);
    ASSERT_TRUE(png.ok());
    const Image img = decodePng(*png);
    const PanelLayout& p = l.panels.front();
    for (int i : {0, 57, 199}) {
        const double x = (p.heatmap.x + (i + 0.5) * p.cell) * 2, y = (p.heatmap.y + (i + 0.5) * p.cell) * 2;
        const attn::Rgb8 want = attn::colormapColor(f->panels.front().cmap,
                                                    attn::normalize(f->panels.front().values(i, i), f->panels.front().range));
        EXPECT_LE(maxChannelDiff(img.at(x, y), want), 2) << "cell " << i;
    }
    const Loaded small = rampSession(128);  // exactly 128×128: rectangles
    f = buildFigure(small.s, small.r, {});
    ASSERT_TRUE(f.ok());
    svg = renderFigure(*f, FigureFormat::Svg, 1);
    ASSERT_TRUE(svg.ok());
    EXPECT_EQ(count(*svg, "<image "), 0u);
    EXPECT_GE(count(*svg, "<rect "), 128u * 128u);
}

// Finding 6: a 5 M-character token took 74 s to lay out; labels are clipped with an ellipsis.
TEST(FigureHardening, LongLabelsAreClippedWithAnEllipsis)
{
    const std::string longToken(1000000, 'w');
    const Loaded L = rampSession(2, {longToken, "ok"});
    attn::Expected<Figure> f = buildFigure(L.s, L.r, {});
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->panels.front().rowLabels[0], std::string(kMaxLabelChars, 'w') + "…");
    EXPECT_EQ(f->panels.front().rowLabels[1], "ok");
    attn::Expected<std::string> svg = renderFigure(*f, FigureFormat::Svg, 1);
    ASSERT_TRUE(svg.ok());
    EXPECT_LT(svg->size(), std::size_t(100000));
    EXPECT_NE(svg->find(">" + std::string(kMaxLabelChars, 'w') + "…</text>"), std::string::npos);
    // UTF-8 is cut between characters, never inside one.
    EXPECT_EQ(clipLabel("ééé", 2), "éé…");
    EXPECT_EQ(clipLabel("abc", 3), "abc");
}

// Finding 7: "cannot allocate a 158×37513 image" was cairo's 32767-pixel side limit; it is named now.
TEST(FigureHardening, CairoSideLimitIsNamed)
{
    const Loaded L = rampSession(2);
    attn::Expected<Figure> f = buildFigure(L.s, L.r, {});
    ASSERT_TRUE(f.ok());
    Figure tall = *f;
    for (int i = 0; i < 600; ++i) tall.panels.push_back(f->panels.front());
    const attn::Status st = renderFigure(tall, FigureFormat::Png, 1).status();
    EXPECT_EQ(st.code, attn::StatusCode::InvalidArgument);
    EXPECT_NE(st.message.find("cairo draws at most 32767 pixels per side"), std::string::npos) << st.message;
}
