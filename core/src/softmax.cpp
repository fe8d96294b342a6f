// softmaxLine (attention.h): the one softmax of the reference path and the lessons.
#include "attnscope/attention.h"

#include <cassert>
#include <cmath>
#include <limits>

namespace attn {

bool softmaxLine(std::span<const double> scores, std::span<const std::uint8_t> masked, float fill,
                 std::span<double> weights)
{
    const std::size_t n = scores.size();
    assert(weights.size() == n && (masked.empty() || masked.size() == n));
    const bool infFill = std::isinf(fill);
    auto value = [&](std::size_t j) { return !masked.empty() && masked[j] ? double(fill) : scores[j]; };
    double mx = -std::numeric_limits<double>::infinity();
    std::size_t live = 0;
    for (std::size_t j = 0; j < n; ++j) {
        if (!(infFill && !masked.empty() && masked[j])) ++live;
        const double v = value(j);
        if (v > mx) mx = v;
    }
    if (live == 0) {
        for (double& w : weights) w = 0.0;
        return false;
    }
    double sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += std::exp(value(j) - mx);  // exp(-inf) = 0 for masked entries
    for (std::size_t j = 0; j < n; ++j) weights[j] = std::exp(value(j) - mx) / sum;
    return true;
}

} // namespace attn
