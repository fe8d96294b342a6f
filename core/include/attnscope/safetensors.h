// Reading safetensors files (https://github.com/huggingface/safetensors, "Format") into float32.
//
// Part of attnscope_model (core/model/). A file is an 8-byte little-endian header size N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
// Every header field is checked before anything is allocated; F32, F16 and BF16 tensors convert to float32,
// other dtypes (e.g. the I64 position_ids buffer Hugging Face saves) are listed but not readable as floats.
#pragma once

#include "attnscope/status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attn {

struct SafeTensor {
    std::string dtype;                 // as written in the header, e.g. "F32", "BF16", "I64"
    std::vector<std::int64_t> shape;   // as written; empty = scalar
    std::vector<float> values;         // row-major float32; empty when dtype is not F32/F16/BF16
};

using SafeTensorMap = std::map<std::string, SafeTensor>;

// Largest header this reader accepts (the safetensors reference implementation uses the same 100 MB cap).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100u << 20;

// Parses a whole safetensors file held in memory. `what` names it in messages (usually the path).
// Returns ParseError naming the tensor and field for: a short file, a header size past the end, header JSON
// that does not parse or is not an object, a missing/ill-typed dtype/shape/data_offsets, offsets out of the
// data or not matching shape × dtype size, overlapping tensors.
Expected<SafeTensorMap> parseSafetensors(const std::uint8_t* bytes, std::size_t size, const std::string& what);

// Reads and parses the file at `path` (IoError when it cannot be read or exceeds `maxBytes`).
Expected<SafeTensorMap> readSafetensorsFile(const std::string& path, std::size_t maxBytes = std::size_t(8) << 30);

} // namespace attn
