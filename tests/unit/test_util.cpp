#include "test_util.h"

#include <cmath>
#include <sstream>

namespace attn::test {

Matrix randomMatrix(std::mt19937& rng, int rows, int cols, float stddev)
{
    std::normal_distribution<float> d(0.0f, stddev);
    Matrix m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
    return m;
}

void makeProblem(const ProblemSpec& p, AttentionInput& in, AttentionConfig& cfg)
{
    std::mt19937 rng(p.seed);
    in = AttentionInput{};
    cfg = AttentionConfig{};
    cfg.mode = p.mode;
    cfg.score = p.score;
    cfg.heads = p.heads;
    cfg.kvHeads = p.kvHeads;
    const int S = p.mode == Mode::Self ? p.T : p.S;
    const int H = p.heads;
    const int Hkv = p.kvHeads > 0 ? p.kvHeads : p.heads;
    const int dq = p.score == Score::Additive && p.mode == Mode::Direct ? p.dqAdditive : p.dk;
    if (p.mode == Mode::Direct) {
        in.Q = randomMatrix(rng, p.T, H * dq);
        in.K = randomMatrix(rng, S, Hkv * p.dk);
        in.V = randomMatrix(rng, S, Hkv * p.dv);
    } else {
        in.X = randomMatrix(rng, p.T, p.M);
        if (p.mode == Mode::Cross) in.Xkv = randomMatrix(rng, S, p.M);
        in.Wq = randomMatrix(rng, p.M, H * p.dk, 0.5f);
        in.Wk = randomMatrix(rng, p.M, Hkv * p.dk, 0.5f);
        in.Wv = randomMatrix(rng, p.M, Hkv * p.dv, 0.5f);
        if (p.biases) {
            in.bq = randomMatrix(rng, H * p.dk, 1).col(0);
            in.bk = randomMatrix(rng, Hkv * p.dk, 1).col(0);
            in.bv = randomMatrix(rng, Hkv * p.dv, 1).col(0);
        }
    }
    if (p.wo) {
        in.Wo = randomMatrix(rng, H * p.dv, 4, 0.5f);
        if (p.biases) in.bo = randomMatrix(rng, 4, 1).col(0);
    }
    if (p.score == Score::Additive) {
        in.additive.Aq = randomMatrix(rng, dq, p.A, 0.7f);
        in.additive.Ak = randomMatrix(rng, p.dk, p.A, 0.7f);
        in.additive.wv = randomMatrix(rng, p.A, 1).col(0);
    }
    in.mask.causal = p.causal;
    in.mask.fill = p.fill;
    if (p.keyPadding) {
        in.mask.keyPadding.assign(S, 0);
        in.mask.keyPadding[S - 1] = 1;
    }
    if (p.validLens) {
        for (int i = 0; i < p.T; ++i) in.mask.validLens.push_back(1 + (i * 3) % S);
        in.mask.validLens[0] = 0;  // query 0 sees no key at all: the fully-masked rule
    }
    if (p.custom) {
        in.mask.custom.resize(p.T, S);
        std::bernoulli_distribution coin(0.3);
        for (Eigen::Index i = 0; i < in.mask.custom.size(); ++i) in.mask.custom.data()[i] = coin(rng) ? 1 : 0;
    }
}

AttentionInput transposed(const AttentionInput& in)
{
    AttentionInput t = in;
    for (Matrix* m : {&t.X, &t.Xkv, &t.Wq, &t.Wk, &t.Wv, &t.Wo, &t.Q, &t.K, &t.V, &t.additive.Aq, &t.additive.Ak})
        *m = Matrix(m->transpose());
    t.mask.custom = MaskMatrix(in.mask.custom.transpose());
    return t;
}

::testing::AssertionResult near(const Matrix& actual, const Matrix& expected, float atol, float rtol,
                                const std::string& what)
{
    if (actual.rows() != expected.rows() || actual.cols() != expected.cols())
        return ::testing::AssertionFailure() << what << ": shape " << actual.rows() << "×" << actual.cols()
                                             << ", expected " << expected.rows() << "×" << expected.cols();
    double maxDiff = 0;
    int bad = 0;
    std::ostringstream first;
    for (Eigen::Index i = 0; i < actual.rows(); ++i)
        for (Eigen::Index j = 0; j < actual.cols(); ++j) {
            const double a = actual(i, j), e = expected(i, j);
            const double diff = std::fabs(a - e);
            maxDiff = std::max(maxDiff, diff);
            if (!(diff <= atol + rtol * std::fabs(e))) {
                if (bad < 5) first << "\n  [" << i << "][" << j << "] got " << a << ", expected " << e;
                ++bad;
            }
        }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << bad << " mismatches, max |diff| " << maxDiff << first.str();
}

} // namespace attn::test
