// Helpers shared by the unit tests: random problems and tolerant comparisons that explain failures.
#pragma once

#include <attnscope/attention.h>

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace attn::test {

Matrix randomMatrix(std::mt19937& rng, int rows, int cols, float stddev = 1.0f);

struct ProblemSpec {
    Layout layout = Layout::Row;
    Mode mode = Mode::Self;
    Score score = Score::ScaledDot;
    int heads = 1;
    int kvHeads = 0;  // H_kv (grouped-query attention): K, V, W^K, W^V and their biases are H_kv heads wide; 0 = heads
    int T = 5, S = 5, M = 6, dk = 3, dv = 2, dqAdditive = 4, A = 3;
    bool biases = false;
    bool wo = false;
    bool causal = false, keyPadding = false, validLens = false, custom = false;
    float fill = -std::numeric_limits<float>::infinity();
    unsigned seed = 1;
};

// A random, valid problem in Row layout (toLayout converts).
void makeProblem(const ProblemSpec& p, AttentionInput& in, AttentionConfig& cfg);
// The same problem with every matrix transposed (Column layout); vectors unchanged.
AttentionInput transposed(const AttentionInput& in);

// abs+rel comparison: |a-b| <= atol + rtol·|b|. Fails with the max difference and first mismatches.
::testing::AssertionResult near(const Matrix& actual, const Matrix& expected, float atol, float rtol,
                                const std::string& what);

} // namespace attn::test
