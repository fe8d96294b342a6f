// The Export dialog's actions (see export_actions.h): the same library calls as `attnscope render`,
// `export`, `import` and `code`, on the document instead of a file.
#include "state/export_actions.h"

#include "io/array_io.h"
#include "io/session_arrays.h"

#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace app {

namespace {

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "Seed 004: translation as cross-attention" → "seed_004_translation_as_cross_attention".
std::string fileSafe(const std::string& name)
{
    // Long names make unwieldy file names; 48 characters keep the meaningful start of every preset name.
    constexpr std::size_t kMaxLength = 48;
    std::string out;
    for (unsigned char c : name) {
        if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
        else if (!out.empty() && out.back() != '_') out += '_';
        if (out.size() >= kMaxLength) break;
    }
    while (!out.empty() && out.back() == '_') out.pop_back();
    return out;
}

std::string dims(double w, double h, const char* unit)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f×%.0f %s", w, h, unit);
    return buf;
}

} // namespace

attn::Expected<ExportSource> exportSource(const Document& doc)
{
    ExportSource src;
    src.session = doc.sessionForSave(doc.session().viewJson);
    attn::AttentionConfig cfg = src.session.config;
    // As the command line: the same bits whatever the window's backend. So an export never waits for the shown
    // result's maps to come back from the device (Document::mapsArriving), nor reads them.
    cfg.backend = attn::Backend::Cpu;
    ATTNSCOPE_RETURN_IF_ERROR(attn::compute(src.session.input, cfg, src.result));
    return src;
}

fig::FigureOptions figureOptions(const ExportState& st, bool fixedWeightsRange, attn::WeightsScale weightsScale)
{
    fig::FigureOptions o = st.figure;
    o.fixedWeightsRange = fixedWeightsRange;
    o.weightsScale = weightsScale;
    if (st.titleDefault) o.title.reset();
    else o.title = st.title;
    return o;
}

// -----------------------------------------------------------------------------------------------------
// Default paths
// -----------------------------------------------------------------------------------------------------

std::string exportBaseName(const Document& doc)
{
    if (!doc.path().empty()) {
        const std::string stem = std::filesystem::path(doc.path()).stem().string();
        if (!stem.empty()) return stem;
    }
    const std::string safe = fileSafe(doc.session().name);
    return safe.empty() ? "attnscope" : safe;
}

std::string exportFolder(const Document& doc)
{
    if (doc.path().empty()) return "";
    const std::string dir = std::filesystem::path(doc.path()).parent_path().string();
    return dir.empty() ? "" : dir + "/";
}

const char* figureExtension(fig::FigureFormat f)
{
    switch (f) {
    case fig::FigureFormat::Png: return ".png";
    case fig::FigureFormat::Svg: return ".svg";
    case fig::FigureFormat::Pdf: return ".pdf";
    }
    return ".pdf";
}

std::string defaultFigurePath(const Document& doc, const fig::FigureOptions& o, fig::FigureFormat f)
{
    std::string name = exportBaseName(doc) + "_" + fig::toString(o.panel);
    if (o.head >= 0) name += "_head" + std::to_string(o.head);
    return exportFolder(doc) + name + figureExtension(f);
}

std::string defaultDataPath(const Document& doc, DataFormat f)
{
    const std::string base = exportFolder(doc) + exportBaseName(doc);
    switch (f) {
    case DataFormat::Npz: return base + ".npz";
    case DataFormat::Safetensors: return base + ".safetensors";
    case DataFormat::NpyFolder: return base + "_npy/";
    case DataFormat::CsvFolder: return base + "_csv/";
    }
    return base + ".npz";
}

std::string defaultScreenshotPath(const Document& doc) { return exportFolder(doc) + exportBaseName(doc) + "_window.png"; }

std::string replaceExtension(const std::string& path, const std::string& ext)
{
    std::filesystem::path p(path);
    if (p.filename().empty()) return path + ext;
    p.replace_extension(ext);
    return p.string();
}

// -----------------------------------------------------------------------------------------------------
// Figure
// -----------------------------------------------------------------------------------------------------

attn::Expected<std::string> exportFigure(const Document& doc, const fig::FigureOptions& o, const std::string& path,
                                         double scale)
{
    if (path.empty()) return attn::invalidArgument("figure: choose a file name (.png, .svg or .pdf)");
    const std::optional<fig::FigureFormat> format = fig::formatFromPath(path);
    if (!format) return attn::invalidArgument(path + ": expected a .png, .svg or .pdf file name");
    attn::Expected<ExportSource> src = exportSource(doc);
    if (!src) return src.status();
    attn::Expected<fig::Figure> f = fig::buildFigure(src->session, src->result, o);
    if (!f) return f.status();
    const fig::FigureLayout layout = fig::layoutFigure(*f);
    ATTNSCOPE_RETURN_IF_ERROR(fig::writeFigure(*f, path, *format, scale));
    std::string msg = "wrote " + path + " (" +
                      (*format == fig::FigureFormat::Png
                           ? dims(std::ceil(layout.width * scale), std::ceil(layout.height * scale), "px")
                           : dims(layout.width, layout.height, "pt")) +
                      ")";
    if (o.annotate && !layout.annotationsFit) msg += "; cells too small for annotations: values not printed";
    return msg;
}

bool updatePreview(FigurePreview& p, const Document& doc, const fig::FigureOptions& o, float boxW, float boxH,
                   double now)
{
    // Box sizes are rounded to 8 px so that a window resized by a pixel does not render again.
    const int bw = std::max(8, int(boxW) / 8 * 8), bh = std::max(8, int(boxH) / 8 * 8);
    const std::string optionsKey = std::string(fig::toString(o.panel)) + "|" + std::to_string(o.head) + "|" +
                                   (o.cmap ? attn::toString(*o.cmap) : "default") + "|" +
                                   (o.sharedRange ? "shared" : "per-head") + "|" + (o.annotate ? "annotate" : "plain") + "|" +
                                   (o.title ? "t:" + *o.title : "default") + "|" + std::to_string(bw) + "x" + std::to_string(bh);
    const std::string key = optionsKey + "|" + std::to_string(doc.revision());
    if (key == p.key) return false;
    if (optionsKey == p.optionsKey && now - p.renderedAt < kPreviewInterval) return false;  // only the document changed
    p.key = key;
    p.optionsKey = optionsKey;
    p.renderedAt = now;
    p.image = {};
    p.error.clear();
    p.annotationsFit = true;
    p.widthPt = p.heightPt = 0;
    ++p.version;
    ++p.renders;
    attn::Expected<ExportSource> src = exportSource(doc);
    if (!src) {
        p.error = src.status().message;
        return true;
    }
    attn::Expected<fig::Figure> f = fig::buildFigure(src->session, src->result, o);
    if (!f) {
        p.error = f.status().message;
        return true;
    }
    const fig::FigureLayout layout = fig::layoutFigure(*f);
    // At most 3 pixels per point: beyond that a small figure only gets blurrier, not clearer, on screen.
    constexpr double kMaxPreviewScale = 3.0;
    double scale = std::min(double(bw) / std::max(1.0, layout.width), double(bh) / std::max(1.0, layout.height));
    scale = std::clamp(scale, fig::kMinScale, kMaxPreviewScale);
    attn::Expected<fig::RgbaImage> img = fig::renderFigureRgba(*f, scale);
    if (!img) {
        p.error = img.status().message;
        return true;
    }
    p.image = std::move(*img);
    p.annotationsFit = layout.annotationsFit;
    p.widthPt = layout.width;
    p.heightPt = layout.height;
    return true;
}

// -----------------------------------------------------------------------------------------------------
// Data
// -----------------------------------------------------------------------------------------------------

attn::Expected<std::string> exportData(const Document& doc, DataFormat f, const std::string& path, bool inputsOnly)
{
    if (path.empty()) return attn::invalidArgument("data: choose a file or folder name");
    const bool folder = f == DataFormat::NpyFolder || f == DataFormat::CsvFolder;
    std::error_code ec;
    const bool isDir = std::filesystem::is_directory(path, ec);
    if (!folder && (isDir || endsWith(path, "/")))
        return attn::invalidArgument(path + ": is a folder; this format writes one file (e.g. " +
                                     std::string(f == DataFormat::Npz ? "arrays.npz" : "arrays.safetensors") + ")");
    attn::Expected<ExportSource> src = exportSource(doc);
    if (!src) return src.status();
    const std::vector<io::NamedArray> arrays = io::sessionArrays(src->session, inputsOnly ? nullptr : &src->result);
    attn::Status st;
    if (f == DataFormat::Npz) st = io::writeNpz(path, arrays);
    else if (f == DataFormat::Safetensors) st = io::writeSafetensors(path, arrays);
    else st = io::writeArraysToFolder(path, arrays, f == DataFormat::CsvFolder);
    if (!st.ok()) return st;
    return "wrote " + std::to_string(arrays.size()) + " arrays to " + path;
}

// -----------------------------------------------------------------------------------------------------
// Import
// -----------------------------------------------------------------------------------------------------

namespace {

enum class ArrayFile { Npy, Npz, Safetensors };

attn::Expected<ArrayFile> arrayFileKind(const std::string& path)
{
    if (path.empty()) return attn::invalidArgument("import: choose a .npy, .npz or .safetensors file");
    if (endsWith(path, ".npy")) return ArrayFile::Npy;
    if (endsWith(path, ".npz")) return ArrayFile::Npz;
    if (endsWith(path, ".safetensors")) return ArrayFile::Safetensors;
    return attn::invalidArgument(path + ": expected a .npy, .npz or .safetensors file");
}

std::string describe(const io::Array& a) { return std::string(io::toString(a.dtype)) + " " + io::shapeString(a.shape); }

} // namespace

attn::Expected<std::vector<ArrayEntry>> listArrays(const std::string& path)
{
    attn::Expected<ArrayFile> kind = arrayFileKind(path);
    if (!kind) return kind.status();
    std::vector<ArrayEntry> out;
    switch (*kind) {
    case ArrayFile::Npy: {
        attn::Expected<io::Array> a = io::readNpy(path);
        if (!a) return a.status();
        out.push_back({"", describe(*a)});
        break;
    }
    case ArrayFile::Npz: {
        attn::Expected<std::vector<std::string>> names = io::listNpz(path);
        if (!names) return names.status();
        for (const std::string& n : *names) {
            attn::Expected<io::Array> a = io::readNpz(path, n);
            out.push_back({n, a ? describe(*a) : "unreadable: " + a.status().message});
        }
        break;
    }
    case ArrayFile::Safetensors: {
        attn::Expected<std::vector<io::TensorInfo>> t = io::listSafetensors(path);
        if (!t) return t.status();
        for (const io::TensorInfo& i : *t) out.push_back({i.name, std::string(io::toString(i.dtype)) + " " + io::shapeString(i.shape)});
        break;
    }
    }
    if (out.empty()) return attn::invalidArgument(path + ": holds no arrays");
    return out;
}

std::string slotShape(const Document& doc, const std::string& slot)
{
    const attn::Session s = doc.sessionForSave(doc.session().viewJson);
    for (const io::NamedArray& a : io::sessionArrays(s, nullptr)) {
        if (a.name != slot) continue;
        if (a.matrix) return std::to_string(a.matrix->rows()) + "×" + std::to_string(a.matrix->cols());
        if (a.mask) return std::to_string(a.mask->rows()) + "×" + std::to_string(a.mask->cols());
        if (a.vector) return "1×" + std::to_string(a.vector->size());
    }
    return "";
}

attn::Expected<std::string> importArray(Document& doc, const ImportRequest& r)
{
    const std::vector<std::string>& slots = io::slotNames();
    if (std::find(slots.begin(), slots.end(), r.slot) == slots.end()) {
        std::string list;
        for (const std::string& n : slots) list += (list.empty() ? "" : ", ") + n;
        return attn::invalidArgument("import: unknown slot '" + r.slot + "' (expected one of: " + list + ")");
    }
    attn::Expected<ArrayFile> kind = arrayFileKind(r.path);
    if (!kind) return kind.status();
    if (*kind != ArrayFile::Npy && r.name.empty())
        return attn::invalidArgument(r.path + ": choose an array name (Load lists the names in the file)");
    io::SliceSpec spec;
    spec.transpose = r.transpose;
    for (const auto& [text, range, what] : {std::tuple{&r.rows, &spec.rows, "rows"}, std::tuple{&r.cols, &spec.cols, "cols"}}) {
        if (text->empty()) continue;
        attn::Expected<io::Range> parsed = io::parseRange(*text, what);
        if (!parsed) return parsed.status();
        *range = *parsed;
    }
    if (r.head >= 0) {
        if (r.heads < 1) return attn::invalidArgument("head slice: expected heads ≥ 1, got " + std::to_string(r.heads));
        spec.head = r.head;
        spec.heads = r.heads;
    }
    attn::Expected<io::Array> a = *kind == ArrayFile::Safetensors ? io::readSafetensors(r.path, r.name)
                                  : *kind == ArrayFile::Npz       ? io::readNpz(r.path, r.name)
                                                                  : io::readNpy(r.path);
    if (!a) return a.status();
    const std::string source = r.path + (*kind == ArrayFile::Npy ? "" : "[" + r.name + "]");
    attn::Expected<attn::Matrix> m = io::toMatrix(*a, spec, source);
    if (!m) return m.status();
    // The slot is set on a copy in file orientation (as the command line sees the session); the document
    // takes it only when the whole session is valid.
    attn::Session s = doc.sessionForSave(doc.session().viewJson);
    if (attn::Status st = io::setSlot(s, r.slot, *m); !st.ok()) {
        // Core's message derives the expected shape partly from the new matrix ("Wq: expected 4×2, got 2×2"
        // for a 2×2 into a 4×3 W^Q); the shape the slot has now makes the mismatch plain.
        const std::string now = slotShape(doc, r.slot);
        const std::string given = std::to_string(m->rows()) + "×" + std::to_string(m->cols());
        if (!now.empty() && now != given) st.message += " (the session's " + r.slot + " is " + now + ")";
        return st;
    }
    doc.replaceSession(std::move(s));
    return r.slot + " ← " + source + " " + io::toString(a->dtype) + " (" + std::to_string(m->rows()) + "×" +
           std::to_string(m->cols()) + "); Ctrl+Z undoes it";
}

// -----------------------------------------------------------------------------------------------------
// Code, screenshot
// -----------------------------------------------------------------------------------------------------

bool updateCode(ExportState& st, const Document& doc)
{
    const std::string key = std::to_string(doc.revision()) + (st.codeLang == io::CodeLang::NumPy ? "|numpy" : "|torch");
    if (key == st.codeKey) return false;
    st.codeKey = key;
    attn::Expected<std::string> code = io::sessionCode(doc.sessionForSave(doc.session().viewJson), st.codeLang);
    if (code) {
        st.code = std::move(*code);
        st.codeMessage = {};
    } else {
        st.code.clear();
        st.codeMessage = {code.status().message, true};
    }
    return true;
}

attn::Expected<std::string> saveWindowScreenshot(const std::string& path, const fig::RgbaImage& img)
{
    if (path.empty()) return attn::invalidArgument("screenshot: choose a file name (.png)");
    if (!endsWith(path, ".png") && !endsWith(path, ".PNG"))
        return attn::invalidArgument(path + ": expected a .png file name");
    ATTNSCOPE_RETURN_IF_ERROR(fig::writePngRgba(path, img));
    return "wrote " + path + " (" + dims(img.width, img.height, "px") + ")";
}

} // namespace app
