// GGML's block layouts shared by the reference dequantizers (ggml_quants.cpp) and the fast products
// (weight_matrix.cpp) of core/model (private). Integer unpacking and tables only: identical in both.
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

// The 16 levels a 4-bit IQ4_NL / IQ4_XS code stands for (GGML's kvalues_iq4nl): denser near 0, where weights are.
alignas(16) inline constexpr std::int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                           1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_XS (half d; uint16 scales_h; uint8 scales_l[4]; 128 bytes of nibbles): the 6-bit scale of sub-block j of 32,
// less its bias of 32. Low 4 bits = nibble (j % 2) of scales_l[j / 2], high 2 bits = bits 2j..2j+1 of scales_h.
inline int iq4xsScale(const std::uint8_t* blk, int j)
{
    const int high = ((blk[2] | (blk[3] << 8)) >> (2 * j)) & 3;
    return (((blk[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | (high << 4)) - 32;
}

} // namespace attn::detail
