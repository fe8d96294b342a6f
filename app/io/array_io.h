// Array files in and out: NumPy .npy / .npz and safetensors, headless (no GUI), used by the command line,
// the window's import/export and the tests.
//
// Everything here reads whole files into memory first (with a size limit), checks every header field
// against the bytes actually present, and returns attn::Status / attn::Expected; nothing throws and a bad
// file never changes anything. Writers build the whole file in memory and write it with
// attn::writeFileAtomic, so a failed write never leaves a partial file behind.
#pragma once

#include <attnscope/status.h>
#include <attnscope/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace app::io {

// Files larger than this are refused before reading (a 4096×4096 float64 matrix is 128 MiB; model
// checkpoints holding many tensors are larger, so safetensors gets its own, larger limit).
inline constexpr std::size_t kMaxArrayFileBytes = std::size_t(1) << 30;        // 1 GiB (.npy, .npz)
inline constexpr std::size_t kMaxSafetensorsFileBytes = std::size_t(8) << 30;  // 8 GiB
// Header limits: NumPy writes .npy headers of a few hundred bytes; safetensors headers of large models
// are a few MiB. Anything beyond these is corrupt or hostile, and refused before it is parsed.
inline constexpr std::size_t kMaxNpyHeaderBytes = std::size_t(1) << 16;
inline constexpr std::size_t kMaxSafetensorsHeaderBytes = std::size_t(100) << 20;
// Matrices are refused beyond this many rows or columns (the session format's own limit is far below).
inline constexpr std::int64_t kMaxDim = std::int64_t(1) << 24;
// Arrays with more elements are refused from their header, before any data is read or inflated: every
// value becomes a double (8 bytes), so this caps a decoded array at 1 GiB. A .npz entry declaring a
// billion-element bool array (a 1 MB zip bomb) is refused without inflating it (issue 13, finding 5).
inline constexpr std::int64_t kMaxArrayElements = std::int64_t(1) << 27;

// Element types found in the files we read.
enum class DType { F16, BF16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, Bool };
const char* toString(DType t);  // "float32", "bfloat16", ...

// A decoded array: its shape (row-major, C order) and its values converted to double (exact for every
// DType except 64-bit integers beyond 2^53, which no attention matrix holds).
struct Array {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;  // empty = scalar
    std::vector<double> values;       // product(shape) values, C order
};

// A named array to write. Matrices are written as float32 ('<f4'), masks as bool ('|b1').
struct NamedArray {
    std::string name;
    const attn::Matrix* matrix = nullptr;   // exactly one of matrix / vector / mask is set
    const attn::Vector* vector = nullptr;
    const attn::MaskMatrix* mask = nullptr;
    std::vector<std::int32_t> ints;         // used when none of the pointers is set (valid lengths)
    // A matrix written with another shape of the same size, C order (heads × n × n from an (H·n) × n matrix);
    // empty = the matrix's own rows × cols.
    std::vector<std::int64_t> shape;
};

// ---- .npy -----------------------------------------------------------------------------------------------
// Encodes one array as .npy (format version 1.0, little-endian, C order).
std::string encodeNpy(const NamedArray& a);
// Decodes .npy bytes (versions 1.0, 2.0, 3.0; dtypes f2 f4 f8 i1..i8 u1..u8 b1 in either byte order;
// C or Fortran order). `source` names the file in messages. Errors are ParseError or Unsupported, e.g.
//   "w.npy: header length 4294967295 is larger than the file (120 bytes)"; "w.npy: dtype '<c8' is not
//   supported (expected a real number type)"; "w.npy: data has 40 bytes, shape (4, 3) float32 needs 48".
attn::Expected<Array> decodeNpy(std::string_view bytes, std::string_view source);
attn::Expected<Array> readNpy(const std::string& path);

// ---- .npz -----------------------------------------------------------------------------------------------
// The array names in an .npz (entry names without ".npy"), in file order. IoError / ParseError.
attn::Expected<std::vector<std::string>> listNpz(const std::string& path);
// The same from the bytes of an .npz held in memory (`source` names it in messages; used by the fuzzers).
attn::Expected<std::vector<std::string>> listNpzBytes(const std::string& bytes, const std::string& source);
attn::Expected<Array> decodeNpz(const std::string& bytes, const std::string& name, const std::string& source);
// One array by name. Errors name the available arrays: "m.npz: no array 'Wq' (it has: X, Wk)".
attn::Expected<Array> readNpz(const std::string& path, const std::string& name);
// Writes every array into one .npz (deflate-compressed entries "<name>.npy"), atomically.
attn::Status writeNpz(const std::string& path, const std::vector<NamedArray>& arrays);

// ---- safetensors ----------------------------------------------------------------------------------------
struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
};
// The tensors in a safetensors file, in data order (by offset; "__metadata__" is skipped). Linear in the
// number of tensors; the header JSON nests at most attn::kMaxJsonDepth levels.
attn::Expected<std::vector<TensorInfo>> listSafetensors(const std::string& path);
// The same from the bytes of a whole file held in memory (used by the fuzzers).
attn::Expected<std::vector<TensorInfo>> listSafetensorsBytes(std::string_view bytes, const std::string& source);
attn::Expected<Array> decodeSafetensors(std::string_view bytes, const std::string& name, const std::string& source);
// One tensor by name; F32, F16, BF16 and F64 are supported. Errors: IoError (unreadable), ParseError
// (truncated, bad header, offsets outside the data), Unsupported (other dtypes), InvalidArgument (no such name).
attn::Expected<Array> readSafetensors(const std::string& path, const std::string& name);
// Writes float32 tensors (used by the tests and by `attnscope export --format safetensors`), atomically.
attn::Status writeSafetensors(const std::string& path, const std::vector<NamedArray>& arrays);

// ---- Writing single files -------------------------------------------------------------------------------
attn::Status writeNpy(const std::string& path, const NamedArray& a);
// Writes every array as one file (<name>.npy, or <name>.csv when `csv`) into the folder `dir`, atomically
// as a whole: the files are written into a sibling temporary folder "<dir>.tmp-<pid>" which then replaces
// `dir` (renameat2 RENAME_EXCHANGE, or two renames where the file system lacks it). A failure (disk full)
// or a kill never leaves `dir` with some files new and some old; a killed run's temporary folder is removed
// by the next export. Other files already in `dir` are kept (hard-linked into the new folder); a `dir`
// holding sub-folders is refused (InvalidArgument), since they could not be kept atomically. IoError names
// the file and the reason.
attn::Status writeArraysToFolder(const std::string& dir, const std::vector<NamedArray>& arrays, bool csv);
// CSV: one row per line, values with 9 significant digits (enough to give back the same float32), masks
// and integers as 0/1 / integers. A vector is one line.
std::string encodeCsv(const NamedArray& a);

// ---- Taking a matrix out of an array --------------------------------------------------------------------
// Half-open index range [begin, end) along one axis; end = -1 means "to the end".
struct Range {
    std::int64_t begin = 0;
    std::int64_t end = -1;
};
// Parses "a:b", "a:", ":b" or ":" (Python slice syntax without steps, non-negative).
attn::Expected<Range> parseRange(std::string_view text, std::string_view what);

// How to cut a matrix out of a (possibly larger) 1-D or 2-D array, applied in this order:
//   1. transpose (PyTorch nn.Linear stores weights out×in; attnscope's Wq is d_model × H·d_k),
//   2. rows / cols ranges,
//   3. head slice: columns split into `heads` equal blocks, block `head` kept (attnscope's head layout).
// A 1-D array is a single row (1×n) before these steps.
struct SliceSpec {
    bool transpose = false;
    Range rows;
    Range cols;
    int head = -1;   // -1 = whole width
    int heads = 1;
};
// Errors (InvalidArgument) name the step: "rows 4:9: out of range for 8 rows";
// "head 2 of 2: heads must be < 2"; "head slice: 3 heads do not divide 10 columns".
// Values must be finite and fit float32: "value [3][1] is inf" / "value [0][0] = 1e+39 overflows float32".
attn::Expected<attn::Matrix> toMatrix(const Array& a, const SliceSpec& spec, std::string_view source);
std::string shapeString(const std::vector<std::int64_t>& shape);  // "(4, 3)"

} // namespace app::io
