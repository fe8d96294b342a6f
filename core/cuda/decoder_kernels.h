// Launchers of the decoder forward's kernels (decoder_kernels.cuh), the device twins of core/model/blocks.cpp's
// functions. Plain pointers to device memory, row-major storage; each enqueues on `stream` and returns the launch
// error (execution errors surface at the next synchronisation). Defined once in decoder_launchers.inl, compiled by
// nvcc in decoder.cu and as host C++ over the emulator in tests/parity/emulated/emulated_decoder_kernels.cpp.
#pragma once

#include <cuda_runtime_api.h>

namespace attn::cuda {

// x (n × M) = columns ids[i] of E (M × V), times scale, plus rows pos0 + i of positions (maxPositions × M, or null).
cudaError_t launchEmbed(const int* ids, const float* E, int V, const float* positions, int pos0, float scale, float* x,
                        int n, int M, cudaStream_t stream);
// Every row of in (rows × width) normed into out (may be in): RMSNorm, or LayerNorm with layerNorm (beta may be
// null); plus residual (may be null, may be out).
cudaError_t launchNormRows(const float* in, const float* residual, const float* gamma, const float* beta, float* out,
                           long long rows, int width, float eps, bool layerNorm, cudaStream_t stream);
cudaError_t launchAddBiasRows(float* x, const float* bias, long long rows, int width, cudaStream_t stream);
cudaError_t launchAdd(float* out, const float* a, const float* b, long long count, cudaStream_t stream);
cudaError_t launchZeroColumns(float* x, long long rows, int stride, int col0, int width, cudaStream_t stream);
// RoPE in place on `heads` heads of D of rows × heads·D (positions pos0…, or blocks of period), half = R / 2.
cudaError_t launchRope(float* x, long long rows, int heads, int D, int half, const float* invFreq, int pos0, int period,
                       cudaStream_t stream);
// Causal (and sliding-window) soft-capped softmax of H blocks of T×S scores in place; lse T × H or null.
cudaError_t launchCausalSoftmax(float* scores, float* lse, int H, int T, int S, int pos0, int window, float softcap,
                                cudaStream_t stream);
// kind: FfnKind's order (0 SwiGLU, 1 GeGLU tanh: a = act(a)·b; 2 GELU tanh, 3 GELU erf: a = act(a + bias)).
cudaError_t launchActivation(float* a, const float* b, const float* bias, long long rows, int width, int kind,
                             cudaStream_t stream);
cudaError_t launchSoftcap(float* x, long long count, float cap, cudaStream_t stream);
// out[r] = −log softmax(logits[r])[targets[r]] for rows × V logits.
cudaError_t launchSurprise(const float* logits, const int* targets, float* out, int rows, int V, cudaStream_t stream);

} // namespace attn::cuda
