// Decoder language models (GPT-2, and the llama family: Llama, Mistral, Qwen2, SmolLM2) run through the attention
// core, opened from a GGUF file or a Hugging Face directory.
//
// Part of attnscope_model (core/model/), documented in docs/model.md ("Decoder models"). Seams (STYLE.md §8):
//   weight formats  core/model/weight_source.*: safetensors (single or sharded) and GGUF, one interface;
//   families        core/model/family_llama.cpp, core/model/family_gpt2.cpp: config, tensor names, one layer's
//                   forward, each block a function named as the checkpoint names it;
//   tokenizers      attnscope/bpe_tokenizer.h (byte-level BPE from tokenizer.json or GGUF metadata).
// Shapes: n tokens, M = d_model, H query heads, H_kv key/value heads (H_kv divides H), D = head width,
// F = feed-forward width, V = vocabulary, L layers. Weights are in the attention core's convention (x·W, W is
// in×out: the transpose of a PyTorch Linear weight). From a GGUF file the projections, the feed-forward and the
// embeddings stay in the file's format (attnscope/weight_matrix.h: memory-mapped, dequantized inside the products);
// W^O, biases and norms are float32 (the window edits W^O, direct logit attribution reads it).
#pragma once

#include "attnscope/attention_maps.h"
#include "attnscope/text_tokenizer.h"  // BpeTokenizer or SpmTokenizer
#include "attnscope/lazy_attention.h"
#include "attnscope/status.h"
#include "attnscope/tokenizer.h"
#include "attnscope/types.h"
#include "attnscope/weight_matrix.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attn {

// The families (docs/model.md, "Families"): which file of core/model/ reads the checkpoint. The forward itself
// reads the configuration's data below (norm kind, QK-norm, post-norms, partial rotary, per-layer window and RoPE
// base, soft-caps, parallel residual, feed-forward kind), never the family's name.
enum class DecoderFamily { Llama, Gpt2, Gemma, GptNeoX, Phi3, Olmo2 };
const char* toString(DecoderFamily f);

// The architectures this build opens, for messages: "gemma2, gemma3, gpt2, gptneox, llama, mistral, olmo2, phi3,
// qwen2, qwen3".
const char* supportedDecoderArchitectures();

enum class NormKind { Rms, Layer };          // RMSNorm (x / rms · γ) or LayerNorm ((x − μ) / σ · γ + β)
enum class QkNorm { None, PerHead, Whole };  // RMSNorm of Q and K: per head over D (Gemma 3, Qwen3) or over the
                                             // whole projection, H·D and H_kv·D (OLMo 2)
enum class FfnKind {
    SwiGlu,     // down(SiLU(gate(x)) ⊙ up(x)): llama, qwen, phi3, olmo2
    GeGluTanh,  // down(GELU_tanh(gate(x)) ⊙ up(x)): gemma
    GeluTanh,   // down(GELU_tanh(up(x) + b) + b): gpt2 (its c_fc / c_proj)
    GeluErf,    // down(GELU(up(x) + b) + b), GELU by erf: gptneox
};
const char* toString(FfnKind f);

// What differs from layer to layer (Gemma 2/3: sliding and global layers).
struct DecoderLayerSpec {
    int window = 0;            // > 0: key j is hidden from query i when i − j ≥ window (a sliding-window layer)
    float ropeTheta = 10000;   // RoPE base of this layer
    float ropeScale = 1;       // linear RoPE scaling: positions divided by this (Gemma 3 4B+ global layers)
};

struct DecoderConfig {
    std::string architecture;     // config.json model_type / GGUF general.architecture (supportedDecoderArchitectures)
    DecoderFamily family = DecoderFamily::Llama;
    int layers = 0;               // L
    int heads = 0;                // H
    int kvHeads = 0;              // H_kv (= H for GPT-2)
    int hidden = 0;               // M
    int headDim = 0;              // D
    int intermediate = 0;         // F
    int vocab = 0;                // V
    int maxPositions = 0;         // the context the model was trained for; longer texts are truncated
    float normEps = 1e-5f;        // RMSNorm (llama family) or LayerNorm (GPT-2) epsilon
    float ropeTheta = 10000.0f;   // llama family
    bool tiedEmbeddings = false;  // the LM head is the token embedding matrix
    int slidingWindow = 0;        // Mistral's sliding window (0 = none): keys more than this far back are masked;
                                  // with layerSpecs, the window of its sliding layers (for display)
    // Llama 3's RoPE frequency scaling: per pair i, inv_freq[i] is divided by ropeFreqFactors[i] (empty = none).
    std::vector<float> ropeFreqFactors;
    // LongRoPE (Phi-3-mini-128k, Phi-3.5, Phi-4-mini: rope_scaling "longrope", GGUF rope_factors_short/long): two
    // sets of per-pair divisors like ropeFreqFactors, the short set for a forward over at most ropeOriginalContext
    // positions and the long set past it (Hugging Face's rule: its largest position + 1), and cos and sin times
    // ropeAttnFactor. Empty = none.
    std::vector<float> ropeShortFactors, ropeLongFactors;
    int ropeOriginalContext = 0;  // original_max_position_embeddings (the pretraining context)
    float ropeAttnFactor = 1;     // LongRoPE's attention factor: cos and sin multiplied by it (default 1)

    // The block, as data (STYLE.md §8): every path (dense, appended, lazy, scans, maps) reads these.
    NormKind norm = NormKind::Rms;  // of every norm of the model
    bool preNorms = true;           // norm before attention and feed-forward (OLMo 2: none)
    bool postNorms = false;         // norm of each sublayer's output before the residual (Gemma 2/3, OLMo 2)
    QkNorm qkNorm = QkNorm::None;   // RMSNorm of Q and K after the projections, before RoPE
    bool rope = true;               // GPT-2: learned positions instead
    int ropeDims = 0;               // rotated dimensions of each head (partial rotary; 0 = all D)
    float embedScale = 1;           // the token embedding times this (Gemma: √M)
    float attnScale = 0;            // the scores' factor (0 = 1/√D; Gemma: query_pre_attn_scalar^−½)
    float attnSoftcap = 0;          // > 0: scores = cap·tanh(scores / cap) before the mask (Gemma 2)
    float finalSoftcap = 0;         // > 0: logits = cap·tanh(logits / cap) (Gemma 2)
    bool parallelResidual = false;  // out = x + attention(norm₁ x) + feed-forward(norm₂ x) (GPT-NeoX)
    FfnKind ffn = FfnKind::SwiGlu;
    // Per layer (L entries), or empty: every layer has slidingWindow and ropeTheta.
    std::vector<DecoderLayerSpec> layerSpecs;

    int windowOf(int layer) const
    {
        return layerSpecs.empty() ? slidingWindow : layerSpecs[static_cast<std::size_t>(layer)].window;
    }
    float ropeThetaOf(int layer) const
    {
        return layerSpecs.empty() ? ropeTheta : layerSpecs[static_cast<std::size_t>(layer)].ropeTheta;
    }
    float ropeScaleOf(int layer) const
    {
        return layerSpecs.empty() ? 1.0f : layerSpecs[static_cast<std::size_t>(layer)].ropeScale;
    }
    bool longRope() const { return !ropeLongFactors.empty(); }
    // The per-pair divisors of a forward whose largest position is `positions` − 1: LongRoPE's set for that length,
    // or ropeFreqFactors.
    const std::vector<float>& ropeFactorsFor(long positions) const
    {
        if (!longRope()) return ropeFreqFactors;
        return positions > ropeOriginalContext ? ropeLongFactors : ropeShortFactors;
    }
    bool anyWindow() const;           // some layer has a sliding window
    // The scores' factor: attnScale, or 1/√D. (Inline: core/cuda's decoder uses it too, without core/model.)
    float scoreScale() const { return attnScale > 0 ? attnScale : 1.0f / std::sqrt(static_cast<float>(headDim)); }
    int rotaryDims() const { return rope ? (ropeDims > 0 ? ropeDims : headDim) : 0; }
    bool gatedFfn() const { return ffn == FfnKind::SwiGlu || ffn == FfnKind::GeGluTanh; }
};

// One decoder block. Llama family: RMSNorm (gamma only), projections (biases only in Qwen2), SwiGLU feed-forward.
// GPT-2: LayerNorm (gamma, beta), projections and W^O with biases, GELU (tanh) feed-forward with biases.
// Other families add: QK-norm (Gemma 3, Qwen3: D each; OLMo 2: H·D and H_kv·D), post-norms (Gemma 2/3, OLMo 2),
// LayerNorm biases (GPT-NeoX), fused projections split into views at load (GPT-NeoX, Phi-3).
struct DecoderLayer {
    Vector attnNormGamma, attnNormBeta;  // M (beta empty for RMSNorm; both empty without pre-norms)
    WeightMatrix Wq, Wk, Wv;             // M×H·D, M×H_kv·D, M×H_kv·D
    Vector bq, bk, bv;                   // H·D, H_kv·D, H_kv·D, or empty
    Vector qNormGamma, kNormGamma;       // QK-norm: D each (per head) or H·D, H_kv·D (whole); empty = none
    WeightMatrix Wo;                     // H·D×M (a window edit makes it dense float32)
    Vector bo;                           // M or empty
    Vector postAttnNormGamma;            // M: the attention's output normed before the residual; empty = none
    Vector ffnNormGamma, ffnNormBeta;    // M (beta empty for RMSNorm)
    WeightMatrix Wgate, Wup;             // gated feed-forward: M×F each
    WeightMatrix Wdown;                  // gated feed-forward: F×M
    WeightMatrix Wfc;  Vector bfc;       // ungated (gpt2, gptneox): M×F, F
    WeightMatrix Wproj; Vector bproj;    // ungated: F×M, M
    Vector postFfnNormGamma;             // M: the feed-forward's output normed before the residual; empty = none
};

// A model's weights on the GPU (the CUDA backend's decoder forward, core/cuda/decoder_device.h): dequantized to
// float32 and uploaded at the first run on the device, freed with the model. A copy of a model starts without
// them (its weights may be edited apart from the original's); a move takes them along. Opaque to callers.
struct DecoderDeviceCache {
    std::shared_ptr<void> weights;           // attn::cuda::DecoderWeights
    std::vector<std::uint64_t> woPrints;     // per layer: W^O and b^O as uploaded (see decoder_device_run.cpp)
    DecoderDeviceCache() = default;
    DecoderDeviceCache(const DecoderDeviceCache&) {}
    DecoderDeviceCache& operator=(const DecoderDeviceCache&)
    {
        weights.reset();
        woPrints.clear();
        return *this;
    }
    DecoderDeviceCache(DecoderDeviceCache&&) noexcept = default;
    DecoderDeviceCache& operator=(DecoderDeviceCache&&) noexcept = default;
};

struct DecoderModel {
    std::string name;            // file or directory name, e.g. "SmolLM2-135M-Instruct.Q4_1.gguf"
    std::string path;            // as opened
    std::string format;          // "gguf" or "safetensors"
    DecoderConfig config;
    TextTokenizer tokenizer;     // byte-level BPE or SentencePiece BPE, as the model's files say
    std::string chatTemplate;    // the model's Jinja chat template ("" when it has none)
    // As weights x·E (in M, out V): column id is token id's embedding (WeightMatrix::column), a product with it
    // is the unembedding.
    WeightMatrix tokenEmbeddings;
    Matrix positionEmbeddings;   // GPT-2: maxPositions×M; empty for the llama family (RoPE)
    Vector finalNormGamma, finalNormBeta;
    WeightMatrix lmHead;         // M×V as x·W, empty when tied (tokenEmbeddings is the unembedding)
    std::vector<DecoderLayer> layers;
    DecoderDeviceCache device;   // the weights on the GPU, when a run used it

    const WeightMatrix& unembedding() const { return !lmHead.empty() ? lmHead : tokenEmbeddings; }
    // Float32 bytes of weights the model holds in memory (dense matrices, biases, norms); a GGUF's quantized
    // tensors are not counted (they are the file's mapping).
    std::size_t denseWeightBytes() const;
    // Bytes of weights one appended token streams: every matrix once, in its format (views: the file's bytes;
    // dense: float32), and the embedding row.
    std::size_t streamedWeightBytes() const;
};

struct DecoderLoadOptions {
    // Dequantize every GGUF tensor to float32 at load (the path before issue 18: the oracle of the quantized
    // products in the parity tests; about 4–8× the file's size in memory).
    bool dequantize = false;
};

// Parses a Hugging Face config.json of a decoder (a model_type of supportedDecoderArchitectures; `file` names it in
// messages). Unsupported for another model_type, InvalidArgument naming a missing or out-of-range field.
Expected<DecoderConfig> parseDecoderConfig(const std::string& text, const std::string& file = "config.json");

// True when `path` is something loadDecoder opens: a .gguf file, or a directory whose config.json names a decoder
// model_type (a BERT directory is not one).
bool isDecoderModelPath(const std::string& path);

// Loads a GGUF file or a Hugging Face directory (config.json + model.safetensors or the sharded
// model-0000k-of-0000n.safetensors with model.safetensors.index.json + tokenizer.json; the chat template from
// tokenizer_config.json). Errors: IoError naming a missing file, Unsupported naming an architecture, tensor type or
// tokenizer this build does not handle (and what it does), ParseError for corrupt files, InvalidArgument for a
// tensor missing or whose shape contradicts the metadata ("blk.3.attn_k.weight: expected 192×576 (H_kv·D ×
// d_model), got 576×576").
// Options: see DecoderLoadOptions (default: a GGUF's tensors stay in their format).
Expected<DecoderModel> loadDecoder(const std::string& path, const DecoderLoadOptions& options = {});

// The text as token ids: the tokenizer's own special tokens (a BOS when the model asks for one); with `chat`, the
// text is first wrapped as one user turn by the model's chat template (ChatML or Llama 3; another → Unsupported).
Expected<Encoding> encodeForDecoder(const DecoderModel& model, const std::string& text, bool chat);

// Buffers of a block's feed-forward (internal; kept in DecoderRun::Scratch).
struct DecoderBlockScratch { Matrix normed, ffnA, ffnB; };

// One head's softmax weights over a run's n tokens (queries × keys, n×n), kept in a buffer with room for more tokens:
// the top-left n×n corner of a row-major capacity × capacity buffer. The kept rows are 0 to the right of the corner
// (those keys are in their future), so an appended token writes its own row only; the kept rows stay where they are. A
// plain n×n matrix moves every kept row to the wider stride instead: 270 maps of 4 MB per token appended to a
// 1024-token text, 120 of the 146 ms such an append took. The capacity grows by an eighth (at least 32 tokens) when an
// append needs more: one copy of the kept map per n/8 appended tokens, and up to (9/8)² of the n² cells held (more
// below 256 tokens, where 32 spare rows are more than an eighth).
class HeadWeights {
public:
    using View = MatrixCMap;

    HeadWeights() = default;
    // Takes an n×n map as it is (capacity n, nothing copied); a map that is not square is a programming error
    // (asserted).
    explicit HeadWeights(Matrix square);

    Eigen::Index size() const { return m_n; }                 // n
    Eigen::Index capacity() const { return m_buf.rows(); }
    View view() const { return View(m_buf.data(), m_n, m_n, Eigen::OuterStride<>(m_buf.cols())); }
    float operator()(Eigen::Index query, Eigen::Index key) const { return m_buf(query, key); }
    Matrix toMatrix() const { return view(); }                 // a contiguous n×n copy

    // Appends m positions: `rows` (m × (n+m)) are the new queries' weights over every key.
    void append(const Matrix& rows);
    // Keeps the first t ≤ n positions (the buffer and its capacity stay).
    void truncate(Eigen::Index t);
    // Gives the buffer back when it is exactly n×n (capacity n), for a recompute to reuse; empty otherwise. Leaves
    // this empty.
    Matrix release();

private:
    // capacity × capacity, row-major; rows 0…n−1 are 0 right of the corner, rows n… unspecified
    Matrix m_buf;
    Eigen::Index m_n = 0;
};

// How a lazy run's attention core runs on the GPU (issue 34; no effect on the CPU or on a dense run, which keeps its
// maps and so takes the products). The same results within float rounding either way.
enum class DeviceAttention {
    // Per shape of attention (queries and keys to the next power of two, heads, head width, window), the faster of
    // the two below, timed on this GPU the first time that shape comes (deviceAttentionChoices() lists them): which one
    // wins depends on the GPU's FP32 rate against its memory bandwidth. Shapes of fewer than 1024 keys take the products.
    Auto,
    Products,  // cuBLAS products over written scores, and a softmax kernel between them
    Fused,     // one kernel, an online softmax over tiles of keys: no score written, nor allocated (heads up to 256 wide)
};

// One forward, everything kept for the views.
struct DecoderRun {
    Encoding encoding;                          // ids and each token's decoded text
    std::vector<std::pair<int, int>> ablated;   // (layer, query head) pairs whose context is zeroed before W^O
    std::vector<Matrix> hidden;                 // L+1 residual streams n×M: hidden[l] enters layer l, hidden[L]
                                                // leaves the last layer (before the final norm)
    std::vector<AttentionResult> attention;     // L results: Q, K, V (after RoPE; H·D, H_kv·D and H_kv·D wide) and
                                                // concat (the heads' contexts); `heads` has H entries, empty (a
                                                // head's Q, K, V and context are columns of the layer's, its weights
                                                // are in `weights`, its scores and mask come from decoderMaps()). No
                                                // output: concat·W^O + b^O is in the residual.
    std::vector<std::vector<HeadWeights>> weights;  // dense run: [layer][query head], n×n each; lazy: empty
    Matrix finalHidden;                         // n×M: hidden[L] after the final norm (what the LM head reads)
    Vector lastLogits;                          // V: the last position's logits
    std::vector<float> surprise;                // n: −log p(token i | tokens < i) in nats; NaN for token 0
    bool surpriseStale = false;                 // surprise predates the last recompute (SurpriseUpdate::Deferred)
                                                // until updateDecoderSurprise
    std::vector<std::string> warnings;          // truncation, backend fallback
    Backend backend = Backend::Cpu;             // where the last forward, recompute or append ran its layers: Cuda =
                                                // every layer on the GPU (the device forward), Cpu otherwise
    // The last device call's phases in ms (a forward, recompute or append; CUDA events; zero after a CPU run): the
    // embedding (or the residual stream uploaded; an append's kept K and V when it uploads them), the layers, the
    // predictions, the copies of what the run keeps back to the host; the call's wall time; the bytes copied back
    // and up; and the bytes of the call's activation buffers on the device.
    struct DeviceTimings {
        double embed = 0, layers = 0, head = 0, copies = 0, total = 0, bytesBack = 0, bytesUp = 0, deviceBytes = 0;
    } deviceTimings;
    // The device call whose buffers hold every layer's K and V of this run (a forward, a recompute that kept the
    // layers below, an append): while no other call on the device came since, an append there reads them in place
    // instead of uploading them. 0: none (a computation on the CPU clears it).
    std::uint64_t deviceKVGeneration = 0;
    // A lazy run (DecoderOptions::lazy): no n×n map exists, and attention[l] holds nothing (no Q, K, V, heads,
    // context or output: the interpretability scans and the chain view need a dense run); lazyLayers[l] holds Q
    // and K as the scores use them, V, and the softmax's log-sum-exp, from which decoderMaps() rebuilds any tile
    // of any head (Q, K and V in buffers with spare rows, for appended tokens).
    bool lazy = false;
    DeviceAttention deviceAttention = DeviceAttention::Auto;  // DecoderOptions'; its recomputes and appends on the GPU too
    std::vector<std::shared_ptr<const LazyLayer>> lazyLayers;
    // The lazy layers whose Q, K and log-sum-exp the GPU still holds (a lazy run of the CUDA backend): the device
    // call's generation and, per layer, the layer it made. decoderMaps() reads their tiles and overviews there (only
    // those cross the bus); a layer since replaced (a CPU recompute, an append), or any layer once a later call on
    // the device started, is read on the host. 0 / empty: none.
    std::uint64_t deviceMapsGeneration = 0;
    std::vector<std::weak_ptr<const LazyLayer>> deviceLayers;
    // Called after each layer of a forward, recompute or append with (layers done, layers to do); returning false
    // stops it with StatusCode::Cancelled, leaving the run incomplete (run it again). Empty = none. A long text's
    // forward takes tens of seconds: the window shows its progress and offers to cancel it.
    std::function<bool(int done, int total)> onLayer;
    // A layer whose attention inputs are given instead of computed (an edit of Q, K or V in the chain view, where
    // RoPE sits between W^Q/W^K and the scores): layer `layer` uses these Q (n×H·D, after RoPE), K and V (n×H_kv·D)
    // in every recompute until cleared (layer −1). Appending tokens clears it.
    struct PinnedQKV {
        int layer = -1;
        Matrix Q, K, V;
    } pinned;
    // Buffers of the forward, kept so that the next forward or recompute of the same length allocates nothing.
    struct Scratch {
        AttentionInput in;                      // one layer's Q, K, V and mask for the attention core
        Matrix normed;                          // the attention's normed input
        DecoderBlockScratch block;              // the feed-forward's buffers
    } scratch;
};

struct DecoderOptions {
    std::vector<std::pair<int, int>> ablate;    // (layer, query head) pairs; default none
    // Cpu: every layer on the CPU (default). Cuda: every layer on the GPU (the device forward: weights resident,
    // cuBLAS and core/cuda's kernels; Unavailable without a device, never a silent fallback). Auto: the GPU when
    // one is usable, else the CPU; a device failure falls back to the CPU with a warning in the run.
    Backend backend = Backend::Cpu;
    // Long texts (issue 18): attention in key blocks with an online softmax (attnscope/lazy_attention.h), keeping
    // per layer O(n) instead of the n×n scores and weights of every head. The outputs equal the dense path's
    // within float rounding; the maps are read through decoderMaps(). On the CPU, or on the GPU (backend Cuda or
    // Auto with a device: every layer's Q, K, V and log-sum-exp come back, no map). Default off (dense).
    bool lazy = false;
    // A lazy run on the GPU: each layer's attention core by products, in one fused kernel, or the faster of the two
    // on this GPU (DeviceAttention). `model --bench --backend cuda` times all three side by side.
    DeviceAttention deviceAttention = DeviceAttention::Auto;
};

// The memory a run over n tokens keeps, in bytes: the residual streams, and per layer the dense results (Q, K, V,
// the contexts, per head its n×n weights) or, lazy, Q, K, V and the log-sum-exp. A forward's maps are n×n; a
// run grown by appended tokens holds up to (9/8)² of that in its maps' spare room (HeadWeights).
double decoderRunBytes(const DecoderConfig& c, long n, bool lazy);
// The largest n whose run fits `budgetBytes` (0 when none does).
long decoderLargestFit(const DecoderConfig& c, double budgetBytes, bool lazy);

// The run's maps through the tile seam: LazyMaps for a lazy run; for a dense one, run.weights' views, the scores
// from run.attention's Q and K, and the model's mask rule (causal, and the sliding window). Valid while `run`
// lives and is not recomputed or appended to.
// With onDevice false, a lazy run's maps are read on the host even where the device still holds its layers (the
// oracle of the device's reads, and the bench's comparison).
std::shared_ptr<const AttentionMaps> decoderMaps(const DecoderModel& model, const DecoderRun& run, bool onDevice = true);
// How many tiles and overviews of maps that decoderMaps() made were read on the device (DecoderRun::deviceLayers);
// 0 for any other maps.
long decoderMapsDeviceReads(const AttentionMaps& maps);

// What DeviceAttention::Auto timed on this process's GPU so far, one entry per shape of attention: queries and keys
// up to these powers of two, the model's heads, key/value heads and head width, the layer's window (0: none), the
// two kernels' times on the one layer timed (ms, the second of two runs each), and the choice (the fused kernel only
// under 0.9 of the products' time). Empty without a GPU, in a build without CUDA, or before a lazy run of at least
// 1024 keys there.
struct DeviceAttentionChoice {
    int queries = 0, keys = 0, heads = 0, kvHeads = 0, headDim = 0, window = 0;
    double productsMs = 0, fusedMs = 0;
    bool fused = false;
};
std::vector<DeviceAttentionChoice> deviceAttentionChoices();
// Forgets them: the next lazy run of each shape times both again (e.g. once the GPU is no longer shared).
void forgetDeviceAttentionChoices();

// Runs the model over `ids` (at most config.maxPositions: longer inputs are truncated with a warning).
// InvalidArgument for an empty input, an id outside 0..V−1, or an ablation outside L×H.
Status runDecoder(DecoderModel& model, const std::vector<int>& ids, const DecoderOptions& options, DecoderRun& run);
Expected<DecoderRun> runDecoder(DecoderModel& model, const std::vector<int>& ids, const DecoderOptions& options = {});

// What a recompute brings up to date besides the last position's logits (run.lastLogits, the new predictions).
enum class SurpriseUpdate {
    Now,       // every position's surprise: the LM head at every position (about a layer's time at 128 tokens)
    Deferred,  // none: run.surpriseStale is set until updateDecoderSurprise (the window shows the predictions first)
};

// Recomputes layers fromLayer…L−1 and the predictions after an edit of that layer's weights or of run.ablated;
// the surprise now or, Deferred, in a second phase (updateDecoderSurprise). The same results as a whole forward
// either way once both phases ran.
Status recomputeDecoderFrom(DecoderModel& model, int fromLayer, DecoderRun& run, Backend backend = Backend::Cpu,
                            SurpriseUpdate surprise = SurpriseUpdate::Now);

// The second phase of a recompute with SurpriseUpdate::Deferred: every position's surprise from the run's final
// hidden states (nothing when run.surpriseStale is false). InvalidArgument for a run whose final norm is not of
// its text's length.
Status updateDecoderSurprise(const DecoderModel& model, DecoderRun& run);

// Appends tokens to a run: only the new positions are computed (every layer's K and V of the old ones are kept
// in run.attention), the maps gain rows and columns; the result equals a whole forward over the longer input.
Status appendTokens(DecoderModel& model, const std::vector<int>& ids, DecoderRun& run, Backend backend = Backend::Cpu);

// Runs `ids` reusing what `run` already holds: the positions before the first token that differs are kept and only
// the rest are computed (truncate, then append), when the model, ablations and pin are the same as the run's (the
// caller says so with `sameModel`: no weight edited since the run); otherwise a whole forward. The result equals a
// whole forward either way. `reused` (optional) receives how many positions were kept.
Status rerunDecoder(DecoderModel& model, const std::vector<int>& ids, const DecoderOptions& options, bool sameModel,
                    DecoderRun& run, int* reused = nullptr);

// The logits at `position` of a run (the last position's are run.lastLogits); InvalidArgument outside 0..n−1.
Expected<Vector> logitsAt(const DecoderModel& model, const DecoderRun& run, int position);

struct TokenProbability {
    int id = 0;
    std::string token;   // decoded text, e.g. " Paris"
    float logit = 0;
    float p = 0;         // softmax(logits / temperature)
};

// The k most probable next tokens (probabilities at `temperature` > 0; 1 = the model's own distribution).
std::vector<TokenProbability> topTokens(const DecoderModel& model, const Vector& logits, int k, float temperature = 1.0f);

// Layer `layer` of a run as the attention core computed it, as a session's input (the chain view of a decoder
// layer): Direct mode, Q (n×H·D, after RoPE), K and V (n×H_kv·D), the causal mask (and Mistral's window), W^O
// and b^O; `cfg` gets heads H and kvHeads H_kv. InvalidArgument for a layer outside 0..L−1.
Status decoderLayerInput(const DecoderModel& model, const DecoderRun& run, int layer, AttentionInput& in,
                         AttentionConfig& cfg);

// log softmax(logits)[id], in nats.
float logProbability(const Vector& logits, int id);

// A token drawn from softmax(logits / temperature) by a uniform number made from `seed` (splitmix64): the same
// seed draws the same token on every machine. A temperature ≤ 0 (or not finite) takes the most probable
// token (the lowest id of equal maxima); −1 for empty logits.
int sampleToken(const Vector& logits, float temperature, std::uint64_t seed);

} // namespace attn
