// The GL heatmap renderer: each heatmap is a float texture (one texel per entry, uploaded only when the
// result changes) drawn through shaders/heatmap.{vert,frag}.glsl with a colormap lookup texture
// (attn::colormapLut) and a mask texture. Hooks into ImGui's OpenGL3 backend with draw callbacks.
//
// Values come from host memory (glTexImage2D of the result's matrix) or, for a result of the CUDA backend
// that is still on the device, straight from device memory (CUDA-OpenGL interop, attnscope/device_interop.h):
// the texture is registered with CUDA once per size and filled by a device-to-device copy. Any interop
// failure falls back to the host upload for the rest of the session, with one message.
#pragma once

#include "render/heatmap_view.h"

#include <attnscope/status.h>

#include <deque>
#include <map>
#include <string>

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
    // Releases every texture (and its CUDA registration); call while the GL context is still current.
    void shutdown();

    // How value textures were filled since init: counted per (re)fill of one heatmap's texture.
    struct FillStats {
        long hostUploads = 0;      // glTexImage2D from the host matrix
        long deviceFills = 0;      // device-to-device copy through CUDA-OpenGL interop
        long deviceFallbacks = 0;  // device-resident results that were uploaded from the host instead
    };
    const FillStats& fillStats() const { return m_stats; }

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
        bool registered = false;  // `values` is registered with CUDA at its current size
        long lastUsed = 0;
    };
    enum class Interop { Unknown, On, Off };  // Unknown until the first device-resident result arrives

    static void drawCallback(const ImDrawList* dl, const ImDrawCmd* cmd);
    // Fills e.values (already rows×cols if it existed) from the device; false (nothing drawn from it) when
    // interop is off, the device no longer holds the result, or it failed (then turned off, one message).
    bool fillFromDevice(Entry& e, int rows, int cols, const HeatmapSource& src);
    void disableInterop(const std::string& why);
    void releaseEntry(Entry& e);

    unsigned m_program = 0;
    int m_locProjection = -1, m_locValues = -1, m_locLut = -1, m_locMask = -1, m_locHasMask = -1, m_locLo = -1, m_locHi = -1,
        m_locMaskedColor = -1;
    unsigned m_luts[4] = {0, 0, 0, 0};
    unsigned m_emptyMask = 0;
    std::map<std::string, Entry> m_entries;
    std::map<std::string, unsigned> m_images;  // uploadImage textures by key
    std::deque<DrawParams> m_params;  // deque: stable addresses while the frame's callbacks refer to them
    long m_frame = 0;
    Interop m_interop = Interop::Unknown;
    FillStats m_stats;
};

} // namespace app
