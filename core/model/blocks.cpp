// The parts of a decoder block that several families share (STYLE.md §8), written once: norms, QK-norm, RoPE
// (partial rotary, per-layer base and linear scaling), the feed-forward kinds, post-norms, the parallel residual.
// attentionInputs and afterAttention compose them in the order the configuration says (DecoderConfig: preNorms,
// qkNorm, rotaryDims, postNorms, parallelResidual, ffn); every family's forward is these two functions over its
// own data. See docs/model.md ("Families").
//
//   pre-norm block (llama, qwen, phi3, gpt2, gemma):   h = x + post₁(attn(norm₁ x));  out = h + post₂(ffn(norm₂ h))
//   post-norm only (OLMo 2):                            h = x + post₁(attn(x));        out = h + post₂(ffn(h))
//   parallel (GPT-NeoX):                                out = x + attn(norm₁ x) + ffn(norm₂ x)
// (post₁, post₂ are the identity without post-norms.)
#include "decoder_family.h"

#include <unsupported/Eigen/SpecialFunctions>  // Eigen's vectorised erf (GELU by erf)

#include <cassert>
#include <cmath>

namespace attn {

const char* toString(FfnKind f)
{
    switch (f) {
    case FfnKind::SwiGlu: return "SwiGLU";
    case FfnKind::GeGluTanh: return "GeGLU (tanh)";
    case FfnKind::GeluTanh: return "GELU (tanh)";
    case FfnKind::GeluErf: return "GELU (erf)";
    }
    return "?";
}

bool DecoderConfig::anyWindow() const
{
    if (layerSpecs.empty()) return slidingWindow > 0;
    for (const DecoderLayerSpec& s : layerSpecs)
        if (s.window > 0) return true;
    return false;
}

namespace detail {

void normRows(const DecoderConfig& c, const Matrix& x, const Vector& gamma, const Vector& beta, Matrix& out)
{
    if (c.norm == NormKind::Layer) {
        if (beta.size() == 0) layerNormRows(x, gamma, Vector::Zero(gamma.size()), c.normEps, out);
        else layerNormRows(x, gamma, beta, c.normEps, out);
    } else {
        rmsNormRows(x, gamma, c.normEps, out);
    }
}

void qkNormRows(const DecoderConfig& c, const Vector& gamma, int heads, Matrix& x)
{
    if (c.qkNorm == QkNorm::None || gamma.size() == 0) return;
    if (c.qkNorm == QkNorm::Whole) {
        Matrix tmp;
        rmsNormRows(x, gamma, c.normEps, tmp);
        x.swap(tmp);
        return;
    }
    // Per head: each head's D values normed on their own, the same γ (D) for every head.
    const int D = c.headDim;
    const float invD = 1.0f / static_cast<float>(D);
    for (Eigen::Index r = 0; r < x.rows(); ++r)
        for (int h = 0; h < heads; ++h) {
            auto seg = x.row(r).segment(Eigen::Index(h) * D, D);
            const float inv = 1.0f / std::sqrt(seg.squaredNorm() * invD + c.normEps);
            seg = seg.cwiseProduct(gamma.transpose()) * inv;
        }
}

void ropeRows(const DecoderConfig& c, int layer, Matrix& x, int heads, int pos0, int period)
{
    const int R = c.rotaryDims();
    if (R <= 0) return;
    const int D = c.headDim, half = R / 2;
    const double theta = c.ropeThetaOf(layer);
    const float scale = c.ropeScaleOf(layer);
    const Eigen::Index n = x.rows();
    // As transformers computes it, in float32: inv_freq[i] = θ^(−2i/R) (÷ the Llama 3 or LongRoPE factor, ÷ the
    // linear scaling factor), angle = position · inv_freq[i]. Hugging Face's pairing: dimension i with i + R/2 of
    // each head; dimensions R… of a head (partial rotary) pass through. LongRoPE picks its set by this call's largest
    // position + 1 (Hugging Face's longrope_frequency_update), and multiplies cos and sin by its attention factor.
    const std::vector<float>& factors = c.ropeFactorsFor(long(pos0) + (period > 0 ? period : long(n)));
    const float mscale = c.longRope() ? c.ropeAttnFactor : 1.0f;
    std::vector<float> invFreq(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
        float f = static_cast<float>(1.0 / std::pow(theta, double(2 * i) / R));
        if (i < static_cast<int>(factors.size())) f /= factors[static_cast<std::size_t>(i)];
        if (scale != 1.0f) f /= scale;
        invFreq[static_cast<std::size_t>(i)] = f;
    }
#pragma omp parallel for schedule(static) if (n * heads * R >= (1 << 16))
    for (Eigen::Index r = 0; r < n; ++r) {
        const float pos = static_cast<float>(pos0 + (period > 0 ? r % period : r));
        float* row = x.row(r).data();
        for (int i = 0; i < half; ++i) {
            const float angle = pos * invFreq[static_cast<std::size_t>(i)];
            float cs = static_cast<float>(std::cos(double(angle))), sn = static_cast<float>(std::sin(double(angle)));
            if (mscale != 1.0f) {
                cs *= mscale;
                sn *= mscale;
            }
            for (int h = 0; h < heads; ++h) {
                float* v = row + h * D;
                const float a = v[i], b = v[i + half];
                v[i] = a * cs - b * sn;
                v[i + half] = b * cs + a * sn;
            }
        }
    }
}

// The feed-forward of `in` into s.ffnB (s.ffnA holds the hidden activations).
void feedForward(const DecoderConfig& c, const DecoderLayer& L, const Matrix& in, BlockScratch& s)
{
    auto geluTanh = [](auto a) {
        constexpr float k = 0.7978845608028654f;  // √(2/π)
        return (0.5f * a * (1.0f + (k * (a + 0.044715f * a.cube())).tanh())).eval();
    };
    switch (c.ffn) {
    case FfnKind::SwiGlu:
    case FfnKind::GeGluTanh:
        product(in, L.Wgate, s.ffnA);
        product(in, L.Wup, s.ffnB);
        if (c.ffn == FfnKind::SwiGlu) s.ffnA.array() = s.ffnA.array() / (1.0f + (-s.ffnA.array()).exp()) * s.ffnB.array();
        else s.ffnA.array() = geluTanh(s.ffnA.array()) * s.ffnB.array();
        product(s.ffnA, L.Wdown, s.ffnB);
        return;
    case FfnKind::GeluTanh:
    case FfnKind::GeluErf:
        product(in, L.Wfc, s.ffnA);
        if (L.bfc.size() > 0) s.ffnA.rowwise() += L.bfc.transpose();
        if (c.ffn == FfnKind::GeluTanh) s.ffnA.array() = geluTanh(s.ffnA.array());
        else s.ffnA.array() = 0.5f * s.ffnA.array() * (1.0f + (s.ffnA.array() * 0.7071067811865476f).erf());
        product(s.ffnA, L.Wproj, s.ffnB);
        if (L.bproj.size() > 0) s.ffnB.rowwise() += L.bproj.transpose();
        return;
    }
}

void attentionInputs(const DecoderModel& m, int layer, const Matrix& x, int pos0, Matrix& h, Matrix& Q, Matrix& K,
                     Matrix& V, int period)
{
    const DecoderConfig& c = m.config;
    const DecoderLayer& L = m.layers[static_cast<std::size_t>(layer)];
    const Matrix* in = &x;
    if (c.preNorms) {
        normRows(c, x, L.attnNormGamma, L.attnNormBeta, h);
        in = &h;
    }
    product(*in, L.Wq, Q);
    product(*in, L.Wk, K);
    product(*in, L.Wv, V);
    if (L.bq.size() > 0) Q.rowwise() += L.bq.transpose();
    if (L.bk.size() > 0) K.rowwise() += L.bk.transpose();
    if (L.bv.size() > 0) V.rowwise() += L.bv.transpose();
    qkNormRows(c, L.qNormGamma, c.heads, Q);
    qkNormRows(c, L.kNormGamma, c.kvHeads, K);
    ropeRows(c, layer, Q, c.heads, pos0, period);
    ropeRows(c, layer, K, c.kvHeads, pos0, period);
}

void afterAttention(const DecoderModel& m, int layer, const Matrix& attnOut, const Matrix& x, BlockScratch& s, Matrix& out)
{
    const DecoderConfig& c = m.config;
    const DecoderLayer& L = m.layers[static_cast<std::size_t>(layer)];
    // out = x + post₁(attention output)
    if (L.postAttnNormGamma.size() > 0) {
        rmsNormRows(attnOut, L.postAttnNormGamma, c.normEps, out);
        out += x;
    } else {
        out = x + attnOut;
    }
    // The feed-forward reads x (parallel residual) or the stream after the attention, normed or not.
    const Matrix& ffnIn = c.parallelResidual ? x : out;
    if (c.preNorms) {
        normRows(c, ffnIn, L.ffnNormGamma, L.ffnNormBeta, s.normed);
        feedForward(c, L, s.normed, s);
    } else {
        feedForward(c, L, ffnIn, s);
    }
    if (L.postFfnNormGamma.size() > 0) {
        rmsNormRows(s.ffnB, L.postFfnNormGamma, c.normEps, s.normed);
        out += s.normed;
    } else {
        out += s.ffnB;
    }
}

void finalNorm(const DecoderModel& m, const Matrix& x, Matrix& out)
{
    normRows(m.config, x, m.finalNormGamma, m.finalNormBeta, out);
}

void finalSoftcap(const DecoderConfig& c, Matrix& logits)
{
    if (c.finalSoftcap <= 0) return;
    const float cap = c.finalSoftcap, inv = 1.0f / c.finalSoftcap;
    logits.array() = (logits.array() * inv).tanh() * cap;
}

} // namespace detail
} // namespace attn
