// Tests of the image patches lesson (attnscope/lessons/image_patches.h): patchify round trip and ordering, non-divisible sizes, weights of identical patches.
#include "lesson_test_util.h"

#include "attnscope/lessons/image_patches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

RgbImage randomImage(int w, int h, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    RgbImage img;
    img.width = w;
    img.height = h;
    img.rgb.resize(std::size_t(w) * h * 3);
    for (auto& b : img.rgb) b = std::uint8_t(rng() & 0xff);
    return img;
}

TEST(LessonPatches, RoundTripAndDocumentedOrdering)
{
    const RgbImage img = randomImage(12, 8, 91);
    auto g = patchify(img, 4, PatchFit::Refuse);
    ASSERT_TRUE(g.ok()) << g.status().message;
    EXPECT_EQ(g->cols, 3);
    EXPECT_EQ(g->rows, 2);
    EXPECT_EQ(g->tokens.rows(), 6);
    EXPECT_EQ(g->tokens.cols(), 48);  // 4×4×3, as in the seed
    // Token 4 is patch (row 1, col 1); value (y·p + x)·3 + c is channel c of pixel (4 + x, 4 + y).
    const int x = 2, y = 3, c = 1;
    const std::size_t src = (std::size_t(4 + y) * 12 + (4 + x)) * 3 + c;
    EXPECT_FLOAT_EQ(g->tokens(4, (y * 4 + x) * 3 + c), img.rgb[src] / 255.0f);
    auto back = unpatchify(*g);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->rgb, img.rgb);
}

TEST(LessonPatches, RefusesOrCropsNonDivisibleSizes)
{
    const RgbImage img = randomImage(10, 9, 92);
    auto refused = patchify(img, 4, PatchFit::Refuse);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().message,
              "image: 10×9 is not divisible into 4×4 patches; crop to 8×8 or choose a patch size dividing both");
    auto cropped = patchify(img, 4, PatchFit::Crop);
    ASSERT_TRUE(cropped.ok());
    EXPECT_EQ(cropped->usedWidth, 8);
    EXPECT_EQ(cropped->usedHeight, 8);
    EXPECT_FALSE(patchify(img, 11, PatchFit::Crop).ok());
    RgbImage broken = img;
    broken.rgb.resize(100);
    EXPECT_EQ(patchify(broken, 2, PatchFit::Crop).status().message, "image: expected 270 bytes (10×9×3), got 100");
}

TEST(LessonPatches, IdenticalPatchesGetIdenticalWeights)
{
    RgbImage img = randomImage(8, 8, 93);  // 2×2 patches of 4×4
    // Copy patch (0, 0) onto patch (1, 1).
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x)
            for (int c = 0; c < 3; ++c) img.rgb[((4 + y) * 8 + 4 + x) * 3 + c] = img.rgb[(y * 8 + x) * 3 + c];
    auto g = patchify(img, 4, PatchFit::Refuse);
    ASSERT_TRUE(g.ok());
    for (PatchProjection proj : {PatchProjection::Identity, PatchProjection::Random}) {
        PatchSessionOptions o;
        o.projection = proj;
        auto s = patchSession(*g, o);
        ASSERT_TRUE(s.ok()) << s.status().message;
        AttentionResult r = mustCompute(s->input, s->config);
        for (int q = 0; q < 4; ++q) {
            auto grid = patchWeightsGrid(r, *g, 0, q);
            ASSERT_TRUE(grid.ok());
            EXPECT_NEAR(grid->sum(), 1.0f, 1e-6f);
            EXPECT_EQ((*grid)(0, 0), (*grid)(1, 1));  // same key vector, same score, same weight
        }
    }
}

TEST(LessonPatches, SessionOptionsAreValidated)
{
    auto g = patchify(randomImage(4, 4, 94), 2, PatchFit::Refuse);
    ASSERT_TRUE(g.ok());
    PatchSessionOptions o;
    o.heads = 5;
    EXPECT_EQ(patchSession(*g, o).status().message, "heads: 5 does not divide the projected width 12");
    o.heads = 1;
    o.projection = PatchProjection::Random;
    o.dk = 0;
    EXPECT_FALSE(patchSession(*g, o).ok());
    o.dk = 6;
    auto a = patchSession(*g, o), b = patchSession(*g, o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->input.Wq, b->input.Wq);  // seeded: the same projection every time
    EXPECT_EQ(a->queryTokens[3], "r1c1");
}
