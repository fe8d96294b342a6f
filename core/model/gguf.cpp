// GGUF reader. See attnscope/gguf.h for the format and the contract.
//
// The parser walks the bytes with one cursor; every read first checks that the bytes are there, and every count
// read from the file is checked against the bytes left before anything is reserved (a header claiming 2^60
// tensors or a 2^40-byte string is refused without allocating). The checks follow ggml's gguf_init_from_reader
// (ggml/src/gguf.cpp), plus: every dim > 0, tensors inside the file and not overlapping, nested arrays (which
// ggml refuses) allowed to a bounded depth.
//
// [SECTION] values   [SECTION] parser   [SECTION] GgufFile
#include "attnscope/gguf.h"

#include "mapped_file.h"


#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader reads little-endian floats in place; a big-endian host needs byte swaps"
#endif

namespace attn {

// [SECTION] values

namespace {

std::uint64_t readLe(const std::uint8_t* p, std::size_t n)
{
    std::uint64_t v = 0;
    for (std::size_t k = n; k-- > 0;) v = (v << 8) | p[k];
    return v;
}

std::string quoted(std::string_view s)
{
    constexpr std::size_t kMax = 40;  // keep one-line messages one line
    std::string out = "\"";
    for (std::size_t k = 0; k < s.size() && k < kMax; ++k) {
        const unsigned char c = static_cast<unsigned char>(s[k]);
        if (c < 0x20 || c == 0x7f) out += '?';
        else out += static_cast<char>(c);
    }
    if (s.size() > kMax) out += "...";
    return out + "\"";
}

bool isIntegerType(GgufValueType t)
{
    switch (t) {
    case GgufValueType::Uint8: case GgufValueType::Int8: case GgufValueType::Uint16: case GgufValueType::Int16:
    case GgufValueType::Uint32: case GgufValueType::Int32: case GgufValueType::Uint64: case GgufValueType::Int64:
        return true;
    default:
        return false;
    }
}

bool isSignedType(GgufValueType t)
{
    return t == GgufValueType::Int8 || t == GgufValueType::Int16 || t == GgufValueType::Int32 || t == GgufValueType::Int64;
}

// A scalar of fixed-size type `t` from its little-endian bytes.
GgufValue scalarFromBytes(GgufValueType t, const std::uint8_t* p)
{
    GgufValue v;
    v.type = t;
    const std::size_t n = ggufValueTypeSize(t);
    const std::uint64_t raw = readLe(p, n);
    switch (t) {
    case GgufValueType::Uint8: case GgufValueType::Uint16: case GgufValueType::Uint32: case GgufValueType::Uint64:
        v.u = raw;
        break;
    case GgufValueType::Bool:
        v.u = raw != 0 ? 1 : 0;
        break;
    case GgufValueType::Int8: v.i = static_cast<std::int8_t>(raw); break;
    case GgufValueType::Int16: v.i = static_cast<std::int16_t>(raw); break;
    case GgufValueType::Int32: v.i = static_cast<std::int32_t>(raw); break;
    case GgufValueType::Int64: v.i = static_cast<std::int64_t>(raw); break;
    case GgufValueType::Float32: {
        float f;
        const std::uint32_t b = static_cast<std::uint32_t>(raw);
        std::memcpy(&f, &b, 4);
        v.f = f;
        break;
    }
    case GgufValueType::Float64: {
        double d;
        std::memcpy(&d, &raw, 8);
        v.f = d;
        break;
    }
    default: break;
    }
    return v;
}

} // namespace

const char* ggufValueTypeName(GgufValueType type)
{
    switch (type) {
    case GgufValueType::Uint8: return "uint8";
    case GgufValueType::Int8: return "int8";
    case GgufValueType::Uint16: return "uint16";
    case GgufValueType::Int16: return "int16";
    case GgufValueType::Uint32: return "uint32";
    case GgufValueType::Int32: return "int32";
    case GgufValueType::Float32: return "float32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::Uint64: return "uint64";
    case GgufValueType::Int64: return "int64";
    case GgufValueType::Float64: return "float64";
    }
    return "unknown";
}

std::size_t ggufValueTypeSize(GgufValueType type)
{
    switch (type) {
    case GgufValueType::Uint8: case GgufValueType::Int8: case GgufValueType::Bool: return 1;
    case GgufValueType::Uint16: case GgufValueType::Int16: return 2;
    case GgufValueType::Uint32: case GgufValueType::Int32: case GgufValueType::Float32: return 4;
    case GgufValueType::Uint64: case GgufValueType::Int64: case GgufValueType::Float64: return 8;
    default: return 0;
    }
}

bool GgufValue::isInteger() const { return isIntegerType(type); }

GgufValue GgufValue::element(std::uint64_t index) const
{
    assert(type == GgufValueType::Array && index < count);
    if (elementType == GgufValueType::String) {
        GgufValue v;
        v.type = GgufValueType::String;
        v.s = strings[static_cast<std::size_t>(index)];
        return v;
    }
    if (elementType == GgufValueType::Array) return arrays[static_cast<std::size_t>(index)];
    return scalarFromBytes(elementType, data + index * ggufValueTypeSize(elementType));
}

std::string GgufValue::describe() const
{
    const std::string t = ggufValueTypeName(type);
    switch (type) {
    case GgufValueType::String: return t + " " + quoted(s);
    case GgufValueType::Array:
        return "array of " + std::to_string(count) + " " + ggufValueTypeName(elementType);
    case GgufValueType::Bool: return t + (u ? " true" : " false");
    case GgufValueType::Float32: case GgufValueType::Float64: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", f);  // 9 digits: every float32 exactly, 1e-05 not 0.000010
        return t + " " + buf;
    }
    default: return t + " " + (isSignedType(type) ? std::to_string(i) : std::to_string(u));
    }
}

std::int64_t GgufTensorInfo::elements() const
{
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;  // checked not to overflow when parsed
    return n;
}

std::int64_t GgufTensorInfo::rows() const { return dims.empty() || dims[0] == 0 ? 0 : elements() / dims[0]; }

std::size_t GgufTensorInfo::rowBytes() const
{
    const std::int64_t bs = ggmlBlockSize(type);
    return dims.empty() || bs == 0 ? 0 : std::size_t(dims[0] / bs) * ggmlBlockBytes(type);
}

// [SECTION] parser

class GgufParser {
public:
    GgufParser(const std::uint8_t* bytes, std::size_t size, GgufFile& f) : m_b(bytes), m_size(size), m_f(f) {}

    Status run();

private:
    Status bad(const std::string& m) const { return makeError(StatusCode::ParseError, m_f.m_what + ": " + m); }
    std::uint64_t left() const { return m_size - m_pos; }

    // `n` bytes for `field` at the cursor, or a truncation error.
    Status need(std::uint64_t n, const std::string& field) const
    {
        if (n <= left()) return Status::success();
        return bad(field + ": needs " + std::to_string(n) + " bytes at byte " + std::to_string(m_pos) +
                   ", past the end of the file (" + std::to_string(m_size) + " bytes): truncated?");
    }
    Status u32(std::uint32_t& v, const std::string& field)
    {
        ATTNSCOPE_RETURN_IF_ERROR(need(4, field));
        v = static_cast<std::uint32_t>(readLe(m_b + m_pos, 4));
        m_pos += 4;
        return Status::success();
    }
    Status u64(std::uint64_t& v, const std::string& field)
    {
        ATTNSCOPE_RETURN_IF_ERROR(need(8, field));
        v = readLe(m_b + m_pos, 8);
        m_pos += 8;
        return Status::success();
    }
    Status str(std::string_view& s, const std::string& field)
    {
        std::uint64_t n = 0;
        ATTNSCOPE_RETURN_IF_ERROR(u64(n, field + ": string length"));
        if (n > left())
            return bad(field + ": string length " + std::to_string(n) + " at byte " + std::to_string(m_pos - 8) +
                       " runs past the end of the file (" + std::to_string(left()) + " bytes left)");
        s = std::string_view(reinterpret_cast<const char*>(m_b + m_pos), static_cast<std::size_t>(n));
        m_pos += static_cast<std::size_t>(n);
        return Status::success();
    }
    Status value(GgufValueType t, GgufValue& out, const std::string& field, int depth);
    Status tensorInfo(std::uint64_t index, GgufTensorInfo& info, std::uint64_t& relOffset);

    const std::uint8_t* m_b;
    std::size_t m_size;
    std::size_t m_pos = 0;
    GgufFile& m_f;
    std::uint64_t m_nestedValues = 0;
};

Status GgufParser::value(GgufValueType t, GgufValue& out, const std::string& field, int depth)
{
    out.type = t;
    if (t == GgufValueType::String) return str(out.s, field);
    if (t != GgufValueType::Array) {
        const std::size_t n = ggufValueTypeSize(t);
        if (n == 0) return bad(field + ": unknown value type " + std::to_string(static_cast<std::uint32_t>(t)) + " (GGUF defines 0..12)");
        ATTNSCOPE_RETURN_IF_ERROR(need(n, field + ": " + ggufValueTypeName(t) + " value"));
        out = scalarFromBytes(t, m_b + m_pos);
        m_pos += n;
        return Status::success();
    }
    if (depth >= kMaxGgufArrayDepth)
        return bad(field + ": arrays nested more than " + std::to_string(kMaxGgufArrayDepth) + " deep");
    std::uint32_t et = 0;
    ATTNSCOPE_RETURN_IF_ERROR(u32(et, field + ": array element type"));
    ATTNSCOPE_RETURN_IF_ERROR(u64(out.count, field + ": array length"));
    out.elementType = static_cast<GgufValueType>(et);
    // The least each element takes in the file: its bytes, a string's 8-byte length, a nested array's 12-byte
    // header. A count beyond left() / that is a lie, refused before anything is reserved.
    std::size_t minBytes = ggufValueTypeSize(out.elementType);
    if (out.elementType == GgufValueType::String) minBytes = 8;
    else if (out.elementType == GgufValueType::Array) minBytes = 12;
    else if (minBytes == 0)
        return bad(field + ": unknown array element type " + std::to_string(et) + " (GGUF defines 0..12)");
    if (out.count > left() / minBytes)
        return bad(field + ": array of " + std::to_string(out.count) + " " + ggufValueTypeName(out.elementType) +
                   " needs at least " + (out.count > std::numeric_limits<std::uint64_t>::max() / minBytes
                                             ? std::string("2^64")
                                             : std::to_string(out.count * minBytes)) +
                   " bytes, only " + std::to_string(left()) + " left in the file");
    const std::size_t n = static_cast<std::size_t>(out.count);
    if (out.elementType == GgufValueType::String) {
        out.strings.reserve(n);
        for (std::size_t k = 0; k < n; ++k) {
            std::string_view s;
            ATTNSCOPE_RETURN_IF_ERROR(str(s, field + "[" + std::to_string(k) + "]"));
            out.strings.push_back(s);
        }
    } else if (out.elementType == GgufValueType::Array) {
        if (out.count > kMaxGgufNestedValues - m_nestedValues)
            return bad(field + ": nested arrays hold more than " + std::to_string(kMaxGgufNestedValues) + " arrays in all");
        m_nestedValues += out.count;
        out.arrays.resize(n);
        for (std::size_t k = 0; k < n; ++k)
            ATTNSCOPE_RETURN_IF_ERROR(value(GgufValueType::Array, out.arrays[k], field + "[" + std::to_string(k) + "]", depth + 1));
    } else {
        out.data = m_b + m_pos;
        m_pos += n * minBytes;
    }
    return Status::success();
}

Status GgufParser::tensorInfo(std::uint64_t index, GgufTensorInfo& info, std::uint64_t& relOffset)
{
    const std::string at = "tensor info " + std::to_string(index);
    std::string_view name;
    ATTNSCOPE_RETURN_IF_ERROR(str(name, at + ": name"));
    if (name.empty()) return bad(at + ": empty name");
    info.name = std::string(name);
    const std::string where = "tensor " + info.name;
    if (m_f.m_tensorIndex.count(info.name)) return bad(where + ": duplicate tensor name (tensor infos " +
                                                       std::to_string(m_f.m_tensorIndex.at(info.name)) + " and " +
                                                       std::to_string(index) + ")");
    std::uint32_t nDims = 0;
    ATTNSCOPE_RETURN_IF_ERROR(u32(nDims, where + ": n_dims"));
    if (nDims < 1 || nDims > std::uint32_t(kMaxGgufDims))
        return bad(where + ": n_dims " + std::to_string(nDims) + ", expected 1.." + std::to_string(kMaxGgufDims));
    std::uint64_t count = 1;
    for (std::uint32_t d = 0; d < nDims; ++d) {
        std::uint64_t v = 0;
        ATTNSCOPE_RETURN_IF_ERROR(u64(v, where + ": dims[" + std::to_string(d) + "]"));
        if (v == 0 || v > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
            return bad(where + ": dims[" + std::to_string(d) + "] = " +
                       (v == 0 ? std::string("0") : std::to_string(static_cast<std::int64_t>(v))) +
                       ", expected a dimension > 0");
        if (count > std::uint64_t(std::numeric_limits<std::int64_t>::max()) / v)
            return bad(where + ": dims give more than 2^63 elements (the element count overflows)");
        count *= v;
        info.dims.push_back(static_cast<std::int64_t>(v));
    }
    std::uint32_t typeId = 0;
    ATTNSCOPE_RETURN_IF_ERROR(u32(typeId, where + ": type"));
    info.type = static_cast<GgmlType>(typeId);
    if (!ggmlTypeKnown(info.type))
        return makeError(StatusCode::Unsupported, m_f.m_what + ": " + where + ": unknown tensor type id " +
                                                      std::to_string(typeId) + " (not a GGML type this build knows)");
    const std::uint64_t bs = std::uint64_t(ggmlBlockSize(info.type));
    const std::uint64_t bb = ggmlBlockBytes(info.type);
    if (std::uint64_t(info.dims[0]) % bs != 0)
        return bad(where + ": dims[0] = " + std::to_string(info.dims[0]) + " is not a multiple of " +
                   ggmlTypeName(info.type) + "'s block size " + std::to_string(bs));
    if (count / bs > std::numeric_limits<std::uint64_t>::max() / bb)
        return bad(where + ": size in bytes overflows");
    info.bytes = count / bs * bb;
    ATTNSCOPE_RETURN_IF_ERROR(u64(relOffset, where + ": offset"));
    return Status::success();
}

Status GgufParser::run()
{
    GgufFile& f = m_f;
    if (m_size < 4 || std::memcmp(m_b, "GGUF", 4) != 0) {
        if (m_size < 4) return bad("not a GGUF file: " + std::to_string(m_size) + " bytes, shorter than the magic \"GGUF\"");
        return bad("not a GGUF file: magic is " + quoted(std::string_view(reinterpret_cast<const char*>(m_b), 4)) +
                   ", expected \"GGUF\"");
    }
    m_pos = 4;
    ATTNSCOPE_RETURN_IF_ERROR(u32(f.m_version, "header: version"));
    if (f.m_version == 1)
        return makeError(StatusCode::Unsupported, f.m_what + ": GGUF version 1 is not supported (expected 2 or 3): "
                                                             "convert the model again with a current llama.cpp");
    if (f.m_version != 2 && f.m_version != 3) {
        std::string hint;
        if ((f.m_version & 0xffffu) == 0) hint = " (a big-endian file? only little-endian GGUF is read)";
        return makeError(StatusCode::Unsupported, f.m_what + ": GGUF version " + std::to_string(f.m_version) +
                                                      " is not supported (expected 2 or 3)" + hint);
    }
    std::uint64_t nTensors = 0, nKv = 0;
    ATTNSCOPE_RETURN_IF_ERROR(u64(nTensors, "header: tensor count"));
    ATTNSCOPE_RETURN_IF_ERROR(u64(nKv, "header: metadata count"));
    // A metadata entry takes at least 13 bytes (key length, type, one byte of value), a tensor info 32 (name
    // length, n_dims, one dim, type, offset).
    if (nKv > left() / 13)
        return bad("header: metadata count " + std::to_string(nKv) + " is more than the file can hold (at most " +
                   std::to_string(left() / 13) + " in its " + std::to_string(left()) + " remaining bytes)");
    if (nTensors > (left() - nKv * 13) / 32)
        return bad("header: tensor count " + std::to_string(nTensors) + " is more than the file can hold (at most " +
                   std::to_string((left() - nKv * 13) / 32) + " in its " + std::to_string(left()) + " remaining bytes)");

    f.m_metadata.reserve(static_cast<std::size_t>(nKv));
    for (std::uint64_t k = 0; k < nKv; ++k) {
        std::string_view key;
        ATTNSCOPE_RETURN_IF_ERROR(str(key, "metadata " + std::to_string(k) + ": key"));
        if (key.empty()) return bad("metadata " + std::to_string(k) + ": empty key");
        const std::string keyStr(key);
        if (f.m_keyIndex.count(keyStr))
            return bad(keyStr + ": duplicate key (metadata " + std::to_string(f.m_keyIndex.at(keyStr)) + " and " +
                       std::to_string(k) + ")");
        std::uint32_t t = 0;
        ATTNSCOPE_RETURN_IF_ERROR(u32(t, keyStr + ": value type"));
        GgufValue v;
        ATTNSCOPE_RETURN_IF_ERROR(value(static_cast<GgufValueType>(t), v, keyStr, 0));
        f.m_keyIndex.emplace(keyStr, f.m_metadata.size());
        f.m_metadata.emplace_back(keyStr, std::move(v));
    }

    if (const GgufValue* a = f.find("general.alignment")) {
        if (a->type != GgufValueType::Uint32)
            return bad("general.alignment: expected uint32, got " + a->describe());
        if (a->u == 0 || (a->u & (a->u - 1)) != 0)
            return bad("general.alignment: expected a power of two, got " + std::to_string(a->u));
        f.m_alignment = a->u;
    }

    std::vector<std::uint64_t> rel(static_cast<std::size_t>(nTensors));
    f.m_tensors.resize(static_cast<std::size_t>(nTensors));
    for (std::uint64_t k = 0; k < nTensors; ++k) {
        ATTNSCOPE_RETURN_IF_ERROR(tensorInfo(k, f.m_tensors[k], rel[k]));
        f.m_tensorIndex.emplace(f.m_tensors[k].name, static_cast<std::size_t>(k));
    }

    // The data section starts at the next multiple of the alignment (m_pos ≤ m_size < 2^63: no overflow).
    const std::uint64_t align = f.m_alignment;
    f.m_dataOffset = (std::uint64_t(m_pos) + align - 1) / align * align;
    const std::uint64_t size = m_size;
    for (std::size_t k = 0; k < f.m_tensors.size(); ++k) {
        GgufTensorInfo& t = f.m_tensors[k];
        const std::string where = "tensor " + t.name;
        if (rel[k] % align != 0)
            return bad(where + ": data offset " + std::to_string(rel[k]) + " is not a multiple of the alignment " +
                       std::to_string(align));
        if (rel[k] > size || t.bytes > size || f.m_dataOffset + rel[k] + t.bytes > size) {
            // Print the end exactly when it fits in 64 bits.
            const bool fits = rel[k] <= std::numeric_limits<std::uint64_t>::max() - f.m_dataOffset &&
                              t.bytes <= std::numeric_limits<std::uint64_t>::max() - f.m_dataOffset - rel[k];
            return bad(where + ": data ends at byte " +
                       (fits ? std::to_string(f.m_dataOffset + rel[k] + t.bytes) : std::string("past 2^64")) +
                       ", past the end of the file (" + std::to_string(size) + " bytes)");
        }
        t.offset = f.m_dataOffset + rel[k];
    }
    std::vector<std::size_t> order(f.m_tensors.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return f.m_tensors[a].offset < f.m_tensors[b].offset; });
    for (std::size_t k = 1; k < order.size(); ++k) {
        const GgufTensorInfo& a = f.m_tensors[order[k - 1]];
        const GgufTensorInfo& b = f.m_tensors[order[k]];
        if (b.offset < a.offset + a.bytes)
            return bad("tensor " + b.name + ": data at bytes " + std::to_string(b.offset) + ".." +
                       std::to_string(b.offset + b.bytes) + " overlaps tensor " + a.name + " (bytes " +
                       std::to_string(a.offset) + ".." + std::to_string(a.offset + a.bytes) + ")");
    }
    return Status::success();
}

// [SECTION] GgufFile

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

Expected<GgufFile> GgufFile::parse(const std::uint8_t* bytes, std::size_t size, const std::string& what)
{
    assert(bytes != nullptr || size == 0);
    GgufFile f;
    f.m_what = what;
    f.m_bytes = bytes;
    f.m_size = size;
    try {
        GgufParser p(bytes, size, f);
        ATTNSCOPE_RETURN_IF_ERROR(p.run());
    } catch (const std::bad_alloc&) {
        // Only reachable when memory is already short: every count was bounded by the file's size first.
        return makeError(StatusCode::ResourceExhausted, what + ": out of memory while reading the header");
    }
    return f;
}

Expected<GgufFile> GgufFile::open(const std::string& path)
{
    auto mapping = MappedFile::open(path, "expected a .gguf file");
    if (!mapping) return mapping.status();
    auto f = parse((*mapping)->data(), (*mapping)->size(), path);
    if (!f) return f.status();
    f->m_mapping = std::move(*mapping);
    return f;
}

const GgufValue* GgufFile::find(const std::string& key) const
{
    auto it = m_keyIndex.find(key);
    return it == m_keyIndex.end() ? nullptr : &m_metadata[it->second].second;
}

namespace {

Status wrongType(const std::string& what, const std::string& key, const char* expected, const GgufValue& v)
{
    return invalidArgument(what + ": " + key + ": expected " + expected + ", got " + v.describe());
}

} // namespace

#define ATTNSCOPE_GGUF_LOOKUP(v, key)                                                              \
    const GgufValue* v = find(key);                                                                \
    if (!v) return invalidArgument(m_what + ": " + key + ": no such key in the metadata")

Expected<std::string> GgufFile::getString(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (v->type != GgufValueType::String) return wrongType(m_what, key, "a string", *v);
    return std::string(v->s);
}

Expected<std::uint64_t> GgufFile::getUint(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (!v->isInteger()) return wrongType(m_what, key, "an integer", *v);
    if (isSignedType(v->type)) {
        if (v->i < 0) return wrongType(m_what, key, "an integer ≥ 0", *v);
        return std::uint64_t(v->i);
    }
    return v->u;
}

Expected<std::int64_t> GgufFile::getInt(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (!v->isInteger()) return wrongType(m_what, key, "an integer", *v);
    if (isSignedType(v->type)) return v->i;
    if (v->u > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        return wrongType(m_what, key, "an integer below 2^63", *v);
    return std::int64_t(v->u);
}

Expected<double> GgufFile::getFloat(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (v->type == GgufValueType::Float32 || v->type == GgufValueType::Float64) return v->f;
    if (v->isInteger()) return isSignedType(v->type) ? double(v->i) : double(v->u);
    return wrongType(m_what, key, "a number", *v);
}

Expected<bool> GgufFile::getBool(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (v->type != GgufValueType::Bool) return wrongType(m_what, key, "a bool", *v);
    return v->u != 0;
}

Expected<std::vector<std::string>> GgufFile::getStringArray(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (v->type != GgufValueType::Array || v->elementType != GgufValueType::String)
        return wrongType(m_what, key, "an array of strings", *v);
    return std::vector<std::string>(v->strings.begin(), v->strings.end());
}

Expected<std::vector<std::int64_t>> GgufFile::getIntArray(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    if (v->type != GgufValueType::Array || !isIntegerType(v->elementType))
        return wrongType(m_what, key, "an array of integers", *v);
    std::vector<std::int64_t> out(static_cast<std::size_t>(v->count));
    for (std::size_t k = 0; k < out.size(); ++k) {
        const GgufValue e = v->element(k);
        if (!isSignedType(e.type) && e.u > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
            return invalidArgument(m_what + ": " + key + "[" + std::to_string(k) + "]: expected an integer below 2^63, got " + e.describe());
        out[k] = isSignedType(e.type) ? e.i : std::int64_t(e.u);
    }
    return out;
}

Expected<std::vector<float>> GgufFile::getFloatArray(const std::string& key) const
{
    ATTNSCOPE_GGUF_LOOKUP(v, key);
    const bool numeric = v->type == GgufValueType::Array &&
                         (isIntegerType(v->elementType) || v->elementType == GgufValueType::Float32 ||
                          v->elementType == GgufValueType::Float64);
    if (!numeric) return wrongType(m_what, key, "an array of numbers", *v);
    std::vector<float> out(static_cast<std::size_t>(v->count));
    for (std::size_t k = 0; k < out.size(); ++k) {
        const GgufValue e = v->element(k);
        out[k] = e.type == GgufValueType::Float32 || e.type == GgufValueType::Float64 ? float(e.f)
                 : isSignedType(e.type)                                               ? float(e.i)
                                                                                      : float(e.u);
    }
    return out;
}

#undef ATTNSCOPE_GGUF_LOOKUP

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const
{
    auto it = m_tensorIndex.find(name);
    return it == m_tensorIndex.end() ? nullptr : &m_tensors[it->second];
}

Status GgufFile::dequantize(const GgufTensorInfo& info, float* out, std::size_t outCount) const
{
    const std::int64_t n = info.elements();
    if (outCount != std::uint64_t(n))
        return invalidArgument(m_what + ": tensor " + info.name + ": output holds " + std::to_string(outCount) +
                               " floats, expected " + std::to_string(n));
    if (!ggmlTypeSupported(info.type))
        return makeError(StatusCode::Unsupported,
                         m_what + ": tensor " + info.name + ": type " + ggmlTypeName(info.type) + " (id " +
                             std::to_string(static_cast<std::uint32_t>(info.type)) +
                             ") is not supported (supported: " + ggmlSupportedTypeNames() + ")");
    const std::int64_t cols = info.dims[0];
    const std::size_t rowBytes = info.rowBytes();
    const std::uint8_t* src = rawData(info);
    const std::int64_t rows = info.rows();
    for (std::int64_t r = 0; r < rows; ++r) {
        const Status s = dequantizeRow(info.type, src + std::size_t(r) * rowBytes, rowBytes, out + r * cols, cols);
        if (!s.ok()) return makeError(s.code, m_what + ": tensor " + info.name + ": " + s.message);
    }
    return Status::success();
}

Expected<std::vector<float>> GgufFile::dequantize(const std::string& name) const
{
    const GgufTensorInfo* info = tensor(name);
    if (!info) return invalidArgument(m_what + ": no tensor named " + quoted(name));
    std::vector<float> out;
    try {
        out.resize(static_cast<std::size_t>(info->elements()));
    } catch (const std::bad_alloc&) {
        return makeError(StatusCode::ResourceExhausted, m_what + ": tensor " + name + ": cannot allocate " +
                                                            std::to_string(info->elements()) + " floats");
    } catch (const std::length_error&) {
        return makeError(StatusCode::ResourceExhausted, m_what + ": tensor " + name + ": " +
                                                            std::to_string(info->elements()) + " floats are too many");
    }
    ATTNSCOPE_RETURN_IF_ERROR(dequantize(*info, out.data(), out.size()));
    return out;
}

} // namespace attn
