// Fixtures of the lesson tests (lesson_test_util.h).
#include "lesson_test_util.h"

#include <attnscope/layout.h>

#include <gtest/gtest.h>

#include <random>

namespace attn::test {

Session seedExample(Layout layout)
{
    Session s;
    AttentionInput& in = s.input;
    in.X = Matrix{{1, 1, 1, 0}, {1, 2, 1, 0}, {0, 1, 0, 1}, {0, 1, 1, 0}};
    in.Wq = Matrix{{1, 0, 1}, {1, 1, 1}, {0, 0, 1}, {1, 0, 0}};
    in.Wk = Matrix{{1, 0, 0}, {1, 1, 1}, {1, 0, 1}, {0, 1, 0}};
    in.Wv = Matrix{{1, 2, 0}, {1, 3, 1}, {1, 0, 2}, {1, 1, 0}};
    if (layout == Layout::Column) s.input = transposedInput(in);
    s.config.layout = layout;
    return s;
}

Matrix uniformMatrix(int r, int c, std::uint32_t seed, float scale)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    Matrix m(r, c);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < c; ++j) m(i, j) = u(rng);
    return m;
}

AttentionResult mustCompute(const AttentionInput& in, const AttentionConfig& cfg)
{
    auto r = compute(in, cfg);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message);
    return r.ok() ? *r : AttentionResult{};
}

} // namespace attn::test
