// Helpers shared by the core lessons (private to core/lessons/src): shapes as text for messages, max-abs
// differences, products in double, index and finiteness checks, a portable normal sampler, and the compute
// paths' softmax (attn::softmaxLine) on a vector.
#pragma once

#include "attnscope/attention.h"
#include "attnscope/colormap.h"
#include "attnscope/layout.h"
#include "attnscope/lessons/vector_view.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace attn::lessons_detail {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string shapeStr(long r, long c);     // "3×4"
std::string bracketShape(long r, long c); // "[3, 4]"
float maxAbsDiff(const Matrix& a, const Matrix& b);
float maxAbsDiff(const Vector& a, const Vector& b);
// A·B accumulated in double, rounded to float once (the reference path's convention).
Matrix productDouble(const Matrix& A, const Matrix& B);

// attn::softmaxLine of `line` (masked entries taking `fill`) into `out`, resized to the line's length.
inline bool softmaxInto(const std::vector<double>& line, const std::vector<std::uint8_t>& masked, float fill,
                        std::vector<double>& out)
{
    out.assign(line.size(), 0.0);
    return softmaxLine(line, masked, fill, out);
}

// InvalidArgument "name: expected 0 ≤ name < what = n, got v" unless 0 ≤ v < n.
Status checkIndex(const char* name, int v, int n, const char* what);
Status checkFiniteVector(const char* name, const Vector& v);
Status checkFiniteMatrix(const char* name, const Matrix& m);

// One ProductShape with its text line.
ProductShape makeProduct(std::string label, std::string lhs, long lr, long lc, std::string rhs, long rr, long rc,
                         std::string out, long orows, long ocols);

// Normal deviates from mt19937_64 through Box–Muller. std::normal_distribution is implementation-defined
// (libstdc++ and libc++ give different numbers for one seed); this gives the same samples everywhere.
class NormalSampler {
public:
    explicit NormalSampler(std::uint64_t seed) : m_rng(seed) {}

    double next()
    {
        if (m_hasSpare) {
            m_hasSpare = false;
            return m_spare;
        }
        // u1 in (0, 1] so that log(u1) is finite; 53 random bits give every double in the grid 2⁻⁵³.
        const double u1 = 1.0 - double(m_rng() >> 11) * 0x1.0p-53;
        const double u2 = double(m_rng() >> 11) * 0x1.0p-53;
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double t = 2.0 * std::numbers::pi * u2;
        m_spare = r * std::sin(t);
        m_hasSpare = true;
        return r * std::cos(t);
    }

private:
    std::mt19937_64 m_rng;
    double m_spare = 0;
    bool m_hasSpare = false;
};

} // namespace attn::lessons_detail
