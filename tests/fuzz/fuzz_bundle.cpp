// libFuzzer target: attention bundles held in memory (attn::BundleMaps::fromBytes, docs/bundle.md): the header and
// metadata checks, then a few tiles, the pooled overview of a map and a full value scan (bounded to small maps).
// Whatever the bytes: maps or a Status, never a read outside them.
#include <attnscope/bundle.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    auto maps = attn::BundleMaps::fromBytes(data, size, "fuzz.safetensors");
    if (!maps) return 0;
    const attn::BundleMaps& b = **maps;
    const int L = b.layers(), H = b.heads(), T = b.queries(), S = b.keys();
    attn::Matrix m;
    // Corners and the middle of the last head of the last layer (the end of the data) and the first.
    for (auto [l, h] : {std::pair{0, 0}, {L - 1, H - 1}}) {
        (void)b.tile(attn::MapKind::Weights, l, h, attn::MapRect{0, 0, std::min(T, 4), std::min(S, 4)}, m);
        (void)b.tile(attn::MapKind::Weights, l, h, attn::MapRect{T - 1, S - 1, 1, 1}, m);
        (void)b.tile(attn::MapKind::Weights, l, h, attn::MapRect{T / 2, 0, 1, S}, m);
        (void)b.pooled(attn::MapKind::Weights, l, h, attn::MapRect{0, 0, T, S}, 8, 8, m);
    }
    (void)b.tile(attn::MapKind::Scores, 0, 0, attn::MapRect{0, 0, 1, 1}, m);  // refused: bundles hold weights
    if (std::uint64_t(L) * H * T * S <= (1u << 16)) (void)b.checkValues();
    return 0;
}
