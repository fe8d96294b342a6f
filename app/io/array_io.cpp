// NumPy .npy/.npz and safetensors reading and writing. See array_io.h for the contract.
//
// [SECTION] Small helpers (dtype sizes, byte order, half floats)
// [SECTION] .npy encode / decode
// [SECTION] .npz (libzip)
// [SECTION] safetensors
// [SECTION] CSV, single-file writers
// [SECTION] Slicing an array into a matrix
#include "io/array_io.h"

#include <attnscope/preset_io.h>

#include <nlohmann/json.hpp>
#include <zip.h>

#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>

namespace app::io {

using attn::Expected;
using attn::makeError;
using attn::Status;
using attn::StatusCode;

static_assert(std::endian::native == std::endian::little, "array I/O assumes a little-endian host");

// -----------------------------------------------------------------------------------------------------
// [SECTION] Small helpers (dtype sizes, byte order, half floats)
// -----------------------------------------------------------------------------------------------------
const char* toString(DType t)
{
    switch (t) {
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I8: return "int8";
    case DType::I16: return "int16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::U16: return "uint16";
    case DType::U32: return "uint32";
    case DType::U64: return "uint64";
    case DType::Bool: return "bool";
    }
    return "?";
}

namespace {

std::size_t dtypeSize(DType t)
{
    switch (t) {
    case DType::I8: case DType::U8: case DType::Bool: return 1;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F64: case DType::I64: case DType::U64: return 8;
    }
    return 1;
}

float halfToFloat(std::uint16_t h)
{
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    const std::uint32_t mant = h & 0x3ffu;
    if (exp == 0) {  // zero or subnormal: mant · 2^-24
        const float v = std::ldexp(float(mant), -24);
        return sign ? -v : v;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));       // rebias 15 → 127
}

// Reads element i of raw little- or big-endian data of type t as a double.
double readElement(const unsigned char* p, DType t, bool bigEndian)
{
    unsigned char b[8];
    const std::size_t n = dtypeSize(t);
    for (std::size_t k = 0; k < n; ++k) b[k] = bigEndian ? p[n - 1 - k] : p[k];
    auto load = [&](auto v) {
        std::memcpy(&v, b, sizeof v);
        return v;
    };
    switch (t) {
    case DType::F16: return halfToFloat(load(std::uint16_t{}));
    case DType::BF16: return std::bit_cast<float>(std::uint32_t(load(std::uint16_t{})) << 16);
    case DType::F32: return load(float{});
    case DType::F64: return load(double{});
    case DType::I8: return load(std::int8_t{});
    case DType::I16: return load(std::int16_t{});
    case DType::I32: return load(std::int32_t{});
    case DType::I64: return double(load(std::int64_t{}));
    case DType::U8: return load(std::uint8_t{});
    case DType::U16: return load(std::uint16_t{});
    case DType::U32: return load(std::uint32_t{});
    case DType::U64: return double(load(std::uint64_t{}));
    case DType::Bool: return b[0] != 0 ? 1.0 : 0.0;
    }
    return 0.0;
}

// Product of the dims, or nullopt on a negative dim or an overflow past `limit`.
std::optional<std::uint64_t> elementCount(const std::vector<std::int64_t>& shape, std::uint64_t limit)
{
    std::uint64_t n = 1;
    for (std::int64_t d : shape) {
        if (d < 0) return std::nullopt;
        if (d != 0 && n > limit / std::uint64_t(d)) return std::nullopt;
        n *= std::uint64_t(d);
    }
    return n;
}

std::string prefix(std::string_view source) { return std::string(source) + ": "; }

} // namespace

std::string shapeString(const std::vector<std::int64_t>& shape)
{
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    if (shape.size() == 1) s += ",";
    return s + ")";
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] .npy encode / decode
// -----------------------------------------------------------------------------------------------------
namespace {

struct Payload {
    std::string descr;
    std::vector<std::int64_t> shape;
    std::string bytes;
};

Payload payloadOf(const NamedArray& a)
{
    Payload p;
    if (a.matrix) {
        p.descr = "<f4";
        p.shape = {a.matrix->rows(), a.matrix->cols()};
        std::int64_t count = 1;
        for (std::int64_t d : a.shape) count *= d;
        if (!a.shape.empty() && count == a.matrix->size()) p.shape = a.shape;
        p.bytes.assign(reinterpret_cast<const char*>(a.matrix->data()), std::size_t(a.matrix->size()) * sizeof(float));
    } else if (a.vector) {
        p.descr = "<f4";
        p.shape = {a.vector->size()};
        p.bytes.assign(reinterpret_cast<const char*>(a.vector->data()), std::size_t(a.vector->size()) * sizeof(float));
    } else if (a.mask) {
        p.descr = "|b1";
        p.shape = {a.mask->rows(), a.mask->cols()};
        p.bytes.resize(std::size_t(a.mask->size()));
        for (Eigen::Index i = 0; i < a.mask->size(); ++i) p.bytes[std::size_t(i)] = a.mask->data()[i] ? 1 : 0;
    } else {
        p.descr = "<i4";
        p.shape = {std::int64_t(a.ints.size())};
        p.bytes.assign(reinterpret_cast<const char*>(a.ints.data()), a.ints.size() * sizeof(std::int32_t));
    }
    return p;
}

// Parser for the Python dict literal in a .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
public:
    explicit HeaderParser(std::string_view s) : m_s(s) {}

    // Finds 'key': and leaves the cursor after the colon.
    bool seekKey(std::string_view key)
    {
        for (char q : {'\'', '"'}) {
            const std::string quoted = std::string(1, q) + std::string(key) + std::string(1, q);
            const std::size_t at = m_s.find(quoted);
            if (at == std::string_view::npos) continue;
            m_pos = at + quoted.size();
            skipSpace();
            if (m_pos < m_s.size() && m_s[m_pos] == ':') {
                ++m_pos;
                skipSpace();
                return true;
            }
        }
        return false;
    }
    std::optional<std::string> readString()
    {
        if (m_pos >= m_s.size() || (m_s[m_pos] != '\'' && m_s[m_pos] != '"')) return std::nullopt;
        const char q = m_s[m_pos++];
        const std::size_t end = m_s.find(q, m_pos);
        if (end == std::string_view::npos) return std::nullopt;
        std::string out(m_s.substr(m_pos, end - m_pos));
        m_pos = end + 1;
        return out;
    }
    std::optional<bool> readBool()
    {
        if (m_s.substr(m_pos, 4) == "True") return true;
        if (m_s.substr(m_pos, 5) == "False") return false;
        return std::nullopt;
    }
    std::optional<std::vector<std::int64_t>> readTuple()
    {
        if (m_pos >= m_s.size() || m_s[m_pos] != '(') return std::nullopt;
        ++m_pos;
        std::vector<std::int64_t> dims;
        for (;;) {
            skipSpace();
            if (m_pos >= m_s.size()) return std::nullopt;
            if (m_s[m_pos] == ')') break;
            std::int64_t v = 0;
            const char* first = m_s.data() + m_pos;
            auto [ptr, ec] = std::from_chars(first, m_s.data() + m_s.size(), v);
            if (ec != std::errc() || v < 0) return std::nullopt;
            m_pos += std::size_t(ptr - first);
            dims.push_back(v);
            skipSpace();
            if (m_pos < m_s.size() && m_s[m_pos] == 'L') ++m_pos;  // Python 2 long suffix
            if (m_pos < m_s.size() && m_s[m_pos] == ',') ++m_pos;
        }
        return dims;
    }

private:
    void skipSpace()
    {
        while (m_pos < m_s.size() && (m_s[m_pos] == ' ' || m_s[m_pos] == '\t')) ++m_pos;
    }
    std::string_view m_s;
    std::size_t m_pos = 0;
};

std::optional<DType> dtypeFromDescr(std::string_view code)
{
    struct Entry { std::string_view code; DType t; };
    static constexpr Entry kTable[] = {
        {"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64}, {"i1", DType::I8},  {"i2", DType::I16},
        {"i4", DType::I32}, {"i8", DType::I64}, {"u1", DType::U8},  {"u2", DType::U16}, {"u4", DType::U32},
        {"u8", DType::U64}, {"b1", DType::Bool},
    };
    for (const Entry& e : kTable)
        if (e.code == code) return e.t;
    return std::nullopt;
}

} // namespace

std::string encodeNpy(const NamedArray& a)
{
    const Payload p = payloadOf(a);
    std::string dict = "{'descr': '" + p.descr + "', 'fortran_order': False, 'shape': " + shapeString(p.shape) + ", }";
    // NumPy pads the header with spaces and a final newline so the data starts at a multiple of 64 bytes.
    const std::size_t fixed = 10;  // magic (6) + version (2) + header length (2)
    std::size_t total = fixed + dict.size() + 1;
    total = (total + 63) / 64 * 64;
    dict.append(total - fixed - dict.size() - 1, ' ');
    dict += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += char(dict.size() & 0xff);
    out += char((dict.size() >> 8) & 0xff);
    out += dict;
    out += p.bytes;
    return out;
}

namespace {

// A parsed .npy header: what the data is and where it starts.
struct NpyHeader {
    DType dtype = DType::F32;
    bool bigEndian = false;
    bool fortran = false;
    std::vector<std::int64_t> shape;
    std::uint64_t count = 0;       // product of shape, ≤ kMaxArrayElements
    std::size_t dataStart = 0;     // bytes before the data
};

// Parses the header at the start of `bytes` (the data need not be there yet: readNpz checks the header of a
// compressed entry before inflating it). Refuses arrays over kMaxArrayElements.
Expected<NpyHeader> parseNpyHeader(std::string_view bytes, const std::string& pre)
{
    if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
        return makeError(StatusCode::ParseError, pre + "not a .npy file (missing the \\x93NUMPY magic)");
    const int major = static_cast<unsigned char>(bytes[6]);
    std::size_t headerLen = 0, headerStart = 0;
    if (major == 1) {
        headerLen = std::size_t(static_cast<unsigned char>(bytes[8])) | std::size_t(static_cast<unsigned char>(bytes[9])) << 8;
        headerStart = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) return makeError(StatusCode::ParseError, pre + "truncated .npy header");
        for (int k = 3; k >= 0; --k) headerLen = (headerLen << 8) | static_cast<unsigned char>(bytes[8 + std::size_t(k)]);
        headerStart = 12;
    } else {
        return makeError(StatusCode::Unsupported, pre + ".npy format version " + std::to_string(major) +
                                                      " is not supported (expected 1, 2 or 3)");
    }
    if (headerLen > kMaxNpyHeaderBytes)
        return makeError(StatusCode::ParseError, pre + "header length " + std::to_string(headerLen) +
                                                     " bytes is absurd (limit " + std::to_string(kMaxNpyHeaderBytes) + ")");
    if (headerStart + headerLen > bytes.size())
        return makeError(StatusCode::ParseError, pre + "header length " + std::to_string(headerLen) +
                                                     " is larger than the file (" + std::to_string(bytes.size()) + " bytes)");
    HeaderParser hp(bytes.substr(headerStart, headerLen));
    std::optional<std::string> descr;
    if (hp.seekKey("descr")) descr = hp.readString();
    if (!descr) return makeError(StatusCode::ParseError, pre + "header has no readable 'descr' (the dtype)");
    std::optional<bool> fortran;
    if (hp.seekKey("fortran_order")) fortran = hp.readBool();
    if (!fortran) return makeError(StatusCode::ParseError, pre + "header has no readable 'fortran_order'");
    std::optional<std::vector<std::int64_t>> shape;
    if (hp.seekKey("shape")) shape = hp.readTuple();
    if (!shape) return makeError(StatusCode::ParseError, pre + "header has no readable 'shape'");

    const std::string& d = *descr;
    const std::string_view code = d.size() >= 1 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')
                                      ? std::string_view(d).substr(1) : std::string_view(d);
    const std::optional<DType> t = dtypeFromDescr(code);
    if (!t)
        return makeError(StatusCode::Unsupported, pre + "dtype '" + attn::clipForMessage(d) +
                                                      "' is not supported (expected a real number type: float16/32/64, "
                                                      "int, uint or bool)");
    NpyHeader h;
    h.dtype = *t;
    h.bigEndian = !d.empty() && d[0] == '>';
    h.fortran = *fortran;
    h.shape = std::move(*shape);
    h.dataStart = headerStart + headerLen;
    const std::optional<std::uint64_t> count = elementCount(h.shape, std::numeric_limits<std::uint64_t>::max() / 8);
    if (!count || *count > std::uint64_t(kMaxArrayElements))
        return makeError(StatusCode::ResourceExhausted,
                         pre + "shape " + shapeString(h.shape) + " " + toString(h.dtype) + " has " +
                             (count ? std::to_string(*count) : std::string("more than 2^61")) +
                             " elements; the limit is " + std::to_string(kMaxArrayElements) +
                             " (an attention matrix is far smaller): cut the array in NumPy first");
    h.count = *count;
    return h;
}

} // namespace

Expected<Array> decodeNpy(std::string_view bytes, std::string_view source)
{
    const std::string pre = prefix(source);
    Expected<NpyHeader> hdr = parseNpyHeader(bytes, pre);
    if (!hdr) return hdr.status();
    const NpyHeader& h = *hdr;
    const std::size_t es = dtypeSize(h.dtype);
    const std::uint64_t dataBytes = bytes.size() - h.dataStart;
    if (h.count * es > dataBytes)
        return makeError(StatusCode::ParseError,
                         pre + "data has " + std::to_string(dataBytes) + " bytes, shape " + shapeString(h.shape) + " " +
                             toString(h.dtype) + " needs " + std::to_string(h.count * es) + " (file truncated?)");
    Array out;
    out.dtype = h.dtype;
    out.shape = h.shape;
    out.values.resize(std::size_t(h.count));
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + h.dataStart;
    if (!h.fortran || h.shape.size() < 2) {
        for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] = readElement(data + i * es, h.dtype, h.bigEndian);
    } else {
        // Fortran order: the first index varies fastest. Convert to C order by walking C indices.
        const std::size_t nd = h.shape.size();
        std::vector<std::int64_t> idx(nd, 0);
        std::vector<std::uint64_t> fstride(nd, 1);
        for (std::size_t k = 1; k < nd; ++k) fstride[k] = fstride[k - 1] * std::uint64_t(h.shape[k - 1]);
        for (std::size_t i = 0; i < out.values.size(); ++i) {
            std::uint64_t f = 0;
            for (std::size_t k = 0; k < nd; ++k) f += std::uint64_t(idx[k]) * fstride[k];
            out.values[i] = readElement(data + f * es, h.dtype, h.bigEndian);
            for (std::size_t k = nd; k-- > 0;) {
                if (++idx[k] < h.shape[k]) break;
                idx[k] = 0;
            }
        }
    }
    return out;
}

Expected<Array> readNpy(const std::string& path)
{
    Expected<std::string> bytes = attn::readFile(path, kMaxArrayFileBytes);
    if (!bytes) return bytes.status();
    return decodeNpy(*bytes, path);
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] .npz (libzip)
// -----------------------------------------------------------------------------------------------------
// libzip (Debian libzip-dev) rather than a hand-written zip reader: .npz files come from np.savez (stored)
// and np.savez_compressed (deflate), sometimes with ZIP64 records; libzip handles all of them, checks CRCs
// and central-directory consistency (ZIP_CHECKCONS), and reads from / writes to memory buffers, which lets
// the writer keep the atomic temporary-file-then-rename rule.
namespace {

struct ZipCloser {
    void operator()(zip_t* z) const { zip_discard(z); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipCloser>;

std::string zipErrorText(zip_error_t* e)
{
    std::string s = zip_error_strerror(e);
    zip_error_fini(e);
    return s;
}

// Opens the .npz held in `bytes` (which must outlive the archive).
Expected<ZipPtr> openZip(const std::string& bytes, const std::string& path)
{
    // The smallest zip archive is its 22-byte end-of-central-directory record; libzip reports shorter
    // buffers as "No such file", which says nothing to the person holding the file.
    if (bytes.size() < 22)
        return makeError(StatusCode::ParseError, path + ": not a .npz file: " + std::to_string(bytes.size()) +
                                                     " bytes, too short for a zip archive (at least 22)");
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
    if (!src) return makeError(StatusCode::Internal, path + ": " + zipErrorText(&err));
    zip_t* z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!z) {
        const int code = zip_error_code_zip(&err);
        zip_source_free(src);
        const std::string why = code == ZIP_ER_NOZIP || code == ZIP_ER_NOENT ? std::string("no zip directory found")
                                                                             : zipErrorText(&err);
        return makeError(StatusCode::ParseError, path + ": not a valid .npz (zip) file: " + why);
    }
    return ZipPtr(z);
}

std::string stripNpy(std::string name)
{
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    return name;
}

// Reads up to data.size() - got bytes of an open entry; returns the new fill level (stops at the end).
std::size_t readEntry(zip_file_t* f, std::string& data, std::size_t got)
{
    while (got < data.size()) {
        const zip_int64_t r = zip_fread(f, data.data() + got, data.size() - got);
        if (r <= 0) break;
        got += std::size_t(r);
    }
    return got;
}

} // namespace

Expected<std::vector<std::string>> listNpzBytes(const std::string& bytes, const std::string& path)
{
    Expected<ZipPtr> z = openZip(bytes, path);
    if (!z) return z.status();
    std::vector<std::string> names;
    const zip_int64_t n = zip_get_num_entries(z->get(), 0);
    for (zip_int64_t i = 0; i < n; ++i)
        if (const char* name = zip_get_name(z->get(), zip_uint64_t(i), ZIP_FL_ENC_GUESS)) names.push_back(stripNpy(name));
    return names;
}

Expected<std::vector<std::string>> listNpz(const std::string& path)
{
    Expected<std::string> bytes = attn::readFile(path, kMaxArrayFileBytes);
    if (!bytes) return bytes.status();
    return listNpzBytes(*bytes, path);
}

Expected<Array> decodeNpz(const std::string& bytes, const std::string& name, const std::string& path)
{
    Expected<ZipPtr> z = openZip(bytes, path);
    if (!z) return z.status();
    const zip_int64_t n = zip_get_num_entries(z->get(), 0);
    std::string available;
    for (zip_int64_t i = 0; i < n; ++i) {
        const char* entryName = zip_get_name(z->get(), zip_uint64_t(i), ZIP_FL_ENC_GUESS);
        if (!entryName) continue;
        const std::string entry = attn::clipForMessage(entryName, 200);
        const std::string arrayName = stripNpy(entryName);
        if (arrayName != name) {
            if (available.size() < 400) available += (available.empty() ? "" : ", ") + attn::clipForMessage(arrayName);
            continue;
        }
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(z->get(), zip_uint64_t(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
            return makeError(StatusCode::ParseError, path + ": entry '" + entry + "' has no readable size");
        if (st.size > kMaxArrayFileBytes)
            return makeError(StatusCode::ParseError, path + ": entry '" + entry + "' claims " + std::to_string(st.size) +
                                                         " bytes, more than the limit of " + std::to_string(kMaxArrayFileBytes));
        zip_file_t* f = zip_fopen_index(z->get(), zip_uint64_t(i), 0);
        if (!f)
            return makeError(StatusCode::ParseError, path + ": cannot open entry '" + entry + "': " + zip_strerror(z->get()));
        const std::string source = path + "[" + attn::clipForMessage(name) + "]";
        // The .npy header first (at most 12 + kMaxNpyHeaderBytes bytes): an entry declaring more elements than
        // kMaxArrayElements is refused before the rest is inflated.
        std::string data(std::size_t(std::min<zip_uint64_t>(st.size, 12 + kMaxNpyHeaderBytes)), '\0');
        std::size_t got = readEntry(f, data, 0);
        if (got == data.size()) {
            Expected<NpyHeader> hdr = parseNpyHeader(data, prefix(source));
            if (!hdr && hdr.status().code == StatusCode::ResourceExhausted) {
                zip_fclose(f);
                return hdr.status();
            }
            data.resize(std::size_t(st.size));
            got = readEntry(f, data, got);
        }
        // A final read hits the end of the entry, where libzip checks the CRC.
        char probe = 0;
        const zip_int64_t tail = got == data.size() ? zip_fread(f, &probe, 1) : -1;
        zip_error_t* ze = zip_file_get_error(f);
        const bool hasError = ze && (zip_error_code_zip(ze) != ZIP_ER_OK);
        const std::string why = hasError ? zip_file_strerror(f)
                                         : tail > 0 ? "it holds more bytes than its declared size"
                                                    : "the data ends early";
        zip_fclose(f);
        if (got != data.size() || tail != 0)
            return makeError(StatusCode::ParseError, path + ": entry '" + entry + "' is corrupt or truncated (read " +
                                                         std::to_string(got) + " of " + std::to_string(st.size) +
                                                         " bytes: " + why + ")");
        return decodeNpy(data, source);
    }
    if (available.size() > 400) available = available.substr(0, 400) + "...";
    return makeError(StatusCode::InvalidArgument, path + ": no array '" + attn::clipForMessage(name) + "' (it has: " +
                                                      (available.empty() ? "nothing" : available) + ")");
}

Expected<Array> readNpz(const std::string& path, const std::string& name)
{
    Expected<std::string> bytes = attn::readFile(path, kMaxArrayFileBytes);
    if (!bytes) return bytes.status();
    return decodeNpz(*bytes, name, path);
}

Status writeNpz(const std::string& path, const std::vector<NamedArray>& arrays)
{
    std::vector<std::string> blobs;
    blobs.reserve(arrays.size());
    for (const NamedArray& a : arrays) blobs.push_back(encodeNpy(a));

    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &err);
    if (!buffer) return makeError(StatusCode::Internal, path + ": " + zipErrorText(&err));
    zip_source_keep(buffer);  // we read the finished archive out of it after zip_close
    zip_t* z = zip_open_from_source(buffer, ZIP_TRUNCATE, &err);
    if (!z) {
        zip_source_free(buffer);
        return makeError(StatusCode::Internal, path + ": " + zipErrorText(&err));
    }
    for (std::size_t i = 0; i < arrays.size(); ++i) {
        zip_source_t* s = zip_source_buffer(z, blobs[i].data(), blobs[i].size(), 0);
        const zip_int64_t idx = s ? zip_file_add(z, (arrays[i].name + ".npy").c_str(), s, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0) {
            if (s) zip_source_free(s);
            const std::string why = zip_strerror(z);
            zip_discard(z);
            zip_source_free(buffer);
            return makeError(StatusCode::Internal, path + ": cannot add '" + arrays[i].name + "': " + why);
        }
        zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_DEFLATE, 0);
    }
    if (zip_close(z) != 0) {
        const std::string why = zip_strerror(z);
        zip_discard(z);
        zip_source_free(buffer);
        return makeError(StatusCode::Internal, path + ": cannot build the zip archive: " + why);
    }
    std::string out;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_source_stat(buffer, &st) == 0 && zip_source_open(buffer) == 0) {
        out.resize(std::size_t(st.size));
        const zip_int64_t r = zip_source_read(buffer, out.data(), out.size());
        zip_source_close(buffer);
        if (r != zip_int64_t(out.size())) out.clear();
    }
    zip_source_free(buffer);
    if (out.empty()) return makeError(StatusCode::Internal, path + ": cannot read back the zip archive from memory");
    return attn::writeFileAtomic(path, out);
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] safetensors
// -----------------------------------------------------------------------------------------------------
// Layout (https://github.com/huggingface/safetensors, "Format"): 8-byte little-endian header size N, N bytes
// of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the first byte after the header.
namespace {

struct StEntry {
    TensorInfo info;
    std::uint64_t begin = 0, end = 0;
    bool supported = false;
    std::string dtypeName;
};

// Parses the header JSON of a file whose data part has `dataSize` bytes. Entries come back in data order.
// Plain nlohmann::json (a std::map) rather than ordered_json: ordered_json's insert is a linear search, so a
// header of 100 000 tensors took 23 s (issue 13, finding 6); the map is O(n log n).
Expected<std::vector<StEntry>> parseStHeader(std::string_view text, std::uint64_t dataSize, const std::string& path)
{
    ATTNSCOPE_RETURN_IF_ERROR(attn::checkJsonDepth(text, attn::kMaxJsonDepth, path + ": header"));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(StatusCode::ParseError, path + ": header is not a JSON object: corrupt file?");
    std::vector<StEntry> entries;
    entries.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const std::string where = path + ": tensor '" + attn::clipForMessage(it.key()) + "': ";
        const nlohmann::json& e = it.value();
        if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
            !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
            e["data_offsets"].size() != 2)
            return makeError(StatusCode::ParseError, where + "expected {\"dtype\", \"shape\", \"data_offsets\": [begin, end]}");
        StEntry s;
        s.info.name = it.key();
        s.dtypeName = e["dtype"].get<std::string>();
        static const std::pair<const char*, DType> kTypes[] = {{"F32", DType::F32}, {"F16", DType::F16},
                                                               {"BF16", DType::BF16}, {"F64", DType::F64}};
        for (const auto& [code, t] : kTypes)
            if (s.dtypeName == code) {
                s.info.dtype = t;
                s.supported = true;
            }
        if (!s.supported) s.dtypeName = attn::clipForMessage(s.dtypeName, 16);
        for (const nlohmann::json& d : e["shape"]) {
            if (!d.is_number_unsigned()) return makeError(StatusCode::ParseError, where + "shape must be non-negative integers");
            s.info.shape.push_back(std::int64_t(std::min<std::uint64_t>(d.get<std::uint64_t>(), std::uint64_t(kMaxDim) * 64)));
        }
        const nlohmann::json& off = e["data_offsets"];
        if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            return makeError(StatusCode::ParseError, where + "data_offsets must be non-negative integers");
        s.begin = off[0].get<std::uint64_t>();
        s.end = off[1].get<std::uint64_t>();
        if (s.begin > s.end || s.end > dataSize)
            return makeError(StatusCode::ParseError, where + "data_offsets [" + std::to_string(s.begin) + ", " +
                                                         std::to_string(s.end) + "] lie outside the " +
                                                         std::to_string(dataSize) + " data bytes: file truncated?");
        if (s.supported) {
            const std::optional<std::uint64_t> count = elementCount(s.info.shape, dataSize);
            if (!count || *count * dtypeSize(s.info.dtype) != s.end - s.begin)
                return makeError(StatusCode::ParseError, where + "shape " + shapeString(s.info.shape) + " " +
                                                             s.dtypeName + " does not match its " +
                                                             std::to_string(s.end - s.begin) + " data bytes");
        }
        entries.push_back(std::move(s));
    }
    std::stable_sort(entries.begin(), entries.end(), [](const StEntry& x, const StEntry& y) { return x.begin < y.begin; });
    return entries;
}

// The 8-byte header size of a file of `size` bytes, checked against the limit and the file.
Expected<std::uint64_t> stHeaderSize(const unsigned char* lenBytes, std::uint64_t size, const std::string& path)
{
    std::uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | lenBytes[k];
    if (n > kMaxSafetensorsHeaderBytes)
        return makeError(StatusCode::ParseError, path + ": header size " + std::to_string(n) + " bytes is absurd (limit " +
                                                     std::to_string(kMaxSafetensorsHeaderBytes) + "): not a safetensors file?");
    if (8 + n > size)
        return makeError(StatusCode::ParseError, path + ": header size " + std::to_string(n) + " is larger than the file (" +
                                                     std::to_string(size) + " bytes): file truncated?");
    return n;
}

Status shortFile(const std::string& path)
{
    return makeError(StatusCode::ParseError, path + ": not a safetensors file (shorter than the 8-byte header size)");
}

// Decodes one tensor's bytes.
Expected<Array> stTensor(const StEntry& e, std::string_view data, const std::string& path)
{
    if (!e.supported)
        return makeError(StatusCode::Unsupported, path + ": tensor '" + attn::clipForMessage(e.info.name) + "' has dtype " +
                                                      e.dtypeName + "; supported: F32, F16, BF16, F64");
    const std::size_t es = dtypeSize(e.info.dtype);
    if ((e.end - e.begin) / es > std::uint64_t(kMaxArrayElements))
        return makeError(StatusCode::ResourceExhausted,
                         path + ": tensor '" + attn::clipForMessage(e.info.name) + "' " + shapeString(e.info.shape) + " has " +
                             std::to_string((e.end - e.begin) / es) + " elements; the limit is " +
                             std::to_string(kMaxArrayElements) + ": cut it in Python first");
    Array a;
    a.dtype = e.info.dtype;
    a.shape = e.info.shape;
    a.values.resize(data.size() / es);
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    for (std::size_t i = 0; i < a.values.size(); ++i) a.values[i] = readElement(p + i * es, a.dtype, false);
    return a;
}

Status noTensor(const std::vector<StEntry>& entries, const std::string& name, const std::string& path)
{
    std::string available;
    for (const StEntry& e : entries) {
        if (available.size() > 400) break;  // big models list thousands
        available += (available.empty() ? "" : ", ") + attn::clipForMessage(e.info.name);
    }
    if (available.size() > 400) available = available.substr(0, 400) + "...";
    return makeError(StatusCode::InvalidArgument, path + ": no tensor '" + attn::clipForMessage(name) + "' (it has: " +
                                                      (available.empty() ? "nothing" : available) + ")");
}

// An open safetensors file: its descriptor, size and parsed header.
struct StFile {
    int fd = -1;
    std::uint64_t dataStart = 0;
    std::vector<StEntry> entries;
    ~StFile() { if (fd >= 0) ::close(fd); }
};

bool preadAll(int fd, char* out, std::size_t n, std::uint64_t at)
{
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd, out + got, n - got, off_t(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += std::size_t(r);
    }
    return true;
}

Status openSt(const std::string& path, StFile& f)
{
    // Non-blocking open and fstat of the descriptor: a named pipe is refused instead of blocking.
    f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f.fd < 0) return makeError(StatusCode::IoError, path + ": cannot open: " + std::strerror(errno));
    struct stat sb {};
    if (::fstat(f.fd, &sb) != 0) return makeError(StatusCode::IoError, path + ": cannot examine: " + std::strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return makeError(StatusCode::IoError, path + ": is " +
                                                  (S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a named pipe"
                                                                                                         : "not a regular file") +
                                                  ", expected a regular file");
    const std::uint64_t size = std::uint64_t(sb.st_size);
    if (size > kMaxSafetensorsFileBytes)
        return makeError(StatusCode::IoError, path + ": file is " + std::to_string(size) + " bytes, more than the limit of " +
                                                  std::to_string(kMaxSafetensorsFileBytes));
    unsigned char lenBytes[8];
    if (size < 8 || !preadAll(f.fd, reinterpret_cast<char*>(lenBytes), 8, 0)) return shortFile(path);
    Expected<std::uint64_t> n = stHeaderSize(lenBytes, size, path);
    if (!n) return n.status();
    std::string text(std::size_t(*n), '\0');
    if (!preadAll(f.fd, text.data(), text.size(), 8))
        return makeError(StatusCode::IoError, path + ": read failed: " + (errno ? std::strerror(errno) : "file shrank"));
    f.dataStart = 8 + *n;
    Expected<std::vector<StEntry>> e = parseStHeader(text, size - f.dataStart, path);
    if (!e) return e.status();
    f.entries = std::move(*e);
    return {};
}

// The header of a whole file held in memory.
Expected<std::vector<StEntry>> parseStBytes(std::string_view bytes, const std::string& path, std::uint64_t& dataStart)
{
    if (bytes.size() < 8) return shortFile(path);
    Expected<std::uint64_t> n = stHeaderSize(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), path);
    if (!n) return n.status();
    dataStart = 8 + *n;
    return parseStHeader(bytes.substr(8, std::size_t(*n)), bytes.size() - dataStart, path);
}

} // namespace

Expected<std::vector<TensorInfo>> listSafetensors(const std::string& path)
{
    StFile f;
    ATTNSCOPE_RETURN_IF_ERROR(openSt(path, f));
    std::vector<TensorInfo> out;
    out.reserve(f.entries.size());
    for (const StEntry& e : f.entries) out.push_back(e.info);
    return out;
}

Expected<Array> readSafetensors(const std::string& path, const std::string& name)
{
    StFile f;
    ATTNSCOPE_RETURN_IF_ERROR(openSt(path, f));
    for (const StEntry& e : f.entries) {
        if (e.info.name != name) continue;
        if (!e.supported || (e.end - e.begin) / dtypeSize(e.info.dtype) > std::uint64_t(kMaxArrayElements))
            return stTensor(e, std::string_view(), path);  // the error, before reading the data
        std::string data(std::size_t(e.end - e.begin), '\0');
        if (!preadAll(f.fd, data.data(), data.size(), f.dataStart + e.begin))
            return makeError(StatusCode::IoError, path + ": read of tensor '" + attn::clipForMessage(name) + "' failed");
        return stTensor(e, data, path);
    }
    return noTensor(f.entries, name, path);
}

Expected<std::vector<TensorInfo>> listSafetensorsBytes(std::string_view bytes, const std::string& path)
{
    std::uint64_t dataStart = 0;
    Expected<std::vector<StEntry>> e = parseStBytes(bytes, path, dataStart);
    if (!e) return e.status();
    std::vector<TensorInfo> out;
    for (const StEntry& x : *e) out.push_back(x.info);
    return out;
}

Expected<Array> decodeSafetensors(std::string_view bytes, const std::string& name, const std::string& path)
{
    std::uint64_t dataStart = 0;
    Expected<std::vector<StEntry>> entries = parseStBytes(bytes, path, dataStart);
    if (!entries) return entries.status();
    for (const StEntry& e : *entries)
        if (e.info.name == name) return stTensor(e, bytes.substr(std::size_t(dataStart + e.begin), std::size_t(e.end - e.begin)), path);
    return noTensor(*entries, name, path);
}

Status writeSafetensors(const std::string& path, const std::vector<NamedArray>& arrays)
{
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (const NamedArray& a : arrays) {
        Payload p = payloadOf(a);
        const char* dtype = p.descr == "<f4" ? "F32" : p.descr == "|b1" ? "BOOL" : "I32";
        header[a.name] = {{"dtype", dtype}, {"shape", p.shape}, {"data_offsets", {data.size(), data.size() + p.bytes.size()}}};
        data += p.bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the reference writer does
    std::string out(8, '\0');
    for (int k = 0; k < 8; ++k) out[std::size_t(k)] = char((std::uint64_t(text.size()) >> (8 * k)) & 0xff);
    out += text;
    out += data;
    return attn::writeFileAtomic(path, out);
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] CSV, single-file writers
// -----------------------------------------------------------------------------------------------------
Status writeNpy(const std::string& path, const NamedArray& a) { return attn::writeFileAtomic(path, encodeNpy(a)); }

namespace {

Status writePlain(const std::string& path, const std::string& bytes)
{
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return makeError(StatusCode::IoError, path + ": cannot write: " + std::strerror(errno));
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0 &&
                    ::fsync(::fileno(f)) == 0;
    const std::string why = std::strerror(errno);
    if (std::fclose(f) != 0 || !ok) return makeError(StatusCode::IoError, path + ": write failed: " + why);
    return {};
}

} // namespace

Status writeArraysToFolder(const std::string& dirIn, const std::vector<NamedArray>& arrays, bool csv)
{
    std::string dir = dirIn;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    attn::removeStaleTemporaries(dir);
    struct stat sb {};
    const bool exists = ::lstat(dir.c_str(), &sb) == 0;
    if (exists && !S_ISDIR(sb.st_mode))
        return makeError(StatusCode::InvalidArgument, dir + ": exists and is not a folder");
    const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
    attn::removeTree(tmp);
    if (::mkdir(tmp.c_str(), 0777) != 0)
        return makeError(StatusCode::IoError, dir + "/: cannot create folder: " + std::strerror(errno));
    auto fail = [&](Status st) {
        attn::removeTree(tmp);
        return st;
    };
    for (const NamedArray& a : arrays) {
        const std::string name = a.name + (csv ? ".csv" : ".npy");
        if (Status st = writePlain(tmp + "/" + name, csv ? encodeCsv(a) : encodeNpy(a)); !st.ok()) {
            // Name the file the user asked for, not the temporary folder.
            st.message.replace(0, tmp.size(), dir);
            return fail(st);
        }
    }
    if (!exists) {
        if (std::rename(tmp.c_str(), dir.c_str()) != 0)
            return fail(makeError(StatusCode::IoError, dir + "/: cannot create folder: " + std::strerror(errno)));
        return {};
    }
    // Keep the user's other files: hard links into the new folder (no copy, same file system).
    if (DIR* d = ::opendir(dir.c_str())) {
        std::vector<std::string> names;
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n != "." && n != "..") names.push_back(n);
        }
        ::closedir(d);
        for (const std::string& n : names) {
            const std::string from = dir + "/" + n, to = tmp + "/" + n;
            struct stat es {};
            if (::lstat(to.c_str(), &es) == 0) continue;  // replaced by this export
            if (::lstat(from.c_str(), &es) != 0) continue;
            if (S_ISDIR(es.st_mode))
                return fail(makeError(StatusCode::InvalidArgument,
                                      dir + "/: holds the folder '" + attn::clipForMessage(n) +
                                          "'; export into a new folder or one holding only files"));
            if (::link(from.c_str(), to.c_str()) != 0)
                return fail(makeError(StatusCode::IoError, from + ": cannot keep it in the new folder: " + std::strerror(errno)));
        }
    }
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
        attn::removeTree(tmp);  // now the old folder
        return {};
    }
    // No RENAME_EXCHANGE on this file system: old aside, new in, old removed (a kill between the two renames
    // leaves both folders beside `dir`, and the next export cleans them up).
    const std::string old = tmp + "-old";
    if (std::rename(dir.c_str(), old.c_str()) != 0)
        return fail(makeError(StatusCode::IoError, dir + "/: cannot replace folder: " + std::strerror(errno)));
    if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::rename(old.c_str(), dir.c_str());
        return fail(makeError(StatusCode::IoError, dir + "/: cannot replace folder: " + why));
    }
    attn::removeTree(old);
    return {};
}

std::string encodeCsv(const NamedArray& a)
{
    std::string out;
    char buf[32];
    auto put = [&](float v, bool last) {
        // 9 significant digits identify every float32 uniquely (FLT_DECIMAL_DIG).
        std::snprintf(buf, sizeof buf, "%.9g", double(v));
        out += buf;
        out += last ? '\n' : ',';
    };
    if (a.matrix) {
        for (Eigen::Index r = 0; r < a.matrix->rows(); ++r)
            for (Eigen::Index c = 0; c < a.matrix->cols(); ++c) put((*a.matrix)(r, c), c + 1 == a.matrix->cols());
    } else if (a.vector) {
        for (Eigen::Index i = 0; i < a.vector->size(); ++i) put((*a.vector)(i), i + 1 == a.vector->size());
    } else if (a.mask) {
        for (Eigen::Index r = 0; r < a.mask->rows(); ++r)
            for (Eigen::Index c = 0; c < a.mask->cols(); ++c) {
                out += (*a.mask)(r, c) ? '1' : '0';
                out += c + 1 == a.mask->cols() ? '\n' : ',';
            }
    } else {
        for (std::size_t i = 0; i < a.ints.size(); ++i) {
            out += std::to_string(a.ints[i]);
            out += i + 1 == a.ints.size() ? '\n' : ',';
        }
    }
    return out;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Slicing an array into a matrix
// -----------------------------------------------------------------------------------------------------
Expected<Range> parseRange(std::string_view text, std::string_view what)
{
    const std::size_t colon = text.find(':');
    auto bad = [&] {
        return makeError(StatusCode::InvalidArgument, std::string(what) + ": expected a range like 0:8, 4: or :16, got '" +
                                                          attn::clipForMessage(text) + "'");
    };
    if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) return bad();
    auto parsePart = [](std::string_view s, std::int64_t fallback) -> std::optional<std::int64_t> {
        if (s.empty()) return fallback;
        std::int64_t v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
        return v;
    };
    const auto b = parsePart(text.substr(0, colon), 0);
    const auto e = parsePart(text.substr(colon + 1), -1);
    if (!b || !e) return bad();
    if (*e != -1 && *e < *b) return bad();
    return Range{*b, *e};
}

Expected<attn::Matrix> toMatrix(const Array& a, const SliceSpec& spec, std::string_view source)
{
    const std::string pre = prefix(source);
    std::vector<std::int64_t> shape = a.shape;
    while (shape.size() > 2 && shape.front() == 1) shape.erase(shape.begin());  // drop leading size-1 axes
    std::int64_t rows = 1, cols = 1;
    if (shape.size() == 1) cols = shape[0];
    else if (shape.size() == 2) {
        rows = shape[0];
        cols = shape[1];
    } else if (shape.size() > 2) {
        return makeError(StatusCode::InvalidArgument, pre + "expected a 1-D or 2-D array, got shape " + shapeString(a.shape) +
                                                          " (reshape it in NumPy, or pick a 2-D tensor)");
    }
    if (rows > kMaxDim || cols > kMaxDim)
        return makeError(StatusCode::InvalidArgument, pre + "shape " + shapeString(a.shape) + " is too large");
    auto at = [&](std::int64_t r, std::int64_t c) {
        return spec.transpose ? a.values[std::size_t(c * cols + r)] : a.values[std::size_t(r * cols + c)];
    };
    std::int64_t R = spec.transpose ? cols : rows, C = spec.transpose ? rows : cols;
    const std::string orient = spec.transpose ? " (after --transpose: " + std::to_string(R) + "×" + std::to_string(C) + ")" : "";
    auto resolve = [&](const Range& r, std::int64_t n, const char* axis) -> Expected<Range> {
        const std::int64_t e = r.end < 0 ? n : r.end;
        if (r.begin > n || e > n || r.begin >= e)
            return makeError(StatusCode::InvalidArgument,
                             pre + axis + " " + std::to_string(r.begin) + ":" + (r.end < 0 ? std::string() : std::to_string(r.end)) +
                                 ": out of range for " + std::to_string(n) + " " + axis + orient);
        return Range{r.begin, e};
    };
    Expected<Range> rr = resolve(spec.rows, R, "rows");
    if (!rr) return rr.status();
    Expected<Range> cr = resolve(spec.cols, C, "cols");
    if (!cr) return cr.status();
    std::int64_t c0 = cr->begin, c1 = cr->end;
    if (spec.head >= 0) {
        if (spec.heads < 1 || spec.head >= spec.heads)
            return makeError(StatusCode::InvalidArgument, pre + "head " + std::to_string(spec.head) + " of " +
                                                              std::to_string(spec.heads) + ": expected 0 ≤ head < heads");
        const std::int64_t w = c1 - c0;
        if (w % spec.heads != 0)
            return makeError(StatusCode::InvalidArgument, pre + "head slice: " + std::to_string(spec.heads) +
                                                              " heads do not divide " + std::to_string(w) + " columns" + orient);
        const std::int64_t hw = w / spec.heads;
        c0 += hw * spec.head;
        c1 = c0 + hw;
    }
    attn::Matrix m(rr->end - rr->begin, c1 - c0);
    for (std::int64_t r = rr->begin; r < rr->end; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
            const double v = at(r, c);
            const std::string idx = "[" + std::to_string(r) + "][" + std::to_string(c) + "]";
            if (!std::isfinite(v))
                return makeError(StatusCode::InvalidArgument, pre + "value " + idx + " is " + (std::isnan(v) ? "NaN" : "inf") +
                                                                  " (attnscope needs finite numbers)");
            if (std::fabs(v) > double(std::numeric_limits<float>::max()))
                return makeError(StatusCode::InvalidArgument, pre + "value " + idx + " = " + std::to_string(v) + " overflows float32");
            m(r - rr->begin, c - c0) = static_cast<float>(v);
        }
    return m;
}

} // namespace app::io
