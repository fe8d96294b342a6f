// The decoder's runs on the GPU (issue 34), as decoder.cpp's run loop calls them: which backend a call runs on,
// and a forward or recompute of a DecoderRun on the device (core/cuda/decoder_device.h). Internal to
// attnscope_model; in a build without CUDA the device is never usable and Cuda is Unavailable.
#pragma once

#include "attnscope/decoder.h"

namespace attn::detail {

// Whether a decoder call with `backend` runs on the device: Cpu → false; Auto → true when a device is usable;
// Cuda → true, or Unavailable with the reason (no device, a build without CUDA).
Expected<bool> decoderOnDevice(Backend backend);

// Layers fromLayer…L−1 of `run` and its predictions on the device, the model's weights uploaded at the first call
// (model.device). From layer 0 the embedding is computed from run.encoding.ids; from a later layer the residual
// stream run.hidden[fromLayer] goes up. Everything the run keeps comes back (hidden, Q/K/V/concat and the heads'
// weights of a dense run, Q/K/V/lse in LazyLayers of a lazy one, finalHidden, lastLogits, surprise), as the CPU
// path leaves it. Errors: ResourceExhausted (device memory, naming sizes), Internal (a CUDA call).
Status deviceRecompute(DecoderModel& model, int fromLayer, DecoderRun& run, SurpriseUpdate surprise);

// appendTokens on the device (cuda::decoderAppend): the m new tokens' rows of every layer and their predictions,
// the kept K and V read where the device still holds them (run.deviceKVGeneration) or uploaded from the run. Grows
// the run as the CPU's append does (streams, Q/K/V/concat and the heads' weights of a dense run, LazyLayer::appended
// of a lazy one, finalHidden, the surprise of the new positions, lastLogits), all but the encoding (the caller's);
// the run is untouched on an error. The caller clears run.pinned first.
Status deviceAppend(DecoderModel& model, const std::vector<int>& ids, DecoderRun& run);

// One layer's unit of a scan on the device (cuda::decoderScan): logits (heads.size() × V, the last position's) of
// `run` with each head of `heads` at `layer` zeroed (patch null) or given patch's columns (n × H·D), the layers
// above recomputed on all of them at once. The run must be dense (its concat and streams kept).
Status deviceScanLayer(DecoderModel& model, const DecoderRun& run, int layer, const std::vector<int>& heads, const Matrix* patch,
                       Matrix& logits);

// The maps of a lazy run: `host` (its LazyMaps), read on the device instead for every layer the device still holds
// (DecoderRun::deviceLayers, deviceMapsGeneration): tiles and pooled overviews made by kernels from that layer's Q,
// K and log-sum-exp there, only they crossing the bus. A layer the device no longer holds, or a read the device
// refuses, is read from `host`. `host` itself when the run holds no layer on the device, or without CUDA.
std::shared_ptr<const AttentionMaps> lazyMapsWithDevice(std::shared_ptr<const LazyMaps> host, const DecoderRun& run,
                                                        const DecoderConfig& c);
// The device reads of maps lazyMapsWithDevice made (0 for any other maps).
long deviceMapReads(const AttentionMaps& maps);
// cuda::attentionChoices and forgetAttentionChoices (none without CUDA).
std::vector<DeviceAttentionChoice> deviceAttentionChoices();
void forgetDeviceAttentionChoices();

} // namespace attn::detail
