// A decoder's forward on the GPU: the host side (cuBLAS calls, kernel launches, copies). Contract in
// decoder_device.h; the kernels are decoder_kernels.cuh. Each step names the CPU function it mirrors
// (core/model/blocks.cpp, decoder.cpp).
//
// [SECTION] Device state: stream, cuBLAS handle, events, grow-only activation buffers
// [SECTION] Weights
// [SECTION] Products
// [SECTION] One block (attentionInputs, the attention, afterAttention)
// [SECTION] Forward and predictions
//
// Products: cublasSgemmStridedBatched everywhere (batch 1 for the projections), CUBLAS_DEFAULT_MATH (plain FP32,
// no TF32: the parity suite's tolerances are float32's). Row-major C = op(A)·op(B) is computed as column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ, as backend.cpp does.
#include "decoder_device.h"

#include "cuda_status.h"
#include "staged_copy.h"
#include "decoder_kernels.h"
#include "in_flight.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

namespace attn::cuda {

namespace {

std::string mib(double bytes)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
    return buf;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Device state
// -----------------------------------------------------------------------------------------------------

// A device allocation that frees itself.
struct DeviceArray {
    float* ptr = nullptr;
    long long rows = 0, cols = 0;
    DeviceArray() = default;
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    ~DeviceArray()
    {
        if (ptr) cudaFree(ptr);
    }
    std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * sizeof(float); }
};

Status allocate(std::size_t bytes, const std::string& what, void*& p)
{
    p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err == cudaSuccess) return Status::success();
    (void)cudaGetLastError();  // clear the sticky-free allocation error
    std::size_t freeBytes = 0, totalBytes = 0;
    (void)cudaMemGetInfo(&freeBytes, &totalBytes);
    if (err == cudaErrorMemoryAllocation)
        return makeError(StatusCode::ResourceExhausted, "CUDA device memory: cannot allocate " + mib(double(bytes)) + " for " + what +
                                                            " (" + mib(double(freeBytes)) + " free of " + mib(double(totalBytes)) + ")");
    return fromCudaError(err, "cudaMalloc", __FILE__, __LINE__);
}

// The activation buffers of the decoder forward, one set per process, grown when a longer text or a wider model
// comes and reused otherwise (a recompute of the same length allocates nothing). Never destroyed (as the attention
// core's Workspace: freeing device memory from a static destructor races the runtime's teardown).
enum class Act { Hidden, Normed, Q, K, V, Scores, Concat, AttnOut, FfnA, FfnB, MlpOut, Lse, Ids, Targets, Surprise, Logits, InvFreq, MapRead, MapStrip, Count };
const char* actName(Act a)
{
    static const char* names[] = {"the residual streams", "the normed stream", "Q", "K", "V",
                                  "the scores of every head", "the heads' contexts", "the attention output",
                                  "the feed-forward", "the feed-forward", "the feed-forward output", "the log-sum-exp",
                                  "the token ids", "the targets", "the surprise", "the logits", "the RoPE frequencies",
                                  "a map's tile", "a strip of a map's scores"};
    return names[static_cast<int>(a)];
}

// A shape of a lazy call's attention, as DeviceAttention::Auto keeps its choices: the queries and keys rounded up to
// powers of two, the model's heads, head width and the layer's window (0: none).
struct AttentionShape {
    int queries, keys, heads, kvHeads, headDim, window;
    bool operator<(const AttentionShape& o) const
    {
        return std::tie(queries, keys, heads, kvHeads, headDim, window) < std::tie(o.queries, o.keys, o.heads, o.kvHeads, o.headDim, o.window);
    }
};

class DecoderContext {
public:
    static DecoderContext& instance()
    {
        static DecoderContext* ctx = new DecoderContext;  // never destroyed (see above)
        return *ctx;
    }
    std::mutex& mutex() { return m_mutex; }

    Status init()
    {
        if (m_ready) return Status::success();
        ATTNSCOPE_CUDA_TRY(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
        ATTNSCOPE_CUBLAS_TRY(cublasCreate(&m_blas));
        ATTNSCOPE_CUBLAS_TRY(cublasSetStream(m_blas, m_stream));
        // Plain FP32 products: TF32 would round the inputs to 10 mantissa bits, outside the parity tolerances.
        ATTNSCOPE_CUBLAS_TRY(cublasSetMathMode(m_blas, CUBLAS_DEFAULT_MATH));
        for (cudaEvent_t& e : m_events) ATTNSCOPE_CUDA_TRY(cudaEventCreate(&e));
        ATTNSCOPE_CUDA_TRY(cudaStreamCreateWithFlags(&m_copyStream, cudaStreamNonBlocking));
        m_ready = true;
        return Status::success();
    }

    // Fails with ResourceExhausted, before allocating, when the buffers asked (bytes per buffer) cannot grow into
    // the device's free memory.
    Status checkFits(const std::array<std::size_t, static_cast<std::size_t>(Act::Count)>& need, const std::string& what)
    {
        std::size_t grow = 0, total = 0;
        for (std::size_t i = 0; i < need.size(); ++i) {
            total += need[i];
            if (need[i] > m_bufs[i].capacity) grow += need[i] - m_bufs[i].capacity;
        }
        std::size_t freeBytes = 0, totalBytes = 0;
        ATTNSCOPE_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
        if (grow > freeBytes)
            return makeError(StatusCode::ResourceExhausted, "CUDA device memory: " + what + " needs " + mib(double(total)) +
                                                                " of activations (" + mib(double(grow)) + " more than held), " +
                                                                mib(double(freeBytes)) + " free of " + mib(double(totalBytes)) +
                                                                "; use a shorter text");
        return Status::success();
    }

    template <class T>
    Status get(Act a, std::size_t count, T*& out)
    {
        Buffer& b = m_bufs[static_cast<std::size_t>(a)];
        const std::size_t bytes = count * sizeof(T);
        if (bytes > b.capacity || !b.ptr) {
            if (b.ptr) ATTNSCOPE_CUDA_TRY(cudaFree(b.ptr));
            b.ptr = nullptr;
            b.capacity = 0;
            ATTNSCOPE_RETURN_IF_ERROR(allocate(bytes, actName(a), b.ptr));
            b.capacity = bytes;
        }
        out = static_cast<T*>(b.ptr);
        return Status::success();
    }

    // What a buffer holds now, without growing it (null when never allocated), and its size in bytes.
    const float* peek(Act a, std::size_t& capacity) const
    {
        const Buffer& b = m_bufs[static_cast<std::size_t>(a)];
        capacity = b.capacity;
        return static_cast<const float*>(b.ptr);
    }
    // Every call that writes the activations starts a new generation (the one its result reports): a lazy run's
    // maps are read from its Q, K and log-sum-exp on the device only while the generation is still its own.
    std::uint64_t nextGeneration() { return ++m_generation; }
    std::uint64_t generation() const { return m_generation; }
    // Starts a call that writes the activations: its generation, and whether the slots held the run of `kept` before
    // (holds) with their stride then. The slots are usable again only once the call completes (one that fails
    // midway leaves none).
    struct Start {
        std::uint64_t generation;
        bool held;
        long long stride;
    };
    Start startWriting(std::uint64_t kept = 0, long long rows = 0, long long stride = 0, bool lazy = false)
    {
        const Start start{0, holds(kept, rows, stride, lazy), m_layout.stride};
        m_layout = {};
        return {nextGeneration(), start.held, start.stride};
    }
    // How the Q, K, V and lse buffers hold a run's layers: layer l's slot starts at row l·stride, its first `rows`
    // rows valid, written by the call of `generation` (0: nothing usable, e.g. after a scan, or a call that failed).
    // An append writes its rows behind them in place; the map reads find a layer's rows there.
    struct Layout {
        std::uint64_t generation = 0;
        long long rows = 0, stride = 0;
        bool lazy = false;  // the lse slots are filled too
    };
    Layout& layout() { return m_layout; }
    // Whether the slots hold the run of `kept` (DecoderRun::deviceKVGeneration: no call on the device since that
    // run's), of the same kind, with at least `rows` rows valid and slots of at least `stride`.
    bool holds(std::uint64_t kept, long long rows, long long stride, bool lazy) const
    {
        return kept != 0 && kept == m_generation && m_layout.generation == m_generation && m_layout.rows >= rows &&
               m_layout.stride >= stride && m_layout.lazy == lazy;
    }
    // Forwards and scans in flight (in_flight.h): the map reads do not wait for those, only for one another.
    std::atomic<int>& callsInFlight() { return m_calls; }
    bool writing() const { return m_calls.load() > 0; }
    bool ready() const { return m_ready; }

    cudaStream_t stream() const { return m_stream; }
    cublasHandle_t blas() const { return m_blas; }
    // 0…4: a call's phases (finishCall); 5…7: AttentionPlan's timings.
    cudaEvent_t event(int k) const { return m_events[static_cast<std::size_t>(k)]; }
    // DeviceAttention::Auto's choices so far (AttentionPlan), read and written under mutex().
    std::map<AttentionShape, DeviceAttentionChoice>& choices() { return m_choices; }

    // What a forward keeps comes back on its own stream, each layer's part once that layer is done (an event
    // recorded after it on the computing stream), through pinned staging slots: the copies run while later layers
    // compute (staged_copy.h).
    cudaStream_t copyStream() const { return m_copyStream; }
    PinnedStaging& staging() { return m_staging; }
    // At least `count` events recorded after each layer (ordering only, no timing).
    Status layerEvents(int count, const std::vector<cudaEvent_t>*& out)
    {
        while (static_cast<int>(m_layerEvents.size()) < count) {
            cudaEvent_t e = nullptr;
            ATTNSCOPE_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            m_layerEvents.push_back(e);
        }
        out = &m_layerEvents;
        return Status::success();
    }

private:
    struct Buffer {
        void* ptr = nullptr;
        std::size_t capacity = 0;
    };
    std::mutex m_mutex;
    bool m_ready = false;
    std::uint64_t m_generation = 0;
    Layout m_layout;
    std::atomic<int> m_calls{0};
    cudaStream_t m_stream = nullptr;
    cublasHandle_t m_blas = nullptr;
    std::array<cudaEvent_t, 8> m_events{};
    std::map<AttentionShape, DeviceAttentionChoice> m_choices;
    std::array<Buffer, static_cast<std::size_t>(Act::Count)> m_bufs{};
    cudaStream_t m_copyStream = nullptr;
    std::vector<cudaEvent_t> m_layerEvents;
    // Its own, as large as the attention core's: a forward and an attention compute may run at once.
    PinnedStaging m_staging;
};

// A call that writes the activations (a forward, an append, a scan), for its whole length: counted in flight first
// (the map reads give up rather than wait for it), then holding the device's lock.
struct WritingCall {
    explicit WritingCall(DecoderContext& ctx) : inFlight(ctx.callsInFlight()), lock(ctx.mutex()) {}
    const InFlight inFlight;
    const std::lock_guard<std::mutex> lock;
};

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] Weights
// -----------------------------------------------------------------------------------------------------

class DecoderWeights {
public:
    explicit DecoderWeights(const DecoderConfig& c) : config(c), layers(static_cast<std::size_t>(c.layers)) {}
    DecoderConfig config;
    std::vector<std::array<DeviceArray, static_cast<std::size_t>(LayerTensor::Count)>> layers;
    std::array<DeviceArray, static_cast<std::size_t>(ModelTensor::Count)> model;
    DeviceArray invFreq;  // L × R/2: every layer's RoPE inverse frequencies (ropeRows' formula)

    const DeviceArray& at(int l, LayerTensor t) const { return layers[static_cast<std::size_t>(l)][static_cast<std::size_t>(t)]; }
    const DeviceArray& at(ModelTensor t) const { return model[static_cast<std::size_t>(t)]; }
};

namespace {

Status upload(DeviceArray& dst, const HostTensor& host, const std::string& what)
{
    if (host.rows <= 0 || host.cols <= 0 || !host.data) {
        if (dst.ptr) ATTNSCOPE_CUDA_TRY(cudaFree(dst.ptr));
        dst.ptr = nullptr;
        dst.rows = dst.cols = 0;
        return Status::success();
    }
    if (dst.rows != host.rows || dst.cols != host.cols || !dst.ptr) {
        if (dst.ptr) ATTNSCOPE_CUDA_TRY(cudaFree(dst.ptr));
        dst.ptr = nullptr;
        dst.rows = dst.cols = 0;
        void* p = nullptr;
        ATTNSCOPE_RETURN_IF_ERROR(allocate(static_cast<std::size_t>(host.rows * host.cols) * sizeof(float), what, p));
        dst.ptr = static_cast<float*>(p);
        dst.rows = host.rows;
        dst.cols = host.cols;
    }
    DecoderContext& ctx = DecoderContext::instance();
    ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(dst.ptr, host.data, dst.bytes(), cudaMemcpyHostToDevice, ctx.stream()));
    // The host tensor is the caller's temporary (a dequantized copy): the copy must finish before it goes.
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ctx.stream()));
    return Status::success();
}

// ropeRows' inverse frequencies, in float as transformers computes them: θ^(−2i/R), ÷ the Llama 3 factor, ÷ the
// linear scale.
std::vector<float> ropeInvFreq(const DecoderConfig& c, int layer)
{
    const int R = c.rotaryDims(), half = R / 2;
    const double theta = c.ropeThetaOf(layer);
    const float scale = c.ropeScaleOf(layer);
    std::vector<float> f(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
        float v = static_cast<float>(1.0 / std::pow(theta, double(2 * i) / R));
        if (!c.ropeFreqFactors.empty() && i < static_cast<int>(c.ropeFreqFactors.size())) v /= c.ropeFreqFactors[static_cast<std::size_t>(i)];
        if (scale != 1.0f) v /= scale;
        f[static_cast<std::size_t>(i)] = v;
    }
    return f;
}

} // namespace

Status createDecoderWeights(const DecoderConfig& c, std::size_t bytes, std::shared_ptr<DecoderWeights>& out)
{
    DecoderContext& ctx = DecoderContext::instance();
    std::lock_guard<std::mutex> lock(ctx.mutex());
    ATTNSCOPE_RETURN_IF_ERROR(ctx.init());
    std::size_t freeBytes = 0, totalBytes = 0;
    ATTNSCOPE_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
    if (bytes > freeBytes)
        return makeError(StatusCode::ResourceExhausted, "CUDA device memory: the model's weights as float32 need " + mib(double(bytes)) +
                                                            ", " + mib(double(freeBytes)) + " free of " + mib(double(totalBytes)));
    auto w = std::make_shared<DecoderWeights>(c);
    const int half = c.rotaryDims() / 2;
    if (half > 0) {
        std::vector<float> all;
        for (int l = 0; l < c.layers; ++l) {
            const std::vector<float> f = ropeInvFreq(c, l);
            all.insert(all.end(), f.begin(), f.end());
        }
        ATTNSCOPE_RETURN_IF_ERROR(upload(w->invFreq, HostTensor{all.data(), c.layers, half}, "the RoPE frequencies"));
    }
    out = std::move(w);
    return Status::success();
}

Status setLayerTensor(DecoderWeights& w, int layer, LayerTensor t, const HostTensor& host)
{
    if (layer < 0 || layer >= w.config.layers || t >= LayerTensor::Count)
        return invalidArgument("device weights: layer " + std::to_string(layer) + " is outside 0.." + std::to_string(w.config.layers - 1));
    DecoderContext& ctx = DecoderContext::instance();
    std::lock_guard<std::mutex> lock(ctx.mutex());
    return upload(w.layers[static_cast<std::size_t>(layer)][static_cast<std::size_t>(t)], host,
                  "layer " + std::to_string(layer) + "'s weights");
}

Status setModelTensor(DecoderWeights& w, ModelTensor t, const HostTensor& host)
{
    if (t >= ModelTensor::Count) return invalidArgument("device weights: no such tensor");
    DecoderContext& ctx = DecoderContext::instance();
    std::lock_guard<std::mutex> lock(ctx.mutex());
    return upload(w.model[static_cast<std::size_t>(t)], host, "the embeddings and LM head");
}

std::size_t deviceBytes(const DecoderWeights& w)
{
    std::size_t b = w.invFreq.bytes();
    for (const auto& layer : w.layers)
        for (const DeviceArray& a : layer) b += a.bytes();
    for (const DeviceArray& a : w.model) b += a.bytes();
    return b;
}

namespace {

// -----------------------------------------------------------------------------------------------------
// [SECTION] Products
// -----------------------------------------------------------------------------------------------------

// Row-major C (m×n, ldc) = alpha·op(A)·op(B) (+ beta·C) for `batch` problems; lda, ldb: the row-major leading
// dimensions of A and B as stored; strides between batch entries (0 = the same matrix for all).
Status gemm(cublasHandle_t h, bool transA, bool transB, int m, int n, int k, float alpha, const float* A, long long lda,
            long long strideA, const float* B, long long ldb, long long strideB, float* C, long long ldc, long long strideC,
            int batch = 1, float beta = 0.0f)
{
    const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    ATTNSCOPE_CUBLAS_TRY(cublasSgemmStridedBatched(h, opB, opA, n, m, k, &alpha, B, int(ldb), strideB, A, int(lda), strideA, &beta,
                                                   C, int(ldc), strideC, batch));
    return Status::success();
}

// product(): out (rows × W.cols) = in (rows × W.rows) · W, + bias when there is one.
Status project(DecoderContext& ctx, const float* in, int rows, const DeviceArray& W, const DeviceArray& bias, float* out)
{
    const int k = static_cast<int>(W.rows), cols = static_cast<int>(W.cols);
    ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, false, rows, cols, k, 1.0f, in, k, 0, W.ptr, cols, 0, out, cols, 0));
    if (bias.ptr) ATTNSCOPE_CUDA_TRY(launchAddBiasRows(out, bias.ptr, rows, cols, ctx.stream()));
    return Status::success();
}

// Device → host into the first rows of a Matrix of cols columns (sized rows × cols unless it has that many rows
// or more: a lazy layer's buffers have spare rows behind).
Status download(DecoderContext& ctx, const float* dev, long long rows, long long cols, Matrix& host, double& bytes)
{
    if (host.rows() < rows || host.cols() != cols) host.resize(rows, cols);
    const std::size_t b = static_cast<std::size_t>(rows * cols) * sizeof(float);
    if (b) ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(host.data(), dev, b, cudaMemcpyDeviceToHost, ctx.stream()));
    bytes += double(b);
    return Status::success();
}

// Host → device: `count` floats (or ints), added to `bytes`.
template <class T>
Status uploadHost(DecoderContext& ctx, const T* host, std::size_t count, T* dev, double& bytes)
{
    const std::size_t b = count * sizeof(T);
    if (b) ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(dev, host, b, cudaMemcpyHostToDevice, ctx.stream()));
    bytes += double(b);
    return Status::success();
}

Status uploadMatrix(DecoderContext& ctx, const Matrix& host, float* dev, double& bytes)
{
    return uploadHost(ctx, host.data(), static_cast<std::size_t>(host.size()), dev, bytes);
}

Status uploadMatrix(DecoderContext& ctx, const Matrix& host, float* dev)
{
    double ignored = 0;
    return uploadMatrix(ctx, host, dev, ignored);
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] One block
// -----------------------------------------------------------------------------------------------------

struct Buffers {
    float *normed, *Q, *K, *V, *scores, *concat, *attnOut, *ffnA, *ffnB, *mlpOut, *lse, *surprise, *logits;
    int *ids, *targets;
    int logitRows;
    float* hidden;  // a forward's or append's every residual stream (callBuffers)
    std::size_t bytes;  // what the call's buffers take on the device, as callBuffers sized them
};

// The buffers of a forward (rows = n) or an append (rows = m new rows), in elements: L + 1 residual streams of
// `rows`, `normedRows` rows of the normed stream, every layer's slot of `stride` rows of Q, K, V and lse, `scores`
// floats of maps and `concat` of contexts, `rows` of the block's other buffers, ids, targets and surprises, and
// logitRows × V logits.
struct CallShape {
    std::size_t rows, normedRows, stride, scores, concat;
    int logitRows;
};

// Checks that a call's buffers fit the device (ResourceExhausted naming `what` otherwise), then gets them into b:
// Q, K, V, lse, scores, concat and hidden at their starts.
Status callBuffers(DecoderContext& ctx, const DecoderConfig& c, int V, const CallShape& sh, const std::string& what, Buffers& b)
{
    const std::size_t f = sizeof(float), Lz = static_cast<std::size_t>(c.layers), M = static_cast<std::size_t>(c.hidden);
    const std::size_t H = static_cast<std::size_t>(c.heads), F = static_cast<std::size_t>(std::max(c.intermediate, 1));
    const std::size_t qw = H * c.headDim, kw = static_cast<std::size_t>(c.kvHeads) * c.headDim;
    // The logits, and behind them the surprise's partial log-sum-exps of their rows (launchSurprise).
    const std::size_t logits = static_cast<std::size_t>(sh.logitRows) * (static_cast<std::size_t>(V) + 2 * kSurpriseMaxChunks);
    std::array<std::size_t, static_cast<std::size_t>(Act::Count)> count{};  // elements (floats or ints) per buffer
    auto set = [&](Act a, std::size_t n) { count[static_cast<std::size_t>(a)] = n; };
    set(Act::Hidden, (Lz + 1) * sh.rows * M);
    set(Act::Normed, sh.normedRows * M);
    set(Act::Q, Lz * sh.stride * qw);
    set(Act::K, Lz * sh.stride * kw);
    set(Act::V, Lz * sh.stride * kw);
    set(Act::Scores, sh.scores);
    set(Act::Concat, sh.concat);
    set(Act::AttnOut, sh.rows * M);
    set(Act::FfnA, sh.rows * F);
    set(Act::FfnB, sh.rows * F);
    set(Act::MlpOut, sh.rows * M);
    set(Act::Lse, Lz * sh.stride * H);
    set(Act::Ids, sh.rows);
    set(Act::Targets, sh.rows);
    set(Act::Surprise, sh.rows);
    set(Act::Logits, logits);
    std::array<std::size_t, static_cast<std::size_t>(Act::Count)> need{};
    for (std::size_t i = 0; i < need.size(); ++i) need[i] = count[i] * f;  // sizeof(int) == sizeof(float)
    ATTNSCOPE_RETURN_IF_ERROR(ctx.checkFits(need, what));
    b.bytes = 0;
    for (std::size_t bytes : need) b.bytes += bytes;
    auto n = [&](Act a) { return count[static_cast<std::size_t>(a)]; };
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Hidden, n(Act::Hidden), b.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Normed, n(Act::Normed), b.normed));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Q, n(Act::Q), b.Q));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::K, n(Act::K), b.K));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::V, n(Act::V), b.V));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Scores, n(Act::Scores), b.scores));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Concat, n(Act::Concat), b.concat));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::AttnOut, n(Act::AttnOut), b.attnOut));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::FfnA, n(Act::FfnA), b.ffnA));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::FfnB, n(Act::FfnB), b.ffnB));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::MlpOut, n(Act::MlpOut), b.mlpOut));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Lse, n(Act::Lse), b.lse));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Ids, n(Act::Ids), b.ids));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Targets, n(Act::Targets), b.targets));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Surprise, n(Act::Surprise), b.surprise));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Logits, n(Act::Logits), b.logits));
    b.logitRows = sh.logitRows;
    return Status::success();
}

// normRows: the model's norm (RMSNorm or LayerNorm) of rows × M.
Status normRows(DecoderContext& ctx, const DecoderConfig& c, const float* in, const float* residual, const DeviceArray& gamma,
                const DeviceArray& beta, float* out, long long rows)
{
    ATTNSCOPE_CUDA_TRY(launchNormRows(in, residual, gamma.ptr, beta.ptr, out, rows, c.hidden, c.normEps, c.norm == NormKind::Layer,
                                      ctx.stream()));
    return Status::success();
}

// qkNormRows: per head (rows of D) or whole (rows of heads·D), RMSNorm in place; nothing without γ.
Status qkNormRows(DecoderContext& ctx, const DecoderConfig& c, const DeviceArray& gamma, int heads, float* x, int n)
{
    if (c.qkNorm == QkNorm::None || !gamma.ptr) return Status::success();
    const bool perHead = c.qkNorm == QkNorm::PerHead;
    const long long rows = perHead ? static_cast<long long>(n) * heads : n;
    const int width = perHead ? c.headDim : heads * c.headDim;
    ATTNSCOPE_CUDA_TRY(launchNormRows(x, nullptr, gamma.ptr, nullptr, x, rows, width, c.normEps, false, ctx.stream()));
    return Status::success();
}

// ropeRows on `heads` heads of x (rows at positions pos0…, or 0…period−1 again for every block of `period` rows: a
// scan's stacked variants).
Status ropeRows(DecoderContext& ctx, const DecoderConfig& c, const DecoderWeights& w, int layer, float* x, int heads, int rows,
                int period, int pos0)
{
    const int half = c.rotaryDims() / 2;
    if (half <= 0) return Status::success();
    ATTNSCOPE_CUDA_TRY(launchRope(x, rows, heads, c.headDim, half, w.invFreq.ptr + static_cast<long long>(layer) * half, pos0, period,
                                  ctx.stream()));
    return Status::success();
}

// attentionInputs: Q, K, V of the stream x (n × M) into b.Q, b.K, b.V, normed and rotated where the model does: rows
// at positions pos0… (an append's new rows: the run's length), or restarting every `period` rows when it is > 0.
Status attentionInputs(DecoderContext& ctx, const DecoderWeights& w, int l, const float* x, int n, const Buffers& b, int period = 0,
                       int pos0 = 0)
{
    const DecoderConfig& c = w.config;
    const float* in = x;
    if (c.preNorms) {
        ATTNSCOPE_RETURN_IF_ERROR(normRows(ctx, c, x, nullptr, w.at(l, LayerTensor::AttnNormGamma), w.at(l, LayerTensor::AttnNormBeta), b.normed, n));
        in = b.normed;
    }
    ATTNSCOPE_RETURN_IF_ERROR(project(ctx, in, n, w.at(l, LayerTensor::Wq), w.at(l, LayerTensor::Bq), b.Q));
    ATTNSCOPE_RETURN_IF_ERROR(project(ctx, in, n, w.at(l, LayerTensor::Wk), w.at(l, LayerTensor::Bk), b.K));
    ATTNSCOPE_RETURN_IF_ERROR(project(ctx, in, n, w.at(l, LayerTensor::Wv), w.at(l, LayerTensor::Bv), b.V));
    ATTNSCOPE_RETURN_IF_ERROR(qkNormRows(ctx, c, w.at(l, LayerTensor::QNorm), c.heads, b.Q, n));
    ATTNSCOPE_RETURN_IF_ERROR(qkNormRows(ctx, c, w.at(l, LayerTensor::KNorm), c.kvHeads, b.K, n));
    ATTNSCOPE_RETURN_IF_ERROR(ropeRows(ctx, c, w, l, b.Q, c.heads, n, period, pos0));
    ATTNSCOPE_RETURN_IF_ERROR(ropeRows(ctx, c, w, l, b.K, c.kvHeads, n, period, pos0));
    return Status::success();
}

// Queries per row block of a layer's attention: a block's scores and weights·V take only the keys it can see
// (causalKeySpan), so the masked triangle above the diagonal (and, with a sliding window, the keys before it) is
// neither computed, nor written, nor read: about half of a long text's attention, and with Gemma 3's window of 512 at
// 8192 tokens an eighth of its local layers'. Each block is two strided batched GEMMs per KV head; 512 rows keep the
// launches few (16 blocks at 8192) and each GEMM large. The emulated tests build with blocks of a few rows, so that
// their short texts cross blocks and windows.
#ifndef ATTNSCOPE_DECODER_ROW_BLOCK
#define ATTNSCOPE_DECODER_ROW_BLOCK 512
#endif
constexpr int kRowBlock = ATTNSCOPE_DECODER_ROW_BLOCK;

// The attention core of a decoder layer (layerConfig's: Direct, causal, grouped-query, the model's scale and
// soft-cap; slidingWindowMask's window) for T queries at positions pos0… (b.Q: their rows, b.lse: their lse rows)
// against keys 0…S−1 (b.K, b.V: from row 0): a forward's T = S = n, pos0 = 0; an append's T = m new rows at
// pos0 = n against S = n + m (newRowsAttention). Per row block, scores of every head over the block's key span
// (one strided batched GEMM per KV head, over the query heads of its group, the KV head's block shared) into b.scores
// (H × T × S), the masked softmax (and lse), weights·V (by chunks of keys, or per row block over its span) into the
// concat (T × H·D). A dense run (!lazy) keeps every head's whole rows for the views: its softmax writes every masked
// cell 0, so the cells no block computed are zeros too.
Status productsAttention(DecoderContext& ctx, const DecoderWeights& w, int l, int T, int pos0, int S, bool lazy, const Buffers& b)
{
    const DecoderConfig& c = w.config;
    const int H = c.heads, Hkv = c.kvHeads, D = c.headDim, group = H / Hkv;
    const long long ts = static_cast<long long>(T) * S, qw = static_cast<long long>(H) * D, kw = static_cast<long long>(Hkv) * D;
    const float scale = c.scoreScale();
    const int window = c.windowOf(l);
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
        const int r1 = std::min(T, r0 + kRowBlock);
        const KeySpan span = causalKeySpan(r0, r1, pos0, S, window);
        for (int g = 0; g < Hkv; ++g) {
            const int h0 = g * group;
            ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, true, r1 - r0, span.k1 - span.k0, D, scale,
                                           b.Q + r0 * qw + static_cast<long long>(h0) * D, qw, D,
                                           b.K + span.k0 * kw + static_cast<long long>(g) * D, kw, 0,
                                           b.scores + h0 * ts + static_cast<long long>(r0) * S + span.k0, S, ts, group));
        }
    }
    ATTNSCOPE_CUDA_TRY(launchCausalSoftmax(b.scores, lazy ? b.lse : nullptr, H, T, S, pos0, window, c.attnSoftcap, lazy ? kRowBlock : 0,
                                           ctx.stream()));
    if (pos0 == 0 && T == S && (window <= 0 || window >= T)) {
        // Every block's keys start at key 0 (a forward without a window that cuts them): weights·V by chunks of keys
        // instead, chunk [k0, k1) seen by queries k0… only, one GEMM per KV head over those T − k0 rows, accumulated
        // into the concat (beta 1 after the first chunk). Per row block, weights·V was a tall, thin product (512 rows
        // × D, over up to n keys): a few dozen tiles of work on a GPU of 132 SMs (SmolLM2's 8192-token layers: 242 ms
        // → 366 ms on the H100); per chunk it is up to n rows tall. The cells read are those the blocks computed: a
        // chunk's keys lie in the span of every block from the chunk's own on (0 where masked, above the diagonal).
        for (int k0 = 0; k0 < S; k0 += kRowBlock) {
            const int k1 = std::min(S, k0 + kRowBlock);
            for (int g = 0; g < Hkv; ++g) {
                const int h0 = g * group;
                ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, false, T - k0, D, k1 - k0, 1.0f,
                                               b.scores + h0 * ts + static_cast<long long>(k0) * S + k0, S, ts,
                                               b.V + k0 * kw + static_cast<long long>(g) * D, kw, 0,
                                               b.concat + k0 * qw + static_cast<long long>(h0) * D, qw, D, group, k0 == 0 ? 0.0f : 1.0f));
            }
        }
    } else {
        // Per row block, over the keys its scores were made for.
        for (int r0 = 0; r0 < T; r0 += kRowBlock) {
            const int r1 = std::min(T, r0 + kRowBlock);
            const KeySpan span = causalKeySpan(r0, r1, pos0, S, window);
            for (int g = 0; g < Hkv; ++g) {
                const int h0 = g * group;
                ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, false, r1 - r0, D, span.k1 - span.k0, 1.0f,
                                               b.scores + h0 * ts + static_cast<long long>(r0) * S + span.k0, S, ts,
                                               b.V + span.k0 * kw + static_cast<long long>(g) * D, kw, 0,
                                               b.concat + r0 * qw + static_cast<long long>(h0) * D, qw, D, group));
            }
        }
    }
    return Status::success();
}

// The attention core of a lazy run in one kernel (launchFlashAttention): the same contexts and lse as
// productsAttention's, no score written (b.scores unused, and not allocated: at 8192 tokens SmolLM2's are 2.4 GB).
// Which of the two is faster depends on the GPU: AttentionPlan below times both (DeviceAttention::Auto), and
// `model --bench` compares whole forwards (`fused_attention`, `auto_attention`).
Status fusedAttention(DecoderContext& ctx, const DecoderWeights& w, int l, int T, int pos0, int S, const Buffers& b)
{
    const DecoderConfig& c = w.config;
    const FlashArgs a{b.Q, b.K, b.V, b.concat, b.lse, T, S, pos0, c.heads, c.kvHeads, c.headDim, c.windowOf(l), c.scoreScale(), c.attnSoftcap};
    ATTNSCOPE_CUDA_TRY(launchFlashAttention(a, ctx.stream()));
    return Status::success();
}

// Milliseconds between two of the context's events (0 if the runtime cannot say).
double elapsed(DecoderContext& ctx, int a, int b)
{
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ctx.event(a), ctx.event(b)) != cudaSuccess) return 0;
    return ms;
}

// How a call's layers run their attention core (DeviceAttention, attnscope/decoder.h): all by products (a dense call,
// which keeps its maps; heads wider than the fused kernel takes; or asked), all fused (asked, or the products' scores
// did not fit: attentionBuffers), or per shape of attention by what Auto chose on this device. A shape Auto has not
// seen is timed at its call's first layer of that shape: the products then the fused kernel, twice, the second times
// compared (a kernel's or a GEMM shape's first launch may load it). The fused kernel is kept only under kFusedMargin of
// the products' time, so that a near tie, which another process could see either way, stays with the products; that
// layer's results are the fused kernel's (run last), equal to the products' within rounding. Calls of fewer than
// kAutoFromKeys keys are not timed (a few ms either way): the products. The emulated tests time from a few keys.
#ifdef ATTNSCOPE_DECODER_AUTO_FROM_KEYS
constexpr int kAutoFromKeys = ATTNSCOPE_DECODER_AUTO_FROM_KEYS;
#else
constexpr int kAutoFromKeys = 1024;
#endif
constexpr double kFusedMargin = 0.9;

int ceilPow2(int x)
{
    int p = 1;
    while (p < x) p *= 2;
    return p;
}

class AttentionPlan {
public:
    // T queries against S keys (a forward: T = S = n; an append: T = m new rows against S = n + m).
    AttentionPlan(DecoderContext& ctx, const DecoderConfig& c, DeviceAttention asked, bool lazy, int T, int S)
        : m_ctx(ctx), m_c(c), m_T(T), m_S(S), m_lazy(lazy), m_canFuse(lazy && flashAttentionFits(c.headDim))
    {
        if (!m_canFuse || asked == DeviceAttention::Products) m_mode = DeviceAttention::Products;
        else if (asked == DeviceAttention::Fused) m_mode = DeviceAttention::Fused;
        else m_mode = S < kAutoFromKeys ? DeviceAttention::Products : DeviceAttention::Auto;
    }
    // Whether a layer from `fromLayer` on may take the products (the call allocates their scores).
    bool needsScores(int fromLayer) const
    {
        if (m_mode != DeviceAttention::Auto) return m_mode == DeviceAttention::Products;
        for (int l = fromLayer; l < m_c.layers; ++l) {
            const auto it = m_ctx.choices().find(shapeOf(l));
            if (it == m_ctx.choices().end() || !it->second.fused) return true;
        }
        return false;
    }
    // A lazy call whose heads the fused kernel takes: it may run fused whatever was asked (attentionBuffers).
    bool canFuse() const { return m_canFuse; }
    // The products' scores do not fit the device: every layer fused (canFuse()).
    void fuseAll() { m_mode = DeviceAttention::Fused; }
    Status run(const DecoderWeights& w, int l, int pos0, const Buffers& b);

private:
    AttentionShape shapeOf(int l) const { return {ceilPow2(m_T), ceilPow2(m_S), m_c.heads, m_c.kvHeads, m_c.headDim, m_c.windowOf(l)}; }

    DecoderContext& m_ctx;
    const DecoderConfig& m_c;
    const int m_T, m_S;
    const bool m_lazy, m_canFuse;
    DeviceAttention m_mode;
};

Status AttentionPlan::run(const DecoderWeights& w, int l, int pos0, const Buffers& b)
{
    bool fused = m_mode == DeviceAttention::Fused;
    if (m_mode == DeviceAttention::Auto) {
        const AttentionShape shape = shapeOf(l);
        const auto it = m_ctx.choices().find(shape);
        if (it == m_ctx.choices().end()) {
            cudaStream_t s = m_ctx.stream();
            double productsMs = 0, fusedMs = 0;
            for (int rep = 0; rep < 2; ++rep) {
                ATTNSCOPE_CUDA_TRY(cudaEventRecord(m_ctx.event(5), s));
                ATTNSCOPE_RETURN_IF_ERROR(productsAttention(m_ctx, w, l, m_T, pos0, m_S, m_lazy, b));
                ATTNSCOPE_CUDA_TRY(cudaEventRecord(m_ctx.event(6), s));
                ATTNSCOPE_RETURN_IF_ERROR(fusedAttention(m_ctx, w, l, m_T, pos0, m_S, b));
                ATTNSCOPE_CUDA_TRY(cudaEventRecord(m_ctx.event(7), s));
                ATTNSCOPE_CUDA_TRY(cudaEventSynchronize(m_ctx.event(7)));
                productsMs = elapsed(m_ctx, 5, 6);
                fusedMs = elapsed(m_ctx, 6, 7);
            }
            const bool faster = productsMs > 0 && fusedMs > 0 && fusedMs < kFusedMargin * productsMs;
            m_ctx.choices()[shape] = {shape.queries, shape.keys, shape.heads, shape.kvHeads, shape.headDim, shape.window, productsMs, fusedMs, faster};
            return Status::success();
        }
        fused = it->second.fused;
    }
    if (fused) return fusedAttention(m_ctx, w, l, m_T, pos0, m_S, b);
    return productsAttention(m_ctx, w, l, m_T, pos0, m_S, m_lazy, b);
}

// callBuffers for a call whose attention needs no scores (every layer fused) or `sh.scores` of them. A lazy call
// whose scores do not fit the device takes the fused kernel instead (plan.fuseAll), which needs none and gives the
// same results, when the model's heads fit it: the products' scores grow as n² (SmolLM2 at 8192 tokens: 2.4 GB;
// Gemma 3 at its 32768: 17 GB), the rest of a lazy call as n.
Status attentionBuffers(DecoderContext& ctx, const DecoderConfig& c, int V, CallShape sh, const std::string& what, int fromLayer,
                        AttentionPlan& plan, Buffers& b)
{
    const bool scores = plan.needsScores(fromLayer);
    if (!scores) sh.scores = 0;
    const Status st = callBuffers(ctx, c, V, sh, what, b);
    if (st.code != StatusCode::ResourceExhausted || !scores || !plan.canFuse()) return st;
    plan.fuseAll();
    sh.scores = 0;
    return callBuffers(ctx, c, V, sh, what, b);
}

// The attention core of layer l (plan.run), then the ablated heads' contexts zeroed (projectOut).
Status attention(DecoderContext& ctx, const DecoderWeights& w, int l, int T, int pos0, AttentionPlan& plan,
                 const std::vector<std::pair<int, int>>& ablated, const Buffers& b)
{
    ATTNSCOPE_RETURN_IF_ERROR(plan.run(w, l, pos0, b));
    const int H = w.config.heads, D = w.config.headDim;
    for (const auto& [al, ah] : ablated)
        if (al == l) ATTNSCOPE_CUDA_TRY(launchZeroColumns(b.concat, T, H * D, ah * D, D, ctx.stream()));
    return Status::success();
}

// feedForward of `in` (n × M) into b.mlpOut.
Status feedForward(DecoderContext& ctx, const DecoderWeights& w, int l, const float* in, int n, const Buffers& b)
{
    const DecoderConfig& c = w.config;
    const DeviceArray none;
    if (c.gatedFfn()) {
        ATTNSCOPE_RETURN_IF_ERROR(project(ctx, in, n, w.at(l, LayerTensor::Wgate), none, b.ffnA));
        ATTNSCOPE_RETURN_IF_ERROR(project(ctx, in, n, w.at(l, LayerTensor::Wup), none, b.ffnB));
        ATTNSCOPE_CUDA_TRY(launchActivation(b.ffnA, b.ffnB, nullptr, n, c.intermediate, static_cast<int>(c.ffn), ctx.stream()));
        return project(ctx, b.ffnA, n, w.at(l, LayerTensor::Wdown), none, b.mlpOut);
    }
    ATTNSCOPE_RETURN_IF_ERROR(project(ctx, in, n, w.at(l, LayerTensor::Wfc), none, b.ffnA));
    ATTNSCOPE_CUDA_TRY(launchActivation(b.ffnA, nullptr, w.at(l, LayerTensor::Bfc).ptr, n, c.intermediate, static_cast<int>(c.ffn), ctx.stream()));
    return project(ctx, b.ffnA, n, w.at(l, LayerTensor::Wproj), w.at(l, LayerTensor::Bproj), b.mlpOut);
}

// afterAttention: out = x + post₁(attnOut), then + post₂(ffn(norm₂ of x (parallel residual) or of out)).
Status afterAttention(DecoderContext& ctx, const DecoderWeights& w, int l, const float* x, int n, float* out, const Buffers& b)
{
    const DecoderConfig& c = w.config;
    const long long count = static_cast<long long>(n) * c.hidden;
    if (w.at(l, LayerTensor::PostAttnNorm).ptr)
        ATTNSCOPE_CUDA_TRY(launchNormRows(b.attnOut, x, w.at(l, LayerTensor::PostAttnNorm).ptr, nullptr, out, n, c.hidden, c.normEps, false, ctx.stream()));
    else
        ATTNSCOPE_CUDA_TRY(launchAdd(out, x, b.attnOut, count, ctx.stream()));
    const float* ffnIn = c.parallelResidual ? x : out;
    if (c.preNorms) {
        ATTNSCOPE_RETURN_IF_ERROR(normRows(ctx, c, ffnIn, nullptr, w.at(l, LayerTensor::FfnNormGamma), w.at(l, LayerTensor::FfnNormBeta), b.normed, n));
        ATTNSCOPE_RETURN_IF_ERROR(feedForward(ctx, w, l, b.normed, n, b));
    } else {
        ATTNSCOPE_RETURN_IF_ERROR(feedForward(ctx, w, l, ffnIn, n, b));
    }
    if (w.at(l, LayerTensor::PostFfnNorm).ptr)
        ATTNSCOPE_CUDA_TRY(launchNormRows(b.mlpOut, out, w.at(l, LayerTensor::PostFfnNorm).ptr, nullptr, out, n, c.hidden, c.normEps, false, ctx.stream()));
    else
        ATTNSCOPE_CUDA_TRY(launchAdd(out, out, b.mlpOut, count, ctx.stream()));
    return Status::success();
}

// Rows of logits made at once: n×V logits never exist (8192 × 49152 floats would be 1.6 GB), as logitRows on the
// CPU; 512 rows of SmolLM2's 49152 are 96 MiB, large enough to keep the GEMM at its rate.
#ifdef ATTNSCOPE_DECODER_LOGIT_ROWS  // the emulated tests: blocks of a few rows, so that their short texts cross blocks
constexpr int kLogitRows = ATTNSCOPE_DECODER_LOGIT_ROWS;
#else
constexpr int kLogitRows = 512;
#endif


// Every head's weights of a layer come back in one copy up to this size (then split on the host: a copy of these
// bytes more, ~0.1 ms), else one copy per head into its own map (no host copy of maps that are large).
constexpr std::size_t kOneCopyBytes = std::size_t(4) << 20;

// Every layer's maps stay on the device until the forward is done when they take at most this (SmolLM2 at 1024
// tokens: 1.1 GB); beyond, each layer's come back before the next layer's scores overwrite them.
constexpr std::size_t kKeepMapsBytes = std::size_t(2) << 30;

// Every head's map of a layer (H blocks of rows × cols on the device, `maps`) into `out` (H matrices): one copy when
// small (then split on the host: each copy to pageable memory waits for the stream), else one per head into its own
// matrix. `allHeads` is the one copy's host buffer.
Status downloadHeads(DecoderContext& ctx, const float* maps, int H, long long rows, long long cols, std::vector<Matrix>& out,
                     Matrix& allHeads, double& bytes)
{
    out.resize(static_cast<std::size_t>(H));
    const long long each = rows * cols;
    if (static_cast<std::size_t>(H * each) * sizeof(float) <= kOneCopyBytes) {
        ATTNSCOPE_RETURN_IF_ERROR(download(ctx, maps, H * rows, cols, allHeads, bytes));
        ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ctx.stream()));
        for (int h = 0; h < H; ++h) out[static_cast<std::size_t>(h)] = allHeads.middleRows(static_cast<Eigen::Index>(h) * rows, rows);
        return Status::success();
    }
    for (int h = 0; h < H; ++h) ATTNSCOPE_RETURN_IF_ERROR(download(ctx, maps + h * each, rows, cols, out[static_cast<std::size_t>(h)], bytes));
    return Status::success();
}

// predictions' LM head over `rows` normed rows (b.normed), from row `first`: in blocks of b.logitRows, soft-capped,
// each row with a target (b.targets[r], rows 0…rows−2) reduced to its surprise (b.surprise[r]); the last row's
// logits copied into *lastRow when given (read after the stream's synchronisation; a forward's comes back with its
// other pieces instead).
Status lmHeadRows(DecoderContext& ctx, const DecoderWeights& w, const DeviceArray& head, int rows, int first, const Buffers& b,
                  Matrix* lastRow, double& bytesBack)
{
    const DecoderConfig& c = w.config;
    const int M = c.hidden, V = static_cast<int>(head.cols);
    for (int r0 = first; r0 < rows; r0 += b.logitRows) {
        const int count = std::min(b.logitRows, rows - r0);
        ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, false, count, V, M, 1.0f, b.normed + static_cast<long long>(r0) * M, M, 0, head.ptr,
                                       V, 0, b.logits, V, 0));
        if (c.finalSoftcap > 0) ATTNSCOPE_CUDA_TRY(launchSoftcap(b.logits, static_cast<long long>(count) * V, c.finalSoftcap, ctx.stream()));
        const int withTarget = std::min(count, rows - 1 - r0);
        float* partials = b.logits + static_cast<long long>(b.logitRows) * V;  // behind the logits (callBuffers)
        if (withTarget > 0)
            ATTNSCOPE_CUDA_TRY(launchSurprise(b.logits, b.targets + r0, b.surprise + r0, withTarget, V, partials, ctx.stream()));
        if (lastRow && r0 + count == rows)
            ATTNSCOPE_RETURN_IF_ERROR(download(ctx, b.logits + static_cast<long long>(count - 1) * V, 1, V, *lastRow, bytesBack));
    }
    return Status::success();
}

// A forward's or an append's copies are enqueued on `copies` (the computing stream, or the forward's copy stream):
// event 4 after the last of them, then both streams waited for.
Status waitForCall(DecoderContext& ctx, cudaStream_t copies)
{
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(4), copies));
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ctx.stream()));
    if (copies != ctx.stream()) ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(copies));
    ATTNSCOPE_CUDA_TRY(cudaGetLastError());
    return Status::success();
}

// The end of a forward or an append, once waitForCall returned: the last logits (lastRow), the phases between events
// 0…4, the wall time since t0, the call's generation (layout.generation); with kvHeld (every layer's K and V of the
// run in the slots) the slots' layout, for the next call.
Status finishCall(DecoderContext& ctx, const Matrix& lastRow, std::chrono::steady_clock::time_point t0, bool kvHeld,
                  const DecoderContext::Layout& layout, DeviceForwardResult& out)
{
    out.lastLogits = lastRow.row(0).transpose();
    out.timings.embed = elapsed(ctx, 0, 1);
    out.timings.layers = elapsed(ctx, 1, 2);
    out.timings.head = elapsed(ctx, 2, 3);
    out.timings.copies = elapsed(ctx, 3, 4);
    out.timings.total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.generation = layout.generation;
    out.kvHeld = kvHeld;
    if (kvHeld) ctx.layout() = layout;
    return Status::success();
}

// The host buffers a forward's copies back land in, touched (a byte a page) on host threads while the device
// computes, so that the copies write into memory that is already mapped. A copy into fresh pageable memory runs
// at the rate the kernel maps pages in, in the driver's one thread: 1.5 GB/s on the H100's host for the 1.56 GB of
// an 8192-token run, where a buffer already touched takes the driver's pageable rate (gpu_bounds'
// pageable_device_to_host_gbs).
class HostPrefault {
public:
    // Sizes m ((rows + spare) × cols) and adds its first rows; nothing is touched until start().
    void add(Matrix& m, long long rows, long long cols, long long spare = 0)
    {
        m.resize(rows + spare, cols);
        const std::size_t bytes = static_cast<std::size_t>(rows * cols) * sizeof(float);
        if (bytes > 0) m_ranges.push_back({reinterpret_cast<char*>(m.data()), bytes});
        m_bytes += bytes;
    }
    // Starts the touching when there is enough of it to be worth threads (kPrefaultFromBytes).
    void start()
    {
        if (m_bytes < kPrefaultFromBytes) return;
        const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
        const std::size_t share = (m_bytes + threads - 1) / threads;
        for (unsigned t = 0; t < threads; ++t) {
            auto touch = [this, first = share * t, last = std::min(m_bytes, share * (t + 1))] {
                std::size_t base = 0;  // bytes of the ranges before this one
                for (const auto& [p, len] : m_ranges) {
                    const std::size_t from = std::max(first, base), to = std::min(last, base + len);
                    for (std::size_t b = from; b < to; b += kPage) p[b - base] = 0;
                    base += len;
                }
            };
            try {
                m_tasks.push_back(std::async(std::launch::async, touch));
            } catch (const std::system_error&) {  // no thread to be had: the copies fault the pages in instead
                break;
            }
        }
    }
    void wait()
    {
        for (auto& t : m_tasks) t.get();
        m_tasks.clear();
    }
    ~HostPrefault() { wait(); }

private:
    static constexpr std::size_t kPage = 4096;
#ifdef ATTNSCOPE_PREFAULT_FROM_BYTES  // the emulated tests' build touches every forward's buffers, to cover it
    static constexpr std::size_t kPrefaultFromBytes = ATTNSCOPE_PREFAULT_FROM_BYTES;
#else
    static constexpr std::size_t kPrefaultFromBytes = std::size_t(32) << 20;
#endif
    std::vector<std::pair<char*, std::size_t>> m_ranges;
    std::size_t m_bytes = 0;
    std::vector<std::future<void>> m_tasks;
};

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] Forward and predictions
// -----------------------------------------------------------------------------------------------------

Status decoderForward(const DecoderWeights& w, const DeviceForwardRequest& req, DeviceForwardResult& out)
{
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const DecoderConfig& c = w.config;
    const int n = static_cast<int>(req.ids.size()), L = c.layers, M = c.hidden, H = c.heads, Hkv = c.kvHeads, D = c.headDim;
    const DeviceArray& E = w.at(ModelTensor::Embeddings);
    const DeviceArray& head = w.at(ModelTensor::LmHead).ptr ? w.at(ModelTensor::LmHead) : E;
    const int V = static_cast<int>(head.cols);
    if (n <= 0) return invalidArgument("device forward: no tokens");
    if (req.fromLayer < 0 || req.fromLayer >= L)
        return invalidArgument("device forward: layer " + std::to_string(req.fromLayer) + " is outside 0.." + std::to_string(L - 1));
    if (req.fromLayer > 0 && (!req.hiddenFrom || req.hiddenFrom->rows() != n || req.hiddenFrom->cols() != M))
        return invalidArgument("device forward: the residual stream entering layer " + std::to_string(req.fromLayer) + " must be " +
                               std::to_string(n) + "×" + std::to_string(M));
    if (!E.ptr || E.rows != M || V <= 0) return invalidArgument("device forward: the model's embeddings are not on the device");
    if (req.pinnedLayer >= 0) {
        const Matrix *q = req.pinnedQ, *k = req.pinnedK, *v = req.pinnedV;
        if (!q || !k || !v || q->rows() != n || q->cols() != H * D || k->rows() != n || k->cols() != Hkv * D || v->rows() != n ||
            v->cols() != Hkv * D)
            return invalidArgument("pinned Q, K, V of layer " + std::to_string(req.pinnedLayer) + ": expected " + std::to_string(n) + "×" +
                                   std::to_string(H * D) + ", " + std::to_string(n) + "×" + std::to_string(Hkv * D) + " and " +
                                   std::to_string(n) + "×" + std::to_string(Hkv * D));
    }

    out.generation = 0;
    out.kvHeld = out.inPlace = false;
    DecoderContext& ctx = DecoderContext::instance();
    const WritingCall call(ctx);
    ATTNSCOPE_RETURN_IF_ERROR(ctx.init());
    // A recompute from a layer of the run the device holds (no call since its own) keeps the layers below where they
    // are, in the slots they have; else every layer gets a slot of n rows and the room behind.
    const DecoderContext::Start start = ctx.startWriting(req.fromLayer > 0 ? req.keptGeneration : 0, n, n, req.lazy);
    const std::uint64_t generation = start.generation;
    const bool keepBelow = start.held;
    const std::size_t f = sizeof(float), nz = static_cast<std::size_t>(n), Lz = static_cast<std::size_t>(L);
    const std::size_t nn = nz * nz, qw = static_cast<std::size_t>(H) * D, kw = static_cast<std::size_t>(Hkv) * D;
    // Rows of every layer's slot in the Q, K, V and lse buffers.
    const std::size_t stride = keepBelow ? static_cast<std::size_t>(start.stride) : nz + static_cast<std::size_t>(std::max(0LL, req.roomRows));
    const int logitRows = std::min(n, kLogitRows);
    // What a run keeps stays on the device until every layer is done (each layer's slice of these buffers), and
    // comes back after: a copy to pageable memory waits for the stream, so copies between the layers would stall the
    // GPU at every layer. Every head's weights of every layer stay too when they fit kKeepMapsBytes; else each
    // layer's come back before the next layer reuses the buffer.
    const bool dense = !req.lazy, keepMaps = dense && req.keepWeights && Lz * H * nn * f <= kKeepMapsBytes;
    float *hidden, *allQ, *allK, *allV, *allScores, *allConcat, *allLse;
    Buffers b{};
    AttentionPlan plan(ctx, c, req.attention, req.lazy, n, n);
    ATTNSCOPE_RETURN_IF_ERROR(attentionBuffers(ctx, c, V, {nz, nz, stride, (keepMaps ? Lz : 1) * H * nn, (dense ? Lz : 1) * nz * qw, logitRows},
                                               "a forward over " + std::to_string(n) + " tokens", req.fromLayer, plan, b));
    hidden = b.hidden, allQ = b.Q, allK = b.K, allV = b.V, allScores = b.scores, allConcat = b.concat, allLse = b.lse;
    auto hiddenOf = [&](int l) { return hidden + static_cast<std::size_t>(l) * nz * M; };
    auto scoresOf = [&](int l) { return allScores + (keepMaps ? static_cast<std::size_t>(l) : 0) * H * nn; };
    auto concatOf = [&](int l) { return allConcat + (dense ? static_cast<std::size_t>(l) : 0) * nz * qw; };

    cudaStream_t s = ctx.stream();
    out.hidden.resize(Lz + 1);
    out.layers.resize(Lz);
    out.timings = {};
    out.timings.deviceBytes = double(b.bytes);
    double &bytesBack = out.timings.bytesBack, &bytesUp = out.timings.bytesUp;
    Matrix allHeads;
    auto downloadMaps = [&](int l, DeviceLayerResult& r) { return downloadHeads(ctx, scoresOf(l), H, n, n, r.weights, allHeads, bytesBack); };
    // What the run keeps, each buffer sized now and listed as a piece to copy back once the part of the forward that
    // writes it is done (an event after the embedding, after each layer, after the predictions). Through the
    // pinned staging on the copy stream, each layer's pieces cross while later layers compute; without pinned memory
    // (or for a short run) straight into these buffers, touched on host threads meanwhile (HostPrefault), after the
    // predictions. In the order they become ready: the copy stream waits for each piece's event in turn.
    const std::vector<cudaEvent_t>* layerDone = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(ctx.layerEvents(L, layerDone));
    HostPrefault prefault;
    std::vector<HostPiece> pieces;
    auto keep = [&](Matrix& m, const float* dev, long long rows, long long cols, cudaEvent_t ready, long long spare = 0) {
        if (req.storage && m.size() == 0) m = req.storage(rows + spare, cols);
        prefault.add(m, rows, cols, spare);
        pieces.push_back({m.data(), dev, static_cast<std::size_t>(rows * cols), ready});
    };
    const bool mapsPerHead = static_cast<std::size_t>(H) * nn * f > kOneCopyBytes;
    std::vector<Matrix> headsOf(keepMaps && !mapsPerHead ? Lz : 0);  // layer l's maps in one copy, split after
    if (req.fromLayer == 0) keep(out.hidden[0], hiddenOf(0), n, M, ctx.event(1));
    for (int l = req.fromLayer; l < L; ++l) {
        const std::size_t lz = static_cast<std::size_t>(l);
        DeviceLayerResult& r = out.layers[lz];
        cudaEvent_t done = (*layerDone)[lz];
        keep(out.hidden[lz + 1], hiddenOf(l + 1), n, M, done);
        const long long spare = dense ? 0 : std::max(0LL, req.spareRows);
        keep(r.Q, allQ + lz * stride * qw, n, static_cast<long long>(qw), done, spare);
        keep(r.K, allK + lz * stride * kw, n, static_cast<long long>(kw), done, spare);
        keep(r.V, allV + lz * stride * kw, n, static_cast<long long>(kw), done, spare);
        if (dense) {
            r.lse.resize(0, 0);
            keep(r.concat, concatOf(l), n, static_cast<long long>(qw), done);
        } else {
            r.concat.resize(0, 0);
            r.weights.clear();
            keep(r.lse, allLse + lz * stride * H, n, H, done, spare);
        }
        if (!dense || !req.keepWeights) {
            r.weights.clear();
        } else if (keepMaps && mapsPerHead) {
            r.weights.resize(static_cast<std::size_t>(H));
            for (int h = 0; h < H; ++h) keep(r.weights[static_cast<std::size_t>(h)], scoresOf(l) + h * nn, n, n, done);
        } else if (keepMaps) {
            keep(headsOf[lz], scoresOf(l), static_cast<long long>(H) * n, n, done);
        }
        // (Maps that do not stay on the device, !keepMaps, come back during the layers: downloadMaps below.)
    }
    keep(out.finalHidden, b.normed, n, M, ctx.event(3));
    // The last position's logits: the last row of the last block of rows the predictions below make.
    const int firstRow = req.everySurprise ? 0 : n - 1;
    const int lastBlockRows = n - (firstRow + (n - 1 - firstRow) / logitRows * logitRows);
    Matrix lastRow;
    keep(lastRow, b.logits + static_cast<long long>(lastBlockRows - 1) * V, 1, V, ctx.event(3));
    out.surprise.clear();
    if (req.everySurprise) {
        out.surprise.assign(nz, std::numeric_limits<float>::quiet_NaN());
        if (n > 1) pieces.push_back({out.surprise.data() + 1, b.surprise, nz - 1, ctx.event(3)});
    }
    std::size_t piecesBytes = 0;
    for (const HostPiece& p : pieces) piecesBytes += p.count * f;
    bool staged = piecesBytes >= kStagedFromBytes;
    if (staged) {
        const Status st = ctx.staging().ensure();
        if (!st.ok() && st.code != StatusCode::ResourceExhausted) return st;
        staged = st.ok();  // no pinned memory to be had: the straight copies, slower
    }
    if (!staged) prefault.start();
    // The targets of positions 0…n−2 are tokens 1…n−1 (uploaded from a host copy that lives to the sync below).
    std::vector<int> targets(req.ids.begin() + 1, req.ids.end());
    targets.push_back(-1);
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(0), s));
    if (req.fromLayer == 0) {
        ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, req.ids.data(), nz, b.ids, bytesUp));
        const DeviceArray& P = w.at(ModelTensor::Positions);
        ATTNSCOPE_CUDA_TRY(launchEmbed(b.ids, E.ptr, static_cast<int>(E.cols), P.ptr, 0, c.embedScale, hiddenOf(0), n, M, s));
    } else {
        ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.hiddenFrom, hiddenOf(req.fromLayer), bytesUp));
    }
    ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, targets.data(), nz, b.targets, bytesUp));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(1), s));

    for (int l = req.fromLayer; l < L; ++l) {
        const std::size_t lz = static_cast<std::size_t>(l);
        b.Q = allQ + lz * stride * qw;
        b.K = allK + lz * stride * kw;
        b.V = allV + lz * stride * kw;
        b.lse = allLse + lz * stride * H;
        b.scores = scoresOf(l);
        b.concat = concatOf(l);
        if (req.pinnedLayer == l) {
            ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.pinnedQ, b.Q, bytesUp));
            ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.pinnedK, b.K, bytesUp));
            ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.pinnedV, b.V, bytesUp));
        } else {
            ATTNSCOPE_RETURN_IF_ERROR(attentionInputs(ctx, w, l, hiddenOf(l), n, b));
        }
        ATTNSCOPE_RETURN_IF_ERROR(attention(ctx, w, l, n, 0, plan, req.ablated, b));
        if (dense && req.keepWeights && !keepMaps) ATTNSCOPE_RETURN_IF_ERROR(downloadMaps(l, out.layers[lz]));
        ATTNSCOPE_RETURN_IF_ERROR(project(ctx, b.concat, n, w.at(l, LayerTensor::Wo), w.at(l, LayerTensor::Bo), b.attnOut));
        ATTNSCOPE_RETURN_IF_ERROR(afterAttention(ctx, w, l, hiddenOf(l), n, hiddenOf(l + 1), b));
        ATTNSCOPE_CUDA_TRY(cudaEventRecord((*layerDone)[lz], s));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(2), s));
    float* x = hiddenOf(L);

    // predictions: the final norm, then the LM head in row blocks, each reduced to the surprise of the next token;
    // only the last row's logits come back.
    ATTNSCOPE_RETURN_IF_ERROR(normRows(ctx, c, x, nullptr, w.at(ModelTensor::FinalNormGamma), w.at(ModelTensor::FinalNormBeta), b.normed, n));
    ATTNSCOPE_RETURN_IF_ERROR(lmHeadRows(ctx, w, head, n, firstRow, b, nullptr, bytesBack));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(3), s));
    // The copies back (the pieces above). `copies` is what they add after the predictions: event 4 follows the last
    // of them, on the stream that ran them.
    cudaStream_t copies = staged ? ctx.copyStream() : s;
    if (staged) {
        ATTNSCOPE_RETURN_IF_ERROR(stagedDownload(copies, ctx.staging(), pieces));
    } else {
        prefault.wait();
        ATTNSCOPE_RETURN_IF_ERROR(directDownload(s, pieces));
    }
    ATTNSCOPE_RETURN_IF_ERROR(waitForCall(ctx, copies));
    bytesBack += double(piecesBytes);
    for (std::size_t lz = 0; lz < headsOf.size(); ++lz) {
        if (static_cast<int>(lz) < req.fromLayer) continue;
        std::vector<Matrix>& maps = out.layers[lz].weights;
        maps.resize(static_cast<std::size_t>(H));
        for (int h = 0; h < H; ++h) maps[static_cast<std::size_t>(h)] = headsOf[lz].middleRows(static_cast<Eigen::Index>(h) * n, n);
    }
    const bool kvHeld = req.fromLayer == 0 || keepBelow;
    return finishCall(ctx, lastRow, t0, kvHeld, {generation, n, static_cast<long long>(stride), req.lazy}, out);
}

// appendTokens' new rows on the device (contract in decoder_device.h): the forward's steps on the m new rows, their
// Q, K, V written into every layer's slot behind the kept n rows, their queries against all n + m keys there.
Status decoderAppend(const DecoderWeights& w, const DeviceAppendRequest& req, DeviceForwardResult& out)
{
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const DecoderConfig& c = w.config;
    const int m = static_cast<int>(req.ids.size()), n = req.n, L = c.layers, M = c.hidden, H = c.heads, Hkv = c.kvHeads, D = c.headDim;
    const int T = n + m;
    const DeviceArray& E = w.at(ModelTensor::Embeddings);
    const DeviceArray& head = w.at(ModelTensor::LmHead).ptr ? w.at(ModelTensor::LmHead) : E;
    const int V = static_cast<int>(head.cols);
    const long long qw = static_cast<long long>(H) * D, kw = static_cast<long long>(Hkv) * D;
    if (m <= 0 || n <= 0) return invalidArgument("device append: " + std::to_string(m) + " tokens to a run of " + std::to_string(n));
    if (!E.ptr || E.rows != M || V <= 0) return invalidArgument("device append: the model's embeddings are not on the device");
    if (static_cast<int>(req.keptK.size()) != L || static_cast<int>(req.keptV.size()) != L)
        return invalidArgument("device append: the run's K and V of " + std::to_string(L) + " layers are missing");
    for (int l = 0; l < L; ++l) {
        const HostTensor &k = req.keptK[static_cast<std::size_t>(l)], &v = req.keptV[static_cast<std::size_t>(l)];
        if (!k.data || !v.data || k.rows < n || v.rows < n || k.cols != kw || v.cols != kw)
            return invalidArgument("device append: layer " + std::to_string(l) + "'s kept K and V must have " + std::to_string(n) + " rows of " +
                                   std::to_string(kw));
    }
    if (!req.lastFinalHidden.data || req.lastFinalHidden.cols != M)
        return invalidArgument("device append: the run's final norm of position " + std::to_string(n - 1) + " is missing");

    out.generation = 0;
    out.kvHeld = out.inPlace = false;
    DecoderContext& ctx = DecoderContext::instance();
    const WritingCall call(ctx);
    ATTNSCOPE_RETURN_IF_ERROR(ctx.init());
    // In place when the slots still hold the run (its generation is the device's: no call since) and the new rows
    // fit their room; else new slots, the kept K and V uploaded into them.
    const DecoderContext::Start start = ctx.startWriting(req.keptGeneration, n, T, req.lazy);
    const std::uint64_t generation = start.generation;
    const bool inPlace = start.held;
    const std::size_t f = sizeof(float), mz = static_cast<std::size_t>(m), Lz = static_cast<std::size_t>(L);
    const std::size_t stride = inPlace ? static_cast<std::size_t>(start.stride) : static_cast<std::size_t>(T) + static_cast<std::size_t>(std::max(0LL, req.roomRows));
    const std::size_t mt = mz * static_cast<std::size_t>(T);
    const bool dense = !req.lazy, keepMaps = dense && req.keepWeights && Lz * H * mt * f <= kKeepMapsBytes;
    const int logitRows = std::min(m + 1, kLogitRows);
    // (In place, the slots' buffers hold that much already: nothing grows, nothing kept is lost.)
    float *hidden, *allQ, *allK, *allV, *allScores, *allConcat, *allLse;
    Buffers b{};
    AttentionPlan plan(ctx, c, req.attention, req.lazy, m, T);
    ATTNSCOPE_RETURN_IF_ERROR(attentionBuffers(ctx, c, V, {mz, mz + 1, stride, (keepMaps ? Lz : 1) * H * mt, (dense ? Lz : 1) * mz * qw, logitRows},
                                               "appending " + std::to_string(m) + " tokens to " + std::to_string(n), 0, plan, b));
    hidden = b.hidden, allQ = b.Q, allK = b.K, allV = b.V, allScores = b.scores, allConcat = b.concat, allLse = b.lse;
    auto hiddenOf = [&](int l) { return hidden + static_cast<std::size_t>(l) * mz * M; };
    auto scoresOf = [&](int l) { return allScores + (keepMaps ? static_cast<std::size_t>(l) : 0) * H * mt; };
    auto concatOf = [&](int l) { return allConcat + (dense ? static_cast<std::size_t>(l) : 0) * mz * qw; };

    cudaStream_t s = ctx.stream();
    out.hidden.assign(Lz + 1, Matrix());
    out.layers.assign(Lz, DeviceLayerResult());
    out.timings = {};
    out.timings.deviceBytes = double(b.bytes);
    double &bytesBack = out.timings.bytesBack, &bytesUp = out.timings.bytesUp;
    Matrix allHeads;
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(0), s));
    if (!inPlace)
        for (int l = 0; l < L; ++l) {
            const std::size_t lz = static_cast<std::size_t>(l), kept = static_cast<std::size_t>(n) * kw;
            ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, req.keptK[lz].data, kept, allK + lz * stride * kw, bytesUp));
            ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, req.keptV[lz].data, kept, allV + lz * stride * kw, bytesUp));
        }
    // The new positions' embeddings; their targets are the tokens that follow them, from position n − 1's (the
    // run's last row of the final norm, which goes up before the predictions) to the last one's (none).
    ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, req.ids.data(), mz, b.ids, bytesUp));
    ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, req.ids.data(), mz, b.targets, bytesUp));
    const DeviceArray& P = w.at(ModelTensor::Positions);
    ATTNSCOPE_CUDA_TRY(launchEmbed(b.ids, E.ptr, static_cast<int>(E.cols), P.ptr, n, c.embedScale, hiddenOf(0), m, M, s));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(1), s));

    for (int l = 0; l < L; ++l) {
        const std::size_t lz = static_cast<std::size_t>(l);
        float *slotQ = allQ + lz * stride * qw, *slotK = allK + lz * stride * kw, *slotV = allV + lz * stride * kw;
        // The new rows' Q, K, V behind the kept ones, rotated at their positions n…
        b.Q = slotQ + static_cast<std::size_t>(n) * qw;
        b.K = slotK + static_cast<std::size_t>(n) * kw;
        b.V = slotV + static_cast<std::size_t>(n) * kw;
        ATTNSCOPE_RETURN_IF_ERROR(attentionInputs(ctx, w, l, hiddenOf(l), m, b, 0, n));
        // … and their queries against all n + m keys of the slot.
        b.K = slotK;
        b.V = slotV;
        b.lse = allLse + lz * stride * H + static_cast<std::size_t>(n) * H;
        b.scores = scoresOf(l);
        b.concat = concatOf(l);
        ATTNSCOPE_RETURN_IF_ERROR(attention(ctx, w, l, m, n, plan, req.ablated, b));
        if (dense && req.keepWeights && !keepMaps)
            ATTNSCOPE_RETURN_IF_ERROR(downloadHeads(ctx, scoresOf(l), H, m, T, out.layers[lz].weights, allHeads, bytesBack));
        ATTNSCOPE_RETURN_IF_ERROR(project(ctx, b.concat, m, w.at(l, LayerTensor::Wo), w.at(l, LayerTensor::Bo), b.attnOut));
        ATTNSCOPE_RETURN_IF_ERROR(afterAttention(ctx, w, l, hiddenOf(l), m, hiddenOf(l + 1), b));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(2), s));

    // predictions from position n − 1: its final norm (the run's) in row 0, the new rows' below it; m + 1 rows of
    // logits whose first m give the surprise of positions n…n+m−1, the last the run's new last logits.
    ATTNSCOPE_RETURN_IF_ERROR(uploadHost(ctx, req.lastFinalHidden.data, static_cast<std::size_t>(M), b.normed, bytesUp));
    ATTNSCOPE_RETURN_IF_ERROR(normRows(ctx, c, hiddenOf(L), nullptr, w.at(ModelTensor::FinalNormGamma), w.at(ModelTensor::FinalNormBeta),
                                       b.normed + M, m));
    Matrix lastRow;
    ATTNSCOPE_RETURN_IF_ERROR(lmHeadRows(ctx, w, head, m + 1, 0, b, &lastRow, bytesBack));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ctx.event(3), s));
    ATTNSCOPE_RETURN_IF_ERROR(download(ctx, b.normed + M, m, M, out.finalHidden, bytesBack));
    for (int l = 0; l <= L; ++l) ATTNSCOPE_RETURN_IF_ERROR(download(ctx, hiddenOf(l), m, M, out.hidden[static_cast<std::size_t>(l)], bytesBack));
    for (int l = 0; l < L; ++l) {
        const std::size_t lz = static_cast<std::size_t>(l), row = lz * stride + static_cast<std::size_t>(n);
        DeviceLayerResult& r = out.layers[lz];
        ATTNSCOPE_RETURN_IF_ERROR(download(ctx, allQ + row * qw, m, qw, r.Q, bytesBack));
        ATTNSCOPE_RETURN_IF_ERROR(download(ctx, allK + row * kw, m, kw, r.K, bytesBack));
        ATTNSCOPE_RETURN_IF_ERROR(download(ctx, allV + row * kw, m, kw, r.V, bytesBack));
        if (dense) {
            ATTNSCOPE_RETURN_IF_ERROR(download(ctx, concatOf(l), m, qw, r.concat, bytesBack));
            if (keepMaps) ATTNSCOPE_RETURN_IF_ERROR(downloadHeads(ctx, scoresOf(l), H, m, T, r.weights, allHeads, bytesBack));
        } else {
            ATTNSCOPE_RETURN_IF_ERROR(download(ctx, allLse + row * H, m, H, r.lse, bytesBack));
        }
    }
    out.surprise.assign(mz, 0.0f);
    ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(out.surprise.data(), b.surprise, mz * f, cudaMemcpyDeviceToHost, s));
    bytesBack += double(mz * f);
    out.inPlace = inPlace;
    ATTNSCOPE_RETURN_IF_ERROR(waitForCall(ctx, s));
    return finishCall(ctx, lastRow, t0, true, {generation, T, static_cast<long long>(stride), req.lazy}, out);
}

std::vector<DeviceAttentionChoice> attentionChoices()
{
    DecoderContext& ctx = DecoderContext::instance();
    const std::lock_guard<std::mutex> lock(ctx.mutex());
    std::vector<DeviceAttentionChoice> out;
    for (const auto& [shape, choice] : ctx.choices()) out.push_back(choice);
    return out;
}

void forgetAttentionChoices()
{
    DecoderContext& ctx = DecoderContext::instance();
    const std::lock_guard<std::mutex> lock(ctx.mutex());
    ctx.choices().clear();
}

// The scores a pooled read of a lazy run's map makes at once (lazyMapsRead): 16 Mi cells, 64 MiB, 2048 rows of an
// 8192-token map. The emulated tests' build makes strips of a few cells, so that their small maps take several.
#ifdef ATTNSCOPE_DECODER_STRIP_CELLS
constexpr long long kMapStripCells = ATTNSCOPE_DECODER_STRIP_CELLS;
#else
constexpr long long kMapStripCells = 16LL << 20;
#endif

Status lazyMapsRead(const DeviceLazyMapsRead& r, Matrix& out)
{
    if (r.n <= 0 || r.layer < 0 || r.H <= 0 || r.Hkv <= 0 || r.H % r.Hkv != 0 || r.D <= 0 || r.head < 0 || r.head >= r.H ||
        r.r0 < 0 || r.c0 < 0 || r.rows < 0 || r.cols < 0 || r.r0 + r.rows > r.n || r.c0 + r.cols > r.n || r.outRows < 0 ||
        r.outCols < 0 || r.outRows > r.rows || r.outCols > r.cols)
        return invalidArgument("device maps: a read outside the run's " + std::to_string(r.n) + "×" + std::to_string(r.n) +
                               " maps or its heads");
    DecoderContext& ctx = DecoderContext::instance();
    // Never waits for a forward or scan in progress (a long text's takes a while, and a frame may be asking for a
    // hovered cell): that is Unavailable, and the caller reads on the host. Reads wait for one another (a grid's
    // heads are pooled on several threads). A call that starts between the check and the lock is waited for; its
    // new generation then sends this read to the host.
    if (ctx.writing()) return makeError(StatusCode::Unavailable, "the device is busy with a forward");
    std::lock_guard<std::mutex> lock(ctx.mutex());
    const DecoderContext::Layout& held = ctx.layout();
    if (!ctx.ready() || r.generation == 0 || r.generation != ctx.generation() || held.generation != r.generation)
        return makeError(StatusCode::Unavailable,
                         "the device no longer holds this run's Q, K and log-sum-exp: a later call on the device replaced them");
    const std::size_t f = sizeof(float), qw = static_cast<std::size_t>(r.H) * r.D, kw = static_cast<std::size_t>(r.Hkv) * r.D;
    const std::size_t layer = static_cast<std::size_t>(r.layer), stride = static_cast<std::size_t>(held.stride);
    std::size_t capQ = 0, capK = 0, capL = 0;
    const float* Q = ctx.peek(Act::Q, capQ);
    const float* K = ctx.peek(Act::K, capK);
    const float* lse = ctx.peek(Act::Lse, capL);
    if (!Q || !K || !lse || !held.lazy || r.n > held.rows || (layer + 1) * stride * qw * f > capQ || (layer + 1) * stride * kw * f > capK ||
        (layer + 1) * stride * static_cast<std::size_t>(r.H) * f > capL)
        return invalidArgument("device maps: layer " + std::to_string(r.layer) + " of " + std::to_string(r.n) +
                               " tokens is not in the device's buffers");
    const bool pooled = r.outRows > 0 && r.outCols > 0;
    const long long rows = pooled ? r.outRows : r.rows, cols = pooled ? r.outCols : r.cols;
    out.resize(rows, cols);
    if (rows == 0 || cols == 0) return Status::success();
    float* dev = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::MapRead, static_cast<std::size_t>(rows * cols), dev));
    LazyMapsArgs a{Q + layer * stride * qw, K + layer * stride * kw, lse + layer * stride * static_cast<std::size_t>(r.H), r.H, r.Hkv, r.D, r.head,
                   r.scale, r.softcap, r.window, r.causal, r.weights, r.r0, r.c0, r.rows, r.cols};
    cudaStream_t s = ctx.stream();
    if (!pooled) {
        ATTNSCOPE_CUDA_TRY(launchLazyTile(a, dev, s));
    } else {
        // The rect's scores by cuBLAS, a strip of whole pooled rows at a time (at most kMapStripCells cells, or one
        // pooled row's block when that is more), then pooled by a kernel: each q·k computed once, by the GEMM, where
        // a pooling kernel that made its own with a scalar loop was no faster than the host (81 against 68 ms for
        // SmolLM2's 9 heads at 8192 tokens on the H100).
        const auto blockStart = [&](int p) { return static_cast<int>(static_cast<long long>(p) * r.rows / r.outRows); };
        const long long stripRows = std::max<long long>(1, static_cast<long long>(kMapStripCells) / r.cols);
        std::vector<std::pair<int, int>> strips;  // pooled rows [p0, p1)
        long long most = 0;
        for (int p0 = 0; p0 < r.outRows;) {
            int p1 = p0 + 1;
            while (p1 < r.outRows && blockStart(p1 + 1) - blockStart(p0) <= stripRows) ++p1;
            strips.emplace_back(p0, p1);
            most = std::max<long long>(most, blockStart(p1) - blockStart(p0));
            p0 = p1;
        }
        float* strip = nullptr;
        ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::MapStrip, static_cast<std::size_t>(most * r.cols), strip));
        const int g = r.head / (r.H / r.Hkv);
        for (const auto& [p0, p1] : strips) {
            const int a0 = r.r0 + blockStart(p0), m = blockStart(p1) - blockStart(p0);
            ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, true, m, r.cols, r.D, r.scale, a.Q + static_cast<long long>(a0) * qw + static_cast<long long>(r.head) * r.D,
                                           static_cast<long long>(qw), 0, a.K + static_cast<long long>(r.c0) * kw + static_cast<long long>(g) * r.D,
                                           static_cast<long long>(kw), 0, strip, r.cols, 0));
            ATTNSCOPE_CUDA_TRY(launchLazyPoolStrip(a, strip, a0, r.outRows, r.outCols, p0, p1, dev, s));
        }
    }
    ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(out.data(), dev, static_cast<std::size_t>(rows * cols) * f, cudaMemcpyDeviceToHost, s));
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(s));
    return Status::success();
}


// -----------------------------------------------------------------------------------------------------
// [SECTION] Scans
// -----------------------------------------------------------------------------------------------------

namespace {

// A scan batch's activations at most (its variants' scores, streams and feed-forward rows): a text of 128 tokens
// takes every head of a layer at once; a long one goes in batches.
constexpr std::size_t kScanBytes = std::size_t(1) << 30;

// The attention of g stacked variants of n rows each (attention()'s, one strided batched GEMM per query head over
// the variants). Q/K/V strides between variants: qStride, kvStride (0: every variant shares one, a pinned layer's).
Status stackedAttention(DecoderContext& ctx, const DecoderWeights& w, int l, int n, int g, long long qStride, long long kvStride,
                        const std::vector<std::pair<int, int>>& ablated, const Buffers& b)
{
    const DecoderConfig& c = w.config;
    const int H = c.heads, Hkv = c.kvHeads, D = c.headDim, group = H / Hkv;
    const long long nn = static_cast<long long>(n) * n, qw = static_cast<long long>(H) * D, kw = static_cast<long long>(Hkv) * D;
    const float scale = c.scoreScale();
    for (int h = 0; h < H; ++h)
        ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, true, n, n, D, scale, b.Q + static_cast<long long>(h) * D, qw, qStride,
                                       b.K + static_cast<long long>(h / group) * D, kw, kvStride, b.scores + h * nn, n, H * nn, g));
    ATTNSCOPE_CUDA_TRY(launchCausalSoftmax(b.scores, nullptr, g * H, n, n, 0, c.windowOf(l), c.attnSoftcap, 0, ctx.stream()));
    for (int h = 0; h < H; ++h)
        ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, false, n, D, n, 1.0f, b.scores + h * nn, n, H * nn,
                                       b.V + static_cast<long long>(h / group) * D, kw, kvStride, b.concat + static_cast<long long>(h) * D,
                                       qw, n * qw, g));
    for (const auto& [al, ah] : ablated)
        if (al == l) ATTNSCOPE_CUDA_TRY(launchZeroColumns(b.concat, static_cast<long long>(g) * n, H * D, ah * D, D, ctx.stream()));
    return Status::success();
}

} // namespace

Status decoderScan(const DecoderWeights& w, const DeviceScanRequest& req, Matrix& logits)
{
    const DecoderConfig& c = w.config;
    const int L = c.layers, M = c.hidden, H = c.heads, Hkv = c.kvHeads, D = c.headDim, F = std::max(c.intermediate, 1);
    const DeviceArray& E = w.at(ModelTensor::Embeddings);
    const DeviceArray& head = w.at(ModelTensor::LmHead).ptr ? w.at(ModelTensor::LmHead) : E;
    const int V = static_cast<int>(head.cols);
    const long long qw = static_cast<long long>(H) * D, kw = static_cast<long long>(Hkv) * D;
    if (req.layer < 0 || req.layer >= L)
        return invalidArgument("device scan: layer " + std::to_string(req.layer) + " is outside 0.." + std::to_string(L - 1));
    if (!req.hidden || !req.concat || req.hidden->rows() <= 0)
        return invalidArgument("device scan: the run's stream and concat of layer " + std::to_string(req.layer) + " are missing");
    const int n = static_cast<int>(req.hidden->rows());
    if (req.hidden->cols() != M || req.concat->rows() != n || req.concat->cols() != qw ||
        (req.patch && (req.patch->rows() != n || req.patch->cols() != qw)))
        return invalidArgument("device scan: layer " + std::to_string(req.layer) + " needs a stream of " + std::to_string(n) + "×" +
                               std::to_string(M) + " and contexts of " + std::to_string(n) + "×" + std::to_string(qw));
    for (int h : req.heads)
        if (h < 0 || h >= H) return invalidArgument("device scan: head " + std::to_string(h) + " is outside 0.." + std::to_string(H - 1));
    if (req.pinnedLayer > req.layer) {
        const Matrix *q = req.pinnedQ, *k = req.pinnedK, *v = req.pinnedV;
        if (!q || !k || !v || q->rows() != n || q->cols() != qw || k->rows() != n || k->cols() != kw || v->rows() != n || v->cols() != kw)
            return invalidArgument("device scan: the pinned Q, K, V of layer " + std::to_string(req.pinnedLayer) + " do not fit " +
                                   std::to_string(n) + " tokens");
    }
    if (!E.ptr || E.rows != M || V <= 0) return invalidArgument("device scan: the model's embeddings are not on the device");
    logits.resize(static_cast<Eigen::Index>(req.heads.size()), V);
    if (req.heads.empty()) return Status::success();

    // Variants per batch: each takes its scores (H·n²), streams (2 ping-pong + normed + attention and MLP outputs:
    // 5·M), Q and concat (2·H·D), K and V (2·H_kv·D) and the feed-forward (2·F) per row.
    const std::size_t f = sizeof(float), nz = static_cast<std::size_t>(n);
    const std::size_t perVariant = (static_cast<std::size_t>(H) * nz * nz + nz * (5 * std::size_t(M) + 2 * qw + 2 * kw + 2 * std::size_t(F))) * f;
    const int gMax = static_cast<int>(std::clamp<std::size_t>(kScanBytes / perVariant, 1, req.heads.size()));
    // A batch of gMax needs: Q also holds the uploaded concat and patch (2 n·H·D) before the first layer above.
    const std::size_t gz = static_cast<std::size_t>(gMax), rowsMax = gz * nz;
    std::array<std::size_t, static_cast<std::size_t>(Act::Count)> need{};
    auto setNeed = [&](Act a, std::size_t bytes) { need[static_cast<std::size_t>(a)] = bytes; };
    setNeed(Act::Hidden, (2 * rowsMax + nz) * M * f);
    setNeed(Act::Normed, rowsMax * M * f);
    setNeed(Act::Q, std::max(rowsMax, 2 * nz) * qw * f);
    setNeed(Act::K, rowsMax * kw * f);
    setNeed(Act::V, rowsMax * kw * f);
    setNeed(Act::Scores, gz * H * nz * nz * f);
    setNeed(Act::Concat, rowsMax * qw * f);
    setNeed(Act::AttnOut, rowsMax * M * f);
    setNeed(Act::FfnA, rowsMax * F * f);
    setNeed(Act::FfnB, rowsMax * F * f);
    setNeed(Act::MlpOut, rowsMax * M * f);
    setNeed(Act::Logits, gz * V * f);

    DecoderContext& ctx = DecoderContext::instance();
    const WritingCall call(ctx);
    ATTNSCOPE_RETURN_IF_ERROR(ctx.init());
    ctx.startWriting();  // the scan's variants overwrite the activations: a lazy run's Q, K and lse, every run's K and V
    ATTNSCOPE_RETURN_IF_ERROR(ctx.checkFits(need, "a scan of " + std::to_string(gMax) + " variants of " + std::to_string(n) + " tokens"));
    float *hidden, *Qbuf;
    Buffers b{};
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Hidden, (2 * rowsMax + nz) * M, hidden));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Normed, rowsMax * M, b.normed));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Q, std::max(rowsMax, 2 * nz) * qw, Qbuf));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::K, rowsMax * kw, b.K));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::V, rowsMax * kw, b.V));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Scores, gz * H * nz * nz, b.scores));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Concat, rowsMax * qw, b.concat));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::AttnOut, rowsMax * M, b.attnOut));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::FfnA, rowsMax * F, b.ffnA));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::FfnB, rowsMax * F, b.ffnB));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::MlpOut, rowsMax * M, b.mlpOut));
    ATTNSCOPE_RETURN_IF_ERROR(ctx.get(Act::Logits, gz * V, b.logits));
    b.Q = Qbuf;
    cudaStream_t s = ctx.stream();
    float *x = hidden, *next = hidden + rowsMax * M, *base = hidden + 2 * rowsMax * M;
    const long long rowBytesM = static_cast<long long>(M) * f, rowBytesQ = qw * static_cast<long long>(f);

    for (std::size_t v0 = 0; v0 < req.heads.size(); v0 += gz) {
        const int g = static_cast<int>(std::min(gz, req.heads.size() - v0));
        const long long rows = static_cast<long long>(g) * n;
        // Layer `layer`: the run's concat and patch go up (into Q, free until the layers above), each variant's
        // concat made from them, W^O, then the block's rest on the run's stream repeated for every variant.
        float *upConcat = Qbuf, *upPatch = Qbuf + nz * qw;
        ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.concat, upConcat));
        if (req.patch) ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.patch, upPatch));
        ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.hidden, base));
        for (int v = 0; v < g; ++v) {
            const int h = req.heads[v0 + static_cast<std::size_t>(v)];
            float* cat = b.concat + static_cast<long long>(v) * n * qw;
            ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(cat, upConcat, nz * qw * f, cudaMemcpyDeviceToDevice, s));
            ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(x + static_cast<long long>(v) * n * M, base, nz * M * f, cudaMemcpyDeviceToDevice, s));
            if (req.patch)
                ATTNSCOPE_CUDA_TRY(cudaMemcpy2DAsync(cat + static_cast<long long>(h) * D, rowBytesQ, upPatch + static_cast<long long>(h) * D,
                                                     rowBytesQ, static_cast<std::size_t>(D) * f, nz, cudaMemcpyDeviceToDevice, s));
            else
                ATTNSCOPE_CUDA_TRY(launchZeroColumns(cat, n, H * D, h * D, D, s));
        }
        ATTNSCOPE_RETURN_IF_ERROR(project(ctx, b.concat, static_cast<int>(rows), w.at(req.layer, LayerTensor::Wo),
                                          w.at(req.layer, LayerTensor::Bo), b.attnOut));
        ATTNSCOPE_RETURN_IF_ERROR(afterAttention(ctx, w, req.layer, x, static_cast<int>(rows), next, b));
        std::swap(x, next);
        // The layers above, whole, on the stacked variants.
        for (int k = req.layer + 1; k < L; ++k) {
            long long qStride = static_cast<long long>(n) * qw, kvStride = static_cast<long long>(n) * kw;
            if (req.pinnedLayer == k) {
                ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.pinnedQ, b.Q));
                ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.pinnedK, b.K));
                ATTNSCOPE_RETURN_IF_ERROR(uploadMatrix(ctx, *req.pinnedV, b.V));
                qStride = kvStride = 0;
            } else {
                ATTNSCOPE_RETURN_IF_ERROR(attentionInputs(ctx, w, k, x, static_cast<int>(rows), b, n));
            }
            ATTNSCOPE_RETURN_IF_ERROR(stackedAttention(ctx, w, k, n, g, qStride, kvStride, req.ablated, b));
            ATTNSCOPE_RETURN_IF_ERROR(project(ctx, b.concat, static_cast<int>(rows), w.at(k, LayerTensor::Wo), w.at(k, LayerTensor::Bo), b.attnOut));
            ATTNSCOPE_RETURN_IF_ERROR(afterAttention(ctx, w, k, x, static_cast<int>(rows), next, b));
            std::swap(x, next);
        }
        // Each variant's last row, the final norm, the LM head.
        ATTNSCOPE_CUDA_TRY(cudaMemcpy2DAsync(b.attnOut, rowBytesM, x + static_cast<long long>(n - 1) * M, static_cast<std::size_t>(n) * rowBytesM,
                                             static_cast<std::size_t>(rowBytesM), static_cast<std::size_t>(g), cudaMemcpyDeviceToDevice, s));
        ATTNSCOPE_RETURN_IF_ERROR(normRows(ctx, c, b.attnOut, nullptr, w.at(ModelTensor::FinalNormGamma), w.at(ModelTensor::FinalNormBeta),
                                           b.normed, g));
        ATTNSCOPE_RETURN_IF_ERROR(gemm(ctx.blas(), false, false, g, V, M, 1.0f, b.normed, M, 0, head.ptr, V, 0, b.logits, V, 0));
        if (c.finalSoftcap > 0) ATTNSCOPE_CUDA_TRY(launchSoftcap(b.logits, static_cast<long long>(g) * V, c.finalSoftcap, s));
        ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(logits.data() + static_cast<long long>(v0) * V, b.logits, static_cast<std::size_t>(g) * V * f,
                                           cudaMemcpyDeviceToHost, s));
        // The uploads above read host memory that stays, but the next batch overwrites what they filled.
        ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(s));
    }
    ATTNSCOPE_CUDA_TRY(cudaGetLastError());
    return Status::success();
}

} // namespace attn::cuda
