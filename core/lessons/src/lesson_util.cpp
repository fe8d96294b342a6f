// Helpers of the core lessons (lesson_util.h).
#include "lesson_util.h"

#include <cassert>

namespace attn::lessons_detail {

std::string shapeStr(long r, long c) { return std::to_string(r) + "×" + std::to_string(c); }
// Built by appending: GCC 12 warns falsely (-Wrestrict, GCC bug 105651) on "[" + std::to_string(...) chains.
std::string bracketShape(long r, long c)
{
    std::string s = "[";
    s.append(std::to_string(r)).append(", ").append(std::to_string(c)).append("]");
    return s;
}

// max |a − b|; +inf when the shapes differ (a caller bug this makes visible rather than hiding).
float maxAbsDiff(const Matrix& a, const Matrix& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols()) return std::numeric_limits<float>::infinity();
    if (a.size() == 0) return 0.0f;
    return (a - b).cwiseAbs().maxCoeff();
}
float maxAbsDiff(const Vector& a, const Vector& b)
{
    if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
    if (a.size() == 0) return 0.0f;
    return (a - b).cwiseAbs().maxCoeff();
}

// A·B accumulated in double, rounded to float once (the reference path's convention).
Matrix productDouble(const Matrix& A, const Matrix& B)
{
    assert(A.cols() == B.rows());
    Eigen::MatrixXd r = A.cast<double>() * B.cast<double>();
    return r.cast<float>();
}


Status checkIndex(const char* name, int v, int n, const char* what)
{
    if (v >= 0 && v < n) return {};
    return invalidArgument(std::string(name) + ": expected 0 ≤ " + name + " < " + what + " = " + std::to_string(n) +
                           ", got " + std::to_string(v));
}

Status checkFiniteVector(const char* name, const Vector& v)
{
    for (Eigen::Index i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
            return invalidArgument(std::string(name) + "[" + std::to_string(i) + "]: value is not finite");
    return {};
}
Status checkFiniteMatrix(const char* name, const Matrix& m)
{
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c)
            if (!std::isfinite(m(r, c)))
                return invalidArgument(std::string(name) + "[" + std::to_string(r) + "][" + std::to_string(c) +
                                       "]: value is not finite");
    return {};
}

ProductShape makeProduct(std::string label, std::string lhs, long lr, long lc, std::string rhs, long rr, long rc,
                         std::string out, long orows, long ocols)
{
    ProductShape p;
    p.label = std::move(label);
    p.lhsName = std::move(lhs);
    p.rhsName = std::move(rhs);
    p.outName = std::move(out);
    p.lhsRows = int(lr);
    p.lhsCols = int(lc);
    p.rhsRows = int(rr);
    p.rhsCols = int(rc);
    p.outRows = int(orows);
    p.outCols = int(ocols);
    if (p.rhsName.empty())
        p.text = p.label + ": " + bracketShape(lr, lc) + " → " + bracketShape(orows, ocols);
    else
        p.text = p.label + ": " + bracketShape(lr, lc) + "·" + bracketShape(rr, rc) + " → " + bracketShape(orows, ocols);
    return p;
}

} // namespace attn::lessons_detail
