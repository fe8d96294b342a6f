// Attention over image patches (seed 003, "MSA of images"): an image cut into p×p patches, each a
// token, a self-attention session over them, and the weights of one patch back on the grid.
#pragma once

#include "attnscope/attention.h"
#include "attnscope/preset_io.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstdint>
#include <vector>

namespace attn {

// An 8-bit RGB image: `rgb` holds width·height·3 bytes, row by row from the top, R G B per pixel.
struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> rgb;
};

enum class PatchFit { Refuse, Crop };   // non-divisible sizes: refuse with a message, or crop right/bottom

// Tokens of a p×p patch grid (seed 003, "MSA of images"). Token t = py·cols + px (patches in raster
// order, left to right, top to bottom). Its 3·p² values are the patch's pixels in raster order with R, G,
// B interleaved: value (y·p + x)·3 + c is channel c of pixel (px·p + x, py·p + y), as byte/255 in [0, 1].
struct PatchGrid {
    int patch = 0;                 // p
    int cols = 0, rows = 0;        // patches across, down
    int usedWidth = 0, usedHeight = 0;  // the cropped image size (cols·p × rows·p)
    int originalWidth = 0, originalHeight = 0;
    Matrix tokens;                 // (rows·cols) × 3p², values in [0, 1]
};
// Errors (InvalidArgument): p < 1; empty image or rgb not width·height·3 bytes ("image: expected
// 12288 bytes (64×64×3), got 100"); with Refuse, width or height not divisible by p ("image: 65×64 is
// not divisible into 4×4 patches; crop to 64×64 or choose a p dividing both"); with Crop, p larger than
// the image; more than kMaxPatchTokens patches.
// 64×64 patches: the result keeps T×T scores, mask and weights, 64 MiB each in float at this size.
inline constexpr int kMaxPatchTokens = 4096;
Expected<PatchGrid> patchify(const RgbImage& image, int patch, PatchFit fit);

// The inverse of patchify for the used (cropped) area: tokens back to bytes (rounded). Round trip exact.
// Errors (InvalidArgument): tokens not (rows·cols) × 3p².
Expected<RgbImage> unpatchify(const PatchGrid& grid);

enum class PatchProjection { Identity, Random };
struct PatchSessionOptions {
    PatchProjection projection = PatchProjection::Identity;  // default: W = I, q = k = v = the patch
    bool centre = true;        // subtract 0.5 from every value so that dark and bright are ±; default on
    int dk = 16;               // Random only: projected width d_k = d_v; default 16
    std::uint64_t seed = 1;    // Random only: N(0, 1/d_k) entries (dot products kept in expectation), seeded; default 1
    int heads = 1;             // must divide the projected width; default 1
};
// A self-attention session whose tokens are the patches: X = tokens (minus 0.5 when centre), Wq = Wk =
// Wv = identity (3p² wide) or a seeded random projection to d_k, ScaledDot, Row layout. Token labels are
// "r<row>c<col>". Errors (InvalidArgument): dk < 1, heads < 1 or not dividing the width, an empty grid.
Expected<Session> patchSession(const PatchGrid& grid, const PatchSessionOptions& options);

// The weights of query patch `query` over all key patches, as a rows×cols grid (entry (r, c) is the
// weight of key patch r·cols + c). Errors (InvalidArgument): head/query out of range; the result's
// T or S not equal to rows·cols.
Expected<Matrix> patchWeightsGrid(const AttentionResult& result, const PatchGrid& grid, int head, int query);

} // namespace attn
