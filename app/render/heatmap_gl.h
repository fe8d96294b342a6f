// The GL heatmap renderer: each heatmap is a float texture (one texel per entry, uploaded only when the
// result changes) drawn through shaders/heatmap.{vert,frag}.glsl with a colormap lookup texture
// (attn::colormapLut) and a mask texture. Hooks into ImGui's OpenGL3 backend with draw callbacks.
#pragma once

#include "render/heatmap_view.h"

#include <attnscope/status.h>

#include <deque>
#include <map>

namespace app {

class GlHeatmapRenderer final : public HeatmapRenderer {
public:
    GlHeatmapRenderer() = default;
    ~GlHeatmapRenderer() override;
    // Compiles the shaders and creates the lookup textures; needs a current GL 3.3 context.
    attn::Status init();
    void drawCells(ImDrawList* dl, ImVec2 a, ImVec2 b, const std::string& key, const HeatmapSource& src) override;
    // An RGBA8 texture with mipmaps (pictures such as the export preview are often drawn smaller than they
    // are). Kept until replaced under the same key; the few keys in use are never evicted.
    ImTextureID uploadImage(const std::string& key, int width, int height, const std::uint8_t* rgba) override;
    // Call once per frame after rendering: frees the textures of heatmaps not drawn for a while.
    void endFrame();

    struct DrawParams {  // what one draw callback needs (lives until the frame is rendered)
        const GlHeatmapRenderer* self = nullptr;
        unsigned lut = 0, mask = 0;
        float lo = 0, hi = 1;
        bool hasMask = false;
    };

private:
    struct Entry {
        unsigned values = 0, mask = 0;
        int rows = 0, cols = 0;
        std::uint64_t generation = ~std::uint64_t(0);
        bool hasMask = false;
        long lastUsed = 0;
    };
    static void drawCallback(const ImDrawList* dl, const ImDrawCmd* cmd);

    unsigned m_program = 0;
    int m_locProjection = -1, m_locValues = -1, m_locLut = -1, m_locMask = -1, m_locHasMask = -1, m_locLo = -1, m_locHi = -1,
        m_locMaskedColor = -1;
    unsigned m_luts[4] = {0, 0, 0, 0};
    unsigned m_emptyMask = 0;
    std::map<std::string, Entry> m_entries;
    std::map<std::string, unsigned> m_images;  // uploadImage textures by key
    std::deque<DrawParams> m_params;  // deque: stable addresses while the frame's callbacks refer to them
    long m_frame = 0;
};

} // namespace app
