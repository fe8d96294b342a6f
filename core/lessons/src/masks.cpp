// Masks lesson (attnscope/lessons/masks.h).
#include "attnscope/lessons/masks.h"

#include "lesson_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace attn {

using namespace lessons_detail;

Expected<MaskedSoftmax> maskedSoftmax(const Matrix& scores, const MaskSpec& mask)
{
    if (scores.size() == 0)
        return invalidArgument("scores: expected a non-empty T×S matrix, got " + shapeStr(scores.rows(), scores.cols()));
    ATTNSCOPE_RETURN_IF_ERROR(checkFiniteMatrix("scores", scores));
    const int T = int(scores.rows()), S = int(scores.cols());
    if (!mask.keyPadding.empty() && int(mask.keyPadding.size()) != S)
        return invalidArgument("mask.key_padding: expected " + std::to_string(S) + " flags (S), got " +
                               std::to_string(mask.keyPadding.size()));
    if (!mask.validLens.empty()) {
        if (mask.validLens.size() != 1 && int(mask.validLens.size()) != T)
            return invalidArgument("mask.valid_lens: expected 1 or T = " + std::to_string(T) + " values, got " +
                                   std::to_string(mask.validLens.size()));
        for (std::size_t i = 0; i < mask.validLens.size(); ++i)
            if (mask.validLens[i] < 0)
                return invalidArgument("mask.valid_lens[" + std::to_string(i) + "]: expected ≥ 0, got " +
                                       std::to_string(mask.validLens[i]));
    }
    if (mask.custom.size() > 0 && (mask.custom.rows() != T || mask.custom.cols() != S))
        return invalidArgument("mask.custom: expected " + shapeStr(T, S) + " (T × S), got " +
                               shapeStr(mask.custom.rows(), mask.custom.cols()));
    if (std::isnan(mask.fill) || (std::isinf(mask.fill) && mask.fill > 0))
        return invalidArgument("mask.fill: expected a finite number or -inf, got " + formatValue(mask.fill));

    MaskedSoftmax r;
    buildMaskRowMajor(mask, mask.custom, T, S, r.masked);
    r.weights.resize(T, S);
    r.rowSums.resize(T);
    std::vector<double> line(S), w;
    std::vector<std::uint8_t> m(S);
    for (int i = 0; i < T; ++i) {
        for (int j = 0; j < S; ++j) {
            line[j] = scores(i, j);
            m[j] = r.masked(i, j);
        }
        if (!softmaxInto(line, m, mask.fill, w)) r.fullyMaskedRows.push_back(i);
        double sum = 0;
        for (int j = 0; j < S; ++j) {
            r.weights(i, j) = float(w[j]);
            sum += w[j];
            if (m[j] && r.weights(i, j) != 0.0f) ++r.maskedNonZero;
        }
        r.rowSums[i] = float(sum);
    }
    return r;
}

} // namespace attn
