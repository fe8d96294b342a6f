// Attention bundles through the tile seam. See attnscope/bundle.h for the contract, docs/bundle.md for the format.
#include "attnscope/bundle.h"
#include "attnscope/gguf.h"         // halfToFloat
#include "attnscope/preset_io.h"    // checkJsonDepth
#include "attnscope/safetensors.h"  // parseSafetensorsHeader
#include "mapped_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <new>

namespace attn {
using json = nlohmann::json;

// The values are copied from the file as they lie: safetensors is little-endian, and so is every machine
// attnscope is built for (x86-64, aarch64). A big-endian port would byte-swap in readRow.
static_assert(std::endian::native == std::endian::little, "bundle.cpp reads little-endian values in place");

const char* toString(BundleDtype d)
{
    switch (d) {
    case BundleDtype::F16: return "F16";
    case BundleDtype::BF16: return "BF16";
    case BundleDtype::F32: break;
    }
    return "F32";
}

namespace {

// [SECTION] Helpers

std::string shapeText(const std::vector<std::int64_t>& s)
{
    std::string t;
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? " × " : "") + std::to_string(s[i]);
    return t.empty() ? "a scalar" : t;
}

// "attn.<l>" with l a decimal number without leading zeros (attn.01 would alias attn.1); −1 otherwise.
long layerOf(const std::string& name)
{
    static constexpr std::string_view kPrefix = "attn.";
    if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
    const std::string_view digits = std::string_view(name).substr(kPrefix.size());
    if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;  // 9 digits: no overflow
    long v = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

const char* jsonKind(const json& v)
{
    if (v.is_string()) return "a string";
    if (v.is_array()) return "a list";
    if (v.is_object()) return "an object";
    if (v.is_boolean()) return "a boolean";
    if (v.is_null()) return "null";
    return "a number";
}

// Metadata `key`: JSON text of a list of `expected` strings. `what` names the file, `count` says what the
// length must match (e.g. "the maps' 5 queries").
Expected<std::vector<std::string>> stringList(const std::string& text, const std::string& key, std::size_t expected,
                                              const std::string& what, const std::string& count)
{
    const std::string where = what + ": __metadata__." + key;
    auto bad = [&](const std::string& m) { return invalidArgument(where + ": " + m); };
    if (!checkJsonDepth(text, 2, where).ok()) return bad("expected a JSON list of strings, got lists nested deeper");
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
        return bad("not valid JSON (expected the JSON text of a list of strings, e.g. [\"The\", \" cat\"])");
    if (!j.is_array()) return bad(std::string("expected a JSON list of strings, got ") + jsonKind(j));
    std::vector<std::string> out;
    out.reserve(j.size());
    for (std::size_t i = 0; i < j.size(); ++i) {
        if (!j[i].is_string())
            return invalidArgument(where + "[" + std::to_string(i) + "]: expected a string, got " + jsonKind(j[i]));
        out.push_back(j[i].get<std::string>());
    }
    if (out.size() != expected)
        return bad(std::to_string(out.size()) + " strings, expected " + std::to_string(expected) + " (" + count + ")");
    return out;
}

// float of every binary16 pattern: the f16 rows convert by lookup (256 KiB, built once; halfToFloat's
// subnormal loop would otherwise run per value, and a 4096-token overview converts 16 M values per head).
const float* halfTable()
{
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (std::uint32_t h = 0; h < 65536; ++h) t[h] = halfToFloat(static_cast<std::uint16_t>(h));
        return t;
    }();
    return table.data();
}

} // namespace

// [SECTION] Opening

Expected<std::shared_ptr<BundleMaps>> BundleMaps::open(const std::string& path)
{
    auto file = MappedFile::open(path, "expected a .safetensors attention bundle");
    if (!file) return file.status();
    auto maps = fromBytes((*file)->data(), (*file)->size(), path);
    if (!maps) return maps.status();
    (*maps)->m_file = std::move(*file);
    return maps;
}

Expected<std::shared_ptr<BundleMaps>> BundleMaps::fromBytes(const std::uint8_t* bytes, std::size_t size,
                                                            const std::string& what)
try {
    auto header = parseSafetensorsHeader(bytes, size, what);
    if (!header) return header.status();
    auto bad = [&](const std::string& m) { return invalidArgument(what + ": " + m); };
    if (!header->metadataError.empty()) return bad(header->metadataError);

    // Tensors: attn.0 … attn.<L−1>, nothing else.
    std::map<long, const SafetensorsEntry*> byLayer;
    for (const SafetensorsEntry& e : header->tensors) {
        const long l = layerOf(e.name);
        if (l < 0)
            return bad("unexpected tensor \"" + e.name + "\" (a bundle holds only attn.<layer> tensors: attn.0, attn.1, …)");
        byLayer.emplace(l, &e);
    }
    if (byLayer.empty()) return bad("no attn.<layer> tensors (a bundle holds attn.0 … attn.<L−1>, each heads × queries × keys)");
    const long last = byLayer.rbegin()->first;
    if (long(byLayer.size()) != last + 1) {
        long missing = 0;
        while (byLayer.count(missing)) ++missing;
        return bad("attn." + std::to_string(missing) + " is missing (found " + std::to_string(byLayer.size()) +
                   " layers up to attn." + std::to_string(last) + "; layers are numbered 0 … L−1 without gaps)");
    }

    auto p = std::shared_ptr<BundleMaps>(new BundleMaps);
    BundleMaps& b = *p;
    b.m_what = what;
    b.m_bytes = bytes;
    b.m_layers = static_cast<int>(byLayer.size());
    std::vector<std::int64_t> shape0;  // heads × queries × keys of attn.0
    for (const auto& [l, e] : byLayer) {
        const std::string name = "attn." + std::to_string(l);
        BundleDtype dt;
        if (e->dtype == "F32") dt = BundleDtype::F32;
        else if (e->dtype == "F16") dt = BundleDtype::F16;
        else if (e->dtype == "BF16") dt = BundleDtype::BF16;
        else return bad(name + ": dtype " + e->dtype + " is not supported (expected F32, F16 or BF16)");
        std::vector<std::int64_t> s = e->shape;
        if (s.size() == 4) {
            if (s[0] != 1)
                return bad(name + ": a batch of " + std::to_string(s[0]) + " (shape " + shapeText(s) +
                           "); a bundle holds one sequence: batch × heads × queries × keys with batch 1");
            s.erase(s.begin());
        } else if (s.size() != 3) {
            return bad(name + ": expected rank 3 (heads × queries × keys) or 4 (1 × heads × queries × keys), got rank " +
                       std::to_string(s.size()) + " (" + shapeText(s) + ")");
        }
        if (l == 0) {
            for (std::int64_t d : s)
                if (d == 0 || d > INT_MAX)
                    return bad(name + ": shape " + shapeText(s) + " (heads × queries × keys): each must be 1 … " +
                               std::to_string(INT_MAX));
            shape0 = s;
            b.m_dtype = dt;
        } else {
            if (s != shape0)
                return bad(name + ": expected " + shapeText(shape0) + " (heads × queries × keys, as attn.0), got " +
                           shapeText(s));
            if (dt != b.m_dtype)
                return bad(name + ": dtype " + e->dtype + ", expected " + toString(b.m_dtype) + " (as attn.0)");
        }
        b.m_layerOffset.push_back(e->offset);
    }
    b.m_heads = static_cast<int>(shape0[0]);
    b.m_queries = static_cast<int>(shape0[1]);
    b.m_keys = static_cast<int>(shape0[2]);
    const std::string dims = "attn.0 is " + shapeText(shape0) + ", heads × queries × keys";

    // Metadata.
    const auto& meta = header->metadata;
    if (auto v = meta.find("attnscope_bundle"); v != meta.end()) {
        const std::string& t = v->second;
        const bool digits = !t.empty() && t.size() <= 6 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) return bad("__metadata__.attnscope_bundle: expected a version number such as \"1\", got \"" + t.substr(0, 40) + "\"");
        if (std::stoi(t) > kBundleVersion)
            return makeError(StatusCode::Unsupported, what + ": bundle format version " + t + " is newer than this "
                             "attnscope reads (" + std::to_string(kBundleVersion) + "): update attnscope");
    }
    auto tok = meta.find("tokens");
    if (tok == meta.end())
        return bad("__metadata__.tokens is missing (expected the JSON text of a list of " + std::to_string(b.m_queries) +
                   " token strings, one per query)");
    auto tokens = stringList(tok->second, "tokens", std::size_t(b.m_queries), what, "one per query; " + dims);
    if (!tokens) return tokens.status();
    b.m_tokens = std::move(*tokens);
    if (auto kt = meta.find("key_tokens"); kt != meta.end()) {
        auto keys = stringList(kt->second, "key_tokens", std::size_t(b.m_keys), what, "one per key; " + dims);
        if (!keys) return keys.status();
        b.m_keyTokens = std::move(*keys);
    } else if (b.m_keys != b.m_queries) {
        return bad("__metadata__.key_tokens is missing: the maps have " + std::to_string(b.m_keys) + " keys but " +
                   std::to_string(b.m_queries) + " queries (" + dims + "), so the keys need their own tokens");
    } else {
        b.m_keyTokens = b.m_tokens;
    }
    if (auto m = meta.find("model"); m != meta.end()) b.m_model = m->second;
    if (auto ll = meta.find("layer_labels"); ll != meta.end()) {
        auto labels = stringList(ll->second, "layer_labels", std::size_t(b.m_layers), what,
                                 "one per layer; the bundle has attn.0 … attn." + std::to_string(b.m_layers - 1));
        if (!labels) return labels.status();
        b.m_layerLabels = std::move(*labels);
    }
    if (auto hl = meta.find("head_labels"); hl != meta.end()) {
        auto labels = stringList(hl->second, "head_labels", std::size_t(b.m_heads), what, "one per head; " + dims);
        if (!labels) return labels.status();
        b.m_headLabels = std::move(*labels);
    }
    return p;
} catch (const std::bad_alloc&) {
    // Only reachable when memory is already short: every list is bounded by the header's size first.
    return makeError(StatusCode::ResourceExhausted, what + ": out of memory while reading the header");
}

// [SECTION] Reading

int BundleMaps::readRow(int layer, int head, int q, int c0, int n, float* dst) const
{
    const int eb = m_dtype == BundleDtype::F32 ? 4 : 2;
    const std::uint64_t cell = (std::uint64_t(head) * std::uint64_t(m_queries) + std::uint64_t(q)) * std::uint64_t(m_keys) +
                               std::uint64_t(c0);
    const std::uint8_t* src = m_bytes + m_layerOffset[std::size_t(layer)] + cell * std::uint64_t(eb);
    switch (m_dtype) {
    case BundleDtype::F32: std::memcpy(dst, src, std::size_t(n) * 4); break;
    case BundleDtype::F16: {
        const float* table = halfTable();
        for (int j = 0; j < n; ++j) {
            std::uint16_t h;
            std::memcpy(&h, src + 2 * j, 2);
            dst[j] = table[h];
        }
        break;
    }
    case BundleDtype::BF16:
        for (int j = 0; j < n; ++j) {
            std::uint16_t h;
            std::memcpy(&h, src + 2 * j, 2);
            const std::uint32_t bits = std::uint32_t(h) << 16;  // bfloat16 is the top half of a float32
            std::memcpy(dst + j, &bits, 4);
        }
        break;
    }
    // A float is finite when its exponent bits are not all ones; the branch-free pass vectorizes, the search for
    // which one runs only when there is one.
    std::uint32_t allOnes = 0;
    for (int j = 0; j < n; ++j) {
        std::uint32_t bits;
        std::memcpy(&bits, dst + j, 4);
        allOnes |= std::uint32_t((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (!allOnes) return -1;
    for (int j = 0; j < n; ++j)
        if (!std::isfinite(dst[j])) return j;
    return -1;
}

Status BundleMaps::nonFinite(int layer, int head, int q, int k, float v) const
{
    const char* kind = std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
    return invalidArgument(m_what + ": attn." + std::to_string(layer) + " head " + std::to_string(head) + " query " +
                           std::to_string(q) + " key " + std::to_string(k) + " is " + kind +
                           " (attention weights must be finite)");
}

Status BundleMaps::tile(MapKind kind, int layer, int head, const MapRect& r, Matrix& out) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkTile(kind, layer, head, r));
    out.resize(r.rows, r.cols);
    for (int i = 0; i < r.rows; ++i) {
        float* row = out.row(i).data();
        if (const int j = readRow(layer, head, r.r0 + i, r.c0, r.cols, row); j >= 0)
            return nonFinite(layer, head, r.r0 + i, r.c0 + j, row[j]);
    }
    return Status::success();
}

Status BundleMaps::pooled(MapKind kind, int layer, int head, const MapRect& r, int outRows, int outCols,
                          Matrix& out) const
{
    std::vector<int> colOf;
    const Expected<bool> any = preparePooled(kind, layer, head, r, outRows, outCols, colOf, out);
    if (!any || !*any) return any ? Status::success() : any.status();
    // Every block holds at least one cell (outRows ≤ rows, outCols ≤ cols) and every value read is finite (a
    // non-finite one fails the call), so −Inf is replaced everywhere and no NaN of poolMax's empty blocks remains.
    out.setConstant(outRows, outCols, -std::numeric_limits<float>::infinity());
    std::vector<float> row(static_cast<std::size_t>(r.cols));
    for (int p = 0; p < outRows; ++p) {
        float* dst = out.row(p).data();
        const int a = blockStart(r.rows, outRows, p), b = blockStart(r.rows, outRows, p + 1);
        for (int i = a; i < b; ++i) {
            if (const int j = readRow(layer, head, r.r0 + i, r.c0, r.cols, row.data()); j >= 0)
                return nonFinite(layer, head, r.r0 + i, r.c0 + j, row[std::size_t(j)]);
            for (int c = 0; c < outCols; ++c) {
                const int j0 = blockStart(r.cols, outCols, c), j1 = blockStart(r.cols, outCols, c + 1);
                float m = dst[c];
                for (int j = j0; j < j1; ++j) m = std::max(m, row[std::size_t(j)]);
                dst[c] = m;
            }
        }
    }
    return Status::success();
}

Status BundleMaps::checkValues() const
{
    std::vector<float> row(static_cast<std::size_t>(m_keys));
    for (int l = 0; l < m_layers; ++l)
        for (int h = 0; h < m_heads; ++h)
            for (int q = 0; q < m_queries; ++q)
                if (const int k = readRow(l, h, q, 0, m_keys, row.data()); k >= 0)
                    return nonFinite(l, h, q, k, row[std::size_t(k)]);
    return Status::success();
}

} // namespace attn
