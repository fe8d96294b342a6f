// Weights in their own format: products of float32 activations with GGUF tensors that stay quantized in the
// file's mapping. See attnscope/weight_matrix.h and docs/model.md ("Decoder models", "Speed (decoders)").
//
// A row of a GGUF tensor is one output column of W (in values as blocks). Two paths:
//   GEMV (≤ kVectorRows rows of x, a token appended): each stored row is streamed once and dotted with every
//     row of x, each block dequantized in registers (AVX2 kernels below for Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, IQ4_NL,
//     IQ4_XS, F16, BF16, F32; any other type dequantizeRow's a row into a buffer, then a dot). A block's scale is applied to
//     the block's sum (d·Σq·x, and the min as m·Σx with Σx per 32 inputs computed once per x row), so the
//     numbers equal dequantize-then-dot up to float rounding (the order of the sums differs); activations stay
//     float32 (llama.cpp quantizes them to 8 bits for its integer dot products; we do not).
//   Panels (more rows, a whole forward): each task dequantizes its panel of output columns into a float32 buffer
//     and runs Eigen's GEMM on it: the dequantization (one pass over the panel) is amortised over every row of x.
//
// [SECTION] Storage   [SECTION] Block dots   [SECTION] Products
#include "attnscope/weight_matrix.h"
#include "ggml_block_layout.h"

#include "decoder_family.h"
#include "teams.h"

#include <cassert>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define ATTNSCOPE_QUANT_AVX2 1
#endif

namespace attn {

using detail::taskCols;
using detail::forTasks;
using detail::worthTeam;
using detail::iq4xsScale;
using detail::scaleMinK4;

// -----------------------------------------------------------------------------------------------------
// [SECTION] Storage
// -----------------------------------------------------------------------------------------------------

WeightMatrix WeightMatrix::denseTransposed(Matrix outByIn)
{
    WeightMatrix w(std::move(outByIn));
    w.m_transposed = true;
    return w;
}

Expected<WeightMatrix> WeightMatrix::quantized(std::shared_ptr<const GgufFile> file, const GgufTensorInfo& info,
                                               std::int64_t row0, std::int64_t rows, std::vector<int> order)
{
    if (!ggmlTypeSupported(info.type))
        return makeError(StatusCode::Unsupported, file->what() + ": " + info.name + ": tensor type " +
                                                      ggmlTypeName(info.type) + " is not supported");
    assert(info.dims.size() == 2 && row0 >= 0 && row0 + rows <= info.dims[1]);
    assert(order.empty() || static_cast<std::int64_t>(order.size()) == rows);
    WeightMatrix w;
    w.m_quant = true;
    w.m_type = info.type;
    w.m_in = info.dims[0];
    w.m_out = rows;
    w.m_rowBytes = info.rowBytes();
    w.m_data = file->rawData(info) + static_cast<std::size_t>(row0) * w.m_rowBytes;
    w.m_order = std::move(order);
    w.m_file = std::move(file);
    return w;
}

const Matrix& WeightMatrix::dense() const
{
    assert(!m_quant && !m_transposed);
    return m_dense;
}

Matrix& WeightMatrix::edit()
{
    if (m_quant || m_transposed) {
        Matrix whole = toMatrix();
        *this = WeightMatrix(std::move(whole));
    }
    return m_dense;
}

void WeightMatrix::column(Eigen::Index j, float* dst) const
{
    if (m_quant) {
        // The view was checked at load (type supported, in a multiple of its block, bytes inside the file).
        (void)dequantizeRow(m_type, storedRow(j), m_rowBytes, dst, m_in);
    } else if (m_transposed) {
        std::memcpy(dst, m_dense.row(j).data(), sizeof(float) * static_cast<std::size_t>(m_dense.cols()));
    } else {
        for (Eigen::Index i = 0; i < m_dense.rows(); ++i) dst[i] = m_dense(i, j);
    }
}

Matrix WeightMatrix::toMatrix() const
{
    if (!m_quant) return m_transposed ? Matrix(m_dense.transpose()) : m_dense;
    Matrix stored(m_out, m_in);
    for (Eigen::Index j = 0; j < m_out; ++j) column(j, stored.row(j).data());
    return stored.transpose();
}

std::size_t WeightMatrix::streamedBytes() const
{
    return m_quant ? static_cast<std::size_t>(m_out) * m_rowBytes : denseBytes();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Block dots
// -----------------------------------------------------------------------------------------------------

namespace {

// One stored row (in values) dotted with x; `sums` holds Σx over each 32 inputs (for the types with a min).
using RowDot = float (*)(const std::uint8_t* row, const float* x, const float* sums, std::int64_t in);
// kDotRows stored rows each dotted with one row of x, into out[0…kDotRows); `one` takes a single row (the rest).
using RowsDot = void (*)(const std::uint8_t* const* rows, const float* x, const float* sums, std::int64_t in, float* out);
struct MultiRowDot {
    RowsDot many = nullptr, one = nullptr;
};

inline float halfAt(const std::uint8_t* p)
{
    std::uint16_t h;
    std::memcpy(&h, p, 2);
#ifdef ATTNSCOPE_QUANT_AVX2
    return _cvtsh_ss(h);  // F16C: exact, as halfToFloat, in one instruction (a call per block cost 30 % of the GEMV)
#else
    return halfToFloat(h);
#endif
}

// Any type dequantizeRow handles: the row into a per-thread buffer, then a dot.
float dotGeneric(GgmlType type, const std::uint8_t* row, std::size_t rowBytes, const float* x, std::int64_t in)
{
    thread_local std::vector<float> buf;
    buf.resize(static_cast<std::size_t>(in));
    (void)dequantizeRow(type, row, rowBytes, buf.data(), in);
    return Eigen::Map<const Eigen::VectorXf>(buf.data(), in).dot(Eigen::Map<const Eigen::VectorXf>(x, in));
}

#ifdef ATTNSCOPE_QUANT_AVX2

inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 8 int8 (signed) or uint8 lanes of a 128-bit register, from byte `k`·8, as floats.
inline __m256 i8ToPs(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
inline __m256 u8ToPs(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

// Σ q·x over 32 quants (int8 in a 256-bit register, signed) and 32 inputs, as 8 lanes.
inline __m256 dot32s(__m256i q, const float* x)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m256 acc = _mm256_mul_ps(i8ToPs(lo), _mm256_loadu_ps(x));
    acc = _mm256_fmadd_ps(i8ToPs(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8), acc);
    acc = _mm256_fmadd_ps(i8ToPs(hi), _mm256_loadu_ps(x + 16), acc);
    acc = _mm256_fmadd_ps(i8ToPs(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), acc);
    return acc;
}

// Q8_0, Q4_0 and Q4_1 take several stored rows per call (kDotRows, below) and read their quants with 64-bit loads
// widened to 8 lanes by vpmovsxbd / vpmovzxbd from memory: one op per 8 weights (2 per cycle on Zen 3), x in its
// natural order. The earlier kernels shifted the quants out of 32-bit lanes of a permuted x (shift, shift or mask,
// then convert), because widening from a register first needed a byte shuffle to bring each 8 bytes down, and
// those shuffles were the bottleneck. Measured on the Zen 3 (cycles per row and block of 32, rows in L1, one
// row per call): Q8_0 7.5 → 6.2, Q4_1 8.7 → 7.1; 4 rows per call: 5.7 and 6.3.
//
// Tried and dropped, for the record: a nibble as the float 16 + q by OR'ing it into the mantissa of 16.0f (no
// int→float conversion) made Q4_1 slower (10.4 cycles against 8.7): the conversion runs on the FP add pipes, while
// the OR and its extra shift compete with the FMAs; and scales converted for a chunk of blocks ahead (scalar
// stores, then one vector load) stalled on the failed store-to-load forwarding (12.7 cycles).

// Rows per call: 4 rows share each load of x and their chains of FMAs (a block's four, then its scale) overlap.
// One row alone waits on them: 1, 2, 4 rows took 6.4, 5.8, 5.7 cycles per block for Q8_0, 7.1, 6.5, 6.3 for Q4_1.
constexpr int kDotRows = 4;

// block_q8_0: half d, int8 q[32].  y = d·q
template <int R>
void dotQ8_0(const std::uint8_t* const* rows, const float* x, const float*, std::int64_t in, float* out)
{
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < in / 32; ++b, x += 32) {
        const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8), x2 = _mm256_loadu_ps(x + 16),
                     x3 = _mm256_loadu_ps(x + 24);
        for (int r = 0; r < R; ++r) {
            const std::uint8_t* blk = rows[r] + 34 * b;
            auto q = [blk](int t) {
                return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * t))));
            };
            __m256 qx = _mm256_mul_ps(q(0), x0);
            qx = _mm256_fmadd_ps(q(1), x1, qx);
            qx = _mm256_fmadd_ps(q(2), x2, qx);
            qx = _mm256_fmadd_ps(q(3), x3, qx);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(halfAt(blk)), qx, acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

// block_q4_0: half d, 16 bytes of nibbles, y = d·(q − 8); block_q4_1 (kMin): half d, half m, the nibbles, y = d·q + m.
// Byte k holds weight k (low nibble) and k + 16 (high). Σ y·x = d·Σ q·x + c·Σx with c = m (Q4_1) or −8d (Q4_0):
// `pairs` holds per block [0, Σx] (Q4_1) or [−8·Σx, 0] (Q4_0), and [d, m, 0, 0] (Q4_1) or [d, 0, 0, 0] (Q4_0),
// the scales converted together in one F16C op, times it in one 128-bit FMA gives c·Σx in lane 1 or 0 (the other
// lane 0): no scalar work per block (two scalar conversions and a scalar FMA cost a quarter of the kernel's time).
// Q4_0's −8·Σx replaces the exact integer q − 8 of dequantizeRow: Σ q·x and 8·Σx (terms of 7.5|x| and 8|x| on
// average) cancel to terms of ~4|x|, about 2 bits of the float32 sum's precision: ~10⁻⁶ of Σ|x·w| where the tests
// allow 1e-5.
template <int R, bool kMin>
void dotQ4(const std::uint8_t* const* rows, const float* x, const float* pairs, std::int64_t in, float* out)
{
    constexpr std::size_t bytes = kMin ? 20 : 18, qs = kMin ? 4 : 2;
    __m256 acc[R];
    __m128 consts[R];
    for (int r = 0; r < R; ++r) {
        acc[r] = _mm256_setzero_ps();
        consts[r] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi32(0x0f);
    for (std::int64_t b = 0; b < in / 32; ++b, x += 32) {
        const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8), x2 = _mm256_loadu_ps(x + 16),
                     x3 = _mm256_loadu_ps(x + 24);
        const __m128 s = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(pairs + 2 * b)));
        for (int r = 0; r < R; ++r) {
            const std::uint8_t* blk = rows[r] + bytes * static_cast<std::size_t>(b);
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + qs)));
            const __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + qs + 8)));
            __m256 qx = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(lo, m4)), x0);
            qx = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(hi, m4)), x1, qx);
            qx = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(lo, 4)), x2, qx);
            qx = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(hi, 4)), x3, qx);
            std::uint32_t scales = 0;
            std::memcpy(&scales, blk, kMin ? 4 : 2);
            const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(scales)));
            acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(dm), qx, acc[r]);
            consts[r] = _mm_fmadd_ps(dm, s, consts[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) + _mm_cvtss_f32(_mm_add_ss(consts[r], _mm_movehdup_ps(consts[r])));
}

// block_q4_K: half d, dmin; 12 bytes of 6-bit scales and mins; 128 bytes of nibbles (sub-block j of 32 is nibble
// j % 2 of bytes 32·(j/2)…).  y = (d·scale_j)·q − dmin·min_j.
float dotQ4_K(const std::uint8_t* row, const float* x, const float* sums, std::int64_t in)
{
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (std::int64_t b = 0; b < in / 256; ++b, row += 144, x += 256, sums += 8) {
        const float d = halfAt(row), dmin = halfAt(row + 2);
        const std::uint8_t* scales = row + 4;
        for (int p = 0; p < 4; ++p) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 + 32 * p));
            for (int s = 0; s < 2; ++s) {
                const int j = 2 * p + s;
                int sc, mn;
                scaleMinK4(scales, j, sc, mn);
                const __m256i q = _mm256_and_si256(s == 0 ? v : _mm256_srli_epi16(v, 4), m4);  // 0..15: signed is fine
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(sc)), dot32s(q, x + 32 * j), acc);
                mins += dmin * float(mn) * sums[j];
            }
        }
    }
    return hsum(acc) - mins;
}

// block_q6_K: 128 bytes of low nibbles, 64 bytes of high 2 bits, int8 scales[16], half d. Element 128·h + r:
// low = nibble r/64 of ql[64h + r%64], high = bits 2·(r/32) of qh[32h + r%32]; y = (d·scale[r/16 + 8h])·(q − 32).
// The 32 quants q − 32 (−32…31) of elements 128·h + 32·c … +31 of a block_q6_K: low nibbles from ql, the high two
// bits from hv (the 32 bytes qh[32h …]).
inline __m256i q6Quants(const std::uint8_t* ql, __m256i hv, int h, int c)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    const __m256i lv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32 * (c % 2)));
    const __m256i lo = _mm256_and_si256(c < 2 ? lv : _mm256_srli_epi16(lv, 4), m4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hv, 2 * c), m2);
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), k32);
}

// Walks a row of block_q6_K: f(at, s, q, d0, d1) for each 32 elements at … at+31 of the row, q their quants
// (q6Quants), d0 and d1 the scales of their two halves of 16 (the block's d times sub-scales s and s + 1).
template <class F>
inline void forEachQ6Chunk(const std::uint8_t* row, std::int64_t in, F&& f)
{
    for (std::int64_t b = 0; b < in / 256; ++b, row += 210) {
        const std::uint8_t* ql = row;
        const std::uint8_t* qh = row + 128;
        const auto* scales = reinterpret_cast<const std::int8_t*>(row + 192);
        const float d = halfAt(row + 208);
        for (int h = 0; h < 2; ++h) {
            const __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
            for (int c = 0; c < 4; ++c) {  // 32 elements r = 32c … 32c+31 of this half
                const int s = 8 * h + 2 * c;
                f(256 * b + 128 * h + 32 * c, q6Quants(ql, hv, h, c), _mm256_set1_ps(d * float(scales[s])),
                  _mm256_set1_ps(d * float(scales[s + 1])));
            }
        }
    }
}

float dotQ6_K(const std::uint8_t* row, const float* x, const float*, std::int64_t in)
{
    __m256 acc = _mm256_setzero_ps();
    forEachQ6Chunk(row, in, [&](std::int64_t at, __m256i q, __m256 d0, __m256 d1) {
        const float* xs = x + at;
        const __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
        const __m256 first = _mm256_fmadd_ps(i8ToPs(_mm_srli_si128(q0, 8)), _mm256_loadu_ps(xs + 8),
                                             _mm256_mul_ps(i8ToPs(q0), _mm256_loadu_ps(xs)));
        const __m256 second = _mm256_fmadd_ps(i8ToPs(_mm_srli_si128(q1, 8)), _mm256_loadu_ps(xs + 24),
                                              _mm256_mul_ps(i8ToPs(q1), _mm256_loadu_ps(xs + 16)));
        acc = _mm256_fmadd_ps(d0, first, acc);
        acc = _mm256_fmadd_ps(d1, second, acc);
    });
    return hsum(acc);
}

// Plain floats: 8 lanes at a time, the tail (in not a multiple of 8) scalar.
template <class Load8, class Load1>
float dotPlain(const float* x, std::int64_t in, Load8 load8, Load1 load1)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    std::int64_t i = 0;
    for (; i + 16 <= in; i += 16) {
        a0 = _mm256_fmadd_ps(load8(i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8(i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    for (; i + 8 <= in; i += 8) a0 = _mm256_fmadd_ps(load8(i), _mm256_loadu_ps(x + i), a0);
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < in; ++i) s += load1(i) * x[i];
    return s;
}

float dotF32(const std::uint8_t* row, const float* x, const float*, std::int64_t in)
{
    const auto* w = reinterpret_cast<const float*>(row);
    return dotPlain(x, in, [w](std::int64_t i) { return _mm256_loadu_ps(w + i); }, [w](std::int64_t i) { return w[i]; });
}

float dotF16(const std::uint8_t* row, const float* x, const float*, std::int64_t in)
{
    return dotPlain(
        x, in, [row](std::int64_t i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i))); },
        [row](std::int64_t i) { return halfAt(row + 2 * i); });
}

float dotBF16(const std::uint8_t* row, const float* x, const float*, std::int64_t in)
{
    return dotPlain(
        x, in,
        [row](std::int64_t i) {
            const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
            return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
        },
        [row](std::int64_t i) {
            std::uint16_t h;
            std::memcpy(&h, row + 2 * i, 2);
            const std::uint32_t bits = std::uint32_t(h) << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            return f;
        });
}

// Row dequantizers for the panels (AVX2): the same values as dequantizeRow up to the rounding of a fused
// multiply-add (d·q + m in one rounding); the panels' GEMM sums in its own order anyway.
using RowDequant = void (*)(const std::uint8_t* row, float* y, std::int64_t in);

// The 32 nibbles of a Q4_0/Q4_1 block's 16 bytes: element i is the low nibble of byte i, element i+16 the high one.
inline void nibbles(const std::uint8_t* qs, __m128i& lo, __m128i& hi)
{
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), m = _mm_set1_epi8(0x0f);
    lo = _mm_and_si128(v, m);
    hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
}

inline void store32s(__m256i q, __m256 d, float* y)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(i8ToPs(lo), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(i8ToPs(_mm_srli_si128(lo, 8)), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(i8ToPs(hi), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(i8ToPs(_mm_srli_si128(hi, 8)), d));
}

void rowQ8_0(const std::uint8_t* row, float* y, std::int64_t in)
{
    for (std::int64_t b = 0; b < in / 32; ++b, row += 34, y += 32)
        store32s(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2)), _mm256_set1_ps(halfAt(row)), y);
}

void rowQ4_0(const std::uint8_t* row, float* y, std::int64_t in)
{
    const __m128i eight = _mm_set1_epi8(8);
    for (std::int64_t b = 0; b < in / 32; ++b, row += 18, y += 32) {
        __m128i lo, hi;
        nibbles(row + 2, lo, hi);
        store32s(_mm256_set_m128i(_mm_sub_epi8(hi, eight), _mm_sub_epi8(lo, eight)), _mm256_set1_ps(halfAt(row)), y);
    }
}

void rowQ4_1(const std::uint8_t* row, float* y, std::int64_t in)
{
    for (std::int64_t b = 0; b < in / 32; ++b, row += 20, y += 32) {
        __m128i lo, hi;
        nibbles(row + 4, lo, hi);
        const __m256 d = _mm256_set1_ps(halfAt(row)), m = _mm256_set1_ps(halfAt(row + 2));
        _mm256_storeu_ps(y, _mm256_fmadd_ps(u8ToPs(lo), d, m));
        _mm256_storeu_ps(y + 8, _mm256_fmadd_ps(u8ToPs(_mm_srli_si128(lo, 8)), d, m));
        _mm256_storeu_ps(y + 16, _mm256_fmadd_ps(u8ToPs(hi), d, m));
        _mm256_storeu_ps(y + 24, _mm256_fmadd_ps(u8ToPs(_mm_srli_si128(hi, 8)), d, m));
    }
}

// block_q5_0: half d; uint32 qh (bit e: the 5th bit of element e); 16 bytes of nibbles as Q4_0.  y = d·(q − 16).
void rowQ5_0(const std::uint8_t* row, float* y, std::int64_t in)
{
    // Byte e of the 32 takes byte e/8 of qh (the shuffle reads within each 128-bit half, where set1 put all four)
    // and keeps its bit e % 8: 0x10 where the bit is set.
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull)), k16 = _mm256_set1_epi8(16);
    for (std::int64_t b = 0; b < in / 32; ++b, row += 22, y += 32) {
        std::uint32_t qh;
        std::memcpy(&qh, row + 2, 4);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), spread), bit), bit);
        __m128i lo, hi;
        nibbles(row + 6, lo, hi);
        const __m256i q = _mm256_or_si256(_mm256_set_m128i(hi, lo), _mm256_and_si256(set, k16));
        store32s(_mm256_sub_epi8(q, k16), _mm256_set1_ps(halfAt(row)), y);
    }
}

// 32 unsigned bytes as floats times d plus m, into y[0…32).
inline void storeAffine32(__m256i q, __m256 d, __m256 m, float* y)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_fmadd_ps(u8ToPs(lo), d, m));
    _mm256_storeu_ps(y + 8, _mm256_fmadd_ps(u8ToPs(_mm_srli_si128(lo, 8)), d, m));
    _mm256_storeu_ps(y + 16, _mm256_fmadd_ps(u8ToPs(hi), d, m));
    _mm256_storeu_ps(y + 24, _mm256_fmadd_ps(u8ToPs(_mm_srli_si128(hi, 8)), d, m));
}

// block_q4_K (as dotQ4_K): sub-block j of 32 is nibble j % 2 of bytes 32·(j/2)…; y = (d·scale_j)·q − dmin·min_j.
void rowQ4_K(const std::uint8_t* row, float* y, std::int64_t in)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (std::int64_t b = 0; b < in / 256; ++b, row += 144, y += 256) {
        const float d = halfAt(row), dmin = halfAt(row + 2);
        for (int p = 0; p < 4; ++p) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 + 32 * p));
            for (int s = 0; s < 2; ++s) {
                const int j = 2 * p + s;
                int sc, mn;
                scaleMinK4(row + 4, j, sc, mn);
                const __m256i q = _mm256_and_si256(s == 0 ? v : _mm256_srli_epi16(v, 4), m4);
                storeAffine32(q, _mm256_set1_ps(d * float(sc)), _mm256_set1_ps(-dmin * float(mn)), y + 32 * j);
            }
        }
    }
}

// block_q6_K (as dotQ6_K): 32 elements at a time, q − 32 in −32…31, a scale per 16.
void rowQ6_K(const std::uint8_t* row, float* y, std::int64_t in)
{
    forEachQ6Chunk(row, in, [y](std::int64_t at, __m256i q, __m256 d0, __m256 d1) {
        const __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
        float* out = y + at;
        _mm256_storeu_ps(out, _mm256_mul_ps(i8ToPs(q0), d0));
        _mm256_storeu_ps(out + 8, _mm256_mul_ps(i8ToPs(_mm_srli_si128(q0, 8)), d0));
        _mm256_storeu_ps(out + 16, _mm256_mul_ps(i8ToPs(q1), d1));
        _mm256_storeu_ps(out + 24, _mm256_mul_ps(i8ToPs(_mm_srli_si128(q1, 8)), d1));
    });
}

// IQ4_NL and IQ4_XS: each nibble indexes 16 non-linear levels (detail::kIq4Levels, as in ggml_quants.cpp), looked
// up 16 at a time by one byte shuffle. The 32 levels of a block's 16 bytes in element order (low nibbles are
// elements 0…15, high ones 16…31), as signed bytes.
inline __m256i iq4Levels(const std::uint8_t* qs)
{
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(detail::kIq4Levels));
    __m128i lo, hi;
    nibbles(qs, lo, hi);
    return _mm256_set_m128i(_mm_shuffle_epi8(table, hi), _mm_shuffle_epi8(table, lo));
}

// block_iq4_nl: half d, 16 bytes of nibbles.  y = d·level[q]
float dotIQ4_NL(const std::uint8_t* row, const float* x, const float*, std::int64_t in)
{
    __m256 acc = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < in / 32; ++b, row += 18, x += 32)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(halfAt(row)), dot32s(iq4Levels(row + 2), x), acc);
    return hsum(acc);
}

// block_iq4_xs: half d; 16 bits and 4 bytes of 6-bit scales; 128 bytes of nibbles, 16 per sub-block of 32.
// y = (d·(scale_j − 32))·level[q]
float dotIQ4_XS(const std::uint8_t* row, const float* x, const float*, std::int64_t in)
{
    __m256 acc = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < in / 256; ++b, row += 136) {
        const float d = halfAt(row);
        for (int j = 0; j < 8; ++j, x += 32)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * float(iq4xsScale(row, j))), dot32s(iq4Levels(row + 8 + 16 * j), x), acc);
    }
    return hsum(acc);
}

// IQ4 rows: d·level (and (d·(scale − 32))·level) in one multiply each, so these equal dequantizeRow bit for bit.
void rowIQ4_NL(const std::uint8_t* row, float* y, std::int64_t in)
{
    for (std::int64_t b = 0; b < in / 32; ++b, row += 18, y += 32) store32s(iq4Levels(row + 2), _mm256_set1_ps(halfAt(row)), y);
}

void rowIQ4_XS(const std::uint8_t* row, float* y, std::int64_t in)
{
    for (std::int64_t b = 0; b < in / 256; ++b, row += 136) {
        const float d = halfAt(row);
        for (int j = 0; j < 8; ++j, y += 32)
            store32s(iq4Levels(row + 8 + 16 * j), _mm256_set1_ps(d * float(iq4xsScale(row, j))), y);
    }
}

void rowF16(const std::uint8_t* row, float* y, std::int64_t in)
{
    std::int64_t i = 0;
    for (; i + 8 <= in; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i))));
    for (; i < in; ++i) y[i] = halfAt(row + 2 * i);
}

RowDequant fastRow(GgmlType t)
{
    switch (t) {
    case GgmlType::Q8_0: return rowQ8_0;
    case GgmlType::Q4_0: return rowQ4_0;
    case GgmlType::Q4_1: return rowQ4_1;
    case GgmlType::Q5_0: return rowQ5_0;
    case GgmlType::Q4_K: return rowQ4_K;
    case GgmlType::Q6_K: return rowQ6_K;
    case GgmlType::F16: return rowF16;
    case GgmlType::IQ4_NL: return rowIQ4_NL;
    case GgmlType::IQ4_XS: return rowIQ4_XS;
    default: return nullptr;
    }
}

inline void prefetchRow(const std::uint8_t* row, std::size_t bytes)
{
    for (std::size_t at = 0; at < bytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(row + at), _MM_HINT_T0);
}

MultiRowDot multiRowDot(GgmlType t)
{
    switch (t) {
    case GgmlType::Q8_0: return {dotQ8_0<kDotRows>, dotQ8_0<1>};
    case GgmlType::Q4_0: return {dotQ4<kDotRows, false>, dotQ4<1, false>};
    case GgmlType::Q4_1: return {dotQ4<kDotRows, true>, dotQ4<1, true>};
    default: return {};
    }
}

RowDot fastDot(GgmlType t)
{
    switch (t) {
    case GgmlType::F32: return dotF32;
    case GgmlType::F16: return dotF16;
    case GgmlType::BF16: return dotBF16;
    case GgmlType::Q4_K: return dotQ4_K;
    case GgmlType::Q6_K: return dotQ6_K;
    case GgmlType::IQ4_NL: return dotIQ4_NL;
    case GgmlType::IQ4_XS: return dotIQ4_XS;
    default: return nullptr;
    }
}

#else

using RowDequant = void (*)(const std::uint8_t* row, float* y, std::int64_t in);
constexpr int kDotRows = 1;
MultiRowDot multiRowDot(GgmlType) { return {}; }
inline void prefetchRow(const std::uint8_t*, std::size_t) {}
RowDot fastDot(GgmlType) { return nullptr; }
RowDequant fastRow(GgmlType) { return nullptr; }

#endif

// What a kernel takes as `sums` for each row of x: Q4_K Σx per 32 inputs; Q4_0 and Q4_1 two floats per 32 (see dotQ4).
bool needsSums(GgmlType t) { return t == GgmlType::Q4_K; }
bool needsPairs(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q4_1; }

// -----------------------------------------------------------------------------------------------------
// [SECTION] Products
// -----------------------------------------------------------------------------------------------------

// Up to this many rows of x, the matrix-vector product (each stored row read once for all of them, from L1 after
// the first); above it, panels and Eigen's GEMM.
constexpr Eigen::Index kVectorRows = 8;
// Output columns per GEMV task: a few KB of weights each, many tasks per thread (balance), rows contiguous.
constexpr Eigen::Index kVectorCols = 64;

void gemv(const Matrix& x, const WeightMatrix& w, Matrix& out)
{
    const Eigen::Index n = x.rows(), in = w.inputs(), cols = w.outputs(), nb = in / 32;
    const GgmlType type = w.type();
    const RowDot dot = fastDot(type);
    const MultiRowDot multi = multiRowDot(type);
    std::vector<float> sums;
    if (dot != nullptr && needsSums(type)) {
        sums.resize(static_cast<std::size_t>(n * nb));
        for (Eigen::Index r = 0; r < n; ++r)
            for (Eigen::Index b = 0; b < nb; ++b)
                sums[static_cast<std::size_t>(r * nb + b)] = x.row(r).segment(b * 32, 32).sum();
    }
    if (multi.many != nullptr && needsPairs(type)) {
        const bool q4_0 = type == GgmlType::Q4_0;
        sums.resize(static_cast<std::size_t>(n * nb * 2));
        for (Eigen::Index r = 0; r < n; ++r)
            for (Eigen::Index b = 0; b < nb; ++b) {
                const float s = x.row(r).segment(b * 32, 32).sum();
                float* to = sums.data() + 2 * (r * nb + b);
                to[0] = q4_0 ? -8.0f * s : 0.0f;
                to[1] = q4_0 ? 0.0f : s;
            }
    }
    const std::size_t sumsPerRow = sums.size() / static_cast<std::size_t>(n);
    auto sumsOf = [&](Eigen::Index r) { return sums.empty() ? nullptr : sums.data() + static_cast<std::size_t>(r) * sumsPerRow; };
    const std::size_t rowBytes = w.streamedBytes() / static_cast<std::size_t>(cols);
    const Eigen::Index tasks = (cols + kVectorCols - 1) / kVectorCols;
    forTasks(tasks, worthTeam(n, in, cols), [&](Eigen::Index t) {
        const Eigen::Index j1 = std::min(cols, (t + 1) * kVectorCols);
        Eigen::Index j = t * kVectorCols;
        if (multi.many != nullptr) {
            for (; j < j1; j += kDotRows) {
                const int k = j + kDotRows <= j1 ? kDotRows : static_cast<int>(j1 - j);
                const std::uint8_t* rows[kDotRows];
                for (int i = 0; i < k; ++i) rows[i] = w.storedRow(j + i);
                // These rows and the next into L1 before they are dotted: the kernels read 4 rows a block at a
                // time, which the hardware prefetchers follow badly from memory (the LM head, 30 MB of Q8_0, ran
                // at 4.6 GB/s with 4 rows per call against 11 with one; prefetched, 10-13). The next group alone
                // was the choice on a Zen 3, where two groups ahead or three measured the same; on a Zen 4
                // (AVX-512) asking for the rows about to be read as well took an appended token at 128 tokens
                // from 11.4-12.2 to 9.1-10.7 ms (three runs each, alternating; no prefetch at all: 13.7-15.5,
                // further ahead: slower with each group), as if some prefetches of the next group were dropped.
                for (Eigen::Index i = j; i < std::min(cols, j + 2 * kDotRows); ++i) prefetchRow(w.storedRow(i), rowBytes);
                for (Eigen::Index r = 0; r < n; ++r) {
                    float y[kDotRows];
                    if (k == kDotRows) multi.many(rows, x.row(r).data(), sumsOf(r), in, y);
                    else
                        for (int i = 0; i < k; ++i) multi.one(rows + i, x.row(r).data(), sumsOf(r), in, y + i);
                    for (int i = 0; i < k; ++i) out(r, j + i) = y[i];
                }
            }
            return;
        }
        for (; j < j1; ++j) {
            const std::uint8_t* row = w.storedRow(j);
            for (Eigen::Index r = 0; r < n; ++r) {
                const float* xr = x.row(r).data();
                out(r, j) = dot != nullptr ? dot(row, xr, sumsOf(r), in) : dotGeneric(type, row, rowBytes, xr, in);
            }
        }
    });
}

void panels(const Matrix& x, const WeightMatrix& w, Matrix& out)
{
    const Eigen::Index cols = w.outputs(), in = w.inputs();
    const Eigen::Index width = taskCols(cols), tasks = (cols + width - 1) / width;
#pragma omp parallel for schedule(dynamic, 1) if (worthTeam(x.rows(), in, cols))
    for (Eigen::Index t = 0; t < tasks; ++t) {
        const Eigen::Index c0 = t * width, n = std::min(width, cols - c0);
        thread_local Matrix buffer;  // n×in: the panel's stored rows in float32
        out.middleCols(c0, n).noalias() = x * w.columnPanel(c0, n, buffer).transpose();
    }
}

} // namespace

void product(const Matrix& x, const WeightMatrix& w, Matrix& out)
{
    if (!w.m_quant) {
        if (w.m_transposed) detail::productTransposed(x, w.m_dense, out);
        else detail::product(x, w.m_dense, out);
        return;
    }
    assert(x.cols() == w.inputs());
    out.resize(x.rows(), w.outputs());
    if (x.rows() <= kVectorRows) gemv(x, w, out);
    else panels(x, w, out);
}

ProductBurst::ProductBurst() : m_scope(std::make_unique<detail::BurstScope>(detail::teamThreads())) {}

ProductBurst::~ProductBurst() = default;

void ProductBurst::rest() { m_scope->own().rest(); }

Vector WeightMatrix::times(const Vector& v) const
{
    assert(v.size() == outputs());
    if (!m_quant) return m_transposed ? Vector(m_dense.transpose() * v) : Vector(m_dense * v);
    // Each stored row dequantized (the AVX2 row kernels where there is one: column()'s exact reference path made
    // direct logit attribution 4× slower), weighted by its v and summed.
    const RowDequant fast = fastRow(m_type);
    Vector out = Vector::Zero(m_in), col(m_in);
    for (Eigen::Index j = 0; j < m_out; ++j) {
        if (fast != nullptr) fast(storedRow(j), col.data(), m_in);
        else column(j, col.data());
        out.noalias() += v[j] * col;
    }
    return out;
}

MatrixCMap WeightMatrix::columnPanel(Eigen::Index c0, Eigen::Index cols, Matrix& buffer) const
{
    assert(c0 >= 0 && cols >= 0 && c0 + cols <= outputs());
    const Eigen::Index in = inputs();
    if (!m_quant && m_transposed) return MatrixCMap(m_dense.data() + c0 * in, cols, in, Eigen::OuterStride<>(in));
    buffer.resize(cols, in);
    if (!m_quant) {
        buffer = m_dense.middleCols(c0, cols).transpose();
    } else {
        const RowDequant fast = fastRow(m_type);
        for (Eigen::Index j = 0; j < cols; ++j) {
            if (fast != nullptr) fast(storedRow(c0 + j), buffer.row(j).data(), in);
            else column(c0 + j, buffer.row(j).data());
        }
    }
    return MatrixCMap(buffer.data(), cols, in, Eigen::OuterStride<>(in));
}

Matrix referenceProduct(const Matrix& x, const WeightMatrix& w)
{
    const Matrix dense = w.toMatrix();
    return x * dense;
}

} // namespace attn
