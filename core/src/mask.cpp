// Definitions every compute path shares, so that they agree exactly on masking and scaling.
#include "attnscope/attention.h"

#include <algorithm>
#include <cmath>

namespace attn {

float effectiveScale(const AttentionConfig& cfg, const Dims& d)
{
    if (cfg.score == Score::Additive) return 1.0f;
    if (cfg.scale) return *cfg.scale;
    if (cfg.score == Score::Dot) return 1.0f;
    // Computed in double then rounded, as PyTorch's scaled_dot_product_attention does with 1/sqrt(E).
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
}

void buildMaskRowMajor(const MaskSpec& m, const MaskMatrix& custom, int T, int S, MaskMatrix& masked)
{
    masked.resize(T, S);
    masked.setZero();
    for (int i = 0; i < T; ++i) {
        int validLen = S;
        if (!m.validLens.empty()) validLen = m.validLens.size() == 1 ? m.validLens[0] : m.validLens[i];
        for (int j = 0; j < S; ++j) {
            bool off = false;
            if (m.causal && j > i) off = true;
            if (!m.keyPadding.empty() && m.keyPadding[j]) off = true;
            if (j >= validLen) off = true;
            if (custom.size() > 0 && custom(i, j)) off = true;
            masked(i, j) = off ? 1 : 0;
        }
    }
}

} // namespace attn
