// What a decoder's weight matrices are stored as: each storage type's share of the weights, for the model's summary
// in the window's sidebar and `attnscope model`'s JSON. A quantized file's attention is the attention of those
// quantized weights, so a person comparing maps with another tool's needs to see at what precision they were made.
//
// Part of attnscope_model (core/model/decoder.cpp, beside DecoderModel::streamedWeightBytes); docs/model.md.
#pragma once

#include "attnscope/gguf.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attn {

struct DecoderModel;

struct WeightFormat {
    // The storage: the GGUF tensor's type for a view of the file, F32 for a dense matrix (a Hugging Face directory's
    // weights as loaded, whatever their dtype on disk; a dequantized load; a matrix the window edited).
    GgmlType type = GgmlType::F32;
    int matrices = 0;          // how many of the model's weight matrices (a fused tensor split at load counts as its parts)
    std::int64_t weights = 0;  // their values, inputs × outputs each
    std::size_t bytes = 0;     // as held: the file's bytes of a view, float32 bytes of a dense matrix
    double share = 0;          // of all the model's matrices' weights, 0..1

    double bitsPerWeight() const { return weights > 0 ? 8.0 * double(bytes) / double(weights) : 0.0; }
};

// Every weight matrix of `model` once: each layer's projections and feed-forward, the token embedding, and the LM
// head unless it is tied to the embedding. Norms, biases and GPT-2's position table (vectors and a small float32
// table) are not counted. Grouped by storage type, most weights first (ties: GGML's type order), each with its share.
std::vector<WeightFormat> weightFormats(const DecoderModel& model);

// Bits a weight over all of `formats` (8 × bytes ÷ weights); 0 when there are none.
double bitsPerWeight(const std::vector<WeightFormat>& formats);

} // namespace attn
