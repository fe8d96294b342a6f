// Attention bundles (attnscope/bundle.h): bundles built here byte by byte (header JSON + data, as the safetensors
// format lays them out), read back through the tile seam in F32, F16 and BF16 against the values written, the
// pooled overview against attn::poolMax, and every refusal with the message naming what disagrees; bundles the
// Python package wrote (data/bundle/, the fuzz seeds; make_bundle_data.py) against the same values.
//
// [SECTION] Building bundles   [SECTION] Round trips   [SECTION] Bundles written by the Python package
// [SECTION] Bounds and values  [SECTION] Refusals
#include <attnscope/bundle.h>
#include <attnscope/colormap.h>  // poolMax

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include <unistd.h>

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using attn::BundleMaps;
using attn::MapKind;
using attn::MapRect;
using attn::Matrix;
using attn::StatusCode;

// [SECTION] Building bundles

// Exactly representable in F16 and BF16 (n/128 with n < 128 needs 7 mantissa bits): the round trips compare
// exactly. Distinct across layer, head, query and key so that a wrong offset shows.
float cell(int l, int h, int i, int j) { return float((l * 31 + h * 17 + i * 5 + j * 3) % 97) / 128.0f; }

std::uint16_t toHalf(float f)  // for the values above, NaN and ±Inf: exact
{
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    const std::uint16_t sign = std::uint16_t((b >> 16) & 0x8000u);
    if (std::isnan(f)) return sign | 0x7e00u;
    if (std::isinf(f)) return sign | 0x7c00u;
    if (f == 0) return sign;
    const int e = int((b >> 23) & 0xffu) - 127 + 15;
    return std::uint16_t(sign | (e << 10) | ((b >> 13) & 0x3ffu));
}

struct Tensor {
    std::string name;
    std::string dtype = "F32";
    std::vector<std::int64_t> shape;
    std::vector<float> values;  // row-major; empty: zeros of the shape's size
};

// A layers × heads × T × S bundle's tensors, filled with cell().
std::vector<Tensor> maps(int L, int H, int T, int S, const std::string& dtype = "F32", bool batch = false)
{
    std::vector<Tensor> out;
    for (int l = 0; l < L; ++l) {
        Tensor t{"attn." + std::to_string(l), dtype, {H, T, S}, {}};
        if (batch) t.shape.insert(t.shape.begin(), 1);
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < S; ++j) t.values.push_back(cell(l, h, i, j));
        out.push_back(std::move(t));
    }
    return out;
}

json tokenList(int n, const std::string& stem = "t")
{
    json a = json::array();
    for (int i = 0; i < n; ++i) a.push_back(stem + std::to_string(i));
    return a;
}

// The file: 8-byte little-endian header size, the header JSON, the data. `meta` goes in as __metadata__.
std::string bundleBytes(const std::vector<Tensor>& tensors, const json& meta)
{
    json h = json::object();
    std::string data;
    for (const Tensor& t : tensors) {
        std::size_t count = 1;
        for (auto d : t.shape) count *= std::size_t(d);
        std::vector<float> v = t.values;
        v.resize(count, 0.0f);
        const std::size_t begin = data.size();
        for (float f : v) {
            if (t.dtype == "F32") {
                data.append(reinterpret_cast<const char*>(&f), 4);
            } else if (t.dtype == "F16") {
                const std::uint16_t x = toHalf(f);
                data.append(reinterpret_cast<const char*>(&x), 2);
            } else if (t.dtype == "BF16") {
                std::uint32_t b;
                std::memcpy(&b, &f, 4);
                const std::uint16_t x = std::uint16_t(b >> 16);
                data.append(reinterpret_cast<const char*>(&x), 2);
            } else {  // I64, F64, …: 8 zero bytes each
                data.append(8, '\0');
            }
        }
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    if (!meta.is_null()) h["__metadata__"] = meta;
    std::string header = h.dump();
    while (header.size() % 8) header += ' ';  // as the safetensors writers pad it
    std::string out(8, '\0');
    const std::uint64_t n = header.size();
    for (int k = 0; k < 8; ++k) out[std::size_t(k)] = char((n >> (8 * k)) & 0xffu);
    return out + header + data;
}

// `bytes` with `from` replaced by `to` in the header, the header size rewritten to match.
std::string editHeader(const std::string& bytes, const std::string& from, const std::string& to)
{
    std::uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | std::uint8_t(bytes[std::size_t(k)]);
    std::string header = bytes.substr(8, n);
    const std::size_t at = header.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) header.replace(at, from.size(), to);
    std::string out(8, '\0');
    for (int k = 0; k < 8; ++k) out[std::size_t(k)] = char((header.size() >> (8 * k)) & 0xffu);
    return out + header + bytes.substr(8 + n);
}

json metaFor(int T, std::optional<int> S = std::nullopt)
{
    json m = {{"tokens", tokenList(T).dump()}};
    if (S) m["key_tokens"] = tokenList(*S, "k").dump();
    return m;
}

// fromBytes reads the bytes in place: the returned pointer owns a copy of them alongside the maps.
attn::Expected<std::shared_ptr<BundleMaps>> parse(const std::string& bytes)
{
    struct Held {
        std::string bytes;
        std::shared_ptr<BundleMaps> maps;
    };
    auto held = std::make_shared<Held>();
    held->bytes = bytes;
    auto b = BundleMaps::fromBytes(reinterpret_cast<const std::uint8_t*>(held->bytes.data()), held->bytes.size(),
                                   "b.safetensors");
    if (!b) return b.status();
    held->maps = *b;
    return std::shared_ptr<BundleMaps>(held, held->maps.get());
}

// The message of a refused bundle (empty, and a test failure, when it opened).
std::string refusal(const std::string& bytes, StatusCode code = StatusCode::InvalidArgument)
{
    auto b = parse(bytes);
    if (b) {
        ADD_FAILURE() << "the bundle opened";
        return {};
    }
    EXPECT_EQ(b.status().code, code) << b.status().message;
    EXPECT_EQ(b.status().message.find('\n'), std::string::npos) << "one line: " << b.status().message;
    EXPECT_EQ(b.status().message.rfind("b.safetensors: ", 0), 0u) << "names the file: " << b.status().message;
    return b.status().message;
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// [SECTION] Round trips

class BundleDtypes : public ::testing::TestWithParam<std::string> {};

TEST_P(BundleDtypes, TilesPooledAndWholeAreTheValuesWritten)
{
    const int L = 2, H = 3, T = 7, S = 7;
    const std::string bytes = bundleBytes(maps(L, H, T, S, GetParam()), metaFor(T));
    auto b = parse(bytes);
    ASSERT_TRUE(b) << b.status().message;
    const BundleMaps& m = **b;
    EXPECT_EQ(m.layers(), L);
    EXPECT_EQ(m.heads(), H);
    EXPECT_EQ(m.queries(), T);
    EXPECT_EQ(m.keys(), S);
    EXPECT_STREQ(m.dtypeName(), GetParam().c_str());
    EXPECT_EQ(m.tokens(), tokenList(T).get<std::vector<std::string>>());
    EXPECT_EQ(m.keyTokens(), m.tokens());
    EXPECT_TRUE(m.has(MapKind::Weights));
    EXPECT_FALSE(m.has(MapKind::Scores));
    EXPECT_FALSE(m.causal());
    EXPECT_TRUE(m.modelName().empty());
    EXPECT_TRUE(m.layerLabels().empty());
    EXPECT_TRUE(m.checkValues().ok());
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
            Matrix w;
            ASSERT_TRUE(m.whole(MapKind::Weights, l, h, w).ok());
            ASSERT_EQ(w.rows(), T);
            ASSERT_EQ(w.cols(), S);
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < S; ++j) ASSERT_EQ(w(i, j), cell(l, h, i, j)) << l << " " << h << " " << i << " " << j;
            Matrix t;
            ASSERT_TRUE(m.tile(MapKind::Weights, l, h, MapRect{2, 3, 4, 2}, t).ok());
            EXPECT_EQ(t, w.block(2, 3, 4, 2));
            for (auto [pr, pc] : {std::pair{1, 1}, {2, 3}, {3, 2}, {7, 7}, {100, 100}}) {
                Matrix p;
                ASSERT_TRUE(m.pooled(MapKind::Weights, l, h, MapRect{0, 0, T, S}, pr, pc, p).ok());
                EXPECT_EQ(p, attn::poolMax(w, pr, pc)) << pr << "×" << pc;
            }
            Matrix p;  // a sub-rectangle pools that block of the map
            ASSERT_TRUE(m.pooled(MapKind::Weights, l, h, MapRect{1, 2, 5, 4}, 2, 3, p).ok());
            EXPECT_EQ(p, attn::poolMax(Matrix(w.block(1, 2, 5, 4)), 2, 3));
        }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BundleDtypes, ::testing::Values("F32", "F16", "BF16"));

TEST(Bundle, PooledMatchesPoolMaxOnUnevenBlocks)
{
    const int T = 131, S = 97;
    auto b = parse(bundleBytes(maps(1, 2, T, S, "F16"), metaFor(T, S)));
    ASSERT_TRUE(b) << b.status().message;
    Matrix w, p;
    attn::Status s = (*b)->whole(MapKind::Weights, 0, 1, w);
    ASSERT_TRUE(s.ok()) << s.message;
    s = (*b)->pooled(MapKind::Weights, 0, 1, MapRect{0, 0, T, S}, 40, 17, p);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(p, attn::poolMax(w, 40, 17));
}

TEST(Bundle, KeyTokensLabelsAndModel)
{
    const int T = 3, S = 5;
    json meta = metaFor(T, S);
    meta["model"] = "gpt2";
    meta["layer_labels"] = json({"first", "second"}).dump();
    meta["head_labels"] = json({"h0", "h1", "h2", "h3"}).dump();
    meta["attnscope_bundle"] = "1";
    meta["format"] = "pt";  // other keys are ignored
    auto b = parse(bundleBytes(maps(2, 4, T, S), meta));
    ASSERT_TRUE(b) << b.status().message;
    EXPECT_EQ((*b)->queries(), T);
    EXPECT_EQ((*b)->keys(), S);
    EXPECT_EQ((*b)->keyTokens(), tokenList(S, "k").get<std::vector<std::string>>());
    EXPECT_EQ((*b)->modelName(), "gpt2");
    EXPECT_EQ((*b)->layerLabels(), (std::vector<std::string>{"first", "second"}));
    EXPECT_EQ((*b)->headLabels(), (std::vector<std::string>{"h0", "h1", "h2", "h3"}));
    Matrix w;
    ASSERT_TRUE((*b)->whole(MapKind::Weights, 1, 3, w).ok());
    EXPECT_EQ(w(2, 4), cell(1, 3, 2, 4));
}

TEST(Bundle, RankFourWithABatchOfOne)
{
    auto b = parse(bundleBytes(maps(3, 2, 4, 4, "BF16", /*batch=*/true), metaFor(4)));
    ASSERT_TRUE(b) << b.status().message;
    EXPECT_EQ((*b)->layers(), 3);
    EXPECT_EQ((*b)->heads(), 2);
    Matrix w;
    ASSERT_TRUE((*b)->whole(MapKind::Weights, 2, 1, w).ok());
    EXPECT_EQ(w(3, 1), cell(2, 1, 3, 1));
}

TEST(Bundle, UnicodeTokens)
{
    json meta = {{"tokens", json({"Ġthe", "猫", "\n"}).dump()}};
    auto b = parse(bundleBytes(maps(1, 1, 3, 3), meta));
    ASSERT_TRUE(b) << b.status().message;
    EXPECT_EQ((*b)->tokens()[1], "猫");
    EXPECT_EQ((*b)->tokens()[2], "\n");
}

TEST(Bundle, OpensAMappedFile)
{
    const fs::path p = fs::temp_directory_path() / ("attnscope_test_bundle_" + std::to_string(::getpid()) + ".safetensors");
    {
        std::ofstream f(p, std::ios::binary);
        const std::string bytes = bundleBytes(maps(2, 2, 6, 6, "F16"), metaFor(6));
        f.write(bytes.data(), std::streamsize(bytes.size()));
    }
    auto b = BundleMaps::open(p.string());
    fs::remove(p);  // the mapping outlives the name
    ASSERT_TRUE(b) << b.status().message;
    EXPECT_EQ((*b)->path(), p.string());
    Matrix w;
    ASSERT_TRUE((*b)->whole(MapKind::Weights, 1, 1, w).ok());
    EXPECT_EQ(w(5, 4), cell(1, 1, 5, 4));

    auto missing = BundleMaps::open("no/such/bundle.safetensors");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.status().code, StatusCode::IoError);
    EXPECT_CONTAINS(missing.status().message, "no/such/bundle.safetensors: cannot open");
    auto dir = BundleMaps::open(fs::temp_directory_path().string());
    ASSERT_FALSE(dir);
    EXPECT_CONTAINS(dir.status().message, "is a directory, expected a .safetensors attention bundle");
}

// The size: 12 layers × 12 heads × 4096 × 4096 F16, 4.8 GB, more than a test machine may spare. The file is
// sparse (the header, then a hole: zeros, which read as 0.0) with a few values written at the very end, past 4 GiB:
// opening reads only the header, and the last head's last cells come from offsets that overflow 32 bits.
TEST(Bundle, OpensAFourGigabyteFileWithoutReadingIt)
{
    const int L = 12, H = 12, T = 4096;
    json h = json::object();
    const std::uint64_t layerBytes = std::uint64_t(H) * T * T * 2;
    for (int l = 0; l < L; ++l)
        h["attn." + std::to_string(l)] = {{"dtype", "F16"}, {"shape", {H, T, T}},
                                          {"data_offsets", {l * layerBytes, (l + 1) * layerBytes}}};
    h["__metadata__"] = metaFor(T);
    std::string header = h.dump();
    while (header.size() % 8) header += ' ';
    std::string prefix(8, '\0');
    for (int k = 0; k < 8; ++k) prefix[std::size_t(k)] = char((header.size() >> (8 * k)) & 0xffu);
    prefix += header;
    const std::uint64_t total = prefix.size() + L * layerBytes;
    const fs::path p = fs::temp_directory_path() / ("attnscope_test_big_" + std::to_string(::getpid()) + ".safetensors");
    {
        std::ofstream f(p, std::ios::binary);
        f.write(prefix.data(), std::streamsize(prefix.size()));
        // The last row's last 4 keys of layer 11, head 11: 0.25, 0.5, 0.75, 1 (F16 0x3400, 0x3800, 0x3a00, 0x3c00).
        const std::uint16_t tail[4] = {0x3400, 0x3800, 0x3a00, 0x3c00};
        f.seekp(std::streamoff(total - 8));
        f.write(reinterpret_cast<const char*>(tail), 8);
        ASSERT_TRUE(f.good()) << "cannot write " << p;
    }
    auto b = BundleMaps::open(p.string());
    fs::remove(p);
    ASSERT_TRUE(b) << b.status().message;
    EXPECT_EQ((*b)->layers(), L);
    EXPECT_EQ((*b)->queries(), T);
    Matrix t;
    ASSERT_TRUE((*b)->tile(MapKind::Weights, 11, 11, MapRect{T - 2, T - 5, 2, 5}, t).ok());
    EXPECT_EQ(t.row(1), (Matrix(1, 5) << 0.0f, 0.25f, 0.5f, 0.75f, 1.0f).finished());
    EXPECT_EQ(t.row(0).maxCoeff(), 0.0f);
    ASSERT_TRUE((*b)->pooled(MapKind::Weights, 11, 11, MapRect{T - 512, T - 512, 512, 512}, 4, 4, t).ok());
    EXPECT_EQ(t(3, 3), 1.0f);
    EXPECT_EQ(t(3, 2), 0.0f);
}

// [SECTION] Bundles written by the Python package (tests/model/make_bundle_data.py)

TEST(Bundle, ReadsWhatThePythonPackageWrote)
{
    auto b = BundleMaps::open(std::string(ATTNSCOPE_BUNDLE_DATA) + "/python_f16.safetensors");
    ASSERT_TRUE(b) << b.status().message;
    EXPECT_EQ((*b)->layers(), 2);
    EXPECT_EQ((*b)->heads(), 3);
    EXPECT_EQ((*b)->queries(), 4);
    EXPECT_EQ((*b)->keys(), 5);
    EXPECT_STREQ((*b)->dtypeName(), "F16");
    EXPECT_EQ((*b)->tokens(), tokenList(4).get<std::vector<std::string>>());
    EXPECT_EQ((*b)->keyTokens(), tokenList(5, "k").get<std::vector<std::string>>());
    EXPECT_EQ((*b)->modelName(), "tiny-model");
    EXPECT_EQ((*b)->layerLabels(), (std::vector<std::string>{"L0", "L1"}));
    EXPECT_EQ((*b)->headLabels(), (std::vector<std::string>{"a", "b", "c"}));
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 3; ++h) {
            Matrix w;
            ASSERT_TRUE((*b)->whole(MapKind::Weights, l, h, w).ok());
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 5; ++j) ASSERT_EQ(w(i, j), cell(l, h, i, j)) << l << " " << h << " " << i << " " << j;
        }
}

TEST(Bundle, FuzzSeedsOpenOrAreRefusedAsNamed)
{
    const fs::path dir = ATTNSCOPE_BUNDLE_CORPUS;
    for (const char* name : {"valid_f32", "valid_f16_keys", "valid_bf16_batch"}) {
        auto b = BundleMaps::open((dir / (std::string(name) + ".safetensors")).string());
        ASSERT_TRUE(b) << name << ": " << b.status().message;
        EXPECT_TRUE((*b)->checkValues().ok()) << name;
    }
    auto bf = BundleMaps::open((dir / "valid_bf16_batch.safetensors").string());
    Matrix w;
    ASSERT_TRUE((*bf)->whole(MapKind::Weights, 1, 0, w).ok());
    EXPECT_EQ(w(2, 1), cell(1, 0, 2, 1));
    const std::pair<const char*, const char*> refused[] = {
        {"bad_token_count", "__metadata__.tokens: 2 strings, expected 3"},
        {"bad_gap", "attn.1 is missing"},
        {"bad_truncated", "outside the data"},
        {"bad_lying_header", "data_offsets span 72 bytes, expected 216"},
    };
    for (auto [name, message] : refused) {
        auto b = BundleMaps::open((dir / (std::string(name) + ".safetensors")).string());
        ASSERT_FALSE(b) << name;
        EXPECT_CONTAINS(b.status().message, message);
    }
    auto nan = BundleMaps::open((dir / "bad_nan.safetensors").string());
    ASSERT_TRUE(nan) << nan.status().message;
    EXPECT_CONTAINS(nan->get()->checkValues().message, "attn.0 head 0 query 2 key 1 is NaN");
}

// [SECTION] Bounds and values

TEST(Bundle, TileOutsideOrScoresIsRefused)
{
    auto b = parse(bundleBytes(maps(1, 2, 4, 4), metaFor(4)));
    ASSERT_TRUE(b);
    Matrix t;
    EXPECT_CONTAINS((*b)->tile(MapKind::Weights, 1, 0, MapRect{0, 0, 1, 1}, t).message, "layer 1 is outside 0..0");
    EXPECT_CONTAINS((*b)->tile(MapKind::Weights, 0, 2, MapRect{0, 0, 1, 1}, t).message, "head 2 is outside 0..1");
    EXPECT_CONTAINS((*b)->tile(MapKind::Weights, 0, 0, MapRect{3, 0, 2, 1}, t).message, "outside the 4×4 map");
    EXPECT_CONTAINS((*b)->tile(MapKind::Scores, 0, 0, MapRect{0, 0, 1, 1}, t).message, "hold no scores");
    EXPECT_CONTAINS((*b)->pooled(MapKind::Weights, 0, 0, MapRect{0, 0, 5, 4}, 2, 2, t).message, "outside the 4×4 map");
}

class BundleNonFinite : public ::testing::TestWithParam<std::string> {};

TEST_P(BundleNonFinite, NaNAndInfFailTheReadNamingTheCell)
{
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
        auto t = maps(2, 3, 5, 6, GetParam());
        // layer 1, head 2, query 3, key 4
        t[1].values[std::size_t(((2 * 5) + 3) * 6 + 4)] = bad;
        auto b = parse(bundleBytes(t, metaFor(5, 6)));
        ASSERT_TRUE(b) << b.status().message;  // values are checked as they are read, not at open
        const std::string cellText = "b.safetensors: attn.1 head 2 query 3 key 4 is " + std::string(std::isnan(bad) ? "NaN" : "-Inf");
        Matrix m;
        attn::Status s = (*b)->tile(MapKind::Weights, 1, 2, MapRect{2, 1, 3, 5}, m);
        EXPECT_FALSE(s.ok());
        EXPECT_CONTAINS(s.message, cellText);
        s = (*b)->pooled(MapKind::Weights, 1, 2, MapRect{0, 0, 5, 6}, 2, 2, m);  // reported, not skipped
        EXPECT_FALSE(s.ok());
        EXPECT_CONTAINS(s.message, cellText);
        s = (*b)->checkValues();
        EXPECT_FALSE(s.ok());
        EXPECT_CONTAINS(s.message, cellText);
        // The rest of the map reads.
        EXPECT_TRUE((*b)->tile(MapKind::Weights, 1, 2, MapRect{0, 0, 3, 6}, m).ok());
        EXPECT_TRUE((*b)->tile(MapKind::Weights, 1, 1, MapRect{0, 0, 5, 6}, m).ok());
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BundleNonFinite, ::testing::Values("F32", "F16", "BF16"));

// [SECTION] Refusals

TEST(BundleRefuses, WrongRankOrBatch)
{
    auto t = maps(1, 1, 4, 4);
    t[0].shape = {4, 4};
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))),
                    "attn.0: expected rank 3 (heads × queries × keys) or 4 (1 × heads × queries × keys), got rank 2 (4 × 4)");
    t = maps(1, 2, 4, 4);
    t[0].shape = {2, 1, 4, 4};
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "attn.0: a batch of 2 (shape 2 × 1 × 4 × 4)");
    t = maps(1, 1, 4, 4);
    t[0].shape = {1, 1, 1, 4, 4};
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "got rank 5");
}

TEST(BundleRefuses, TokenCounts)
{
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 2, 5, 5), metaFor(4))),
                    "b.safetensors: __metadata__.tokens: 4 strings, expected 5 (one per query; attn.0 is 2 × 5 × 5, heads × queries × keys)");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 2, 5, 7), metaFor(5))),
                    "__metadata__.key_tokens is missing: the maps have 7 keys but 5 queries");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 2, 5, 7), metaFor(5, 6))), "__metadata__.key_tokens: 6 strings, expected 7");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 2, 5, 5), metaFor(5, 4))), "__metadata__.key_tokens: 4 strings, expected 5");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 2, 5, 5), json::object())), "__metadata__.tokens is missing");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 2, 5, 5), json())), "__metadata__.tokens is missing");
}

TEST(BundleRefuses, MetadataNotJsonListsOfStrings)
{
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), {{"tokens", "a b"}})), "__metadata__.tokens: not valid JSON");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), {{"tokens", "{\"a\": 1}"}})),
                    "__metadata__.tokens: expected a JSON list of strings, got an object");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), {{"tokens", "[\"a\", 2]"}})),
                    "__metadata__.tokens[1]: expected a string, got a number");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), {{"tokens", "[[[[\"a\"]]]]"}})),
                    "__metadata__.tokens: expected a JSON list of strings, got lists nested deeper");
    // safetensors metadata is string → string: a list written straight into the header is refused.
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), {{"tokens", {"a", "b"}}})),
                    "__metadata__.tokens: expected a string (safetensors metadata is string → string), got an array");
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), json::array({1}))), "__metadata__: expected an object of strings");
    json meta = metaFor(2);
    meta["layer_labels"] = json({"a", "b"}).dump();
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 3, 2, 2), meta)), "__metadata__.layer_labels: 2 strings, expected 1 (one per layer");
    meta = metaFor(2);
    meta["head_labels"] = json({"a", "b"}).dump();
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 3, 2, 2), meta)), "__metadata__.head_labels: 2 strings, expected 3 (one per head");
    meta = metaFor(2);
    meta["attnscope_bundle"] = "2";
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), meta), StatusCode::Unsupported),
                    "bundle format version 2 is newer than this attnscope reads (1): update attnscope");
    meta["attnscope_bundle"] = "one";
    EXPECT_CONTAINS(refusal(bundleBytes(maps(1, 1, 2, 2), meta)), "__metadata__.attnscope_bundle: expected a version number");
}

TEST(BundleRefuses, LayersMissingExtraOrMismatched)
{
    auto t = maps(3, 2, 4, 4);
    t.erase(t.begin() + 1);
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "attn.1 is missing (found 2 layers up to attn.2");
    t = maps(2, 2, 4, 4);
    t.erase(t.begin());
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "attn.0 is missing");
    t = maps(1, 2, 4, 4);
    t.push_back({"embeddings", "F32", {4}, {}});
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "unexpected tensor \"embeddings\" (a bundle holds only attn.<layer> tensors");
    t = maps(2, 2, 4, 4);
    t[1].name = "attn.01";
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "unexpected tensor \"attn.01\"");
    EXPECT_CONTAINS(refusal(bundleBytes({}, metaFor(4))), "no attn.<layer> tensors");
    t = maps(3, 2, 4, 4);
    t[2].shape = {2, 4, 3};
    t[2].values.resize(24);
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))),
                    "b.safetensors: attn.2: expected 2 × 4 × 4 (heads × queries × keys, as attn.0), got 2 × 4 × 3");
    t = maps(2, 2, 4, 4);
    t[1].shape = {1, 2, 4, 4};  // a batch dimension on one layer only is the same maps
    EXPECT_TRUE(parse(bundleBytes(t, metaFor(4))));
    t = maps(2, 2, 4, 4);
    t[1].dtype = "F16";
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(4))), "attn.1: dtype F16, expected F32 (as attn.0)");
    t = maps(1, 2, 4, 4);
    t[0].shape = {2, 0, 4};
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(0))), "attn.0: shape 2 × 0 × 4 (heads × queries × keys): each must be 1");
}

TEST(BundleRefuses, UnsupportedDtype)
{
    auto t = maps(1, 1, 2, 2);
    t[0].dtype = "I64";
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(2))), "attn.0: dtype I64 is not supported (expected F32, F16 or BF16)");
    t[0].dtype = "F64";
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(2))), "attn.0: dtype F64 is not supported");
    t[0].dtype = "Q4";
    EXPECT_CONTAINS(refusal(bundleBytes(t, metaFor(2)), StatusCode::ParseError), "unknown dtype \"Q4\"");
}

TEST(BundleRefuses, TruncatedOrLyingFiles)
{
    const std::string good = bundleBytes(maps(2, 2, 4, 4), metaFor(4));
    ASSERT_TRUE(parse(good));
    EXPECT_CONTAINS(refusal(good.substr(0, good.size() - 1), StatusCode::ParseError), "outside the data");
    EXPECT_CONTAINS(refusal(good.substr(0, 5), StatusCode::ParseError), "shorter than the 8-byte header size");
    EXPECT_CONTAINS(refusal(good.substr(0, 40), StatusCode::ParseError), "runs past the end of the file");
    std::string huge = good;
    huge[6] = '\x01';  // header size 2^48 + …
    EXPECT_CONTAINS(refusal(huge, StatusCode::ParseError), "is over the limit");
    // A header claiming more elements than its offsets span.
    auto t = maps(1, 2, 4, 4);
    std::string lying = editHeader(bundleBytes(t, metaFor(4)), "[2,4,4]", "[9,4,4]");
    EXPECT_CONTAINS(refusal(lying, StatusCode::ParseError), "data_offsets span 128 bytes, expected 576");
    // Shape counts that overflow are refused before any arithmetic on them.
    lying = editHeader(bundleBytes(t, metaFor(4)), "[2,4,4]", "[4294967296,4294967296,9]");
    EXPECT_CONTAINS(refusal(lying, StatusCode::ParseError), "more than 2^40 elements");
    EXPECT_CONTAINS(refusal(std::string(8, '\0'), StatusCode::ParseError), "header is not valid JSON");
}

} // namespace
