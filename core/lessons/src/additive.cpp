// Additive lesson (attnscope/lessons/additive.h).
#include "attnscope/lessons/additive.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

Expected<AdditiveBreakdown> additiveBreakdown(const AttentionInput& in, const AttentionResult& result, int head,
                                              int query, int key)
{
    if (result.heads.empty()) return invalidArgument("result: has no heads; compute the session first");
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("head", head, int(result.heads.size()), "H"));
    const Layout L = result.layout;
    const HeadResult& hr = result.heads[head];
    const Matrix Q = tokenRows(hr.Q, L), K = tokenRows(hr.K, L), scores = tokenRows(hr.scores, L);
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("query", query, int(Q.rows()), "T"));
    ATTNSCOPE_RETURN_IF_ERROR(checkIndex("key", key, int(K.rows()), "S"));
    const Matrix Aq = tokenRows(in.additive.Aq, L), Ak = tokenRows(in.additive.Ak, L);  // d_q×A, d_k×A
    const Vector& wv = in.additive.wv;
    const long A = wv.size();
    if (A == 0) return invalidArgument("w_v: required for the additive score, but it is missing or empty");
    auto expect = [&](const char* name, const Matrix& stored, long rows, const char* rowMeaning) -> Status {
        const Matrix view = tokenRows(stored, L);
        if (view.rows() == rows && view.cols() == A) return {};
        const long er = L == Layout::Row ? rows : A, ec = L == Layout::Row ? A : rows;
        const std::string meaning = L == Layout::Row ? std::string(rowMeaning) + " × A" : "A × " + std::string(rowMeaning);
        return invalidArgument(std::string(name) + ": expected " + shapeStr(er, ec) + " (" + meaning + "), got " +
                               shapeStr(stored.rows(), stored.cols()));
    };
    ATTNSCOPE_RETURN_IF_ERROR(expect("Aq", in.additive.Aq, Q.cols(), "d_q"));
    ATTNSCOPE_RETURN_IF_ERROR(expect("Ak", in.additive.Ak, K.cols(), "d_k"));

    AdditiveBreakdown b;
    b.head = head;
    b.query = query;
    b.key = key;
    b.q = Q.row(query).transpose();
    b.k = K.row(key).transpose();
    const Eigen::VectorXd qp = Aq.cast<double>().transpose() * b.q.cast<double>();
    const Eigen::VectorXd kp = Ak.cast<double>().transpose() * b.k.cast<double>();
    const Eigen::VectorXd hid = qp + kp;
    const Eigen::VectorXd act = hid.array().tanh();
    const Eigen::VectorXd prod = act.cwiseProduct(wv.cast<double>());
    b.qProjected = qp.cast<float>();
    b.kProjected = kp.cast<float>();
    b.hidden = hid.cast<float>();
    b.activated = act.cast<float>();
    b.products = prod.cast<float>();
    b.score = float(prod.sum());
    b.resultScore = scores(query, key);
    return b;
}

} // namespace attn
