// Reading GGUF files (llama.cpp / ggml's model format) and dequantizing GGML's tensor types to float32.
//
// Part of attnscope_model (core/model/: gguf.cpp, ggml_quants.cpp). A GGUF file is, all little-endian:
//   "GGUF", uint32 version (2 or 3), uint64 tensor count, uint64 metadata count,
//   metadata: {string key, uint32 value type, value}...   (string = uint64 length + bytes, no terminator)
//   tensor infos: {string name, uint32 n_dims, uint64 dims[n_dims] (dims[0] varies fastest), uint32 ggml type,
//                  uint64 offset (from the start of the data section)}...
//   padding to `general.alignment` (default 32), then the data section.
// The file is memory-mapped; every count, length, size and offset is checked against the bytes that are really
// there before anything is allocated or read (as ggml's gguf_init_from_file_impl does), so a hostile or
// truncated file gets a Status naming the field, never a crash or a huge allocation.
#pragma once

#include "attnscope/status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn {

// [SECTION] GGML tensor types and dequantization (core/model/ggml_quants.cpp)

// GGML's tensor types, with GGML's numeric ids (ggml.h `enum ggml_type`; the gaps are ids ggml retired).
enum class GgmlType : std::uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35,
};

// "Q4_K", "BF16", ...; "unknown" for an id GGML does not define.
const char* ggmlTypeName(GgmlType type);
// Whether `type` is an id GGML defines (its block size and bytes are known), whether or not we dequantize it.
bool ggmlTypeKnown(GgmlType type);
// Elements per block (1 for F32/F16/BF16/I*, 32 for Q4_0..Q8_1, 256 for the K-quants); 0 when unknown.
std::int64_t ggmlBlockSize(GgmlType type);
// Bytes per block (4 for F32, 18 for Q4_0, 144 for Q4_K, ...); 0 when unknown.
std::size_t ggmlBlockBytes(GgmlType type);
// Whether dequantizeRow handles `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_NL, IQ4_XS.
bool ggmlTypeSupported(GgmlType type);
// The same list for messages: "F32, F16, BF16, …, IQ4_XS".
const char* ggmlSupportedTypeNames();

// Dequantizes `n` elements of `type` from `src` (`srcBytes` bytes available) into `dst` (n floats), block by
// block exactly as GGML lays them out (ggml-common.h block_*; ggml-quants.c dequantize_row_*). No allocation;
// this is the per-row building block for dequantizing whole tensors or tiles of them.
// Returns InvalidArgument when n < 0, n is not a multiple of the block size or srcBytes < n / block × block
// bytes; Unsupported naming the type for any type ggmlTypeSupported() refuses.
Status dequantizeRow(GgmlType type, const std::uint8_t* src, std::size_t srcBytes, float* dst, std::int64_t n);

// IEEE binary16 → float32 (subnormals, ±0, Inf and NaN kept), as GGML's GGML_FP16_TO_FP32.
float halfToFloat(std::uint16_t h);

// [SECTION] Metadata values

// GGUF's metadata value types, with the file's numeric ids.
enum class GgufValueType : std::uint32_t {
    Uint8 = 0, Int8 = 1, Uint16 = 2, Int16 = 3, Uint32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
    String = 8, Array = 9, Uint64 = 10, Int64 = 11, Float64 = 12,
};
// "uint8", ..., "string", "array", ...; "unknown" for other ids.
const char* ggufValueTypeName(GgufValueType type);

// One metadata value. Strings and numeric array elements point into the file's bytes, so a GgufValue is valid
// only while its GgufFile (or, for GgufFile::parse, the caller's bytes) lives.
struct GgufValue {
    GgufValueType type = GgufValueType::Uint8;

    // Scalars (type != Array): the one that matches `type` is set.
    std::uint64_t u = 0;   // Uint8, Uint16, Uint32, Uint64; Bool as 0/1
    std::int64_t i = 0;    // Int8, Int16, Int32, Int64
    double f = 0;          // Float32, Float64
    std::string_view s;    // String (bytes as stored; GGUF says UTF-8, not checked)

    // Arrays (type == Array).
    GgufValueType elementType = GgufValueType::Uint8;
    std::uint64_t count = 0;                // number of elements
    const std::uint8_t* data = nullptr;     // numeric/Bool elements: count × ggufValueTypeSize(elementType) bytes
    std::vector<std::string_view> strings;  // elementType String: the elements
    std::vector<GgufValue> arrays;          // elementType Array: the nested arrays

    bool isInteger() const;  // an integer scalar (any of the 8 integer types)
    // Element `index` (< count) of a numeric/Bool array as a scalar GgufValue; of a string array, a String value;
    // of a nested array, that array.
    GgufValue element(std::uint64_t index) const;
    // "string \"llama\"", "uint32 30", "array of 49152 string", ... for messages.
    std::string describe() const;
};

// Bytes one element of a fixed-size value type takes in the file (1..8); 0 for String, Array and unknown ids.
std::size_t ggufValueTypeSize(GgufValueType type);

// [SECTION] Tensors and the file

struct GgufTensorInfo {
    std::string name;
    std::vector<std::int64_t> dims;  // as the file says: dims[0] is the fastest-varying (ne0); 1..4 entries, each > 0
    GgmlType type = GgmlType::F32;
    std::uint64_t offset = 0;        // absolute, in the mapping (data section start + the file's relative offset)
    std::uint64_t bytes = 0;         // elements / block size × block bytes

    std::int64_t elements() const;   // product of dims
    std::int64_t rows() const;       // elements() / dims[0]
    std::size_t rowBytes() const;    // bytes of one row of dims[0] values (row r starts at r × rowBytes())
};

// Limits on what a file may claim, beyond "it fits in the file".
inline constexpr int kMaxGgufArrayDepth = 4;                        // arrays of arrays of ...: ggml allows none
inline constexpr std::uint64_t kMaxGgufNestedValues = 1u << 16;     // arrays inside arrays, in all (real files: none)
inline constexpr int kMaxGgufDims = 4;                              // GGML_MAX_DIMS

// A GGUF file: header, metadata and tensor infos parsed and checked; tensor data read in place.
// Movable, not copyable; the mapping (open) is released when the last owner goes.
class MappedFile;  // core/model/mapped_file.h

class GgufFile {
public:
    // Memory-maps `path` read-only and parses it (messages start with `path`).
    // IoError naming the path when it is missing, a directory or unreadable; otherwise as parse().
    static Expected<GgufFile> open(const std::string& path);
    // Parses `size` bytes in place (no copy; the caller keeps them alive as long as the GgufFile and every
    // GgufValue from it). `what` names them in messages. Returns ParseError naming the field for a bad magic,
    // a truncated file, counts or lengths past the end, bad value types, nesting deeper than kMaxGgufArrayDepth,
    // duplicate keys or tensor names, a general.alignment that is not a uint32 power of two, n_dims outside
    // 1..4, a dim ≤ 0, an element count overflowing, dims[0] not a multiple of the type's block, a data offset
    // unaligned or past the end, overlapping tensors; Unsupported for version 1 or > 3 and for a type id GGML
    // does not define (naming the tensor and the id).
    static Expected<GgufFile> parse(const std::uint8_t* bytes, std::size_t size, const std::string& what);

    GgufFile(GgufFile&&) noexcept;
    GgufFile& operator=(GgufFile&&) noexcept;
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;
    ~GgufFile();

    const std::string& what() const { return m_what; }   // the path (or the name given to parse)
    std::uint32_t version() const { return m_version; }
    std::uint64_t alignment() const { return m_alignment; }
    std::uint64_t dataOffset() const { return m_dataOffset; }   // where the data section starts
    std::size_t size() const { return m_size; }                 // bytes in the file

    // Metadata, in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return m_metadata; }
    const GgufValue* find(const std::string& key) const;  // nullptr when absent
    bool has(const std::string& key) const { return find(key) != nullptr; }

    // Typed lookups. Each returns InvalidArgument "WHAT: KEY: no such key" when absent, and
    // "WHAT: KEY: expected an integer, got string \"x\"" (etc.) when of the wrong type or out of range.
    Expected<std::string> getString(const std::string& key) const;
    Expected<std::uint64_t> getUint(const std::string& key) const;  // any integer type, value ≥ 0
    Expected<std::int64_t> getInt(const std::string& key) const;    // any integer type, value fits int64
    Expected<double> getFloat(const std::string& key) const;        // float32/float64 (or an integer)
    Expected<bool> getBool(const std::string& key) const;
    Expected<std::vector<std::string>> getStringArray(const std::string& key) const;
    Expected<std::vector<std::int64_t>> getIntArray(const std::string& key) const;  // integer elements
    Expected<std::vector<float>> getFloatArray(const std::string& key) const;       // float (or integer) elements

    // Tensors, in file order.
    const std::vector<GgufTensorInfo>& tensors() const { return m_tensors; }
    const GgufTensorInfo* tensor(const std::string& name) const;  // nullptr when absent
    // The tensor's bytes in the mapping (info.bytes of them); info must come from this file.
    const std::uint8_t* rawData(const GgufTensorInfo& info) const { return m_bytes + info.offset; }

    // Dequantizes the whole tensor into out[0 .. outCount), row-major: rows() rows of dims[0] values.
    // InvalidArgument when outCount != info.elements(); Unsupported naming the tensor and its type for a type
    // dequantizeRow does not handle.
    Status dequantize(const GgufTensorInfo& info, float* out, std::size_t outCount) const;
    // The same into a new vector; InvalidArgument when there is no tensor `name`, ResourceExhausted when the
    // floats cannot be allocated.
    Expected<std::vector<float>> dequantize(const std::string& name) const;

private:
    GgufFile() = default;

    std::string m_what;
    std::shared_ptr<const MappedFile> m_mapping;  // set by open(); parse() leaves the bytes to the caller
    const std::uint8_t* m_bytes = nullptr;
    std::size_t m_size = 0;
    std::uint32_t m_version = 0;
    std::uint64_t m_alignment = 32;
    std::uint64_t m_dataOffset = 0;
    std::vector<std::pair<std::string, GgufValue>> m_metadata;
    std::map<std::string, std::size_t, std::less<>> m_keyIndex;
    std::vector<GgufTensorInfo> m_tensors;
    std::map<std::string, std::size_t, std::less<>> m_tensorIndex;

    friend class GgufParser;
};

} // namespace attn
