// Timings of the decoder forward on the device (issue 34) on random-weight models of SmolLM2-135M's and Gemma 3
// 270M's shapes, built in memory (no model file: the GPU machines have none): forwards at 128, 1024 (dense and lazy:
// the cost of bringing every head's weights back) and 8192 tokens (lazy), an ablation recompute, and the
// head-importance scan (every head ablated in turn at 128 tokens). Prints JSON; exits 77 without a device. Not a test.
//   bench_decoder_device [smollm2|gemma3-270m|all] [max tokens, default 8192]
#include "cuda/cuda_backend.h"

#include <attnscope/decoder.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

attn::Matrix randomMatrix(std::mt19937& rng, long rows, long cols, float scale)
{
    std::normal_distribution<float> d(0.0f, scale);
    attn::Matrix m(rows, cols);
    for (long i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
    return m;
}

attn::Vector ones(long n) { return attn::Vector::Ones(n); }

attn::DecoderModel synthetic(const std::string& shape)
{
    attn::DecoderModel m;
    attn::DecoderConfig& c = m.config;
    c.maxPositions = 8192;
    if (shape == "smollm2") {
        c.architecture = "llama";
        c.layers = 30, c.heads = 9, c.kvHeads = 3, c.hidden = 576, c.headDim = 64, c.intermediate = 1536, c.vocab = 49152;
        c.ropeTheta = 100000;
    } else {
        c.architecture = "gemma3";
        c.family = attn::DecoderFamily::Gemma;
        c.layers = 18, c.heads = 4, c.kvHeads = 1, c.hidden = 640, c.headDim = 256, c.intermediate = 2048, c.vocab = 262144;
        c.qkNorm = attn::QkNorm::PerHead;
        c.postNorms = true;
        c.ffn = attn::FfnKind::GeGluTanh;
        c.embedScale = std::sqrt(640.0f);
        c.attnScale = 1.0f / 16.0f;
        c.ropeTheta = 1000000;
        c.slidingWindow = 512;
        c.normEps = 1e-6f;
        for (int l = 0; l < c.layers; ++l) {
            const bool global = l % 6 == 5;
            c.layerSpecs.push_back({global ? 0 : 512, global ? 1000000.0f : 10000.0f, 1.0f});
        }
    }
    c.tiedEmbeddings = true;
    m.name = "synthetic " + shape;
    std::mt19937 rng(7);
    const long M = c.hidden, HD = long(c.heads) * c.headDim, KD = long(c.kvHeads) * c.headDim, F = c.intermediate;
    const float s = 0.02f;
    m.tokenEmbeddings = attn::WeightMatrix(randomMatrix(rng, M, c.vocab, s));
    m.finalNormGamma = ones(M);
    for (int l = 0; l < c.layers; ++l) {
        attn::DecoderLayer L;
        L.attnNormGamma = ones(M);
        L.ffnNormGamma = ones(M);
        L.Wq = attn::WeightMatrix(randomMatrix(rng, M, HD, s));
        L.Wk = attn::WeightMatrix(randomMatrix(rng, M, KD, s));
        L.Wv = attn::WeightMatrix(randomMatrix(rng, M, KD, s));
        L.Wo = attn::WeightMatrix(randomMatrix(rng, HD, M, s));
        L.Wgate = attn::WeightMatrix(randomMatrix(rng, M, F, s));
        L.Wup = attn::WeightMatrix(randomMatrix(rng, M, F, s));
        L.Wdown = attn::WeightMatrix(randomMatrix(rng, F, M, s));
        if (c.qkNorm != attn::QkNorm::None) L.qNormGamma = ones(c.headDim), L.kNormGamma = ones(c.headDim);
        if (c.postNorms) L.postAttnNormGamma = ones(M), L.postFfnNormGamma = ones(M);
        m.layers.push_back(std::move(L));
    }
    return m;
}

nlohmann::ordered_json phases(const attn::DecoderRun& r)
{
    const auto& t = r.deviceTimings;
    return {{"embed_ms", t.embed}, {"layers_ms", t.layers}, {"head_ms", t.head}, {"wall_ms", t.total}, {"bytes_back_mb", t.bytesBack / 1e6}};
}

int benchOne(const std::string& shape, int maxTokens, nlohmann::ordered_json& out)
{
    auto t0 = Clock::now();
    attn::DecoderModel model = synthetic(shape);
    out["build_ms"] = msSince(t0);
    const attn::DecoderConfig& c = model.config;
    std::vector<int> ids(static_cast<std::size_t>(maxTokens));
    for (int i = 0; i < maxTokens; ++i) ids[std::size_t(i)] = (i * 7919 + 13) % c.vocab;
    attn::DecoderOptions dense, lazy;
    dense.backend = lazy.backend = attn::Backend::Cuda;
    lazy.lazy = true;
    auto run = [&](int n, const attn::DecoderOptions& o, attn::DecoderRun& r) -> double {
        const auto t = Clock::now();
        attn::Status s = attn::runDecoder(model, std::vector<int>(ids.begin(), ids.begin() + n), o, r);
        if (!s.ok() || r.backend != attn::Backend::Cuda) {
            std::fprintf(stderr, "%s at %d: %s\n", shape.c_str(), n, s.ok() ? "not on the device" : s.message.c_str());
            std::exit(1);
        }
        return msSince(t);
    };
    attn::DecoderRun r;
    out["first_forward_ms"] = run(std::min(128, maxTokens), dense, r);  // uploads the weights
    for (int n : {128, 1024, 2048, 4096, 8192}) {
        if (n > maxTokens) break;
        nlohmann::ordered_json e;
        if (n <= 1024) {
            double best = 1e30;
            for (int k = 0; k < 3; ++k) best = std::min(best, run(n, dense, r));
            e["dense_ms"] = best;
            e["dense"] = phases(r);
        }
        double best = 1e30;
        for (int k = 0; k < 3; ++k) best = std::min(best, run(n, lazy, r));
        e["lazy_ms"] = best;
        e["lazy"] = phases(r);
        out["forward_" + std::to_string(n)] = e;
    }
    // Ablation toggle (middle layer) and the head-importance scan at 128 tokens.
    const int ns = std::min(128, maxTokens);
    run(ns, dense, r);
    r.ablated = {{c.layers / 2, 0}};
    t0 = Clock::now();
    if (!attn::recomputeDecoderFrom(model, c.layers / 2, r, attn::Backend::Cuda, attn::SurpriseUpdate::Deferred).ok()) return 1;
    out["ablation_toggle_ms"] = msSince(t0);
    for (bool lazyScan : {false, true}) {
        run(ns, lazyScan ? lazy : dense, r);
        t0 = Clock::now();
        for (int l = c.layers - 1; l >= 0; --l)
            for (int h = 0; h < c.heads; ++h) {
                r.ablated = {{l, h}};
                if (!attn::recomputeDecoderFrom(model, l, r, attn::Backend::Cuda, attn::SurpriseUpdate::Deferred).ok()) return 1;
            }
        out[lazyScan ? "head_scan_lazy_ms" : "head_scan_dense_ms"] = msSince(t0);
    }
    out["heads"] = c.layers * c.heads;
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    std::string why;
    if (!attn::cuda::deviceAvailable(&why)) {
        std::printf("SKIPPED: no usable GPU: %s\n", why.c_str());
        return 77;
    }
    const std::string which = argc > 1 ? argv[1] : "all";
    const int maxTokens = argc > 2 ? std::atoi(argv[2]) : 8192;
    nlohmann::ordered_json j;
    j["device"] = why;
    for (const std::string shape : {"smollm2", "gemma3-270m"}) {
        if (which != "all" && which != shape) continue;
        nlohmann::ordered_json e;
        if (int rc = benchOne(shape, maxTokens, e); rc != 0) return rc;
        j[shape] = e;
        std::cout << j.dump(2) << std::endl;
    }
    return 0;
}
