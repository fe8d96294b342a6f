// Cairo + Pango and SVG painters. See painter.h.
#include "figure/painter.h"

#include <cstdint>
#include <cstring>

#include <cairo.h>
#include <pango/pangocairo.h>

#include <cmath>
#include <cstdio>

namespace app::fig {

namespace {

std::string escapeXml(const std::string& s)
{
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default: out += c;
        }
    }
    return out;
}

// Sub/superscripts at 70 % size, shifted by a fraction of the base size (Pango's own <sub>/<sup> ignore an
// absolute font size in 1.50, so the spans are explicit). The SVG painter uses the same 70 %.
constexpr double kScriptScale = 0.7;
constexpr double kSubRise = -0.2;   // × font size
constexpr double kSupRise = 0.35;

std::string pangoMarkup(const std::vector<TextRun>& runs, double size)
{
    std::string m;
    for (const TextRun& r : runs) {
        const std::string t = escapeXml(r.text);
        if (r.shift == 0) {
            m += t;
            continue;
        }
        const int fontSize = int(size * kScriptScale * PANGO_SCALE);
        const int rise = int(size * (r.shift < 0 ? kSubRise : kSupRise) * PANGO_SCALE);
        m += "<span font_size=\"" + std::to_string(fontSize) + "\" rise=\"" + std::to_string(rise) + "\">" + t + "</span>";
    }
    return m;
}

// A Pango layout for the runs on `cr`, with metric hinting off: glyph advances then scale linearly with
// the font size and do not depend on the device scale, so measuring at one scale and drawing at another
// (PNG at 2×, PDF at 1×) gives the same layout.
PangoLayout* makeLayout(cairo_t* cr, const std::vector<TextRun>& runs, const TextStyle& style)
{
    PangoLayout* layout = pango_cairo_create_layout(cr);
    cairo_font_options_t* fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    pango_cairo_context_set_font_options(pango_layout_get_context(layout), fo);
    cairo_font_options_destroy(fo);
    pango_layout_context_changed(layout);
    PangoFontDescription* fd = pango_font_description_from_string(kFigureFont);
    pango_font_description_set_absolute_size(fd, style.size * PANGO_SCALE);
    pango_font_description_set_weight(fd, style.bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
    pango_layout_set_font_description(layout, fd);
    pango_font_description_free(fd);
    const std::string markup = pangoMarkup(runs, style.size);
    pango_layout_set_markup(layout, markup.c_str(), int(markup.size()));
    return layout;
}

TextExtent extentOf(PangoLayout* layout)
{
    PangoRectangle logical;
    pango_layout_get_extents(layout, nullptr, &logical);
    TextExtent e;
    e.width = double(logical.width) / PANGO_SCALE;
    e.height = double(logical.height) / PANGO_SCALE;
    e.ascent = double(pango_layout_get_baseline(layout)) / PANGO_SCALE;
    return e;
}

// Offset of the text box's top-left corner from the anchor, in the text's own frame.
void boxOffset(const TextExtent& e, HAlign h, VAlign v, double& ox, double& oy)
{
    ox = h == HAlign::Left ? 0.0 : h == HAlign::Center ? -e.width / 2 : -e.width;
    oy = v == VAlign::Top ? 0.0 : v == VAlign::Middle ? -e.height / 2 : v == VAlign::Baseline ? -e.ascent : -e.height;
}

std::string hex(attn::Rgb8 c)
{
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

std::string num(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);  // 1/100 pt is far below what any output device resolves
    std::string s = buf;
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s == "-0" ? "0" : s;
}

void setColor(cairo_t* cr, attn::Rgb8 c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

} // namespace

std::vector<TextRun> parseRichText(const std::string& s)
{
    std::vector<TextRun> runs;
    std::string cur;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if ((s[i] == '_' || s[i] == '^') && i + 1 < s.size() && s[i + 1] == '{') {
            const std::size_t close = s.find('}', i + 2);
            if (close != std::string::npos) {
                if (!cur.empty()) runs.push_back({cur, 0});
                cur.clear();
                runs.push_back({s.substr(i + 2, close - i - 2), s[i] == '_' ? -1 : 1});
                i = close;
                continue;
            }
        }
        cur += s[i];
    }
    if (!cur.empty() || runs.empty()) runs.push_back({cur, 0});
    return runs;
}

TextExtent measureText(const std::vector<TextRun>& runs, const TextStyle& style)
{
    // One scratch context for all measurements (figures are drawn on one thread).
    static cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    static cairo_t* cr = cairo_create(surface);
    PangoLayout* layout = makeLayout(cr, runs, style);
    const TextExtent e = extentOf(layout);
    g_object_unref(layout);
    return e;
}

// ---- Cairo ------------------------------------------------------------------------------------------------
void CairoPainter::fillRect(double x, double y, double w, double h, attn::Rgb8 c)
{
    // Fills are axis-aligned rectangles (cells, colorbar strips): without antialiasing their edges snap to
    // whole pixels, so neighbouring cells meet without the light seams that partial coverage leaves when
    // cells are a few pixels wide. Vector surfaces (PDF) ignore this setting.
    cairo_save(m_cr);
    cairo_set_antialias(m_cr, CAIRO_ANTIALIAS_NONE);
    setColor(m_cr, c);
    cairo_rectangle(m_cr, x, y, w, h);
    cairo_fill(m_cr);
    cairo_restore(m_cr);
}

void CairoPainter::strokeRect(double x, double y, double w, double h, attn::Rgb8 c, double width)
{
    setColor(m_cr, c);
    cairo_set_line_width(m_cr, width);
    cairo_rectangle(m_cr, x, y, w, h);
    cairo_stroke(m_cr);
}

void CairoPainter::line(double x0, double y0, double x1, double y1, attn::Rgb8 c, double width)
{
    setColor(m_cr, c);
    cairo_set_line_width(m_cr, width);
    cairo_set_line_cap(m_cr, CAIRO_LINE_CAP_BUTT);
    cairo_move_to(m_cr, x0, y0);
    cairo_line_to(m_cr, x1, y1);
    cairo_stroke(m_cr);
}

void CairoPainter::text(const std::vector<TextRun>& runs, const TextStyle& style, double x, double y, HAlign h, VAlign v,
                        double angle)
{
    cairo_save(m_cr);
    cairo_translate(m_cr, x, y);
    if (angle != 0) cairo_rotate(m_cr, -angle * M_PI / 180);
    PangoLayout* layout = makeLayout(m_cr, runs, style);
    double ox = 0, oy = 0;
    boxOffset(extentOf(layout), h, v, ox, oy);
    setColor(m_cr, style.color);
    cairo_move_to(m_cr, ox, oy);
    pango_cairo_show_layout(m_cr, layout);
    g_object_unref(layout);
    cairo_restore(m_cr);
}

// ---- SVG --------------------------------------------------------------------------------------------------
SvgPainter::SvgPainter(double width, double height)
{
    m_out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" version=\"1.1\" width=\"" + num(width) + "pt\" height=\"" +
            num(height) + "pt\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\">\n";
}

void SvgPainter::fillRect(double x, double y, double w, double h, attn::Rgb8 c)
{
    m_out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) + "\" fill=\"" +
             hex(c) + "\" shape-rendering=\"crispEdges\"/>\n";  // as the PNG: no seams between cells
}

void SvgPainter::strokeRect(double x, double y, double w, double h, attn::Rgb8 c, double width)
{
    m_out += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
             "\" fill=\"none\" stroke=\"" + hex(c) + "\" stroke-width=\"" + num(width) + "\"/>\n";
}

void SvgPainter::line(double x0, double y0, double x1, double y1, attn::Rgb8 c, double width)
{
    m_out += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y1) + "\" stroke=\"" +
             hex(c) + "\" stroke-width=\"" + num(width) + "\"/>\n";
}

void SvgPainter::text(const std::vector<TextRun>& runs, const TextStyle& style, double x, double y, HAlign h, VAlign v,
                      double angle)
{
    const TextExtent e = measureText(runs, style);
    double ox = 0, oy = 0;
    boxOffset(e, h, v, ox, oy);
    // Horizontal placement by text-anchor (robust if a viewer substitutes the font), vertical by the
    // measured baseline.
    const char* anchor = h == HAlign::Left ? "start" : h == HAlign::Center ? "middle" : "end";
    std::string t = "<text x=\"0\" y=\"" + num(oy + e.ascent) + "\" transform=\"translate(" + num(x) + " " + num(y) + ")" +
                    (angle != 0 ? " rotate(" + num(-angle) + ")" : "") + "\" font-family=\"" + kFigureFont + ", sans-serif\" font-size=\"" +
                    num(style.size) + "\"" + (style.bold ? " font-weight=\"bold\"" : "") + " fill=\"" + hex(style.color) +
                    "\" text-anchor=\"" + anchor + "\">";
    for (const TextRun& r : runs) {
        if (r.shift == 0) t += escapeXml(r.text);
        else
            t += "<tspan font-size=\"" + num(style.size * kScriptScale) + "\" dy=\"" +
                 num(-style.size * (r.shift < 0 ? kSubRise : kSupRise)) + "\">" + escapeXml(r.text) + "</tspan><tspan dy=\"" +
                 num(style.size * (r.shift < 0 ? kSubRise : kSupRise)) + "\"></tspan>";
    }
    m_out += t + "</text>\n";
}

namespace {

// The pixels as an RGB24 cairo image surface (the caller destroys it; check its status).
cairo_surface_t* imageSurface(int cols, int rows, const std::vector<attn::Rgb8>& pixels)
{
    cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols, rows);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) return s;
    cairo_surface_flush(s);
    unsigned char* data = cairo_image_surface_get_data(s);
    const int stride = cairo_image_surface_get_stride(s);
    for (int y = 0; y < rows; ++y)
        for (int x = 0; x < cols; ++x) {
            const attn::Rgb8 c = pixels[std::size_t(y) * std::size_t(cols) + std::size_t(x)];
            const std::uint32_t px = 0xff000000u | std::uint32_t(c.r) << 16 | std::uint32_t(c.g) << 8 | c.b;
            std::memcpy(data + std::size_t(y) * std::size_t(stride) + std::size_t(x) * 4, &px, 4);
        }
    cairo_surface_mark_dirty(s);
    return s;
}

cairo_status_t appendBytes(void* closure, const unsigned char* data, unsigned int length)
{
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
}

std::string base64(const std::string& in)
{
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    for (std::size_t i = 0; i < in.size(); i += 3) {
        const std::uint32_t b0 = static_cast<unsigned char>(in[i]);
        const std::uint32_t b1 = i + 1 < in.size() ? static_cast<unsigned char>(in[i + 1]) : 0;
        const std::uint32_t b2 = i + 2 < in.size() ? static_cast<unsigned char>(in[i + 2]) : 0;
        const std::uint32_t v = b0 << 16 | b1 << 8 | b2;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += i + 2 < in.size() ? kAlphabet[v & 63] : '=';
    }
    return out;
}

} // namespace

void CairoPainter::image(double x, double y, double w, double h, int cols, int rows, const std::vector<attn::Rgb8>& pixels)
{
    if (cols <= 0 || rows <= 0) return;
    cairo_surface_t* s = imageSurface(cols, rows, pixels);
    if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
        cairo_save(m_cr);
        cairo_translate(m_cr, x, y);
        cairo_scale(m_cr, w / cols, h / rows);
        cairo_set_source_surface(m_cr, s, 0, 0);
        // Nearest: each value stays a sharp-edged cell (PDF viewers get /Interpolate false).
        cairo_pattern_set_filter(cairo_get_source(m_cr), CAIRO_FILTER_NEAREST);
        cairo_rectangle(m_cr, 0, 0, cols, rows);
        cairo_fill(m_cr);
        cairo_restore(m_cr);
    }
    cairo_surface_destroy(s);
}

void SvgPainter::image(double x, double y, double w, double h, int cols, int rows, const std::vector<attn::Rgb8>& pixels)
{
    if (cols <= 0 || rows <= 0) return;
    cairo_surface_t* s = imageSurface(cols, rows, pixels);
    std::string png;
    if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) cairo_surface_write_to_png_stream(s, appendBytes, &png);
    cairo_surface_destroy(s);
    if (png.empty()) return;
    m_out += "<image x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
             "\" preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" xlink:href=\"data:image/png;base64," +
             base64(png) + "\"/>\n";
}

std::string SvgPainter::finish() { return m_out + "</svg>\n"; }

} // namespace app::fig
