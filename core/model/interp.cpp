// Interpretability views of a decoder run (issue 20). See attnscope/interp.h for the contract and docs/interp.md.
//
// [SECTION] Checks and targets
// [SECTION] Direct logit attribution
// [SECTION] Logit lens
// [SECTION] Head types and the induction probe
// [SECTION] Scans (head importance, activation patching)
#include "attnscope/interp.h"

#include "attnscope/attention.h"
#include "decoder_device_run.h"
#include "decoder_family.h"
#include "lm_head.h"
#include "teams.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn {
using namespace detail;

// -----------------------------------------------------------------------------------------------------
// [SECTION] Checks and targets
// -----------------------------------------------------------------------------------------------------

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A run of this model with everything the views read: L+1 residual streams and L attention results of n rows,
// the last position's logits.
Status checkRun(const DecoderModel& model, const DecoderRun& run, const char* what = "the run")
{
    const DecoderConfig& c = model.config;
    if (run.lazy)
        return makeError(StatusCode::Unsupported, std::string(what) + " is a lazy run (a long text: no per-head results are kept); "
                                                  "these views need a dense run");
    if (static_cast<int>(run.hidden.size()) != c.layers + 1 || static_cast<int>(run.attention.size()) != c.layers)
        return invalidArgument(std::string(what) + " does not come from this model (" + std::to_string(run.attention.size()) +
                               " layers, the model has " + std::to_string(c.layers) + ")");
    const Eigen::Index n = run.hidden[0].rows();
    if (n == 0) return invalidArgument(std::string(what) + " has no tokens");
    const Eigen::Index HD = Eigen::Index(c.heads) * c.headDim;
    for (int l = 0; l < c.layers; ++l) {
        const AttentionResult& a = run.attention[static_cast<std::size_t>(l)];
        if (a.concat.rows() != n || a.concat.cols() != HD || run.hidden[static_cast<std::size_t>(l) + 1].rows() != n ||
            static_cast<int>(a.heads.size()) != c.heads)
            return invalidArgument(std::string(what) + ": layer " + std::to_string(l) + " does not hold " +
                                   std::to_string(n) + " positions of " + std::to_string(c.heads) + " heads");
    }
    if (run.lastLogits.size() == 0) return invalidArgument(std::string(what) + " has no logits");
    return Status::success();
}

Status checkTarget(const Vector& logits, int id, const char* what = "target")
{
    if (id < 0 || id >= logits.size())
        return invalidArgument(std::string(what) + " id " + std::to_string(id) + " is outside the vocabulary 0.." +
                               std::to_string(logits.size() - 1));
    return Status::success();
}

bool isAblated(const DecoderRun& run, int l, int h)
{
    return std::find(run.ablated.begin(), run.ablated.end(), std::make_pair(l, h)) != run.ablated.end();
}

std::string quoted(const std::string& s)
{
    std::string q(1, '\'');  // appended, not "'" + s: GCC 12 warns falsely (-Wrestrict) on const char* + string&&
    q += s;
    q += '\'';
    return q;
}

} // namespace

Expected<InterpTarget> interpTarget(const DecoderModel& model, const DecoderRun& run, int id)
{
    const Vector& logits = run.lastLogits;
    if (logits.size() == 0) return invalidArgument("the run has no logits");
    if (id < 0) {
        id = 0;
        for (Eigen::Index i = 1; i < logits.size(); ++i)
            if (logits[i] > logits[id]) id = static_cast<int>(i);  // the first of equal maxima
    }
    ATTNSCOPE_RETURN_IF_ERROR(checkTarget(logits, id));
    InterpTarget t;
    t.id = id;
    t.token = model.tokenizer.tokenText(id);
    t.logit = logits[id];
    t.logprob = logProbability(logits, id);
    return t;
}

Expected<int> targetTokenId(const DecoderModel& model, const std::string& token)
{
    if (token.empty()) return invalidArgument("the target is empty; a target is one token");
    auto enc = model.tokenizer.encode(token, false);
    if (!enc) return enc.status();
    if (enc->ids.size() == 1) return enc->ids[0];
    std::string msg = quoted(token) + " is " + std::to_string(enc->ids.size()) + " tokens:";
    for (const std::string& piece : enc->tokens) {
        msg += ' ';
        msg += quoted(piece);
    }
    return invalidArgument(msg + "; a target is one token");
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Direct logit attribution
// -----------------------------------------------------------------------------------------------------

Expected<DirectLogitAttribution> directLogitAttribution(const DecoderModel& model, const DecoderRun& run, int targetId)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkRun(model, run));
    ATTNSCOPE_RETURN_IF_ERROR(checkTarget(run.lastLogits, targetId));
    const DecoderConfig& c = model.config;
    const int L = c.layers, H = c.heads, D = c.headDim, M = c.hidden;
    const Eigen::Index last = run.hidden[0].rows() - 1;
    const Vector x = run.hidden.back().row(last).transpose();
    Vector u(M);
    model.unembedding().column(targetId, u.data());
    // The final norm frozen at this run's scale is linear: component c adds c·w to the logit. RMSNorm: w = γ⊙u / rms.
    // LayerNorm: (c − mean(c))·(γ⊙u)/σ = c·(w − mean(w)) with w = γ⊙u/σ, and β·u is the norm's own term.
    Vector w = model.finalNormGamma.cwiseProduct(u);
    DirectLogitAttribution out;
    if (c.norm == NormKind::Layer) {
        const float mean = x.mean();
        const float var = (x.array() - mean).square().sum() / static_cast<float>(M);
        w /= std::sqrt(var + c.normEps);
        w.array() -= w.mean();
        out.normBias = model.finalNormBeta.size() > 0 ? model.finalNormBeta.dot(u) : 0.0f;
    } else {
        w /= std::sqrt(x.squaredNorm() / static_cast<float>(M) + c.normEps);
    }
    out.heads = Matrix::Zero(L, H);
    out.attnBias = Vector::Zero(L);
    out.mlp = Vector::Zero(L);
    out.embed = run.hidden[0].row(last).dot(w.transpose());
    for (int l = 0; l < L; ++l) {
        const DecoderLayer& layer = model.layers[static_cast<std::size_t>(l)];
        const AttentionResult& a = run.attention[static_cast<std::size_t>(l)];
        // Head h writes concat[h·D…]·W^O[h·D…, :]; its share is that row times W^O's rows times w. A post-norm of
        // the attention's output (Gemma, OLMo 2), frozen at its scale in this run (1/rms of this position's
        // output), is linear too: the heads' writes are then seen through γ_post / rms.
        Vector wl = w;
        if (layer.postAttnNormGamma.size() > 0) {
            Matrix row = a.concat.row(last), o;
            product(row, layer.Wo, o);
            if (layer.bo.size() > 0) o.row(0) += layer.bo.transpose();
            const float rms = std::sqrt(o.row(0).squaredNorm() / static_cast<float>(M) + c.normEps);
            wl = layer.postAttnNormGamma.cwiseProduct(w) / rms;
        }
        const Vector ow = layer.Wo.times(wl);
        for (int h = 0; h < H; ++h) out.heads(l, h) = a.concat.row(last).segment(h * D, D).dot(ow.segment(h * D, D).transpose());
        if (layer.bo.size() > 0) out.attnBias[l] = layer.bo.dot(wl);
        // The rest of the layer's update is the feed-forward's: the attention's output (concat·W^O + b^O, not kept
        // by a run) adds exactly the heads' shares and the bias term to the logit.
        const auto delta = run.hidden[static_cast<std::size_t>(l) + 1].row(last) - run.hidden[static_cast<std::size_t>(l)].row(last);
        out.mlp[l] = delta.dot(w.transpose()) - out.heads.row(l).sum() - out.attnBias[l];
    }
    // With a final soft-cap (Gemma 2) the parts sum to the logit before the cap.
    out.logit = c.finalSoftcap > 0 ? run.finalHidden.row(last).dot(u.transpose()) : run.lastLogits[targetId];
    return out;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Logit lens
// -----------------------------------------------------------------------------------------------------

Expected<LogitLens> logitLens(const DecoderModel& model, const DecoderRun& run, int k, int positions)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkRun(model, run));
    if (k < 1) return invalidArgument("logit lens: k is " + std::to_string(k) + "; expected at least 1");
    if (positions < 0) return invalidArgument("logit lens: positions is " + std::to_string(positions) + "; expected 0 (all) or more");
    const int L = model.config.layers;
    const int n = static_cast<int>(run.hidden[0].rows());
    LogitLens lens;
    lens.firstPosition = positions == 0 ? 0 : std::max(0, n - positions);
    const int count = n - lens.firstPosition;
    lens.top.assign(static_cast<std::size_t>(L), std::vector<std::vector<TokenProbability>>(static_cast<std::size_t>(count)));
    const TeamsForTheLoad teams;
    // Every layer's rows stacked (layer-major), normed, then through the unembedding at once (lmHeadTop): the head
    // read once for all of them (in blocks of 256 rows it was read 9 times for Gemma 3's 18 layers × 128 tokens),
    // no block's logits kept whole.
    const Eigen::Index total = Eigen::Index(L) * count;
    Matrix stacked(total, model.config.hidden), normed;
    for (int l = 0; l < L; ++l)
        stacked.middleRows(Eigen::Index(l) * count, count) = run.hidden[static_cast<std::size_t>(l) + 1].bottomRows(count);
    finalNorm(model, stacked, normed);
    std::vector<std::vector<TopLogit>> top;
    lmHeadTop(model.config, model.unembedding(), normed, k, top);
    for (Eigen::Index r = 0; r < total; ++r) {
        std::vector<TokenProbability>& out = lens.top[static_cast<std::size_t>(r / count)][static_cast<std::size_t>(r % count)];
        for (const TopLogit& t : top[static_cast<std::size_t>(r)]) out.push_back({t.id, model.tokenizer.tokenText(t.id), t.logit, t.p});
    }
    return lens;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Head types and the induction probe
// -----------------------------------------------------------------------------------------------------

HeadTypes headTypes(const DecoderRun& run)
{
    HeadTypes t;
    const int L = static_cast<int>(run.attention.size());
    const int H = L > 0 ? static_cast<int>(run.attention[0].heads.size()) : 0;
    t.previous = t.duplicate = t.induction = t.sink = Matrix::Zero(L, H);
    const std::vector<int>& ids = run.encoding.ids;
    const int n = static_cast<int>(ids.size());
    // Per query, the keys each score sums (the same for every head).
    std::vector<std::vector<int>> dupKeys(static_cast<std::size_t>(n)), indKeys(static_cast<std::size_t>(n));
    int dupQueries = 0, indQueries = 0;
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < i; ++j)
            if (ids[static_cast<std::size_t>(j)] == ids[static_cast<std::size_t>(i)]) dupKeys[static_cast<std::size_t>(i)].push_back(j);
        for (int k = 1; k < i; ++k)
            if (ids[static_cast<std::size_t>(k) - 1] == ids[static_cast<std::size_t>(i)]) indKeys[static_cast<std::size_t>(i)].push_back(k);
        dupQueries += !dupKeys[static_cast<std::size_t>(i)].empty();
        indQueries += !indKeys[static_cast<std::size_t>(i)].empty();
    }
    t.hasRepeats = dupQueries > 0;
    for (int l = 0; l < L; ++l) {
        if (static_cast<std::size_t>(l) >= run.weights.size()) break;  // a run without maps scores 0
        const std::vector<HeadWeights>& heads = run.weights[static_cast<std::size_t>(l)];
        for (int h = 0; h < H && h < static_cast<int>(heads.size()); ++h) {
            const HeadWeights::View w = heads[static_cast<std::size_t>(h)].view();
            if (w.rows() < n) continue;
            double prev = 0, sink = 0, dup = 0, ind = 0;
            for (int i = 1; i < n; ++i) {
                prev += w(i, i - 1);
                sink += w(i, 0);
            }
            for (int i = 0; i < n; ++i) {
                for (int j : dupKeys[static_cast<std::size_t>(i)]) dup += w(i, j);
                for (int k : indKeys[static_cast<std::size_t>(i)]) ind += w(i, k);
            }
            if (n > 1) {
                t.previous(l, h) = static_cast<float>(prev / (n - 1));
                t.sink(l, h) = static_cast<float>(sink / (n - 1));
            }
            if (dupQueries > 0) t.duplicate(l, h) = static_cast<float>(dup / dupQueries);
            if (indQueries > 0) t.induction(l, h) = static_cast<float>(ind / indQueries);
        }
    }
    return t;
}

namespace {

std::uint64_t splitmix64(std::uint64_t& state)
{
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// An ordinary word token: a space and 2–8 ASCII letters (" table"). Such a token after a space-separated word
// is its own pre-token in every byte-level BPE pattern here, so a text of them re-encodes to the same ids.
bool isWordToken(const std::string& s)
{
    if (s.size() < 3 || s.size() > 9 || s[0] != ' ') return false;
    return std::all_of(s.begin() + 1, s.end(), [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); });
}

} // namespace

Expected<InductionProbe> inductionProbe(const DecoderModel& model, int length, std::uint64_t seed)
{
    if (length < 1) return invalidArgument("induction probe: length is " + std::to_string(length) + "; expected at least 1");
    if (2 * length + 1 > model.config.maxPositions)
        return invalidArgument("induction probe: 2×" + std::to_string(length) + " tokens do not fit the model's " +
                               std::to_string(model.config.maxPositions) + " positions");
    std::vector<int> words;
    for (int id = 0; id < model.tokenizer.vocabSize(); ++id)
        if (isWordToken(model.tokenizer.tokenText(id))) words.push_back(id);
    if (static_cast<int>(words.size()) < length)
        return invalidArgument("induction probe: the vocabulary has " + std::to_string(words.size()) +
                               " word tokens (a space and 2–8 ASCII letters); the probe needs " + std::to_string(length));
    std::uint64_t state = seed;
    // A pick can fail to re-encode when two neighbouring words merge or a word is split; 64 fresh picks make a
    // failure of all of them vanishingly unlikely for a real vocabulary.
    constexpr int kTries = 64;
    for (int attempt = 0; attempt < kTries; ++attempt) {
        // `length` distinct words: a partial Fisher–Yates shuffle.
        std::vector<int> pool = words;
        std::vector<int> r;
        for (int i = 0; i < length; ++i) {
            const std::size_t left = pool.size() - static_cast<std::size_t>(i);
            const std::size_t j = static_cast<std::size_t>(i) + static_cast<std::size_t>(splitmix64(state) % left);
            std::swap(pool[static_cast<std::size_t>(i)], pool[j]);
            r.push_back(pool[static_cast<std::size_t>(i)]);
        }
        std::string half;
        for (int id : r) half += model.tokenizer.tokenText(id);
        InductionProbe p;
        p.text = half + half;
        auto enc = encodeForDecoder(model, p.text, false);
        if (!enc) return enc.status();
        std::vector<int> want;
        if (enc->ids.size() == 2 * r.size() + 1 && model.tokenizer.bos() >= 0 && enc->ids[0] == model.tokenizer.bos())
            want.push_back(model.tokenizer.bos());
        want.insert(want.end(), r.begin(), r.end());
        want.insert(want.end(), r.begin(), r.end());
        if (enc->ids == want) {
            p.ids = std::move(want);
            return p;
        }
    }
    return invalidArgument("induction probe: no pick of " + std::to_string(length) + " word tokens re-encoded to itself in " +
                           std::to_string(kTries) + " tries");
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Scans (head importance, activation patching)
// -----------------------------------------------------------------------------------------------------

namespace {

// Stacked rows of variants at most (a group's feed-forward buffers: 4096 × 1536 floats = 25 MB).
constexpr Eigen::Index kScanRows = 4096;
// Start layers per group at most: a group's rows are reported together, so the first rows (the layers nearest
// the output) appear after a few layers' recomputes, not after the whole scan.
constexpr int kGroupLayers = 5;
// The first group (the layers nearest the output) smaller still: its rows are on screen in about 100 ms.
constexpr int kFirstGroupLayers = 2;

// Layer k, whole, on g stacked variants (x: g·n rows entering layer k, replaced by the rows leaving it): Q, K, V
// and the feed-forward on all rows at once (each weight streams once for every variant), the attention of each
// variant through the attention core. A pinned layer uses its pinned Q, K, V for every variant (as a recompute).
Status fullLayer(const DecoderModel& model, const DecoderRun& run, int k, int g, Matrix& x, BlockScratch& scratch)
{
    const DecoderConfig& c = model.config;
    const int D = c.headDim;
    const Eigen::Index n = run.hidden[0].rows();
    const DecoderLayer& layer = model.layers[static_cast<std::size_t>(k)];
    const bool pinned = run.pinned.layer == k;
    Matrix normed, Q, K, V, out, next;
    if (pinned) {
        const DecoderRun::PinnedQKV& p = run.pinned;
        if (p.Q.rows() != n || p.Q.cols() != Eigen::Index(c.heads) * D || p.K.rows() != n || p.V.rows() != n ||
            p.K.cols() != p.V.cols())
            return invalidArgument("the pinned Q, K, V of layer " + std::to_string(k) + " do not fit the run's " +
                                   std::to_string(n) + " tokens");
    } else {
        attentionInputs(model, k, x, 0, normed, Q, K, V, static_cast<int>(n));
    }
    const AttentionConfig cfg = layerConfig(c, k, Backend::Cpu);
    AttentionInput in;
    in.mask.causal = true;
    slidingWindowMask(c, k, static_cast<int>(n), 0, static_cast<int>(n), in.mask);
    AttentionResult res;
    Matrix cat(Eigen::Index(g) * n, Eigen::Index(c.heads) * D);
    for (int v = 0; v < g; ++v) {
        in.Q = pinned ? run.pinned.Q : Matrix(Q.middleRows(v * n, n));
        in.K = pinned ? run.pinned.K : Matrix(K.middleRows(v * n, n));
        in.V = pinned ? run.pinned.V : Matrix(V.middleRows(v * n, n));
        if (auto s = compute(in, cfg, res); !s.ok()) return makeError(s.code, "layer " + std::to_string(k) + ": " + s.message);
        cat.middleRows(v * n, n) = res.concat;
    }
    for (const auto& [al, ah] : run.ablated)
        if (al == k) cat.middleCols(Eigen::Index(ah) * D, D).setZero();
    product(cat, layer.Wo, out);
    if (layer.bo.size() > 0) out.rowwise() += layer.bo.transpose();
    afterAttention(model, k, out, x, scratch, next);
    x.swap(next);
    return Status::success();
}

// The rows leaving layer l for g variants of its concat (rows v·n… of `concat`, the heads' contexts before W^O):
// W^O and the rest of the block on the run's own input to layer l. Appended to x.
void startVariants(const DecoderModel& model, const DecoderRun& run, int l, int g, const Matrix& concat, Matrix& x,
                   BlockScratch& scratch)
{
    const DecoderLayer& layer = model.layers[static_cast<std::size_t>(l)];
    Matrix out, next;
    product(concat, layer.Wo, out);
    if (layer.bo.size() > 0) out.rowwise() += layer.bo.transpose();
    afterAttention(model, l, out, run.hidden[static_cast<std::size_t>(l)].replicate(g, 1), scratch, next);
    const Eigen::Index old = x.rows();
    x.conservativeResize(old + next.rows(), next.cols());
    x.bottomRows(next.rows()) = next;
}

// One scan. Its variants come in units (one layer's heads, in batches of at most kScanRows rows when the text is
// long), grouped from the top: units while the group's rows stay within kScanRows and it spans at most
// kGroupLayers layers. From the group's lowest layer up, each layer runs whole on the variants started below it
// and then starts its own (makeVariant(l, h, concat) edits the layer's concat for head h), so that every layer's
// weights stream once for all of the group's variants; at the top, the last position's logits of every variant,
// which score(logits) turns into its cell. Rows not reached stay NaN; progress(l), top down, once a layer's
// every unit is done.
template <class MakeVariant, class Score>
Status scan(const DecoderModel& model, const DecoderRun& run, const std::vector<std::vector<int>>& headsOfLayer,
            Matrix& out, const ScanProgress& progress, MakeVariant makeVariant, Score score)
{
    const DecoderConfig& c = model.config;
    const int L = c.layers;
    const Eigen::Index n = run.hidden[0].rows();
    const TeamsForTheLoad teams;
    struct Unit {
        int layer;
        std::vector<int> heads;
    };
    std::vector<Unit> units;  // top layer first
    const std::size_t perBatch = static_cast<std::size_t>(std::max<Eigen::Index>(1, kScanRows / n));
    for (int l = L - 1; l >= 0; --l) {
        const std::vector<int>& heads = headsOfLayer[static_cast<std::size_t>(l)];
        for (std::size_t b0 = 0; b0 < heads.size(); b0 += perBatch)
            units.push_back({l, std::vector<int>(heads.begin() + std::ptrdiff_t(b0),
                                                 heads.begin() + std::ptrdiff_t(std::min(heads.size(), b0 + perBatch)))});
    }
    BlockScratch scratch;
    Matrix concat, x, last, normed, logits;
    int reported = L;  // layers ≥ this were reported
    for (std::size_t u0 = 0; u0 < units.size();) {
        // The group: units u0 … u1−1.
        std::size_t u1 = u0;
        Eigen::Index rows = 0;
        const int span = u0 == 0 ? kFirstGroupLayers : kGroupLayers;
        while (u1 < units.size() && units[u0].layer - units[u1].layer < span &&
               (u1 == u0 || rows + Eigen::Index(units[u1].heads.size()) * n <= kScanRows)) {
            rows += Eigen::Index(units[u1].heads.size()) * n;
            ++u1;
        }
        const int first = units[u1 - 1].layer, top = units[u0].layer;
        std::vector<std::pair<int, int>> made;  // (layer, head) of each variant, in the order of x's row blocks
        x.resize(0, c.hidden);
        for (int k = first; k < L; ++k) {
            if (!made.empty()) ATTNSCOPE_RETURN_IF_ERROR(fullLayer(model, run, k, static_cast<int>(made.size()), x, scratch));
            if (k > top) continue;
            const Matrix& base = run.attention[static_cast<std::size_t>(k)].concat;
            for (std::size_t u = u0; u < u1; ++u) {
                if (units[u].layer != k || units[u].heads.empty()) continue;
                const int g = static_cast<int>(units[u].heads.size());
                concat.resize(Eigen::Index(g) * n, base.cols());
                for (int v = 0; v < g; ++v) {
                    auto block = concat.middleRows(v * n, n);
                    block = base;
                    makeVariant(k, units[u].heads[static_cast<std::size_t>(v)], block);
                    made.emplace_back(k, units[u].heads[static_cast<std::size_t>(v)]);
                }
                startVariants(model, run, k, g, concat, x, scratch);
            }
        }
        if (!made.empty()) {
            last.resize(static_cast<Eigen::Index>(made.size()), c.hidden);
            for (std::size_t v = 0; v < made.size(); ++v) last.row(Eigen::Index(v)) = x.row(Eigen::Index(v) * n + n - 1);
            finalNorm(model, last, normed);
            product(normed, model.unembedding(), logits);
            finalSoftcap(c, logits);
            for (std::size_t v = 0; v < made.size(); ++v)
                out(made[v].first, made[v].second) = score(logits.row(Eigen::Index(v)).transpose());
        }
        // The layers whose every unit is done: all above the next group's top layer.
        const int done = u1 < units.size() ? units[u1].layer + 1 : 0;
        for (int l = reported - 1; l >= done; --l)
            if (progress && !progress(l)) return Status::success();
        reported = std::min(reported, done);
        u0 = u1;
    }
    // Layers without a unit (every head already ablated) below the last one reported.
    for (int l = reported - 1; l >= 0; --l)
        if (progress && !progress(l)) return Status::success();
    return Status::success();
}

// The scan on the GPU, for a run whose layers ran there (run.backend Cuda; the model's weights are on the
// device): one layer's heads at a time from the top, each layer's variants stacked in one batched recompute of the
// layers above (detail::deviceScanLayer), the variant's head zeroed or, with patchFrom, given that run's context.
template <class Score>
Status deviceScan(DecoderModel& model, const DecoderRun& run, const std::vector<std::vector<int>>& headsOfLayer,
                  const DecoderRun* patchFrom, Matrix& out, const ScanProgress& progress, Score score)
{
    Matrix logits;
    for (int l = model.config.layers - 1; l >= 0; --l) {
        const std::vector<int>& heads = headsOfLayer[static_cast<std::size_t>(l)];
        if (!heads.empty()) {
            const Matrix* patch = patchFrom ? &patchFrom->attention[static_cast<std::size_t>(l)].concat : nullptr;
            ATTNSCOPE_RETURN_IF_ERROR(detail::deviceScanLayer(model, run, l, heads, patch, logits));
            for (std::size_t v = 0; v < heads.size(); ++v)
                out(l, heads[v]) = score(Vector(logits.row(static_cast<Eigen::Index>(v)).transpose()));
        }
        if (progress && !progress(l)) return Status::success();
    }
    return Status::success();
}

} // namespace

Status headImportance(DecoderModel& model, const DecoderRun& run, int targetId, Matrix& out, const ScanProgress& progress)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkRun(model, run));
    ATTNSCOPE_RETURN_IF_ERROR(checkTarget(run.lastLogits, targetId));
    const DecoderConfig& c = model.config;
    const int D = c.headDim;
    out = Matrix::Constant(c.layers, c.heads, kNaN);
    std::vector<std::vector<int>> heads(static_cast<std::size_t>(c.layers));
    for (int l = 0; l < c.layers; ++l)
        for (int h = 0; h < c.heads; ++h)
            if (!isAblated(run, l, h)) heads[static_cast<std::size_t>(l)].push_back(h);
    const float base = logProbability(run.lastLogits, targetId);
    // An already ablated head changes nothing: 0, set as its row is reached.
    auto progressAndZeros = [&](int l) {
        for (int h = 0; h < c.heads; ++h)
            if (isAblated(run, l, h)) out(l, h) = 0;
        return !progress || progress(l);
    };
    auto score = [&](const Vector& logits) { return logProbability(logits, targetId) - base; };
    if (run.backend == Backend::Cuda) return deviceScan(model, run, heads, nullptr, out, progressAndZeros, score);
    return scan(model, run, heads, out, progressAndZeros,
                [D](int, int h, auto& block) { block.middleCols(Eigen::Index(h) * D, D).setZero(); }, score);
}

Status activationPatching(DecoderModel& model, const DecoderRun& clean, const DecoderRun& corrupted, int targetA,
                          int targetB, Matrix& out, PatchingMetric* metric, const ScanProgress& progress)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkRun(model, clean, "the clean run"));
    ATTNSCOPE_RETURN_IF_ERROR(checkRun(model, corrupted, "the corrupted run"));
    const Eigen::Index nClean = clean.hidden[0].rows(), nCorrupted = corrupted.hidden[0].rows();
    if (nClean != nCorrupted)
        return invalidArgument("patching: the clean run has " + std::to_string(nClean) + " tokens, the corrupted run " +
                               std::to_string(nCorrupted) + "; patching needs equal lengths");
    auto sorted = [](std::vector<std::pair<int, int>> v) {
        std::sort(v.begin(), v.end());
        return v;
    };
    if (sorted(clean.ablated) != sorted(corrupted.ablated))
        return invalidArgument("patching: the clean and corrupted runs ablate different heads; patching needs the same ablations");
    ATTNSCOPE_RETURN_IF_ERROR(checkTarget(corrupted.lastLogits, targetA, "target A"));
    ATTNSCOPE_RETURN_IF_ERROR(checkTarget(corrupted.lastLogits, targetB, "target B"));
    const float mClean = clean.lastLogits[targetA] - clean.lastLogits[targetB];
    const float mCorrupted = corrupted.lastLogits[targetA] - corrupted.lastLogits[targetB];
    if (metric) *metric = {mClean, mCorrupted};
    if (!(mClean != mCorrupted))
        return invalidArgument("patching: logit(A) − logit(B) is " + std::to_string(mClean) +
                               " in both runs; there is no difference to recover");
    const DecoderConfig& c = model.config;
    const int D = c.headDim;
    out = Matrix::Constant(c.layers, c.heads, kNaN);
    std::vector<std::vector<int>> heads(static_cast<std::size_t>(c.layers));
    for (auto& row : heads)
        for (int h = 0; h < c.heads; ++h) row.push_back(h);
    auto score = [&](const Vector& logits) { return (logits[targetA] - logits[targetB] - mCorrupted) / (mClean - mCorrupted); };
    if (corrupted.backend == Backend::Cuda) return deviceScan(model, corrupted, heads, &clean, out, progress, score);
    return scan(
        model, corrupted, heads, out, progress,
        [&](int l, int h, auto& block) {
            block.middleCols(Eigen::Index(h) * D, D) =
                clean.attention[static_cast<std::size_t>(l)].concat.middleCols(Eigen::Index(h) * D, D);
        },
        score);
}

double headScanFlops(const DecoderConfig& c, int n)
{
    const double N = n, M = c.hidden, HD = double(c.heads) * c.headDim, KD = double(c.kvHeads) * c.headDim;
    const double F = c.intermediate, H = c.heads;
    // Multiply-adds × 2 per variant of n tokens.
    const double qkv = 2 * N * M * (HD + 2 * KD);
    const double o = 2 * N * HD * M;
    const double ffn = 2 * N * M * F * (c.gatedFfn() ? 3 : 2);
    const double attention = 2 * 2 * H * N * N * c.headDim;  // QKᵀ and weights·V, every score computed
    const double lmHead = 2 * M * double(c.vocab);            // the last position only
    double total = 0;
    for (int l = 0; l < c.layers; ++l) {
        const double later = double(c.layers - 1 - l);
        total += H * (o + ffn + later * (qkv + attention + o + ffn) + lmHead);
    }
    return total;
}

} // namespace attn
