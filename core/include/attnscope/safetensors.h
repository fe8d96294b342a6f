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

// One tensor as the header lists it, checked against the file but not read.
struct SafetensorsEntry {
    std::string name;
    std::string dtype;                 // as written, e.g. "F32", "BF16", "I64"
    std::vector<std::int64_t> shape;   // as written; empty = scalar
    std::uint64_t count = 0;           // elements: the product of shape (at most 2^40)
    int elementBytes = 0;              // bytes per element of dtype
    std::uint64_t offset = 0;          // where its data starts, from the start of the file
    std::uint64_t bytes = 0;           // count × elementBytes
};

// The header of a safetensors file: its tensors (by name, in name order) and its string metadata.
struct SafetensorsHeader {
    std::vector<SafetensorsEntry> tensors;
    std::map<std::string, std::string> metadata;  // __metadata__ (the format says string → string)
    // Empty, or why __metadata__ is not an object of strings (e.g. "__metadata__.tokens: expected a string,
    // got an array"). Kept apart rather than refused: the model loader ignores the metadata, so a file that
    // bends that rule still loads as weights; readers that need the metadata (bundles) refuse it.
    std::string metadataError;
    std::uint64_t dataOffset = 0;                 // 8 + header size: where the data section starts
};

// Parses and checks the header of a safetensors file held in memory (`size` bytes from `bytes`; only the first
// 8 + header-size bytes are read, the values are not touched). `what` names it in messages.
// Returns ParseError naming the tensor and field for: a short file, a header size past the end or over
// kMaxSafetensorsHeader, header JSON that does not parse or is not an object, a missing/ill-typed
// dtype/shape/data_offsets, an unknown dtype, more than 8 dimensions or 2^40 elements, offsets out of the data
// or not matching shape × dtype size, overlapping tensors.
Expected<SafetensorsHeader> parseSafetensorsHeader(const std::uint8_t* bytes, std::size_t size, const std::string& what);

// Parses a whole safetensors file held in memory. `what` names it in messages (usually the path).
// Returns ParseError naming the tensor and field for: a short file, a header size past the end, header JSON
// that does not parse or is not an object, a missing/ill-typed dtype/shape/data_offsets, offsets out of the
// data or not matching shape × dtype size, overlapping tensors.
Expected<SafeTensorMap> parseSafetensors(const std::uint8_t* bytes, std::size_t size, const std::string& what);

// Reads and parses the file at `path` (IoError when it cannot be read or exceeds `maxBytes`).
Expected<SafeTensorMap> readSafetensorsFile(const std::string& path, std::size_t maxBytes = std::size_t(8) << 30);

} // namespace attn
