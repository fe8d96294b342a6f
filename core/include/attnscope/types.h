// Value types of the attnscope core.
//
// Dimension letters, used in every comment and message of the project:
//   T  number of queries (n_q)         S  number of keys/values (n_k)
//   H  number of heads                 D  head width: d_k for queries/keys, d_v for values
//   H_kv  number of key/value heads (grouped-query attention): query head h reads KV head h / (H / H_kv)
//   M  d_model (width of X and X_kv)   O  d_out (width of the output after W^O)
//   A  hidden width of the additive (Bahdanau) score
//
// Shapes below are for Layout::Row (tokens are rows). In Layout::Column every matrix is stored transposed
// (tokens are columns); vectors (biases, w_v, key padding, valid lengths) are the same in both layouts.
#pragma once

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attn {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
// A read-only matrix argument that takes a Matrix, a block of one, or a map with a row stride (a decoder's kept
// weights, attnscope/decoder.h HeadWeights) without a copy.
using MatrixCRef = Eigen::Ref<const Matrix, 0, Eigen::OuterStride<>>;
// A read-only view of rows with a stride (a decoder's kept weights: the corner of a buffer with room to grow).
using MatrixCMap = Eigen::Map<const Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
// 0/1 flags, row-major; 1 = masked.
using MaskMatrix = Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

enum class Layout { Row, Column };           // Row: softmax(QKᵀ·s)·V; Column: V·softmax(KᵀQ·s)
enum class Mode { Self, Cross, Direct };     // where Q, K, V come from
enum class Score { ScaledDot, Dot, Additive };
enum class Backend { Auto, Cpu, Cuda };      // Auto: CUDA when built and a device is present, else CPU
enum class CpuPath { Fast, Reference };      // Fast: Eigen; Reference: naive loops (the oracle)

const char* toString(Layout v);
const char* toString(Mode v);
const char* toString(Score v);
const char* toString(Backend v);

// Masks, all optional and combinable (a key is masked if any of them masks it).
struct MaskSpec {
    bool causal = false;                   // key j > query i is masked (also when T ≠ S); default off
    std::vector<std::uint8_t> keyPadding;  // empty = none, else S flags, 1 = padded (masked) key
    std::vector<int> validLens;            // empty = none; 1 value for all queries or T values; keys ≥ len masked
    MaskMatrix custom;                     // empty = none; Row: T×S, Column: S×T; 1 = masked
    float fill = -std::numeric_limits<float>::infinity(); // score given to masked entries; -inf default

    bool any() const { return causal || !keyPadding.empty() || !validLens.empty() || custom.size() > 0; }
};

// Bahdanau score: score(q, k) = w_vᵀ · tanh(q·A_q + k·A_k), applied per head on the head's q and k.
struct AdditiveParams {
    Matrix Aq;  // Row: d_q×A (d_q = head width of queries); Column: A×d_q
    Matrix Ak;  // Row: d_k×A; Column: A×d_k
    Vector wv;  // A
};

// Everything that goes into one attention computation. Which fields are needed depends on the Mode:
//   Self:   X, Wq, Wk, Wv                Cross: X, Xkv, Wq, Wk, Wv           Direct: Q, K, V
// Row-layout shapes (Column stores each matrix transposed), with H_kv = AttentionConfig::kvHeads (H when 0):
//   X T×M, Xkv S×M, Wq M×(H·d_k), Wk M×(H_kv·d_k), Wv M×(H_kv·d_v), Wo (H·d_v)×O (optional, empty = none)
//   bq H·d_k, bk H_kv·d_k, bv H_kv·d_v, bo O (each optional, empty = none)
//   Direct: Q T×(H·d_q), K S×(H_kv·d_k), V S×(H_kv·d_v); d_q may differ from d_k only with Score::Additive.
struct AttentionInput {
    Matrix X, Xkv;
    Matrix Wq, Wk, Wv, Wo;
    Vector bq, bk, bv, bo;
    Matrix Q, K, V;
    AdditiveParams additive;
    MaskSpec mask;
};

struct AttentionConfig {
    Layout layout = Layout::Row;          // default Row
    Mode mode = Mode::Self;               // default Self
    int heads = 1;                        // H ≥ 1; must divide the query width; default 1
    // H_kv, the key/value heads (grouped-query attention): 1 ≤ H_kv, H_kv divides H, and query head h uses KV
    // head h / (H / H_kv). H_kv = H is multi-head attention, H_kv = 1 multi-query. 0 = H (the default).
    int kvHeads = 0;
    Score score = Score::ScaledDot;       // default scaled dot product
    std::optional<float> scale;           // overrides the ScaledDot factor 1/√d_k; default none
    // > 0: every score becomes softcap·tanh(score / softcap) after scaling, before the mask (Gemma 2's attention
    // soft-cap); the result's scores are the capped ones. ScaledDot and Dot only; CPU only (the CUDA backend
    // answers Unsupported, and Auto computes on the CPU). Default 0 (none).
    float softcap = 0;
    Backend backend = Backend::Cpu;       // default Cpu
    CpuPath cpuPath = CpuPath::Fast;      // default Fast (Eigen)
    std::size_t memoryBudgetBytes = 0;    // refuse problems needing more; 0 = half the machine's RAM
    // Fast CPU path: when the previous result in `out` came from the same config and sizes, update only what
    // the changed input cells reach (see compute() in attention.h); false = always recompute all. Default true.
    bool incremental = true;
    // Fast CPU path: don't compute the scores of keys the causal mask hides (key j > query i), about half of
    // QKᵀ; those entries of HeadResult::scores are then 0 (their weights are 0 either way). For views that
    // show masked cells as masked whatever their score. Default false (every score computed).
    bool skipCausalMaskedScores = false;
    // CUDA backend: keep every head's scores and weights in device memory only, for attn::DeviceMaps
    // (attnscope/device_maps.h) to read tiles and pooled overviews from; nothing T×S crosses to the host and the
    // host does no per-cell work on the maps. The result then has Q, K, V, concat, output, the per-head Q/K/V/output
    // and fullyMaskedQueries as usual, but every HeadResult's scores, weights and masked are empty, and
    // AttentionResult::mapsOnDevice is true. Ignored by the CPU backend (its maps are in host memory anyway), also
    // when Backend::Auto falls back to it. Default false (every map downloaded into the result).
    bool mapsOnDevice = false;
};

// One head's intermediate results, in the session's layout.
struct HeadResult {
    Matrix Q, K, V;      // Row: T×d_q, S×d_k, S×d_v; Column: transposed. K, V: this query head's KV head
    Matrix scores;       // before masking, after scaling. Row: T×S (query i, key j); Column: S×T (KᵀQ).
                         // Entries hidden by the causal mask are 0 when AttentionConfig::skipCausalMaskedScores
                         // let the fast CPU path skip them.
    MaskMatrix masked;   // same shape as scores; 1 where masked
    Matrix weights;      // softmax of the masked scores along keys; same shape
    Matrix output;       // Row: T×d_v; Column: d_v×T
    std::vector<int> fullyMaskedQueries;  // queries whose keys were all masked with fill -inf
};

// Wall-clock time per phase of the last compute, in milliseconds (0 where a phase did not run).
struct PhaseTimings {
    double projections = 0;  // X·W (+ b) → Q, K, V
    double scores = 0;       // q·k (or the additive score) and scaling
    double softmax = 0;      // masking + softmax
    double pv = 0;           // weights · V per head
    double output = 0;       // concat · Wo (+ bo)
    double copies = 0;       // host↔device transfers (GPU backends): the sum of copyParts
    struct CopyParts {
        double upload = 0;    // inputs and weights to the device
        double download = 0;  // Q, K, V, the concat and the output (tokens × widths) back to the host
        double maps = 0;      // every head's scores and weights and the mask (0 when the maps stay on the device)
        double host = 0;      // host work on what came back: each head's views of Q, K, V, output, and its mask
    } copyParts;
    double checks = 0;       // the finiteness check of a device result, run on the device (GPU backends)
    double total = 0;        // the whole compute() call, validation included
    // Phases run by a thread team (the CPU heads) report the team's summed thread time divided by its size,
    // i.e. about the wall time the phase took.
};

// What the fast CPU path keeps between two computes into the same result so that the next one can update
// only what an edit reaches: a snapshot of the input and config, per-row softmax statistics. Opaque.
struct IncrementalState;

// Owner of the IncrementalState. A copied result starts without one (its next compute is a full one), so two
// results never share a snapshot.
class IncrementalCache {
public:
    IncrementalCache() = default;
    IncrementalCache(const IncrementalCache&) {}
    IncrementalCache& operator=(const IncrementalCache&)
    {
        state.reset();
        return *this;
    }
    IncrementalCache(IncrementalCache&&) noexcept = default;
    IncrementalCache& operator=(IncrementalCache&&) noexcept = default;
    ~IncrementalCache() = default;

    std::shared_ptr<IncrementalState> state;
};

struct AttentionResult {
    Layout layout = Layout::Row;
    float scale = 1.0f;           // the factor applied to q·k (1 for Dot and Additive)
    Matrix Q, K, V;               // full projections (all heads side by side): Row T×H·d_q, S×H_kv·d_k, S×H_kv·d_v
    std::vector<HeadResult> heads;
    Matrix concat;                // Row: T×H·d_v; Column: H·d_v×T
    Matrix output;                // concat·Wo + bo when Wo is given, else concat
    std::vector<std::string> warnings;
    Backend backend = Backend::Cpu;  // what actually computed it
    PhaseTimings timings;
    // Identity of this result in the CUDA backend's device buffers, which keep the last result until the next
    // compute on the device starts (see attnscope/device_interop.h); 0 = not on the device (CPU result).
    std::uint64_t deviceGeneration = 0;
    // True when the per-head scores and weights were left on the device (AttentionConfig::mapsOnDevice): read them
    // through attn::DeviceMaps while deviceResultCurrent(deviceGeneration); the HeadResults hold no maps.
    bool mapsOnDevice = false;
    // True when the last compute() updated this result incrementally (only what the changed input cells
    // reach), false when it computed everything.
    bool incremental = false;
    IncrementalCache cache;  // fast CPU path only; see AttentionConfig::incremental
};

} // namespace attn
