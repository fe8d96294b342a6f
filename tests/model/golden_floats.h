// The goldens' float arrays: little-endian float32 bytes in base64 (make_decoder_goldens.py's f32_base64, the
// Gemma 3 and lazy goldens). Shared by the decoder golden tests.
#pragma once

#include <cstring>
#include <string>
#include <vector>

namespace attn::testing {

inline std::vector<float> base64Floats(const std::string& b64)
{
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        return c == '+' ? 62 : c == '/' ? 63 : -1;
    };
    std::vector<unsigned char> bytes;
    int acc = 0, bits = 0;
    for (char c : b64) {
        const int v = value(c);
        if (v < 0) continue;
        acc = (acc << 6) | v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes.push_back(static_cast<unsigned char>((acc >> bits) & 0xff));
        }
    }
    std::vector<float> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return out;
}

} // namespace attn::testing
