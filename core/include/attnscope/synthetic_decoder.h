// Synthetic decoders: a real model's shape (its config.json, word for word) with random weights, built through the
// same family code as the real model. For timing where the model files are not (issue 34: the GPU machines of
// `scripts/gpu_check.sh` have no model files), and for tests of shapes no tiny model has. The speed of a forward does
// not depend on the weights' values, so a synthetic model times like the real one held in float32.
//
// The tokenizer is byte-level BPE over the 256 bytes alone (no merges): any text encodes, one token per byte.
// Part of attnscope_model.
#pragma once

#include "attnscope/decoder.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// The shapes syntheticDecoder knows: "smollm2" (SmolLM2-135M: llama, 30 layers, 9 heads, 3 KV heads, d_model 576),
// "gemma3-270m" (Gemma 3 270M: 18 layers, 4 heads, 1 KV head of 256, d_model 640, a 262 144-token vocabulary,
// sliding windows of 512 on five layers of six).
std::vector<std::string> syntheticDecoderShapes();

// The model of `shape` with weights drawn from a fixed generator seeded by `seed` (the same seed, the same weights on
// every machine): matrices uniform with standard deviation 0.02, norm weights about 1, no biases. float32 throughout
// (format "synthetic"). `shape` is a known name, or any decoder's config.json: the file, or a model directory holding
// it (a model's shape without downloading its weights; the tests' long-context shapes). InvalidArgument naming the
// known shapes for another name; the config's own errors as a Hugging Face directory's load gives them; InvalidArgument
// for a vocabulary under the tokenizer's 256 bytes; ResourceExhausted, before allocating it, for a tensor that would
// take the weights past three quarters of the memory available (naming it and the sizes).
Expected<DecoderModel> syntheticDecoder(const std::string& shape, std::uint64_t seed = 1);

// The same from a config.json's text, named `name` in the model and its messages, its weights refused (ResourceExhausted,
// before allocating the tensor that would pass it) past `maxWeightBytes`: what syntheticDecoder calls with three quarters
// of the memory available; the fuzzer (tests/fuzz/fuzz_synthetic_decoder.cpp) with a few MiB.
Expected<DecoderModel> syntheticDecoderFromConfig(const std::string& configText, const std::string& name,
                                                  std::size_t maxWeightBytes, std::uint64_t seed = 1);

// The config.json text of `shape` (empty for an unknown shape): what syntheticDecoder parses.
std::string syntheticDecoderConfig(const std::string& shape);

} // namespace attn
