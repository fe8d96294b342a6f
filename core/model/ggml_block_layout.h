// GGML's block layouts shared by the reference dequantizers (ggml_quants.cpp) and the fast products
// (weight_matrix.cpp) of core/model (private). Integer unpacking only: identical in both.
#pragma once

#include <cstdint>

namespace attn::detail {

// The 8 six-bit scales and mins of Q4_K/Q5_K, packed in 12 bytes: for j < 4, scale j = low 6 bits of byte j,
// min j = low 6 bits of byte j+4; for j ≥ 4, scale = low nibble of byte j+4 | (top 2 bits of byte j−4) << 4,
// min = high nibble of byte j+4 | (top 2 bits of byte j) << 4.
inline void scaleMinK4(const std::uint8_t* q, int j, int& scale, int& min)
{
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

} // namespace attn::detail
