// The GL heatmap renderer: each heatmap is a grid of float textures, tiles of at most kTileSize² entries (one
// texel per entry), drawn through shaders/heatmap.{vert,frag}.glsl with a colormap lookup texture
// (attn::colormapLut) and a mask texture per tile. Hooks into ImGui's OpenGL3 backend with draw callbacks.
//
// Views that scale: only tiles on screen are created, filled and drawn, so a 8192² map (past
// GL_MAX_TEXTURE_SIZE on many drivers) keeps full resolution and costs what its visible part costs. When the
// result changes, a visible tile re-uploads only the rows that changed (glTexSubImage2D): each tile keeps a
// 64-bit hash of each of its rows (values and mask), compared with the new data's. An edit of one token
// changes one row and one column of the scores: tiles off that row re-upload one row each.
//
// Values come from host memory (glTexSubImage2D of the result's matrix) or, for a result of the CUDA backend
// that is still on the device, straight from device memory (CUDA-OpenGL interop, attnscope/device_interop.h):
// the same visible tiles, each registered with CUDA once, filled by device-to-device copies of their parts, a
// frame's tiles in one mapped batch (attn::fillGlTextures), with the mask's part of each tile uploaded from the
// host when it changed. So a zoomed 8192² map costs the GPU its visible tiles, not its 256 MB. Any interop
// failure falls back to the host upload for the rest of the session, with one message.
#pragma once

#include "render/heatmap_view.h"

#include <attnscope/status.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

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

    // How value textures were filled since init.
    struct FillStats {
        long hostUploads = 0;      // tiles (re)filled from the host matrix (any number of their rows)
        long rowsUploaded = 0;     // tile rows sent to GL from the host (glTexSubImage2D)
        long rowsSkipped = 0;      // tile rows of refreshed tiles left as they were (unchanged)
        long deviceFills = 0;      // tiles filled by a device-to-device copy through CUDA-OpenGL interop
        long deviceFallbacks = 0;  // heatmaps of a device-resident result uploaded from the host instead (once each)
        long tilesEvicted = 0;     // tiles freed after about 2 s off screen (a large map panned across)
    };
    const FillStats& fillStats() const { return m_stats; }
    struct DrawParams {  // what one draw callback needs (lives until the frame is rendered)
        const GlHeatmapRenderer* self = nullptr;
        unsigned lut = 0, mask = 0;
        float lo = 0, hi = 1;
        bool log = false;  // attn::ColorScale::Log: colour by log(v / lo) / log(hi / lo)
        bool hasMask = false;
    };

    // Side of the square value tiles: 256 entries (256 KiB of floats). A map's view is at most 420 px, so at
    // most ~560 cells of it are on screen across (0.75 px cells at the smallest zoom): at most 9 tiles to fill
    // after each result, where 1024² tiles filled up to 50× the visible cells (bench --gui, n=1024 drag:
    // frame median 47-54 ms instead of 60-64 ms on a loaded 2-core machine). Less when GL_MAX_TEXTURE_SIZE is.
    static constexpr int kTileSize = 256;
    int tileSize() const { return m_tileSize; }
    // Smaller tiles (tests: tiling exercised on small maps); clamped to 1…GL_MAX_TEXTURE_SIZE. Call before
    // the first draw.
    void setTileSize(int side);

private:
    struct Tile {
        unsigned values = 0, mask = 0;
        std::uint64_t generation = ~std::uint64_t(0);  // the HeatmapSource::generation its texels are of
        bool hasMask = false;
        bool registered = false;  // `values` is registered with CUDA (interop fills)
        bool maskKnown = false;   // maskHash is what `mask` holds (a device fill's mask upload)
        std::uint64_t maskHash = 0;
        long lastDrawn = 0;
        std::vector<std::uint64_t> rowHash;  // per row of the tile: what its texture holds (host uploads); empty = unknown
    };
    struct Entry {
        long lastUsed = 0;
        std::uint64_t fallbackGeneration = ~std::uint64_t(0);  // the last generation counted in deviceFallbacks
        // Tiles, row-major, tileRows × tileCols of them, over a map of tiledRows × tiledCols cells.
        int tileRows = 0, tileCols = 0, tiledRows = 0, tiledCols = 0;
        std::vector<Tile> tiles;
    };
    enum class Interop { Unknown, On, Off };  // Unknown until the first device-resident result arrives

    static void drawCallback(const ImDrawList* dl, const ImDrawCmd* cmd);
    // True when `src`'s cells can come from the device: a device-resident result the device still holds, and
    // interop on (asked once, at the first such result).
    bool deviceReady(const HeatmapSource& src);
    // Fills the tiles `stale` (indices into e.tiles) from the device, their masks from the host; false (none
    // marked filled) when the device no longer holds the result or interop failed (then turned off, one message).
    bool fillFromDevice(Entry& e, const std::vector<std::size_t>& stale, const HeatmapSource& src, bool hasMask);
    // The tiles in [visMin, visMax] refreshed (from the device, else the host's changed rows) and drawn.
    void drawTiles(Entry& e, ImDrawList* dl, ImVec2 a, ImVec2 b, ImVec2 visMin, ImVec2 visMax, const HeatmapSource& src);
    struct CellRect {
        int r0, c0, h, w;  // top-left cell, rows and columns
    };
    // The cells of tile i (row-major index) of e's map.
    CellRect tileCells(const Entry& e, std::size_t i) const;
    void refreshTile(Tile& t, int r0, int c0, int h, int w, const HeatmapSource& src, bool hasMask);
    void addDraw(ImDrawList* dl, unsigned values, unsigned mask, ImVec2 p0, ImVec2 p1, const HeatmapSource& src);
    void releaseTile(Tile& t);
    void releaseTiles(Entry& e);
    void disableInterop(const std::string& why);

    unsigned m_program = 0;
    int m_locProjection = -1, m_locValues = -1, m_locLut = -1, m_locMask = -1, m_locHasMask = -1, m_locLo = -1, m_locHi = -1, m_locLog = -1,
        m_locMaskedColor = -1;
    unsigned m_luts[4] = {0, 0, 0, 0};
    unsigned m_emptyMask = 0;
    int m_tileSize = kTileSize;
    int m_maxTextureSize = 1024;  // GL_MAX_TEXTURE_SIZE, read at init (GL 3.3 guarantees at least 1024)
    std::map<std::string, Entry> m_entries;
    std::map<std::string, unsigned> m_images;  // uploadImage textures by key
    std::deque<DrawParams> m_params;  // deque: stable addresses while the frame's callbacks refer to them
    std::vector<std::size_t> m_visible, m_stale;  // drawTiles' tiles on screen, and those of them to fill
    long m_frame = 0;
    Interop m_interop = Interop::Unknown;
    FillStats m_stats;
};

} // namespace app
