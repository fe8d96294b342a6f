// Why does this head attend here? (issue 35). See attnscope/qk_attribution.h for the contract and docs/interp.md.
//
// [SECTION] The frozen pre-attention map (the one place a new family's attention input is described)
// [SECTION] Components of the residual stream
// [SECTION] One cell, one row
// [SECTION] Path patching of a pattern
// [SECTION] Composition scores
// [SECTION] Work (for the bench's bounds)
//
// The products with the weights run in float, as the run's own (the components are float32 numbers of the run); the
// per-position scale, RoPE and the C×C products in double: a score is a sum of C² terms of either sign (C = 291 at
// SmolLM2's last layer), some much larger than their sum, and the sum rule is checked to 1e-4 of the score.
#include "attnscope/qk_attribution.h"

#include "decoder_family.h"
#include "teams.h"  // teamThreads

#include <Eigen/Cholesky>
#include <Eigen/QR>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace attn {

namespace detail {

using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using VecD = Eigen::VectorXd;

// -----------------------------------------------------------------------------------------------------
// [SECTION] The frozen pre-attention map
// -----------------------------------------------------------------------------------------------------

// One side (query or key) of one head of layer l as a linear map of the residual stream, the norm frozen at its
// scale in this run. A component c of the stream at position p becomes
//     v_p^(c) = Rot_p( s_p · c · W )        and the layer's constant term    v_p^(bias) = Rot_p( bias )
// so that Σ_c v_p^(c) + v_p^(bias) is the head's q_p (or k_p) as the forward computed it. Everything a family does
// between the residual stream and the scores must be expressed here.
struct FrozenQkMap {
    MatD W;               // M×D: the pre-norm's γ (LayerNorm: and its centring) and the QK-norm's γ folded into the
                          // head's columns of W^Q/W^K
    VecD bias;            // D: (β·W + b)·diag(γ') (LayerNorm's β, the projection's bias, the QK-norm's γ'); zero when
                          // the layer has neither
    bool hasBias = false;
    VecD scale;           // n: s_p·s'_p: the pre-norm's 1/rms(x_p) (RMSNorm) or 1/σ(x_p) (LayerNorm) of this run's
                          // hidden[l] (1 without pre-norms), times the QK-norm's s'_p (1 without QK-norm)
    VecD biasScale;       // n: s'_p alone (the constant term is not normed by the pre-norm, but is by the QK-norm)
    std::vector<float> invFreq;  // D/2 RoPE inverse frequencies (empty: no rotation, GPT-2)
    float ropeScale = 1;         // cos and sin times this (LongRoPE's attention factor; 1 otherwise)
};

// The map of `side` of query head `head` of layer `layer` (its KV head's K for the key side). This is the function
// a new family extends, reading the layer's configuration rather than the family's name:
//   pre-norm (RMSNorm, LayerNorm; none in OLMo 2): its γ in W, its centring as W less its column means, its
//     per-position scale s_p frozen from hidden[l];
//   QK-norm (Qwen3, Gemma 3: over each head's D values; OLMo 2: over the whole H·D row), an RMSNorm after the
//     projection: its γ' in W's columns and the bias, its per-position scale s'_p frozen from the run's own q/k
//     before that norm (one scalar per row of what it norms, so q = Σ_c q^(c) stays exact);
//   partial rotary (GPT-NeoX, Phi-3): invFreq for the rotated dimensions only (rotate() leaves the rest);
//   a post-norm after the block (Gemma, OLMo 2) changes the components (their share of what the block wrote,
//     frozen at the post-norm's scale: componentsAt, ComponentProjector), not this map;
//   a score soft-cap (Gemma 2) is not linear: the decomposition is of the pre-cap score (QkCell::softcap).
FrozenQkMap frozenQkMap(const DecoderModel& model, const DecoderRun& run, int layer, int head, QkSide side)
{
    const DecoderConfig& c = model.config;
    const DecoderLayer& L = model.layers[static_cast<std::size_t>(layer)];
    const int D = c.headDim, M = c.hidden;
    const bool query = side == QkSide::Query;
    const WeightMatrix& w = query ? L.Wq : L.Wk;
    const Vector& b = query ? L.bq : L.bk;
    const int col0 = (query ? head : head / (c.heads / c.kvHeads)) * D;
    const bool layerNorm = c.norm == NormKind::Layer;
    FrozenQkMap f;
    MatD raw(M, D);
    std::vector<float> column(static_cast<std::size_t>(M));
    for (int d = 0; d < D; ++d) {
        w.column(col0 + d, column.data());
        for (int r = 0; r < M; ++r) raw(r, d) = column[static_cast<std::size_t>(r)];
    }
    f.W = raw;
    if (c.preNorms) {
        for (int r = 0; r < M; ++r) f.W.row(r) *= double(L.attnNormGamma[r]);
        // LayerNorm's centring (c − mean(c)) is linear: folded as W minus its column means.
        if (layerNorm) f.W.rowwise() -= f.W.colwise().mean();
    }
    f.bias = VecD::Zero(D);
    if (L.attnNormBeta.size() == M) {
        f.bias += raw.transpose() * L.attnNormBeta.cast<double>();
        f.hasBias = true;
    }
    if (b.size() > 0) {
        f.bias += b.segment(col0, D).cast<double>();
        f.hasBias = true;
    }
    const Matrix& x = run.hidden[static_cast<std::size_t>(layer)];
    f.scale = VecD::Ones(x.rows());
    f.biasScale = VecD::Ones(x.rows());
    if (c.preNorms)
        for (Eigen::Index p = 0; p < x.rows(); ++p) {
            const Eigen::VectorXd row = x.row(p).transpose().cast<double>();
            const double var = layerNorm ? (row.array() - row.mean()).square().sum() / M : row.squaredNorm() / M;
            f.scale[p] = 1.0 / std::sqrt(var + double(c.normEps));
        }
    const Vector& qkGamma = query ? L.qNormGamma : L.kNormGamma;
    if (c.qkNorm != QkNorm::None && qkGamma.size() > 0) {
        // What the QK-norm read in this run: the projection of the normed stream, plus the bias, as the forward
        // computes it (attentionInputs), over the head's D values or the whole row.
        Matrix normed, proj;
        if (c.preNorms) normRows(c, x, L.attnNormGamma, L.attnNormBeta, normed);
        product(c.preNorms ? normed : x, w, proj);
        if (b.size() > 0) proj.rowwise() += b.transpose();
        const bool whole = c.qkNorm == QkNorm::Whole;
        for (Eigen::Index p = 0; p < x.rows(); ++p) {
            const Eigen::VectorXd v = proj.row(p).segment(whole ? 0 : col0, whole ? proj.cols() : D).transpose().cast<double>();
            const double s = 1.0 / std::sqrt(v.squaredNorm() / double(v.size()) + double(c.normEps));
            f.scale[p] *= s;
            f.biasScale[p] = s;
        }
        const VecD g = (whole ? qkGamma.segment(col0, D) : qkGamma.head(D)).cast<double>();
        f.W = f.W * g.asDiagonal();
        f.bias = f.bias.cwiseProduct(g);
    }
    if (c.rope) {
        // As the forward's RoPE (blocks.cpp, ropeRows): the layer's base, inverse frequencies in float over the
        // rotated dimensions (partial rotary: the first R of D; rotate() pairs i with i + R/2 and leaves the rest),
        // Llama 3's or LongRoPE's factors (LongRoPE's set for this run's length, as the forward picks it, and its
        // attention factor on cos and sin) and the linear scaling divided out.
        const int R = c.rotaryDims();
        const float linear = c.ropeScaleOf(layer);
        const std::vector<float>& factors = c.ropeFactorsFor(long(run.hidden[static_cast<std::size_t>(layer)].rows()));
        f.ropeScale = c.longRope() ? c.ropeAttnFactor : 1.0f;
        f.invFreq.resize(static_cast<std::size_t>(R / 2));
        for (int i = 0; i < R / 2; ++i) {
            float v = static_cast<float>(1.0 / std::pow(double(c.ropeThetaOf(layer)), double(2 * i) / R));
            if (i < static_cast<int>(factors.size())) v /= factors[static_cast<std::size_t>(i)];
            if (linear != 1.0f) v /= linear;
            f.invFreq[static_cast<std::size_t>(i)] = v;
        }
    }
    return f;
}

// Rot_p of every row of `rows` (k×D): Hugging Face's rotate-half pairing (dimension i with i + D/2), the angle
// position · inv_freq[i] in float and its cosine and sine rounded to float, as the forward computes them.
void rotate(const FrozenQkMap& f, int pos, Eigen::Ref<MatD> rows)
{
    const Eigen::Index half = static_cast<Eigen::Index>(f.invFreq.size());
    for (Eigen::Index i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos) * f.invFreq[static_cast<std::size_t>(i)];
        float csf = static_cast<float>(std::cos(double(angle))), snf = static_cast<float>(std::sin(double(angle)));
        if (f.ropeScale != 1.0f) {
            csf *= f.ropeScale;
            snf *= f.ropeScale;
        }
        const double cs = csf, sn = snf;
        for (Eigen::Index r = 0; r < rows.rows(); ++r) {
            const double a = rows(r, i), b = rows(r, i + half);
            rows(r, i) = a * cs - b * sn;
            rows(r, i + half) = b * cs + a * sn;
        }
    }
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Components of the residual stream
// -----------------------------------------------------------------------------------------------------

namespace {

bool hasOutBias(const DecoderLayer& L) { return L.bo.size() > 0; }
bool hasQkBias(const DecoderLayer& L) { return L.attnNormBeta.size() > 0 || L.bq.size() > 0 || L.bk.size() > 0; }

// W^O of a layer as float32 in×out (it is dense in every model this build loads; a view is dequantized).
const Matrix& denseWo(const DecoderLayer& L, Matrix& tmp)
{
    if (!L.Wo.isQuantized()) return L.Wo.dense();
    tmp = L.Wo.toMatrix();
    return tmp;
}

// The layout of layer l's component list: embed, then per earlier layer k its H heads, [bias], mlp; then
// [Ll.qk_bias].
struct ComponentLayout {
    int heads = 0, perLayer = 0, layer = 0;
    bool outBias = false, qkBias = false;
    int count() const { return 1 + layer * perLayer + (qkBias ? 1 : 0); }
    int head(int k, int h) const { return 1 + k * perLayer + h; }
    int bias(int k) const { return 1 + k * perLayer + heads; }
    int mlp(int k) const { return 1 + k * perLayer + perLayer - 1; }
    int qkBiasIndex() const { return count() - 1; }
};

ComponentLayout layoutOf(const DecoderModel& m, int layer)
{
    ComponentLayout lay;
    lay.heads = m.config.heads;
    lay.layer = layer;
    // Every layer of a model has the same structure (b^O in all or none).
    lay.outBias = !m.layers.empty() && hasOutBias(m.layers.front());
    lay.perLayer = lay.heads + (lay.outBias ? 1 : 0) + 1;
    lay.qkBias = hasQkBias(m.layers[static_cast<std::size_t>(layer)]);
    return lay;
}

// A post-norm's frozen scale 1/rms(a) of one attention output row a (1×M), in double (as the pre-norm's).
double postNormScale(const DecoderConfig& c, const Eigen::Ref<const Eigen::RowVectorXf>& a)
{
    return 1.0 / std::sqrt(a.cast<double>().squaredNorm() / double(a.size()) + double(c.normEps));
}

// The components of layer l's stream at position p, in M-space (the rows of everything but qk_bias; C − [1] × M).
// Sums to hidden[l] row p (the mlp row is what the layer added beyond its attention's output). Float, as the run's
// own numbers: the products of the components with the map are the double-precision part.
void componentsAt(const DecoderModel& m, const DecoderRun& run, const ComponentLayout& lay, int p, Matrix& out)
{
    const int D = m.config.headDim, M = m.config.hidden;
    const int rows = lay.count() - (lay.qkBias ? 1 : 0);
    out.setZero(rows, M);
    out.row(0) = run.hidden[0].row(p);
    // Each head's write at once: the H×(H·D) block-diagonal of the heads' contexts through W^O, one product that
    // streams W^O once in its own format (a GGUF's view is not dequantized whole per position).
    Matrix blocks = Matrix::Zero(lay.heads, Eigen::Index(lay.heads) * D), heads;
    Eigen::RowVectorXf attn(M);
    for (int k = 0; k < lay.layer; ++k) {
        const DecoderLayer& L = m.layers[static_cast<std::size_t>(k)];
        const auto ctx = run.attention[static_cast<std::size_t>(k)].concat.row(p);
        for (int h = 0; h < lay.heads; ++h) blocks.row(h).segment(h * D, D) = ctx.segment(h * D, D);
        attn::product(blocks, L.Wo, heads);
        out.middleRows(lay.head(k, 0), lay.heads) = heads;
        attn = heads.colwise().sum();
        if (lay.outBias) {
            out.row(lay.bias(k)) = L.bo.transpose();
            attn += out.row(lay.bias(k));
        }
        if (L.postAttnNormGamma.size() > 0) {
            // The post-norm frozen at this position's scale: each head's (and b^O's) share of what the block
            // wrote, γ ⊙ part / rms(attention output).
            const Eigen::RowVectorXf g = L.postAttnNormGamma.transpose() * static_cast<float>(postNormScale(m.config, attn));
            out.middleRows(lay.head(k, 0), lay.heads).array().rowwise() *= g.array();
            if (lay.outBias) out.row(lay.bias(k)).array() *= g.array();
            attn.array() *= g.array();
        }
        out.row(lay.mlp(k)) = run.hidden[static_cast<std::size_t>(k) + 1].row(p) - run.hidden[static_cast<std::size_t>(k)].row(p) - attn;
    }
}

// One side's vectors of every component at position p (C×D): the cell's way (the components in M-space, then
// the map; O(C·M·D) a position).
MatD sideAt(const DecoderModel& m, const DecoderRun& run, const ComponentLayout& lay, const FrozenQkMap& f, int p)
{
    Matrix comps;
    componentsAt(m, run, lay, p, comps);
    const Matrix w = f.W.cast<float>();
    const Matrix projected = comps * w;
    MatD v(lay.count(), f.W.cols());
    v.topRows(comps.rows()) = projected.cast<double>() * f.scale[p];
    if (lay.qkBias) v.row(lay.qkBiasIndex()) = f.bias.transpose() * f.biasScale[p];
    rotate(f, p, v);
    return v;
}

// One side's vectors of one component at positions p0 … p0+count−1 (count×D): the row's and the patching's way
// (W^O · W folded once per earlier layer: O(H·D·M·D) a layer, then O(D²) a position and head). The products in
// float (as the run's), the scale, RoPE and everything after in double. A layer with a post-norm folds its γ into
// W^O·W and scales each position's heads (and b^O) by the post-norm's frozen 1/rms of that position.
class ComponentProjector {
public:
    ComponentProjector(const DecoderModel& m, const DecoderRun& run, const ComponentLayout& lay, const FrozenQkMap& f)
        : m_model(m), m_run(run), m_lay(lay), m_map(f), m_w(f.W.cast<float>()), m_layers(static_cast<std::size_t>(lay.layer))
    {
    }

    MatD component(int c, int p0, int count)
    {
        const int D = m_model.config.headDim;
        MatD v(count, D);
        if (m_lay.qkBias && c == m_lay.qkBiasIndex()) {
            for (int t = 0; t < count; ++t) v.row(t) = m_map.bias.transpose() * m_map.biasScale[p0 + t];
        } else {
            Matrix f;
            if (c == 0) {
                f.noalias() = m_run.hidden[0].middleRows(p0, count) * m_w;
            } else {
                const int k = (c - 1) / m_lay.perLayer, r = (c - 1) % m_lay.perLayer;
                const Folded& y = folded(k);
                const Matrix& ctx = m_run.attention[static_cast<std::size_t>(k)].concat;
                // The attention's parts at these positions (heads, b^O), post-normed where the layer is.
                auto postNormed = [&](Matrix& part) {
                    if (y.post.size() > 0)
                        for (int t = 0; t < count; ++t) part.row(t) *= y.post[p0 + t];
                };
                if (r < m_lay.heads) {
                    f.noalias() = ctx.block(p0, r * D, count, D) * y.wo.middleRows(r * D, D);
                    postNormed(f);
                } else if (m_lay.outBias && r == m_lay.heads) {
                    f = y.bias.replicate(count, 1);
                    postNormed(f);
                } else {
                    // The feed-forward's share: what the layer added, less its attention's output.
                    Matrix attnPart;
                    attnPart.noalias() = ctx.middleRows(p0, count) * y.wo;
                    if (m_lay.outBias) attnPart.rowwise() += y.bias;
                    postNormed(attnPart);
                    const Matrix delta = m_run.hidden[static_cast<std::size_t>(k) + 1].middleRows(p0, count) -
                                         m_run.hidden[static_cast<std::size_t>(k)].middleRows(p0, count);
                    f.noalias() = delta * m_w;
                    f -= attnPart;
                }
            }
            v = f.cast<double>();
            for (int t = 0; t < count; ++t) v.row(t) *= m_map.scale[p0 + t];
        }
        for (int t = 0; t < count; ++t) rotate(m_map, p0 + t, v.row(t));
        return v;
    }

private:
    struct Folded {
        Matrix wo;                 // H·D × D: W^O · diag(γ_post) · W (γ_post = 1 without a post-norm)
        Eigen::RowVectorXf bias;   // D: b^O · diag(γ_post) · W (empty without b^O)
        Vector post;               // n: the post-norm's 1/rms of each position's attention output; empty: none
    };

    // Layer k's W^O folded with the map once, and its post-norm's scales.
    const Folded& folded(int k)
    {
        Folded& y = m_layers[static_cast<std::size_t>(k)];
        if (y.wo.size() > 0) return y;
        const DecoderLayer& L = m_model.layers[static_cast<std::size_t>(k)];
        Matrix tmp;
        const Matrix& wo = denseWo(L, tmp);
        const bool post = L.postAttnNormGamma.size() > 0;
        const Matrix w = post ? Matrix(L.postAttnNormGamma.asDiagonal() * m_w) : m_w;
        product(wo, w, y.wo);
        if (m_lay.outBias) y.bias = L.bo.transpose() * w;
        if (post) {
            Matrix out;
            product(m_run.attention[static_cast<std::size_t>(k)].concat, wo, out);
            if (m_lay.outBias) out.rowwise() += L.bo.transpose();
            y.post.resize(out.rows());
            for (Eigen::Index p = 0; p < out.rows(); ++p) y.post[p] = static_cast<float>(postNormScale(m_model.config, out.row(p)));
        }
        return y;
    }

    const DecoderModel& m_model;
    const DecoderRun& m_run;
    const ComponentLayout& m_lay;
    const FrozenQkMap& m_map;
    Matrix m_w;  // the map's W in float
    std::vector<Folded> m_layers;
};

} // namespace
} // namespace detail

using namespace detail;

namespace {
// "L3", "L3.mlp", "L3.H4": appended piece by piece, not "L" + …: GCC 12 warns falsely (-Wrestrict) on const char* +
// string&& (as interp.cpp).
std::string componentName(int k, const char* part = nullptr, int h = -1)
{
    std::string s(1, 'L');
    s += std::to_string(k);
    if (part == nullptr) return s;
    s += '.';
    s += part;
    if (h >= 0) s += std::to_string(h);
    return s;
}
} // namespace

std::vector<std::string> qkComponentNames(const DecoderModel& model, int layer)
{
    if (layer < 0 || layer >= model.config.layers || static_cast<int>(model.layers.size()) != model.config.layers) return {};
    const ComponentLayout lay = layoutOf(model, layer);
    std::vector<std::string> names(static_cast<std::size_t>(lay.count()));
    auto name = [](int k, const char* part, int h = -1) { return componentName(k, part, h); };
    names[0] = "embed";
    for (int k = 0; k < layer; ++k) {
        for (int h = 0; h < lay.heads; ++h) names[static_cast<std::size_t>(lay.head(k, h))] = name(k, "H", h);
        if (lay.outBias) names[static_cast<std::size_t>(lay.bias(k))] = name(k, "bias");
        names[static_cast<std::size_t>(lay.mlp(k))] = name(k, "mlp");
    }
    if (lay.qkBias) names.back() = name(layer, "qk_bias");
    return names;
}

const char* toString(QkSide side) { return side == QkSide::Query ? "query" : "key"; }

// -----------------------------------------------------------------------------------------------------
// [SECTION] One cell, one row
// -----------------------------------------------------------------------------------------------------

namespace {

// A dense run of this model with layer `layer`'s results and head `head` in range.
Status checkHead(const DecoderModel& model, const DecoderRun& run, int layer, int head)
{
    const DecoderConfig& c = model.config;
    if (run.lazy)
        return makeError(StatusCode::Unsupported, "the run is lazy (a long text: no per-head contexts are kept); the "
                                                  "score decomposition needs a dense run");
    if (static_cast<int>(run.hidden.size()) != c.layers + 1 || static_cast<int>(run.attention.size()) != c.layers ||
        static_cast<int>(run.weights.size()) != c.layers)
        return invalidArgument("the run does not come from this model (" + std::to_string(run.attention.size()) +
                               " layers, the model has " + std::to_string(c.layers) + ")");
    if (layer < 0 || layer >= c.layers)
        return invalidArgument("layer " + std::to_string(layer) + " is out of range: expected 0.." + std::to_string(c.layers - 1));
    if (head < 0 || head >= c.heads)
        return invalidArgument("head " + std::to_string(head) + " is out of range: expected 0.." + std::to_string(c.heads - 1));
    if (run.pinned.layer == layer)
        return makeError(StatusCode::Unsupported, "layer " + std::to_string(layer) +
                                                      " has pinned Q, K, V (an edit in the chain view): its scores do not "
                                                      "come from the residual stream; clear the pin to decompose them");
    const Eigen::Index n = run.hidden[0].rows();
    if (n == 0) return invalidArgument("the run has no tokens");
    const Eigen::Index HD = Eigen::Index(c.heads) * c.headDim, KD = Eigen::Index(c.kvHeads) * c.headDim;
    for (int k = 0; k <= layer; ++k) {
        const AttentionResult& a = run.attention[static_cast<std::size_t>(k)];
        if (a.concat.rows() != n || a.concat.cols() != HD || run.hidden[static_cast<std::size_t>(k) + 1].rows() != n)
            return invalidArgument("the run's layer " + std::to_string(k) + " does not hold " + std::to_string(n) + " positions");
    }
    const AttentionResult& a = run.attention[static_cast<std::size_t>(layer)];
    if (a.Q.rows() != n || a.Q.cols() != HD || a.K.rows() != n || a.K.cols() != KD ||
        static_cast<int>(run.weights[static_cast<std::size_t>(layer)].size()) != c.heads ||
        run.weights[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)].size() != n)
        return invalidArgument("the run's layer " + std::to_string(layer) + " keeps no Q, K and weights of " +
                               std::to_string(n) + " positions");
    return Status::success();
}

Status checkPosition(const char* what, int pos, Eigen::Index n)
{
    if (pos < 0 || pos >= n)
        return invalidArgument(std::string(what) + " " + std::to_string(pos) + " is out of range: expected 0.." +
                               std::to_string(n - 1) + " (the text has " + std::to_string(n) + " tokens)");
    return Status::success();
}

// The layer's score soft-cap as the attention core applies it (layerConfig), 0 = none; a score through it.
float scoreSoftcap(const DecoderConfig& c, int layer) { return layerConfig(c, layer, Backend::Cpu).softcap; }
float capped(double score, double cap) { return static_cast<float>(cap > 0 ? cap * std::tanh(score / cap) : score); }

float runScore(const DecoderConfig& c, const DecoderRun& run, int layer, int head, int query, int key)
{
    const AttentionResult& a = run.attention[static_cast<std::size_t>(layer)];
    const int D = c.headDim, g = head / (c.heads / c.kvHeads);
    return a.Q.row(query).segment(head * D, D).dot(a.K.row(key).segment(g * D, D)) * a.scale;
}

} // namespace

Expected<QkCell> qkAttribution(const DecoderModel& model, const DecoderRun& run, int layer, int head, int query, int key)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkHead(model, run, layer, head));
    const Eigen::Index n = run.hidden[0].rows();
    ATTNSCOPE_RETURN_IF_ERROR(checkPosition("query", query, n));
    ATTNSCOPE_RETURN_IF_ERROR(checkPosition("key", key, n));
    const Eigen::Index first = firstKeyInWindow(model.config, layer, query);
    if (key > query)
        return invalidArgument("key " + std::to_string(key) + " is after query " + std::to_string(query) +
                               " (masked: a query sees keys " + std::to_string(first) + ".." + std::to_string(query) + ")");
    if (key < first)
        return invalidArgument("key " + std::to_string(key) + " is outside query " + std::to_string(query) +
                               "'s sliding window (masked: it sees keys " + std::to_string(first) + ".." +
                               std::to_string(query) + ")");
    const ComponentLayout lay = layoutOf(model, layer);
    const FrozenQkMap fq = frozenQkMap(model, run, layer, head, QkSide::Query);
    const FrozenQkMap fk = frozenQkMap(model, run, layer, head, QkSide::Key);
    const MatD qv = sideAt(model, run, lay, fq, query), kv = sideAt(model, run, lay, fk, key);
    const double scale = run.attention[static_cast<std::size_t>(layer)].scale;
    const VecD q = qv.colwise().sum().transpose(), k = kv.colwise().sum().transpose();
    QkCell out;
    out.layer = layer;
    out.head = head;
    out.query = query;
    out.key = key;
    out.scale = static_cast<float>(scale);
    out.score = runScore(model.config, run, layer, head, query, key);
    out.softcap = scoreSoftcap(model.config, layer);
    out.cappedScore = capped(out.score, out.softcap);
    out.weight = run.weights[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)](query, key);
    out.components = qkComponentNames(model, layer);
    out.matrix = (scale * qv * kv.transpose()).cast<float>();
    out.queryComponents = (scale * qv * k).cast<float>();
    out.keyComponents = (scale * kv * q).cast<float>();
    return out;
}

Matrix QkRow::matrix(int key) const
{
    const Eigen::Index C = static_cast<Eigen::Index>(components.size());
    if (key < firstKey || key > query || C == 0) return {};
    return scale * queryVectors * keyVectors.middleRows(Eigen::Index(key - firstKey) * C, C).transpose();
}

Expected<QkRow> qkAttributionRow(const DecoderModel& model, const DecoderRun& run, int layer, int head, int query)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkHead(model, run, layer, head));
    ATTNSCOPE_RETURN_IF_ERROR(checkPosition("query", query, run.hidden[0].rows()));
    const ComponentLayout lay = layoutOf(model, layer);
    const FrozenQkMap fq = frozenQkMap(model, run, layer, head, QkSide::Query);
    const FrozenQkMap fk = frozenQkMap(model, run, layer, head, QkSide::Key);
    const int C = lay.count(), D = model.config.headDim;
    const int first = static_cast<int>(firstKeyInWindow(model.config, layer, query)), keys = query - first + 1;
    const MatD qv = sideAt(model, run, lay, fq, query);
    const VecD q = qv.colwise().sum().transpose();
    MatD kv(Eigen::Index(keys) * C, D);
    ComponentProjector project(model, run, lay, fk);
    for (int c = 0; c < C; ++c) {
        const MatD v = project.component(c, first, keys);
        for (int t = 0; t < keys; ++t) kv.row(Eigen::Index(t) * C + c) = v.row(t);
    }
    const double scale = run.attention[static_cast<std::size_t>(layer)].scale;
    QkRow out;
    out.layer = layer;
    out.head = head;
    out.query = query;
    out.firstKey = first;
    out.scale = static_cast<float>(scale);
    out.components = qkComponentNames(model, layer);
    out.softcap = scoreSoftcap(model.config, layer);
    out.scores.resize(keys);
    out.cappedScores.resize(keys);
    out.weights.resize(keys);
    out.queryComponents.resize(keys, C);
    out.keyComponents.resize(keys, C);
    const HeadWeights& w = run.weights[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)];
    for (int t = 0; t < keys; ++t) {
        const auto block = kv.middleRows(Eigen::Index(t) * C, C);
        const VecD k = block.colwise().sum().transpose();
        out.queryComponents.row(t) = (scale * qv * k).transpose().cast<float>();
        out.keyComponents.row(t) = (scale * block * q).transpose().cast<float>();
        out.scores[t] = runScore(model.config, run, layer, head, query, first + t);
        out.cappedScores[t] = capped(out.scores[t], out.softcap);
        out.weights[t] = w(query, first + t);
    }
    out.queryVectors = qv.cast<float>();
    out.keyVectors = kv.cast<float>();
    return out;
}

Expected<QkKeyContrast> contrastKeys(const QkRow& row, int key, int other)
{
    const int last = row.firstKey + static_cast<int>(row.scores.size()) - 1;
    for (int j : {key, other})
        if (j < row.firstKey || j > last)
            return invalidArgument("key " + std::to_string(j) + " is not in query " + std::to_string(row.query) + "'s row (keys " +
                                   std::to_string(row.firstKey) + ".." + std::to_string(last) + ")");
    const Eigen::Index a = key - row.firstKey, b = other - row.firstKey;
    QkKeyContrast out;
    out.key = key;
    out.other = other;
    out.difference = row.scores[a] - row.scores[b];
    out.keySide = (row.keyComponents.row(a) - row.keyComponents.row(b)).transpose();
    out.querySide = (row.queryComponents.row(a) - row.queryComponents.row(b)).transpose();
    return out;
}

int runnerUpKey(const QkRow& row, int key)
{
    int best = -1;
    for (Eigen::Index t = 0; t < row.weights.size(); ++t) {
        const int j = row.firstKey + static_cast<int>(t);
        if (j != key && (best < 0 || row.weights[t] > row.weights[best - row.firstKey])) best = j;
    }
    return best;
}

std::vector<QkPair> strongestQkPairs(const QkCell& cell, int k)
{
    const Eigen::Index C = cell.matrix.rows();
    if (k <= 0 || C == 0 || cell.matrix.cols() != C) return {};
    std::vector<Eigen::Index> order(static_cast<std::size_t>(C * C));
    for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<Eigen::Index>(t);
    const std::size_t keep = std::min(order.size(), static_cast<std::size_t>(k));
    const float* m = cell.matrix.data();  // row-major: index = query component · C + key component
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), [m](Eigen::Index a, Eigen::Index b) {
        return std::abs(m[a]) != std::abs(m[b]) ? std::abs(m[a]) > std::abs(m[b]) : a < b;
    });
    std::vector<QkPair> out;
    out.reserve(keep);
    for (std::size_t t = 0; t < keep; ++t)
        out.push_back({static_cast<int>(order[t] / C), static_cast<int>(order[t] % C), m[order[t]]});
    return out;
}

std::vector<int> strongestQkComponents(const Vector& values, int k)
{
    std::vector<int> order(static_cast<std::size_t>(values.size()));
    for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
    const std::size_t keep = std::min(order.size(), static_cast<std::size_t>(std::max(k, 0)));
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), [&values](int a, int b) {
        return std::abs(values[a]) != std::abs(values[b]) ? std::abs(values[a]) > std::abs(values[b]) : a < b;
    });
    order.resize(keep);
    return order;
}

int qkComponentLayer(const std::string& name, int* head)
{
    if (head) *head = -1;
    const std::size_t dot = name.find('.');
    if (name.size() < 4 || name[0] != 'L' || dot == std::string::npos || dot < 2) return -1;
    int layer = 0;
    for (std::size_t i = 1; i < dot; ++i) {
        if (name[i] < '0' || name[i] > '9' || layer > 100000) return -1;
        layer = layer * 10 + (name[i] - '0');
    }
    if (head && dot + 2 < name.size() && name[dot + 1] == 'H') {
        int h = 0;
        bool digits = true;
        for (std::size_t i = dot + 2; i < name.size(); ++i) {
            if (name[i] < '0' || name[i] > '9' || h > 100000) {
                digits = false;
                break;
            }
            h = h * 10 + (name[i] - '0');
        }
        if (digits) *head = h;
    }
    return layer;
}

QkGroups groupQkByLayer(const QkCell& cell, const std::vector<int>& expandedLayers)
{
    QkGroups g;
    const int C = static_cast<int>(cell.components.size());
    if (C == 0 || cell.matrix.rows() != C || cell.matrix.cols() != C || cell.queryComponents.size() != C ||
        cell.keyComponents.size() != C)
        return g;
    auto expanded = [&](int l) { return std::find(expandedLayers.begin(), expandedLayers.end(), l) != expandedLayers.end(); };
    for (int c = 0; c < C; ++c) {
        const std::string& name = cell.components[static_cast<std::size_t>(c)];
        const int l = qkComponentLayer(name);
        // A whole earlier layer: one group, unless expanded (the own layer's qk_bias is always alone).
        const bool whole = l >= 0 && l < cell.layer && !expanded(l);
        if (whole && !g.names.empty() && g.wholeLayer.back() && g.layer.back() == l) {
            g.members.back().push_back(c);
            continue;
        }
        g.names.push_back(whole ? componentName(l) : name);
        g.layer.push_back(l);
        g.wholeLayer.push_back(whole);
        g.members.push_back({c});
    }
    const Eigen::Index G = static_cast<Eigen::Index>(g.names.size());
    // Per group: the members' rows summed, then their columns (double: sums of many terms of either sign).
    Eigen::MatrixXd rows = Eigen::MatrixXd::Zero(G, C);
    g.queryComponents = Vector::Zero(G);
    g.keyComponents = Vector::Zero(G);
    for (Eigen::Index a = 0; a < G; ++a) {
        double q = 0, k = 0;
        for (int c : g.members[static_cast<std::size_t>(a)]) {
            rows.row(a) += cell.matrix.row(c).cast<double>();
            q += cell.queryComponents[c];
            k += cell.keyComponents[c];
        }
        g.queryComponents[a] = static_cast<float>(q);
        g.keyComponents[a] = static_cast<float>(k);
    }
    g.matrix.resize(G, G);
    for (Eigen::Index b = 0; b < G; ++b) {
        Eigen::VectorXd col = Eigen::VectorXd::Zero(G);
        for (int c : g.members[static_cast<std::size_t>(b)]) col += rows.col(c);
        g.matrix.col(b) = col.cast<float>();
    }
    return g;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Path patching of a pattern
// -----------------------------------------------------------------------------------------------------

Expected<PatternPatch> patchPattern(const DecoderModel& model, const DecoderRun& run, int layer, int head,
                                    const std::string& component, QkSide side)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkHead(model, run, layer, head));
    const std::vector<std::string> names = qkComponentNames(model, layer);
    const auto it = std::find(names.begin(), names.end(), component);
    if (it == names.end()) {
        // All of them when few (layer 0 has only the embedding), else the first two and the last.
        std::string list;
        for (std::size_t i = 0; i < names.size(); ++i) {
            if (names.size() > 5 && i == 2) {
                list += ", …";
                i = names.size() - 1;
            }
            list += (list.empty() ? "" : ", ") + names[i];
        }
        const std::string what = names.size() == 1 ? "only input, " : std::to_string(names.size()) + " inputs: ";
        return invalidArgument("component '" + component + "' is not one of layer " + std::to_string(layer) + "'s " +
                               what + list + " (an earlier layer's head is named like L0.H1, its output bias L0.bias, "
                               "its MLP L0.mlp)");
    }
    const int c = static_cast<int>(it - names.begin());
    const DecoderConfig& cfg = model.config;
    const int n = static_cast<int>(run.hidden[0].rows()), D = cfg.headDim, g = head / (cfg.heads / cfg.kvHeads);
    const ComponentLayout lay = layoutOf(model, layer);
    const FrozenQkMap f = frozenQkMap(model, run, layer, head, side);
    ComponentProjector project(model, run, lay, f);
    const MatD removed = project.component(c, 0, n);
    const AttentionResult& a = run.attention[static_cast<std::size_t>(layer)];
    MatD Q = a.Q.middleCols(head * D, D).cast<double>(), K = a.K.middleCols(g * D, D).cast<double>();
    (side == QkSide::Query ? Q : K) -= removed;
    MatD scores = double(a.scale) * Q * K.transpose();
    if (const double cap = scoreSoftcap(cfg, layer); cap > 0) scores = cap * (scores.array() / cap).tanh();
    PatternPatch out;
    out.component = component;
    out.side = side;
    out.original = run.weights[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)].toMatrix();
    out.patched = Matrix::Zero(n, n);
    for (int i = 0; i < n; ++i) {
        const int first = static_cast<int>(firstKeyInWindow(cfg, layer, i));
        const double mx = scores.row(i).segment(first, i - first + 1).maxCoeff();
        double sum = 0;
        for (int j = first; j <= i; ++j) sum += std::exp(scores(i, j) - mx);
        for (int j = first; j <= i; ++j) out.patched(i, j) = static_cast<float>(std::exp(scores(i, j) - mx) / sum);
    }
    out.difference = out.patched - out.original;
    return out;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Composition scores
// -----------------------------------------------------------------------------------------------------

namespace {

// An R (D×D) with RᵀR = wᵀw for w (rows × D, rows ≥ D), so that ‖X·wᵀ‖_F = ‖X·Rᵀ‖_F for any X: the Cholesky factor
// of wᵀw, formed in double (that is all the norm needs: the product RᵀR, not R's own accuracy); a singular wᵀw (a
// zeroed weight) falls back to the R of a thin QR. The Cholesky is ~5× faster than Eigen's Householder QR here.
Matrix thinR(const Matrix& w)
{
    const Eigen::MatrixXd wd = w.cast<double>();
    Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(w.cols(), w.cols());
    gram.selfadjointView<Eigen::Lower>().rankUpdate(wd.transpose());
    const Eigen::LLT<Eigen::MatrixXd, Eigen::Lower> llt(gram);
    if (llt.info() == Eigen::Success) return Matrix(llt.matrixU().toDenseMatrix().cast<float>());
    Eigen::HouseholderQR<Eigen::MatrixXf> qr(w);
    return Matrix(qr.matrixQR().topRows(w.cols()).triangularView<Eigen::Upper>());
}

// A reading weight (M × out) with its layer's attention-norm γ folded in (none without pre-norms), centred over
// d_model for LayerNorm, and a QK-norm's γ' on its columns (`qkGamma`: D, the same for every head, or one per
// column; empty = none).
Matrix readingWeight(const WeightMatrix& w, const DecoderLayer& L, bool layerNorm, const Vector& qkGamma = Vector())
{
    Matrix r = w.toMatrix();
    if (L.attnNormGamma.size() == r.rows())
        for (Eigen::Index i = 0; i < r.rows(); ++i) r.row(i) *= L.attnNormGamma[i];
    if (layerNorm) r.rowwise() -= r.colwise().mean();
    if (qkGamma.size() > 0)
        for (Eigen::Index j = 0; j < r.cols(); ++j) r.col(j) *= qkGamma[j % qkGamma.size()];
    return r;
}

// W^O (H·D × M) as a writer: its post-norm's γ on each output (Gemma, OLMo 2), each output row centred for
// LayerNorm (TransformerLens's center_writing_weights).
Matrix writingWeight(const DecoderLayer& L, bool layerNorm)
{
    Matrix wo = L.Wo.toMatrix();
    if (L.postAttnNormGamma.size() == wo.cols()) wo = wo * L.postAttnNormGamma.asDiagonal();
    if (layerNorm) wo.colwise() -= wo.rowwise().mean();
    return wo;
}

// The Gram matrix f·fᵀ of f (M × D) packed: its upper triangle row by row, the off-diagonal entries × `offDiagonal`.
// ⟨packed(A, 1), packed(B, 2)⟩ = ⟨A, B⟩ for symmetric A and B (the M×M Frobenius inner product).
// The triangle alone is computed (half the work of f·fᵀ), into a row-major buffer so that each packed row is a
// contiguous copy. The buffer is the thread's, reused: a fresh 1.3 MB matrix per Gram spent a quarter of the time in
// the kernel zeroing new pages.
void packGram(const Matrix& f, float offDiagonal, float* dst)
{
    thread_local Matrix g;
    const Eigen::Index M = f.rows();
    g.resize(M, M);
    g.triangularView<Eigen::Upper>() = f * f.transpose();
    for (Eigen::Index i = 0, at = 0; i < M; at += M - i, ++i) {
        Eigen::Map<Eigen::RowVectorXf>(dst + at, M - i) = g.row(i).tail(M - i) * offDiagonal;
        dst[at] = g(i, i);
    }
}

// Bytes of packed writer Grams held at once (a chunk of writer layers); SmolLM2's 261 writers need 173 MB.
constexpr double kGramBudgetBytes = 256.0 * 1024 * 1024;
// Reader layers whose packed Grams are held at once (18 MB a layer at SmolLM2).
constexpr int kReaderLayers = 4;

// The inner products S(i, j) = ⟨A.row(i), B.row(j)⟩ of packed Grams, for every writer row i (A: rows × P) and the
// reader rows j ≥ first(i) (B: cols × P; first(i) marks the readers of a layer above i's), added into S (double).
// A and B have row counts that are multiples of the tile's (rows of zeros pad them). The operands are deep (P = 166 176 at
// SmolLM2) and narrow (a few hundred rows): Eigen's GEMM spent half its time copying them into its packed layout,
// so this reads them in place: chunk by chunk of kChunk values (a chunk of B, 0.9 MB at SmolLM2, stays in the L2
// cache while every writer tile passes over it), in tiles of kTileA × kTileB rows; each chunk's float
// sums are added in double. A tile of writers stays on one thread through the chunks (a static schedule), so that
// no two threads add into the same row of S.
constexpr Eigen::Index kChunk = 2048;
// The tile: 6 writers × 4 readers, 24 SIMD accumulators and 10 loads for 24 multiply-adds a step (4 × 4 took 8 for
// 16, and the readers' loads from L2 were the limit).
constexpr int kTileA = 6, kTileB = 4;
template <class First>
void packedInnerProducts(const Eigen::Ref<const Matrix>& A, const Eigen::Ref<const Matrix>& B, First first, MatD& S)
{
    using Packet = Eigen::internal::packet_traits<float>::type;
    constexpr Eigen::Index kLanes = Eigen::internal::packet_traits<float>::size;
    const Eigen::Index rows = A.rows(), cols = B.rows(), P = A.cols();
    assert(rows % kTileA == 0 && cols % kTileB == 0 && B.cols() == P);
    const Eigen::Index tiles = rows / kTileA;
#pragma omp parallel
    for (Eigen::Index k0 = 0; k0 < P; k0 += kChunk) {
        const Eigen::Index k1 = std::min(P, k0 + kChunk), vec = k0 + (k1 - k0) / kLanes * kLanes;
#pragma omp for schedule(static, 1) nowait
        for (Eigen::Index t = 0; t < tiles; ++t) {
            const Eigen::Index i0 = kTileA * t;
            const float* a[kTileA];
            for (int x = 0; x < kTileA; ++x) a[x] = A.row(i0 + x).data();
            for (Eigen::Index j0 = first(i0) / kTileB * kTileB; j0 < cols; j0 += kTileB) {
                const float* b[kTileB];
                for (int y = 0; y < kTileB; ++y) b[y] = B.row(j0 + y).data();
                Packet acc[kTileA][kTileB];
                for (int x = 0; x < kTileA; ++x)
                    for (int y = 0; y < kTileB; ++y) acc[x][y] = Eigen::internal::pset1<Packet>(0.0f);
                for (Eigen::Index k = k0; k < vec; k += kLanes) {
                    Packet bv[kTileB];
                    for (int y = 0; y < kTileB; ++y) bv[y] = Eigen::internal::ploadu<Packet>(b[y] + k);
                    for (int x = 0; x < kTileA; ++x) {
                        const Packet av = Eigen::internal::ploadu<Packet>(a[x] + k);
                        for (int y = 0; y < kTileB; ++y) acc[x][y] = Eigen::internal::pmadd(av, bv[y], acc[x][y]);
                    }
                }
                for (int x = 0; x < kTileA; ++x)
                    for (int y = 0; y < kTileB; ++y) {
                        double sum = Eigen::internal::predux(acc[x][y]);
                        for (Eigen::Index k = vec; k < k1; ++k) sum += double(a[x][k]) * b[y][k];
                        S(i0 + x, j0 + y) += sum;
                    }
            }
        }
    }
}

// The packed Grams of layer b's readers into rows (3H × P): the H query heads' Q, then K, then V maps, each X_B
// of the formula below; their norms into qkNorm and ovNorm (H each). The R of a KV group's W^K (and W^V's, for
// the writers) is shared by its heads: once a group.
void readerGrams(const DecoderModel& model, int b, bool layerNorm, float* ovNorm, float* qkNorm, Eigen::Ref<Matrix> rows)
{
    const DecoderConfig& c = model.config;
    const int H = c.heads, D = c.headDim, G = c.heads / std::max(1, c.kvHeads);
    const DecoderLayer& layer = model.layers[static_cast<std::size_t>(b)];
    const Matrix wq = readingWeight(layer.Wq, layer, layerNorm, layer.qNormGamma),
                 wk = readingWeight(layer.Wk, layer, layerNorm, layer.kNormGamma),
                 wv = readingWeight(layer.Wv, layer, layerNorm), wo = writingWeight(layer, layerNorm);
    std::vector<Matrix> rk(static_cast<std::size_t>(H / G));
    for (int g = 0; g < H / G; ++g) rk[static_cast<std::size_t>(g)] = thinR(wk.middleCols(g * D, D));
    // The 3H Grams over the threads (each its own buffer): a third of the time at SmolLM2.
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < 3 * H; ++t) {
        const int h = t % H, g = h / G;
        const auto q = wq.middleCols(h * D, D), k = wk.middleCols(g * D, D), v = wv.middleCols(g * D, D);
        Matrix x;
        if (t < H) {
            x = q * rk[static_cast<std::size_t>(g)].transpose();
            qkNorm[h] = x.norm();
        } else if (t < 2 * H) {
            x = k * thinR(q).transpose();
        } else {
            x = v * thinR(Matrix(wo.middleRows(h * D, D).transpose())).transpose();
            ovNorm[h] = x.norm();  // = ‖W^V W^O‖ of the head (set again when it writes)
        }
        packGram(x, 2.0f, rows.row(t / H * H + h).data());
    }
}

} // namespace

// Every score is a squared Frobenius norm of a product of a writer's and a reader's M×M maps, each of rank D:
//   ‖W_OV^A · X_B‖² = ⟨G_A, H_B⟩   with G_A = Ãᵀ_A Ã_A,  Ã_A = R_V(A)·W^O_A (D×M; R_V the R of A's KV group's
//                                   W^V, so that ‖W_OV^A·X‖ = ‖Ã_A·X‖ for any X), and H_B = X_B X_Bᵀ
// where X_B (M×D) is W^Q_B·R_K(B)ᵀ (Q), W^K_B·R_Q(B)ᵀ (K) or W^V_B·R_O(B)ᵀ (V) — each the reader's map with its
// other factor replaced by an R with the same RᵀR (thinR), which keeps the norm. The pair's work is then one
// M(M+1)/2 inner product (a GEMM of packed Grams: writers × readers) instead of a D×M×D product: M/D² of it (0.14 at
// SmolLM2).
Expected<CompositionScores> compositionScores(const DecoderModel& model)
{
    const DecoderConfig& c = model.config;
    const int L = c.layers, H = c.heads, D = c.headDim, M = c.hidden, G = c.heads / std::max(1, c.kvHeads);
    if (L < 1 || static_cast<int>(model.layers.size()) != L) return invalidArgument("composition: the model has no layers");
    if (M < D) return invalidArgument("composition: d_model " + std::to_string(M) + " is below the head width " + std::to_string(D));
    const bool layerNorm = c.norm == NormKind::Layer;
    const Eigen::Index P = Eigen::Index(M) * (M + 1) / 2;
    CompositionScores out;
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) out.names.push_back(componentName(l, "H", h));
    out.q = out.k = out.v = Matrix::Zero(L * H, L * H);
    std::vector<float> ovNorm(static_cast<std::size_t>(L * H)), qkNorm(static_cast<std::size_t>(L * H));
    const int chunk = std::max(1, static_cast<int>(kGramBudgetBytes / (double(H) * double(P) * sizeof(float))));
    Matrix writers, readers;
    MatD S;
    for (int a0 = 0; a0 < L - 1; a0 += chunk) {
        const int a1 = std::min(L - 1, a0 + chunk);  // writer layers a0 … a1−1
        // Rows of zeros pad the operands to packedInnerProducts' tiles.
        const auto padded = [](Eigen::Index r, int tile) { return (r + tile - 1) / tile * tile; };
        writers.resize(padded(Eigen::Index(a1 - a0) * H, kTileA), P);
        writers.bottomRows(writers.rows() - Eigen::Index(a1 - a0) * H).setZero();
        for (int a = a0; a < a1; ++a) {
            const DecoderLayer& layer = model.layers[static_cast<std::size_t>(a)];
            const Matrix wv = readingWeight(layer.Wv, layer, layerNorm), wo = writingWeight(layer, layerNorm);
            std::vector<Matrix> rv(static_cast<std::size_t>(H / G));
            for (int g = 0; g < H / G; ++g) rv[static_cast<std::size_t>(g)] = thinR(wv.middleCols(g * D, D));
#pragma omp parallel for schedule(dynamic)
            for (int h = 0; h < H; ++h) {
                const Matrix at = rv[static_cast<std::size_t>(h / G)] * wo.middleRows(h * D, D);  // Ã (D×M)
                ovNorm[static_cast<std::size_t>(a * H + h)] = at.norm();
                packGram(Matrix(at.transpose()), 1.0f, writers.row(Eigen::Index(a - a0) * H + h).data());
            }
        }
        for (int b0 = a0 + 1; b0 < L; b0 += kReaderLayers) {
            const int b1 = std::min(L, b0 + kReaderLayers);  // reader layers b0 … b1−1
            readers.resize(padded(Eigen::Index(b1 - b0) * 3 * H, kTileB), P);
            readers.bottomRows(readers.rows() - Eigen::Index(b1 - b0) * 3 * H).setZero();
            for (int b = b0; b < b1; ++b)
                readerGrams(model, b, layerNorm, ovNorm.data() + b * H, qkNorm.data() + b * H,
                            readers.middleRows(Eigen::Index(b - b0) * 3 * H, 3 * H));
            const int w1 = std::min(a1, b1 - 1);  // the chunk's writers below the block's last reader
            // Writer row i (layer a0 + i/H) needs the readers of layers above its own: from row (a + 1 − b0)·3H.
            const Eigen::Index rows = padded(Eigen::Index(w1 - a0) * H, kTileA);
            S.setZero(rows, readers.rows());
            packedInnerProducts(writers.topRows(rows), readers, [&](Eigen::Index i) {
                return std::max<Eigen::Index>(0, Eigen::Index(a0 + i / H + 1 - b0) * 3 * H);
            }, S);
            for (int A = a0 * H; A < w1 * H; ++A) {
                const float ov = ovNorm[static_cast<std::size_t>(A)];
                for (int b = std::max(b0, A / H + 1); b < b1; ++b)
                    for (int h = 0; h < H; ++h) {
                        const int B = b * H + h;
                        const Eigen::Index col = Eigen::Index(b - b0) * 3 * H;
                        const float qden = ov * qkNorm[static_cast<std::size_t>(B)], vden = ov * ovNorm[static_cast<std::size_t>(B)];
                        // A sum of many terms may round below 0 where the product is (nearly) 0.
                        auto root = [&](Eigen::Index at) { return static_cast<float>(std::sqrt(std::max(0.0, S(A - a0 * H, col + at)))); };
                        out.q(A, B) = qden > 0 ? root(h) / qden : 0.0f;
                        out.k(A, B) = qden > 0 ? root(H + h) / qden : 0.0f;
                        out.v(A, B) = vden > 0 ? root(2 * H + h) / vden : 0.0f;
                    }
            }
        }
    }
    return out;
}

std::vector<CompositionPair> strongestCompositions(const CompositionScores& s, int k)
{
    std::vector<CompositionPair> all;
    const Eigen::Index N = s.q.rows();
    for (const auto& [kind, m] : {std::pair<char, const Matrix*>{'q', &s.q}, {'k', &s.k}, {'v', &s.v}})
        for (Eigen::Index a = 0; a < N; ++a)
            for (Eigen::Index b = 0; b < N; ++b)
                if ((*m)(a, b) > 0) all.push_back({static_cast<int>(a), static_cast<int>(b), kind, (*m)(a, b)});
    const std::size_t keep = std::min(all.size(), static_cast<std::size_t>(std::max(0, k)));
    std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(keep), all.end(), [](const CompositionPair& x, const CompositionPair& y) {
        if (x.value != y.value) return x.value > y.value;
        if (x.kind != y.kind) return x.kind < y.kind;
        return x.from != y.from ? x.from < y.from : x.to < y.to;
    });
    all.resize(keep);
    return all;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Work (for the bench's bounds)
// -----------------------------------------------------------------------------------------------------

double qkCellFlops(const DecoderConfig& c, int layer)
{
    const double M = c.hidden, D = c.headDim, H = c.heads;
    const double C = 1 + double(layer) * (H + 2) + 1;
    // Per side: the earlier heads' writes (H·D·M a layer) and the feed-forward's (H·D·M), the map (C·M·D); the
    // C×C matrix (C²·D). Multiply-adds × 2.
    const double side = double(layer) * 2 * H * D * M + C * M * D;
    return 2 * (2 * side + C * C * D);
}

double qkRowFlops(const DecoderConfig& c, int layer, int n)
{
    const double M = c.hidden, D = c.headDim, H = c.heads, N = n;
    const double C = 1 + double(layer) * (H + 2) + 1;
    // The query side as a cell's; the key side: W^O·W per earlier layer (H·D·M·D), the heads' contexts through it
    // (n·H·D·D), the feed-forward's share (n·M·D + n·H·D·D), the embedding (n·M·D); the components (n·C·D·2).
    const double query = double(layer) * 2 * H * D * M + C * M * D;
    const double key = double(layer) * (H * D * M * D + N * H * D * D + N * M * D + N * H * D * D) + N * M * D;
    return 2 * (query + key + 2 * N * C * D);
}

double compositionFlops(const DecoderConfig& c)
{
    const double L = c.layers, M = c.hidden, D = c.headDim, H = c.heads;
    const double P = M * (M + 1) / 2, pairs = L * (L - 1) / 2;  // layer pairs a < b
    // The Grams (the upper triangle's P values, D deep each, as SYRK computes them): H writers per layer but the
    // last, 3·H readers per layer but the first (once: one chunk of writers); the inner products: H × 3·H packed
    // Grams of P values per layer pair. Multiply-adds × 2.
    const double grams = (L - 1) * H * P * D + (L - 1) * 3 * H * P * D;
    return 2 * (grams + pairs * H * 3 * H * P);
}

} // namespace attn
