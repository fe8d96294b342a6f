// The Export dialog (File → Export…, Ctrl+E): its actions without drawing (state/export_actions.h) — figures
// written and readable, arrays written, imports as one undo step or not at all, clear messages for bad
// input and unwritable paths, the preview cache — and the dialog drawn with the null backend.
#include "state/export_actions.h"

#include "io/array_io.h"
#include "panels/panels.h"
#include "headless_imgui.h"

#include <attnscope/preset_io.h>

#include <imgui.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
namespace fig = app::fig;

const std::string kPresets = ATTNSCOPE_PRESETS_DIR;

attn::Session load(const std::string& path)
{
    auto s = attn::loadSession(path);
    EXPECT_TRUE(s.ok()) << s.status().message;
    return s.ok() ? *s : attn::Session{};
}

app::io::NamedArray named(const std::string& name, const attn::Matrix& m)
{
    app::io::NamedArray a;
    a.name = name;
    a.matrix = &m;
    return a;
}

// Eigen's == asserts equal sizes; this compares sizes first.
bool same(const attn::Matrix& a, const attn::Matrix& b) { return a.rows() == b.rows() && a.cols() == b.cols() && a == b; }

std::string readAll(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Width and height from a PNG's IHDR chunk; {0, 0} when the signature or the chunk is missing.
std::pair<int, int> pngSize(const std::string& bytes)
{
    static const std::string kSignature("\x89PNG\r\n\x1a\n", 8);
    if (bytes.size() < 24 || bytes.compare(0, 8, kSignature) != 0 || bytes.compare(12, 4, "IHDR") != 0) return {0, 0};
    auto be32 = [&](std::size_t at) {
        return int((unsigned char)bytes[at] << 24 | (unsigned char)bytes[at + 1] << 16 | (unsigned char)bytes[at + 2] << 8 |
                   (unsigned char)bytes[at + 3]);
    };
    return {be32(16), be32(20)};
}

class ExportDialog : public ::testing::Test {
protected:
    void SetUp() override
    {
        dir = (fs::temp_directory_path() / ("attnscope_export_dialog_" + std::to_string(::getpid()))).string() + "/";
        fs::remove_all(dir);
        fs::create_directories(dir);
        doc.setSession(load(kPresets + "/seed000_worked_example.json"), "");
        doc.recomputeIfNeeded();
    }
    void TearDown() override { fs::remove_all(dir); }

    std::string dir;
    app::Document doc;
};

TEST_F(ExportDialog, FigureToPngSvgPdf)
{
    app::ExportState st;
    st.figure.head = 0;
    const fig::FigureOptions o = app::figureOptions(st, true);
    // The expected PNG size: the figure's layout at scale 1.5.
    auto src = app::exportSource(doc);
    ASSERT_TRUE(src.ok()) << src.status().message;
    auto f = fig::buildFigure(src->session, src->result, o);
    ASSERT_TRUE(f.ok()) << f.status().message;
    const fig::FigureLayout layout = fig::layoutFigure(*f);

    auto png = app::exportFigure(doc, o, dir + "w.png", 1.5);
    ASSERT_TRUE(png.ok()) << png.status().message;
    EXPECT_NE(png->find("wrote " + dir + "w.png"), std::string::npos) << *png;
    const auto [w, h] = pngSize(readAll(dir + "w.png"));
    EXPECT_EQ(w, int(std::ceil(layout.width * 1.5)));
    EXPECT_EQ(h, int(std::ceil(layout.height * 1.5)));

    auto svg = app::exportFigure(doc, o, dir + "w.svg", 1.5);
    ASSERT_TRUE(svg.ok()) << svg.status().message;
    const std::string svgText = readAll(dir + "w.svg");
    EXPECT_NE(svgText.find("<svg"), std::string::npos);
    EXPECT_NE(svgText.rfind("</svg>"), std::string::npos);
    EXPECT_NE(svgText.find(">x1<"), std::string::npos) << "token labels are real text";

    auto pdf = app::exportFigure(doc, o, dir + "w.pdf", 1.5);
    ASSERT_TRUE(pdf.ok()) << pdf.status().message;
    const std::string pdfBytes = readAll(dir + "w.pdf");
    EXPECT_EQ(pdfBytes.compare(0, 5, "%PDF-"), 0);
    EXPECT_NE(pdfBytes.rfind("%%EOF"), std::string::npos);
}

TEST_F(ExportDialog, FigureErrorsAreMessagesAndWriteNothing)
{
    fig::FigureOptions o;
    o.panel = fig::PanelKind::Xkv;
    auto r = app::exportFigure(doc, o, dir + "xkv.pdf", 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, "panel xkv: the session is not in cross mode");
    EXPECT_FALSE(fs::exists(dir + "xkv.pdf"));

    o = {};
    o.head = 3;
    r = app::exportFigure(doc, o, dir + "h.pdf", 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, "head 3: the session has 1 head (0..0)");

    r = app::exportFigure(doc, {}, dir + "w.jpg", 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, dir + "w.jpg: expected a .png, .svg or .pdf file name");

    r = app::exportFigure(doc, {}, dir + "w.png", 0.1);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message.find("scale: expected a value in [0.25, 16], got 0.1"), std::string::npos) << r.status().message;
    EXPECT_FALSE(fs::exists(dir + "w.png"));
}

TEST_F(ExportDialog, UnwritablePathsGiveClearMessages)
{
    const std::string missing = dir + "no/such/folder/";
    auto r = app::exportFigure(doc, {}, missing + "f.svg", 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message.rfind(missing + "f.svg: cannot write", 0), 0u) << r.status().message;

    r = app::exportData(doc, app::DataFormat::Npz, missing + "a.npz", false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message.rfind(missing + "a.npz: cannot write", 0), 0u) << r.status().message;

    r = app::exportData(doc, app::DataFormat::NpyFolder, missing, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message.rfind(missing + ": cannot create folder", 0), 0u) << r.status().message;

    r = app::exportData(doc, app::DataFormat::Npz, dir, false);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message.find("is a folder; this format writes one file"), std::string::npos) << r.status().message;

    fig::RgbaImage img;
    img.width = img.height = 2;
    img.pixels.assign(16, 255);
    r = app::saveWindowScreenshot(missing + "w.png", img);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message.rfind(missing + "w.png: cannot write", 0), 0u) << r.status().message;
    r = app::saveWindowScreenshot(dir + "w.jpg", img);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, dir + "w.jpg: expected a .png file name");
    r = app::saveWindowScreenshot(dir + "w.png", img);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_EQ(pngSize(readAll(dir + "w.png")), std::make_pair(2, 2));
}

TEST_F(ExportDialog, DataExportWritesTheCommandLinesArrays)
{
    auto r = app::exportData(doc, app::DataFormat::Npz, dir + "a.npz", false);
    ASSERT_TRUE(r.ok()) << r.status().message;
    auto names = app::io::listNpz(dir + "a.npz");
    ASSERT_TRUE(names.ok()) << names.status().message;
    for (const char* n : {"X", "Wq", "Wk", "Wv", "h0_scores", "h0_weights", "h0_output", "output"})
        EXPECT_NE(std::find(names->begin(), names->end(), n), names->end()) << n;
    EXPECT_EQ(*r, "wrote " + std::to_string(names->size()) + " arrays to " + dir + "a.npz");
    auto x = app::io::readNpz(dir + "a.npz", "h0_weights");
    ASSERT_TRUE(x.ok()) << x.status().message;
    const attn::Matrix& w = doc.result().heads[0].weights;
    ASSERT_EQ(x->shape, (std::vector<std::int64_t>{w.rows(), w.cols()}));
    for (Eigen::Index i = 0; i < w.size(); ++i) EXPECT_EQ(float(x->values[std::size_t(i)]), w.data()[i]);

    r = app::exportData(doc, app::DataFormat::NpyFolder, dir + "npy", true);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_TRUE(fs::exists(dir + "npy/X.npy"));
    EXPECT_FALSE(fs::exists(dir + "npy/h0_weights.npy")) << "inputs only";
    r = app::exportData(doc, app::DataFormat::CsvFolder, dir + "csv/", false);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_EQ(readAll(dir + "csv/X.csv").substr(0, 8), "1,1,1,0\n") << "seed 000's first token";
}

TEST_F(ExportDialog, ImportNpyIntoWqIsOneUndoStep)
{
    const attn::Matrix before = doc.session().input.Wq;
    attn::Matrix m(4, 3);
    for (int i = 0; i < 12; ++i) m.data()[i] = 0.25f * float(i);
    ASSERT_TRUE(app::io::writeNpy(dir + "wq.npy", named("Wq", m)).ok());

    auto listed = app::listArrays(dir + "wq.npy");
    ASSERT_TRUE(listed.ok()) << listed.status().message;
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].info, "float32 (4, 3)");

    ASSERT_FALSE(doc.canUndo());
    const std::uint64_t rev = doc.revision();
    app::ImportRequest req;
    req.slot = "Wq";
    req.path = dir + "wq.npy";
    auto r = app::importArray(doc, req);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_EQ(*r, "Wq ← " + dir + "wq.npy float32 (4×3); Ctrl+Z undoes it");
    EXPECT_GT(doc.revision(), rev);
    EXPECT_TRUE(same(doc.session().input.Wq, m));
    ASSERT_TRUE(doc.recomputeIfNeeded());
    EXPECT_TRUE(doc.lastError().ok()) << doc.lastError().message;

    ASSERT_TRUE(doc.undo());
    EXPECT_TRUE(same(doc.session().input.Wq, before));
    EXPECT_FALSE(doc.canUndo()) << "the import was exactly one undo step";
    ASSERT_TRUE(doc.redo());
    EXPECT_TRUE(same(doc.session().input.Wq, m));
}

TEST_F(ExportDialog, ImportOfAWrongShapeChangesNothing)
{
    attn::Matrix m = attn::Matrix::Ones(2, 2);
    ASSERT_TRUE(app::io::writeNpy(dir + "w22.npy", named("w", m)).ok());
    const attn::Session before = doc.session();
    const std::uint64_t rev = doc.revision();
    app::ImportRequest req;
    req.slot = "Wq";
    req.path = dir + "w22.npy";
    auto r = app::importArray(doc, req);
    ASSERT_FALSE(r.ok());
    const std::string& msg = r.status().message;
    // Core's message (expected vs actual), and the shape W^Q has now.
    EXPECT_EQ(msg, "after importing Wq (2×2): Wq: expected 4×2 (d_model × H·d_k), got 2×2 (the session's Wq is 4×3)");
    EXPECT_EQ(doc.revision(), rev);
    EXPECT_FALSE(doc.canUndo());
    EXPECT_TRUE(same(doc.session().input.Wq, before.input.Wq));
    EXPECT_TRUE(same(doc.session().input.Wk, before.input.Wk));

    // Other bad requests: each a message naming the problem, the document untouched.
    req.path = dir + "w22.txt";
    r = app::importArray(doc, req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, dir + "w22.txt: expected a .npy, .npz or .safetensors file");
    req.path = dir + "w22.npy";
    req.rows = "1:9";
    r = app::importArray(doc, req);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message.find("rows 1:9: out of range for 2 rows"), std::string::npos) << r.status().message;
    req.rows = "";
    req.slot = "Wz";
    r = app::importArray(doc, req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message.rfind("import: unknown slot 'Wz' (expected one of: X, ", 0), 0u) << r.status().message;
    req.slot = "Wq";
    req.path = dir + "missing.npy";
    r = app::importArray(doc, req);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message.find(dir + "missing.npy"), std::string::npos) << r.status().message;
    EXPECT_EQ(doc.revision(), rev);
    EXPECT_FALSE(doc.canUndo());
}

TEST_F(ExportDialog, ImportFromNpzByNameWithHeadSlice)
{
    // A 4×6 array whose columns 3..5 (head 1 of 2) become W^Q, as `attnscope import --head 1 --heads 2`.
    attn::Matrix wide(4, 6);
    for (int i = 0; i < 24; ++i) wide.data()[i] = float(i);
    attn::Matrix other = attn::Matrix::Zero(1, 1);
    ASSERT_TRUE(app::io::writeNpz(dir + "m.npz", {named("other", other), named("qkv", wide)}).ok());
    auto listed = app::listArrays(dir + "m.npz");
    ASSERT_TRUE(listed.ok()) << listed.status().message;
    ASSERT_EQ(listed->size(), 2u);
    EXPECT_EQ((*listed)[1].name, "qkv");
    EXPECT_EQ((*listed)[1].info, "float32 (4, 6)");

    app::ImportRequest req;
    req.path = dir + "m.npz";
    auto r = app::importArray(doc, req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, dir + "m.npz: choose an array name (Load lists the names in the file)");
    req.name = "qkv";
    req.head = 1;
    req.heads = 2;
    r = app::importArray(doc, req);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_TRUE(same(doc.session().input.Wq, attn::Matrix(wide.rightCols(3))));
}

TEST_F(ExportDialog, ImportUsesTheFileOrientationOfColumnLayout)
{
    // In column layout the session file stores W^Q transposed (H·d_k × d_model); the import takes the same
    // orientation as the file and `attnscope import`.
    doc.setSession(load(std::string(ATTNSCOPE_SOURCE_DIR) + "/tests/gui/data/column_layout.json"), "");
    EXPECT_EQ(app::slotShape(doc, "Wq"), "3×4");
    attn::Matrix m(3, 4);
    for (int i = 0; i < 12; ++i) m.data()[i] = 0.1f * float(i);
    ASSERT_TRUE(app::io::writeNpy(dir + "wq.npy", named("Wq", m)).ok());
    app::ImportRequest req;
    req.path = dir + "wq.npy";
    auto r = app::importArray(doc, req);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_TRUE(same(doc.sessionForSave("{}").input.Wq, m));
    EXPECT_TRUE(same(doc.session().input.Wq, attn::Matrix(m.transpose()))) << "stored canonically (row orientation)";
}

TEST_F(ExportDialog, PreviewRendersOnlyWhenSomethingChanged)
{
    app::FigurePreview p;
    fig::FigureOptions o;
    double t = 10.0;  // the caller's clock, in seconds
    EXPECT_TRUE(app::updatePreview(p, doc, o, 400, 300, t));
    EXPECT_EQ(p.renders, 1);
    ASSERT_TRUE(p.error.empty()) << p.error;
    ASSERT_GT(p.image.width, 0);
    EXPECT_EQ(p.image.pixels.size(), std::size_t(p.image.width) * std::size_t(p.image.height) * 4);
    EXPECT_TRUE(p.image.width <= 400 && p.image.height <= 300) << p.image.width << "×" << p.image.height << " fits the box";
    EXPECT_TRUE(p.image.width >= 392 || p.image.height >= 292) << "and fills it in one direction";
    const std::uint64_t v = p.version;

    for (int i = 0; i < 3; ++i) EXPECT_FALSE(app::updatePreview(p, doc, o, 400, 300, t += 1));
    EXPECT_FALSE(app::updatePreview(p, doc, o, 403, 301, t += 1)) << "a box a few pixels larger is the same box";
    EXPECT_EQ(p.renders, 1);
    EXPECT_EQ(p.version, v);

    o.annotate = true;
    EXPECT_TRUE(app::updatePreview(p, doc, o, 400, 300, t)) << "an option changed: at once";
    EXPECT_FALSE(app::updatePreview(p, doc, o, 400, 300, t));
    EXPECT_TRUE(app::updatePreview(p, doc, o, 600, 300, t)) << "the box changed: at once";
    EXPECT_EQ(p.renders, 3);

    // The document changed: rendered again, but while it keeps changing (a drag) at most every interval.
    doc.setCellInGesture(app::MatrixId::X, 0, 0, 3.0f);
    EXPECT_FALSE(app::updatePreview(p, doc, o, 600, 300, t + 0.1)) << "too soon after the last render";
    EXPECT_TRUE(app::updatePreview(p, doc, o, 600, 300, t += app::kPreviewInterval)) << "the document changed";
    doc.setCellInGesture(app::MatrixId::X, 0, 0, 4.0f);
    EXPECT_FALSE(app::updatePreview(p, doc, o, 600, 300, t + 0.1));
    EXPECT_TRUE(app::updatePreview(p, doc, o, 600, 300, t += app::kPreviewInterval));
    EXPECT_FALSE(app::updatePreview(p, doc, o, 600, 300, t += 1)) << "and then not again";
    EXPECT_EQ(p.renders, 5);

    o.panel = fig::PanelKind::Xkv;
    EXPECT_TRUE(app::updatePreview(p, doc, o, 600, 300, t));
    EXPECT_EQ(p.error, "panel xkv: the session is not in cross mode");
    EXPECT_TRUE(p.image.pixels.empty());
    EXPECT_FALSE(app::updatePreview(p, doc, o, 600, 300, t += 1)) << "errors are cached too";
    EXPECT_EQ(p.renders, 6);
}

TEST_F(ExportDialog, CodeIsMadeOnlyWhenSomethingChanged)
{
    app::ExportState st;
    EXPECT_TRUE(app::updateCode(st, doc));
    EXPECT_NE(st.code.find("import numpy as np"), std::string::npos);
    EXPECT_FALSE(app::updateCode(st, doc));
    st.codeLang = app::io::CodeLang::Torch;
    EXPECT_TRUE(app::updateCode(st, doc));
    EXPECT_NE(st.code.find("import torch"), std::string::npos);
    doc.setCellInGesture(app::MatrixId::X, 0, 0, 3.0f);
    EXPECT_TRUE(app::updateCode(st, doc));
    EXPECT_FALSE(app::updateCode(st, doc));
}

TEST_F(ExportDialog, DefaultPathsFollowTheSession)
{
    fig::FigureOptions o;
    EXPECT_EQ(app::defaultFigurePath(doc, o, fig::FigureFormat::Pdf), "seed_000_the_worked_example_weights.pdf");
    doc.setPath("/data/talks/translation.json");
    EXPECT_EQ(app::defaultFigurePath(doc, o, fig::FigureFormat::Pdf), "/data/talks/translation_weights.pdf");
    o.panel = fig::PanelKind::Scores;
    o.head = 1;
    EXPECT_EQ(app::defaultFigurePath(doc, o, fig::FigureFormat::Png), "/data/talks/translation_scores_head1.png");
    EXPECT_EQ(app::defaultDataPath(doc, app::DataFormat::Npz), "/data/talks/translation.npz");
    EXPECT_EQ(app::defaultDataPath(doc, app::DataFormat::CsvFolder), "/data/talks/translation_csv/");
    EXPECT_EQ(app::defaultScreenshotPath(doc), "/data/talks/translation_window.png");
    doc.setPath("");
    doc.edit([](attn::Session& s) { s.name = ""; });
    EXPECT_EQ(app::defaultScreenshotPath(doc), "attnscope_window.png");
    EXPECT_EQ(app::replaceExtension("a/b.pdf", ".svg"), "a/b.svg");
    EXPECT_EQ(app::replaceExtension("a/b", ".png"), "a/b.png");
}

// The dialog drawn with no GL at all (the preview has no texture then): opened with Ctrl+E, every tab, no
// crash, and the preview's place is laid out.
TEST_F(ExportDialog, DrawnWithTheNullBackend)
{
    ImGuiIO& io = createHeadlessImGui();
    app::AppState state;
    state.autosave = false;
    state.recordRects = true;
    state.doc.setSession(load(kPresets + "/seed004_translation_cross.json"), "");
    auto frame = [&] {
        state.doc.recomputeIfNeeded();
        ImGui::NewFrame();
        app::drawAllPanels(state);
        ImGui::Render();
    };
    frame();
    EXPECT_FALSE(state.exportDialog.open);
    io.KeyCtrl = true;
    io.KeysDown['E'] = true;  // GLFW_KEY_E, as the GLFW backend reports it
    frame();
    io.KeyCtrl = false;
    io.KeysDown['E'] = false;
    EXPECT_TRUE(state.exportDialog.open) << "Ctrl+E opens the dialog";
    for (int i = 0; i < 3; ++i) frame();
    EXPECT_TRUE(state.rects.count("export/preview")) << "the preview is laid out";
    EXPECT_TRUE(state.exportDialog.preview.error.empty()) << state.exportDialog.preview.error;
    EXPECT_EQ(state.exportDialog.preview.renders, 1) << "frames without changes do not render again";
    for (app::ExportTab t : {app::ExportTab::Data, app::ExportTab::Import, app::ExportTab::Code, app::ExportTab::Screenshot}) {
        state.exportDialog.tab = t;
        state.exportDialog.selectTab = true;
        for (int i = 0; i < 3; ++i) frame();
        EXPECT_EQ(state.exportDialog.tab, t);
    }
    EXPECT_FALSE(state.exportDialog.code.empty()) << "the Code tab made the program";
    ImGui::DestroyContext();
}

} // namespace
