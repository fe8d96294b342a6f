// validate(): every bad-input message names the field with expected vs actual.
#include "test_util.h"

#include <attnscope/attention.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace attn {
namespace {

AttentionInput base()
{
    AttentionInput in;
    in.X = Matrix::Ones(4, 4);
    in.Wq = Matrix::Ones(4, 3);
    in.Wk = Matrix::Ones(4, 3);
    in.Wv = Matrix::Ones(4, 3);
    return in;
}

struct Case {
    const char* name;
    std::function<void(AttentionInput&, AttentionConfig&)> edit;
    const char* expected;  // exact message
};

class Messages : public ::testing::TestWithParam<Case> {};

TEST_P(Messages, NameTheFieldWithExpectedVsActual)
{
    AttentionInput in = base();
    AttentionConfig cfg;
    GetParam().edit(in, cfg);
    Expected<Dims> d = validate(in, cfg);
    ASSERT_FALSE(d.ok()) << "accepted invalid input";
    EXPECT_EQ(d.status().code, StatusCode::InvalidArgument);
    EXPECT_EQ(d.status().message, GetParam().expected);
    // compute() refuses with the same message and never computes.
    Expected<AttentionResult> r = compute(in, cfg);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message, GetParam().expected);
}

const float kNaN = std::nanf("");
const float kInf = INFINITY;

INSTANTIATE_TEST_SUITE_P(
    All, Messages,
    ::testing::Values(
        Case{"WkWidth", [](auto& in, auto&) { in.Wk = Matrix::Ones(4, 2); },
             "Wk: expected width H·d_k = 3 (the width of Wq) for a dot-product score, got 2"},
        Case{"WkRows", [](auto& in, auto&) { in.Wk = Matrix::Ones(3, 3); }, "Wk: expected 4×3 (d_model × H·d_k), got 3×3"},
        Case{"WkRowsColumnLayout",
             [](auto& in, auto& cfg) {
                 in = test::transposed(in);
                 in.Wk = Matrix::Ones(3, 3);
                 cfg.layout = Layout::Column;
             },
             "Wk: expected 3×4 (H·d_k × d_model), got 3×3"},
        Case{"HeadsNotDividing", [](auto&, auto& cfg) { cfg.heads = 2; },
             "heads: 2 does not divide H·d_q = 3 (the width of Wq)"},
        Case{"HeadsZero", [](auto&, auto& cfg) { cfg.heads = 0; }, "heads: expected at least 1, got 0"},
        Case{"NaN", [](auto& in, auto&) { in.X(1, 2) = kNaN; }, "X[1][2]: value is NaN; every input must be a finite number"},
        Case{"Inf", [](auto& in, auto&) { in.Wv(0, 1) = -kInf; }, "Wv[0][1]: value is -inf; every input must be a finite number"},
        Case{"BiasNaN",
             [](auto& in, auto&) {
                 in.bq = Vector::Zero(3);
                 in.bq[2] = kNaN;
             },
             "bq[2]: value is NaN; every input must be a finite number"},
        Case{"MissingX", [](auto& in, auto&) { in.X.resize(0, 0); }, "X: required in self mode, but it is missing or empty"},
        Case{"MissingXkv", [](auto&, auto& cfg) { cfg.mode = Mode::Cross; },
             "X_kv: required in cross mode, but it is missing or empty"},
        Case{"XkvWidth",
             [](auto& in, auto& cfg) {
                 cfg.mode = Mode::Cross;
                 in.Xkv = Matrix::Ones(6, 5);
             },
             "X_kv: expected 6×4 (n_kv × d_model), got 6×5"},
        Case{"DirectMissingQ", [](auto&, auto& cfg) { cfg.mode = Mode::Direct; },
             "Q: required in direct mode, but it is missing or empty"},
        Case{"DirectV",
             [](auto& in, auto& cfg) {
                 cfg.mode = Mode::Direct;
                 in.Q = Matrix::Ones(2, 3);
                 in.K = Matrix::Ones(5, 3);
                 in.V = Matrix::Ones(4, 2);
             },
             "V: expected 5×2 (n_k × H·d_v), got 4×2"},
        Case{"BiasLength", [](auto& in, auto&) { in.bk = Vector::Zero(2); }, "bk: expected 3 values (H·d_k), got 2"},
        Case{"Wo", [](auto& in, auto&) { in.Wo = Matrix::Ones(2, 5); }, "Wo: expected 3×5 (H·d_v × d_out), got 2×5"},
        Case{"BoWithoutWo", [](auto& in, auto&) { in.bo = Vector::Zero(3); },
             "bo: given without Wo; bo is added after the output projection Wo"},
        Case{"KeyPadding", [](auto& in, auto&) { in.mask.keyPadding = {0, 1}; },
             "mask.key_padding: expected 4 flags (one per key), got 2"},
        Case{"ValidLensCount", [](auto& in, auto&) { in.mask.validLens = {1, 2, 3}; },
             "mask.valid_lens: expected 1 or T = 4 values (one per query), got 3"},
        Case{"ValidLensNegative", [](auto& in, auto&) { in.mask.validLens = {-1}; },
             "mask.valid_lens[0]: expected a length ≥ 0, got -1"},
        Case{"Custom", [](auto& in, auto&) { in.mask.custom = MaskMatrix::Zero(4, 3); },
             "mask.custom: expected 4×4 (n_q × n_k), got 4×3"},
        Case{"FillNaN", [](auto& in, auto&) { in.mask.fill = kNaN; }, "mask.fill: expected -inf or a finite number, got NaN"},
        Case{"FillPlusInf", [](auto& in, auto&) { in.mask.fill = kInf; }, "mask.fill: expected -inf or a finite number, got inf"},
        Case{"AdditiveMissing", [](auto&, auto& cfg) { cfg.score = Score::Additive; },
             "additive.Wq: required for the additive score, but it is missing or empty"},
        Case{"AdditiveWk",
             [](auto& in, auto& cfg) {
                 cfg.score = Score::Additive;
                 in.additive.Aq = Matrix::Ones(3, 2);
                 in.additive.Ak = Matrix::Ones(2, 2);
                 in.additive.wv = Vector::Ones(2);
             },
             "additive.Wk: expected 3×2 (d_k × hidden), got 2×2"},
        Case{"AdditiveWv",
             [](auto& in, auto& cfg) {
                 cfg.score = Score::Additive;
                 in.additive.Aq = Matrix::Ones(3, 2);
                 in.additive.Ak = Matrix::Ones(3, 2);
                 in.additive.wv = Vector::Ones(5);
             },
             "additive.wv: expected 2 values (hidden, the width of additive.Wq), got 5"},
        Case{"ScaleOnAdditive",
             [](auto& in, auto& cfg) {
                 cfg.score = Score::Additive;
                 cfg.scale = 2.0f;
                 in.additive.Aq = Matrix::Ones(3, 2);
                 in.additive.Ak = Matrix::Ones(3, 2);
                 in.additive.wv = Vector::Ones(2);
             },
             "scale: only applies to the scaled_dot and dot scores, not additive"},
        // Grouped-query attention: H_kv divides H, and K/V count H_kv heads as wide as the query heads.
        Case{"KvHeadsNotDividing", [](auto&, auto& cfg) { cfg.heads = 6; cfg.kvHeads = 4; },
             "kv_heads: 4 does not divide heads = 6"},
        Case{"KvHeadsAboveHeads", [](auto&, auto& cfg) { cfg.heads = 3; cfg.kvHeads = 6; },
             "kv_heads: expected at most heads = 3, got 6"},
        Case{"KvHeadsNegative", [](auto&, auto& cfg) { cfg.kvHeads = -1; },
             "kv_heads: expected at least 1 (or 0 for as many as heads), got -1"},
        Case{"GroupedWkWidth",
             [](auto& in, auto& cfg) {
                 cfg.heads = 3;
                 cfg.kvHeads = 1;
                 in.Wk = Matrix::Ones(4, 2);
             },
             "Wk: expected 4×1 (d_model × H_kv·d_k), got 4×2"},
        Case{"GroupedWkFullWidth",
             [](auto& in, auto& cfg) {
                 cfg.heads = 6;
                 cfg.kvHeads = 2;
                 in.Wq = Matrix::Ones(4, 6);
                 in.Wv = Matrix::Ones(4, 2);
                 in.Wk = Matrix::Ones(4, 6);
             },
             "Wk: expected 4×2 (d_model × H_kv·d_k), got 4×6"},
        Case{"GroupedWkColumnLayout",
             [](auto& in, auto& cfg) {
                 in = test::transposed(in);
                 in.Wk = Matrix::Ones(3, 4);
                 cfg.layout = Layout::Column;
                 cfg.heads = 3;
                 cfg.kvHeads = 1;
             },
             "Wk: expected 1×4 (H_kv·d_k × d_model), got 3×4"},
        Case{"GroupedDirectK",
             [](auto& in, auto& cfg) {
                 cfg.mode = Mode::Direct;
                 cfg.heads = 4;
                 cfg.kvHeads = 2;
                 in.Q = Matrix::Ones(2, 8);
                 in.K = Matrix::Ones(5, 8);
                 in.V = Matrix::Ones(5, 4);
             },
             "K: expected 5×4 (n_k × H_kv·d_k), got 5×8"},
        Case{"GroupedWvNotDividing",
             [](auto& in, auto& cfg) {
                 cfg.heads = 6;
                 cfg.kvHeads = 2;
                 in.Wq = Matrix::Ones(4, 6);
                 in.Wk = Matrix::Ones(4, 2);
                 in.Wv = Matrix::Ones(4, 3);
             },
             "kv_heads: 2 does not divide H_kv·d_v = 3 (the width of Wv)"},
        Case{"GroupedBiasLength",
             [](auto& in, auto& cfg) {
                 cfg.heads = 3;
                 cfg.kvHeads = 1;
                 in.Wk = Matrix::Ones(4, 1);
                 in.Wv = Matrix::Ones(4, 1);
                 in.bv = Vector::Zero(3);
             },
             "bv: expected 1 values (H_kv·d_v), got 3"},
        Case{"GroupedWo",
             [](auto& in, auto& cfg) {
                 cfg.heads = 3;
                 cfg.kvHeads = 1;
                 in.Wk = Matrix::Ones(4, 1);
                 in.Wv = Matrix::Ones(4, 2);
                 in.Wo = Matrix::Ones(2, 5);  // H_kv·d_v rows: the concatenation is H·d_v = 6 wide
             },
             "Wo: expected 6×5 (H·d_v × d_out), got 2×5"},
        Case{"AbsurdSize", [](auto& in, auto&) { in.X.resize(1, (1 << 20) + 1); },
             "X: 1048577 is too large (at most 1048576)"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Validate, DimsOfAGroupedQueryProblem)
{
    AttentionInput in = base();
    in.Wq = Matrix::Ones(4, 12);  // 6 query heads of d_k = 2
    in.Wk = Matrix::Ones(4, 4);   // 2 KV heads of d_k = 2
    in.Wv = Matrix::Ones(4, 6);   // 2 KV heads of d_v = 3
    AttentionConfig cfg;
    cfg.heads = 6;
    cfg.kvHeads = 2;
    Expected<Dims> d = validate(in, cfg);
    ASSERT_TRUE(d.ok()) << d.status().message;
    EXPECT_EQ(d->H, 6);
    EXPECT_EQ(d->Hkv, 2);
    EXPECT_EQ(d->group(), 3);
    EXPECT_EQ(d->dq, 2);
    EXPECT_EQ(d->dk, 2);
    EXPECT_EQ(d->dv, 3);
    EXPECT_EQ(d->O, 18);  // no Wo: the output is the concatenation of the 6 heads
    EXPECT_EQ(d->kvHead(0), 0);
    EXPECT_EQ(d->kvHead(2), 0);
    EXPECT_EQ(d->kvHead(3), 1);
    EXPECT_EQ(d->kvHead(5), 1);
    // kv_heads 0 (the default) is as many as heads.
    cfg.heads = 2;
    cfg.kvHeads = 0;
    in.Wq = Matrix::Ones(4, 4);
    Expected<Dims> mha = validate(in, cfg);
    ASSERT_TRUE(mha.ok()) << mha.status().message;
    EXPECT_EQ(mha->Hkv, 2);
    EXPECT_EQ(mha->group(), 1);
}

TEST(Validate, DimsOfAValidProblem)
{
    AttentionInput in = base();
    in.Wq = Matrix::Ones(4, 6);
    in.Wk = Matrix::Ones(4, 6);
    in.Wv = Matrix::Ones(4, 4);
    in.Wo = Matrix::Ones(4, 5);
    AttentionConfig cfg;
    cfg.heads = 2;
    Expected<Dims> d = validate(in, cfg);
    ASSERT_TRUE(d.ok()) << d.status().message;
    EXPECT_EQ(d->T, 4);
    EXPECT_EQ(d->S, 4);
    EXPECT_EQ(d->M, 4);
    EXPECT_EQ(d->dk, 3);
    EXPECT_EQ(d->dv, 2);
    EXPECT_EQ(d->O, 5);
}

TEST(Validate, AdditiveInDirectModeAllowsDifferentQueryAndKeyWidths)
{
    AttentionInput in;
    in.Q = Matrix::Ones(2, 5);
    in.K = Matrix::Ones(3, 4);
    in.V = Matrix::Ones(3, 2);
    in.additive.Aq = Matrix::Ones(5, 6);
    in.additive.Ak = Matrix::Ones(4, 6);
    in.additive.wv = Vector::Ones(6);
    AttentionConfig cfg;
    cfg.mode = Mode::Direct;
    cfg.score = Score::Additive;
    Expected<AttentionResult> r = compute(in, cfg);
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_EQ(r->heads[0].scores.rows(), 2);
    EXPECT_EQ(r->heads[0].scores.cols(), 3);
    // w_vᵀ·tanh(q·A_q + k·A_k) with all ones: 6 · tanh(5 + 4).
    EXPECT_NEAR(r->heads[0].scores(0, 0), 6.0f * std::tanh(9.0f), 1e-5f);
}

} // namespace
} // namespace attn
