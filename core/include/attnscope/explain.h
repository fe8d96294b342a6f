// The lessons of the seeds, as values the window (and tests, and the figure export) can show.
//
// Each function derives one thing the seed posts explain about attention from the user's own numbers:
// the vector version of one output row, the two formulas and the wrong softmax axis, why q·k is scaled by
// 1/√d_k, how heads split Q/K/V and add up through W^O, the additive score, masked softmax, and attention
// over image patches. Everything here is headless math on value types; the app only draws it.
//
// [SECTION] index
//   [1] Vector view: o_i = Σ_j â_ij·v_j for one query, and the shapes of every product
//   [2] The two formulas: row vs column layout, and the wrong softmax axis
//   [3] Why 1/√d_k: sampled q·k statistics, softmax with/without scaling, naive vs stable softmax
//   [4] Heads: column blocks, the block-identity example, per-head contributions, one vs h heads
//   [5] Additive attention: the breakdown of one score
//   [6] Masks: masked softmax on a scores matrix
//   [7] Image patches: patchify, a self-attention session over patches, weights back on the grid
//
// Orientation: unless a field says otherwise, matrices returned here are in "token rows" orientation
// (Row layout: query i is row i, key j is row j), whatever the session's layout, because a lesson talks
// about vectors q_i, k_j, v_j. Fields named "...InLayout" keep the session's layout.
#pragma once

#include "attnscope/attention.h"
#include "attnscope/layout.h"
#include "attnscope/preset_io.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// =====================================================================================================
// [1] Vector view
// =====================================================================================================

// The vector version of output row `query` of head `head` (seed 000/001):
//   a_ij = q_i·k_j (raw), s·a_ij (scaled, s = result.scale), â_ij = softmax_j, o_i = Σ_j â_ij·v_j,
// next to row i of the matrix version (the head output computed by core).
struct VectorView {
    int head = 0;
    int query = 0;
    float scale = 1.0f;           // factor applied to q·k (1/√d_k for ScaledDot)
    Vector q;                     // d_q: query i of this head
    Matrix keys;                  // S×d_k: k_j as rows
    Matrix values;                // S×d_v: v_j as rows
    Vector rawScores;             // S: q_i·k_j (Additive: the additive score itself)
    Vector scaledScores;          // S: the scores core computed (after scaling, before masking)
    std::vector<std::uint8_t> masked;  // S: 1 where key j is masked for this query
    Vector weights;               // S: â_ij (row i of the head's weights); masked entries are 0
    Matrix weightedValues;        // S×d_v: row j = â_ij·v_j
    Vector vectorSum;             // d_v: Σ_j â_ij·v_j, summed here in double
    Vector matrixRow;             // d_v: row i of the head output computed by core (matrix version)
    float maxAbsDiff = 0.0f;      // max |vectorSum − matrixRow| (float rounding only)
    float weightSum = 0.0f;       // Σ_j â_ij: 1, or 0 for a query whose keys are all masked
};

// Builds the vector view from a computed result. `score` is the config's score (the result does not
// record it): for Dot/ScaledDot rawScores are recomputed as q_i·k_j; for Additive they equal the scores.
// Errors (InvalidArgument): head outside [0, H), query outside [0, T), a result without heads.
Expected<VectorView> vectorView(const AttentionResult& result, Score score, int head, int query);

// One matrix product of the computation, with shapes as the seed's figures draw them:
//   e.g. "Q·Kᵀ": [T, d_k]·[d_k, S] → [T, S].
struct ProductShape {
    std::string label;     // e.g. "X·W^Q", "Q·Kᵀ", "softmax(·/√d_k)", "A·V", "concat·W^O"
    std::string lhsName;   // e.g. "Q"
    std::string rhsName;   // e.g. "Kᵀ" (empty for an element-wise step such as softmax)
    std::string outName;   // e.g. "QKᵀ"
    int lhsRows = 0, lhsCols = 0;
    int rhsRows = 0, rhsCols = 0;   // 0×0 for element-wise steps
    int outRows = 0, outCols = 0;
    std::string text;      // the whole line, e.g. "Q·Kᵀ: [4, 3]·[3, 4] → [4, 4]"
};

// The products of one head's computation in order (projections when mode ≠ Direct, scores, softmax,
// weights·values, then concat·W^O when hasWo), in the given layout: Row uses softmax(QKᵀ/√d_k)·V with
// tokens as rows, Column uses V·softmax(KᵀQ/√d_k) with tokens as columns. With Score::Additive the score
// step is the two projections q·A_q [T, A] and k·A_k [S, A] (A = d.A) instead of QKᵀ. `d` comes from
// validate().
std::vector<ProductShape> productShapes(const Dims& d, Layout layout, Mode mode, bool hasWo,
                                        Score score = Score::ScaledDot);

// =====================================================================================================
// [2] The two formulas
// =====================================================================================================

// The same data computed with both formulas (seed 000/001): softmax(QKᵀ/√d_k)·V on tokens-as-rows data
// and V·softmax(KᵀQ/√d_k) on the transposed (tokens-as-columns) data.
struct LayoutComparison {
    AttentionResult row;       // computed with Layout::Row
    AttentionResult column;    // computed with Layout::Column on transposedInput
    float maxAbsDiffOutput = 0.0f;   // max |row.output − column.outputᵀ|: float rounding only
    float maxAbsDiffWeights = 0.0f;  // max over heads of |row weights − (column weights)ᵀ|
};

// `in`/`cfg` may be in either layout; the other one is derived with transposedInput.
// Errors: whatever compute() returns for the input (InvalidArgument, ResourceExhausted, ...).
Expected<LayoutComparison> compareLayouts(const AttentionInput& in, const AttentionConfig& cfg);

// What goes wrong when data laid out one way meets the other formula. Two labelled mistakes:
//  (a) wrong softmax axis: the scores are right (QKᵀ in Row, KᵀQ in Column) but softmax runs along the
//      queries instead of the keys (torch.softmax(dim=0) where dim=1 was meant, or the reverse). Shapes
//      always fit, so nothing fails: each key's weights over the queries sum to 1 instead of each query's
//      weights over the keys. Silent garbage, here labelled.
//  (b) literal other formula: the other formula applied to the stored matrices as they are, e.g.
//      softmax(QKᵀ)·V on tokens-as-columns Q [d_k, T]: QKᵀ is [d_k, d_k], a softmax over features, not
//      tokens. Either a shape error (reported as text, not as a Status) or a wrong-shaped result.
struct WrongFormulaDemo {
    Layout dataLayout = Layout::Row;   // how the session stores tokens
    int head = 0;
    // (a) all in the session's layout (Row: T×S, T×d_v; Column: S×T, d_v×T).
    Matrix scoresInLayout;              // the correct scores, masked entries as stored (before masking)
    Matrix rightWeightsInLayout;        // softmax along the keys (= the head's weights from compute)
    Matrix wrongWeightsInLayout;        // softmax along the queries (the wrong axis), masked entries 0
    Matrix rightOutputInLayout;         // the head output from compute
    Matrix wrongOutputInLayout;         // the same product with the wrong weights
    Vector rightSumsOverKeys;           // T: Σ over keys of the right weights per query (1, or 0)
    Vector wrongSumsOverKeys;           // T: the same sums for the wrong weights (≠ 1 in general)
    Vector wrongSumsOverQueries;        // S: Σ over queries of the wrong weights per key (1, or 0): the tell
    float maxAbsWeightDiff = 0.0f;      // max |right − wrong| weights
    float maxAbsOutputDiff = 0.0f;      // max |right − wrong| outputs
    std::string wrongAxisText;          // one paragraph saying what (a) did, with the axis names
    // (b)
    bool literalApplies = false;        // true when the shapes of the literal formula fit
    std::vector<ProductShape> literalSteps;  // the steps tried, up to the first that does not fit
    Matrix literalOutput;               // its result when it applies (its shape is itself the lesson)
    std::string literalText;            // what happened, e.g. "Q·Kᵀ: [3, 4]·[4, 3] → [3, 3]: ..."
};

// Errors (InvalidArgument): head outside [0, H); whatever compute() returns for the input.
// Works for Dot/ScaledDot and Additive scores (for Additive, (b) is reported as not applicable).
Expected<WrongFormulaDemo> wrongFormulaDemo(const AttentionInput& in, const AttentionConfig& cfg, int head);

// =====================================================================================================
// [3] Why 1/√d_k
// =====================================================================================================

// Equal-width histogram over [lo, hi); values outside are counted in below/above, NaN in nonFinite.
struct Histogram {
    float lo = 0.0f;
    float hi = 1.0f;
    std::vector<int> counts;
    int below = 0, above = 0, nonFinite = 0;
    float binWidth() const { return counts.empty() ? 0.0f : (hi - lo) / float(counts.size()); }
};
// Errors (InvalidArgument): bins < 1, lo ≥ hi or not finite.
Expected<Histogram> histogram(const std::vector<float>& values, float lo, float hi, int bins);

// Expected count per bin of `samples` draws from N(mean, var): samples·∫bin pdf. The normal shape is the
// central-limit approximation of q·k (exact mean and variance, approximate shape for small d_k).
std::vector<float> normalBinCounts(const Histogram& h, double mean, double var, int samples);

struct ScalingSampleConfig {
    double mu = 0.0;          // mean of every q and k entry; default 0 (the seed's case)
    double sigma = 1.0;       // standard deviation of every entry; default 1
    std::vector<int> dks = {1, 4, 16, 64, 256};  // the d_k values to sample; default as shown
    int samples = 20000;      // q·k samples per d_k; default 20000 (variance within ~2% at d_k ≥ 16)
    int bins = 60;            // histogram bins; default 60
    std::uint64_t seed = 1;   // RNG seed; same seed, same samples on every platform
};

// Theory (seed 003, with σ² the variance of each entry; the seed writes σ for the variance):
//   E(q·k) = d_k·μ²,   Var(q·k) = d_k·(σ⁴ + 2μ²σ²)
//   E(q·k/√d_k) = √d_k·μ²,  Var(q·k/√d_k) = σ⁴ + 2μ²σ²  (independent of d_k: the point of scaling)
struct DotProductStats {
    int dk = 0;
    double predictedMean = 0, predictedVar = 0;              // of q·k
    double predictedScaledMean = 0, predictedScaledVar = 0;  // of q·k/√d_k
    double mean = 0, var = 0;                                // empirical, of q·k (unbiased variance)
    double scaledMean = 0, scaledVar = 0;                    // empirical, of q·k/√d_k
    double fourthCentralMoment = 0;                          // empirical, of q·k (for standard errors)
    std::vector<float> dots;        // the samples of q·k
    std::vector<float> scaledDots;  // the same samples divided by √d_k
    Histogram hist;                 // of dots; hist and scaledHist share one range so widths compare
    Histogram scaledHist;           // of scaledDots
};

// Predicted mean and variance of q·k for given d_k, μ, σ (formula above).
double predictedDotMean(int dk, double mu, double sigma);
double predictedDotVariance(int dk, double mu, double sigma);

// Samples q, k ~ N(μ, σ²)^d_k independently, `samples` times per d_k (own Box–Muller on mt19937_64, so
// the numbers do not depend on the standard library). Errors (InvalidArgument): empty dks, a d_k < 1 or
// > 65536, samples < 2 or > 10⁷, bins < 1 or > 10000, σ < 0, μ or σ not finite.
Expected<std::vector<DotProductStats>> sampleDotProducts(const ScalingSampleConfig& cfg);

// Draws one query q (d_k) and S keys (S×d_k) from N(μ, σ²), for the softmax demonstrations.
// Errors (InvalidArgument): d_k or S < 1 or > 65536, σ < 0, non-finite μ or σ.
struct QueryKeys {
    Vector q;
    Matrix K;
};
Expected<QueryKeys> sampleQueryKeys(int dk, int S, double mu, double sigma, std::uint64_t seed);

// Softmax of one row and what it says: how peaked it is.
struct SoftmaxSummary {
    Vector weights;          // stable softmax (max subtracted, accumulated in double)
    float maxWeight = 0.0f;
    int argmax = -1;
    float entropy = 0.0f;    // −Σ w·ln w in nats; ln S for uniform, 0 for one-hot
    float maxEntropy = 0.0f; // ln S
};
// Stable softmax; an empty row gives empty weights. Non-finite inputs propagate (caller validates).
SoftmaxSummary summarizeSoftmax(const Vector& scores);

// Naive softmax exactly as seed 002 warns against: exp(x)/Σexp(x) in float with no max subtraction.
// Overflows to inf (and inf/inf = NaN) once a score exceeds ln(FLT_MAX) ≈ 88.72.
struct NaiveSoftmax {
    Vector exps;             // exp(x) in float: inf where x > 88.72
    float sum = 0.0f;        // Σ exps in float (inf once any term is)
    Vector weights;          // exps / sum: NaN where inf/inf, 0 where finite/inf
    int infCount = 0;        // entries of exps that are inf
    int nanCount = 0;        // entries of weights that are NaN
    bool overflowed = false; // infCount > 0 or the sum overflowed
};
NaiveSoftmax naiveSoftmax(const Vector& scores);

// One row shown with and without scaling, with the naive softmax beside the stable one.
struct ScalingRowDemo {
    int dk = 0;
    float scale = 1.0f;          // 1/√d_k
    Vector rawScores;            // S: q·k_j
    Vector scaledScores;         // S: q·k_j/√d_k
    Vector splitScores;          // S: (q/d_k^¼)·(k_j/d_k^¼), seed 002's split form
    float maxAbsSplitDiff = 0;   // max |splitScores − scaledScores|: float rounding only
    SoftmaxSummary unscaled;     // softmax(raw)
    SoftmaxSummary scaled;       // softmax(scaled)
    NaiveSoftmax naiveUnscaled;  // naive softmax of raw
    NaiveSoftmax naiveScaled;    // naive softmax of scaled
};
// q: d_k; K: S×d_k (rows are keys). Errors (InvalidArgument): empty q or K, K.cols() ≠ q.size()
// ("K: expected S×4 (d_k = 4), got 3×5"), non-finite entries.
Expected<ScalingRowDemo> scalingRowDemo(const Vector& q, const Matrix& K);

// Scores of all queries against all keys computed the split way: (Q/d^¼)·(K/d^¼)ᵀ with d = Q.cols(),
// and the usual way (Q·Kᵀ)/√d; rows are queries. Same value up to float rounding.
struct SplitFormComparison {
    Matrix split;     // T×S
    Matrix scaled;    // T×S
    float maxAbsDiff = 0.0f;
    float maxAbsValue = 0.0f;        // max |scaled|, to judge maxAbsDiff against
    float maxAbsWeightDiff = 0.0f;   // max |softmax(split) − softmax(scaled)| over rows: the toggle changes nothing
};
// Q: T×d, K: S×d. Errors (InvalidArgument): empty, or K.cols() ≠ Q.cols().
Expected<SplitFormComparison> compareSplitForm(const Matrix& Q, const Matrix& K);

// =====================================================================================================
// [4] Heads
// =====================================================================================================

// Which columns of W^Q/W^K/W^V and Q/K/V (Row layout; rows in Column layout) and which rows of W^O
// (columns in Column layout) belong to a head: [begin, end) ranges.
struct HeadBlock {
    int head = 0;
    int qBegin = 0, qEnd = 0;   // in W^Q and Q (width H·d_q)
    int kBegin = 0, kEnd = 0;   // in W^K and K (width H·d_k)
    int vBegin = 0, vEnd = 0;   // in W^V, V and concat (width H·d_v); also W^O's rows (Row layout)
};
std::vector<HeadBlock> headBlocks(const Dims& d);

// Seed 003's block-identity matrix W_h: width × (width/heads), the identity in rows
// [h·width/heads, (h+1)·width/heads) and zero elsewhere, so that Q·W_h = Q_h (head h's columns).
// Errors (InvalidArgument): width < 1, heads < 1, heads not dividing width, head outside [0, heads).
Expected<Matrix> headSelector(int width, int heads, int head);

// The contribution of each head to the final output: head h's output times its block of W^O,
//   contribution_h = O_h · W^O[rows of head h]   (Row layout; Column: W^O[:, cols of h] · O_h),
// so Σ_h contribution_h + b_o = output. Without W^O, contribution_h is concat with every other head's
// columns zero, and the sum is concat.
struct HeadContributions {
    std::vector<Matrix> perHead;   // H matrices, each shaped like result.output, in the result's layout
    Matrix sum;                    // Σ perHead (in double), shaped like the output
    Vector bias;                   // b_o (empty when none)
    float maxAbsDiff = 0.0f;       // max |sum + b_o − output|: float rounding only
    std::vector<float> norms;      // Frobenius norm of each contribution, for a bar chart
};
// `in` must be the input `result` was computed from (its Wo and bo are read).
// Errors (InvalidArgument): result without heads; Wo's shape not matching the result ("Wo: expected
// 6×4 (H·d_v × O), got 5×4").
Expected<HeadContributions> headContributions(const AttentionInput& in, const AttentionResult& result);

// One head vs h heads on the same input (seed 003): the single head scores with all of Q and K, so its
// raw scores are the sum of the per-head products, QKᵀ = Σ_h Q_h·K_hᵀ, and every output block uses the
// same weights; h heads keep the products apart (only the red diagonal terms of the seed's figure).
struct HeadsComparison {
    int heads = 1;
    AttentionResult oneHead;               // cfg with heads = 1
    AttentionResult multiHead;             // cfg with heads = h
    std::vector<Matrix> perHeadRawScores;  // H matrices T×S: Q_h·K_hᵀ (token rows, unscaled)
    Matrix oneHeadRawScores;               // T×S: Q·Kᵀ (unscaled)
    float maxAbsDecompositionDiff = 0.0f;  // max |Q·Kᵀ − Σ_h Q_h·K_hᵀ|: float rounding only
    float maxAbsOutputDiff = 0.0f;         // max |oneHead.output − multiHead.output|: how much heads change
};
// Errors (InvalidArgument): heads < 1, Additive score (no QKᵀ to decompose), and whatever compute()
// returns for either head count (e.g. heads not dividing a width).
Expected<HeadsComparison> compareHeadCounts(const AttentionInput& in, const AttentionConfig& cfg, int heads);

// =====================================================================================================
// [5] Additive attention
// =====================================================================================================

// score(q, k) = w_vᵀ · tanh(q·A_q + k·A_k) for one (query, key) pair of one head, term by term.
struct AdditiveBreakdown {
    int head = 0, query = 0, key = 0;
    Vector q;            // d_q
    Vector k;            // d_k (may differ from d_q)
    Vector qProjected;   // A: q·A_q
    Vector kProjected;   // A: k·A_k
    Vector hidden;       // A: q·A_q + k·A_k
    Vector activated;    // A: tanh(hidden)
    Vector products;     // A: w_v[a]·tanh(hidden[a])
    float score = 0.0f;        // Σ products (accumulated in double)
    float resultScore = 0.0f;  // the score core computed for this pair
};
// `in` must be the input `result` was computed from with Score::Additive.
// Errors (InvalidArgument): head/query/key out of range; A_q, A_k, w_v shapes not matching the head
// widths of the result.
Expected<AdditiveBreakdown> additiveBreakdown(const AttentionInput& in, const AttentionResult& result,
                                              int head, int query, int key);

// =====================================================================================================
// [6] Masks
// =====================================================================================================

// Masked softmax of a scores matrix (seed 004's masked_softmax, and the look-ahead / key-padding masks):
// row i is query i, column j key j. Masked entries take mask.fill before the softmax (so they are exactly
// 0 for fill = -inf, and 0 after float rounding for a large negative fill such as -1e6 — exp(-1e6) is 0 in
// double); the rest are renormalised. A row with every key masked and fill = -inf is all zeros.
struct MaskedSoftmax {
    MaskMatrix masked;               // T×S, 1 = masked
    Matrix weights;                  // T×S
    Vector rowSums;                  // T
    std::vector<int> fullyMaskedRows;
    int maskedNonZero = 0;           // masked entries whose weight is not exactly 0 (expected 0)
};
// scores: T×S (row orientation); mask.custom, when given, T×S. Errors (InvalidArgument): empty scores,
// non-finite scores, key padding not S long, valid lengths not 1 or T values or negative, custom mask
// not T×S, a fill that is NaN or +inf.
Expected<MaskedSoftmax> maskedSoftmax(const Matrix& scores, const MaskSpec& mask);

// =====================================================================================================
// [7] Image patches
// =====================================================================================================

// An 8-bit RGB image: `rgb` holds width·height·3 bytes, row by row from the top, R G B per pixel.
struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> rgb;
};

enum class PatchFit { Refuse, Crop };   // non-divisible sizes: refuse with a message, or crop right/bottom

// Tokens of a p×p patch grid (seed 003, "MSA of images"). Token t = py·cols + px (patches in raster
// order, left to right, top to bottom). Its 3·p² values are the patch's pixels in raster order with R, G,
// B interleaved: value (y·p + x)·3 + c is channel c of pixel (px·p + x, py·p + y), as byte/255 in [0, 1].
struct PatchGrid {
    int patch = 0;                 // p
    int cols = 0, rows = 0;        // patches across, down
    int usedWidth = 0, usedHeight = 0;  // the cropped image size (cols·p × rows·p)
    int originalWidth = 0, originalHeight = 0;
    Matrix tokens;                 // (rows·cols) × 3p², values in [0, 1]
};
// Errors (InvalidArgument): p < 1; empty image or rgb not width·height·3 bytes ("image: expected
// 12288 bytes (64×64×3), got 100"); with Refuse, width or height not divisible by p ("image: 65×64 is
// not divisible into 4×4 patches; crop to 64×64 or choose a p dividing both"); with Crop, p larger than
// the image; more than kMaxPatchTokens patches.
// 64×64 patches: the result keeps T×T scores, mask and weights, 64 MiB each in float at this size.
inline constexpr int kMaxPatchTokens = 4096;
Expected<PatchGrid> patchify(const RgbImage& image, int patch, PatchFit fit);

// The inverse of patchify for the used (cropped) area: tokens back to bytes (rounded). Round trip exact.
// Errors (InvalidArgument): tokens not (rows·cols) × 3p².
Expected<RgbImage> unpatchify(const PatchGrid& grid);

enum class PatchProjection { Identity, Random };
struct PatchSessionOptions {
    PatchProjection projection = PatchProjection::Identity;  // default: W = I, q = k = v = the patch
    bool centre = true;        // subtract 0.5 from every value so that dark and bright are ±; default on
    int dk = 16;               // Random only: projected width d_k = d_v; default 16
    std::uint64_t seed = 1;    // Random only: N(0, 1/d_k) entries (dot products kept in expectation), seeded; default 1
    int heads = 1;             // must divide the projected width; default 1
};
// A self-attention session whose tokens are the patches: X = tokens (minus 0.5 when centre), Wq = Wk =
// Wv = identity (3p² wide) or a seeded random projection to d_k, ScaledDot, Row layout. Token labels are
// "r<row>c<col>". Errors (InvalidArgument): dk < 1, heads < 1 or not dividing the width, an empty grid.
Expected<Session> patchSession(const PatchGrid& grid, const PatchSessionOptions& options);

// The weights of query patch `query` over all key patches, as a rows×cols grid (entry (r, c) is the
// weight of key patch r·cols + c). Errors (InvalidArgument): head/query out of range; the result's
// T or S not equal to rows·cols.
Expected<Matrix> patchWeightsGrid(const AttentionResult& result, const PatchGrid& grid, int head, int query);

} // namespace attn
