// Vector view lesson (attnscope/lessons/vector_view.h).
#include "attnscope/lessons/vector_view.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

Expected<VectorView> vectorView(const AttentionResult& result, Score score, int head, int query)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    const int H = int(result.heads.size());
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("head", head, H, "H"));
    const HeadResult& hr = result.heads[head];
    const Layout L = result.layout;

    VectorView v;
    v.head = head;
    v.query = query;
    v.scale = result.scale;
    const Matrix Q = tokenRows(hr.Q, L), K = tokenRows(hr.K, L), V = tokenRows(hr.V, L);
    const Matrix scores = tokenRows(hr.scores, L), weights = tokenRows(hr.weights, L), out = tokenRows(hr.output, L);
    const MaskMatrix masked = tokenRows(hr.masked, L);
    const int T = int(Q.rows()), S = int(K.rows());
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("query", query, T, "T"));
    if (scores.rows() != T || scores.cols() != S || weights.rows() != T || weights.cols() != S ||
        V.rows() != S || out.rows() != T || out.cols() != V.cols())
        return invalidArgument("result: head " + std::to_string(head) + " is inconsistent (scores " +
                               shapeStr(scores.rows(), scores.cols()) + ", expected T×S = " + shapeStr(T, S) + ")");

    v.q = Q.row(query).transpose();
    v.keys = K;
    v.values = V;
    v.rawScores.resize(S);
    v.scaledScores = scores.row(query).transpose();
    v.weights = weights.row(query).transpose();
    v.masked.assign(S, 0);
    for (int j = 0; j < S; ++j) {
        if (masked.size() > 0) v.masked[j] = masked(query, j);
        if (score == Score::Additive || Q.cols() != K.cols()) {
            v.rawScores[j] = v.scaledScores[j];
        } else {
            double dot = 0;
            for (Eigen::Index c = 0; c < Q.cols(); ++c) dot += double(Q(query, c)) * K(j, c);
            v.rawScores[j] = float(dot);
        }
    }
    const int dv = int(V.cols());
    v.weightedValues.resize(S, dv);
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(dv);
    double wsum = 0;
    for (int j = 0; j < S; ++j) {
        const double w = v.weights[j];
        wsum += w;
        for (int c = 0; c < dv; ++c) {
            v.weightedValues(j, c) = float(w * V(j, c));
            sum[c] += w * V(j, c);
        }
    }
    v.vectorSum = sum.cast<float>();
    v.matrixRow = out.row(query).transpose();
    v.maxAbsDiff = maxAbsDiff(v.vectorSum, v.matrixRow);
    v.weightSum = float(wsum);
    return v;
}

std::vector<ProductShape> productShapes(const Dims& d, Layout layout, Mode mode, bool hasWo, Score score)
{
    const bool additive = score == Score::Additive;
    std::vector<ProductShape> steps;
    const bool multi = d.H > 1;
    const std::string q = multi ? "Q_h" : "Q", k = multi ? "K_h" : "K", vv = multi ? "V_h" : "V";
    // K and V have H_kv heads (grouped-query attention); Q and the concatenation H.
    const long hq = long(d.H) * d.dq, hk = long(d.kvHeads()) * d.dk, kvv = long(d.kvHeads()) * d.dv;
    const long hv = long(d.H) * d.dv;
    const std::string kvIn = mode == Mode::Cross ? "X_kv" : "X";
    if (layout == Layout::Row) {
        if (mode != Mode::Direct) {
            steps.push_back(makeProduct("X·W^Q", "X", d.T, d.M, "W^Q", d.M, hq, "Q", d.T, hq));
            steps.push_back(makeProduct(kvIn + "·W^K", kvIn, d.S, d.M, "W^K", d.M, hk, "K", d.S, hk));
            steps.push_back(makeProduct(kvIn + "·W^V", kvIn, d.S, d.M, "W^V", d.M, kvv, "V", d.S, kvv));
        }
        if (additive) {
            steps.push_back(makeProduct(q + "·A_q", q, d.T, d.dq, "A_q", d.dq, d.A, q + "A_q", d.T, d.A));
            steps.push_back(makeProduct(k + "·A_k", k, d.S, d.dk, "A_k", d.dk, d.A, k + "A_k", d.S, d.A));
            steps.push_back(makeProduct("w_vᵀ·tanh(q_i·A_q + k_j·A_k) for every pair", q + "A_q", d.T, d.A, "", 0, 0,
                                        "scores", d.T, d.S));
        } else {
            steps.push_back(makeProduct(q + "·" + k + "ᵀ", q, d.T, d.dq, k + "ᵀ", d.dk, d.S, q + k + "ᵀ", d.T, d.S));
        }
        steps.push_back(makeProduct(additive ? "softmax(scores) along each row (over keys)"
                                             : "softmax(" + q + k + "ᵀ/√d_k) along each row (over keys)",
                                    additive ? "scores" : q + k + "ᵀ", d.T, d.S, "", 0, 0, "A", d.T, d.S));
        steps.push_back(makeProduct("A·" + vv, "A", d.T, d.S, vv, d.S, d.dv, "O_h", d.T, d.dv));
        if (multi) steps.push_back(makeProduct("concat(O_1 … O_H)", "O_h", d.T, d.dv, "", 0, 0, "concat", d.T, hv));
        if (hasWo) steps.push_back(makeProduct("concat·W^O", "concat", d.T, hv, "W^O", hv, d.O, "output", d.T, d.O));
    } else {
        if (mode != Mode::Direct) {
            steps.push_back(makeProduct("W^Q·X", "W^Q", hq, d.M, "X", d.M, d.T, "Q", hq, d.T));
            steps.push_back(makeProduct("W^K·" + kvIn, "W^K", hk, d.M, kvIn, d.M, d.S, "K", hk, d.S));
            steps.push_back(makeProduct("W^V·" + kvIn, "W^V", kvv, d.M, kvIn, d.M, d.S, "V", kvv, d.S));
        }
        if (additive) {
            steps.push_back(makeProduct("A_q·" + q, "A_q", d.A, d.dq, q, d.dq, d.T, "A_q" + q, d.A, d.T));
            steps.push_back(makeProduct("A_k·" + k, "A_k", d.A, d.dk, k, d.dk, d.S, "A_k" + k, d.A, d.S));
            steps.push_back(makeProduct("w_vᵀ·tanh(A_q·q_i + A_k·k_j) for every pair", "A_k" + k, d.A, d.S, "", 0, 0,
                                        "scores", d.S, d.T));
        } else {
            steps.push_back(makeProduct(k + "ᵀ·" + q, k + "ᵀ", d.S, d.dk, q, d.dq, d.T, k + "ᵀ" + q, d.S, d.T));
        }
        steps.push_back(makeProduct(additive ? "softmax(scores) down each column (over keys)"
                                             : "softmax(" + k + "ᵀ" + q + "/√d_k) down each column (over keys)",
                                    additive ? "scores" : k + "ᵀ" + q, d.S, d.T, "", 0, 0, "A", d.S, d.T));
        steps.push_back(makeProduct(vv + "·A", vv, d.dv, d.S, "A", d.S, d.T, "O_h", d.dv, d.T));
        if (multi) steps.push_back(makeProduct("concat(O_1 … O_H)", "O_h", d.dv, d.T, "", 0, 0, "concat", hv, d.T));
        if (hasWo) steps.push_back(makeProduct("W^O·concat", "W^O", d.O, hv, "concat", hv, d.T, "output", d.O, d.T));
    }
    return steps;
}

} // namespace attn
