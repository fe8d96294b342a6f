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
    for (int h = 0; h < d.H; ++h) {
        const int g = d.kvHead(h);
        blocks.push_back({h, g, h * d.dq, (h + 1) * d.dq, g * d.dk, (g + 1) * d.dk, g * d.dv, (g + 1) * d.dv, h * d.dv,
                          (h + 1) * d.dv});
    }
    return blocks;
}

std::string groupedQueryText(const Dims& d)
{
    const int H = d.H, Hkv = d.kvHeads(), group = d.group();
    const std::string kvK = std::to_string(Hkv * d.dk), kvV = std::to_string(Hkv * d.dv);
    const std::string mhaK = std::to_string(H * d.dk), mhaV = std::to_string(H * d.dv);
    if (Hkv == H)
        return "Multi-head attention: each of the " + std::to_string(H) +
               " query heads has its own key and value head (H_kv = H = " + std::to_string(H) +
               "), so K and V are " + mhaK + " and " + mhaV +
               " wide. Grouped-query attention (GQA) lets groups of query heads share one key/value head: with "
               "H_kv dividing H, query head h reads KV head ⌊h / (H / H_kv)⌋ (from 0), and K and V shrink to H_kv·d_k and "
               "H_kv·d_v. H_kv = 1 is multi-query attention (MQA): one K and one V for every head. Set \"KV heads\" "
               "beside the heads to try it.";
    std::string s = std::string(Hkv == 1 ? "Multi-query attention (MQA)" : "Grouped-query attention (GQA)") + ": the " +
                    std::to_string(H) + " query heads share H_kv = " + std::to_string(Hkv) + " key/value head" +
                    (Hkv == 1 ? "" : "s") + ", " + std::to_string(group) + " query heads per KV head (heads 1–" +
                    std::to_string(group) + " read KV head 1";
    if (Hkv > 1) s += ", heads " + std::to_string(group + 1) + "–" + std::to_string(2 * group) + " KV head 2";
    if (Hkv > 2) s += ", …";
    s += "). W^K and W^V (or K and V) are " + kvK + " and " + kvV + " wide instead of " + mhaK + " and " + mhaV +
         ": the keys and values a decoder caches per token shrink " + std::to_string(group) +
         "×, while every query head keeps its own W^Q block and its own attention weights. Heads of one group "
         "score the same keys with different queries. H_kv = H would be multi-head attention; H_kv = 1 "
         "multi-query attention.";
    return s;
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
    if (cfg.kvHeads > 0 && cfg.kvHeads != cfg.heads)
        return invalidArgument("kv_heads: the one-vs-h-heads decomposition splits Q and K into the same heads; it needs "
                               "multi-head attention (kv_heads = heads = " + std::to_string(cfg.heads) + "), got kv_heads = " +
                               std::to_string(cfg.kvHeads));
    AttentionConfig one = cfg, many = cfg;
    one.heads = 1;
    many.heads = heads;
    one.kvHeads = many.kvHeads = 0;
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
