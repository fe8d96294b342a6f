// Heads lesson (attnscope/lessons/heads.h).
#include "attnscope/lessons/heads.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

std::vector<HeadBlock> headBlocks(const Dims& d)
{
    std::vector<HeadBlock> blocks;
    for (int h = 0; h < d.H; ++h)
        blocks.push_back({h, h * d.dq, (h + 1) * d.dq, h * d.dk, (h + 1) * d.dk, h * d.dv, (h + 1) * d.dv});
    return blocks;
}

Expected<Matrix> headSelector(int width, int heads, int head)
{
    if (width < 1) return invalidArgument("width: expected at least 1, got " + std::to_string(width));
    if (heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(heads));
    if (width % heads != 0)
        return invalidArgument("heads: " + std::to_string(heads) + " does not divide width " + std::to_string(width));
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("head", head, heads, "heads"));
    const int w = width / heads;
    Matrix m = Matrix::Zero(width, w);
    m.middleRows(head * w, w).setIdentity();
    return m;
}

Expected<HeadContributions> headContributions(const AttentionInput& in, const AttentionResult& result)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    const Layout L = result.layout;
    const int H = int(result.heads.size());
    const Matrix concat = tokenRows(result.concat, L), output = tokenRows(result.output, L);
    const int T = int(concat.rows()), HV = int(concat.cols());
    if (HV % H != 0)
        return invalidArgument("result: concat width " + std::to_string(HV) + " is not divisible by H = " + std::to_string(H));
    const int dv = HV / H;

    HeadContributions c;
    std::vector<Matrix> perRows;
    Eigen::MatrixXd sum;
    if (in.Wo.size() > 0) {
        const Matrix Wo = tokenRows(in.Wo, L);  // (H·d_v) × O
        if (Wo.rows() != HV || Wo.cols() != output.cols()) {
            const long er = L == Layout::Row ? HV : output.cols(), ec = L == Layout::Row ? output.cols() : HV;
            return invalidArgument("Wo: expected " + shapeStr(er, ec) + " (H·d_v × O in the result's layout), got " +
                                   shapeStr(in.Wo.rows(), in.Wo.cols()));
        }
        sum = Eigen::MatrixXd::Zero(T, Wo.cols());
        for (int h = 0; h < H; ++h) {
            Eigen::MatrixXd p = concat.middleCols(h * dv, dv).cast<double>() * Wo.middleRows(h * dv, dv).cast<double>();
            sum += p;
            perRows.push_back(p.cast<float>());
        }
        if (in.bo.size() > 0) {
            if (in.bo.size() != Wo.cols())
                return invalidArgument("bo: expected " + std::to_string(Wo.cols()) + " values (O), got " +
                                       std::to_string(in.bo.size()));
            c.bias = in.bo;
        }
    } else {
        sum = Eigen::MatrixXd::Zero(T, HV);
        for (int h = 0; h < H; ++h) {
            Matrix p = Matrix::Zero(T, HV);
            p.middleCols(h * dv, dv) = concat.middleCols(h * dv, dv);
            sum += p.cast<double>();
            perRows.push_back(std::move(p));
        }
    }
    Eigen::MatrixXd withBias = sum;
    if (c.bias.size() > 0) withBias.rowwise() += c.bias.cast<double>().transpose();
    c.maxAbsDiff = maxAbsDiff(Matrix(withBias.cast<float>()), output);
    for (auto& p : perRows) {
        c.norms.push_back(p.norm());
        c.perHead.push_back(inLayout(p, L));
    }
    c.sum = inLayout(Matrix(sum.cast<float>()), L);
    return c;
}

Expected<HeadsComparison> compareHeadCounts(const AttentionInput& in, const AttentionConfig& cfg, int heads)
{
    if (heads < 1) return invalidArgument("heads: expected at least 1, got " + std::to_string(heads));
    if (cfg.score == Score::Additive)
        return invalidArgument("score: the one-vs-h-heads decomposition QKᵀ = Σ_h Q_h·K_hᵀ needs a dot-product "
                               "score, got additive");
    AttentionConfig one = cfg, many = cfg;
    one.heads = 1;
    many.heads = heads;
    auto a = compute(in, one);
    if (!a) return a.status();
    auto b = compute(in, many);
    if (!b) return b.status();

    HeadsComparison c;
    c.heads = heads;
    const Layout L = cfg.layout;
    const Matrix Q = tokenRows(a->Q, L), K = tokenRows(a->K, L);
    c.oneHeadRawScores = productDouble(Q, Matrix(K.transpose()));
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(Q.rows(), K.rows());
    for (const HeadResult& hr : b->heads) {
        const Matrix Qh = tokenRows(hr.Q, L), Kh = tokenRows(hr.K, L);
        Eigen::MatrixXd p = Qh.cast<double>() * Kh.cast<double>().transpose();
        sum += p;
        c.perHeadRawScores.push_back(p.cast<float>());
    }
    c.maxAbsDecompositionDiff = maxAbsDiff(c.oneHeadRawScores, Matrix(sum.cast<float>()));
    c.maxAbsOutputDiff = maxAbsDiff(a->output, b->output);
    c.oneHead = std::move(*a);
    c.multiHead = std::move(*b);
    return c;
}

} // namespace attn
