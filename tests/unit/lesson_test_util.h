// Fixtures of the lesson tests (test_lesson_*.cpp): the seed posts' worked example, seeded matrices, and a
// compute that fails the test instead of returning an error.
#pragma once

#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <cstdint>

namespace attn::test {

// Tolerance for comparing two float computations of the same sum in different orders: float32 has
// ε = 1.2e-7; sums here have at most ~64 terms of magnitude ≤ ~50, so rounding stays far below 1e-4.
inline constexpr float kSumTol = 1e-4f;

// Seed 000's worked example (X 4×4, W^Q/W^K/W^V 4×3), stated for `layout`.
Session seedExample(Layout layout = Layout::Row);

// r×c entries uniform in [-scale, scale] from mt19937(seed).
Matrix uniformMatrix(int r, int c, std::uint32_t seed, float scale = 1.0f);

// compute(), failing the current test (and returning an empty result) on an error.
AttentionResult mustCompute(const AttentionInput& in, const AttentionConfig& cfg);

} // namespace attn::test
