// The decoder's runs on the GPU: the DecoderRun contract (attnscope/decoder.h) over the device forward
// (core/cuda/decoder_device.h). See decoder_device_run.h.
//
// Weights: every tensor is dequantized to float32 (WeightMatrix::toMatrix) and uploaded once per model, at its
// first device run, into model.device (freed with the model). Decided, not measured against the alternative:
// kept quantized, every product would need a dequantizing GEMM of our own (cuBLAS has none for GGML's blocks),
// while float32 weights let cuBLAS's SGEMM run the products at the rate the goal is stated in, and the
// models this app opens fit a GPU as float32 (SmolLM2-135M: 0.54 GB, Gemma 3 270M: 1.1 GB).
// Edits: W^O and b^O are the weights the window edits. Every call re-uploads the W^O and b^O of the layer it
// recomputes from (recomputeDecoderFrom's contract: called from the edited layer), and those of any other layer
// whose fingerprint (shape, 64 sampled values, b^O) changed since its upload. An edit of other cells of another
// layer, followed by a call that does not recompute from it, is not seen: the contract asks for that recompute.
#include "decoder_device_run.h"

#ifdef ATTNSCOPE_WITH_CUDA
#include "../cuda/cuda_backend.h"
#include "../cuda/decoder_device.h"

#include <attnscope/background_release.h>
#include <attnscope/recycled_buffers.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>

namespace attn::detail {

#ifndef ATTNSCOPE_WITH_CUDA

Expected<bool> decoderOnDevice(Backend backend)
{
    if (backend == Backend::Cuda)
        return makeError(StatusCode::Unavailable, "backend cuda: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)");
    return false;
}

Status deviceRecompute(DecoderModel&, int, DecoderRun&, SurpriseUpdate)
{
    return makeError(StatusCode::Unavailable, "backend cuda: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)");
}

Status deviceScanLayer(DecoderModel&, const DecoderRun&, int, const std::vector<int>&, const Matrix*, Matrix&)
{
    return makeError(StatusCode::Unavailable, "backend cuda: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)");
}

Status deviceAppend(DecoderModel&, const std::vector<int>&, DecoderRun&)
{
    return makeError(StatusCode::Unavailable, "backend cuda: this build has no CUDA backend (configure with -DATTNSCOPE_CUDA=ON)");
}

std::shared_ptr<const AttentionMaps> lazyMapsWithDevice(std::shared_ptr<const LazyMaps> host, const DecoderRun&, const DecoderConfig&)
{
    return host;
}

long deviceMapReads(const AttentionMaps&) { return 0; }

std::vector<DeviceAttentionChoice> deviceAttentionChoices() { return {}; }
void forgetDeviceAttentionChoices() {}

#else

Expected<bool> decoderOnDevice(Backend backend)
{
    if (backend == Backend::Cpu) return false;
    std::string why;
    const bool available = cuda::deviceAvailable(&why);
    if (backend == Backend::Auto) return available;
    if (!available) return makeError(StatusCode::Unavailable, "backend cuda: " + why);
    return true;
}

namespace {

using cuda::HostTensor;
using cuda::LayerTensor;
using cuda::ModelTensor;

HostTensor hostOf(const Matrix& m) { return HostTensor{m.data(), m.rows(), m.cols()}; }
HostTensor hostOf(const Vector& v) { return HostTensor{v.data(), 1, v.size()}; }

Status uploadWeight(cuda::DecoderWeights& w, int l, LayerTensor t, const WeightMatrix& m)
{
    if (m.empty()) return cuda::setLayerTensor(w, l, t, HostTensor{});
    const Matrix dense = m.toMatrix();  // dequantized (a GGUF view) or copied, in × out
    return cuda::setLayerTensor(w, l, t, hostOf(dense));
}

// W^O's and b^O's fingerprint: W^O's shape and 64 of its values (16 rows of 4 columns), every value of b^O.
std::uint64_t woPrint(const DecoderLayer& L)
{
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    auto mixFloat = [&mix](float f) {
        std::uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        mix(u);
    };
    const Eigen::Index in = L.Wo.inputs(), out = L.Wo.outputs();
    mix(static_cast<std::uint64_t>(in));
    mix(static_cast<std::uint64_t>(out));
    if (in > 0 && out > 0) {
        std::vector<float> col(static_cast<std::size_t>(in));
        for (int s = 0; s < 4; ++s) {
            const Eigen::Index j = (out - 1) * s / 3;
            L.Wo.column(j, col.data());
            for (int k = 0; k < 16; ++k) mixFloat(col[static_cast<std::size_t>((in - 1) * k / 15)]);
        }
    }
    mix(static_cast<std::uint64_t>(L.bo.size()));
    for (Eigen::Index i = 0; i < L.bo.size(); ++i) mixFloat(L.bo[i]);
    return h;
}

Status uploadWo(DecoderModel& model, cuda::DecoderWeights& w, int l)
{
    const DecoderLayer& L = model.layers[static_cast<std::size_t>(l)];
    ATTNSCOPE_RETURN_IF_ERROR(uploadWeight(w, l, LayerTensor::Wo, L.Wo));
    ATTNSCOPE_RETURN_IF_ERROR(cuda::setLayerTensor(w, l, LayerTensor::Bo, hostOf(L.bo)));
    model.device.woPrints[static_cast<std::size_t>(l)] = woPrint(L);
    return Status::success();
}

// Float32 bytes of every weight as the device will hold them.
std::size_t float32Bytes(const DecoderModel& m)
{
    auto w = [](const WeightMatrix& x) { return static_cast<std::size_t>(x.inputs() * x.outputs()) * sizeof(float); };
    auto v = [](const auto& x) { return static_cast<std::size_t>(x.size()) * sizeof(float); };
    std::size_t b = w(m.tokenEmbeddings) + w(m.lmHead) + v(m.positionEmbeddings) + v(m.finalNormGamma) + v(m.finalNormBeta);
    for (const DecoderLayer& L : m.layers) {
        for (const WeightMatrix* x : {&L.Wq, &L.Wk, &L.Wv, &L.Wo, &L.Wgate, &L.Wup, &L.Wdown, &L.Wfc, &L.Wproj}) b += w(*x);
        for (const Vector* x : {&L.attnNormGamma, &L.attnNormBeta, &L.bq, &L.bk, &L.bv, &L.qNormGamma, &L.kNormGamma, &L.bo,
                                &L.postAttnNormGamma, &L.ffnNormGamma, &L.ffnNormBeta, &L.bfc, &L.bproj, &L.postFfnNormGamma})
            b += v(*x);
    }
    return b;
}

// The model's weights on the device: uploaded at the first call, W^O and b^O brought up to date at every call
// (fromLayer's always; the others' when their fingerprint changed).
Expected<cuda::DecoderWeights*> deviceWeights(DecoderModel& model, int fromLayer, bool uploadFromLayer = true)
{
    const DecoderConfig& c = model.config;
    DecoderDeviceCache& cache = model.device;
    if (!cache.weights) {
        std::shared_ptr<cuda::DecoderWeights> w;
        ATTNSCOPE_RETURN_IF_ERROR(cuda::createDecoderWeights(c, float32Bytes(model), w));
        for (int l = 0; l < c.layers; ++l) {
            const DecoderLayer& L = model.layers[static_cast<std::size_t>(l)];
            const std::pair<LayerTensor, const WeightMatrix*> mats[] = {
                {LayerTensor::Wq, &L.Wq},     {LayerTensor::Wk, &L.Wk},   {LayerTensor::Wv, &L.Wv},
                {LayerTensor::Wgate, &L.Wgate}, {LayerTensor::Wup, &L.Wup}, {LayerTensor::Wdown, &L.Wdown},
                {LayerTensor::Wfc, &L.Wfc},   {LayerTensor::Wproj, &L.Wproj}};
            for (const auto& [t, m] : mats) ATTNSCOPE_RETURN_IF_ERROR(uploadWeight(*w, l, t, *m));
            const std::pair<LayerTensor, const Vector*> vecs[] = {
                {LayerTensor::AttnNormGamma, &L.attnNormGamma}, {LayerTensor::AttnNormBeta, &L.attnNormBeta},
                {LayerTensor::Bq, &L.bq},
                {LayerTensor::Bk, &L.bk},
                {LayerTensor::Bv, &L.bv},
                {LayerTensor::QNorm, &L.qNormGamma},
                {LayerTensor::KNorm, &L.kNormGamma},
                {LayerTensor::PostAttnNorm, &L.postAttnNormGamma},
                {LayerTensor::FfnNormGamma, &L.ffnNormGamma},
                {LayerTensor::FfnNormBeta, &L.ffnNormBeta},
                {LayerTensor::Bfc, &L.bfc},
                {LayerTensor::Bproj, &L.bproj},
                {LayerTensor::PostFfnNorm, &L.postFfnNormGamma}};
            for (const auto& [t, v] : vecs) ATTNSCOPE_RETURN_IF_ERROR(cuda::setLayerTensor(*w, l, t, hostOf(*v)));
        }
        {
            const Matrix E = model.tokenEmbeddings.toMatrix();
            ATTNSCOPE_RETURN_IF_ERROR(cuda::setModelTensor(*w, ModelTensor::Embeddings, hostOf(E)));
        }
        if (!model.lmHead.empty()) {
            const Matrix E = model.lmHead.toMatrix();
            ATTNSCOPE_RETURN_IF_ERROR(cuda::setModelTensor(*w, ModelTensor::LmHead, hostOf(E)));
        }
        ATTNSCOPE_RETURN_IF_ERROR(cuda::setModelTensor(*w, ModelTensor::Positions, hostOf(model.positionEmbeddings)));
        ATTNSCOPE_RETURN_IF_ERROR(cuda::setModelTensor(*w, ModelTensor::FinalNormGamma, hostOf(model.finalNormGamma)));
        ATTNSCOPE_RETURN_IF_ERROR(cuda::setModelTensor(*w, ModelTensor::FinalNormBeta, hostOf(model.finalNormBeta)));
        cache.woPrints.assign(static_cast<std::size_t>(c.layers), 0);
        cache.weights = w;  // only once complete: a failed upload leaves no half-made set
        for (int l = 0; l < c.layers; ++l) ATTNSCOPE_RETURN_IF_ERROR(uploadWo(model, *w, l));
        return w.get();
    }
    auto* w = static_cast<cuda::DecoderWeights*>(cache.weights.get());
    for (int l = fromLayer; l < c.layers; ++l) {
        const DecoderLayer& L = model.layers[static_cast<std::size_t>(l)];
        if ((uploadFromLayer && l == fromLayer) || woPrint(L) != cache.woPrints[static_cast<std::size_t>(l)])
            ATTNSCOPE_RETURN_IF_ERROR(uploadWo(model, *w, l));
    }
    return w;
}

// The rows appendTokens' steps kept on the device for appends in place (DeviceForwardRequest::roomRows): the lazy
// layers' spare (LazyLayer::defaultSpareRows), never past the model's context.
long long roomRows(const DecoderConfig& c, long long n)
{
    return std::clamp<long long>(LazyLayer::defaultSpareRows(n), 0, std::max<long long>(0, c.maxPositions - n));
}

// What a device call's results replace in the run: the earlier call's host buffers (1.3-1.6 GB at 8192 tokens). Their
// large buffers go to RecycledBuffers for the next forward's copies (attnscope/recycled_buffers.h); the rest, and
// what the pool held that this call's forward did not take, are freed on a thread of their own
// (attnscope/background_release.h) while the caller goes on with the new run: freeing them was the 78 ms gap between
// an 8192-token forward's phases and its wall time on the H100.
struct Replaced {
    std::vector<Matrix> matrices;
    std::vector<std::shared_ptr<const LazyLayer>> lazy;  // adopted with `recycle`: pooled by their last holder
    std::vector<std::vector<HeadWeights>> weights;
    std::vector<Matrix> dropped;  // from the pool
};

// `mark`: the pool's mark from before the forward that replaced `old`.
void release(Replaced&& old, std::uint64_t mark)
{
    RecycledBuffers& pool = RecycledBuffers::instance();
    for (Matrix& m : old.matrices)
        for (Matrix& out : pool.give(m)) old.dropped.push_back(std::move(out));
    // The layers this call held last go to the pool now (LazyLayer::adopt's recycle), for the next forward; those the
    // window still views go when it lets them go.
    old.lazy.clear();
    for (Matrix& m : pool.dropBefore(mark)) old.dropped.push_back(std::move(m));
    static BackgroundRelease freer;  // destroyed at exit: waits for the last batch
    freer.release(std::move(old));
}

DecoderRun::DeviceTimings timingsOf(const cuda::DeviceForwardTimings& t)
{
    return {t.embed, t.layers, t.head, t.copies, t.total, t.bytesBack, t.bytesUp, t.deviceBytes};
}

} // namespace

Status deviceRecompute(DecoderModel& model, int fromLayer, DecoderRun& run, SurpriseUpdate surprise)
{
    const DecoderConfig& c = model.config;
    const int L = c.layers, n = static_cast<int>(run.encoding.ids.size());
    auto weights = deviceWeights(model, fromLayer);
    if (!weights) return weights.status();
    cuda::DeviceForwardRequest req;
    req.ids = run.encoding.ids;
    req.fromLayer = fromLayer;
    if (fromLayer > 0) req.hiddenFrom = &run.hidden[static_cast<std::size_t>(fromLayer)];
    req.ablated = run.ablated;
    if (run.pinned.layer >= fromLayer && run.pinned.layer < L) {
        req.pinnedLayer = run.pinned.layer;
        req.pinnedQ = &run.pinned.Q;
        req.pinnedK = &run.pinned.K;
        req.pinnedV = &run.pinned.V;
    }
    req.lazy = run.lazy;
    req.attention = run.deviceAttention;
    // lazyLayer's spare rows (never past the model's context), allocated behind Q, K, V and lse as they come back,
    // and as much room behind them on the device, for appends there.
    const long long spare = roomRows(c, n);
    if (run.lazy) req.spareRows = spare;
    req.roomRows = spare;
    req.keptGeneration = run.deviceKVGeneration;
    req.everySurprise = surprise == SurpriseUpdate::Now;
    // What comes back lands in the buffers of a replaced run where the shapes agree (a recompute after an edit).
    const std::uint64_t mark = RecycledBuffers::instance().mark();
    req.storage = [](long long rows, long long cols) { return RecycledBuffers::instance().take(rows, cols); };
    cuda::DeviceForwardResult out;
    if (Status s = cuda::decoderForward(**weights, req, out); !s.ok()) return makeError(s.code, "the GPU forward: " + s.message);

    // Into the run, as runLayer / lazyLayer / predictions leave it; what it held there freed in the background.
    Replaced old;
    auto replace = [&old](Matrix& dst, Matrix&& src) {
        old.matrices.push_back(std::move(dst));
        dst = std::move(src);
    };
    if (fromLayer == 0) replace(run.hidden[0], std::move(out.hidden[0]));
    for (int l = fromLayer; l < L; ++l) {
        replace(run.hidden[static_cast<std::size_t>(l) + 1], std::move(out.hidden[static_cast<std::size_t>(l) + 1]));
        cuda::DeviceLayerResult& r = out.layers[static_cast<std::size_t>(l)];
        AttentionResult& res = run.attention[static_cast<std::size_t>(l)];
        res.warnings.clear();
        res.output.resize(0, 0);
        res.layout = Layout::Row;
        res.scale = c.scoreScale();
        res.backend = Backend::Cuda;
        res.deviceGeneration = 0;
        res.timings = {};
        if (run.lazy) {
            // lazyLayer's: Q, K, V and lse in a LazyLayer, adopted with the spare rows they came back with.
            std::shared_ptr<const LazyLayer>& lazy = run.lazyLayers[static_cast<std::size_t>(l)];
            old.lazy.push_back(std::move(lazy));
            lazy = LazyLayer::adopt(std::move(r.Q), std::move(r.K), std::move(r.lse), std::move(r.V), n, /*recycle=*/true);
            replace(res.Q, Matrix());
            replace(res.K, Matrix());
            replace(res.V, Matrix());
            replace(res.concat, Matrix());
            res.heads.clear();
        } else {
            replace(res.Q, std::move(r.Q));
            replace(res.K, std::move(r.K));
            replace(res.V, std::move(r.V));
            replace(res.concat, std::move(r.concat));
            res.heads.assign(static_cast<std::size_t>(c.heads), HeadResult{});
            std::vector<HeadWeights>& kept = run.weights[static_cast<std::size_t>(l)];
            old.weights.push_back(std::move(kept));
            kept.clear();
            kept.resize(static_cast<std::size_t>(c.heads));
            for (int h = 0; h < c.heads; ++h)
                kept[static_cast<std::size_t>(h)] = HeadWeights(std::move(r.weights[static_cast<std::size_t>(h)]));
        }
    }
    // The layers this call made stay on the device until its next call (DecoderRun::deviceLayers).
    run.deviceLayers.clear();
    run.deviceMapsGeneration = 0;
    if (run.lazy) {
        run.deviceMapsGeneration = out.generation;
        run.deviceLayers.resize(static_cast<std::size_t>(L));
        for (int l = fromLayer; l < L; ++l) run.deviceLayers[static_cast<std::size_t>(l)] = run.lazyLayers[static_cast<std::size_t>(l)];
    }
    replace(run.finalHidden, std::move(out.finalHidden));
    release(std::move(old), mark);
    run.lastLogits = std::move(out.lastLogits);
    if (surprise == SurpriseUpdate::Now) {
        run.surprise = std::move(out.surprise);
        run.surpriseStale = false;
    } else {
        run.surprise.resize(static_cast<std::size_t>(n));
        if (n > 0) run.surprise[0] = std::numeric_limits<float>::quiet_NaN();
        run.surpriseStale = true;
    }
    run.backend = Backend::Cuda;
    run.deviceTimings = timingsOf(out.timings);
    run.deviceKVGeneration = out.kvHeld ? out.generation : 0;
    return Status::success();
}

Status deviceAppend(DecoderModel& model, const std::vector<int>& ids, DecoderRun& run)
{
    const DecoderConfig& c = model.config;
    const int L = c.layers, n = static_cast<int>(run.encoding.ids.size()), m = static_cast<int>(ids.size());
    bool fits = run.finalHidden.rows() == n && run.finalHidden.cols() == c.hidden &&
                static_cast<int>((run.lazy ? run.lazyLayers.size() : run.weights.size())) == L;
    for (int l = 0; fits && !run.lazy && l < L; ++l) fits = static_cast<int>(run.weights[static_cast<std::size_t>(l)].size()) == c.heads;
    if (!fits) return invalidArgument("append: the run's final norm or layers do not match its " + std::to_string(n) + " tokens");
    // The run was computed with the weights as they are: the W^O that changed since their upload go up.
    auto weights = deviceWeights(model, 0, false);
    if (!weights) return weights.status();
    cuda::DeviceAppendRequest req;
    req.ids = ids;
    req.n = n;
    req.keptGeneration = run.deviceKVGeneration;
    for (int l = 0; l < L; ++l) {
        if (run.lazy) {
            const LazyLayer* kept = run.lazyLayers[static_cast<std::size_t>(l)].get();
            if (!kept) return invalidArgument("append: the run's layer " + std::to_string(l) + " is missing");
            req.keptK.push_back(HostTensor{kept->K.data(), kept->K.rows(), kept->K.cols()});
            req.keptV.push_back(HostTensor{kept->V.data(), kept->V.rows(), kept->V.cols()});
        } else {
            const AttentionResult& res = run.attention[static_cast<std::size_t>(l)];
            req.keptK.push_back(hostOf(res.K));
            req.keptV.push_back(hostOf(res.V));
        }
    }
    req.lastFinalHidden = HostTensor{run.finalHidden.data() + static_cast<std::ptrdiff_t>(n - 1) * c.hidden, 1, c.hidden};
    req.ablated = run.ablated;
    req.lazy = run.lazy;
    req.attention = run.deviceAttention;
    req.roomRows = roomRows(c, n + m);
    cuda::DeviceForwardResult out;
    if (Status s = cuda::decoderAppend(**weights, req, out); !s.ok()) return makeError(s.code, "the GPU append: " + s.message);

    // Into the run, as appendTokens' CPU steps leave it (the encoding is the caller's). A lazy run's maps stay on the
    // device where they were before (the append wrote its rows behind them there); uploaded, only K and V went up.
    auto grow = [](Matrix& dst, const Matrix& rows) {
        const Eigen::Index r = dst.rows();
        dst.conservativeResize(r + rows.rows(), rows.cols());
        dst.bottomRows(rows.rows()) = rows;
    };
    const bool mapsStay = out.inPlace && run.lazy && run.deviceMapsGeneration != 0 && run.deviceMapsGeneration == req.keptGeneration &&
                          run.deviceLayers.size() == static_cast<std::size_t>(L);
    std::vector<std::weak_ptr<const LazyLayer>> onDevice(mapsStay ? static_cast<std::size_t>(L) : 0);
    for (int l = 0; l <= L; ++l) grow(run.hidden[static_cast<std::size_t>(l)], out.hidden[static_cast<std::size_t>(l)]);
    for (int l = 0; l < L; ++l) {
        const std::size_t lz = static_cast<std::size_t>(l);
        cuda::DeviceLayerResult& r = out.layers[lz];
        AttentionResult& res = run.attention[lz];
        res.backend = Backend::Cuda;
        if (run.lazy) {
            std::shared_ptr<const LazyLayer>& kept = run.lazyLayers[lz];
            const bool wasOnDevice = mapsStay && run.deviceLayers[lz].lock() == kept;
            std::shared_ptr<LazyLayer> grown = kept->appended(r.Q, r.K, r.V);
            grown->setLse(n, r.lse);
            kept = std::move(grown);
            if (wasOnDevice) onDevice[lz] = kept;
        } else {
            grow(res.Q, r.Q);
            grow(res.K, r.K);
            grow(res.V, r.V);
            grow(res.concat, r.concat);
            std::vector<HeadWeights>& maps = run.weights[lz];
            for (int h = 0; h < c.heads && h < static_cast<int>(r.weights.size()); ++h)
                maps[static_cast<std::size_t>(h)].append(r.weights[static_cast<std::size_t>(h)]);
        }
    }
    grow(run.finalHidden, out.finalHidden);
    run.lastLogits = std::move(out.lastLogits);
    run.surprise.resize(static_cast<std::size_t>(n + m));
    for (int i = 0; i < m; ++i) run.surprise[static_cast<std::size_t>(n + i)] = out.surprise[static_cast<std::size_t>(i)];
    run.deviceMapsGeneration = mapsStay ? out.generation : 0;
    run.deviceLayers = std::move(onDevice);
    run.deviceKVGeneration = out.kvHeld ? out.generation : 0;
    run.backend = Backend::Cuda;
    run.deviceTimings = timingsOf(out.timings);
    return Status::success();
}

Status deviceScanLayer(DecoderModel& model, const DecoderRun& run, int layer, const std::vector<int>& heads, const Matrix* patch,
                       Matrix& logits)
{
    const int L = model.config.layers;
    if (layer < 0 || layer >= L || run.hidden.size() != static_cast<std::size_t>(L) + 1 || run.attention.size() != static_cast<std::size_t>(L))
        return invalidArgument("device scan: the run has no layer " + std::to_string(layer));
    // The run was computed with the weights as they are: the W^O that changed since their upload go up (a scan
    // from every layer forces none).
    auto weights = deviceWeights(model, layer, false);
    if (!weights) return weights.status();
    cuda::DeviceScanRequest req;
    req.layer = layer;
    req.hidden = &run.hidden[static_cast<std::size_t>(layer)];
    req.concat = &run.attention[static_cast<std::size_t>(layer)].concat;
    req.patch = patch;
    req.heads = heads;
    req.ablated = run.ablated;
    if (run.pinned.layer > layer && run.pinned.layer < L) {
        req.pinnedLayer = run.pinned.layer;
        req.pinnedQ = &run.pinned.Q;
        req.pinnedK = &run.pinned.K;
        req.pinnedV = &run.pinned.V;
    }
    if (Status s = cuda::decoderScan(**weights, req, logits); !s.ok()) return makeError(s.code, "the GPU scan: " + s.message);
    return Status::success();
}


namespace {

// LazyMaps read on the device where it still holds the layer (see lazyMapsWithDevice).
class DeviceLazyMaps final : public AttentionMaps {
public:
    DeviceLazyMaps(std::shared_ptr<const LazyMaps> host, const DecoderRun& run, const DecoderConfig& c)
        : m_host(std::move(host)), m_generation(run.deviceMapsGeneration), m_config(c)
    {
        // The layers the device made and the run still holds (the same objects: a layer replaced since is another).
        for (std::size_t l = 0; l < run.deviceLayers.size() && l < run.lazyLayers.size(); ++l) {
            const std::shared_ptr<const LazyLayer> made = run.deviceLayers[l].lock();
            m_onDevice.push_back(made && made == run.lazyLayers[l]);
        }
    }
    int layers() const override { return m_host->layers(); }
    int heads() const override { return m_host->heads(); }
    int queries() const override { return m_host->queries(); }
    int keys() const override { return m_host->keys(); }
    bool has(MapKind k) const override { return m_host->has(k); }
    bool causal() const override { return m_host->causal(); }
    int window(int layer) const override { return m_host->window(layer); }
    Status maskTile(int layer, int head, const MapRect& r, MaskMatrix& out) const override { return m_host->maskTile(layer, head, r, out); }

    Status tile(MapKind kind, int layer, int head, const MapRect& r, Matrix& out) const override
    {
        ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
        if (read(kind, layer, head, r, 0, 0, out)) return Status::success();
        return m_host->tile(kind, layer, head, r, out);
    }
    Status pooled(MapKind kind, int layer, int head, const MapRect& r, int outRows, int outCols, Matrix& out) const override
    {
        std::vector<int> colOf;
        const Expected<bool> any = preparePooled(kind, layer, head, r, outRows, outCols, colOf, out);
        if (!any || !*any) return any ? Status::success() : any.status();
        if (read(kind, layer, head, r, outRows, outCols, out)) return Status::success();
        return m_host->pooled(kind, layer, head, r, outRows, outCols, out);
    }
    long reads() const { return m_reads.load(); }

private:
    // The read on the device when it holds the layer; false (out untouched or to be overwritten) otherwise, or
    // when the device refuses (a later call replaced its activations, a CUDA error): the host reads then.
    bool read(MapKind kind, int layer, int head, const MapRect& r, int outRows, int outCols, Matrix& out) const
    {
        if (m_generation == 0 || layer >= static_cast<int>(m_onDevice.size()) || !m_onDevice[static_cast<std::size_t>(layer)])
            return false;
        const LazyLayer& L = m_host->layer(layer);
        cuda::DeviceLazyMapsRead q;
        q.generation = m_generation;
        q.n = static_cast<int>(L.Q.rows());
        q.layer = layer;
        q.H = m_config.heads;
        q.Hkv = m_config.kvHeads;
        q.D = m_config.headDim;
        q.head = head;
        q.scale = m_config.scoreScale();
        q.softcap = m_config.attnSoftcap;
        q.window = m_host->window(layer);
        q.causal = m_host->causal();
        q.weights = kind == MapKind::Weights;
        q.r0 = r.r0, q.c0 = r.c0, q.rows = r.rows, q.cols = r.cols;
        q.outRows = outRows, q.outCols = outCols;
        if (!cuda::lazyMapsRead(q, out).ok()) return false;
        ++m_reads;
        return true;
    }

    std::shared_ptr<const LazyMaps> m_host;
    std::uint64_t m_generation;
    DecoderConfig m_config;
    std::vector<bool> m_onDevice;
    mutable std::atomic<long> m_reads{0};
};

} // namespace

std::shared_ptr<const AttentionMaps> lazyMapsWithDevice(std::shared_ptr<const LazyMaps> host, const DecoderRun& run, const DecoderConfig& c)
{
    if (run.deviceMapsGeneration == 0 || run.deviceLayers.empty()) return host;
    return std::make_shared<DeviceLazyMaps>(std::move(host), run, c);
}

long deviceMapReads(const AttentionMaps& maps)
{
    const auto* d = dynamic_cast<const DeviceLazyMaps*>(&maps);
    return d ? d->reads() : 0;
}

std::vector<DeviceAttentionChoice> deviceAttentionChoices() { return cuda::attentionChoices(); }
void forgetDeviceAttentionChoices() { cuda::forgetAttentionChoices(); }

#endif

} // namespace attn::detail
