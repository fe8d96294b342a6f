// attn::cuda::compute: the attention computation on the GPU, same contract and results as
// attn::cpu::computeReference (attention_ref.cpp) to float precision (tests/parity).
//
// Data flow, one call: upload inputs → projections (cuBLAS) → per-head scores (one strided batched cuBLAS
// GEMM, or Q_h·A_q / K_h·A_k GEMMs + the additive kernel) → fused mask + softmax kernel → per-head P·V
// (one strided batched GEMM straight into the concat) → W^O (cuBLAS) → download. All device memory lives in
// the persistent Workspace (workspace.h).
//
// Grouped-query attention (H_kv < H): K and V hold H_kv heads; the score and P·V GEMMs run once per KV head,
// batched over the H / H_kv query heads of its group with the KV head's block shared (batch stride 0), so no
// K or V is copied per query head. With H_kv = H that is the one GEMM batched over every head, as before.
//
// Layouts: every logical matrix (Row-layout meaning) is stored in the session's order: row-major in
// Layout::Row, column-major in Layout::Column (the Column layout's transposed matrices, row-major, are
// exactly that). cuBLAS is column-major, so Column maps onto it directly and Row computes Cᵀ = Bᵀ·Aᵀ. The
// same code path then produces every Column result as the transpose of the Row one, and the host buffers
// of AttentionInput/AttentionResult are uploaded and downloaded as they are.
#include "cuda_backend.h"
#include "cuda_status.h"
#include "host_tasks.h"
#include "kernels.h"
#include "in_flight.h"
#include "staged_copy.h"
#include "workspace.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace attn::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// Stored shape and addressing of logical matrices in the session's layout.
struct Storage {
    bool col = false;  // column-major (Layout::Column)

    // Leading dimension of a stored rows×cols logical matrix.
    long long ld(long long rows, long long cols) const { return col ? rows : cols; }
    // Offset between consecutive column blocks `width` wide (one per head) of a matrix with `rows` rows.
    long long headStride(long long width, long long rows) const { return col ? width * rows : width; }
    // Resizes a host matrix to hold a rows×cols logical matrix in this storage (transposed for Column).
    template <class Mat>
    void resize(Mat& m, int rows, int cols) const
    {
        if (col) m.resize(cols, rows);
        else m.resize(rows, cols);
    }
};

// C = alpha·op(A)·op(B) for `batch` problems. All are logical matrices in the Storage's order; m×n is
// the shape of C, k the inner size; ld* are leading dimensions of the stored A, B, C (as Storage::ld of
// the matrix before op) and stride* the distance between batch entries (0 = the same matrix for all).
Status gemm(cublasHandle_t h, const Storage& st, bool transA, bool transB, int m, int n, int k, float alpha,
            const float* A, long long lda, long long strideA, const float* B, long long ldb, long long strideB,
            float* C, long long ldc, long long strideC, int batch)
{
    const float beta = 0.0f;
    const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (st.col) {
        ATTNSCOPE_CUBLAS_TRY(cublasSgemmStridedBatched(h, opA, opB, m, n, k, &alpha, A, int(lda), strideA, B, int(ldb),
                                                       strideB, &beta, C, int(ldc), strideC, batch));
    } else {
        // Row-major C is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and row-major A, B are column-major Aᵀ, Bᵀ.
        ATTNSCOPE_CUBLAS_TRY(cublasSgemmStridedBatched(h, opB, opA, n, m, k, &alpha, B, int(ldb), strideB, A, int(lda),
                                                       strideA, &beta, C, int(ldc), strideC, batch));
    }
    return {};
}

// The workspace buffer `b` for `count` floats (or flags) of a host buffer, and their copy into it as a piece of the
// call's upload (stagedUpload, once every piece is listed).
template <class T>
Status upload(Workspace& ws, Buf b, const T* host, std::size_t count, T*& dev, std::vector<DevicePiece>& ups)
{
    ATTNSCOPE_RETURN_IF_ERROR(ws.get(b, count, dev));
    if (count) ups.push_back({dev, host, count * sizeof(T)});
    return {};
}

template <class T>
Status download(Workspace& ws, T* host, const T* dev, std::size_t count)
{
    if (count) ATTNSCOPE_CUDA_TRY(cudaMemcpyAsync(host, dev, count * sizeof(T), cudaMemcpyDeviceToHost, ws.stream()));
    return {};
}

// Projection C (tokens × width) = In (tokens × M)·W (M × width) + bias, all in the Storage's order.
Status project(Workspace& ws, const Storage& st, const float* in, const float* w, const float* bias, int tokens, int M,
               int width, float* c)
{
    ATTNSCOPE_RETURN_IF_ERROR(gemm(ws.blas(), st, false, false, tokens, width, M, 1.0f, in, st.ld(tokens, M), 0, w,
                              st.ld(M, width), 0, c, st.ld(tokens, width), 0, 1));
    if (bias) ATTNSCOPE_CUDA_TRY(launchAddBias(c, bias, tokens, width, st.col, ws.stream()));
    return {};
}

// ---- The finiteness check of a device result -------------------------------------------------------------------
// One slot per checked matrix, each the first bad key launchFirstNonFinite found (~0: none).
enum : int { kSlotQ, kSlotK, kSlotV, kSlotScores, kSlotWeights, kSlotConcat, kSlotOutput, kFinitenessSlots };
constexpr unsigned long long kNoneBad = ~0ull;

// The message of checkResultFinite (core/src/compute.cpp) for the same result, from the first bad keys: the first
// failure in its order (Q, K, V; then per head scores, weights, output; then the output) with [r][c] in the stored
// matrix (HeadResult's, in the session's layout).
Status finitenessStatus(const std::array<unsigned long long, kFinitenessSlots>& bad, const Storage& st, const Dims& d,
                        bool hasWo)
{
    const long long T = d.T, S = d.S, H = d.H;
    auto fail = [](const std::string& what, unsigned long long key, long long storedCols) {
        return invalidArgument(what + "[" + std::to_string(key / storedCols) + "][" + std::to_string(key % storedCols) +
                               "] overflowed float32 (|value| > 3.4e38); scale the inputs down");
    };
    // Stored columns of a logical rows × cols matrix.
    auto cols = [&](long long rows, long long c) { return st.col ? rows : c; };
    if (bad[kSlotQ] != kNoneBad) return fail("Q", bad[kSlotQ], cols(T, H * d.dq));
    if (bad[kSlotK] != kNoneBad) return fail("K", bad[kSlotK], cols(S, (long long)d.kvHeads() * d.dk));
    if (bad[kSlotV] != kNoneBad) return fail("V", bad[kSlotV], cols(S, (long long)d.kvHeads() * d.dv));
    // The first head with any bad map; within it scores before weights before output.
    const unsigned long long mapBlock = (unsigned long long)(T * S), outBlock = (unsigned long long)(T * d.dv);
    auto headOf = [](unsigned long long key, unsigned long long block) {
        return key == kNoneBad ? std::numeric_limits<unsigned long long>::max() : key / block;
    };
    const unsigned long long hs = headOf(bad[kSlotScores], mapBlock), hw = headOf(bad[kSlotWeights], mapBlock),
                             ho = headOf(bad[kSlotConcat], outBlock);
    const unsigned long long h = std::min({hs, hw, ho});
    if (h != std::numeric_limits<unsigned long long>::max()) {
        const std::string head = "head " + std::to_string(h) + " ";
        if (hs == h) return fail(head + "scores", bad[kSlotScores] % mapBlock, cols(T, S));
        if (hw == h) return fail(head + "weights", bad[kSlotWeights] % mapBlock, cols(T, S));
        return fail(head + "output", bad[kSlotConcat] % outBlock, cols(T, d.dv));
    }
    if (hasWo && bad[kSlotOutput] != kNoneBad) return fail("output", bad[kSlotOutput], cols(T, d.O));
    return {};
}

// ---- Whole maps to the host ---------------------------------------------------------------------------------------
// The pieces through the workspace's pinned staging slots (staged_copy.h), or straight when they are small or no
// pinned memory is to be had, on the workspace's copy stream, each after its `ready` event; returns with every piece
// in its destination.
Status downloadStaged(Workspace& ws, const std::vector<HostPiece>& pieces)
{
    std::size_t total = 0;
    for (const HostPiece& p : pieces) total += p.count * sizeof(float);
    if (total >= kStagedFromBytes) {
        const Status s = ws.staging().ensure();
        if (s.ok()) return stagedDownload(ws.copyStream(), ws.staging(), pieces);
        if (s.code != StatusCode::ResourceExhausted) return s;
        // No pinned memory to be had: the direct copies below still work, slower.
    }
    ATTNSCOPE_RETURN_IF_ERROR(directDownload(ws.copyStream(), pieces));
    ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ws.copyStream()));
    return {};
}

// Every head's scores and weights of the result in the workspace (dScores, dWeights: T×S floats a head, one head
// after another) as pieces bound for out's HeadResults, scores then weights of each head, which are resized to the
// storage's shape with their `masked`. The copied path's download and attn::fetchDeviceMaps's.
std::vector<HostPiece> headHostPieces(const Storage& st, int T, int S, const float* dScores, const float* dWeights,
                                    AttentionResult& out)
{
    const std::size_t TS = std::size_t(T) * S;
    std::vector<HostPiece> pieces;
    pieces.reserve(2 * out.heads.size());
    for (std::size_t h = 0; h < out.heads.size(); ++h) {
        HeadResult& r = out.heads[h];
        st.resize(r.scores, T, S);
        st.resize(r.weights, T, S);
        st.resize(r.masked, T, S);
        pieces.push_back({r.scores.data(), dScores + h * TS, TS});
        pieces.push_back({r.weights.data(), dWeights + h * TS, TS});
    }
    return pieces;
}

// Every head's maps into out's HeadResults through downloadMaps, in one go; with a mask, the mask once, into the
// first head's `masked` (spreadMask gives the others theirs). The copies may still be in flight on the stream when
// it returns.
Status downloadHeadMaps(Workspace& ws, const Storage& st, int T, int S, bool anyMask, const float* dScores,
                        const float* dWeights, const std::uint8_t* dMask, AttentionResult& out)
{
    ATTNSCOPE_RETURN_IF_ERROR(downloadStaged(ws, headHostPieces(st, T, S, dScores, dWeights, out)));
    // The mask as the softmax read it (the scores' storage order, as HeadResult::masked stores it).
    if (anyMask) ATTNSCOPE_RETURN_IF_ERROR(download(ws, out.heads[0].masked.data(), dMask, std::size_t(T) * S));
    return {};
}

// Head h's `masked` after downloadHeadMaps (and the stream's copies): every head has the same mask, and
// HeadResult's contract still wants it per head (the views, figures, ranges and exports read it there), so it is
// copied from the first head's, never rebuilt; with no mask it is all zeros.
void spreadMask(AttentionResult& out, bool anyMask, int h)
{
    HeadResult& r = out.heads[std::size_t(h)];
    if (!anyMask) r.masked.setZero();
    else if (h > 0) std::memcpy(r.masked.data(), out.heads[0].masked.data(), std::size_t(r.masked.size()));
}

double elapsedMs(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? double(ms) : 0.0;
}

Status run(Workspace& ws, const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    const Storage st{cfg.layout == Layout::Column};
    const int T = d.T, S = d.S, H = d.H, M = d.M, O = d.O, A = d.A;
    const int Hkv = d.kvHeads(), group = d.group();
    // Widths: Q and the concatenation have H heads, K and V H_kv heads.
    const int wq = H * d.dq, wk = Hkv * d.dk, wv = Hkv * d.dv, wc = H * d.dv;
    const std::size_t TS = std::size_t(T) * S;
    const bool direct = cfg.mode == Mode::Direct;
    const bool additive = cfg.score == Score::Additive;
    const bool hasWo = in.Wo.size() > 0;
    const bool anyMask = in.mask.any();
    // The mask is built on the device (buildMaskKernel) from its parts, so the host does nothing per cell to make
    // it; a result whose maps come back gets it downloaded once, then copied to every head on host threads.
    const bool fullyMaskedRule = anyMask && std::isinf(in.mask.fill);
    cudaStream_t stream = ws.stream();
    cublasHandle_t blas = ws.blas();

    out.layout = cfg.layout;
    out.scale = effectiveScale(cfg, d);
    out.heads.resize(H);

    // Everything this call will hold on the device, checked up front for one clear message instead of a
    // failure halfway through the allocations.
    {
        const std::size_t f = sizeof(float);
        std::size_t bytes = 2 * f * TS * H + (anyMask ? TS : 0);                                  // scores, weights, mask
        bytes += f * (std::size_t(T) * wq + std::size_t(S) * wk + std::size_t(S) * wv);          // Q, K, V
        bytes += f * (in.X.size() + in.Xkv.size() + in.Wq.size() + in.Wk.size() + in.Wv.size()); // inputs
        bytes += f * (in.Wo.size() + std::size_t(T) * wc + (hasWo ? std::size_t(T) * O : 0));     // W^O, concat, output
        if (additive)
            bytes += f * ((std::size_t(H) * T + std::size_t(Hkv) * S) * A + in.additive.Aq.size() + in.additive.Ak.size());
        if (anyMask) bytes += std::size_t(in.mask.custom.size()) + S + 2 * sizeof(int) * std::size_t(T);  // its parts
        ATTNSCOPE_RETURN_IF_ERROR(ws.checkFits(bytes, std::to_string(H) + " head(s) × " + std::to_string(T) + " queries × " +
                                                     std::to_string(S) + " keys"));
    }

    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(0), stream));
    // [upload] Every input listed as a piece, then all of them through the pinned staging (stagedUpload).
    std::vector<DevicePiece> ups;
    float *dQ = nullptr, *dK = nullptr, *dV = nullptr;
    const float *dBq = nullptr, *dBk = nullptr, *dBv = nullptr, *dBo = nullptr;
    float *dX = nullptr, *dXkv = nullptr, *dWq = nullptr, *dWk = nullptr, *dWv = nullptr, *dWo = nullptr;
    float *dAq = nullptr, *dAk = nullptr, *dWvec = nullptr, *tmp = nullptr;
    std::uint8_t* dMask = nullptr;
    if (direct) {
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Q, in.Q.data(), in.Q.size(), dQ, ups));
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::K, in.K.data(), in.K.size(), dK, ups));
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::V, in.V.data(), in.V.size(), dV, ups));
    } else {
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::X, in.X.data(), in.X.size(), dX, ups));
        if (cfg.mode == Mode::Cross) ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Xkv, in.Xkv.data(), in.Xkv.size(), dXkv, ups));
        else dXkv = dX;
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Wq, in.Wq.data(), in.Wq.size(), dWq, ups));
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Wk, in.Wk.data(), in.Wk.size(), dWk, ups));
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Wv, in.Wv.data(), in.Wv.size(), dWv, ups));
        if (in.bq.size()) {
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Bq, in.bq.data(), in.bq.size(), tmp, ups));
            dBq = tmp;
        }
        if (in.bk.size()) {
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Bk, in.bk.data(), in.bk.size(), tmp, ups));
            dBk = tmp;
        }
        if (in.bv.size()) {
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Bv, in.bv.data(), in.bv.size(), tmp, ups));
            dBv = tmp;
        }
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Q, std::size_t(T) * wq, dQ));
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::K, std::size_t(S) * wk, dK));
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::V, std::size_t(S) * wv, dV));
    }
    if (hasWo) {
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Wo, in.Wo.data(), in.Wo.size(), dWo, ups));
        if (in.bo.size()) {
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Bo, in.bo.data(), in.bo.size(), tmp, ups));
            dBo = tmp;
        }
    }
    if (additive) {
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Aq, in.additive.Aq.data(), in.additive.Aq.size(), dAq, ups));
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Ak, in.additive.Ak.data(), in.additive.Ak.size(), dAk, ups));
        ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Wvec, in.additive.wv.data(), in.additive.wv.size(), dWvec, ups));
    }
    int* dKeyOpen = nullptr;
    // The mask's parts are listed too; `lens` lives to stagedUpload, which has copied every piece out of its
    // source when it returns (into the staging, or, straight, as a cudaMemcpyAsync from pageable memory does:
    // CUDA runtime API, "API synchronization behavior").
    std::vector<int> lens;
    if (anyMask) {
        // The custom mask is already in the scores' storage order (Row T×S, Column S×T, row-major), the one
        // buildMaskKernel indexes; one valid length per query (a single value applies to all).
        const std::uint8_t* dPad = nullptr;
        const int* dLens = nullptr;
        const std::uint8_t* dCustom = nullptr;
        std::uint8_t* bytes = nullptr;
        int* ints = nullptr;
        if (!in.mask.keyPadding.empty()) {
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::KeyPadding, in.mask.keyPadding.data(), in.mask.keyPadding.size(), bytes, ups));
            dPad = bytes;
        }
        if (!in.mask.validLens.empty()) {
            lens = in.mask.validLens.size() == 1 ? std::vector<int>(std::size_t(T), in.mask.validLens[0]) : in.mask.validLens;
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::ValidLens, lens.data(), lens.size(), ints, ups));
            dLens = ints;
        }
        if (in.mask.custom.size() > 0) {
            ATTNSCOPE_RETURN_IF_ERROR(upload(ws, Buf::Custom, in.mask.custom.data(), std::size_t(in.mask.custom.size()), bytes, ups));
            dCustom = bytes;
        }
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Mask, TS, dMask));
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::KeyOpen, std::size_t(T), dKeyOpen));
        ATTNSCOPE_RETURN_IF_ERROR(stagedUpload(stream, ws.staging(), ups));
        ups.clear();
        ATTNSCOPE_CUDA_TRY(cudaMemsetAsync(dKeyOpen, 0, sizeof(int) * std::size_t(T), stream));
        ATTNSCOPE_CUDA_TRY(launchBuildMask(dMask, T, S, st.col, in.mask.causal, dPad, dLens, dCustom, dKeyOpen, stream));
    }
    ATTNSCOPE_RETURN_IF_ERROR(stagedUpload(stream, ws.staging(), ups));
    float *dScores = nullptr, *dWeights = nullptr, *dConcat = nullptr, *dOutput = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Scores, TS * H, dScores));
    ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Weights, TS * H, dWeights));
    ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Concat, std::size_t(T) * wc, dConcat));
    if (hasWo) ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Output, std::size_t(T) * O, dOutput));
    // The first bad key of each checked matrix ([checks] below; the softmax checks the scores as it reads them).
    unsigned long long* dFlags = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Flags, kFinitenessSlots, dFlags));
    ATTNSCOPE_CUDA_TRY(cudaMemsetAsync(dFlags, 0xff, kFinitenessSlots * sizeof(unsigned long long), stream));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(1), stream));
    // The copy stream writes the staging's slots (downloadStaged) only once the uploads have read them.
    ATTNSCOPE_CUDA_TRY(cudaStreamWaitEvent(ws.copyStream(), ws.event(1), 0));

    // [projections]
    if (!direct) {
        ATTNSCOPE_RETURN_IF_ERROR(project(ws, st, dX, dWq, dBq, T, M, wq, dQ));
        ATTNSCOPE_RETURN_IF_ERROR(project(ws, st, dXkv, dWk, dBk, S, M, wk, dK));
        ATTNSCOPE_RETURN_IF_ERROR(project(ws, st, dXkv, dWv, dBv, S, M, wv, dV));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(2), stream));

    // [scores] per head h: Q_h (T×d_q) is the column block h of Q; K_h is the block h / group of K.
    if (additive) {
        float *dQa = nullptr, *dKa = nullptr;
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Qa, std::size_t(H) * T * A, dQa));
        ATTNSCOPE_RETURN_IF_ERROR(ws.get(Buf::Ka, std::size_t(Hkv) * S * A, dKa));
        // Q_h·A_q (T×A) for every query head and K_g·A_k (S×A) for every KV head; A_q, A_k are shared (batch
        // stride 0).
        ATTNSCOPE_RETURN_IF_ERROR(gemm(blas, st, false, false, T, A, d.dq, 1.0f, dQ, st.ld(T, wq), st.headStride(d.dq, T),
                                  dAq, st.ld(d.dq, A), 0, dQa, st.ld(T, A), (long long)T * A, H));
        ATTNSCOPE_RETURN_IF_ERROR(gemm(blas, st, false, false, S, A, d.dk, 1.0f, dK, st.ld(S, wk), st.headStride(d.dk, S),
                                  dAk, st.ld(d.dk, A), 0, dKa, st.ld(S, A), (long long)S * A, Hkv));
        ATTNSCOPE_CUDA_TRY(launchAdditiveScores(dQa, dKa, dWvec, dScores, H, group, T, S, A, st.col, stream));
    } else if (group == 1) {
        // scores_h (T×S) = s·Q_h·K_hᵀ, the scale folded into the GEMM (scores are stored after scaling).
        ATTNSCOPE_RETURN_IF_ERROR(gemm(blas, st, false, true, T, S, d.dk, out.scale, dQ, st.ld(T, wq), st.headStride(d.dq, T),
                                  dK, st.ld(S, wk), st.headStride(d.dk, S), dScores, st.ld(T, S), (long long)TS, H));
    } else {
        // The same per KV head g, batched over its group's query heads, K_g shared.
        for (int g = 0; g < Hkv; ++g)
            ATTNSCOPE_RETURN_IF_ERROR(gemm(blas, st, false, true, T, S, d.dk, out.scale,
                                      dQ + (long long)g * group * st.headStride(d.dq, T), st.ld(T, wq),
                                      st.headStride(d.dq, T), dK + (long long)g * st.headStride(d.dk, S), st.ld(S, wk), 0,
                                      dScores + (long long)g * group * (long long)TS, st.ld(T, S), (long long)TS, group));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(3), stream));

    // [softmax] masked, over the keys of each query; scores stay as they are (HeadResult keeps both). It checks the
    // scores' finiteness as it reads them ([checks]).
    ATTNSCOPE_CUDA_TRY(launchMaskedSoftmax(dScores, dMask, in.mask.fill, dWeights, H, T, S, st.col, dFlags + kSlotScores, stream));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(4), stream));

    // [pv] O_h (T×d_v) = P_h·V_h, written as column block h of the concat; per KV head when grouped.
    for (int g = 0; g < (group == 1 ? 1 : Hkv); ++g) {
        const int first = g * group, batch = group == 1 ? H : group;
        ATTNSCOPE_RETURN_IF_ERROR(gemm(blas, st, false, false, T, d.dv, S, 1.0f, dWeights + (long long)first * (long long)TS,
                                  st.ld(T, S), (long long)TS, dV + (long long)g * st.headStride(d.dv, S), st.ld(S, wv),
                                  group == 1 ? st.headStride(d.dv, S) : 0,
                                  dConcat + (long long)first * st.headStride(d.dv, T), st.ld(T, wc),
                                  st.headStride(d.dv, T), batch));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(5), stream));

    // [output] concat·W^O + b^O
    if (hasWo) ATTNSCOPE_RETURN_IF_ERROR(project(ws, st, dConcat, dWo, dBo, T, wc, O, dOutput));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(6), stream));

    // [checks] Products can overflow float32 though the inputs are finite (validate checks those): every matrix
    // of the result is checked on the device and only the first bad key of each comes back. The scores were checked
    // by the softmax as it read them; the weights need no pass of their own: a row of finite scores has a finite
    // maximum, each exp(s − max) ≤ 1 and a sum ≥ 1 (or, every key masked with -inf, zeros), so a weight is
    // non-finite only where its row's scores are, and checkResultFinite (core/src/compute.cpp), which names a head's
    // scores before its weights, names the scores then. That pass read H·T·S floats: 0.7 ms at n = 8192 on an H100.
    const long long nQ = (long long)T * wq, nK = (long long)S * wk, nV = (long long)S * wv;
    ATTNSCOPE_CUDA_TRY(launchFirstNonFinite(dQ, nQ, 0, 0, 0, dFlags + kSlotQ, stream));
    ATTNSCOPE_CUDA_TRY(launchFirstNonFinite(dK, nK, 0, 0, 0, dFlags + kSlotK, stream));
    ATTNSCOPE_CUDA_TRY(launchFirstNonFinite(dV, nV, 0, 0, 0, dFlags + kSlotV, stream));
    // Row: the concat's heads are column blocks d_v wide, reordered head by head; Column: already head by head.
    ATTNSCOPE_CUDA_TRY(launchFirstNonFinite(dConcat, (long long)T * wc, wc, T, st.col ? 0 : d.dv, dFlags + kSlotConcat,
                                            stream));
    if (hasWo)
        ATTNSCOPE_CUDA_TRY(launchFirstNonFinite(dOutput, (long long)T * O, 0, 0, 0, dFlags + kSlotOutput, stream));
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(7), stream));

    // [download] Q, K, V, the concat and the output (tokens × widths: 84 MB at n = 8192, d_model 512) into the
    // result's buffers (Eigen's resize keeps them when the shape is unchanged), through the pinned staging as the
    // maps are (downloadStaged: straight copies below its threshold, a window's sizes), on the workspace's copy
    // stream. A pageable copy runs at the driver's one-thread rate (pageable_device_to_host_gbs: 11-14 GB/s on the
    // H100's host, against 55 GB/s pinned), and with the maps kept on the device these are all that comes back.
    // Q, K and V cross while the scores, softmax and weights·V still compute (their `ready` event: the projections
    // done), and host threads cut them into the heads' views while the rest computes; the concat and output follow
    // the kernels, then (unless they stay on the device) every head's maps and the mask, once.
    const auto tEnqueued = Clock::now();
    if (direct) {
        out.Q = in.Q;
        out.K = in.K;
        out.V = in.V;
    } else {
        st.resize(out.Q, T, wq);
        st.resize(out.K, S, wk);
        st.resize(out.V, S, wv);
        ATTNSCOPE_RETURN_IF_ERROR(downloadStaged(ws, {{out.Q.data(), dQ, std::size_t(out.Q.size()), ws.event(2)},
                                                      {out.K.data(), dK, std::size_t(out.K.size()), ws.event(2)},
                                                      {out.V.data(), dV, std::size_t(out.V.size()), ws.event(2)}}));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(9), ws.copyStream()));
    // Each head's views of Q, K and V (copies, HeadResult's contract), on host threads while the kernels finish.
    auto inputViews = [&](int h) {
        HeadResult& r = out.heads[h];
        if (st.col) {
            r.Q = out.Q.middleRows(h * d.dq, d.dq);
            r.K = out.K.middleRows(d.kvHead(h) * d.dk, d.dk);
            r.V = out.V.middleRows(d.kvHead(h) * d.dv, d.dv);
        } else {
            r.Q = out.Q.middleCols(h * d.dq, d.dq);
            r.K = out.K.middleCols(d.kvHead(h) * d.dk, d.dk);
            r.V = out.V.middleCols(d.kvHead(h) * d.dv, d.dv);
        }
    };
    // On the pool, one task a head; the group waits for them before leaving, whichever way (they write into `out`).
    TaskGroup views;
    for (int h = 0; h < H; ++h) views.run([&inputViews, h] { inputViews(h); });
    // The checks' first bad keys, only now: a copy into pageable memory returns once it is done (CUDA runtime API,
    // "API synchronization behavior"), so enqueued after the checks it held the host until the kernels were done,
    // and Q, K and V crossed only after them (loan 3 on the H100: 4.8 ms of copies after the kernels at n = 8192).
    std::array<unsigned long long, kFinitenessSlots> firstBad{};
    ATTNSCOPE_RETURN_IF_ERROR(download(ws, firstBad.data(), dFlags, firstBad.size()));
    ATTNSCOPE_CUDA_TRY(cudaEventSynchronize(ws.event(7)));
    ATTNSCOPE_CUDA_TRY(cudaGetLastError());
    const auto tKernels = Clock::now();
    ATTNSCOPE_RETURN_IF_ERROR(finitenessStatus(firstBad, st, d, hasWo));
    std::vector<HostPiece> tail;
    st.resize(out.concat, T, wc);
    tail.push_back({out.concat.data(), dConcat, std::size_t(out.concat.size())});
    if (hasWo) {
        st.resize(out.output, T, O);
        tail.push_back({out.output.data(), dOutput, std::size_t(out.output.size())});
    }
    ATTNSCOPE_RETURN_IF_ERROR(downloadStaged(ws, tail));
    out.mapsOnDevice = cfg.mapsOnDevice;
    std::vector<int> keyOpen;
    if (fullyMaskedRule) {
        keyOpen.resize(std::size_t(T));
        ATTNSCOPE_RETURN_IF_ERROR(download(ws, keyOpen.data(), static_cast<const int*>(dKeyOpen), keyOpen.size()));
    }
    const auto tMaps = Clock::now();
    if (cfg.mapsOnDevice) {
        for (HeadResult& r : out.heads) {
            r.scores.resize(0, 0);
            r.weights.resize(0, 0);
            r.masked.resize(0, 0);
        }
    } else {
        ATTNSCOPE_RETURN_IF_ERROR(downloadHeadMaps(ws, st, T, S, anyMask, dScores, dWeights, dMask, out));
    }
    ATTNSCOPE_CUDA_TRY(cudaEventRecord(ws.event(8), stream));
    ATTNSCOPE_CUDA_TRY(cudaEventSynchronize(ws.event(8)));
    // Kernel execution errors (e.g. an illegal address) surface at the first synchronising call.
    ATTNSCOPE_CUDA_TRY(cudaGetLastError());

    // The rest of each head's views and flags, on the host (copies, counted with the transfers), one head per host
    // thread.
    const auto tHost = Clock::now();
    views.wait();  // rethrows what a view's copy threw (std::bad_alloc)
    if (!hasWo) out.output = out.concat;
    // A query is fully masked when fill is -inf and every one of its keys is masked: exactly when the
    // softmax kernel's running maximum stays -inf (scores are finite), i.e. when it wrote a zero row.
    std::vector<int> fullyMasked;
    for (int i = 0; i < static_cast<int>(keyOpen.size()); ++i)
        if (!keyOpen[std::size_t(i)]) fullyMasked.push_back(i);
    // Per head, on the host pool's threads (host_tasks.h): the copies are independent and bound by the host's memory,
    // which one thread does not saturate (host_memcpy_gbs in the GPU bounds is measured on every thread).
    forEachOnPool(H, [&](int h) {
        HeadResult& r = out.heads[h];
        r.output = st.col ? Matrix(out.concat.middleRows(h * d.dv, d.dv)) : Matrix(out.concat.middleCols(h * d.dv, d.dv));
        if (!cfg.mapsOnDevice) spreadMask(out, anyMask, h);
        r.fullyMaskedQueries = fullyMasked;
    });
    const auto tEnd = Clock::now();
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };

    PhaseTimings& tm = out.timings;
    tm.projections = elapsedMs(ws.event(1), ws.event(2));
    tm.scores = elapsedMs(ws.event(2), ws.event(3));
    tm.softmax = elapsedMs(ws.event(3), ws.event(4));
    tm.pv = elapsedMs(ws.event(4), ws.event(5));
    tm.output = elapsedMs(ws.event(5), ws.event(6));
    tm.checks = elapsedMs(ws.event(6), ws.event(7));
    tm.copyParts.upload = elapsedMs(ws.event(0), ws.event(1));
    // What the copies add after the kernels: Q, K and V's download where it ran past them (event 9 on the copy
    // stream after them, event 7 after the kernels; they cross during the kernels otherwise, and when the kernels
    // were done before the copies were even enqueued, all of it), then the concat, output and flags.
    const double qkvPast = std::max(0.0, elapsedMs(ws.event(7), ws.event(9)));
    tm.copyParts.download = std::min(qkvPast, ms(tEnqueued, tKernels)) + ms(tKernels, tMaps);
    // With the maps on the device nothing T×S comes back: the heads' emptied buffers count as host work.
    tm.copyParts.maps = cfg.mapsOnDevice ? 0.0 : ms(tMaps, tHost);
    tm.copyParts.host = cfg.mapsOnDevice ? ms(tMaps, tEnd) : ms(tHost, tEnd);
    tm.copies = tm.copyParts.upload + tm.copyParts.download + tm.copyParts.maps + tm.copyParts.host;
    return {};
}

} // namespace

// The result with `generation`, if the device still holds it and no compute is replacing it; under the lock.
Status fetchHeld(const Workspace& ws, std::uint64_t generation, DeviceResult& r)
{
    if (generation == 0)
        return makeError(StatusCode::Unavailable, "fetch device maps: the result was not computed on the CUDA device");
    r = ws.result();
    if (r.generation != generation)
        return makeError(StatusCode::Unavailable,
                         "fetch device maps: the device no longer holds this result (generation " + std::to_string(generation) +
                             "; a later compute on the device replaced it): compute it again to bring its maps back");
    return {};
}

Status fetchMaps(AttentionResult& out, const std::function<bool()>& carryOn)
{
    if (!out.mapsOnDevice) return {};  // the maps are on the host already (a CPU result, or the copied path's)
    Workspace& ws = Workspace::instance();
    const Status replacing = makeError(
        StatusCode::Unavailable, "fetch device maps: a compute on the device is replacing this result: compute it again to bring its maps back");
    if (ws.beingReplaced()) return replacing;
    DeviceResult r;
    {
        std::lock_guard<std::mutex> lock(ws.mutex());
        ATTNSCOPE_RETURN_IF_ERROR(fetchHeld(ws, out.deviceGeneration, r));
    }
    const Storage st{r.columnMajor};
    if (int(out.heads.size()) != r.H || (out.layout == Layout::Column) != r.columnMajor)
        return makeError(StatusCode::InvalidArgument,
                         "fetch device maps: the result has " + std::to_string(out.heads.size()) +
                             " head(s) in its layout, the device's " + std::to_string(r.H));
    // The buffers' addresses do not change while the generation holds (a compute that could grow them publishes a
    // new one), so they are read once; each piece checks the generation again under the lock.
    const auto* dScores = static_cast<const float*>(ws.buffer(Buf::Scores));
    const auto* dWeights = static_cast<const float*>(ws.buffer(Buf::Weights));
    const auto* dMask = static_cast<const std::uint8_t*>(ws.buffer(Buf::Mask));
    const std::vector<HostPiece> pieces = headHostPieces(st, r.T, r.S, dScores, dWeights, out);
    // One map at a time, the lock released between them: a frame's read (a tile, a texture) or another thread's
    // compute waits for one map's copy at most (n = 8192: 256 MiB, ~5 ms at the pinned link's rate), never for all
    // of them; and `carryOn` may stop the fetch between maps (the window's worker, when newer work came).
    auto onePiece = [&](const HostPiece* piece) -> Status {
        if (carryOn && !carryOn())
            return makeError(StatusCode::Cancelled, "fetch device maps: stopped (newer work came first)");
        if (ws.beingReplaced()) return replacing;
        std::lock_guard<std::mutex> lock(ws.mutex());
        DeviceResult now;
        ATTNSCOPE_RETURN_IF_ERROR(fetchHeld(ws, out.deviceGeneration, now));
        auto run = [&]() -> Status {
            if (piece) ATTNSCOPE_RETURN_IF_ERROR(downloadStaged(ws, {*piece}));
            else ATTNSCOPE_RETURN_IF_ERROR(download(ws, out.heads[0].masked.data(), dMask, std::size_t(r.T) * r.S));
            ATTNSCOPE_CUDA_TRY(cudaStreamSynchronize(ws.stream()));
            ATTNSCOPE_CUDA_TRY(cudaGetLastError());
            return {};
        };
        Status s = run();
        if (!s.ok()) {
            (void)cudaStreamSynchronize(ws.stream());
            (void)cudaGetLastError();
        }
        return s;
    };
    Status s;
    for (std::size_t k = 0; k < pieces.size() && s.ok(); ++k) s = onePiece(&pieces[k]);
    if (s.ok() && r.hasMask) s = onePiece(nullptr);
    if (!s.ok()) {
        for (HeadResult& h : out.heads) {  // still a result whose maps are on the device, whole
            h.scores.resize(0, 0);
            h.weights.resize(0, 0);
            h.masked.resize(0, 0);
        }
        return s;
    }
    forEachOnPool(r.H, [&](int h) { spreadMask(out, r.hasMask, h); });
    out.mapsOnDevice = false;
    return {};
}

Status compute(const AttentionInput& in, const AttentionConfig& cfg, const Dims& d, AttentionResult& out)
{
    Workspace& ws = Workspace::instance();
    const InFlight inFlight(ws.computesInFlight());  // before the lock (Workspace::beingReplaced)
    std::lock_guard<std::mutex> lock(ws.mutex());
    // From here on the buffers may be overwritten: the previous result is no longer on the device, and this
    // one is not until it has succeeded.
    ws.forgetResult();
    out.deviceGeneration = 0;
    ATTNSCOPE_RETURN_IF_ERROR(ws.init());
    Status s = run(ws, in, cfg, d, out);
    if (s.ok()) {
        out.deviceGeneration =
            ws.publishResult({0, cfg.layout == Layout::Column, d.T, d.S, d.H, d.dv, in.mask.any()});
    } else {
        // Leave the stream idle and the (non-sticky) error state clear for the next call.
        (void)cudaStreamSynchronize(ws.stream());
        (void)cudaGetLastError();
    }
    return s;
}

} // namespace attn::cuda
