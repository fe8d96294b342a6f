// Weights in their own format (issue 18; attnscope/weight_matrix.h): every quantized product kernel (the GEMV of a
// few rows, the panels of many) against the naive oracle (the tensor dequantized whole by GgufFile::dequantize,
// GGML's bit-exact reference, then a float32 product), and whole decoders loaded both ways (views vs
// DecoderLoadOptions::dequantize) giving the same hidden states and logits, for a forward, an appended token and an
// ablation recompute; the burst team an appended token's products run on. SmolLM2's case skips when scripts/setup.sh has not installed it.
#include <attnscope/decoder.h>
#include <attnscope/gguf.h>
#include <attnscope/weight_formats.h>
#include <attnscope/weight_matrix.h>

#include "burst_team.h"
#include "lm_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

namespace {

using attn::GgmlType;
using attn::Matrix;

// [SECTION] a GGUF in memory with one tensor of random blocks

struct Tensor {
    std::string bytes;                          // the whole file (the GgufFile reads it in place)
    std::shared_ptr<const attn::GgufFile> file;
    const attn::GgufTensorInfo* info = nullptr;
};

// A random IEEE half with a sane magnitude (2^-6 … 2^-2, either sign): a block's scale.
std::uint16_t randomHalf(std::mt19937& rng)
{
    std::uniform_int_distribution<int> exp(9, 13), mant(0, 1023), sign(0, 1);
    return static_cast<std::uint16_t>((sign(rng) << 15) | (exp(rng) << 10) | mant(rng));
}

void putHalf(std::string& b, std::size_t at, std::uint16_t h) { std::memcpy(&b[at], &h, 2); }

// Where each type keeps its half-float scales within a block (the rest of a block is any bytes: quants).
std::vector<std::size_t> halfFields(GgmlType t)
{
    switch (t) {
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: return {0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q6_K: return {208};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    default: return {};
    }
}

Tensor makeTensor(GgmlType type, std::int64_t in, std::int64_t rows, unsigned seed)
{
    std::mt19937 rng(seed);
    const std::size_t rowBytes = static_cast<std::size_t>(in / attn::ggmlBlockSize(type)) * attn::ggmlBlockBytes(type);
    std::string data(rowBytes * static_cast<std::size_t>(rows), '\0');
    std::uniform_int_distribution<int> byte(0, 255);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    if (type == GgmlType::F32) {
        for (std::size_t i = 0; i < data.size(); i += 4) {
            const float f = normal(rng);
            std::memcpy(&data[i], &f, 4);
        }
    } else if (type == GgmlType::F16) {
        for (std::size_t i = 0; i < data.size(); i += 2) putHalf(data, i, randomHalf(rng));
    } else if (type == GgmlType::BF16) {
        for (std::size_t i = 0; i < data.size(); i += 2) {
            const float f = normal(rng);
            std::uint32_t bits;
            std::memcpy(&bits, &f, 4);
            putHalf(data, i, static_cast<std::uint16_t>(bits >> 16));
        }
    } else {
        for (char& c : data) c = static_cast<char>(byte(rng));
        const std::size_t bb = attn::ggmlBlockBytes(type);
        for (std::size_t blk = 0; blk < data.size(); blk += bb)
            for (std::size_t at : halfFields(type)) putHalf(data, blk + at, randomHalf(rng));
    }
    Tensor t;
    auto u32 = [&](std::uint32_t v) { t.bytes.append(reinterpret_cast<const char*>(&v), 4); };
    auto u64 = [&](std::uint64_t v) { t.bytes.append(reinterpret_cast<const char*>(&v), 8); };
    t.bytes = "GGUF";
    u32(3);
    u64(1);
    u64(0);
    u64(1);
    t.bytes += "w";
    u32(2);
    u64(static_cast<std::uint64_t>(in));
    u64(static_cast<std::uint64_t>(rows));
    u32(static_cast<std::uint32_t>(type));
    u64(0);
    t.bytes.resize((t.bytes.size() + 31) / 32 * 32, '\0');
    t.bytes += data;
    auto f = attn::GgufFile::parse(reinterpret_cast<const std::uint8_t*>(t.bytes.data()), t.bytes.size(),
                                   std::string("mem-") + attn::ggmlTypeName(type));
    EXPECT_TRUE(f.ok()) << f.status().message;
    if (!f.ok()) return t;
    t.file = std::make_shared<const attn::GgufFile>(std::move(*f));
    t.info = t.file->tensor("w");
    return t;
}

// The oracle: W (in×out) with output column j = the tensor's row row0 + order[j], from the whole tensor
// dequantized by GGML's reference (GgufFile::dequantize), independent of the view's row addressing.
Matrix oracleWeights(const Tensor& t, std::int64_t row0, std::int64_t rows, const std::vector<int>& order)
{
    Matrix stored(t.info->rows(), t.info->dims[0]);
    EXPECT_TRUE(t.file->dequantize(*t.info, stored.data(), static_cast<std::size_t>(stored.size())).ok());
    Matrix w(stored.cols(), rows);
    for (std::int64_t j = 0; j < rows; ++j)
        w.col(j) = stored.row(row0 + (order.empty() ? j : order[static_cast<std::size_t>(j)])).transpose();
    return w;
}

// The tolerance: the kernels sum in another order (and apply a block's scale to its sum, d·Σq·x, where the oracle
// sums (d·q)·x), so each output differs from the oracle's by float32 rounding of the dot product: at most about
// in · 2⁻²⁴ · Σ|x_k·w_kj| (3·10⁻⁵ for in = 512 in the worst case, ~10⁻⁶ typically). 1e-5 of Σ|x·w| holds
// that; a wrong nibble, scale, min or row is off by the size of the terms themselves (> 1e-2 of Σ|x·w|).
void expectClose(const Matrix& x, const Matrix& w, const Matrix& got, const std::string& what)
{
    const Matrix want = x * w;
    const Matrix scale = x.cwiseAbs() * w.cwiseAbs();
    ASSERT_EQ(got.rows(), want.rows()) << what;
    ASSERT_EQ(got.cols(), want.cols()) << what;
    double worst = 0;
    for (Eigen::Index i = 0; i < want.rows(); ++i)
        for (Eigen::Index j = 0; j < want.cols(); ++j) {
            ASSERT_TRUE(std::isfinite(got(i, j))) << what << " (" << i << ", " << j << ")";
            worst = std::max(worst, std::abs(double(got(i, j)) - double(want(i, j))) / std::max(double(scale(i, j)), 1e-30));
        }
    EXPECT_LE(worst, 1e-5) << what;
}

struct KernelCase {
    GgmlType type;
    std::int64_t in;  // a multiple of the block; odd block counts and, for plain floats, an odd width
};

class Kernels : public ::testing::TestWithParam<KernelCase> {};

TEST_P(Kernels, GemvAndPanelsEqualDequantizeThenProduct)
{
    const KernelCase k = GetParam();
    const std::int64_t rows = 45;  // odd: tasks of 64 columns and panels end mid-way
    const Tensor t = makeTensor(k.type, k.in, rows, 17 + static_cast<unsigned>(k.type));
    ASSERT_NE(t.info, nullptr);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // A row order (a permutation of the 37 rows from row 4 on: row0 and order together), as a llama GGUF's Q/K.
    const std::int64_t row0 = 4, count = 37;
    std::vector<int> order(static_cast<std::size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (const bool ordered : {false, true}) {
        const std::vector<int> o = ordered ? order : std::vector<int>{};
        auto w = attn::WeightMatrix::quantized(t.file, *t.info, row0, count, o);
        ASSERT_TRUE(w.ok()) << w.status().message;
        ASSERT_TRUE(w->isQuantized());
        EXPECT_EQ(w->inputs(), k.in);
        EXPECT_EQ(w->outputs(), count);
        const Matrix oracle = oracleWeights(t, row0, count, o);
        EXPECT_EQ(w->toMatrix(), oracle) << "toMatrix is dequantizeRow's, bit for bit";
        for (const Eigen::Index n : {1, 3, 8, 9, 70}) {  // ≤ 8: GEMV; above: panels and GEMM
            Matrix x(n, k.in);
            for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
            Matrix got;
            attn::product(x, *w, got);
            expectClose(x, oracle, got, std::string(attn::ggmlTypeName(k.type)) + " n=" + std::to_string(n) +
                                            (ordered ? " ordered" : ""));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, Kernels,
                         ::testing::Values(KernelCase{GgmlType::Q4_0, 96}, KernelCase{GgmlType::Q4_1, 96},
                                           KernelCase{GgmlType::Q8_0, 96}, KernelCase{GgmlType::Q4_K, 768},
                                           KernelCase{GgmlType::Q6_K, 768}, KernelCase{GgmlType::F16, 37},
                                           KernelCase{GgmlType::BF16, 37}, KernelCase{GgmlType::F32, 37},
                                           // the generic path: a row dequantized into a buffer, then a dot
                                           KernelCase{GgmlType::Q5_0, 96}, KernelCase{GgmlType::Q5_1, 64},
                                           KernelCase{GgmlType::Q2_K, 256}, KernelCase{GgmlType::Q3_K, 256},
                                           KernelCase{GgmlType::Q5_K, 512}, KernelCase{GgmlType::IQ4_NL, 96},
                                           KernelCase{GgmlType::IQ4_XS, 512}),
                         [](const auto& info) { return std::string(attn::ggmlTypeName(info.param.type)); });

// The GEMV takes Q8_0, Q4_0 and Q4_1 rows 4 at a time within tasks of 64 output columns: 71 outputs make one full
// task and one of 7 (a group of 4, then 3 rows one by one), 7 blocks an odd row; in row order and permuted.
TEST(WeightMatrix, GemvGroupsOfRowsAndTheirTailsEqualTheOracle)
{
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
        const std::int64_t in = 7 * 32, rows = 71;
        const Tensor t = makeTensor(type, in, rows, 40 + static_cast<unsigned>(type));
        ASSERT_NE(t.info, nullptr);
        std::mt19937 rng(9);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<int> order(static_cast<std::size_t>(rows));
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (const bool ordered : {false, true}) {
            const std::vector<int> o = ordered ? order : std::vector<int>{};
            auto w = attn::WeightMatrix::quantized(t.file, *t.info, 0, rows, o);
            ASSERT_TRUE(w.ok()) << w.status().message;
            const Matrix oracle = oracleWeights(t, 0, rows, o);
            for (const Eigen::Index n : {1, 2}) {
                Matrix x(n, in);
                for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
                Matrix got;
                attn::product(x, *w, got);
                expectClose(x, oracle, got, std::string(attn::ggmlTypeName(type)) + " n=" + std::to_string(n) +
                                                (ordered ? " ordered" : ""));
            }
        }
    }
}

// An appended token's products run on a BurstTeam (core/model/burst_team.h): the same bits as off it, since a task's
// work depends on its index alone. 200 outputs are 4 tasks of the GEMV; 2 and 3 threads.
TEST(WeightMatrix, AProductOnABurstTeamEqualsTheSameProductOffIt)
{
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1}) {
        const std::int64_t in = 7 * 32, rows = 200;
        const Tensor t = makeTensor(type, in, rows, 70 + static_cast<unsigned>(type));
        ASSERT_NE(t.info, nullptr);
        auto w = attn::WeightMatrix::quantized(t.file, *t.info, 0, rows);
        ASSERT_TRUE(w.ok()) << w.status().message;
        std::mt19937 rng(11);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        Matrix x(1, in);
        for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
        Matrix off;
        attn::product(x, *w, off);
        expectClose(x, oracleWeights(t, 0, rows, {}), off, std::string(attn::ggmlTypeName(type)));
        for (const int threads : {2, 3}) {
            const attn::detail::BurstScope scope(threads);
            ASSERT_EQ(attn::detail::BurstScope::team()->threads(), threads);
            Matrix on;
            attn::product(x, *w, on);
            EXPECT_EQ(on, off) << attn::ggmlTypeName(type) << ", " << threads << " threads";
        }
        EXPECT_EQ(attn::detail::BurstScope::team(), nullptr) << "the scope ended";
    }
}

// The team itself: every task of every loop runs exactly once, loops of 0, 1 and many tasks follow each other, some
// after a pause long enough for the helpers to sleep (they must wake for the next loop), and an inner scope's team
// is the current one until it ends.
TEST(BurstTeam, EveryTaskOfEveryLoopRunsOnceAndSleepingHelpersWake)
{
    using attn::detail::BurstScope;
    using attn::detail::BurstTeam;
    for (const int threads : {1, 2, 4}) {
        BurstTeam team(threads);
        EXPECT_EQ(team.threads(), threads);
        std::vector<std::atomic<int>> runs(97);
        for (int loop = 0; loop < 300; ++loop) {
            const std::int64_t tasks = loop % 7 == 0 ? 0 : loop % 5 == 0 ? 1 : static_cast<std::int64_t>(loop % 97);
            for (auto& r : runs) r.store(0);
            team.run(tasks, [&](std::int64_t t) { runs[static_cast<std::size_t>(t)].fetch_add(1); });
            for (std::int64_t t = 0; t < 97; ++t)
                ASSERT_EQ(runs[static_cast<std::size_t>(t)].load(), t < tasks ? 1 : 0)
                    << "task " << t << " of " << tasks << ", loop " << loop << ", " << threads << " threads";
            if (loop % 50 == 49) std::this_thread::sleep_for(std::chrono::microseconds(4 * BurstTeam::kSpinMicros));
        }
    }
    EXPECT_EQ(BurstScope::team(), nullptr);
    {
        const BurstScope outer(2);
        BurstTeam* first = BurstScope::team();
        ASSERT_NE(first, nullptr);
        {
            const BurstScope inner(3);
            EXPECT_EQ(BurstScope::team()->threads(), 3);
        }
        EXPECT_EQ(BurstScope::team(), first);
    }
    EXPECT_EQ(BurstScope::team(), nullptr);
}

TEST(WeightMatrix, AColumnIsTheStoredRowAndAnEditMakesItDense)
{
    const Tensor t = makeTensor(GgmlType::Q4_1, 64, 10, 3);
    ASSERT_NE(t.info, nullptr);
    auto w = attn::WeightMatrix::quantized(t.file, *t.info, 0, 10);
    ASSERT_TRUE(w.ok());
    const Matrix oracle = oracleWeights(t, 0, 10, {});
    std::vector<float> col(64);
    w->column(7, col.data());
    for (int i = 0; i < 64; ++i) ASSERT_EQ(col[static_cast<std::size_t>(i)], oracle(i, 7)) << i;
    EXPECT_EQ(w->denseBytes(), 0u);
    EXPECT_EQ(w->streamedBytes(), 10u * 2 * 20);  // 10 rows of two 20-byte blocks
    w->edit()(3, 5) += 1.0f;
    EXPECT_FALSE(w->isQuantized());
    EXPECT_EQ(w->denseBytes(), 64u * 10 * 4);
    EXPECT_EQ(w->dense()(3, 5), oracle(3, 5) + 1.0f);
    EXPECT_EQ(w->dense()(2, 5), oracle(2, 5));
}

// W·v (direct logit attribution reads a logit direction back through W^O this way): for a view with a row order,
// a dense weight and a transposed one, equal to the oracle's matrix times v.
TEST(WeightMatrix, TimesAVectorWeighsTheColumnsByIt)
{
    const Tensor t = makeTensor(GgmlType::Q4_1, 64, 10, 5);
    ASSERT_NE(t.info, nullptr);
    const std::vector<int> order = {9, 0, 8, 1, 7, 2, 6, 3, 5, 4};
    auto w = attn::WeightMatrix::quantized(t.file, *t.info, 0, 10, order);
    ASSERT_TRUE(w.ok());
    const Matrix oracle = oracleWeights(t, 0, 10, order);
    const attn::Vector v = attn::Vector::LinSpaced(10, -1.0f, 2.0f);
    const attn::Vector want = oracle * v;
    auto near = [&](const attn::Vector& got, const char* what) {
        ASSERT_EQ(got.size(), want.size()) << what;
        // Sums of 10 terms in another order: float rounding of the terms' scale.
        const float tol = 1e-5f * (oracle.cwiseAbs() * v.cwiseAbs()).maxCoeff();
        for (Eigen::Index i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " " << i;
    };
    near(w->times(v), "view");
    near(attn::WeightMatrix(oracle).times(v), "dense");
    near(attn::WeightMatrix::denseTransposed(Matrix(oracle.transpose())).times(v), "transposed");
}

// [SECTION] the LM head over many positions (lm_head.h)

// The oracle of a row's logits: the weight whole in float32 (toMatrix, or the test's own matrix), x·W, then the
// final soft-cap written out as Gemma 2 defines it, cap·tanh(l / cap).
Matrix oracleLogits(const Matrix& x, const Matrix& w, float cap)
{
    Matrix l = x * w;
    if (cap > 0) l = (l.array() / cap).tanh() * cap;
    return l;
}

// What lmHeadLogProbabilities and lmHeadTop give against the oracle's logits and logProbability per row. The logits differ from
// the oracle's by float32 rounding of a dot product (expectClose's 1e-5 of Σ|x·w|, scaled so that logits are at
// most ~8); a log-probability adds the log-sum-exp's rounding (sums of ≤ 10⁵ terms ≤ 1 in float: ~1e-6 relative).
// 1e-4 holds both; a wrong target, task, cap or rescaling is off by 1e-2 or more.
void expectLogProbabilities(const attn::DecoderConfig& c, const attn::WeightMatrix& E, const Matrix& oracleW, const Matrix& x,
                            const std::vector<int>& targets, const attn::detail::LmHeadSplit& split, const std::string& what)
{
    const Eigen::Index n = x.rows();
    const Matrix want = oracleLogits(x, oracleW, c.finalSoftcap);
    std::vector<float> got(static_cast<std::size_t>(n), 0.0f);
    attn::Vector kept;
    attn::detail::lmHeadLogProbabilities(c, E, x, targets, got.data(), n - 1, &kept, split);
    for (Eigen::Index r = 0; r < n; ++r) {
        const int id = targets[static_cast<std::size_t>(r)];
        if (id < 0) {
            EXPECT_TRUE(std::isnan(got[static_cast<std::size_t>(r)])) << what << ": row " << r << " has no target";
            continue;
        }
        const float lp = attn::logProbability(want.row(r).transpose(), id);
        EXPECT_NEAR(got[static_cast<std::size_t>(r)], lp, 1e-4 * std::max(1.0f, std::abs(lp))) << what << ": row " << r;
    }
    ASSERT_EQ(kept.size(), want.cols()) << what;
    EXPECT_LE((kept - want.row(n - 1).transpose()).cwiseAbs().maxCoeff(), 1e-4f) << what << ": the kept row's logits";
    // The largest logits (the logit lens), k = 3 and k = 10 (more than a task of 7 columns holds): the oracle's
    // row sorted, largest first; the random logits' gaps (~1e-2) are far above the rounding, so the order is one.
    for (const int k : {3, 10}) {
        std::vector<std::vector<attn::detail::TopLogit>> top;
        attn::detail::lmHeadTop(c, E, x, k, top, split);
        ASSERT_EQ(top.size(), static_cast<std::size_t>(n)) << what;
        for (Eigen::Index r = 0; r < n; ++r) {
            std::vector<int> ids(static_cast<std::size_t>(want.cols()));
            std::iota(ids.begin(), ids.end(), 0);
            std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return want(r, a) > want(r, b); });
            const double sum = (want.row(r).array() - want.row(r).maxCoeff()).cast<double>().exp().sum();
            ASSERT_EQ(top[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(k)) << what << " k=" << k;
            for (int i = 0; i < k; ++i) {
                const attn::detail::TopLogit& t = top[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
                const int id = ids[static_cast<std::size_t>(i)];
                EXPECT_EQ(t.id, id) << what << " k=" << k << " row " << r << " rank " << i;
                EXPECT_NEAR(t.logit, want(r, id), 1e-4) << what << " k=" << k << " row " << r << " rank " << i;
                EXPECT_NEAR(t.p, std::exp(double(want(r, id)) - want.row(r).maxCoeff()) / sum, 1e-5) << what << " row " << r;
            }
        }
    }
}

// Every split of the work: the defaults (few rows: one whole product; more: tasks of columns), tasks of 64 and of 7
// columns (V = 300 ends mid-task), products of 5 rows and of 1 within a task, blocks of 16 and 3 positions, the
// whole product never; over a quantized head (K-quants and Q8_0, AVX2 row kernels; F32 through column()), a dense
// transposed one (an HF tied embedding) and a dense in×out one; uncapped and soft-capped (Gemma 2's 30, here 3 so
// that it bites on logits of ~8).
TEST(LmHead, LogProbabilitiesEqualTheOracleOverEverySplit)
{
    const std::int64_t in = 256, V = 300;
    std::vector<attn::detail::LmHeadSplit> splits(4);
    splits[1] = {64, 5, 16, 0};
    splits[2] = {7, 1, 3, 0};
    splits[3] = {300, 128, 1024, 2};
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> token(0, static_cast<int>(V) - 1);
    for (const GgmlType type : {GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F32}) {
        const Tensor t = makeTensor(type, in, V, 70 + static_cast<unsigned>(type));
        ASSERT_NE(t.info, nullptr);
        auto view = attn::WeightMatrix::quantized(t.file, *t.info, 0, V);
        ASSERT_TRUE(view.ok()) << view.status().message;
        const Matrix w = oracleWeights(t, 0, V, {});
        const attn::WeightMatrix transposed = attn::WeightMatrix::denseTransposed(Matrix(w.transpose())), dense(w);
        for (const Eigen::Index n : {1, 2, 8, 9, 37}) {
            Matrix x(n, in);
            for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
            x *= 8.0f / std::max(1e-6f, (x * w).cwiseAbs().maxCoeff());
            std::vector<int> targets(static_cast<std::size_t>(n));
            for (int& id : targets) id = token(rng);
            targets.back() = -1;  // the last position: no next token
            for (const float cap : {0.0f, 3.0f}) {
                attn::DecoderConfig c;
                c.finalSoftcap = cap;
                for (std::size_t s = 0; s < splits.size(); ++s) {
                    const std::string what = std::string(attn::ggmlTypeName(type)) + " n=" + std::to_string(n) + " cap=" +
                                             std::to_string(cap) + " split " + std::to_string(s);
                    expectLogProbabilities(c, *view, w, x, targets, splits[s], what + " view");
                    if (type == GgmlType::F32) {
                        expectLogProbabilities(c, transposed, w, x, targets, splits[s], what + " dense transposed");
                        expectLogProbabilities(c, dense, w, x, targets, splits[s], what + " dense");
                    }
                }
            }
        }
    }
}

// A whole soft-capped decoder (tiny Gemma 2, final cap 3) loaded both ways (the GGUF's float32 view, the HF
// directory's dense tied embedding) and with a Q8_0 LM head put in: every position's surprise and the last logits
// after a forward of 40 tokens (tasks of columns), of 6 (one whole product), after a deferred surprise made by
// updateDecoderSurprise and after 12 tokens appended, against the oracle on the run's own final hidden state.
TEST(LmHead, ASoftCappedDecoderMakesEverySurpriseAsTheOracle)
{
    const std::string dir = std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_gemma2";
    const Tensor head = makeTensor(GgmlType::Q8_0, 32, 320, 91);
    ASSERT_NE(head.info, nullptr);
    for (const int variant : {0, 1, 2}) {
        auto m = attn::loadDecoder(variant == 1 ? dir : dir + ".gguf");
        ASSERT_TRUE(m.ok()) << m.status().message;
        ASSERT_GT(m->config.finalSoftcap, 0.0f);
        ASSERT_EQ(m->config.vocab, 320);
        ASSERT_EQ(m->config.hidden, 32);
        if (variant == 2) {
            auto q = attn::WeightMatrix::quantized(head.file, *head.info, 0, 320);
            ASSERT_TRUE(q.ok()) << q.status().message;
            m->lmHead = std::move(*q);
        }
        const std::string what = variant == 0 ? "gguf" : variant == 1 ? "hf" : "q8_0 head";
        const Matrix w = m->unembedding().toMatrix();
        std::vector<int> ids(52);
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>((i * 37 + 5) % 320);
        auto check = [&](const attn::DecoderRun& run, const std::string& how) {
            const Eigen::Index n = run.finalHidden.rows();
            ASSERT_EQ(run.surprise.size(), static_cast<std::size_t>(n)) << how;
            EXPECT_FALSE(run.surpriseStale) << how;
            const Matrix want = oracleLogits(run.finalHidden, w, m->config.finalSoftcap);
            EXPECT_TRUE(std::isnan(run.surprise[0])) << how;
            for (Eigen::Index i = 1; i < n; ++i) {
                const float s = -attn::logProbability(want.row(i - 1).transpose(), run.encoding.ids[static_cast<std::size_t>(i)]);
                EXPECT_NEAR(run.surprise[static_cast<std::size_t>(i)], s, 1e-4 * std::max(1.0f, s)) << how << " token " << i;
            }
            ASSERT_EQ(run.lastLogits.size(), 320) << how;
            EXPECT_LE((run.lastLogits - want.row(n - 1).transpose()).cwiseAbs().maxCoeff(), 1e-4f) << how << ": last logits";
        };
        for (const std::size_t n : {std::size_t(40), std::size_t(6)}) {
            attn::DecoderRun run;
            ASSERT_TRUE(attn::runDecoder(*m, std::vector<int>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)), {}, run).ok());
            check(run, what + " forward of " + std::to_string(n));
        }
        attn::DecoderRun run;
        ASSERT_TRUE(attn::runDecoder(*m, std::vector<int>(ids.begin(), ids.begin() + 40), {}, run).ok());
        run.ablated = {{1, 0}};
        ASSERT_TRUE(attn::recomputeDecoderFrom(*m, 1, run, attn::Backend::Cpu, attn::SurpriseUpdate::Deferred).ok());
        EXPECT_TRUE(run.surpriseStale);
        ASSERT_TRUE(attn::updateDecoderSurprise(*m, run).ok());
        check(run, what + " deferred, then updated");
        ASSERT_TRUE(attn::appendTokens(*m, std::vector<int>(ids.begin() + 40, ids.end()), run).ok());
        check(run, what + " 12 appended");
    }
}

TEST(WeightMatrix, AnUnsupportedTypeIsRefusedWithItsName)
{
    const Tensor t = makeTensor(GgmlType::Q8_0, 32, 2, 1);  // parsed as Q8_0, then claimed to be IQ2_XXS
    ASSERT_NE(t.info, nullptr);
    attn::GgufTensorInfo lie = *t.info;
    lie.type = GgmlType::IQ2_XXS;
    auto w = attn::WeightMatrix::quantized(t.file, lie, 0, 2);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code, attn::StatusCode::Unsupported);
    EXPECT_NE(w.status().message.find("IQ2_XXS"), std::string::npos) << w.status().message;
}

// [SECTION] whole decoders: views vs float32

// Largest |a − b| over the largest |b|: the views differ from the float32 path by float rounding only (sums in
// another order), which 30 layers grow to a few 1e-6 of the values' scale; 1e-5 (issue 18) holds that, while a
// wrong row order or scale anywhere changes logits at the 1e-1 level.
double relDiff(const Matrix& a, const Matrix& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols()) return 1e9;
    return (a - b).cwiseAbs().maxCoeff() / std::max(1e-30f, b.cwiseAbs().maxCoeff());
}

void expectSameRuns(const attn::DecoderRun& got, const attn::DecoderRun& want, const std::string& what, double tol)
{
    ASSERT_EQ(got.hidden.size(), want.hidden.size()) << what;
    for (std::size_t l = 0; l < want.hidden.size(); ++l)
        EXPECT_LE(relDiff(got.hidden[l], want.hidden[l]), tol) << what << ": hidden " << l;
    EXPECT_LE(relDiff(got.finalHidden, want.finalHidden), tol) << what << ": final hidden";
    EXPECT_LE(relDiff(Matrix(got.lastLogits.transpose()), Matrix(want.lastLogits.transpose())), tol) << what << ": logits";
    ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
    for (std::size_t l = 0; l < want.weights.size(); ++l)
        EXPECT_LE(relDiff(got.weights[l][0].toMatrix(), want.weights[l][0].toMatrix()), tol) << what << ": layer " << l;
}

void checkParity(const std::string& path, const std::vector<int>& ids)
{
    auto views = attn::loadDecoder(path);
    ASSERT_TRUE(views.ok()) << views.status().message;
    attn::DecoderLoadOptions o;
    o.dequantize = true;
    auto dense = attn::loadDecoder(path, o);
    ASSERT_TRUE(dense.ok()) << dense.status().message;
    ASSERT_TRUE(views->layers[0].Wq.isQuantized());
    ASSERT_FALSE(dense->layers[0].Wq.isQuantized());
    ASSERT_TRUE(views->tokenEmbeddings.isQuantized());

    // The float32 the views save: every view's in×out floats, nothing else.
    std::size_t viewFloats = views->tokenEmbeddings.toMatrix().size() + (views->lmHead.empty() ? 0 : views->lmHead.toMatrix().size());
    for (const attn::DecoderLayer& L : views->layers)
        for (const attn::WeightMatrix* w : {&L.Wq, &L.Wk, &L.Wv, &L.Wo, &L.Wgate, &L.Wup, &L.Wdown, &L.Wfc, &L.Wproj})
            if (w->isQuantized()) viewFloats += static_cast<std::size_t>(w->inputs() * w->outputs());
    EXPECT_EQ(dense->denseWeightBytes() - views->denseWeightBytes(), viewFloats * sizeof(float));

    // A forward, an appended token, an ablation recompute from the middle layer.
    const std::vector<int> head(ids.begin(), ids.end() - 1);
    for (const bool append : {false, true}) {
        attn::DecoderRun a, b;
        ASSERT_TRUE(attn::runDecoder(*views, append ? head : ids, {}, a).ok());
        ASSERT_TRUE(attn::runDecoder(*dense, append ? head : ids, {}, b).ok());
        if (append) {
            ASSERT_TRUE(attn::appendTokens(*views, {ids.back()}, a).ok());
            ASSERT_TRUE(attn::appendTokens(*dense, {ids.back()}, b).ok());
        }
        expectSameRuns(a, b, path + (append ? " append" : " forward"), 1e-5);
        const int l = views->config.layers / 2;
        a.ablated = b.ablated = {{l, 0}};
        ASSERT_TRUE(attn::recomputeDecoderFrom(*views, l, a).ok());
        ASSERT_TRUE(attn::recomputeDecoderFrom(*dense, l, b).ok());
        expectSameRuns(a, b, path + " ablation", 1e-5);
    }
}

TEST(WeightMatrixModels, TinyGgufsEqualTheirFloat32Path)
{
    for (const char* f : {"tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_gpt2.gguf", "tiny_llama_iq4nl.gguf"}) {
        SCOPED_TRACE(f);
        checkParity(std::string(ATTNSCOPE_DECODER_DATA) + "/" + f, {1, 5, 9, 40, 2, 77, 13, 8, 60, 3});
    }
    // The IQ4_NL file (make_iq4_fixture.py) holds its weights, the embedding among them, in that format.
    auto iq4 = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_llama_iq4nl.gguf");
    ASSERT_TRUE(iq4.ok()) << iq4.status().message;
    EXPECT_EQ(iq4->layers[1].Wdown.type(), GgmlType::IQ4_NL);
    EXPECT_EQ(iq4->tokenEmbeddings.type(), GgmlType::IQ4_NL);
}

// The file's own account, read apart from the decoder's loading: every 2-D tensor's values and bytes by type (the
// fixtures below have no 2-D tensor that is not a weight matrix: no GPT-2 position table).
std::map<GgmlType, attn::WeightFormat> formatsOfFile(const std::string& path)
{
    auto file = attn::GgufFile::open(path);
    EXPECT_TRUE(file.ok()) << file.status().message;
    std::map<GgmlType, attn::WeightFormat> byType;
    if (!file.ok()) return byType;
    for (const attn::GgufTensorInfo& t : file->tensors()) {
        if (t.dims.size() != 2) continue;
        attn::WeightFormat& f = byType[t.type];
        f.type = t.type;
        f.weights += t.elements();
        f.bytes += t.bytes;
    }
    return byType;
}

void expectFormatsOfFile(const std::vector<attn::WeightFormat>& formats, const std::string& path)
{
    const std::map<GgmlType, attn::WeightFormat> file = formatsOfFile(path);
    ASSERT_EQ(formats.size(), file.size());
    for (std::size_t i = 0; i < formats.size(); ++i) {
        SCOPED_TRACE(attn::ggmlTypeName(formats[i].type));
        ASSERT_TRUE(file.count(formats[i].type));
        EXPECT_EQ(formats[i].weights, file.at(formats[i].type).weights);
        EXPECT_EQ(formats[i].bytes, file.at(formats[i].type).bytes);
        if (i > 0) {
            EXPECT_GE(formats[i - 1].weights, formats[i].weights);  // most weights first
        }
    }
}

TEST(WeightMatrixModels, WeightFormatsCountEveryMatrixOnceByItsStorage)
{
    const std::string data = ATTNSCOPE_DECODER_DATA;
    // Every family's layout: separate and fused projections (Phi-3's split at load), tied embeddings (Gemma 3),
    // untied (Llama).
    for (const char* f : {"tiny_llama.gguf", "tiny_llama_iq4nl.gguf", "tiny_phi3.gguf", "tiny_gemma3.gguf", "tiny_qwen3.gguf"}) {
        SCOPED_TRACE(f);
        auto m = attn::loadDecoder(data + "/" + f);
        ASSERT_TRUE(m.ok()) << m.status().message;
        expectFormatsOfFile(attn::weightFormats(*m), data + "/" + f);
    }

    // The IQ4_NL file: 16 matrices (embedding, LM head, 7 a layer × 2) at 18 bytes a block of 32 values.
    auto iq4 = attn::loadDecoder(data + "/tiny_llama_iq4nl.gguf");
    ASSERT_TRUE(iq4.ok()) << iq4.status().message;
    std::vector<attn::WeightFormat> formats = attn::weightFormats(*iq4);
    ASSERT_EQ(formats.size(), 1u);
    EXPECT_EQ(formats[0].type, GgmlType::IQ4_NL);
    EXPECT_EQ(formats[0].matrices, 16);
    EXPECT_EQ(formats[0].share, 1.0);
    EXPECT_DOUBLE_EQ(formats[0].bitsPerWeight(), 4.5);
    EXPECT_DOUBLE_EQ(attn::bitsPerWeight(formats), 4.5);
    const std::int64_t all = formats[0].weights;

    // An edited W^O is held dense: it moves to F32 with its float32 bytes.
    const std::int64_t wo = iq4->layers[1].Wo.inputs() * iq4->layers[1].Wo.outputs();
    iq4->layers[1].Wo.edit()(0, 0) += 1.0f;
    formats = attn::weightFormats(*iq4);
    ASSERT_EQ(formats.size(), 2u);
    EXPECT_EQ(formats[0].type, GgmlType::IQ4_NL);
    EXPECT_EQ(formats[0].matrices, 15);
    EXPECT_EQ(formats[0].weights, all - wo);
    EXPECT_EQ(formats[1].type, GgmlType::F32);
    EXPECT_EQ(formats[1].matrices, 1);
    EXPECT_EQ(formats[1].weights, wo);
    EXPECT_EQ(formats[1].bytes, std::size_t(wo) * sizeof(float));
    EXPECT_DOUBLE_EQ(formats[1].share, double(wo) / double(all));
    EXPECT_DOUBLE_EQ(formats[0].share + formats[1].share, 1.0);
    EXPECT_DOUBLE_EQ(attn::bitsPerWeight(formats), (4.5 * double(all - wo) + 32.0 * double(wo)) / double(all));

    // Dequantized at load: the same matrices, every one float32.
    auto dense = attn::loadDecoder(data + "/tiny_llama_iq4nl.gguf", attn::DecoderLoadOptions{true});
    ASSERT_TRUE(dense.ok()) << dense.status().message;
    formats = attn::weightFormats(*dense);
    ASSERT_EQ(formats.size(), 1u);
    EXPECT_EQ(formats[0].type, GgmlType::F32);
    EXPECT_EQ(formats[0].matrices, 16);
    EXPECT_EQ(formats[0].weights, all);
    EXPECT_DOUBLE_EQ(attn::bitsPerWeight(formats), 32.0);

    // A Hugging Face directory: float32 as loaded, the tied embedding once (tiny Gemma 3: no lm_head).
    auto hf = attn::loadDecoder(data + "/tiny_gemma3");
    auto gguf = attn::loadDecoder(data + "/tiny_gemma3.gguf");
    ASSERT_TRUE(hf.ok() && gguf.ok());
    EXPECT_TRUE(hf->lmHead.empty());
    formats = attn::weightFormats(*hf);
    ASSERT_EQ(formats.size(), 1u);
    EXPECT_EQ(formats[0].type, GgmlType::F32);
    EXPECT_EQ(formats[0].matrices, 1 + 7 * hf->config.layers);
    EXPECT_EQ(formats[0].weights, attn::weightFormats(*gguf)[0].weights);

    EXPECT_TRUE(attn::weightFormats(attn::DecoderModel{}).empty());
    EXPECT_EQ(attn::bitsPerWeight({}), 0.0);
}

TEST(WeightMatrixModels, SmolLM2sFormatsAreItsFilesQ4_1LayersAndQ8_0Embedding)
{
    if (!std::filesystem::exists(ATTNSCOPE_SMOLLM2)) GTEST_SKIP() << "SmolLM2 is not installed (scripts/setup.sh)";
    auto m = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
    ASSERT_TRUE(m.ok()) << m.status().message;
    const std::vector<attn::WeightFormat> formats = attn::weightFormats(*m);
    expectFormatsOfFile(formats, ATTNSCOPE_SMOLLM2);
    ASSERT_EQ(formats.size(), 2u);
    // 30 layers of 7 matrices (106.2 M weights at 20 bytes a block of 32: 5 bits), the tied embedding (28.3 M at 34
    // bytes a block of 32: 8.5 bits).
    EXPECT_EQ(formats[0].type, GgmlType::Q4_1);
    EXPECT_EQ(formats[0].matrices, 210);
    EXPECT_DOUBLE_EQ(formats[0].bitsPerWeight(), 5.0);
    EXPECT_EQ(formats[1].type, GgmlType::Q8_0);
    EXPECT_EQ(formats[1].matrices, 1);
    EXPECT_DOUBLE_EQ(formats[1].bitsPerWeight(), 8.5);
    EXPECT_EQ(formats[1].weights, std::int64_t(49152) * 576);
    // Their sum is what one appended token streams, less the final norm.
    EXPECT_EQ(formats[0].bytes + formats[1].bytes, m->streamedWeightBytes() - 576 * sizeof(float));
}

TEST(WeightMatrixModels, SmolLM2EqualsItsFloat32Path)
{
    if (!std::filesystem::exists(ATTNSCOPE_SMOLLM2)) GTEST_SKIP() << "SmolLM2 is not installed (scripts/setup.sh)";
    auto m = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
    ASSERT_TRUE(m.ok()) << m.status().message;
    auto enc = attn::encodeForDecoder(*m, "When Mary and John went to the store, John gave a drink to", false);
    ASSERT_TRUE(enc.ok());
    // Only the norms are float32 (61 × 576 floats = 140.5 kB), not 540 MB.
    EXPECT_EQ(m->denseWeightBytes(), 61u * 576u * sizeof(float));
    // A token streams the Q4_1 layers, W^O among them (106.2 M weights × 20/32 bytes = 66.4 MB), the Q8_0
    // embeddings as the unembedding (28.3 M × 34/32 = 30.1 MB) and the final norm.
    EXPECT_EQ(m->layers[3].Wup.type(), GgmlType::Q4_1);
    EXPECT_EQ(m->layers[3].Wo.type(), GgmlType::Q4_1);
    EXPECT_EQ(m->tokenEmbeddings.type(), GgmlType::Q8_0);
    EXPECT_GT(m->streamedWeightBytes(), 96'400'000u);
    EXPECT_LT(m->streamedWeightBytes(), 96'500'000u);
    checkParity(ATTNSCOPE_SMOLLM2, enc->ids);
}

} // namespace
