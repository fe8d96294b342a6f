// Why does this head attend here? (attnscope/qk_attribution.h, issue 35) on every tiny random family (gpt2, llama,
// qwen2, qwen3, gemma2, gemma3, gptneox, olmo2, phi3; directories and GGUFs): the sum rule, layer 0's components, a naive oracle (each component run alone through the layer's
// frozen norm, Q and K projections and RoPE, written out here), the row against its cells, path patching against a
// brute-force recompute, composition scores against dense M×M products in double, and bad input. On SmolLM2 (when
// installed): the sum rule at early, middle and last layers, and the induction golden of
// make_qk_attribution_goldens.py; on Gemma 3 270M (when installed) the sum rule and the oracle.
// Tolerance of the sum rule: 1e-4·|score| + 1e-4 (the issue's); the decomposition is computed in double, the
// run's score in float32 (its Q and K are float products over d_model, ~1e-6 relative).
#include <attnscope/interp.h>
#include <attnscope/qk_attribution.h>

#include "golden_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

using attn::Matrix;
using attn::Vector;
using MatD = Eigen::MatrixXd;
using VecD = Eigen::VectorXd;

attn::DecoderModel load(const std::string& name)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_" + name);
    EXPECT_TRUE(model.ok()) << model.status().message;
    return model.ok() ? std::move(*model) : attn::DecoderModel{};
}

const std::vector<int> kIds = {5, 17, 42, 99, 3, 250, 7, 64, 42, 99, 11};

bool sums(float parts, float whole) { return std::abs(parts - whole) <= 1e-4f * std::abs(whole) + 1e-4f; }

// The first key query i sees through layer l's window (0 without one).
int firstKey(const attn::DecoderConfig& c, int l, int i)
{
    const int w = c.windowOf(l);
    return w > 0 ? std::max(0, i - w + 1) : 0;
}

// The components of layer l's stream at position p, in M-space, the plain way: hidden[0], each earlier head's
// context times its rows of W^O, b^O, and the rest of what the layer added. A post-norm after the attention (Gemma,
// OLMo 2) is applied to each part at the scale of the whole attention output at p.
std::vector<VecD> naiveComponents(const attn::DecoderModel& m, const attn::DecoderRun& run, int l, int p)
{
    const int H = m.config.heads, D = m.config.headDim, M = m.config.hidden;
    std::vector<VecD> out;
    out.push_back(run.hidden[0].row(p).transpose().cast<double>());
    for (int k = 0; k < l; ++k) {
        const attn::DecoderLayer& L = m.layers[static_cast<std::size_t>(k)];
        const MatD wo = L.Wo.toMatrix().cast<double>();
        std::vector<VecD> parts;
        VecD attnOut = VecD::Zero(M);
        for (int h = 0; h < H; ++h)
            parts.push_back(wo.middleRows(h * D, D).transpose() * run.attention[k].concat.row(p).segment(h * D, D).transpose().cast<double>());
        if (L.bo.size() > 0) parts.push_back(L.bo.cast<double>());
        for (const VecD& v : parts) attnOut += v;
        if (L.postAttnNormGamma.size() > 0) {
            const double s = 1.0 / std::sqrt(attnOut.squaredNorm() / M + m.config.normEps);
            for (VecD& v : parts) v = v.cwiseProduct(L.postAttnNormGamma.cast<double>()) * s;
            attnOut = attnOut.cwiseProduct(L.postAttnNormGamma.cast<double>()) * s;
        }
        out.insert(out.end(), parts.begin(), parts.end());
        out.push_back((run.hidden[k + 1].row(p) - run.hidden[k].row(p)).transpose().cast<double>() - attnOut);
    }
    return out;
}

// One component through layer l's query or key side of head h, alone, written out from the paper's equations:
// the pre-norm (if any) frozen at position p's scale, the projection (no bias), the QK-norm (if any: γ' and the
// scale s'_p of the whole q or k at p before it, per head or over the whole row), RoPE at p (the layer's base,
// partial rotary). `bias` instead gives the constant term (β through W, plus the bias, through the QK-norm).
VecD naiveSide(const attn::DecoderModel& m, const attn::DecoderRun& run, int l, int h, bool query, int p, const VecD& c, bool bias)
{
    const attn::DecoderConfig& cfg = m.config;
    const attn::DecoderLayer& L = m.layers[static_cast<std::size_t>(l)];
    const int D = cfg.headDim, M = cfg.hidden;
    const bool ln = cfg.norm == attn::NormKind::Layer;
    const VecD x = run.hidden[l].row(p).transpose().cast<double>();
    double s = 1;
    VecD normed = x;
    if (cfg.preNorms) {
        s = ln ? 1.0 / std::sqrt((x.array() - x.mean()).square().sum() / M + cfg.normEps)
               : 1.0 / std::sqrt(x.squaredNorm() / M + cfg.normEps);
        normed = ((ln ? VecD(x.array() - x.mean()) : x) * s).cwiseProduct(L.attnNormGamma.cast<double>());
        if (L.attnNormBeta.size() > 0) normed += L.attnNormBeta.cast<double>();
    }
    const MatD W = (query ? L.Wq : L.Wk).toMatrix().cast<double>();
    const Vector& b = query ? L.bq : L.bk;
    const int col = (query ? h : h / (cfg.heads / cfg.kvHeads)) * D;
    VecD v = VecD::Zero(D);
    if (bias) {
        if (L.attnNormBeta.size() > 0) v += W.middleCols(col, D).transpose() * L.attnNormBeta.cast<double>();
        if (b.size() > 0) v += b.segment(col, D).cast<double>();
    } else {
        VecD n = c;
        if (ln) n.array() -= c.mean();
        if (cfg.preNorms) n = n.cwiseProduct(L.attnNormGamma.cast<double>()) * s;
        v = W.middleCols(col, D).transpose() * n;
    }
    const Vector& qkGamma = query ? L.qNormGamma : L.kNormGamma;
    if (qkGamma.size() > 0) {
        VecD whole = W.transpose() * normed;
        if (b.size() > 0) whole += b.cast<double>();
        const bool all = cfg.qkNorm == attn::QkNorm::Whole;
        const VecD u = all ? whole : VecD(whole.segment(col, D));
        const double s2 = 1.0 / std::sqrt(u.squaredNorm() / double(u.size()) + cfg.normEps);
        v = v.cwiseProduct((all ? VecD(qkGamma.segment(col, D).cast<double>()) : VecD(qkGamma.cast<double>()))) * s2;
    }
    if (const int R = cfg.rotaryDims(); R > 0) {
        EXPECT_TRUE(cfg.ropeFreqFactors.empty()) << "the oracle knows no Llama 3 factors";
        // LongRoPE (Phi-3 128k): the set for the run's length divides the frequencies, cos and sin times its factor.
        const long n = long(run.hidden[0].rows());
        const std::vector<float> none;
        const std::vector<float>& factors = cfg.longRope() ? cfg.ropeFactorsFor(n) : none;
        const double m = cfg.longRope() ? cfg.ropeAttnFactor : 1.0;
        VecD r = v;
        for (int i = 0; i < R / 2; ++i) {
            double angle = p * std::pow(double(cfg.ropeThetaOf(l)), -2.0 * i / R) / cfg.ropeScaleOf(l);
            if (i < int(factors.size())) angle /= factors[std::size_t(i)];
            r[i] = m * (v[i] * std::cos(angle) - v[i + R / 2] * std::sin(angle));
            r[i + R / 2] = m * (v[i + R / 2] * std::cos(angle) + v[i] * std::sin(angle));
        }
        v = r;
    }
    return v;
}

// Every component's vector of one side at position p, in the order of qkComponentNames (the bias last if any).
std::vector<VecD> naiveVectors(const attn::DecoderModel& m, const attn::DecoderRun& run, int l, int h, bool query, int p)
{
    std::vector<VecD> out;
    for (const VecD& c : naiveComponents(m, run, l, p)) out.push_back(naiveSide(m, run, l, h, query, p, c, false));
    const std::vector<std::string> names = attn::qkComponentNames(m, l);
    if (names.back().find("qk_bias") != std::string::npos) out.push_back(naiveSide(m, run, l, h, query, p, VecD(), true));
    return out;
}

class Families : public ::testing::TestWithParam<std::string> {};

TEST_P(Families, ComponentsSumToTheScore)
{
    attn::DecoderModel model = load(GetParam());
    attn::DecoderOptions o;
    o.ablate = {{0, 1}};  // an ablated head is a component of 0
    auto run = attn::runDecoder(model, kIds, o);
    ASSERT_TRUE(run.ok()) << run.status().message;
    for (int l = 0; l < model.config.layers; ++l)
        for (int h : {0, model.config.heads - 1})
            for (auto [i, key] : {std::pair{0, 0}, {5, 2}, {10, 10}, {10, 0}, {8, 3}}) {
                const int j = std::max(key, firstKey(model.config, l, i));  // a sliding layer hides older keys
                auto cell = attn::qkAttribution(model, *run, l, h, i, j);
                ASSERT_TRUE(cell.ok()) << cell.status().message;
                const std::string what = GetParam() + " L" + std::to_string(l) + " H" + std::to_string(h) + " (" +
                                         std::to_string(i) + "," + std::to_string(j) + ")";
                EXPECT_TRUE(sums(cell->queryComponents.sum(), cell->score)) << what << ": " << cell->queryComponents.sum() << " vs " << cell->score;
                EXPECT_TRUE(sums(cell->keyComponents.sum(), cell->score)) << what << ": " << cell->keyComponents.sum() << " vs " << cell->score;
                EXPECT_TRUE(sums(cell->matrix.sum(), cell->score)) << what;
                EXPECT_LE((Vector(cell->matrix.rowwise().sum()) - cell->queryComponents).cwiseAbs().maxCoeff(), 1e-5) << what;
                EXPECT_LE((Vector(cell->matrix.colwise().sum().transpose()) - cell->keyComponents).cwiseAbs().maxCoeff(), 1e-5) << what;
                EXPECT_FLOAT_EQ(cell->weight, run->weights[l][h](i, j)) << what;
                // A soft-cap (Gemma 2) is outside the sum: the parts sum to the raw score, the capped one is beside it.
                const float cap = model.config.attnSoftcap;
                EXPECT_EQ(cell->softcap, cap) << what;
                EXPECT_NEAR(cell->cappedScore, cap > 0 ? cap * std::tanh(cell->score / cap) : cell->score, 1e-6) << what;
                ASSERT_EQ(cell->components.size(), static_cast<std::size_t>(cell->queryComponents.size()));
                if (l == 1) {
                    // The ablated head L0.H1 wrote nothing.
                    const auto at = std::find(cell->components.begin(), cell->components.end(), "L0.H1") - cell->components.begin();
                    EXPECT_EQ(cell->queryComponents[at], 0.0f) << what;
                    EXPECT_EQ(cell->keyComponents[at], 0.0f) << what;
                }
            }
}

TEST_P(Families, LayerZeroReadsOnlyTheEmbedding)
{
    attn::DecoderModel model = load(GetParam());
    const std::vector<std::string> names = attn::qkComponentNames(model, 0);
    // GPT-2 and GPT-NeoX (LayerNorm β, Q/K biases) and Qwen2 (Q/K biases) have the layer's constant term; the others
    // none. GPT-2 and GPT-NeoX have b^O.
    const std::string f = GetParam();
    const bool constant = f == "gpt2" || f == "gptneox" || f == "qwen2", outBias = f == "gpt2" || f == "gptneox";
    if (!constant) EXPECT_EQ(names, std::vector<std::string>{"embed"});
    else EXPECT_EQ(names, (std::vector<std::string>{"embed", "L0.qk_bias"}));
    const std::vector<std::string> one = attn::qkComponentNames(model, 1);
    const int H = model.config.heads;
    ASSERT_EQ(one.size(), names.size() + H + 1 + (outBias ? 1 : 0));
    EXPECT_EQ(one[1], "L0.H0");
    EXPECT_EQ(one[static_cast<std::size_t>(H)], std::string("L0.H") + std::to_string(H - 1));
    EXPECT_EQ(one[static_cast<std::size_t>(H) + 1], outBias ? "L0.bias" : "L0.mlp");
    EXPECT_TRUE(attn::qkComponentNames(model, model.config.layers).empty());
}

TEST_P(Families, EachComponentEqualsTheNaiveOracle)
{
    attn::DecoderModel model = load(GetParam());
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    const int D = model.config.headDim;
    for (int l = 0; l < model.config.layers; ++l)
        for (int h = 0; h < model.config.heads; ++h)
            for (auto [i, key] : {std::pair{9, 4}, {10, 1}, {3, 3}}) {
                const int j = std::max(key, firstKey(model.config, l, i));
                const std::vector<VecD> qv = naiveVectors(model, *run, l, h, true, i), kv = naiveVectors(model, *run, l, h, false, j);
                VecD q = VecD::Zero(D), k = VecD::Zero(D);
                for (const VecD& v : qv) q += v;
                for (const VecD& v : kv) k += v;
                // The oracle itself: its parts are the run's q and k.
                const int g = h / (model.config.heads / model.config.kvHeads);
                EXPECT_LE((q - run->attention[l].Q.row(i).segment(h * D, D).transpose().cast<double>()).cwiseAbs().maxCoeff(), 1e-4);
                EXPECT_LE((k - run->attention[l].K.row(j).segment(g * D, D).transpose().cast<double>()).cwiseAbs().maxCoeff(), 1e-4);
                auto cell = attn::qkAttribution(model, *run, l, h, i, j);
                ASSERT_TRUE(cell.ok());
                ASSERT_EQ(qv.size(), static_cast<std::size_t>(cell->queryComponents.size()));
                const double scale = run->attention[l].scale;
                for (std::size_t c = 0; c < qv.size(); ++c) {
                    const double wantQ = scale * qv[c].dot(k), wantK = scale * q.dot(kv[c]);
                    EXPECT_NEAR(cell->queryComponents[Eigen::Index(c)], wantQ, 1e-4 * (1 + std::abs(wantQ))) << GetParam() << " " << cell->components[c];
                    EXPECT_NEAR(cell->keyComponents[Eigen::Index(c)], wantK, 1e-4 * (1 + std::abs(wantK))) << GetParam() << " " << cell->components[c];
                    for (std::size_t d = 0; d < kv.size(); ++d) {
                        const double want = scale * qv[c].dot(kv[d]);
                        EXPECT_NEAR(cell->matrix(Eigen::Index(c), Eigen::Index(d)), want, 1e-4 * (1 + std::abs(want)));
                    }
                }
            }
}

// A dense run of kIds on a family's fixture and the row of its last layer's head 1 at query `query`.
struct RowRun {
    attn::DecoderModel model;
    std::optional<attn::DecoderRun> run;
    std::optional<attn::QkRow> row;
};
void rowRun(const std::string& family, int query, RowRun& out)
{
    out.model = load(family);
    auto run = attn::runDecoder(out.model, kIds);
    ASSERT_TRUE(run.ok());
    out.run = std::move(*run);
    auto row = attn::qkAttributionRow(out.model, *out.run, out.model.config.layers - 1, 1, query);
    ASSERT_TRUE(row.ok()) << row.status().message;
    out.row = std::move(*row);
}

TEST_P(Families, TheRowEqualsItsCells)
{
    RowRun r;
    ASSERT_NO_FATAL_FAILURE(rowRun(GetParam(), 9, r));
    const attn::DecoderModel& model = r.model;
    const auto& run = r.run;
    const auto& row = r.row;
    const int l = model.config.layers - 1, h = 1, i = 9;
    ASSERT_EQ(row->firstKey, 0);
    ASSERT_EQ(row->scores.size(), i + 1);
    for (int j = 0; j <= i; ++j) {
        auto cell = attn::qkAttribution(model, *run, l, h, i, j);
        ASSERT_TRUE(cell.ok());
        EXPECT_FLOAT_EQ(row->scores[j], cell->score);
        EXPECT_FLOAT_EQ(row->weights[j], cell->weight);
        EXPECT_LE((Vector(row->queryComponents.row(j).transpose()) - cell->queryComponents).cwiseAbs().maxCoeff(), 1e-4) << j;
        EXPECT_LE((Vector(row->keyComponents.row(j).transpose()) - cell->keyComponents).cwiseAbs().maxCoeff(), 1e-4) << j;
        EXPECT_LE((row->matrix(j) - cell->matrix).cwiseAbs().maxCoeff(), 1e-4) << j;
        EXPECT_TRUE(sums(row->keyComponents.row(j).sum(), row->scores[j]));
    }
    EXPECT_EQ(row->matrix(i + 1).size(), 0);
}

// Why key j beats key j′ (the panel's row mode): the two sides of the contrast each sum to the difference of the
// scores, equal the difference of the two cells' parts, and the runner-up is the row's heaviest other key.
TEST_P(Families, KeyContrastSumsToTheScoreDifference)
{
    RowRun r;
    ASSERT_NO_FATAL_FAILURE(rowRun(GetParam(), 10, r));
    const int l = r.model.config.layers - 1, h = 1, i = 10;
    const attn::QkRow& row = *r.row;
    const int key = i - 1, other = attn::runnerUpKey(row, key);
    ASSERT_GE(other, row.firstKey);
    ASSERT_NE(other, key);
    for (int j = row.firstKey; j <= i; ++j) {
        if (j != key) {
            EXPECT_LE(row.weights[j - row.firstKey], row.weights[other - row.firstKey]) << j;
        }
    }
    auto c = attn::contrastKeys(row, key, other);
    ASSERT_TRUE(c.ok()) << c.status().message;
    auto a = attn::qkAttribution(r.model, *r.run, l, h, i, key), b = attn::qkAttribution(r.model, *r.run, l, h, i, other);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_FLOAT_EQ(c->difference, a->score - b->score);
    EXPECT_TRUE(sums(c->keySide.sum(), c->difference)) << c->keySide.sum() << " vs " << c->difference;
    EXPECT_TRUE(sums(c->querySide.sum(), c->difference)) << c->querySide.sum() << " vs " << c->difference;
    EXPECT_LE((c->keySide - (a->keyComponents - b->keyComponents)).cwiseAbs().maxCoeff(), 1e-4);
    EXPECT_LE((c->querySide - (a->queryComponents - b->queryComponents)).cwiseAbs().maxCoeff(), 1e-4);
    auto bad = attn::contrastKeys(row, key, i + 1);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message.find("key 11 is not in query 10's row (keys " + std::to_string(row.firstKey) + "..10)"),
              std::string::npos) << bad.status().message;
    attn::QkRow one = row;  // a row of one key has no runner-up
    one.weights.conservativeResize(1);
    one.scores.conservativeResize(1);
    EXPECT_EQ(attn::runnerUpKey(one, one.firstKey), -1);
}

TEST_P(Families, PathPatchingEqualsABruteForceRecompute)
{
    attn::DecoderModel model = load(GetParam());
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    // Head 2 and component L0.H3 of the 4-head models; the last ones of a smaller model (tiny_phi3_longrope: 2).
    const int heads = model.config.heads;
    const int n = static_cast<int>(kIds.size()), D = model.config.headDim, l = 1, h = std::min(2, heads - 1);
    const int g = h / (model.config.heads / model.config.kvHeads);
    const std::vector<std::string> names = attn::qkComponentNames(model, l);
    const std::string writer = "L0.H" + std::to_string(std::min(3, heads - 1));
    for (const std::string& component : {std::string("embed"), writer, std::string("L0.mlp"), names.back()})
        for (attn::QkSide side : {attn::QkSide::Key, attn::QkSide::Query}) {
            auto patch = attn::patchPattern(model, *run, l, h, component, side);
            ASSERT_TRUE(patch.ok()) << patch.status().message;
            const std::size_t c = std::find(names.begin(), names.end(), component) - names.begin();
            // Brute force: every position's q and k from its components, the one removed on one side, the softmax.
            MatD Q(n, D), K(n, D);
            for (int p = 0; p < n; ++p) {
                const std::vector<VecD> qv = naiveVectors(model, *run, l, h, true, p), kv = naiveVectors(model, *run, l, h, false, p);
                VecD q = VecD::Zero(D), k = VecD::Zero(D);
                for (std::size_t d = 0; d < qv.size(); ++d) {
                    if (!(side == attn::QkSide::Query && d == c)) q += qv[d];
                    if (!(side == attn::QkSide::Key && d == c)) k += kv[d];
                }
                Q.row(p) = q.transpose();
                K.row(p) = k.transpose();
            }
            Matrix want = Matrix::Zero(n, n);
            const double cap = model.config.attnSoftcap;
            for (int i = 0; i < n; ++i) {
                const int first = firstKey(model.config, l, i);
                VecD s(i + 1 - first);
                for (int j = first; j <= i; ++j) {
                    const double raw = Q.row(i).dot(K.row(j)) * run->attention[l].scale;
                    s[j - first] = cap > 0 ? cap * std::tanh(raw / cap) : raw;
                }
                s = (s.array() - s.maxCoeff()).exp();
                for (int j = first; j <= i; ++j) want(i, j) = static_cast<float>(s[j - first] / s.sum());
            }
            const std::string what = GetParam() + " " + component + " " + attn::toString(side);
            EXPECT_LE((patch->patched - want).cwiseAbs().maxCoeff(), 1e-5) << what;
            EXPECT_LE((patch->original - run->weights[l][h].toMatrix()).cwiseAbs().maxCoeff(), 0.0f) << what;
            EXPECT_LE((patch->difference - (patch->patched - patch->original)).cwiseAbs().maxCoeff(), 0.0f) << what;
            // Removing one constant from every key (GPT-2's key-side bias: no RoPE) shifts a query's scores alike:
            // the softmax does not change. Any other removal does.
            if (GetParam() == "gpt2" && c == names.size() - 1 && side == attn::QkSide::Key)
                EXPECT_LE(patch->difference.cwiseAbs().maxCoeff(), 1e-6) << what;
            else
                EXPECT_GT(patch->difference.cwiseAbs().maxCoeff(), 1e-6) << what << ": removing a component changes the pattern";
        }
    (void)g;
}

// Composition scores the straightforward way: dense M×M W_OV and W_QK in double, the norms' γ folded (the pre-norm's
// on the rows, a QK-norm's on W^Q's and W^K's columns, a post-norm's on W^O's outputs), centred for LayerNorm.
TEST_P(Families, CompositionScoresEqualDenseProducts)
{
    attn::DecoderModel model = load(GetParam());
    auto scores = attn::compositionScores(model);
    ASSERT_TRUE(scores.ok()) << scores.status().message;
    const attn::DecoderConfig& c = model.config;
    const int L = c.layers, H = c.heads, D = c.headDim, M = c.hidden, G = c.heads / c.kvHeads;
    const bool ln = c.norm == attn::NormKind::Layer;
    const MatD P = ln ? MatD(MatD::Identity(M, M) - MatD::Constant(M, M, 1.0 / M)) : MatD(MatD::Identity(M, M));
    std::vector<MatD> ov, qk;
    for (int l = 0; l < L; ++l) {
        const attn::DecoderLayer& layer = model.layers[l];
        const MatD gamma = c.preNorms ? MatD(layer.attnNormGamma.cast<double>().asDiagonal()) : MatD::Identity(M, M);
        // A QK-norm's γ' as a diagonal over the projection's columns (per head: the same D values for every head).
        auto qkDiag = [&](const attn::Vector& g, Eigen::Index cols) {
            VecD d = VecD::Ones(cols);
            for (Eigen::Index j = 0; j < cols && g.size() > 0; ++j) d[j] = g[j % g.size()];
            return MatD(d.asDiagonal());
        };
        const MatD post = layer.postAttnNormGamma.size() > 0 ? MatD(layer.postAttnNormGamma.cast<double>().asDiagonal()) : MatD::Identity(M, M);
        const MatD wq = P * gamma * layer.Wq.toMatrix().cast<double>() * qkDiag(layer.qNormGamma, layer.Wq.outputs()),
                   wk = P * gamma * layer.Wk.toMatrix().cast<double>() * qkDiag(layer.kNormGamma, layer.Wk.outputs()),
                   wv = P * gamma * layer.Wv.toMatrix().cast<double>(), wo = layer.Wo.toMatrix().cast<double>() * post * P;
        for (int h = 0; h < H; ++h) {
            const int g = h / G;
            ov.push_back(wv.middleCols(g * D, D) * wo.middleRows(h * D, D));
            qk.push_back(wq.middleCols(h * D, D) * wk.middleCols(g * D, D).transpose());
        }
    }
    ASSERT_EQ(scores->names.size(), static_cast<std::size_t>(L * H));
    EXPECT_EQ(scores->names[static_cast<std::size_t>(H + 1)], "L1.H1");
    for (int a = 0; a < L * H; ++a)
        for (int b = 0; b < L * H; ++b) {
            const bool later = b / H > a / H;
            const double q = later ? (ov[a] * qk[b]).norm() / (ov[a].norm() * qk[b].norm()) : 0;
            const double k = later ? (ov[a] * qk[b].transpose()).norm() / (ov[a].norm() * qk[b].norm()) : 0;
            const double v = later ? (ov[a] * ov[b]).norm() / (ov[a].norm() * ov[b].norm()) : 0;
            EXPECT_NEAR(scores->q(a, b), q, 1e-4) << GetParam() << " " << a << "→" << b;
            EXPECT_NEAR(scores->k(a, b), k, 1e-4) << GetParam() << " " << a << "→" << b;
            EXPECT_NEAR(scores->v(a, b), v, 1e-4) << GetParam() << " " << a << "→" << b;
        }
    const auto top = attn::strongestCompositions(*scores, 5);
    ASSERT_EQ(top.size(), 5u);
    for (std::size_t t = 1; t < top.size(); ++t) EXPECT_GE(top[t - 1].value, top[t].value);
    const Matrix& best = top[0].kind == 'q' ? scores->q : top[0].kind == 'k' ? scores->k : scores->v;
    EXPECT_EQ(best(top[0].from, top[0].to), top[0].value);
    EXPECT_FLOAT_EQ(top[0].value, std::max({scores->q.maxCoeff(), scores->k.maxCoeff(), scores->v.maxCoeff()}));
}

// Every tiny family: pre-norms with LayerNorm (gpt2, gptneox: also a parallel residual and partial rotary) or RMSNorm,
// Q/K biases (qwen2), per-head QK-norm (qwen3, gemma3), whole-row QK-norm and post-norms only (olmo2), post-norms, a
// soft-cap and sliding windows (gemma2), fused projections (phi3, gptneox), LongRoPE's factors and attention factor
// (phi3_longrope).
INSTANTIATE_TEST_SUITE_P(Tiny, Families, ::testing::Values("gpt2", "llama", "qwen2", "qwen3", "gemma2", "gemma3", "gptneox",
                                                           "olmo2", "phi3", "phi3_longrope"));

// The window's helpers (issue 35's panel): the strongest pairs and components in order, and the matrix grouped by
// layer still summing to the score; an expanded layer keeps its components one by one.
TEST_P(Families, GroupsPairsAndTopComponents)
{
    attn::DecoderModel model = load(GetParam());
    auto run = attn::runDecoder(model, kIds, {});
    ASSERT_TRUE(run.ok()) << run.status().message;
    const int l = model.config.layers - 1;
    auto cell = attn::qkAttribution(model, *run, l, 0, 10, 3);
    ASSERT_TRUE(cell.ok()) << cell.status().message;
    const int C = static_cast<int>(cell->components.size());
    const std::vector<attn::QkPair> pairs = attn::strongestQkPairs(*cell, 5);
    ASSERT_EQ(pairs.size(), std::min<std::size_t>(5, std::size_t(C) * C));
    for (std::size_t t = 0; t < pairs.size(); ++t) {
        EXPECT_EQ(pairs[t].value, cell->matrix(pairs[t].query, pairs[t].key));
        if (t > 0) {
            EXPECT_GE(std::abs(pairs[t - 1].value), std::abs(pairs[t].value));
        }
    }
    EXPECT_EQ(std::abs(pairs[0].value), cell->matrix.cwiseAbs().maxCoeff());
    EXPECT_TRUE(attn::strongestQkPairs(*cell, 0).empty());
    const std::vector<int> top = attn::strongestQkComponents(cell->keyComponents, 3);
    ASSERT_EQ(top.size(), std::min<std::size_t>(3, std::size_t(C)));
    EXPECT_EQ(std::abs(cell->keyComponents[top[0]]), cell->keyComponents.cwiseAbs().maxCoeff());
    EXPECT_EQ(attn::strongestQkComponents(cell->keyComponents, 1000).size(), std::size_t(C));

    const attn::QkGroups folded = attn::groupQkByLayer(*cell, {});
    // embed, one group per earlier layer, and the own layer's qk_bias where the model has one.
    const bool bias = cell->components.back().find("qk_bias") != std::string::npos;
    ASSERT_EQ(folded.names.size(), std::size_t(1 + l + (bias ? 1 : 0)));
    EXPECT_EQ(folded.names[0], "embed");
    EXPECT_EQ(folded.names[1], "L0");
    EXPECT_TRUE(sums(folded.matrix.sum(), cell->score));
    EXPECT_TRUE(sums(folded.keyComponents.sum(), cell->score));
    EXPECT_TRUE(sums(folded.queryComponents.sum(), cell->score));
    EXPECT_LE((Vector(folded.matrix.colwise().sum().transpose()) - folded.keyComponents).cwiseAbs().maxCoeff(), 1e-4);
    const attn::QkGroups open = attn::groupQkByLayer(*cell, {0});
    const int perLayer = static_cast<int>(folded.members[1].size());
    ASSERT_EQ(open.names.size(), folded.names.size() + std::size_t(perLayer) - 1);
    EXPECT_EQ(open.names[1], "L0.H0");
    EXPECT_FALSE(open.wholeLayer[1]);
    EXPECT_EQ(open.keyComponents[1], cell->keyComponents[1]);
    EXPECT_TRUE(sums(open.matrix.sum(), cell->score));
    int head = -2;
    EXPECT_EQ(attn::qkComponentLayer("L12.H3", &head), 12);
    EXPECT_EQ(head, 3);
    EXPECT_EQ(attn::qkComponentLayer("L2.mlp", &head), 2);
    EXPECT_EQ(head, -1);
    EXPECT_EQ(attn::qkComponentLayer("embed", &head), -1);
    EXPECT_EQ(attn::qkComponentLayer("Lx.H1"), -1);
    EXPECT_TRUE(attn::groupQkByLayer(attn::QkCell{}, {}).names.empty());
}

// The GGUF fixtures (quantized views in place of dense weights, fused tensors as llama.cpp writes them) decompose as
// their directories do: the sum rule at the last layer, and the row's parts of the same cell.
TEST_P(Families, GgufFixtureSumsToTheScore)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_" + GetParam() + ".gguf");
    ASSERT_TRUE(model.ok()) << model.status().message;
    auto run = attn::runDecoder(*model, kIds);
    ASSERT_TRUE(run.ok());
    const int l = model->config.layers - 1, j = std::max(4, firstKey(model->config, l, 10));
    const int h = std::min(3, model->config.heads - 1);  // head 3, or the last of a 2-head model
    auto cell = attn::qkAttribution(*model, *run, l, h, 10, j);
    ASSERT_TRUE(cell.ok()) << cell.status().message;
    EXPECT_TRUE(sums(cell->keyComponents.sum(), cell->score)) << cell->keyComponents.sum() << " vs " << cell->score;
    EXPECT_TRUE(sums(cell->queryComponents.sum(), cell->score)) << cell->queryComponents.sum() << " vs " << cell->score;
    auto row = attn::qkAttributionRow(*model, *run, l, h, 10);
    ASSERT_TRUE(row.ok()) << row.status().message;
    EXPECT_LE((Vector(row->keyComponents.row(j - row->firstKey).transpose()) - cell->keyComponents).cwiseAbs().maxCoeff(), 1e-4);
    EXPECT_TRUE(attn::compositionScores(*model).ok());
}

TEST(QkAttribution, BadInputIsRefusedWithAClearMessage)
{
    attn::DecoderModel model = load("llama");
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    auto expectError = [](const auto& r, attn::StatusCode code, const std::string& part) {
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.status().code, code);
        EXPECT_NE(r.status().message.find(part), std::string::npos) << r.status().message;
    };
    expectError(attn::qkAttribution(model, *run, 2, 0, 3, 1), attn::StatusCode::InvalidArgument, "layer 2 is out of range: expected 0..1");
    expectError(attn::qkAttribution(model, *run, 0, 4, 3, 1), attn::StatusCode::InvalidArgument, "head 4 is out of range: expected 0..3");
    expectError(attn::qkAttribution(model, *run, 0, 0, 11, 1), attn::StatusCode::InvalidArgument, "query 11 is out of range: expected 0..10");
    expectError(attn::qkAttribution(model, *run, 0, 0, 3, -1), attn::StatusCode::InvalidArgument, "key -1 is out of range");
    expectError(attn::qkAttribution(model, *run, 0, 0, 3, 7), attn::StatusCode::InvalidArgument,
                "key 7 is after query 3 (masked: a query sees keys 0..3)");
    expectError(attn::qkAttributionRow(model, *run, 0, 0, 12), attn::StatusCode::InvalidArgument, "query 12 is out of range");
    expectError(attn::patchPattern(model, *run, 1, 0, "L1.H0", attn::QkSide::Key), attn::StatusCode::InvalidArgument,
                "component 'L1.H0' is not one of layer 1's");
    expectError(attn::patchPattern(model, *run, 1, 0, "L1.H0", attn::QkSide::Key), attn::StatusCode::InvalidArgument,
                "inputs: embed, L0.H0, …, L0.mlp (an earlier layer's head is named like L0.H1");
    expectError(attn::patchPattern(model, *run, 0, 0, "L0.H0", attn::QkSide::Query), attn::StatusCode::InvalidArgument,
                "component 'L0.H0' is not one of layer 0's only input, embed (");
    attn::DecoderRun pinned = *run;
    pinned.pinned.layer = 1;
    expectError(attn::qkAttribution(model, pinned, 1, 0, 3, 1), attn::StatusCode::Unsupported, "pinned");
    EXPECT_TRUE(attn::qkAttribution(model, pinned, 0, 0, 3, 1).ok());  // the pin is above layer 0
    attn::DecoderOptions lazy;
    lazy.lazy = true;
    auto lazyRun = attn::runDecoder(model, kIds, lazy);
    ASSERT_TRUE(lazyRun.ok());
    expectError(attn::qkAttribution(model, *lazyRun, 0, 0, 3, 1), attn::StatusCode::Unsupported, "lazy");
}

// Mistral's sliding window: a key outside it is masked, and the row starts at the window's first key.
TEST(QkAttribution, SlidingWindowMasksOldKeys)
{
    attn::DecoderModel model = load("llama");
    model.config.slidingWindow = 4;
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    auto bad = attn::qkAttribution(model, *run, 1, 0, 9, 5);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message.find("outside query 9's sliding window (masked: it sees keys 6..9)"), std::string::npos)
        << bad.status().message;
    auto row = attn::qkAttributionRow(model, *run, 1, 0, 9);
    ASSERT_TRUE(row.ok());
    EXPECT_EQ(row->firstKey, 6);
    EXPECT_EQ(row->scores.size(), 4);
    EXPECT_NEAR(row->weights.sum(), 1.0f, 1e-5);
    auto patch = attn::patchPattern(model, *run, 1, 0, "embed", attn::QkSide::Key);
    ASSERT_TRUE(patch.ok());
    EXPECT_EQ(patch->patched(9, 5), 0.0f);
    EXPECT_NEAR(patch->patched.row(9).sum(), 1.0f, 1e-5);
}

bool smolLM2Installed()
{
    if (FILE* f = std::fopen(ATTNSCOPE_SMOLLM2, "rb")) {
        std::fclose(f);
        return true;
    }
    return false;
}

// A real model's run of a short text (the model and run in `out`), and the sum rule at `layers`: cells with the last
// query and the first key, the last query and a near key, a middle query and key 1 (moved into a sliding window);
// layer 0's only component is the embedding.
struct RealRun {
    attn::DecoderModel model;
    attn::DecoderRun run;
    int n = 0;
};
void loadRealRun(const char* path, RealRun& out)
{
    auto model = attn::loadDecoder(path);
    ASSERT_TRUE(model.ok()) << model.status().message;
    out.model = std::move(*model);
    auto enc = attn::encodeForDecoder(out.model, "The capital of France is Paris, and the capital of Italy is", false);
    ASSERT_TRUE(enc.ok());
    auto run = attn::runDecoder(out.model, enc->ids);
    ASSERT_TRUE(run.ok());
    out.run = std::move(*run);
    out.n = static_cast<int>(enc->ids.size());
}
void expectSumRule(const RealRun& r, const std::vector<int>& layers)
{
    const int n = r.n;
    for (int l : layers)
        for (auto [h, i, j] : {std::tuple{0, n - 1, 0}, {4 % r.model.config.heads, n - 1, n - 3}, {1, n / 2, 1}}) {
            j = std::max(j, firstKey(r.model.config, l, i));
            auto cell = attn::qkAttribution(r.model, r.run, l, h, i, j);
            ASSERT_TRUE(cell.ok()) << cell.status().message;
            const std::string what = "layer " + std::to_string(l) + ", head " + std::to_string(h) + " (" +
                                     std::to_string(i) + "," + std::to_string(j) + ")";
            EXPECT_TRUE(sums(cell->queryComponents.sum(), cell->score)) << what << ": " << cell->queryComponents.sum() << " vs " << cell->score;
            EXPECT_TRUE(sums(cell->keyComponents.sum(), cell->score)) << what << ": " << cell->keyComponents.sum() << " vs " << cell->score;
            if (l == 0) {
                EXPECT_EQ(cell->components, std::vector<std::string>{"embed"});
            }
        }
}

// SmolLM2-135M-Instruct Q4_1: the sum rule at early, middle and last layers (30 layers: 0, 1, 15, 29).
TEST(QkAttributionGolden, SmolLM2SumRule)
{
    if (!smolLM2Installed()) GTEST_SKIP() << ATTNSCOPE_SMOLLM2 << " is not installed (scripts/setup.sh)";
    RealRun r;
    ASSERT_NO_FATAL_FAILURE(loadRealRun(ATTNSCOPE_SMOLLM2, r));
    expectSumRule(r, {0, 1, 15, 29});
}

// SmolLM2's composition scores (30 layers of 9 heads, d_model 576: the packed Grams are multiplied in chunks, the 261
// writers and 108 readers of a block padded to tiles of 4, tiles that straddle two layers) for a few pairs against
// dense M×M products in double (W^O, W^V, W^Q, W^K dequantized, γ folded).
TEST(QkAttributionGolden, SmolLM2CompositionEqualsDenseProducts)
{
    if (!smolLM2Installed()) GTEST_SKIP() << ATTNSCOPE_SMOLLM2 << " is not installed (scripts/setup.sh)";
    auto model = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
    ASSERT_TRUE(model.ok()) << model.status().message;
    auto scores = attn::compositionScores(*model);
    ASSERT_TRUE(scores.ok()) << scores.status().message;
    const attn::DecoderConfig& c = model->config;
    const int H = c.heads, D = c.headDim, G = c.heads / c.kvHeads;
    auto weight = [&](const attn::WeightMatrix& w, const attn::DecoderLayer& L) {
        return MatD(L.attnNormGamma.cast<double>().asDiagonal() * w.toMatrix().cast<double>());
    };
    for (auto [la, ha, lb, hb] : {std::tuple{16, 0, 18, 6}, {0, 0, 29, 8}, {5, 4, 6, 0}, {28, 8, 29, 8}, {3, 2, 17, 5}, {12, 7, 13, 3}}) {
        const attn::DecoderLayer &A = model->layers[la], &B = model->layers[lb];
        const MatD ov = weight(A.Wv, A).middleCols(ha / G * D, D) * A.Wo.toMatrix().cast<double>().middleRows(ha * D, D);
        const MatD wq = weight(B.Wq, B).middleCols(hb * D, D), wk = weight(B.Wk, B).middleCols(hb / G * D, D);
        const MatD qk = wq * wk.transpose();
        const MatD ovB = weight(B.Wv, B).middleCols(hb / G * D, D) * B.Wo.toMatrix().cast<double>().middleRows(hb * D, D);
        const int a = la * H + ha, b = lb * H + hb;
        const std::string what = scores->names[a] + " → " + scores->names[b];
        EXPECT_NEAR(scores->q(a, b), (ov * qk).norm() / (ov.norm() * qk.norm()), 1e-4) << what;
        EXPECT_NEAR(scores->k(a, b), (ov * qk.transpose()).norm() / (ov.norm() * qk.norm()), 1e-4) << what;
        EXPECT_NEAR(scores->v(a, b), (ov * ovB).norm() / (ov.norm() * ovB.norm()), 1e-4) << what;
        EXPECT_EQ(scores->q(b, a), 0.0f) << what;
    }
}

// Gemma 3 270M (Q4_K_M; when installed): QK-norm per head, post-norms, the embedding times √640, sliding layers
// beside global ones (every 6th). The sum rule at early, middle and last layers (18 layers: 0, 1, 5 (global), 9, 17),
// and the naive oracle's parts (each component alone through the frozen norms, W^Q/W^K, the QK-norm and RoPE) for
// every component of a layer-5 cell.
TEST(QkAttributionGolden, Gemma3SumRuleAndOracle)
{
    if (FILE* f = std::fopen(ATTNSCOPE_GEMMA3, "rb")) std::fclose(f);
    else GTEST_SKIP() << ATTNSCOPE_GEMMA3 << " is not installed (scripts/setup.sh)";
    RealRun r;
    ASSERT_NO_FATAL_FAILURE(loadRealRun(ATTNSCOPE_GEMMA3, r));
    ASSERT_EQ(r.model.config.layers, 18);
    expectSumRule(r, {0, 1, 5, 9, 17});
    const attn::DecoderModel* model = &r.model;
    const attn::DecoderRun* run = &r.run;
    const int n = r.n;
    // The oracle on layer 5's cell (query n − 1, key 2), head 2: its q and k are the run's, and each part matches.
    const int l = 5, h = 2, i = n - 1, j = 2, D = model->config.headDim;
    const std::vector<VecD> qv = naiveVectors(*model, *run, l, h, true, i), kv = naiveVectors(*model, *run, l, h, false, j);
    VecD q = VecD::Zero(D), k = VecD::Zero(D);
    for (const VecD& v : qv) q += v;
    for (const VecD& v : kv) k += v;
    const VecD runQ = run->attention[l].Q.row(i).segment(h * D, D).transpose().cast<double>();
    // 1e-3 of the vector's size: the oracle's double against the run's float over 640-wide sums of quantized weights.
    EXPECT_LE((q - runQ).cwiseAbs().maxCoeff(), 1e-3 * (1 + runQ.cwiseAbs().maxCoeff()));
    auto cell = attn::qkAttribution(*model, *run, l, h, i, j);
    ASSERT_TRUE(cell.ok());
    const double scale = run->attention[l].scale;
    for (std::size_t c = 0; c < qv.size(); ++c) {
        const double want = scale * q.dot(kv[c]), wantQ = scale * qv[c].dot(k);
        EXPECT_NEAR(cell->keyComponents[Eigen::Index(c)], want, 1e-3 * (1 + std::abs(want))) << cell->components[c];
        EXPECT_NEAR(cell->queryComponents[Eigen::Index(c)], wantQ, 1e-3 * (1 + std::abs(wantQ))) << cell->components[c];
    }
}

// The induction golden (make_qk_attribution_goldens.py: NumPy over gguf-py's dequantized weights): on the repeated
// Dursley text, the induction head's cell (the second " Privet" → " Drive") decomposed; its top key-side
// component is a previous-token head. Values within 1e-3 (NumPy in float64 over the same weights; our run's float32
// forward agrees with transformers to ~1e-3 of the largest logit, test_decoder_golden).
TEST(QkAttributionGolden, SmolLM2InductionHeadReadsAPreviousTokenHead)
{
    if (!smolLM2Installed()) GTEST_SKIP() << ATTNSCOPE_SMOLLM2 << " is not installed (scripts/setup.sh)";
    const nlohmann::json g = attn::testing::readGoldenJson("qk_attribution_smollm2.json", 1u << 20);
    ASSERT_FALSE(g.is_null());
    auto model = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
    ASSERT_TRUE(model.ok());
    auto enc = attn::encodeForDecoder(*model, g["text"].get<std::string>(), false);
    ASSERT_TRUE(enc.ok());
    ASSERT_EQ(enc->ids, g["ids"].get<std::vector<int>>());
    auto run = attn::runDecoder(*model, enc->ids);
    ASSERT_TRUE(run.ok());
    const int l = g["layer"], h = g["head"], i = g["query"], j = g["key"];
    auto cell = attn::qkAttribution(*model, *run, l, h, i, j);
    ASSERT_TRUE(cell.ok()) << cell.status().message;
    EXPECT_NEAR(cell->score, g["score"].get<float>(), 1e-3 * (1 + std::abs(g["score"].get<float>())));
    ASSERT_EQ(cell->components, g["components"].get<std::vector<std::string>>());
    const auto keySide = g["key_components"].get<std::vector<float>>(), querySide = g["query_components"].get<std::vector<float>>();
    for (std::size_t c = 0; c < keySide.size(); ++c) {
        EXPECT_NEAR(cell->keyComponents[Eigen::Index(c)], keySide[c], 1e-3 * (1 + std::abs(keySide[c]))) << cell->components[c];
        EXPECT_NEAR(cell->queryComponents[Eigen::Index(c)], querySide[c], 1e-3 * (1 + std::abs(querySide[c]))) << cell->components[c];
    }
    Eigen::Index top = 0;
    cell->keyComponents.maxCoeff(&top);
    EXPECT_EQ(cell->components[static_cast<std::size_t>(top)], g["top_key_component"].get<std::string>());
    // That component is a previous-token head of this run.
    const std::string name = cell->components[static_cast<std::size_t>(top)];
    ASSERT_EQ(name.rfind('L', 0), 0u);
    const int pl = std::stoi(name.substr(1)), ph = std::stoi(name.substr(name.find(".H") + 2));
    const attn::HeadTypes types = attn::headTypes(*run);
    EXPECT_GE(types.previous(pl, ph), g["previous_score_at_least"].get<float>()) << name;
}

} // namespace
