// Interpretability views of a decoder run (attnscope/interp.h, issue 20) on the tiny random gpt2 / llama / qwen2
// fixtures: the scans against the naive way (one whole recompute per head), the sum rule of direct logit
// attribution, the logit lens against the model's own predictions, head types on a hand-built run, the induction
// probe, cancellation and bad input. Tolerances: 1e-4 (float32 forwards of a few layers; the batched scans sum in
// another order than the naive recomputes, which moves logits by ~1e-6 here).
#include <attnscope/interp.h>

#include "golden_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using attn::Matrix;
using attn::Vector;

attn::DecoderModel load(const std::string& family)
{
    auto model = attn::loadDecoder(std::string(ATTNSCOPE_DECODER_DATA) + "/tiny_" + family);
    EXPECT_TRUE(model.ok()) << model.status().message;
    return model.ok() ? std::move(*model) : attn::DecoderModel{};
}

const std::vector<int> kIds = {5, 17, 42, 99, 3, 250, 7, 64, 42, 99, 11};

// The last position's logits of the final residual stream, computed here from the model's weights.
Vector logitsOfLastRow(const attn::DecoderModel& m, const Matrix& hiddenL)
{
    const Vector x = hiddenL.row(hiddenL.rows() - 1).transpose();
    const float M = static_cast<float>(x.size());
    Vector normed;
    if (m.config.family == attn::DecoderFamily::Gpt2) {
        const float mean = x.mean();
        const float var = (x.array() - mean).square().sum() / M;
        normed = ((x.array() - mean) / std::sqrt(var + m.config.normEps)).matrix().cwiseProduct(m.finalNormGamma) + m.finalNormBeta;
    } else {
        normed = x.cwiseProduct(m.finalNormGamma) / std::sqrt(x.squaredNorm() / M + m.config.normEps);
    }
    return attn::referenceProduct(Matrix(normed.transpose()), m.unembedding()).transpose();
}

// The rest of a block after its attention, written out plainly (the naive oracle of the patching scan).
Matrix rowNorm(const attn::DecoderModel& m, const Matrix& x, const Vector& gamma, const Vector& beta)
{
    Matrix out(x.rows(), x.cols());
    const float M = static_cast<float>(x.cols());
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        if (m.config.family == attn::DecoderFamily::Gpt2) {
            const float mean = x.row(i).mean();
            const float var = (x.row(i).array() - mean).square().sum() / M;
            out.row(i) = ((x.row(i).array() - mean) / std::sqrt(var + m.config.normEps)).matrix().cwiseProduct(gamma.transpose()) +
                         beta.transpose();
        } else {
            out.row(i) = x.row(i).cwiseProduct(gamma.transpose()) / std::sqrt(x.row(i).squaredNorm() / M + m.config.normEps);
        }
    }
    return out;
}

Matrix afterAttention(const attn::DecoderModel& m, int l, const Matrix& concat, const Matrix& x)
{
    const attn::DecoderLayer& L = m.layers[static_cast<std::size_t>(l)];
    Matrix attnOut = concat * L.Wo.toMatrix();
    if (L.bo.size() > 0) attnOut.rowwise() += L.bo.transpose();
    Matrix h = x + attnOut;
    const Matrix n = rowNorm(m, h, L.ffnNormGamma, L.ffnNormBeta);
    if (m.config.family == attn::DecoderFamily::Gpt2) {
        Matrix a = n * L.Wfc.toMatrix();
        a.rowwise() += L.bfc.transpose();
        const float k = 0.7978845608028654f;
        a = (0.5f * a.array() * (1.0f + (k * (a.array() + 0.044715f * a.array().cube())).tanh())).matrix();
        Matrix f = a * L.Wproj.toMatrix();
        f.rowwise() += L.bproj.transpose();
        return h + f;
    }
    Matrix g = n * L.Wgate.toMatrix(), u = n * L.Wup.toMatrix();
    Matrix a = (g.array() / (1.0f + (-g.array()).exp()) * u.array()).matrix();
    return h + a * L.Wdown.toMatrix();
}

// Head importance the naive way: run.ablated + {(l, h)}, a recompute from that layer (pins honoured), log p difference.
Matrix naiveImportance(attn::DecoderModel& model, const attn::DecoderRun& run, int target)
{
    const int L = model.config.layers, H = model.config.heads;
    Matrix out(L, H);
    const float base = attn::logProbability(run.lastLogits, target);
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            attn::DecoderRun copy = run;
            copy.ablated.emplace_back(l, h);
            EXPECT_TRUE(attn::recomputeDecoderFrom(model, l, copy).ok());
            out(l, h) = attn::logProbability(copy.lastLogits, target) - base;
        }
    return out;
}

class Families : public ::testing::TestWithParam<std::string> {};

TEST_P(Families, HeadImportanceEqualsOneRecomputePerHead)
{
    attn::DecoderModel model = load(GetParam());
    // Without ablations, and with a head already ablated (it scores 0, the others are scored on top of it).
    for (const auto& ablate : {std::vector<std::pair<int, int>>{}, std::vector<std::pair<int, int>>{{1, 2}}}) {
        attn::DecoderOptions o;
        o.ablate = ablate;
        auto run = attn::runDecoder(model, kIds, o);
        ASSERT_TRUE(run.ok()) << run.status().message;
        auto target = attn::interpTarget(model, *run);
        ASSERT_TRUE(target.ok());
        Matrix scan;
        ASSERT_TRUE(attn::headImportance(model, *run, target->id, scan).ok());
        // The oracle through runDecoder itself (a whole forward per head).
        Matrix whole(model.config.layers, model.config.heads);
        for (int l = 0; l < model.config.layers; ++l)
            for (int h = 0; h < model.config.heads; ++h) {
                attn::DecoderOptions oh = o;
                oh.ablate.emplace_back(l, h);
                auto r = attn::runDecoder(model, kIds, oh);
                ASSERT_TRUE(r.ok());
                whole(l, h) = attn::logProbability(r->lastLogits, target->id) - target->logprob;
            }
        EXPECT_LE((scan - whole).cwiseAbs().maxCoeff(), 1e-4) << GetParam() << "\nscan\n" << scan << "\nwhole\n" << whole;
        for (const auto& [l, h] : ablate) EXPECT_EQ(scan(l, h), 0.0f);
        EXPECT_GT(scan.cwiseAbs().maxCoeff(), 1e-4) << "some head must matter";
    }
}

TEST_P(Families, ActivationPatchingEqualsANaivePatchPerHead)
{
    attn::DecoderModel model = load(GetParam());
    std::vector<int> cleanIds = kIds, corruptIds = kIds;
    corruptIds[3] = 120;  // one token differs, as " Mary" for " John"
    attn::DecoderOptions o;
    o.ablate = {{0, 1}};
    auto clean = attn::runDecoder(model, cleanIds, o);
    auto corrupt = attn::runDecoder(model, corruptIds, o);
    ASSERT_TRUE(clean.ok() && corrupt.ok());
    auto a = attn::interpTarget(model, *clean);
    auto b = attn::interpTarget(model, *corrupt);
    ASSERT_TRUE(a.ok() && b.ok());
    int targetB = b->id != a->id ? b->id : (a->id + 1) % model.config.vocab;
    Matrix scan;
    attn::PatchingMetric metric;
    ASSERT_TRUE(attn::activationPatching(model, *clean, *corrupt, a->id, targetB, scan, &metric).ok());
    EXPECT_FLOAT_EQ(metric.clean, clean->lastLogits[a->id] - clean->lastLogits[targetB]);
    EXPECT_FLOAT_EQ(metric.corrupted, corrupt->lastLogits[a->id] - corrupt->lastLogits[targetB]);
    const int L = model.config.layers, H = model.config.heads, D = model.config.headDim;
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            attn::DecoderRun copy = *corrupt;
            Matrix concat = copy.attention[l].concat;
            concat.middleCols(h * D, D) = clean->attention[l].concat.middleCols(h * D, D);
            copy.hidden[l + 1] = afterAttention(model, l, concat, copy.hidden[l]);
            if (l + 1 < L) {
                ASSERT_TRUE(attn::recomputeDecoderFrom(model, l + 1, copy).ok());
            }
            const Vector logits = logitsOfLastRow(model, copy.hidden[L]);
            const float m = logits[a->id] - logits[targetB];
            const float want = (m - metric.corrupted) / (metric.clean - metric.corrupted);
            EXPECT_NEAR(scan(l, h), want, 1e-4) << GetParam() << " L" << l << " H" << h;
        }
    // The head ablated in both runs has no context to patch in.
    EXPECT_NEAR(scan(0, 1), 0.0f, 1e-5);
}

TEST_P(Families, DirectLogitAttributionSumsToTheLogit)
{
    attn::DecoderModel model = load(GetParam());
    attn::DecoderOptions o;
    o.ablate = {{1, 0}};
    auto run = attn::runDecoder(model, kIds, o);
    ASSERT_TRUE(run.ok());
    for (int target : {attn::interpTarget(model, *run)->id, 7, 300}) {
        auto dla = attn::directLogitAttribution(model, *run, target);
        ASSERT_TRUE(dla.ok()) << dla.status().message;
        const double sum = double(dla->embed) + dla->heads.cast<double>().sum() + dla->attnBias.cast<double>().sum() +
                           dla->mlp.cast<double>().sum() + dla->normBias;
        const double largest = std::max({double(dla->heads.cwiseAbs().maxCoeff()), double(dla->mlp.cwiseAbs().maxCoeff()),
                                         double(std::abs(dla->embed)), double(std::abs(dla->normBias)),
                                         double(dla->attnBias.cwiseAbs().maxCoeff())});
        EXPECT_FLOAT_EQ(dla->logit, run->lastLogits[target]);
        EXPECT_LE(std::abs(sum - dla->logit), 1e-4 * largest) << GetParam() << " target " << target;
        EXPECT_EQ(dla->heads(1, 0), 0.0f) << "an ablated head writes nothing";
        EXPECT_GT(dla->heads.cwiseAbs().maxCoeff(), 0.0f);
        if (model.config.family != attn::DecoderFamily::Gpt2) {
            EXPECT_EQ(dla->normBias, 0.0f);
        }
    }
}

TEST_P(Families, LogitLensEndsWithTheModelsOwnPrediction)
{
    attn::DecoderModel model = load(GetParam());
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    auto lens = attn::logitLens(model, *run, 3);
    ASSERT_TRUE(lens.ok()) << lens.status().message;
    const int L = model.config.layers, n = static_cast<int>(kIds.size());
    ASSERT_EQ(static_cast<int>(lens->top.size()), L);
    EXPECT_EQ(lens->firstPosition, 0);
    for (const auto& layer : lens->top) {
        ASSERT_EQ(static_cast<int>(layer.size()), n);
        for (const auto& top : layer) {
            ASSERT_EQ(top.size(), 3u);
            EXPECT_GE(top[0].p, top[1].p);
        }
    }
    const auto own = attn::topTokens(model, run->lastLogits, 3);
    for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(lens->top[L - 1][n - 1][k].id, own[k].id);
        EXPECT_NEAR(lens->top[L - 1][n - 1][k].p, own[k].p, 1e-5);
    }
    // The last 4 positions only: the same as the last 4 of all.
    auto part = attn::logitLens(model, *run, 1, 4);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(part->firstPosition, n - 4);
    ASSERT_EQ(part->top[0].size(), 4u);
    for (int l = 0; l < L; ++l)
        for (int i = 0; i < 4; ++i) EXPECT_EQ(part->top[l][i][0].id, lens->top[l][n - 4 + i][0].id);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Families, ::testing::Values("gpt2", "llama", "qwen2"));

TEST(Interp, ScansHonourPinsAndTheSlidingWindow)
{
    // Mistral's sliding window (on the tiny llama: 3 keys) and a pinned layer 1 (V doubled).
    attn::DecoderModel model = load("llama");
    model.config.slidingWindow = 3;
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    run->pinned = {1, run->attention[1].Q, run->attention[1].K, run->attention[1].V * 2.0f};
    ASSERT_TRUE(attn::recomputeDecoderFrom(model, 0, *run).ok());
    const int target = attn::interpTarget(model, *run)->id;
    Matrix scan;
    ASSERT_TRUE(attn::headImportance(model, *run, target, scan).ok());
    const Matrix naive = naiveImportance(model, *run, target);
    EXPECT_LE((scan - naive).cwiseAbs().maxCoeff(), 1e-4) << "\nscan\n" << scan << "\nnaive\n" << naive;
}

TEST(Interp, ProgressStopsAScan)
{
    attn::DecoderModel model = load("gpt2");
    auto run = attn::runDecoder(model, kIds);
    ASSERT_TRUE(run.ok());
    std::vector<int> rows;
    Matrix scan;
    ASSERT_TRUE(attn::headImportance(model, *run, 7, scan, [&](int l) {
                    rows.push_back(l);
                    return false;
                }).ok());
    ASSERT_EQ(rows, std::vector<int>{1}) << "the layer nearest the output comes first, and the scan stops there";
    EXPECT_TRUE(scan.row(1).allFinite());
    // Rows are computed in groups of layers (here both layers at once): a row is whole or NaN, never partial.
    for (Eigen::Index l = 0; l < scan.rows(); ++l)
        EXPECT_TRUE(scan.row(l).allFinite() || scan.row(l).array().isNaN().all()) << "layer " << l;
    // Without a stop, every row, nearest the output first.
    rows.clear();
    ASSERT_TRUE(attn::headImportance(model, *run, 7, scan, [&](int l) {
                    rows.push_back(l);
                    return true;
                }).ok());
    EXPECT_EQ(rows, (std::vector<int>{1, 0}));
    EXPECT_TRUE(scan.allFinite());
}

TEST(Interp, HeadTypesOfAHandBuiltRun)
{
    // Tokens a b c a b c; four heads, each attending with weight 1 to one key per query.
    attn::DecoderRun run;
    run.encoding.ids = {7, 8, 9, 7, 8, 9};
    const int n = 6;
    run.attention.resize(1);
    run.attention[0].heads.resize(4);
    run.weights.resize(1);
    run.weights[0].resize(4);
    auto head = [&](int h, auto keyOf) {
        Matrix w = Matrix::Zero(n, n);
        for (int i = 0; i < n; ++i) w(i, keyOf(i)) = 1;
        run.weights[0][static_cast<std::size_t>(h)] = attn::HeadWeights(w);
    };
    head(0, [](int i) { return i > 0 ? i - 1 : 0; });         // previous token
    head(1, [](int) { return 0; });                           // sink
    head(2, [](int i) { return i >= 3 ? i - 2 : 0; });        // induction: the token after the earlier copy
    head(3, [](int i) { return i >= 3 ? i - 3 : i; });        // duplicate: the earlier copy (itself before)
    const attn::HeadTypes t = attn::headTypes(run);
    EXPECT_TRUE(t.hasRepeats);
    // Queries 1…5 for previous and sink; 3, 4, 5 for duplicate and induction (copies at 0, 1, 2; next tokens 1, 2, 3).
    EXPECT_FLOAT_EQ(t.previous(0, 0), 1.0f);
    EXPECT_FLOAT_EQ(t.sink(0, 0), 1.0f / 5);      // query 1's previous token is the first
    EXPECT_FLOAT_EQ(t.duplicate(0, 0), 0.0f);
    EXPECT_FLOAT_EQ(t.induction(0, 0), 0.0f);
    EXPECT_FLOAT_EQ(t.sink(0, 1), 1.0f);
    EXPECT_FLOAT_EQ(t.previous(0, 1), 1.0f / 5);
    EXPECT_FLOAT_EQ(t.induction(0, 2), 1.0f);
    EXPECT_FLOAT_EQ(t.duplicate(0, 2), 0.0f);
    EXPECT_FLOAT_EQ(t.sink(0, 2), 2.0f / 5);      // queries 1 and 2
    EXPECT_FLOAT_EQ(t.previous(0, 2), 1.0f / 5);  // query 1
    EXPECT_FLOAT_EQ(t.duplicate(0, 3), 1.0f);
    EXPECT_FLOAT_EQ(t.induction(0, 3), 0.0f);
    EXPECT_FLOAT_EQ(t.previous(0, 3), 0.0f);
    // No repeats: duplicate and induction are 0 and the flag says why.
    run.encoding.ids = {1, 2, 3, 4, 5, 6};
    const attn::HeadTypes u = attn::headTypes(run);
    EXPECT_FALSE(u.hasRepeats);
    EXPECT_EQ(u.duplicate.cwiseAbs().maxCoeff(), 0.0f);
    EXPECT_EQ(u.induction.cwiseAbs().maxCoeff(), 0.0f);
    EXPECT_FLOAT_EQ(u.previous(0, 0), 1.0f);
}

TEST(Interp, InductionProbeReencodes)
{
    for (const char* family : {"gpt2", "llama", "qwen2"}) {
        attn::DecoderModel model = load(family);
        auto probe = attn::inductionProbe(model, 5, 3);
        if (!probe.ok()) {
            // A random tiny vocabulary may hold too few word tokens; the message says so.
            EXPECT_NE(probe.status().message.find("word tokens"), std::string::npos) << probe.status().message;
            continue;
        }
        auto enc = attn::encodeForDecoder(model, probe->text, false);
        ASSERT_TRUE(enc.ok());
        EXPECT_EQ(enc->ids, probe->ids) << family;
        const std::size_t bos = probe->ids.size() - 10;
        ASSERT_LE(bos, 1u);
        for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(probe->ids[bos + i], probe->ids[bos + 5 + i]);
        // Seeded: the same seed the same probe, another seed another.
        EXPECT_EQ(attn::inductionProbe(model, 5, 3)->ids, probe->ids);
    }
#ifdef ATTNSCOPE_SMOLLM2
    if (FILE* f = std::fopen(ATTNSCOPE_SMOLLM2, "rb")) {
        std::fclose(f);
        auto model = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
        ASSERT_TRUE(model.ok());
        auto probe = attn::inductionProbe(*model, 20, 1);
        ASSERT_TRUE(probe.ok()) << probe.status().message;
        ASSERT_EQ(probe->ids.size(), 40u + (model->tokenizer.bos() >= 0 && probe->ids.size() == 41 ? 1 : 0));
        auto enc = attn::encodeForDecoder(*model, probe->text, false);
        ASSERT_TRUE(enc.ok());
        EXPECT_EQ(enc->ids, probe->ids);
        EXPECT_NE(attn::inductionProbe(*model, 20, 2)->ids, probe->ids);
    }
#endif
}

TEST(Interp, BadInputIsRefusedWithAMessage)
{
    attn::DecoderModel model = load("gpt2");
    auto run = attn::runDecoder(model, kIds);
    auto shorter = attn::runDecoder(model, std::vector<int>(kIds.begin(), kIds.end() - 1));
    ASSERT_TRUE(run.ok() && shorter.ok());
    Matrix out;
    auto s = attn::headImportance(model, *run, 320, out);
    EXPECT_EQ(s.message, "target id 320 is outside the vocabulary 0..319");
    EXPECT_EQ(attn::interpTarget(model, *run, -5)->id, attn::topTokens(model, run->lastLogits, 1)[0].id);
    EXPECT_FALSE(attn::interpTarget(model, *run, 320).ok());
    EXPECT_FALSE(attn::directLogitAttribution(model, *run, 320).ok());
    s = attn::activationPatching(model, *run, *shorter, 1, 2, out);
    EXPECT_EQ(s.message, "patching: the clean run has 11 tokens, the corrupted run 10; patching needs equal lengths");
    s = attn::activationPatching(model, *run, *run, 1, 2, out);
    EXPECT_NE(s.message.find("there is no difference to recover"), std::string::npos) << s.message;
    attn::DecoderOptions o;
    o.ablate = {{0, 0}};
    auto ablated = attn::runDecoder(model, kIds, o);
    s = attn::activationPatching(model, *run, *ablated, 1, 2, out);
    EXPECT_NE(s.message.find("ablate different heads"), std::string::npos) << s.message;
    // A typed target: one token, or a message naming the pieces.
    auto one = attn::targetTokenId(model, model.tokenizer.tokenText(260));
    ASSERT_TRUE(one.ok()) << one.status().message;
    EXPECT_EQ(*one, 260);
    auto several = attn::targetTokenId(model, " Marianne");
    ASSERT_FALSE(several.ok());
    auto enc = model.tokenizer.encode(" Marianne", false);
    std::string want = "' Marianne' is " + std::to_string(enc->ids.size()) + " tokens:";
    for (const auto& t : enc->tokens) want += " '" + t + "'";
    EXPECT_EQ(several.status().message, want + "; a target is one token");
    EXPECT_EQ(attn::targetTokenId(model, "").status().message, "the target is empty; a target is one token");
    // A run that is not this model's (one layer short).
    attn::DecoderRun cut = *run;
    cut.attention.pop_back();
    cut.hidden.pop_back();
    auto d = attn::directLogitAttribution(model, cut, 1);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().message, "the run does not come from this model (1 layers, the model has 2)");
}

TEST(Interp, ScanFlopsCountTheRecomputes)
{
    attn::DecoderConfig c;
    c.family = attn::DecoderFamily::Llama;
    c.layers = 2;
    c.heads = 2;
    c.kvHeads = 1;
    c.hidden = 4;
    c.headDim = 2;
    c.intermediate = 8;
    c.vocab = 10;
    // n = 3: per variant, O 2·3·4·4 = 96, FFN 2·3·4·8·3 = 576, Q/K/V 2·3·4·(4+4) = 192, attention 4·2·9·2 = 144,
    // LM head 2·4·10 = 80. Row 1: 2·(96+576+80); row 0: 2·(96+576+192+144+96+576+80).
    EXPECT_DOUBLE_EQ(attn::headScanFlops(c, 3), 2 * (96 + 576 + 80) + 2 * (96 + 576 + 192 + 144 + 96 + 576 + 80));
}

// SmolLM2-135M-Instruct Q4_1 against transformers (make_interp_goldens.py): hooks on o_proj as a notebook would
// ablate or patch, DLA in float64, the logit lens through model.norm and the LM head. Tolerances are the brief's
// 1e-3 (nats for importance, logit units for DLA, fractions for patching): our forward and transformers' agree to
// ~1e-3 of the largest logit (test_decoder_golden), which bounds each difference of two forwards. Head types are
// means of attention weights, which agree within 1e-4 there, so 1e-4 here.
TEST(InterpGolden, SmolLM2MatchesTransformers)
{
    if (FILE* f = std::fopen(ATTNSCOPE_SMOLLM2, "rb")) std::fclose(f);
    else GTEST_SKIP() << ATTNSCOPE_SMOLLM2 << " is not installed (scripts/setup.sh)";
    const nlohmann::json g = attn::testing::readGoldenJson("interp_smollm2.json", 8u << 20);
    ASSERT_FALSE(g.is_null());
    auto model = attn::loadDecoder(ATTNSCOPE_SMOLLM2);
    ASSERT_TRUE(model.ok()) << model.status().message;
    const int L = model->config.layers, H = model->config.heads;
    auto matrixOf = [&](const nlohmann::json& rows) {
        Matrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows[0].size()));
        for (Eigen::Index r = 0; r < m.rows(); ++r)
            for (Eigen::Index c = 0; c < m.cols(); ++c) m(r, c) = rows[r][c].get<float>();
        return m;
    };
    for (const auto& c : g["cases"]) {
        const std::string what = c["text"].get<std::string>();
        auto enc = attn::encodeForDecoder(*model, what, false);
        ASSERT_TRUE(enc.ok());
        ASSERT_EQ(enc->ids, c["ids"].get<std::vector<int>>()) << what;
        auto run = attn::runDecoder(*model, enc->ids);
        ASSERT_TRUE(run.ok());
        auto target = attn::interpTarget(*model, *run);
        ASSERT_TRUE(target.ok());
        ASSERT_EQ(target->id, c["target"].get<int>()) << what;
        EXPECT_NEAR(target->logprob, c["logprob"].get<float>(), 1e-3) << what;
        Matrix importance;
        ASSERT_TRUE(attn::headImportance(*model, *run, target->id, importance).ok());
        const Matrix want = matrixOf(c["head_importance"]);
        EXPECT_LE((importance - want).cwiseAbs().maxCoeff(), 1e-3) << what;
        auto dla = attn::directLogitAttribution(*model, *run, target->id);
        ASSERT_TRUE(dla.ok());
        EXPECT_LE((dla->heads - matrixOf(c["dla"]["heads"])).cwiseAbs().maxCoeff(), 1e-3) << what;
        for (int l = 0; l < L; ++l) EXPECT_NEAR(dla->mlp[l], c["dla"]["mlp"][l].get<float>(), 1e-3) << what << " mlp " << l;
        EXPECT_NEAR(dla->embed, c["dla"]["embed"].get<float>(), 1e-3) << what;
        EXPECT_NEAR(dla->logit, c["dla"]["logit"].get<float>(), 1e-3) << what;
        // Lens: the top-1 token of every layer and position; where transformers' two most probable tokens are
        // within 1e-4 in probability, float rounding may pick either, so such a near-tie is not a mismatch.
        auto lens = attn::logitLens(*model, *run, 1);
        ASSERT_TRUE(lens.ok());
        int mismatches = 0;
        for (int l = 0; l < L; ++l)
            for (std::size_t i = 0; i < enc->ids.size(); ++i)
                if (lens->top[l][i][0].id != c["lens_top1"][l][i].get<int>() && c["lens_gap"][l][i].get<double>() > 1e-4) {
                    ++mismatches;
                    ADD_FAILURE() << what << ": lens layer " << l << " position " << i << ": " << lens->top[l][i][0].id
                                  << ", transformers " << c["lens_top1"][l][i];
                }
        EXPECT_EQ(mismatches, 0);
        const attn::HeadTypes types = attn::headTypes(*run);
        for (const char* kind : {"previous", "duplicate", "induction", "sink"}) {
            const Matrix& m = std::string(kind) == "previous" ? types.previous
                              : std::string(kind) == "duplicate" ? types.duplicate
                              : std::string(kind) == "induction" ? types.induction : types.sink;
            EXPECT_LE((m - matrixOf(c["head_types"][kind])).cwiseAbs().maxCoeff(), 1e-4) << what << " " << kind;
        }
    }
    const auto& p = g["patching"];
    auto cleanIds = attn::encodeForDecoder(*model, p["clean_text"].get<std::string>(), false);
    auto badIds = attn::encodeForDecoder(*model, p["corrupted_text"].get<std::string>(), false);
    ASSERT_TRUE(cleanIds.ok() && badIds.ok());
    auto clean = attn::runDecoder(*model, cleanIds->ids);
    auto bad = attn::runDecoder(*model, badIds->ids);
    ASSERT_TRUE(clean.ok() && bad.ok());
    auto a = attn::targetTokenId(*model, p["targets"][0].get<std::string>());
    auto b = attn::targetTokenId(*model, p["targets"][1].get<std::string>());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, p["target_ids"][0].get<int>());
    EXPECT_EQ(*b, p["target_ids"][1].get<int>());
    Matrix map;
    attn::PatchingMetric metric;
    ASSERT_TRUE(attn::activationPatching(*model, *clean, *bad, *a, *b, map, &metric).ok());
    EXPECT_NEAR(metric.clean, p["clean"].get<float>(), 1e-3);
    EXPECT_NEAR(metric.corrupted, p["corrupted"].get<float>(), 1e-3);
    ASSERT_EQ(map.rows(), L);
    ASSERT_EQ(map.cols(), H);
    EXPECT_LE((map - matrixOf(p["map"])).cwiseAbs().maxCoeff(), 1e-3);
}

} // namespace
