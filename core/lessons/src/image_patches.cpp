// Image patches lesson (attnscope/lessons/image_patches.h).
#include "attnscope/lessons/image_patches.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

Expected<PatchGrid> patchify(const RgbImage& image, int patch, PatchFit fit)
{
    if (patch < 1) return invalidArgument("patch: expected a patch size of at least 1 pixel, got " + std::to_string(patch));
    if (image.width < 1 || image.height < 1)
        return invalidArgument("image: expected a non-empty image, got " + std::to_string(image.width) + "×" +
                               std::to_string(image.height));
    const std::size_t bytes = std::size_t(image.width) * std::size_t(image.height) * 3;
    if (image.rgb.size() != bytes)
        return invalidArgument("image: expected " + std::to_string(bytes) + " bytes (" + std::to_string(image.width) +
                               "×" + std::to_string(image.height) + "×3), got " + std::to_string(image.rgb.size()));
    const int cols = image.width / patch, rows = image.height / patch;
    const bool divisible = image.width % patch == 0 && image.height % patch == 0;
    if (fit == PatchFit::Refuse && !divisible)
        return invalidArgument("image: " + std::to_string(image.width) + "×" + std::to_string(image.height) +
                               " is not divisible into " + std::to_string(patch) + "×" + std::to_string(patch) +
                               " patches; crop to " + std::to_string(cols * patch) + "×" + std::to_string(rows * patch) +
                               " or choose a patch size dividing both");
    if (cols < 1 || rows < 1)
        return invalidArgument("patch: " + std::to_string(patch) + " is larger than the image (" +
                               std::to_string(image.width) + "×" + std::to_string(image.height) + ")");
    if (long(cols) * rows > kMaxPatchTokens)
        return invalidArgument("patch: " + std::to_string(cols) + "×" + std::to_string(rows) + " = " +
                               std::to_string(long(cols) * rows) + " patches, at most " + std::to_string(kMaxPatchTokens) +
                               " allowed; choose a larger patch size");

    PatchGrid g;
    g.patch = patch;
    g.cols = cols;
    g.rows = rows;
    g.usedWidth = cols * patch;
    g.usedHeight = rows * patch;
    g.originalWidth = image.width;
    g.originalHeight = image.height;
    const int D = 3 * patch * patch;
    g.tokens.resize(long(rows) * cols, D);
    for (int py = 0; py < rows; ++py)
        for (int px = 0; px < cols; ++px) {
            const long t = long(py) * cols + px;
            for (int y = 0; y < patch; ++y)
                for (int x = 0; x < patch; ++x) {
                    const std::size_t src = (std::size_t(py * patch + y) * image.width + std::size_t(px * patch + x)) * 3;
                    for (int c = 0; c < 3; ++c) g.tokens(t, (y * patch + x) * 3 + c) = float(image.rgb[src + c]) / 255.0f;
                }
        }
    return g;
}

Expected<RgbImage> unpatchify(const PatchGrid& g)
{
    const long D = 3L * g.patch * g.patch;
    if (g.patch < 1 || g.tokens.rows() != long(g.rows) * g.cols || g.tokens.cols() != D)
        return invalidArgument("tokens: expected " + shapeStr(long(g.rows) * g.cols, D) + " (patches × 3p²), got " +
                               shapeStr(g.tokens.rows(), g.tokens.cols()));
    RgbImage img;
    img.width = g.cols * g.patch;
    img.height = g.rows * g.patch;
    img.rgb.resize(std::size_t(img.width) * img.height * 3);
    for (int py = 0; py < g.rows; ++py)
        for (int px = 0; px < g.cols; ++px)
            for (int y = 0; y < g.patch; ++y)
                for (int x = 0; x < g.patch; ++x)
                    for (int c = 0; c < 3; ++c) {
                        const float v = g.tokens(long(py) * g.cols + px, (y * g.patch + x) * 3 + c);
                        const float b = std::clamp(std::round(v * 255.0f), 0.0f, 255.0f);
                        img.rgb[(std::size_t(py * g.patch + y) * img.width + std::size_t(px * g.patch + x)) * 3 + c] =
                            std::uint8_t(b);
                    }
    return img;
}

Expected<Session> patchSession(const PatchGrid& grid, const PatchSessionOptions& o)
{
    if (grid.tokens.size() == 0) return invalidArgument("grid: has no patches; patchify an image first");
    const int M = int(grid.tokens.cols());
    if (o.heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(o.heads));
    const int width = o.projection == PatchProjection::Identity ? M : o.dk;
    if (o.projection == PatchProjection::Random && (o.dk < 1 || o.dk > 4096))
        return invalidArgument("dk: expected 1 to 4096 for the random projection, got " + std::to_string(o.dk));
    if (width % o.heads != 0)
        return invalidArgument("heads: " + std::to_string(o.heads) + " does not divide the projected width " +
                               std::to_string(width));

    Session s;
    s.name = "Image patches";
    std::ostringstream desc;
    desc << grid.rows << "×" << grid.cols << " patches of " << grid.patch << "×" << grid.patch << " pixels; each is a token of "
         << M << " values (3·p², RGB in [0, 1]" << (o.centre ? " minus 0.5" : "") << "). W^Q = W^K = W^V = "
         << (o.projection == PatchProjection::Identity ? "identity" : "a seeded random projection to d_k = " + std::to_string(o.dk))
         << ".";
    s.description = desc.str();
    s.input.X = grid.tokens;
    if (o.centre) s.input.X.array() -= 0.5f;
    if (o.projection == PatchProjection::Identity) {
        s.input.Wq = Matrix::Identity(M, M);
        s.input.Wk = s.input.Wq;
        s.input.Wv = s.input.Wq;
    } else {
        // N(0, 1/d_k) entries preserve dot products in expectation, E[(x·W)·(y·W)] = x·y (the
        // Johnson–Lindenstrauss scaling), so the random projection attends like the identity, only noisier.
        NormalSampler rng(o.seed);
        const double sd = 1.0 / std::sqrt(double(o.dk));
        for (Matrix* W : {&s.input.Wq, &s.input.Wk, &s.input.Wv}) {
            W->resize(M, o.dk);
            for (int r = 0; r < M; ++r)
                for (int c = 0; c < o.dk; ++c) (*W)(r, c) = float(sd * rng.next());
        }
    }
    s.config.layout = Layout::Row;
    s.config.mode = Mode::Self;
    s.config.score = Score::ScaledDot;
    s.config.heads = o.heads;
    for (int r = 0; r < grid.rows; ++r)
        for (int c = 0; c < grid.cols; ++c) {
            std::string label = "r";  // appended, not "r" + ...: see bracketShape
            s.queryTokens.push_back(label.append(std::to_string(r)).append("c").append(std::to_string(c)));
        }
    s.keyTokens = s.queryTokens;
    return s;
}

Expected<Matrix> patchWeightsGrid(const AttentionResult& result, const PatchGrid& grid, int head, int query)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("head", head, int(result.heads.size()), "H"));
    const Matrix w = tokenRows(result.heads[head].weights, result.layout);
    const long n = long(grid.rows) * grid.cols;
    if (w.rows() != n || w.cols() != n)
        return invalidArgument("result: expected " + shapeStr(n, n) + " weights (one token per patch of the " +
                               std::to_string(grid.rows) + "×" + std::to_string(grid.cols) + " grid), got " +
                               shapeStr(w.rows(), w.cols()));
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("query", query, int(n), "patches"));
    Matrix g(grid.rows, grid.cols);
    for (int r = 0; r < grid.rows; ++r)
        for (int c = 0; c < grid.cols; ++c) g(r, c) = w(query, long(r) * grid.cols + c);
    return g;
}

} // namespace attn
