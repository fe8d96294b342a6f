// GGML tensor types: names, block sizes, and dequantization to float32. See attnscope/gguf.h for the contract.
//
// Each block layout below is GGML's (ggml-common.h `block_*`, ggml-quants.c `dequantize_row_*`; gguf-py's
// quants.py is its NumPy twin and makes our goldens, tests/model/make_gguf_goldens.py). Scales are IEEE half.
// The arithmetic is done in float32 in the same order as GGML (scale × quant, then − min), and this file is
// compiled with -ffp-contract=off (core/model/CMakeLists.txt) so that `d*q - m` is not fused into one FMA:
// results are then bit-identical to GGML's reference and to NumPy on every machine.
//
// [SECTION] type table   [SECTION] half floats   [SECTION] 32-element blocks   [SECTION] K-quants (256)
// [SECTION] IQ4 (non-linear 4-bit)   [SECTION] dequantizeRow
#include "attnscope/gguf.h"
#include "ggml_block_layout.h"

#include <cstring>
#include <string>

namespace attn {
using detail::iq4xsScale;
using detail::kIq4Levels;
using detail::scaleMinK4;

// [SECTION] type table

namespace {

struct TypeTraits {
    GgmlType type;
    const char* name;
    std::int64_t blockSize;
    std::size_t blockBytes;
};

// Sizes from GGML's type_traits (ggml.c); Q8_1 is 2 halves + 32 int8 (block_q8_1).
constexpr TypeTraits kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},          {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},      {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},      {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},      {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},     {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},  {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},   {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},            {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},          {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},          {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},        {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},
};

const TypeTraits* traits(GgmlType type)
{
    for (const TypeTraits& t : kTypes)
        if (t.type == type) return &t;
    return nullptr;
}

} // namespace

const char* ggmlTypeName(GgmlType type)
{
    const TypeTraits* t = traits(type);
    return t ? t->name : "unknown";
}

bool ggmlTypeKnown(GgmlType type) { return traits(type) != nullptr; }

std::int64_t ggmlBlockSize(GgmlType type)
{
    const TypeTraits* t = traits(type);
    return t ? t->blockSize : 0;
}

std::size_t ggmlBlockBytes(GgmlType type)
{
    const TypeTraits* t = traits(type);
    return t ? t->blockBytes : 0;
}

bool ggmlTypeSupported(GgmlType type)
{
    switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q2_K: case GgmlType::Q3_K:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
        return true;
    default:
        return false;
    }
}

const char* ggmlSupportedTypeNames()
{
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";
}

// [SECTION] half floats

namespace {

inline float bitsToFloat(std::uint32_t b)
{
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

inline std::uint32_t floatToBits(float f)
{
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

inline std::uint16_t le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
inline std::uint32_t le32(const std::uint8_t* p)
{
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

// Branch-free (selects only) so the F16 row loop vectorises.
inline float half(std::uint16_t h)
{
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t em = h & 0x7fffu;
    // Normal numbers: move exponent and mantissa into place and rebias the exponent from 15 to 127.
    std::uint32_t bits = (em << 13) + ((127u - 15u) << 23);
    // Inf/NaN (exponent 31): the exponent must become 255, not 143.
    bits = em >= 0x7c00u ? bits + ((128u - 16u) << 23) : bits;
    // Zero and subnormals: the value is exactly mantissa × 2^-24.
    const float mag = em < 0x0400u ? float(em) * 0x1p-24f : bitsToFloat(bits);
    return bitsToFloat(floatToBits(mag) | sign);
}

inline float halfAt(const std::uint8_t* p) { return half(le16(p)); }

} // namespace

float halfToFloat(std::uint16_t h) { return half(h); }

// [SECTION] 32-element blocks

namespace {

constexpr int kQK = 32;    // elements in a Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 block
constexpr int kQKK = 256;  // elements in a K-quant super-block

// block_q8_0: half d; int8 qs[32].   y = d · q
void dequantQ8_0(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b);
    const auto* qs = reinterpret_cast<const std::int8_t*>(b + 2);
    for (int j = 0; j < kQK; ++j) y[j] = float(qs[j]) * d;
}

// block_q4_0: half d; uint8 qs[16] (element j in the low nibble of qs[j], element j+16 in the high one).
// y = d · (q − 8)
void dequantQ4_0(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b);
    const std::uint8_t* qs = b + 2;
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = float(int(qs[j] & 0x0f) - 8) * d;
        y[j + kQK / 2] = float(int(qs[j] >> 4) - 8) * d;
    }
}

// block_q4_1: half d, m; uint8 qs[16] (nibbles as Q4_0).   y = d · q + m
void dequantQ4_1(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b), m = halfAt(b + 2);
    const std::uint8_t* qs = b + 4;
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = float(qs[j] & 0x0f) * d + m;
        y[j + kQK / 2] = float(qs[j] >> 4) * d + m;
    }
}

// block_q5_0: half d; uint32 qh (bit j = 5th bit of element j); uint8 qs[16] (low 4 bits, nibbles as Q4_0).
// y = d · (q − 16)
void dequantQ5_0(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b);
    const std::uint32_t qh = le32(b + 2);
    const std::uint8_t* qs = b + 6;
    for (int j = 0; j < kQK / 2; ++j) {
        const int hi0 = int((qh >> j) & 1u) << 4, hi1 = int((qh >> (j + 16)) & 1u) << 4;
        y[j] = float((int(qs[j] & 0x0f) | hi0) - 16) * d;
        y[j + kQK / 2] = float((int(qs[j] >> 4) | hi1) - 16) * d;
    }
}

// block_q5_1: half d, m; uint32 qh; uint8 qs[16] (as Q5_0).   y = d · q + m
void dequantQ5_1(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b), m = halfAt(b + 2);
    const std::uint32_t qh = le32(b + 4);
    const std::uint8_t* qs = b + 8;
    for (int j = 0; j < kQK / 2; ++j) {
        const int hi0 = int((qh >> j) & 1u) << 4, hi1 = int((qh >> (j + 16)) & 1u) << 4;
        y[j] = float(int(qs[j] & 0x0f) | hi0) * d + m;
        y[j + kQK / 2] = float(int(qs[j] >> 4) | hi1) * d + m;
    }
}

// [SECTION] K-quants (256-element super-blocks of 16- or 32-element sub-blocks)

// block_q2_K: uint8 scales[16] (low nibble: scale, high nibble: min, per 16 elements); uint8 qs[64]; half d, dmin.
// Element e = 128·h + 32·s + l (h 0..1, s 0..3, l 0..31) is bits 2s..2s+1 of qs[32·h + l], in sub-block e/16.
// y = (d · scale) · q − dmin · min
void dequantQ2_K(const std::uint8_t* b, float* y)
{
    const std::uint8_t* scales = b;
    const std::uint8_t* qs = b + 16;
    const float d = halfAt(b + 80), dmin = halfAt(b + 82);
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
            for (int half16 = 0; half16 < 2; ++half16) {
                const std::uint8_t sc = scales[h * 8 + s * 2 + half16];
                const float dl = d * float(sc & 0x0f), ml = dmin * float(sc >> 4);
                const std::uint8_t* q = qs + h * 32 + half16 * 16;
                float* out = y + h * 128 + s * 32 + half16 * 16;
                for (int l = 0; l < 16; ++l) out[l] = dl * float((q[l] >> (2 * s)) & 3) - ml;
            }
}

// block_q3_K: uint8 hmask[32]; uint8 qs[64]; uint8 scales[12] (16 six-bit scales, biased by 32); half d.
// Element e = 128·h + 32·s + l: low 2 bits as Q2_K, high bit = bit (4h + s) of hmask[l]; a clear high bit
// subtracts 4 (q in −4..3). Scale i: low 4 bits from nibble (i / 8) of scales[i % 8], high 2 bits from bits
// 2·(i / 4) of scales[8 + i % 4].   y = (d · (scale − 32)) · q
void dequantQ3_K(const std::uint8_t* b, float* y)
{
    const std::uint8_t* hmask = b;
    const std::uint8_t* qs = b + 32;
    const std::uint8_t* sc = b + 96;
    const float d = halfAt(b + 108);
    float dl[16];
    for (int i = 0; i < 16; ++i) {
        const int lo = i < 8 ? (sc[i] & 0x0f) : (sc[i - 8] >> 4);
        const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        dl[i] = d * float(static_cast<std::int8_t>(lo | (hi << 4)) - 32);
    }
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s) {
            const int bit = h * 4 + s;
            for (int half16 = 0; half16 < 2; ++half16) {
                const float scale = dl[h * 8 + s * 2 + half16];
                const int l0 = half16 * 16;
                float* out = y + h * 128 + s * 32 + l0;
                for (int l = 0; l < 16; ++l) {
                    const int low = (qs[h * 32 + l0 + l] >> (2 * s)) & 3;
                    const int high = (hmask[l0 + l] >> bit) & 1;
                    out[l] = scale * float(low - (high ? 0 : 4));
                }
            }
        }
}

// block_q4_K: half d, dmin; uint8 scales[12]; uint8 qs[128]. Sub-block j (32 elements) is nibble j % 2 of
// qs[32·(j/2) .. +32].   y = (d · scale_j) · q − dmin · min_j
void dequantQ4_K(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b), dmin = halfAt(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qs = b + 16;
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        scaleMinK4(scales, j, sc, m);
        const float d1 = d * float(sc), m1 = dmin * float(m);
        const std::uint8_t* q = qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        float* out = y + 32 * j;
        for (int l = 0; l < 32; ++l) out[l] = d1 * float((q[l] >> shift) & 0x0f) - m1;
    }
}

// block_q5_K: half d, dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]. As Q4_K plus a 5th bit: bit j of
// qh[l] for element l of sub-block j.   y = (d · scale_j) · q − dmin · min_j
void dequantQ5_K(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b), dmin = halfAt(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* qs = b + 48;
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        scaleMinK4(scales, j, sc, m);
        const float d1 = d * float(sc), m1 = dmin * float(m);
        const std::uint8_t* q = qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        float* out = y + 32 * j;
        for (int l = 0; l < 32; ++l)
            out[l] = d1 * float(((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4)) - m1;
    }
}

// block_q6_K: uint8 ql[128] (low 4 bits); uint8 qh[64] (high 2 bits); int8 scales[16]; half d.
// Element e = 128·h + r: low bits = nibble (r / 64) of ql[64·h + r % 64], high bits = bits 2·(r / 32) of
// qh[32·h + r % 32]; q − 32 in −32..31, scale per 16 elements.   y = (d · scale) · (q − 32)
void dequantQ6_K(const std::uint8_t* b, float* y)
{
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + 128;
    const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
    const float d = halfAt(b + 208);
    for (int h = 0; h < 2; ++h)
        for (int sub = 0; sub < 8; ++sub) {  // 16-element sub-blocks of this half
            const float dl = d * float(scales[h * 8 + sub]);
            const int r0 = sub * 16;
            const int lowShift = 4 * (r0 / 64), highShift = 2 * (r0 / 32);
            const std::uint8_t* lo = ql + 64 * h + r0 % 64;  // a sub-block never straddles a 32 boundary
            const std::uint8_t* hi = qh + 32 * h + r0 % 32;
            float* out = y + h * 128 + r0;
            for (int l = 0; l < 16; ++l) {
                const int low = (lo[l] >> lowShift) & 0x0f;
                const int high = (hi[l] >> highShift) & 3;
                out[l] = dl * float((low | (high << 4)) - 32);
            }
        }
}

// [SECTION] IQ4 (non-linear 4-bit)

// block_iq4_nl: half d; uint8 qs[16] (nibbles as Q4_0).   y = d · level[q]
void dequantIQ4_NL(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b);
    const std::uint8_t* qs = b + 2;
    for (int j = 0; j < kQK / 2; ++j) {
        y[j] = d * float(kIq4Levels[qs[j] & 0x0f]);
        y[j + kQK / 2] = d * float(kIq4Levels[qs[j] >> 4]);
    }
}

// block_iq4_xs: half d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]. Sub-block j (32 elements, nibbles as
// Q4_0 in qs[16·j .. +16]) has a 6-bit scale biased by 32 (iq4xsScale).   y = (d · (scale_j − 32)) · level[q]
void dequantIQ4_XS(const std::uint8_t* b, float* y)
{
    const float d = halfAt(b);
    const std::uint8_t* qs = b + 8;
    for (int j = 0; j < kQKK / kQK; ++j) {
        const float dl = d * float(iq4xsScale(b, j));
        const std::uint8_t* q = qs + 16 * j;
        float* out = y + kQK * j;
        for (int l = 0; l < kQK / 2; ++l) {
            out[l] = dl * float(kIq4Levels[q[l] & 0x0f]);
            out[l + kQK / 2] = dl * float(kIq4Levels[q[l] >> 4]);
        }
    }
}

template <int kBlock, std::size_t kBytes, void (*kFn)(const std::uint8_t*, float*)>
void blocks(const std::uint8_t* src, float* dst, std::int64_t n)
{
    const std::int64_t nb = n / kBlock;
    for (std::int64_t i = 0; i < nb; ++i) kFn(src + i * kBytes, dst + i * kBlock);
}

} // namespace

// [SECTION] dequantizeRow

Status dequantizeRow(GgmlType type, const std::uint8_t* src, std::size_t srcBytes, float* dst, std::int64_t n)
{
    if (!ggmlTypeSupported(type)) {
        return makeError(StatusCode::Unsupported,
                         std::string("dequantize: tensor type ") + ggmlTypeName(type) + " (id " +
                             std::to_string(static_cast<std::uint32_t>(type)) +
                             ") is not supported (supported: " + ggmlSupportedTypeNames() + ")");
    }
    const std::int64_t bs = ggmlBlockSize(type);
    const std::size_t bb = ggmlBlockBytes(type);
    if (n < 0 || n % bs != 0)
        return invalidArgument(std::string("dequantize: ") + std::to_string(n) + " elements of " + ggmlTypeName(type) +
                               ": expected a non-negative multiple of its block size " + std::to_string(bs));
    const std::uint64_t need = std::uint64_t(n / bs) * bb;
    if (srcBytes < need)
        return invalidArgument(std::string("dequantize: ") + std::to_string(n) + " elements of " + ggmlTypeName(type) +
                               " need " + std::to_string(need) + " bytes, got " + std::to_string(srcBytes));
    if (n == 0) return Status::success();
    switch (type) {
    case GgmlType::F32:
        std::memcpy(dst, src, std::size_t(n) * 4);  // little-endian host (checked in gguf.cpp)
        break;
    case GgmlType::F16:
        for (std::int64_t i = 0; i < n; ++i) dst[i] = half(le16(src + 2 * i));
        break;
    case GgmlType::BF16:  // the high 16 bits of a float32
        for (std::int64_t i = 0; i < n; ++i) dst[i] = bitsToFloat(std::uint32_t(le16(src + 2 * i)) << 16);
        break;
    case GgmlType::Q8_0: blocks<kQK, 34, dequantQ8_0>(src, dst, n); break;
    case GgmlType::Q4_0: blocks<kQK, 18, dequantQ4_0>(src, dst, n); break;
    case GgmlType::Q4_1: blocks<kQK, 20, dequantQ4_1>(src, dst, n); break;
    case GgmlType::Q5_0: blocks<kQK, 22, dequantQ5_0>(src, dst, n); break;
    case GgmlType::Q5_1: blocks<kQK, 24, dequantQ5_1>(src, dst, n); break;
    case GgmlType::Q2_K: blocks<kQKK, 84, dequantQ2_K>(src, dst, n); break;
    case GgmlType::Q3_K: blocks<kQKK, 110, dequantQ3_K>(src, dst, n); break;
    case GgmlType::Q4_K: blocks<kQKK, 144, dequantQ4_K>(src, dst, n); break;
    case GgmlType::Q5_K: blocks<kQKK, 176, dequantQ5_K>(src, dst, n); break;
    case GgmlType::Q6_K: blocks<kQKK, 210, dequantQ6_K>(src, dst, n); break;
    case GgmlType::IQ4_NL: blocks<kQK, 18, dequantIQ4_NL>(src, dst, n); break;
    case GgmlType::IQ4_XS: blocks<kQKK, 136, dequantIQ4_XS>(src, dst, n); break;
    default: break;  // unreachable: ggmlTypeSupported() said yes
    }
    return Status::success();
}

} // namespace attn
