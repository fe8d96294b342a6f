// Tests of the lesson presets: every assets/presets/lesson_*.json loads, computes and reproduces the seed posts' numbers.
#include "lesson_test_util.h"

#include "attnscope/lessons/lessons.h"
#include "attnscope/preset_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <random>

using namespace attn;
using namespace attn::test;

TEST(LessonPresets, EveryLessonPresetLoadsAndComputes)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "presets";
    int found = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("lesson_", 0) != 0 || e.path().extension() != ".json") continue;
        ++found;
        auto s = loadSession(e.path().string());
        ASSERT_TRUE(s.ok()) << name << ": " << s.status().message;
        auto r = compute(s->input, s->config);
        EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.status().message);
    }
    EXPECT_GE(found, 1) << "no lesson_*.json presets in " << dir;
}

namespace {
Session lessonPreset(const std::string& name)
{
    auto s = loadSession(std::string(ATTNSCOPE_SOURCE_DIR) + "/assets/presets/" + name);
    EXPECT_TRUE(s.ok()) << name << ": " << (s.ok() ? "" : s.status().message);
    return s.ok() ? *s : Session{};
}
} // namespace

TEST(LessonPresets, LessonPresetsReproduceTheSeeds)
{
    // Seed 000's printed result (4 decimals): within 1e-4.
    const Matrix seedOut{{3.9492f, 7.8588f, 3.9577f}, {3.9924f, 7.9784f, 3.9934f},
                         {3.8407f, 7.5669f, 3.8595f}, {3.7902f, 7.4482f, 3.8228f}};
    Session row = lessonPreset("lesson_vector_to_matrix.json");
    EXPECT_LT((mustCompute(row.input, row.config).output - seedOut).cwiseAbs().maxCoeff(), 1e-4f);
    Session col = lessonPreset("lesson_two_formulas_column.json");
    ASSERT_EQ(col.config.layout, Layout::Column);
    EXPECT_LT((mustCompute(col.input, col.config).output.transpose() - seedOut).cwiseAbs().maxCoeff(), 1e-4f);

    // Seed 004's masked softmax: with V = I the output is the weights; printed to 4 decimals.
    const Matrix seedW{{1, 0, 0, 0}, {0.4125f, 0.3273f, 0.2602f, 0}, {0.5254f, 0.4746f, 0, 0},
                       {0.3117f, 0.2130f, 0.1801f, 0.2952f}};
    Session ms = lessonPreset("lesson_masked_softmax.json");
    ms.config.cpuPath = CpuPath::Reference;  // exact zeros (see MaskedKeysHaveZeroWeight)
    AttentionResult r = mustCompute(ms.input, ms.config);
    EXPECT_LT((r.output - seedW).cwiseAbs().maxCoeff(), 1e-4f);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            if (seedW(i, j) == 0.0f) {
                EXPECT_EQ(r.heads[0].weights(i, j), 0.0f);
            }

    // The scaling preset: every row's raw scores overflow a naive softmax; the scaled ones do not.
    Session sc = lessonPreset("lesson_scaling_overflow.json");
    for (int i = 0; i < sc.input.Q.rows(); ++i) {
        auto d = scalingRowDemo(Vector(sc.input.Q.row(i).transpose()), sc.input.K);
        ASSERT_TRUE(d.ok());
        EXPECT_TRUE(d->naiveUnscaled.overflowed) << "row " << i;
        EXPECT_FALSE(d->naiveScaled.overflowed) << "row " << i;
    }

    // The additive preset has queries and keys of different sizes (seed 004: 4 and 3).
    Session add = lessonPreset("lesson_additive.json");
    EXPECT_EQ(add.input.Q.cols(), 4);
    EXPECT_EQ(add.input.K.cols(), 3);
    AttentionResult ar = mustCompute(add.input, add.config);
    auto b = additiveBreakdown(add.input, ar, 0, 1, 2);
    ASSERT_TRUE(b.ok());
    EXPECT_NEAR(b->score, b->resultScore, 1e-5f);
    auto dims = validate(add.input, add.config);
    ASSERT_TRUE(dims.ok());
    const auto steps = productShapes(*dims, Layout::Row, Mode::Direct, false, Score::Additive);
    EXPECT_EQ(steps[0].text, "Q·A_q: [2, 4]·[4, 5] → [2, 5]");
    EXPECT_EQ(steps[1].text, "K·A_k: [3, 3]·[3, 5] → [3, 5]");
}
