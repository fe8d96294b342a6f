// The GGUF reader and the GGML dequantizers (attnscope/gguf.h):
//  - every supported block format against gguf-py's dequantization of the same bytes (goldens/gguf_quants.*),
//  - a GGUF file written by gguf-py's GGUFWriter (data/gguf/tiny.gguf), key by key and tensor by tensor,
//  - the real SmolLM2 GGUF when installed (metadata facts and golden rows; skipped when absent),
//  - hostile files built here byte by byte: each refused with a message naming the field.
// Goldens: tests/model/make_gguf_goldens.py (its docstring says how to regenerate them).
#include <attnscope/gguf.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using attn::GgmlType;
using attn::GgufFile;
using attn::GgufValueType;
using attn::StatusCode;

const fs::path kGoldens = fs::path(ATTNSCOPE_MODEL_GOLDENS).parent_path();
const fs::path kTiny = fs::path(ATTNSCOPE_GGUF_DATA) / "tiny.gguf";

std::string slurp(const fs::path& p)
{
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

json readJson(const fs::path& p) { return json::parse(slurp(p)); }

const std::uint8_t* u8(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

std::uint32_t bitsOf(float f)
{
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// Exact comparison: ggml_quants.cpp is built with -ffp-contract=off, so it rounds `d*q` and `- m` separately
// as gguf-py's float32 NumPy does, in the same order (scale × quant, then the min); both are IEEE float32, so
// the results must be the same bits. Prints the first mismatches and the largest difference.
void expectSameFloats(const float* got, const float* want, std::size_t n, const std::string& what)
{
    std::size_t bad = 0;
    double maxDiff = 0;
    for (std::size_t k = 0; k < n; ++k) {
        if (bitsOf(got[k]) == bitsOf(want[k])) continue;
        maxDiff = std::max(maxDiff, std::fabs(double(got[k]) - double(want[k])));
        if (bad++ < 5) ADD_FAILURE() << what << "[" << k << "]: got " << got[k] << ", want " << want[k];
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " values differ, max |diff| " << maxDiff;
}

// [SECTION] block formats against gguf-py

TEST(GgmlQuants, EveryTypeMatchesGgufPy)
{
    const json g = readJson(kGoldens / "gguf_quants.json");
    const std::string bin = slurp(kGoldens / "gguf_quants.bin");
    ASSERT_EQ(g["types"].size(), 15u);  // the 13 of F32 … Q6_K, then IQ4_NL and IQ4_XS
    for (const json& e : g["types"]) {
        const auto type = static_cast<GgmlType>(e["id"].get<std::uint32_t>());
        const std::string name = e["type"];
        SCOPED_TRACE(name);
        EXPECT_EQ(attn::ggmlTypeName(type), name);
        ASSERT_TRUE(attn::ggmlTypeSupported(type));
        const std::int64_t n = e["n"];
        const std::size_t srcBytes = e["src_bytes"], srcOff = e["src_offset"], outOff = e["out_offset"];
        ASSERT_LE(outOff + 4 * std::size_t(n), bin.size());
        // The table's block geometry agrees with how many bytes gguf-py used for n elements.
        EXPECT_EQ(std::size_t(n / attn::ggmlBlockSize(type)) * attn::ggmlBlockBytes(type), srcBytes);
        std::vector<float> want(static_cast<std::size_t>(n)), got(want.size(), -12345.f);
        std::memcpy(want.data(), bin.data() + outOff, want.size() * 4);
        const attn::Status s = attn::dequantizeRow(type, u8(bin) + srcOff, srcBytes, got.data(), n);
        ASSERT_TRUE(s.ok()) << s.message;
        expectSameFloats(got.data(), want.data(), want.size(), name);
        // Block by block gives the same as the whole row (the per-row API is used on tiles later).
        const std::int64_t bs = attn::ggmlBlockSize(type);
        const std::size_t bb = attn::ggmlBlockBytes(type);
        std::vector<float> piece(static_cast<std::size_t>(bs));
        for (std::int64_t b = 0; b < n / bs; b += std::max<std::int64_t>(1, n / bs / 3)) {
            ASSERT_TRUE(attn::dequantizeRow(type, u8(bin) + srcOff + std::size_t(b) * bb, bb, piece.data(), bs).ok());
            expectSameFloats(piece.data(), want.data() + b * bs, piece.size(), name + " block " + std::to_string(b));
        }
    }
}

TEST(GgmlQuants, RowArgumentsAreChecked)
{
    std::vector<std::uint8_t> src(1024, 0);
    std::vector<float> dst(1024);
    auto s = attn::dequantizeRow(GgmlType::Q4_0, src.data(), src.size(), dst.data(), 33);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_NE(s.message.find("33 elements of Q4_0: expected a non-negative multiple of its block size 32"), std::string::npos) << s.message;
    s = attn::dequantizeRow(GgmlType::Q6_K, src.data(), 209, dst.data(), 256);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    EXPECT_NE(s.message.find("256 elements of Q6_K need 210 bytes, got 209"), std::string::npos) << s.message;
    s = attn::dequantizeRow(GgmlType::Q8_0, src.data(), src.size(), dst.data(), -32);
    EXPECT_EQ(s.code, StatusCode::InvalidArgument);
    s = attn::dequantizeRow(GgmlType::IQ2_XXS, src.data(), src.size(), dst.data(), 256);
    EXPECT_EQ(s.code, StatusCode::Unsupported);
    EXPECT_NE(s.message.find("IQ2_XXS (id 16) is not supported"), std::string::npos) << s.message;
    s = attn::dequantizeRow(static_cast<GgmlType>(99), src.data(), src.size(), dst.data(), 32);
    EXPECT_EQ(s.code, StatusCode::Unsupported);
    EXPECT_NE(s.message.find("unknown (id 99)"), std::string::npos) << s.message;
    EXPECT_TRUE(attn::dequantizeRow(GgmlType::Q4_K, nullptr, 0, nullptr, 0).ok());  // nothing to do
    EXPECT_FALSE(attn::ggmlTypeKnown(static_cast<GgmlType>(4)));  // Q4_2, retired by GGML
    EXPECT_EQ(attn::ggmlBlockSize(static_cast<GgmlType>(4)), 0);
}

TEST(GgmlQuants, HalfFloatSpecialValues)
{
    EXPECT_EQ(attn::halfToFloat(0x3c00), 1.0f);
    EXPECT_EQ(attn::halfToFloat(0x7bff), 65504.0f);                    // largest half
    EXPECT_EQ(attn::halfToFloat(0x0001), std::ldexp(1.0f, -24));       // smallest subnormal
    EXPECT_EQ(attn::halfToFloat(0x03ff), std::ldexp(1023.0f, -24));    // largest subnormal
    EXPECT_EQ(bitsOf(attn::halfToFloat(0x8000)), 0x80000000u);         // -0 keeps its sign
    EXPECT_EQ(attn::halfToFloat(0x7c00), std::numeric_limits<float>::infinity());
    EXPECT_EQ(attn::halfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(attn::halfToFloat(0x7e00)));
    // F16 and BF16 rows carry Inf and NaN through rather than refusing them.
    const std::uint8_t f16[4] = {0x00, 0x7c, 0x01, 0x7e};
    const std::uint8_t bf16[4] = {0x80, 0xff, 0xc1, 0x7f};
    float out[2];
    ASSERT_TRUE(attn::dequantizeRow(GgmlType::F16, f16, 4, out, 2).ok());
    EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(out[1]));
    ASSERT_TRUE(attn::dequantizeRow(GgmlType::BF16, bf16, 4, out, 2).ok());
    EXPECT_EQ(out[0], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(out[1]));
}

// [SECTION] a file written by gguf-py

void checkMetadata(const GgufFile& f, const json& e)
{
    const std::string key = e["key"], type = e["type"];
    SCOPED_TRACE(key);
    const attn::GgufValue* v = f.find(key);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(attn::ggufValueTypeName(v->type), type);
    const json& want = e["value"];
    if (type == "string") {
        EXPECT_EQ(*f.getString(key), want.get<std::string>());
    } else if (type == "bool") {
        EXPECT_EQ(*f.getBool(key), want.get<bool>());
    } else if (type == "float32" || type == "float64") {
        EXPECT_EQ(*f.getFloat(key), want.get<double>());  // float32 → double is exact both here and in Python
    } else if (type[0] == 'u') {
        EXPECT_EQ(*f.getUint(key), want.get<std::uint64_t>());
    } else if (type[0] == 'i') {
        EXPECT_EQ(*f.getInt(key), want.get<std::int64_t>());
    } else {
        ASSERT_EQ(type, "array");
        const std::string et = e["element_type"];
        EXPECT_EQ(attn::ggufValueTypeName(v->elementType), et);
        ASSERT_EQ(v->count, want.size());
        if (et == "string") {
            EXPECT_EQ(*f.getStringArray(key), want.get<std::vector<std::string>>());
        } else if (et == "float32" || et == "float64") {
            const auto got = f.getFloatArray(key);
            ASSERT_TRUE(got.ok()) << got.status().message;
            for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ((*got)[k], float(want[k].get<double>()));
            for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(v->element(k).f, want[k].get<double>());
        } else if (et == "bool") {
            for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(v->element(k).u != 0, want[k].get<bool>());
        } else if (et == "array") {
            for (std::size_t k = 0; k < want.size(); ++k) {
                const attn::GgufValue inner = v->element(k);
                ASSERT_EQ(inner.type, GgufValueType::Array);
                ASSERT_EQ(inner.count, want[k].size());
                for (std::size_t j = 0; j < inner.count; ++j) EXPECT_EQ(inner.element(j).i, want[k][j].get<std::int64_t>());
            }
        } else if (et == "uint64") {  // may exceed int64: read element by element
            for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(v->element(k).u, want[k].get<std::uint64_t>());
        } else {
            EXPECT_EQ(*f.getIntArray(key), want.get<std::vector<std::int64_t>>());
        }
    }
}

TEST(GgufFile, TinyFileFromGgufPyKeyByKeyAndTensorByTensor)
{
    const json g = readJson(kGoldens / "gguf_tiny.json");
    auto f = GgufFile::open(kTiny.string());
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->version(), g["version"].get<std::uint32_t>());
    EXPECT_EQ(f->alignment(), g["alignment"].get<std::uint64_t>());
    ASSERT_EQ(f->metadata().size(), g["metadata"].size());
    for (std::size_t k = 0; k < g["metadata"].size(); ++k) {
        EXPECT_EQ(f->metadata()[k].first, g["metadata"][k]["key"].get<std::string>());  // file order kept
        checkMetadata(*f, g["metadata"][k]);
    }
    ASSERT_EQ(f->tensors().size(), g["tensors"].size());
    for (std::size_t k = 0; k < g["tensors"].size(); ++k) {
        const json& e = g["tensors"][k];
        const std::string name = e["name"];
        SCOPED_TRACE(name);
        const attn::GgufTensorInfo& t = f->tensors()[k];
        EXPECT_EQ(t.name, name);
        EXPECT_EQ(f->tensor(name), &t);
        EXPECT_EQ(t.dims, e["dims"].get<std::vector<std::int64_t>>());
        EXPECT_EQ(attn::ggmlTypeName(t.type), e["type"].get<std::string>());
        EXPECT_EQ(t.offset, e["offset"].get<std::uint64_t>());
        EXPECT_EQ(t.bytes, e["bytes"].get<std::uint64_t>());
        EXPECT_EQ(t.offset % f->alignment(), 0u);
        auto values = f->dequantize(name);
        ASSERT_TRUE(values.ok()) << values.status().message;
        ASSERT_FALSE(e["values"].is_null());
        const auto want = e["values"].get<std::vector<float>>();
        ASSERT_EQ(values->size(), want.size());
        expectSameFloats(values->data(), want.data(), want.size(), name);
    }
    EXPECT_EQ(f->tensor("no.such"), nullptr);
    // Movable: the metadata views and the mapping go with it.
    GgufFile moved = std::move(*f);
    EXPECT_EQ(*moved.getString("general.architecture"), "tinyarch");
    EXPECT_EQ(moved.dequantize("f32.2d")->size(), 12u);
}

TEST(GgufFile, LookupErrorsNameKeyAndTypes)
{
    auto f = GgufFile::open(kTiny.string());
    ASSERT_TRUE(f.ok()) << f.status().message;
    auto expectError = [&](const attn::Status& s, const std::string& text) {
        EXPECT_EQ(s.code, StatusCode::InvalidArgument);
        EXPECT_NE(s.message.find(text), std::string::npos) << s.message;
    };
    expectError(f->getUint("t.str").status(), "tiny.gguf: t.str: expected an integer, got string \"h");
    expectError(f->getString("t.u32").status(), "t.u32: expected a string, got uint32 4000000000");
    expectError(f->getString("llama.block_count").status(), "tiny.gguf: llama.block_count: no such key in the metadata");
    expectError(f->getUint("t.i8").status(), "t.i8: expected an integer ≥ 0, got int8 -100");
    expectError(f->getInt("t.u64").status(), "t.u64: expected an integer below 2^63, got uint64 18000000000000000000");
    expectError(f->getBool("t.u8").status(), "t.u8: expected a bool, got uint8 200");
    expectError(f->getString("t.f32").status(), "t.f32: expected a string, got float32 0.100000001");
    expectError(f->getFloat("t.strs").status(), "t.strs: expected a number, got array of 4 string");
    expectError(f->getStringArray("t.ints").status(), "t.ints: expected an array of strings, got array of 3 int32");
    expectError(f->getIntArray("t.floats").status(), "expected an array of integers, got array of 3 float32");
    expectError(f->getIntArray("t.u64s").status(), "t.u64s[0]: expected an integer below 2^63");
    expectError(f->getFloatArray("t.strs").status(), "expected an array of numbers");
    EXPECT_EQ(*f->getInt("t.u8"), 200);
    EXPECT_EQ(*f->getFloat("t.i32"), -2000000000.0);  // an integer is a number
    auto missing = f->dequantize("no.such");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message.find("no tensor named \"no.such\""), std::string::npos);
    std::vector<float> small(3);
    const attn::Status s = f->dequantize(*f->tensor("f32.2d"), small.data(), small.size());
    expectError(s, "tensor f32.2d: output holds 3 floats, expected 12");
}

TEST(GgufFile, VersionTwoHasTheSameLayout)
{
    std::string bytes = slurp(kTiny);
    bytes[4] = 2;
    auto f = GgufFile::parse(u8(bytes), bytes.size(), "v2.gguf");
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->tensors().size(), 15u);
}

// [SECTION] the real model

TEST(GgufFile, SmolLM2MetadataAndRows)
{
    const fs::path path = ATTNSCOPE_SMOLLM2_GGUF;
    if (!fs::exists(path)) GTEST_SKIP() << path << " is not installed (scripts/setup.sh installs it)";
    auto f = GgufFile::open(path.string());
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->tensors().size(), 272u);
    const json g = readJson(kGoldens / "smollm2_rows.json");
    const json& facts = g["facts"];
    // The facts the llama forward relies on (issue 17), as gguf-py read them.
    EXPECT_EQ(*f->getString("general.architecture"), "llama");
    EXPECT_EQ(*f->getUint("llama.block_count"), 30u);
    EXPECT_EQ(*f->getUint("llama.attention.head_count"), 9u);
    EXPECT_EQ(*f->getUint("llama.attention.head_count_kv"), 3u);
    EXPECT_EQ(*f->getUint("llama.embedding_length"), 576u);
    EXPECT_EQ(*f->getFloat("llama.rope.freq_base"), 100000.0);
    for (const char* key : {"general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.pre"})
        EXPECT_EQ(*f->getString(key), facts[key].get<std::string>()) << key;
    for (const char* key : {"llama.block_count", "llama.attention.head_count", "llama.attention.head_count_kv",
                            "llama.embedding_length", "llama.feed_forward_length", "llama.context_length"})
        EXPECT_EQ(*f->getUint(key), facts[key].get<std::uint64_t>()) << key;
    for (const char* key : {"llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon"})
        EXPECT_EQ(*f->getFloat(key), facts[key].get<double>()) << key;
    const auto tokens = f->getStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status().message;
    EXPECT_EQ(tokens->size(), 49152u);
    EXPECT_EQ(tokens->size(), facts["tokenizer.ggml.tokens.count"].get<std::size_t>());
    for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ((*tokens)[k], facts["tokenizer.ggml.tokens[0..3]"][k].get<std::string>());
    const auto types = f->getIntArray("tokenizer.ggml.token_type");
    ASSERT_TRUE(types.ok()) << types.status().message;
    EXPECT_EQ(types->size(), 49152u);
    EXPECT_TRUE(f->getStringArray("tokenizer.ggml.merges").ok());

    const std::string bin = slurp(kGoldens / "smollm2_rows.bin");
    for (const json& r : g["rows"]) {
        const std::string name = r["tensor"];
        const attn::GgufTensorInfo* t = f->tensor(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(attn::ggmlTypeName(t->type), r["type"].get<std::string>());
        EXPECT_EQ(t->dims, r["dims"].get<std::vector<std::int64_t>>());
        const std::int64_t cols = t->dims[0], row = r["row"];
        ASSERT_EQ(cols, r["n"].get<std::int64_t>());
        const std::size_t rowBytes = t->rowBytes();
        EXPECT_EQ(rowBytes * std::size_t(t->rows()), t->bytes);
        std::vector<float> got(static_cast<std::size_t>(cols)), want(got.size());
        ASSERT_TRUE(attn::dequantizeRow(t->type, f->rawData(*t) + std::size_t(row) * rowBytes, rowBytes, got.data(), cols).ok());
        std::memcpy(want.data(), bin.data() + r["offset"].get<std::size_t>(), want.size() * 4);
        expectSameFloats(got.data(), want.data(), got.size(), name + " row " + std::to_string(row));
    }
    // The real file cut in half: the first tensor whose data is gone is named, with the byte its data ends at.
    {
        const std::string bytes = slurp(path);
        const std::size_t half = bytes.size() / 2;
        auto cut = GgufFile::parse(u8(bytes), half, "half.gguf");
        ASSERT_FALSE(cut.ok());
        EXPECT_NE(cut.status().message.find("half.gguf: tensor "), std::string::npos) << cut.status().message;
        EXPECT_NE(cut.status().message.find("past the end of the file (" + std::to_string(half) + " bytes)"),
                  std::string::npos) << cut.status().message;
    }
    // The whole-tensor path puts row r at r × dims[0].
    const auto q = f->dequantize("blk.0.attn_q.weight");
    ASSERT_TRUE(q.ok()) << q.status().message;
    for (const json& r : g["rows"]) {
        if (r["tensor"] != "blk.0.attn_q.weight") continue;
        std::vector<float> want(576);
        std::memcpy(want.data(), bin.data() + r["offset"].get<std::size_t>(), want.size() * 4);
        expectSameFloats(q->data() + r["row"].get<std::size_t>() * 576, want.data(), 576, "whole tensor");
    }
}

// [SECTION] hostile files

// Writes GGUF bytes field by field, so each test can lie in exactly one place.
struct Writer {
    std::string b;
    Writer& u32(std::uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); return *this; }
    Writer& u64(std::uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); return *this; }
    Writer& str(const std::string& s) { u64(s.size()); b += s; return *this; }
    Writer& header(std::uint64_t nTensors, std::uint64_t nKv, std::uint32_t version = 3)
    {
        b += "GGUF";
        return u32(version).u64(nTensors).u64(nKv);
    }
    Writer& kvU32(const std::string& k, std::uint32_t v) { return str(k).u32(4).u32(v); }
    Writer& tensor(const std::string& name, std::vector<std::uint64_t> dims, std::uint32_t type, std::uint64_t offset)
    {
        str(name).u32(std::uint32_t(dims.size()));
        for (std::uint64_t d : dims) u64(d);
        return u32(type).u64(offset);
    }
    Writer& data(std::size_t n, std::size_t align = 32)
    {
        b.resize((b.size() + align - 1) / align * align, '\0');
        b.append(n, '\x01');
        return *this;
    }
};

attn::Status parseStatus(const std::string& bytes)
{
    auto f = GgufFile::parse(u8(bytes), bytes.size(), "bad.gguf");
    return f.ok() ? attn::Status::success() : f.status();
}

#define EXPECT_REFUSED(bytes, code_, text)                                                                  \
    do {                                                                                                    \
        const attn::Status st_ = parseStatus(bytes);                                                        \
        EXPECT_EQ(st_.code, code_) << st_.message;                                                          \
        EXPECT_NE(st_.message.find(text), std::string::npos) << "message: " << st_.message;                 \
        EXPECT_EQ(st_.message.rfind("bad.gguf: ", 0), 0u) << st_.message;                                   \
    } while (0)

TEST(GgufHostile, AValidHandMadeFileParses)  // the baseline every lie below departs from
{
    Writer w;
    w.header(2, 1).kvU32("general.alignment", 32).tensor("a", {32, 2}, 8, 0).tensor("b", {4}, 0, 96).data(112);
    auto f = GgufFile::parse(u8(w.b), w.b.size(), "ok.gguf");
    ASSERT_TRUE(f.ok()) << f.status().message;
    EXPECT_EQ(f->tensors()[1].offset - f->dataOffset(), 96u);
    EXPECT_EQ(f->tensors()[0].bytes, 68u);
}

TEST(GgufHostile, TruncatedAtEveryOffsetOfTheTinyFile)
{
    const std::string bytes = slurp(kTiny);
    // Every cut before the end of the last tensor's data must be refused (after it, only padding is lost).
    std::uint64_t dataEnd = 0;
    const json g = readJson(kGoldens / "gguf_tiny.json");
    for (const json& t : g["tensors"])
        dataEnd = std::max(dataEnd, t["offset"].get<std::uint64_t>() + t["bytes"].get<std::uint64_t>());
    ASSERT_GT(dataEnd, 3000u);
    ASSERT_LE(dataEnd, bytes.size());
    for (std::size_t n = 0; n < dataEnd; ++n) {
        const std::string cut = bytes.substr(0, n);  // its own allocation, so ASan sees any read past n
        const attn::Status s = parseStatus(cut);
        ASSERT_FALSE(s.ok()) << "truncated to " << n << " bytes parsed";
        ASSERT_EQ(s.code, StatusCode::ParseError) << n << ": " << s.message;
        const bool named = s.message.find("past the end of the file") != std::string::npos ||
                           s.message.find("not a GGUF file") != std::string::npos ||
                           s.message.find("more than the file can hold") != std::string::npos ||
                           s.message.find("left in the file") != std::string::npos;
        ASSERT_TRUE(named) << n << ": " << s.message;
    }
}

TEST(GgufHostile, HeaderLies)
{
    EXPECT_REFUSED(std::string(), StatusCode::ParseError, "not a GGUF file: 0 bytes");
    EXPECT_REFUSED(std::string("GGML\3\0\0\0"), StatusCode::ParseError, "magic is \"GGML\", expected \"GGUF\"");
    EXPECT_REFUSED(Writer().header(0, 0, 1).b, StatusCode::Unsupported, "GGUF version 1 is not supported (expected 2 or 3)");
    EXPECT_REFUSED(Writer().header(0, 0, 4).b, StatusCode::Unsupported, "GGUF version 4 is not supported");
    EXPECT_REFUSED(Writer().header(0, 0, 0x03000000).b, StatusCode::Unsupported, "big-endian");
    EXPECT_REFUSED(Writer().header(std::uint64_t(1) << 60, 0).b, StatusCode::ParseError, "tensor count 1152921504606846976 is more than the file can hold");
    EXPECT_REFUSED(Writer().header(0, ~std::uint64_t(0)).b, StatusCode::ParseError, "metadata count 18446744073709551615 is more than the file can hold");
    EXPECT_REFUSED(Writer().header(0, 1).u64(std::uint64_t(1) << 40).b + std::string(20, 'x'), StatusCode::ParseError,
                   "metadata 0: key: string length 1099511627776 at byte 24 runs past the end of the file (20 bytes left)");
    EXPECT_REFUSED(Writer().header(0, 0).b.substr(0, 20), StatusCode::ParseError, "header: metadata count: needs 8 bytes at byte 16");
}

TEST(GgufHostile, MetadataLies)
{
    std::string pad(64, '\0');
    EXPECT_REFUSED(Writer().header(0, 1).str("k").u32(13).b + pad, StatusCode::ParseError, "k: unknown value type 13");
    EXPECT_REFUSED(Writer().header(0, 1).str("").u32(4).u32(1).b + pad, StatusCode::ParseError, "metadata 0: empty key");
    EXPECT_REFUSED(Writer().header(0, 2).kvU32("k", 1).kvU32("k", 2).b + pad, StatusCode::ParseError, "k: duplicate key (metadata 0 and 1)");
    EXPECT_REFUSED(Writer().header(0, 1).str("arr").u32(9).u32(4).u64(std::uint64_t(1) << 40).b + pad, StatusCode::ParseError,
                   "arr: array of 1099511627776 uint32 needs at least 4398046511104 bytes, only 64 left in the file");
    EXPECT_REFUSED(Writer().header(0, 1).str("arr").u32(9).u32(8).u64(~std::uint64_t(0)).b + pad, StatusCode::ParseError,
                   "arr: array of 18446744073709551615 string needs at least 2^64 bytes");
    EXPECT_REFUSED(Writer().header(0, 1).str("arr").u32(9).u32(77).u64(1).b + pad, StatusCode::ParseError, "arr: unknown array element type 77");
    EXPECT_REFUSED(Writer().header(0, 1).str("s").u32(8).u64(100).b + pad, StatusCode::ParseError, "s: string length 100");
    // Strings inside an array: the second one lies.
    EXPECT_REFUSED(Writer().header(0, 1).str("strs").u32(9).u32(8).u64(2).str("ok").u64(999).b + pad, StatusCode::ParseError,
                   "strs[1]: string length 999");
    Writer deep;
    deep.header(0, 1).str("deep").u32(9);
    for (int d = 0; d < 6; ++d) deep.u32(9).u64(1);
    EXPECT_REFUSED(deep.b + pad, StatusCode::ParseError, "deep[0][0][0][0]: arrays nested more than 4 deep");
    Writer wide;  // 65537 empty arrays inside one: each really there, but more than the cap of 65536
    wide.header(0, 1).str("wide").u32(9).u32(9).u64(attn::kMaxGgufNestedValues + 1);
    for (std::uint64_t k = 0; k <= attn::kMaxGgufNestedValues; ++k) wide.u32(0).u64(0);
    EXPECT_REFUSED(wide.b, StatusCode::ParseError, "wide: nested arrays hold more than 65536 arrays in all");
    EXPECT_REFUSED(Writer().header(0, 1).kvU32("general.alignment", 48).b, StatusCode::ParseError, "general.alignment: expected a power of two, got 48");
    EXPECT_REFUSED(Writer().header(0, 1).kvU32("general.alignment", 0).b, StatusCode::ParseError, "general.alignment: expected a power of two, got 0");
    EXPECT_REFUSED(Writer().header(0, 1).str("general.alignment").u32(8).str("32").b, StatusCode::ParseError,
                   "general.alignment: expected uint32, got string \"32\"");
}

TEST(GgufHostile, ATypeThatIsReadButNotDequantizedIsNamed)
{
    // IQ2_XXS (id 16, 66 bytes a 256 block): its infos parse, dequantizing it is refused with the type and the list.
    const std::string b = Writer().header(1, 0).tensor("blk.0.attn_q.weight", {256}, 16, 0).data(66).b;
    auto f = GgufFile::parse(u8(b), b.size(), "iq2.gguf");
    ASSERT_TRUE(f.ok()) << f.status().message;
    auto values = f->dequantize("blk.0.attn_q.weight");
    ASSERT_FALSE(values.ok());
    EXPECT_EQ(values.status().code, StatusCode::Unsupported);
    EXPECT_EQ(values.status().message, std::string("iq2.gguf: tensor blk.0.attn_q.weight: type IQ2_XXS (id 16) is not "
                                                   "supported (supported: ") + attn::ggmlSupportedTypeNames() + ")");
    EXPECT_NE(std::string(attn::ggmlSupportedTypeNames()).find("IQ4_XS"), std::string::npos);
}

TEST(GgufHostile, TensorInfoLies)
{
    auto one = [](std::vector<std::uint64_t> dims, std::uint32_t type, std::uint64_t offset, std::size_t data = 4096) {
        return Writer().header(1, 0).tensor("blk.0.attn_q.weight", std::move(dims), type, offset).data(data).b;
    };
    EXPECT_REFUSED(one({2, 2, 2, 2, 2}, 0, 0), StatusCode::ParseError, "tensor blk.0.attn_q.weight: n_dims 5, expected 1..4");
    EXPECT_REFUSED(one({}, 0, 0), StatusCode::ParseError, "tensor blk.0.attn_q.weight: n_dims 0, expected 1..4");
    EXPECT_REFUSED(one({4, 0}, 0, 0), StatusCode::ParseError, "tensor blk.0.attn_q.weight: dims[1] = 0, expected a dimension > 0");
    EXPECT_REFUSED(one({~std::uint64_t(0)}, 0, 0), StatusCode::ParseError, "dims[0] = -1, expected a dimension > 0");
    EXPECT_REFUSED(one({std::uint64_t(1) << 32, std::uint64_t(1) << 32}, 0, 0), StatusCode::ParseError, "element count overflows");
    EXPECT_REFUSED(one({33, 2}, 2, 0), StatusCode::ParseError, "tensor blk.0.attn_q.weight: dims[0] = 33 is not a multiple of Q4_0's block size 32");
    EXPECT_REFUSED(one({128}, 12, 0), StatusCode::ParseError, "dims[0] = 128 is not a multiple of Q4_K's block size 256");
    EXPECT_REFUSED(one({32}, 99, 0), StatusCode::Unsupported, "tensor blk.0.attn_q.weight: unknown tensor type id 99");
    EXPECT_REFUSED(one({32}, 4, 0), StatusCode::Unsupported, "unknown tensor type id 4");  // Q4_2, retired
    EXPECT_REFUSED(one({4}, 0, 16), StatusCode::ParseError, "tensor blk.0.attn_q.weight: data offset 16 is not a multiple of the alignment 32");
    EXPECT_REFUSED(one({1024, 2}, 0, 0), StatusCode::ParseError,
                   "tensor blk.0.attn_q.weight: data ends at byte 8288, past the end of the file (4192 bytes)");
    EXPECT_REFUSED(one({4}, 0, std::uint64_t(1) << 63), StatusCode::ParseError, "data ends at byte");
    EXPECT_REFUSED(one({4}, 0, ~std::uint64_t(31)), StatusCode::ParseError, "data ends at byte past 2^64");
    EXPECT_REFUSED(Writer().header(2, 0).tensor("a", {64}, 0, 0).tensor("b", {8}, 0, 224).data(512).b, StatusCode::ParseError,
                   "tensor b: data at bytes 320..352 overlaps tensor a (bytes 96..352)");
    EXPECT_REFUSED(Writer().header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).data(512).b, StatusCode::ParseError,
                   "tensor a: duplicate tensor name (tensor infos 0 and 1)");
    EXPECT_REFUSED(Writer().header(1, 0).tensor("", {8}, 0, 0).data(512).b, StatusCode::ParseError, "tensor info 0: empty name");
}

TEST(GgufHostile, OpenNamesThePath)
{
    auto missing = GgufFile::open("no/such/model.gguf");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code, StatusCode::IoError);
    EXPECT_NE(missing.status().message.find("no/such/model.gguf: cannot open"), std::string::npos) << missing.status().message;
    auto dir = GgufFile::open(kGoldens.string());
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.status().code, StatusCode::IoError);
    EXPECT_NE(dir.status().message.find("is a directory"), std::string::npos) << dir.status().message;
    const fs::path empty = fs::temp_directory_path() / ("attnscope_empty_" + std::to_string(::getpid()) + ".gguf");
    { std::ofstream(empty.string()); }
    auto e = GgufFile::open(empty.string());
    fs::remove(empty);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message.find("not a GGUF file: 0 bytes"), std::string::npos) << e.status().message;
}

} // namespace
