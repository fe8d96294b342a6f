// safetensors → float32. See attnscope/safetensors.h for the contract.
#include "attnscope/safetensors.h"
#include "attnscope/gguf.h"         // halfToFloat
#include "attnscope/preset_io.h"  // readFile, checkJsonDepth

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace attn {
using json = nlohmann::json;

namespace {

int dtypeBytes(const std::string& dt)
{
    if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
    if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
    if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
    if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
    return 0;
}

const char* jsonKind(const json& v)
{
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    if (v.is_boolean()) return "a boolean";
    if (v.is_null()) return "null";
    return "a number";
}

} // namespace

Expected<SafetensorsHeader> parseSafetensorsHeader(const std::uint8_t* bytes, std::size_t size, const std::string& what)
{
    auto bad = [&](const std::string& m) { return makeError(StatusCode::ParseError, what + ": " + m); };
    if (size < 8) return bad("not a safetensors file (" + std::to_string(size) + " bytes, shorter than the 8-byte header size)");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > kMaxSafetensorsHeader) return bad("header size " + std::to_string(n) + " is over the limit of " +
                                              std::to_string(kMaxSafetensorsHeader) + " bytes: not a safetensors file?");
    if (n > size - 8) return bad("header size " + std::to_string(n) + " runs past the end of the file (" +
                                 std::to_string(size) + " bytes): truncated or not a safetensors file");
    const std::string_view header(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(n));
    const std::uint64_t dataSize = size - 8 - n;

    // A header is {name: {dtype, shape: [...], data_offsets: [...]}}: 3 levels; 8 leaves room for __metadata__.
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(header, 8, what + ": header"));
    const json h = json::parse(header, nullptr, /*allow_exceptions=*/false);
    if (h.is_discarded()) return bad("header is not valid JSON");
    if (!h.is_object()) return bad("header is not a JSON object");

    SafetensorsHeader out;
    out.dataOffset = 8 + n;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") {
            const json& m = it.value();
            if (!m.is_object()) {
                out.metadataError = std::string("__metadata__: expected an object of strings, got ") + jsonKind(m);
                continue;
            }
            for (auto mt = m.begin(); mt != m.end(); ++mt) {
                if (mt.value().is_string()) out.metadata.emplace(mt.key(), mt.value().get<std::string>());
                else if (out.metadataError.empty())
                    out.metadataError = "__metadata__." + mt.key() + ": expected a string (safetensors metadata is "
                                        "string → string), got " + jsonKind(mt.value());
            }
            continue;
        }
        const json& t = it.value();
        const std::string where = "tensor \"" + name + "\"";
        if (!t.is_object()) return bad(where + ": expected an object with dtype, shape, data_offsets");
        auto dt = t.find("dtype");
        auto sh = t.find("shape");
        auto off = t.find("data_offsets");
        if (dt == t.end() || !dt->is_string()) return bad(where + ": dtype missing or not a string");
        if (sh == t.end() || !sh->is_array()) return bad(where + ": shape missing or not an array");
        if (off == t.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
            !(*off)[1].is_number_unsigned())
            return bad(where + ": data_offsets must be two non-negative integers [begin, end]");
        SafetensorsEntry e;
        e.name = name;
        e.dtype = dt->get<std::string>();
        e.elementBytes = dtypeBytes(e.dtype);
        if (e.elementBytes == 0) return bad(where + ": unknown dtype \"" + e.dtype + "\"");
        if (sh->size() > 8) return bad(where + ": " + std::to_string(sh->size()) + " dimensions (at most 8 supported)");
        std::uint64_t count = 1;
        for (const json& d : *sh) {
            if (!d.is_number_unsigned()) return bad(where + ": shape entries must be non-negative integers");
            const std::uint64_t v = d.get<std::uint64_t>();
            if (v != 0 && count > (std::uint64_t(1) << 40) / v)
                return bad(where + ": shape has more than 2^40 elements");
            count *= v;
            e.shape.push_back(static_cast<std::int64_t>(v));
        }
        const std::uint64_t begin = (*off)[0].get<std::uint64_t>(), end = (*off)[1].get<std::uint64_t>();
        if (begin > end || end > dataSize)
            return bad(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                       "] outside the data (" + std::to_string(dataSize) + " bytes)");
        if (end - begin != count * std::uint64_t(e.elementBytes))
            return bad(where + ": data_offsets span " + std::to_string(end - begin) + " bytes, expected " +
                       std::to_string(count * e.elementBytes) + " (" + std::to_string(count) + " " + e.dtype + " values)");
        e.count = count;
        e.offset = out.dataOffset + begin;
        e.bytes = end - begin;
        ranges.emplace_back(begin, end);
        out.tensors.push_back(std::move(e));
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second && ranges[i].first != ranges[i].second)
            return bad("two tensors overlap in the data at byte " + std::to_string(ranges[i].first));
    return out;
}

Expected<SafeTensorMap> parseSafetensors(const std::uint8_t* bytes, std::size_t size, const std::string& what)
{
    auto header = parseSafetensorsHeader(bytes, size, what);
    if (!header) return header.status();
    SafeTensorMap out;
    for (SafetensorsEntry& e : header->tensors) {
        SafeTensor st;
        st.dtype = std::move(e.dtype);
        st.shape = std::move(e.shape);
        const std::uint8_t* p = bytes + e.offset;
        const int kind = st.dtype == "F32" ? 0 : st.dtype == "F16" ? 1 : st.dtype == "BF16" ? 2 : -1;
        if (kind >= 0) {
            st.values.resize(static_cast<std::size_t>(e.count));
            for (std::size_t i = 0; i < st.values.size(); ++i) {
                if (kind == 0) {
                    const std::uint32_t b = std::uint32_t(p[4 * i]) | std::uint32_t(p[4 * i + 1]) << 8 |
                                            std::uint32_t(p[4 * i + 2]) << 16 | std::uint32_t(p[4 * i + 3]) << 24;
                    std::memcpy(&st.values[i], &b, 4);
                } else {
                    const std::uint16_t b = std::uint16_t(p[2 * i] | (p[2 * i + 1] << 8));
                    if (kind == 1) st.values[i] = halfToFloat(b);
                    else {
                        const std::uint32_t bits = std::uint32_t(b) << 16;
                        std::memcpy(&st.values[i], &bits, 4);
                    }
                }
            }
        }
        out.emplace(std::move(e.name), std::move(st));
    }
    return out;
}

Expected<SafeTensorMap> readSafetensorsFile(const std::string& path, std::size_t maxBytes)
{
    auto bytes = readFile(path, maxBytes);
    if (!bytes) return bytes.status();
    return parseSafetensors(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size(), path);
}

} // namespace attn
