// Array files: .npy / .npz / safetensors round trips, slicing, slot import, and one test per corrupt-file
// message. NumPy-side round trips are in roundtrip_test.py.
#include "io/array_io.h"
#include "io/session_arrays.h"

#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <gtest/gtest.h>
#include <zip.h>

#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using namespace app::io;

class ArrayIo : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("attnscope_array_io_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }
    std::string path(const std::string& name) const { return (m_dir / name).string(); }
    static void writeBytes(const std::string& p, const std::string& bytes)
    {
        std::ofstream f(p, std::ios::binary);
        f << bytes;
    }
    static std::string readBytes(const std::string& p)
    {
        std::ifstream f(p, std::ios::binary);
        return {std::istreambuf_iterator<char>(f), {}};
    }
    fs::path m_dir;
};

attn::Matrix sample(int r, int c)
{
    attn::Matrix m(r, c);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < c; ++j) m(i, j) = float(i) * 1.5f - float(j) / 3.0f + 0.1f;
    return m;
}

// A hand-built .npy with the given dict and data bytes (version 1.0).
std::string npyBytes(const std::string& dict, const std::string& data)
{
    std::string h = dict;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += char(h.size() & 0xff);
    out += char(h.size() >> 8);
    return out + h + data;
}

attn::Matrix matrixOf(const Array& a)
{
    attn::Expected<attn::Matrix> m = toMatrix(a, {}, "test");
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.status().message);
    return m.ok() ? *m : attn::Matrix();
}

TEST_F(ArrayIo, NpyRoundTripKeepsFloat32Bits)
{
    const attn::Matrix m = sample(4, 3);
    const std::string bytes = encodeNpy({"m", &m, nullptr, nullptr, {}});
    EXPECT_EQ((bytes.size() - std::size_t(4 * 3 * 4)) % 64, 0u) << "data must start 64-byte aligned";
    attn::Expected<Array> a = decodeNpy(bytes, "m.npy");
    ASSERT_TRUE(a.ok()) << a.status().message;
    EXPECT_EQ(a->dtype, DType::F32);
    EXPECT_EQ(shapeString(a->shape), "(4, 3)");
    EXPECT_EQ(matrixOf(*a), m);
}

TEST_F(ArrayIo, NpyMasksAndIntsRoundTrip)
{
    attn::MaskMatrix mask(2, 3);
    mask << 0, 1, 0, 1, 1, 0;
    attn::Expected<Array> a = decodeNpy(encodeNpy({"k", nullptr, nullptr, &mask, {}}), "k.npy");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->dtype, DType::Bool);
    EXPECT_EQ(a->values, (std::vector<double>{0, 1, 0, 1, 1, 0}));
    NamedArray ints{"v", nullptr, nullptr, nullptr, {3, -1, 7}};
    a = decodeNpy(encodeNpy(ints), "v.npy");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->dtype, DType::I32);
    EXPECT_EQ(shapeString(a->shape), "(3,)");
    EXPECT_EQ(a->values, (std::vector<double>{3, -1, 7}));
}

TEST_F(ArrayIo, NpyFortranOrderBigEndianAndHalf)
{
    // 2×3 float64 in Fortran order: memory holds columns [1,4], [2,5], [3,6].
    std::string data;
    for (double v : {1.0, 4.0, 2.0, 5.0, 3.0, 6.0}) data.append(reinterpret_cast<const char*>(&v), 8);
    attn::Expected<Array> a = decodeNpy(npyBytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", data), "f.npy");
    ASSERT_TRUE(a.ok()) << a.status().message;
    EXPECT_EQ(a->values, (std::vector<double>{1, 2, 3, 4, 5, 6}));
    // Big-endian int16 258 = 0x0102.
    a = decodeNpy(npyBytes("{'descr': '>i2', 'fortran_order': False, 'shape': (1,), }", std::string("\x01\x02", 2)), "b.npy");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->values[0], 258.0);
    // float16: 0x3c00 = 1.0, 0xc000 = -2.0, 0x0001 = 2^-24 (smallest subnormal).
    a = decodeNpy(npyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x3c\x00\xc0\x01\x00", 6)), "h.npy");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->values, (std::vector<double>{1.0, -2.0, std::ldexp(1.0, -24)}));
}

TEST_F(ArrayIo, NpyCorruptFilesGiveClearMessages)
{
    const attn::Matrix m = sample(4, 3);
    const std::string good = encodeNpy({"m", &m, nullptr, nullptr, {}});
    auto msg = [](const attn::Expected<Array>& a) { return a.ok() ? std::string("(ok)") : a.status().message; };
    EXPECT_EQ(msg(decodeNpy("hello world", "x.npy")), "x.npy: not a .npy file (missing the \\x93NUMPY magic)");
    EXPECT_EQ(msg(decodeNpy(good.substr(0, good.size() - 8), "t.npy")),
              "t.npy: data has 40 bytes, shape (4, 3) float32 needs 48 (file truncated?)");
    std::string absurd = good;
    absurd[6] = 2;  // version 2: 4-byte header length
    absurd[8] = absurd[9] = absurd[10] = absurd[11] = char(0xff);
    EXPECT_EQ(msg(decodeNpy(absurd, "a.npy")), "a.npy: header length 4294967295 bytes is absurd (limit 65536)");
    std::string longHeader = good;
    longHeader[9] = char(0x10);  // header length 118 + 4096 in a 176-byte file
    EXPECT_EQ(msg(decodeNpy(longHeader, "l.npy")), "l.npy: header length 4214 is larger than the file (176 bytes)");
    EXPECT_EQ(msg(decodeNpy(npyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')), "c.npy")),
              "c.npy: dtype '<c8' is not supported (expected a real number type: float16/32/64, int, uint or bool)");
    EXPECT_EQ(msg(decodeNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, }", ""), "s.npy")),
              "s.npy: header has no readable 'shape'");
    std::string v9 = good;
    v9[6] = 9;
    EXPECT_EQ(msg(decodeNpy(v9, "v.npy")), "v.npy: .npy format version 9 is not supported (expected 1, 2 or 3)");
    EXPECT_EQ(msg(decodeNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", ""), "o.npy")),
              "o.npy: shape (4294967296, 4294967296, 4294967296) float32 has more than 2^61 elements; the limit is 134217728 (an attention matrix is far smaller): cut the array in NumPy first");
}

TEST_F(ArrayIo, NpzRoundTripAndNames)
{
    const attn::Matrix a = sample(3, 2), b = sample(1, 5);
    attn::MaskMatrix k = attn::MaskMatrix::Ones(2, 2);
    ASSERT_TRUE(writeNpz(path("x.npz"), {{"a", &a, nullptr, nullptr, {}}, {"h0_b", &b, nullptr, nullptr, {}},
                                         {"k", nullptr, nullptr, &k, {}}}).ok());
    attn::Expected<std::vector<std::string>> names = listNpz(path("x.npz"));
    ASSERT_TRUE(names.ok()) << names.status().message;
    EXPECT_EQ(*names, (std::vector<std::string>{"a", "h0_b", "k"}));
    attn::Expected<Array> got = readNpz(path("x.npz"), "h0_b");
    ASSERT_TRUE(got.ok()) << got.status().message;
    EXPECT_EQ(matrixOf(*got), b);
    got = readNpz(path("x.npz"), "Wq");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().message, path("x.npz") + ": no array 'Wq' (it has: a, h0_b, k)");
}

TEST_F(ArrayIo, NpzCorruptFilesGiveClearMessages)
{
    const attn::Matrix a = sample(30, 20);
    ASSERT_TRUE(writeNpz(path("x.npz"), {{"a", &a, nullptr, nullptr, {}}}).ok());
    const std::string bytes = readBytes(path("x.npz"));
    writeBytes(path("cut.npz"), bytes.substr(0, bytes.size() / 2));
    attn::Expected<Array> r = readNpz(path("cut.npz"), "a");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code, attn::StatusCode::ParseError);
    EXPECT_NE(r.status().message.find("cut.npz: not a valid .npz (zip) file: "), std::string::npos) << r.status().message;
    // Flip a byte inside the compressed data (after the 30-byte local header and the name): CRC or inflate fails.
    std::string flipped = bytes;
    flipped[60] = char(flipped[60] ^ 0x5a);
    writeBytes(path("flip.npz"), flipped);
    r = readNpz(path("flip.npz"), "a");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message.find("flip.npz: entry 'a.npy' is corrupt or truncated"), std::string::npos) << r.status().message;
    r = readNpz(path("missing.npz"), "a");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code, attn::StatusCode::IoError);
}

// A safetensors file built here byte by byte (the NumPy-written one is in roundtrip_test.py).
std::string safetensorsBytes(const std::string& header, const std::string& data)
{
    std::string out(8, '\0');
    for (int k = 0; k < 8; ++k) out[std::size_t(k)] = char((header.size() >> (8 * k)) & 0xff);
    return out + header + data;
}

TEST_F(ArrayIo, SafetensorsRoundTripAndDtypes)
{
    const attn::Matrix a = sample(2, 3);
    ASSERT_TRUE(writeSafetensors(path("w.safetensors"), {{"layer.wq", &a, nullptr, nullptr, {}}}).ok());
    attn::Expected<Array> r = readSafetensors(path("w.safetensors"), "layer.wq");
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_EQ(matrixOf(*r), a);
    // bf16 0x3fc0 = 1.5, 0xc040 = -3.0; f16 0x3800 = 0.5.
    const std::string hdr = R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"h":{"dtype":"F16","shape":[1,1],"data_offsets":[4,6]},"__metadata__":{"format":"pt"}})";
    writeBytes(path("d.safetensors"), safetensorsBytes(hdr, std::string("\xc0\x3f\x40\xc0\x00\x38", 6)));
    r = readSafetensors(path("d.safetensors"), "b");
    ASSERT_TRUE(r.ok()) << r.status().message;
    EXPECT_EQ(r->values, (std::vector<double>{1.5, -3.0}));
    r = readSafetensors(path("d.safetensors"), "h");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->values, (std::vector<double>{0.5}));
    attn::Expected<std::vector<TensorInfo>> list = listSafetensors(path("d.safetensors"));
    ASSERT_TRUE(list.ok());
    ASSERT_EQ(list->size(), 2u);
    EXPECT_EQ(list->at(0).name, "b");
}

TEST_F(ArrayIo, SafetensorsCorruptFilesGiveClearMessages)
{
    auto msg = [&](const std::string& name, const std::string& bytes, const std::string& tensor = "t") {
        writeBytes(path(name), bytes);
        attn::Expected<Array> r = readSafetensors(path(name), tensor);
        return r.ok() ? std::string("(ok)") : r.status().message.substr(m_dir.string().size() + 1);
    };
    EXPECT_EQ(msg("short.safetensors", "abc"), "short.safetensors: not a safetensors file (shorter than the 8-byte header size)");
    EXPECT_EQ(msg("absurd.safetensors", std::string(8, '\xff')),
              "absurd.safetensors: header size 18446744073709551615 bytes is absurd (limit 104857600): not a safetensors file?");
    EXPECT_EQ(msg("long.safetensors", safetensorsBytes(std::string(100, ' '), "").substr(0, 50)),
              "long.safetensors: header size 100 is larger than the file (50 bytes): file truncated?");
    EXPECT_EQ(msg("json.safetensors", safetensorsBytes("{\"t\": [", "")), "json.safetensors: header is not a JSON object: corrupt file?");
    EXPECT_EQ(msg("off.safetensors", safetensorsBytes(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0'))),
              "off.safetensors: tensor 't': data_offsets [0, 16] lie outside the 8 data bytes: file truncated?");
    EXPECT_EQ(msg("shape.safetensors", safetensorsBytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'))),
              "shape.safetensors: tensor 't': shape (3,) F32 does not match its 8 data bytes");
    EXPECT_EQ(msg("i64.safetensors", safetensorsBytes(R"({"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'))),
              "i64.safetensors: tensor 't' has dtype I64; supported: F32, F16, BF16, F64");
    EXPECT_EQ(msg("fields.safetensors", safetensorsBytes(R"({"t":{"dtype":"F32"}})", "")),
              "fields.safetensors: tensor 't': expected {\"dtype\", \"shape\", \"data_offsets\": [begin, end]}");
    EXPECT_EQ(msg("name.safetensors", safetensorsBytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')), "t"),
              "name.safetensors: no tensor 't' (it has: a)");
}

TEST_F(ArrayIo, SliceTransposeRangesAndHead)
{
    // A PyTorch-style fused QKV weight: (3·E)×E with E = 4, two heads of width 2.
    Array fused;
    fused.dtype = DType::F32;
    fused.shape = {12, 4};
    for (int i = 0; i < 48; ++i) fused.values.push_back(i);
    SliceSpec spec;
    spec.transpose = true;   // 4×12
    spec.cols = {4, 8};      // W_K block: 4×4
    spec.head = 1;
    spec.heads = 2;          // columns 6..7 of the transposed tensor
    attn::Expected<attn::Matrix> m = toMatrix(fused, spec, "qkv");
    ASSERT_TRUE(m.ok()) << m.status().message;
    ASSERT_EQ(m->rows(), 4);
    ASSERT_EQ(m->cols(), 2);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 2; ++c) EXPECT_EQ((*m)(r, c), float((6 + c) * 4 + r)) << r << "," << c;

    auto err = [&](SliceSpec s) {
        attn::Expected<attn::Matrix> x = toMatrix(fused, s, "w");
        return x.ok() ? std::string("(ok)") : x.status().message;
    };
    EXPECT_EQ(err({false, {4, 20}, {}, -1, 1}), "w: rows 4:20: out of range for 12 rows");
    EXPECT_EQ(err({true, {}, {0, 10}, 0, 3}), "w: head slice: 3 heads do not divide 10 columns (after --transpose: 4×12)");
    EXPECT_EQ(err({false, {}, {}, 2, 2}), "w: head 2 of 2: expected 0 ≤ head < heads");
    Array cube;
    cube.shape = {2, 2, 2};
    cube.values.assign(8, 0.0);
    EXPECT_EQ(toMatrix(cube, {}, "c").status().message,
              "c: expected a 1-D or 2-D array, got shape (2, 2, 2) (reshape it in NumPy, or pick a 2-D tensor)");
    Array inf;
    inf.shape = {1, 2};
    inf.values = {1.0, 1e300};
    EXPECT_NE(toMatrix(inf, {}, "i").status().message.find("i: value [0][1] = "), std::string::npos);
    EXPECT_EQ(parseRange("3:1", "--rows").status().message, "--rows: expected a range like 0:8, 4: or :16, got '3:1'");
}

TEST_F(ArrayIo, SetSlotChecksShapeAndKeepsSessionOnError)
{
    attn::Expected<attn::Session> s = attn::loadSession(ATTNSCOPE_SOURCE_DIR "/assets/presets/seed004_translation_cross.json");
    ASSERT_TRUE(s.ok()) << s.status().message;
    const attn::Matrix before = s->input.Wq;
    const attn::Status st = setSlot(*s, "Wq", sample(8, 4));
    ASSERT_FALSE(st.ok());
    // W^Q = W^K = I in this preset: a narrower Wq no longer matches Wk, and core says so.
    EXPECT_EQ(st.message.rfind("after importing Wq (8×4): Wk: expected width H·d_k = 4", 0), 0u) << st.message;
    EXPECT_EQ(s->input.Wq, before);
    EXPECT_EQ(setSlot(*s, "Wz", sample(1, 1)).message.rfind("unknown slot 'Wz' (expected one of: X, X_kv, Wq", 0), 0u);
    const attn::Matrix good = sample(8, 8);
    ASSERT_TRUE(setSlot(*s, "Wq", good).ok());
    EXPECT_EQ(s->input.Wq, good);
}

TEST_F(ArrayIo, FailedWritesLeaveNothingBehind)
{
    const attn::Matrix a = sample(2, 2);
    const attn::Status st = writeNpz(path("no/such/dir/x.npz"), {{"a", &a, nullptr, nullptr, {}}});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code, attn::StatusCode::IoError);
    EXPECT_NE(st.message.find("x.npz: cannot write"), std::string::npos) << st.message;
    // Writing over a folder fails and leaves the folder (and no temporary file) behind.
    fs::create_directories(path("taken.npz"));
    ASSERT_FALSE(writeNpz(path("taken.npz"), {{"a", &a, nullptr, nullptr, {}}}).ok());
    EXPECT_TRUE(fs::is_directory(path("taken.npz")));
    int files = 0;
    for (const auto& e : fs::directory_iterator(m_dir)) files += e.is_regular_file();
    EXPECT_EQ(files, 0);
}

TEST_F(ArrayIo, SessionArraysNameEveryInputAndResult)
{
    attn::Expected<attn::Session> s = attn::loadSession(ATTNSCOPE_SOURCE_DIR "/assets/presets/causal_decoder_2heads.json");
    ASSERT_TRUE(s.ok());
    attn::Expected<attn::AttentionResult> r = attn::compute(s->input, s->config);
    ASSERT_TRUE(r.ok());
    std::vector<std::string> names;
    for (const NamedArray& a : sessionArrays(*s, &*r)) names.push_back(a.name);
    for (const char* want : {"X", "Wq", "Wk", "Wv", "h0_weights", "h1_weights", "h1_masked", "h1_scores", "concat", "output"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

// Every truncation and many random byte changes of valid files: each read either succeeds or returns an
// error — never a crash, hang or huge allocation (run under ATTNSCOPE_SANITIZE=ON to catch overreads).
TEST_F(ArrayIo, TruncatedAndMutatedFilesNeverCrash)
{
    const attn::Matrix a = sample(6, 5);
    const std::vector<NamedArray> arrays{{"a", &a, nullptr, nullptr, {}}};
    ASSERT_TRUE(writeNpz(path("v.npz"), arrays).ok());
    ASSERT_TRUE(writeSafetensors(path("v.safetensors"), arrays).ok());
    const std::string npy = encodeNpy(arrays[0]), npz = readBytes(path("v.npz")), st = readBytes(path("v.safetensors"));
    std::mt19937 rng(7);
    int errors = 0, oks = 0;
    auto tally = [&](bool ok) { ok ? ++oks : ++errors; };
    for (std::size_t n = 0; n < npy.size(); ++n) tally(decodeNpy(npy.substr(0, n), "t.npy").ok());
    for (std::size_t n = 0; n < npz.size(); n += 3) {
        writeBytes(path("t.npz"), npz.substr(0, n));
        tally(readNpz(path("t.npz"), "a").ok());
    }
    for (std::size_t n = 0; n < st.size(); n += 3) {
        writeBytes(path("t.safetensors"), st.substr(0, n));
        tally(readSafetensors(path("t.safetensors"), "a").ok());
    }
    EXPECT_EQ(oks, 0) << "a truncated file was accepted";
    // Random changes of 1–4 bytes: some still decode (a changed value), the rest must fail cleanly.
    for (int trial = 0; trial < 300; ++trial) {
        auto mutate = [&](std::string b) {
            const int k = 1 + int(rng() % 4);
            for (int i = 0; i < k; ++i) b[rng() % b.size()] = char(rng() & 0xff);
            return b;
        };
        tally(decodeNpy(mutate(npy), "m.npy").ok());
        writeBytes(path("m.npz"), mutate(npz));
        tally(readNpz(path("m.npz"), "a").ok());
        writeBytes(path("m.safetensors"), mutate(st));
        tally(readSafetensors(path("m.safetensors"), "a").ok());
    }
    EXPECT_GT(errors, 900);  // the truncations alone give well over 900 errors
}

} // namespace

// ---- Hardening (issue 13): each test failed before its fix ---------------------------------------------

namespace {

// A safetensors header nesting `levels` objects in __metadata__, and one of `n` one-float tensors.
std::string deepSafetensorsHeader(int levels)
{
    std::string h = "{\"__metadata__\":";
    for (int i = 0; i < levels; ++i) h += "{\"a\":";
    h += "1";
    h.append(std::size_t(levels), '}');
    return h + "}";
}

} // namespace

// Finding 1: the recursive DOM copy of a 100 000-level __metadata__ overflowed the stack (SIGSEGV).
TEST_F(ArrayIo, SafetensorsDeepNestingIsRefusedWithTheLimit)
{
    writeBytes(path("deep.safetensors"), safetensorsBytes(deepSafetensorsHeader(100000), ""));
    attn::Expected<std::vector<TensorInfo>> l = listSafetensors(path("deep.safetensors"));
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code, attn::StatusCode::ParseError);
    EXPECT_NE(l.status().message.find("header: __metadata__: nested deeper than 64 levels (the limit)"), std::string::npos)
        << l.status().message;
    // 64 levels in all (the header object is one of them) still parse.
    writeBytes(path("ok.safetensors"), safetensorsBytes(deepSafetensorsHeader(62), ""));
    EXPECT_TRUE(listSafetensors(path("ok.safetensors")).ok());
}

// Finding 6: 100 000 tensors took 23 s (ordered_json's linear insert). The order of the listing is the data
// order; the count is what matters here (a timing assertion would depend on the machine).
TEST_F(ArrayIo, SafetensorsWithManyTensorsListsThemAllInDataOrder)
{
    constexpr int n = 20000;
    std::string h = "{";
    for (int i = n - 1; i >= 0; --i)  // header order reversed: the listing follows the data offsets
        h += (i == n - 1 ? "" : ",") + std::string("\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
             std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
    h += "}";
    writeBytes(path("many.safetensors"), safetensorsBytes(h, std::string(4 * n, '\0')));
    attn::Expected<std::vector<TensorInfo>> l = listSafetensors(path("many.safetensors"));
    ASSERT_TRUE(l.ok()) << l.status().message;
    ASSERT_EQ(l->size(), std::size_t(n));
    EXPECT_EQ(l->front().name, "t0");
    EXPECT_EQ(l->back().name, "t" + std::to_string(n - 1));
}

// Finding 5: a .npz entry declaring a billion elements was converted to doubles (9.6 GB) before any size
// check. The header is now checked first, and a huge .npy is refused from its header alone.
TEST_F(ArrayIo, HugeArraysAreRefusedFromTheHeaderBeforeDecoding)
{
    const std::string dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (1073741696,), }";
    attn::Expected<Array> a = decodeNpy(npyBytes(dict, std::string(16, '\0')), "bomb.npy");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code, attn::StatusCode::ResourceExhausted);
    EXPECT_EQ(a.status().message, "bomb.npy: shape (1073741696,) bool has 1073741696 elements; the limit is "
                                  "134217728 (an attention matrix is far smaller): cut the array in NumPy first");
    // A deflated entry of kMaxArrayElements + 1 bools (134 MB of zeros, ~130 KB compressed) in a real .npz:
    // refused with the same message, named by the archive and the array.
    const std::string npy = npyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (" +
                                         std::to_string(kMaxArrayElements + 1) + ",), }",
                                     std::string(std::size_t(kMaxArrayElements + 1), '\0'));
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &err);
    ASSERT_NE(buffer, nullptr);
    zip_source_keep(buffer);
    zip_t* z = zip_open_from_source(buffer, ZIP_TRUNCATE, &err);
    ASSERT_NE(z, nullptr);
    zip_source_t* s = zip_source_buffer(z, npy.data(), npy.size(), 0);
    const zip_int64_t idx = zip_file_add(z, "bomb.npy", s, ZIP_FL_ENC_UTF_8);
    ASSERT_GE(idx, 0);
    zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_DEFLATE, 9);
    ASSERT_EQ(zip_close(z), 0);
    zip_stat_t st;
    zip_stat_init(&st);
    ASSERT_EQ(zip_source_stat(buffer, &st), 0);
    ASSERT_EQ(zip_source_open(buffer), 0);
    std::string zipBytes(std::size_t(st.size), '\0');
    ASSERT_EQ(zip_source_read(buffer, zipBytes.data(), zipBytes.size()), zip_int64_t(zipBytes.size()));
    zip_source_close(buffer);
    zip_source_free(buffer);
    EXPECT_LT(zipBytes.size(), std::size_t(1) << 20);
    writeBytes(path("bomb.npz"), zipBytes);
    a = readNpz(path("bomb.npz"), "bomb");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code, attn::StatusCode::ResourceExhausted);
    EXPECT_NE(a.status().message.find("bomb.npz[bomb]: shape (134217729,) bool has 134217729 elements; the limit is 134217728"),
              std::string::npos) << a.status().message;
}

// Finding 7: libzip's texts for an empty file ("No such file") and a clean short read ("No error").
TEST_F(ArrayIo, NpzMessagesSayWhatIsWrong)
{
    writeBytes(path("empty.npz"), "");
    attn::Expected<Array> a = readNpz(path("empty.npz"), "x");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().message.substr(m_dir.string().size() + 1),
              "empty.npz: not a .npz file: 0 bytes, too short for a zip archive (at least 22)");
    writeBytes(path("text.npz"), std::string(100, 'x'));
    a = readNpz(path("text.npz"), "x");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().message.substr(m_dir.string().size() + 1), "text.npz: not a valid .npz (zip) file: no zip directory found");
    for (const std::string& m : {a.status().message}) {
        EXPECT_EQ(m.find("No error"), std::string::npos);
        EXPECT_EQ(m.find("No such file"), std::string::npos);
    }
}

// Finding 6: opening a named pipe blocked forever (ctest's timeout would fail this test).
TEST_F(ArrayIo, NamedPipesAreRefusedWithoutBlocking)
{
    for (const char* name : {"p.npy", "p.npz", "p.safetensors"}) {
        ASSERT_EQ(::mkfifo(path(name).c_str(), 0600), 0);
    }
    for (const attn::Status& st : {readNpy(path("p.npy")).status(), readNpz(path("p.npz"), "x").status(),
                                   readSafetensors(path("p.safetensors"), "x").status()}) {
        EXPECT_EQ(st.code, attn::StatusCode::IoError);
        EXPECT_NE(st.message.find(": is a named pipe, expected a regular file"), std::string::npos) << st.message;
    }
}

// Finding 8: a killed run's "<file>.tmp-<pid>" stayed beside the target; the next write removes it.
TEST_F(ArrayIo, StaleTemporariesOfKilledRunsAreRemoved)
{
    const attn::Matrix m = sample(2, 2);
    // pid_max is at most 2^22 on Linux, so these processes cannot exist; the live one (ours) must be kept.
    writeBytes(path("w.safetensors.tmp-999999999"), "partial");
    fs::create_directories(path("w.safetensors.tmp-999999998-old"));
    const std::string mine = path("w.safetensors.tmp-" + std::to_string(::getpid()) + "x");
    writeBytes(mine, "not a temporary name: kept");
    ASSERT_TRUE(writeSafetensors(path("w.safetensors"), {{"m", &m, nullptr, nullptr, {}}}).ok());
    EXPECT_FALSE(fs::exists(path("w.safetensors.tmp-999999999")));
    EXPECT_FALSE(fs::exists(path("w.safetensors.tmp-999999998-old")));
    EXPECT_TRUE(fs::exists(mine));
    EXPECT_TRUE(readSafetensors(path("w.safetensors"), "m").ok());
}

// Finding 8: a folder export failing half-way left 7 of 13 files (and a kill, old and new files mixed).
// Now the folder changes all at once or not at all, and other files in it are kept.
TEST_F(ArrayIo, FolderExportIsAllOrNothing)
{
    const attn::Matrix a = sample(2, 2), b = sample(3, 2);
    const std::string dir = path("out");
    ASSERT_TRUE(writeArraysToFolder(dir + "/", {{"a", &a, nullptr, nullptr, {}}, {"b", &b, nullptr, nullptr, {}}}, false).ok());
    writeBytes(dir + "/notes.txt", "mine");
    const std::string oldA = readBytes(dir + "/a.npy");
    // The second array cannot be written (its name points into a folder that does not exist): the first
    // must not have replaced the old a.npy either.
    const attn::Matrix a2 = sample(4, 4);
    attn::Status st = writeArraysToFolder(dir, {{"a", &a2, nullptr, nullptr, {}}, {"no/such/b", &b, nullptr, nullptr, {}}}, false);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code, attn::StatusCode::IoError);
    EXPECT_NE(st.message.find(dir + "/no/such/b.npy: cannot write"), std::string::npos) << st.message;
    EXPECT_EQ(readBytes(dir + "/a.npy"), oldA);
    EXPECT_TRUE(fs::exists(dir + "/b.npy"));
    // A successful export replaces the arrays and keeps the user's file; no temporary folder is left.
    ASSERT_TRUE(writeArraysToFolder(dir, {{"a", &a2, nullptr, nullptr, {}}}, false).ok());
    EXPECT_EQ(matrixOf(*readNpy(dir + "/a.npy")), a2);
    EXPECT_EQ(readBytes(dir + "/notes.txt"), "mine");
    EXPECT_TRUE(fs::exists(dir + "/b.npy"));  // not part of this export: kept like any other file
    for (const auto& e : fs::directory_iterator(m_dir))
        EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    // Sub-folders cannot be carried over atomically: refused, nothing changed.
    fs::create_directories(dir + "/sub");
    st = writeArraysToFolder(dir, {{"a", &a, nullptr, nullptr, {}}}, true);
    EXPECT_EQ(st.code, attn::StatusCode::InvalidArgument);
    EXPECT_FALSE(fs::exists(dir + "/a.csv"));
}
