// A decoder's forward on the GPU (issue 34): every layer of every family, the weights resident on the device.
// Internal interface between core/model (core/model/decoder_device_run.cpp, which owns the DecoderRun contract) and
// attnscope_cuda. Plain C++: no CUDA types, so core/model's files include it without nvcc; compiled in only with
// ATTNSCOPE_WITH_CUDA. The host side is core/cuda/decoder_device.cpp, the kernels decoder_kernels.cuh.
//
// The device path mirrors core/model/blocks.cpp function by function (STYLE.md §9): the same configuration data
// (DecoderConfig: norm kind, pre/post-norms, QK-norm, partial rotary, per-layer window and RoPE base, soft-caps,
// parallel residual, feed-forward kind) decides every step; no step branches on the family's name.
//
// Shapes as attnscope/decoder.h: n tokens, M = d_model, H query heads, H_kv key/value heads, D head width,
// F feed-forward width, V vocabulary, L layers. Every matrix is row-major float32; weights in the x·W convention
// (in × out), vectors 1 × len.
#pragma once

#include "attnscope/decoder.h"
#include "attnscope/status.h"
#include "attnscope/types.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace attn::cuda {

// One layer's tensors, as DecoderLayer names them.
enum class LayerTensor {
    AttnNormGamma, AttnNormBeta, Wq, Wk, Wv, Bq, Bk, Bv, QNorm, KNorm, Wo, Bo, PostAttnNorm,
    FfnNormGamma, FfnNormBeta, Wgate, Wup, Wdown, Wfc, Bfc, Wproj, Bproj, PostFfnNorm,
    Count
};
// The model's own: Embeddings M×V (x·E, a token's embedding is its column; also the LM head when tied),
// Positions maxPositions×M (GPT-2), the final norm, LmHead M×V (absent when tied).
enum class ModelTensor { Embeddings, Positions, FinalNormGamma, FinalNormBeta, LmHead, Count };

// A host tensor to upload: rows × cols row-major float32 (a vector is 1 × len). Empty (rows or cols 0) = absent.
struct HostTensor {
    const float* data = nullptr;
    long long rows = 0, cols = 0;
};

// A model's weights on the device (opaque). Freed (cudaFree) when the last shared_ptr goes.
class DecoderWeights;

// Creates an empty set for configuration c after checking that `bytes` (the float32 weights to come) fit in the
// device's free memory: ResourceExhausted naming both sizes otherwise; Unavailable without a device.
Status createDecoderWeights(const DecoderConfig& c, std::size_t bytes, std::shared_ptr<DecoderWeights>& out);
// Uploads one tensor (replacing what was there, e.g. an edited W^O). ResourceExhausted when the device is full.
Status setLayerTensor(DecoderWeights& w, int layer, LayerTensor t, const HostTensor& host);
Status setModelTensor(DecoderWeights& w, ModelTensor t, const HostTensor& host);
// Device bytes the weights hold.
std::size_t deviceBytes(const DecoderWeights& w);

// What a forward (or a recompute from a layer) computes and brings back.
struct DeviceForwardRequest {
    std::vector<int> ids;                       // n token ids (each in 0…V−1: the caller checked)
    int fromLayer = 0;                          // 0: from the embeddings; > 0: from hiddenFrom
    const Matrix* hiddenFrom = nullptr;         // n×M: the residual stream entering fromLayer (fromLayer > 0)
    std::vector<std::pair<int, int>> ablated;   // (layer, query head): the head's context zeroed before W^O
    // A layer whose Q (n×H·D, after RoPE), K, V (n×H_kv·D) are given (DecoderRun::pinned); −1 = none.
    int pinnedLayer = -1;
    const Matrix *pinnedQ = nullptr, *pinnedK = nullptr, *pinnedV = nullptr;
    bool lazy = false;          // keep no n×n maps: bring back Q, K, V and the log-sum-exp (T × H) per layer
    DeviceAttention attention = DeviceAttention::Auto;  // lazy: each layer's attention core (DecoderOptions::deviceAttention)
    long long spareRows = 0;    // lazy: rows allocated (never touched) behind those four, LazyLayer::adopt's spare
    bool keepWeights = true;    // dense: bring back every head's n×n weights (false: the bench's measurement)
    bool everySurprise = true;  // false: the last position's logits only (SurpriseUpdate::Deferred)
    // Rows kept free behind every layer's Q, K, V and lse on the device, for appends in place (decoderAppend).
    long long roomRows = 0;
    // DecoderRun::deviceKVGeneration: when it is still the device's (no call since) and fromLayer > 0, the layers
    // below fromLayer stay where they are and the result holds every layer (DeviceForwardResult::kvHeld).
    std::uint64_t keptGeneration = 0;
    // Where the host buffers of what comes back may come from: a buffer of exactly rows × cols (old contents, pages
    // mapped: attnscope/recycled_buffers.h), or an empty Matrix for a fresh one. Unset: fresh ones.
    std::function<Matrix(long long rows, long long cols)> storage;
};

// Phase times of one device forward, in milliseconds, from CUDA events on the stream. (A dense run's maps too large
// to stay on the device until the end come back during `layers`.)
struct DeviceForwardTimings {
    double embed = 0;       // ids or the residual stream up, the embedding
    double layers = 0;      // every layer computed
    double head = 0;        // final norm, LM head in row blocks, log-sum-exp, surprise
    double copies = 0;      // what the run keeps, device → host (pageable memory), after the layers
    double total = 0;       // host wall time of the call
    double bytesBack = 0;   // bytes copied device → host
    double bytesUp = 0;     // bytes copied host → device (ids, streams, pinned Q/K/V, an append's kept K and V)
    double deviceBytes = 0; // the call's activation buffers on the device (a lazy run's scores: none when fused)
};

struct DeviceLayerResult {
    Matrix Q, K, V;                 // n × H·D (after QK-norm and RoPE), n × H_kv·D each (lazy: spareRows more)
    Matrix concat;                  // dense: n × H·D, the heads' contexts (ablated heads 0); lazy: empty
    std::vector<Matrix> weights;    // dense with keepWeights: H maps n×n; else empty
    Matrix lse;                     // lazy: n (+ spareRows) × H log Σ exp of the visible scores; dense: empty
};

struct DeviceForwardResult {
    std::vector<Matrix> hidden;             // L+1; entries fromLayer+1…L filled (and 0 when fromLayer = 0)
    std::vector<DeviceLayerResult> layers;  // L; entries fromLayer…L−1 filled
    Matrix finalHidden;                     // n × M
    Vector lastLogits;                      // V: the last position's
    std::vector<float> surprise;            // n (everySurprise): NaN at 0; else empty
    DeviceForwardTimings timings;
    // The device's activations as this call left them (lazyMapsRead): the next call on the device (a forward,
    // recompute, append or scan) starts a new generation and the reads of this one's are refused. 0 on failure.
    std::uint64_t generation = 0;
    // Every layer's K and V of the run (all its rows) are in the device's buffers of this generation, for a later
    // decoderAppend in place: a forward from layer 0, a recompute that kept the layers below (keptGeneration), an
    // append.
    bool kvHeld = false;
    bool inPlace = false;  // decoderAppend: the kept K and V were the device's own (nothing of them uploaded)
};

// Runs layers fromLayer…L−1 and the predictions on the device. InvalidArgument for shapes that disagree with the
// weights' configuration, ResourceExhausted (naming sizes) when the activations do not fit, Internal for a CUDA or
// cuBLAS failure (naming the call). Thread-safe: calls are serialised.
Status decoderForward(const DecoderWeights& w, const DeviceForwardRequest& req, DeviceForwardResult& out);

// Appending m tokens to a run of n on the device: per layer only the new rows (norm → Q, K, V → QK-norm, RoPE at
// positions n…n+m−1 → the new queries against all n + m keys: causal, the layer's window and soft-cap → W^O with
// the ablated heads zeroed → the rest of the block), then the final norm and the LM head of the new rows.
// The kept K and V (n rows a layer): every layer's Q, K, V (and lse) live on the device in slots with room for
// appended rows (DeviceForwardRequest::roomRows), and a call leaves them there. When the run's keptGeneration is
// still the device's (no call on the device since, so no other text or scan overwrote them) and the new rows fit
// the room, the append reads them in place and writes its rows behind them: nothing of the kept text crosses the
// bus. Otherwise (another call came between, a layer recomputed on the CPU: DecoderRun::deviceKVGeneration 0, no
// room left) the run's host copies of every layer's K and V go up into new slots (timings.bytesUp counts them):
// one copy of 2·n·H_kv·D floats a layer, against a whole forward's recompute. Either way the device holds every
// layer's K and V of the n + m rows after the call (kvHeld), so the next append is in place.
struct DeviceAppendRequest {
    std::vector<int> ids;       // the m new token ids (each in 0…V−1: the caller checked)
    int n = 0;                  // the run's tokens before them (≥ 1)
    std::uint64_t keptGeneration = 0;  // DecoderRun::deviceKVGeneration
    // Per layer the run's kept K and V (at least n rows × H_kv·D, row-major: the first n rows are read), uploaded
    // when the device's are not the run's; and its final norm's last row (1 × M: position n−1, whose logits give
    // the first new token's surprise).
    std::vector<HostTensor> keptK, keptV;
    HostTensor lastFinalHidden;
    std::vector<std::pair<int, int>> ablated;  // (layer, query head) zeroed before W^O
    bool lazy = false;          // lse of the new rows (m × H) instead of their weights and contexts
    DeviceAttention attention = DeviceAttention::Auto;  // lazy: the new rows' attention core (DecoderOptions::deviceAttention)
    bool keepWeights = true;    // dense: the new rows of every head's weights, m × (n+m)
    long long roomRows = 0;     // rows kept free behind the n + m when the slots are made anew (an upload)
};

// out: hidden (L+1 entries of m × M: the new rows of every residual stream), layers (per layer the new rows' Q, K,
// V; dense: concat m × H·D and weights H × (m × (n+m)); lazy: lse m × H), finalHidden (m × M), lastLogits (position
// n+m−1's), surprise (m: positions n…n+m−1), timings (bytesUp), generation, kvHeld, inPlace. Errors as
// decoderForward's.
Status decoderAppend(const DecoderWeights& w, const DeviceAppendRequest& req, DeviceForwardResult& out);

// DeviceAttention::Auto's choices on this device so far (attnscope/decoder.h's deviceAttentionChoices), in shape
// order; and forgetting them. Both wait for a call in flight.
std::vector<DeviceAttentionChoice> attentionChoices();
void forgetAttentionChoices();

// A lazy run's map read where the run computed it (LazyMaps' rules: a tile of scores or weights, or a rect
// max-pooled; attnscope/lazy_attention.h): from layer `layer`'s Q, K and log-sum-exp still in the device's
// activation buffers, only the tile or the overview crossing the bus.
struct DeviceLazyMapsRead {
    std::uint64_t generation = 0;  // DeviceForwardResult::generation of the call that computed the layer
    int n = 0;                     // that call's tokens
    int layer = 0;
    int H = 0, Hkv = 0, D = 0, head = 0;
    float scale = 1.0f, softcap = 0.0f;
    int window = 0;  // > 0: keys j ≤ i − window masked too
    bool causal = true;
    bool weights = true;  // false: the scores (soft-capped, before masking)
    int r0 = 0, c0 = 0, rows = 0, cols = 0;
    int outRows = 0, outCols = 0;  // > 0 (≤ rows, cols): the rect max-pooled to this size; 0: the tile
};
// out: rows × cols, or outRows × outCols. Unavailable once a later call on the device started (or none ran), and
// while a forward or scan holds the device (a read does not wait for one; reads wait for one another),
// InvalidArgument for a read outside the maps, Internal for a CUDA error.
Status lazyMapsRead(const DeviceLazyMapsRead& read, Matrix& out);

// One layer's unit of a scan (interp.cpp's headImportance and activationPatching): one variant per entry of
// `heads`, each the run's concat of `layer` with that head's columns zeroed (patch null) or taken from `patch`;
// W^O and the rest of the layer on the run's stream entering it, then layers layer+1…L−1 whole on the variants
// stacked (g·n rows: every weight streams once for all of them, each variant's attention its own), then the last
// position's logits of each variant. The run's ablations and pinned layer hold in the layers above, as in the run.
struct DeviceScanRequest {
    int layer = 0;
    const Matrix* hidden = nullptr;  // n × M: the residual stream entering `layer`
    const Matrix* concat = nullptr;  // n × H·D: the layer's heads' contexts in the run (its ablated heads zeroed)
    const Matrix* patch = nullptr;   // n × H·D or null
    std::vector<int> heads;          // the variants, each the query head it changes
    std::vector<std::pair<int, int>> ablated;
    int pinnedLayer = -1;
    const Matrix *pinnedQ = nullptr, *pinnedK = nullptr, *pinnedV = nullptr;
};

// logits: heads.size() × V. Variants go through in batches whose activations fit the device (at most
// kScanBytes, see decoder_device.cpp). Errors as decoderForward's.
Status decoderScan(const DecoderWeights& w, const DeviceScanRequest& req, Matrix& logits);

} // namespace attn::cuda
