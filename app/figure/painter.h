// Drawing back ends for figures. The figure code (figure_render.cpp) draws once through Painter; CairoPainter
// renders to PNG, PDF and in-memory images (cairo, text through Pango so any script renders), SvgPainter
// writes SVG with real <text> elements.
//
// Why two back ends: cairo's SVG surface writes every glyph as an outline path (<symbol>/<use>), so labels
// in its SVG are neither selectable nor searchable, and the token labels are not in the file as text. Its
// PDF surface does embed real text (a font subset with a ToUnicode map), so PDF and PNG go through cairo.
// Text is measured with Pango for both, so both lay out identically.
//
// Units are points (1/72 inch); y grows downwards.
#pragma once

#include <attnscope/colormap.h>

#include <memory>
#include <string>
#include <vector>

typedef struct _cairo cairo_t;

namespace app::fig {

// Text with optional sub/superscripts: "W_{Q}" and "x^{2}" are parsed into runs; other text is literal.
struct TextRun {
    std::string text;
    int shift = 0;  // -1 subscript, 0 normal, +1 superscript
};
std::vector<TextRun> parseRichText(const std::string& s);

struct TextStyle {
    double size = 8.0;  // font size in points
    bool bold = false;
    attn::Rgb8 color{0, 0, 0};
};

enum class HAlign { Left, Center, Right };
enum class VAlign { Top, Middle, Baseline, Bottom };

struct TextExtent {
    double width = 0, height = 0, ascent = 0;  // ascent: from the top of the box to the baseline
};

// The font every figure uses (installed by fonts-dejavu-core; fontconfig falls back to other installed
// fonts for scripts it lacks, e.g. CJK).
inline constexpr const char* kFigureFont = "DejaVu Sans";

// Measures text exactly as both painters draw it (Pango, hinting off so sizes scale linearly).
TextExtent measureText(const std::vector<TextRun>& runs, const TextStyle& style);

class Painter {
public:
    virtual ~Painter() = default;
    virtual void fillRect(double x, double y, double w, double h, attn::Rgb8 c) = 0;
    virtual void strokeRect(double x, double y, double w, double h, attn::Rgb8 c, double width) = 0;
    virtual void line(double x0, double y0, double x1, double y1, attn::Rgb8 c, double width) = 0;
    // An image of cols × rows pixels (row-major, top row first) stretched over the rectangle without
    // smoothing (each pixel a sharp-edged cell): large heatmaps are drawn this way, as matplotlib's imshow
    // does, instead of one rectangle per cell.
    virtual void image(double x, double y, double w, double h, int cols, int rows, const std::vector<attn::Rgb8>& pixels) = 0;
    // Text anchored at (x, y): the alignments say which point of the text box sits on the anchor.
    // angle: counter-clockwise rotation about the anchor in degrees (90 reads bottom to top); the alignments
    // are in the text's own (rotated) frame.
    virtual void text(const std::vector<TextRun>& runs, const TextStyle& style, double x, double y, HAlign h, VAlign v,
                      double angle = 0) = 0;
};

// Draws on a cairo context whose user units are points (scale it for PNG).
class CairoPainter final : public Painter {
public:
    explicit CairoPainter(cairo_t* cr) : m_cr(cr) {}
    void fillRect(double x, double y, double w, double h, attn::Rgb8 c) override;
    void strokeRect(double x, double y, double w, double h, attn::Rgb8 c, double width) override;
    void line(double x0, double y0, double x1, double y1, attn::Rgb8 c, double width) override;
    void image(double x, double y, double w, double h, int cols, int rows, const std::vector<attn::Rgb8>& pixels) override;
    void text(const std::vector<TextRun>& runs, const TextStyle& style, double x, double y, HAlign h, VAlign v,
              double angle) override;

private:
    cairo_t* m_cr;
};

// Accumulates an SVG document of width × height points.
class SvgPainter final : public Painter {
public:
    SvgPainter(double width, double height);
    void fillRect(double x, double y, double w, double h, attn::Rgb8 c) override;
    void strokeRect(double x, double y, double w, double h, attn::Rgb8 c, double width) override;
    void line(double x0, double y0, double x1, double y1, attn::Rgb8 c, double width) override;
    void image(double x, double y, double w, double h, int cols, int rows, const std::vector<attn::Rgb8>& pixels) override;
    void text(const std::vector<TextRun>& runs, const TextStyle& style, double x, double y, HAlign h, VAlign v,
              double angle) override;
    // The finished document.
    std::string finish();

private:
    std::string m_out;
};

} // namespace app::fig
