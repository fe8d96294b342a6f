#include "render/heatmap_gl.h"

#include "messages.h"

#include <attnscope/device_interop.h>

#include <glad/gl.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace app {
namespace shaders {
extern const char* const kHeatmapVert;
extern const char* const kHeatmapFrag;
} // namespace shaders

namespace {

// A texture not drawn for this many frames (about 2 s at 60 fps) is freed: closed heads, old presets.
constexpr long kEvictAfterFrames = 120;

attn::Status compile(GLuint shader, const char* src, const char* name)
{
    glShaderSource(shader, 1, &src, nullptr);
    glCompileShader(shader);
    GLint ok = 0;
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (ok) return {};
    char log[2048] = {};
    glGetShaderInfoLog(shader, sizeof log, nullptr, log);
    return attn::makeError(attn::StatusCode::Internal, std::string("shader ") + name + " failed to compile: " + log);
}

GLuint makeTexture()
{
    GLuint t = 0;
    glGenTextures(1, &t);
    glBindTexture(GL_TEXTURE_2D, t);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    return t;
}

} // namespace

GlHeatmapRenderer::~GlHeatmapRenderer()
{
    // The GL context may already be gone at exit; the driver frees everything with it.
}

attn::Status GlHeatmapRenderer::init()
{
    GLuint vs = glCreateShader(GL_VERTEX_SHADER), fs = glCreateShader(GL_FRAGMENT_SHADER);
    attn::Status st = compile(vs, shaders::kHeatmapVert, "heatmap.vert.glsl");
    if (st.ok()) st = compile(fs, shaders::kHeatmapFrag, "heatmap.frag.glsl");
    if (!st.ok()) return st;
    m_program = glCreateProgram();
    glAttachShader(m_program, vs);
    glAttachShader(m_program, fs);
    glLinkProgram(m_program);
    glDeleteShader(vs);
    glDeleteShader(fs);
    GLint ok = 0;
    glGetProgramiv(m_program, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[2048] = {};
        glGetProgramInfoLog(m_program, sizeof log, nullptr, log);
        return attn::makeError(attn::StatusCode::Internal, std::string("heatmap shader failed to link: ") + log);
    }
    m_locProjection = glGetUniformLocation(m_program, "uProjection");
    m_locValues = glGetUniformLocation(m_program, "uValues");
    m_locLut = glGetUniformLocation(m_program, "uLut");
    m_locMask = glGetUniformLocation(m_program, "uMask");
    m_locHasMask = glGetUniformLocation(m_program, "uHasMask");
    m_locLo = glGetUniformLocation(m_program, "uLo");
    m_locHi = glGetUniformLocation(m_program, "uHi");
    m_locLog = glGetUniformLocation(m_program, "uLog");
    m_locMaskedColor = glGetUniformLocation(m_program, "uMaskedColor");

    glGetIntegerv(GL_MAX_TEXTURE_SIZE, &m_maxTextureSize);
    m_tileSize = std::max(1, std::min(kTileSize, m_maxTextureSize));
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    const attn::Colormap maps[4] = {attn::Colormap::Viridis, attn::Colormap::Magma, attn::Colormap::Cividis, attn::Colormap::RdBu};
    for (int i = 0; i < 4; ++i) {
        const auto lut = attn::colormapLut(maps[i]);
        std::vector<unsigned char> rgb;
        for (const attn::Rgb8& c : lut) rgb.insert(rgb.end(), {c.r, c.g, c.b});
        m_luts[static_cast<int>(maps[i])] = makeTexture();
        glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, attn::kColormapLutSize, 1, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb.data());
    }
    m_emptyMask = makeTexture();
    const unsigned char zero = 0;
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, 1, 1, 0, GL_RED, GL_UNSIGNED_BYTE, &zero);
    const GLenum err = glGetError();
    if (err != GL_NO_ERROR)
        return attn::makeError(attn::StatusCode::Internal, "heatmap renderer set-up failed: GL error " + std::to_string(err));
    return {};
}

void GlHeatmapRenderer::drawCallback(const ImDrawList*, const ImDrawCmd* cmd)
{
    const auto* p = static_cast<const DrawParams*>(cmd->UserCallbackData);
    const GlHeatmapRenderer* self = p->self;
    const ImDrawData* dd = ImGui::GetDrawData();
    // Orthographic projection of ImGui's display rectangle (as ImGui's own backend does).
    const float L = dd->DisplayPos.x, R = dd->DisplayPos.x + dd->DisplaySize.x;
    const float T = dd->DisplayPos.y, B = dd->DisplayPos.y + dd->DisplaySize.y;
    const float proj[16] = {2.0f / (R - L), 0, 0, 0, 0, 2.0f / (T - B), 0, 0, 0, 0, -1.0f, 0,
                            (R + L) / (L - R), (T + B) / (B - T), 0, 1.0f};
    glUseProgram(self->m_program);
    glUniformMatrix4fv(self->m_locProjection, 1, GL_FALSE, proj);
    glUniform1i(self->m_locValues, 0);
    glUniform1i(self->m_locLut, 1);
    glUniform1i(self->m_locMask, 2);
    glUniform1i(self->m_locHasMask, p->hasMask ? 1 : 0);
    glUniform1f(self->m_locLo, p->lo);
    glUniform1f(self->m_locHi, p->hi);
    glUniform1i(self->m_locLog, p->log ? 1 : 0);
    glUniform3f(self->m_locMaskedColor, attn::kMaskedColor.r / 255.0f, attn::kMaskedColor.g / 255.0f, attn::kMaskedColor.b / 255.0f);
    glActiveTexture(GL_TEXTURE1);
    glBindTexture(GL_TEXTURE_2D, p->lut);
    glActiveTexture(GL_TEXTURE2);
    glBindTexture(GL_TEXTURE_2D, p->mask);
    glActiveTexture(GL_TEXTURE0);
    // Our attribute locations (0, 1, 2 in the vertex shader) over ImGui's vertex buffer, bound by the backend.
    glEnableVertexAttribArray(0);
    glEnableVertexAttribArray(1);
    glEnableVertexAttribArray(2);
    glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, sizeof(ImDrawVert), reinterpret_cast<void*>(offsetof(ImDrawVert, pos)));
    glVertexAttribPointer(1, 2, GL_FLOAT, GL_FALSE, sizeof(ImDrawVert), reinterpret_cast<void*>(offsetof(ImDrawVert, uv)));
    glVertexAttribPointer(2, 4, GL_UNSIGNED_BYTE, GL_TRUE, sizeof(ImDrawVert), reinterpret_cast<void*>(offsetof(ImDrawVert, col)));
}

void GlHeatmapRenderer::addDraw(ImDrawList* dl, unsigned values, unsigned mask, ImVec2 p0, ImVec2 p1, const HeatmapSource& src)
{
    DrawParams& p = m_params.emplace_back();
    p.self = this;
    p.lut = m_luts[static_cast<int>(src.colormap)];
    p.mask = mask ? mask : m_emptyMask;
    p.hasMask = mask != 0;
    p.lo = src.range.lo;
    p.hi = src.range.hi;
    // As attn::normalize: a log scale needs 0 < lo < hi, else it draws linear.
    p.log = src.range.scale == attn::ColorScale::Log && src.range.lo > 0 && src.range.hi > src.range.lo;
    dl->AddCallback(drawCallback, &p);
    dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(values)), p0, p1);
}

void GlHeatmapRenderer::drawCells(ImDrawList* dl, ImVec2 a, ImVec2 b, const std::string& key, const HeatmapSource& src)
{
    if (src.rows() == 0 || src.cols() == 0) return;
    // What of the map is on screen (the rest of a large map lies outside its scrolling view, or a whole map
    // below the window): nothing else is uploaded or drawn.
    const ImVec2 clipMin = dl->GetClipRectMin(), clipMax = dl->GetClipRectMax();
    const ImVec2 visMin(std::max(a.x, clipMin.x), std::max(a.y, clipMin.y));
    const ImVec2 visMax(std::min(b.x, clipMax.x), std::min(b.y, clipMax.y));
    if (visMin.x >= visMax.x || visMin.y >= visMax.y) return;
    Entry& e = m_entries[key];
    e.lastUsed = m_frame;
    drawTiles(e, dl, a, b, visMin, visMax, src);
    dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
}

namespace {

// A 64-bit hash of `bytes` bytes (8 at a time, multiply-xorshift mixing): tells a changed tile row from an
// unchanged one without keeping a copy of the data. A collision (2^-64 per row) would leave one row stale.
std::uint64_t hashBytes(const void* data, std::size_t bytes, std::uint64_t h)
{
    const auto* p = static_cast<const unsigned char*>(data);
    std::size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
    return h ^ (h >> 32);
}

} // namespace

void GlHeatmapRenderer::refreshTile(Tile& t, int r0, int c0, int h, int w, const HeatmapSource& src, bool hasMask)
{
    const attn::Matrix& m = *src.values;
    const int cols = static_cast<int>(m.cols());
    const bool fresh = t.values == 0 || t.hasMask != hasMask || static_cast<int>(t.rowHash.size()) != h;
    if (t.values == 0) {
        t.values = makeTexture();
        glBindTexture(GL_TEXTURE_2D, t.values);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, w, h, 0, GL_RED, GL_FLOAT, nullptr);
    }
    if (hasMask && t.mask == 0) {
        t.mask = makeTexture();
        glBindTexture(GL_TEXTURE_2D, t.mask);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, w, h, 0, GL_RED, GL_UNSIGNED_BYTE, nullptr);
    }
    if (fresh) t.rowHash.assign(static_cast<std::size_t>(h), 0);
    // Rows whose hash differs from what the texture holds, sent in runs of consecutive rows.
    std::vector<std::uint64_t> hashes(static_cast<std::size_t>(h));
    for (int r = 0; r < h; ++r) {
        std::uint64_t x = hashBytes(m.data() + std::size_t(r0 + r) * std::size_t(cols) + std::size_t(c0), std::size_t(w) * sizeof(float),
                                    0xCBF29CE484222325ull);
        if (hasMask) x = hashBytes(src.mask->data() + std::size_t(r0 + r) * std::size_t(cols) + std::size_t(c0), std::size_t(w), x);
        hashes[static_cast<std::size_t>(r)] = x;
    }
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, cols);  // rows of the tile are `cols` apart in the matrix
    bool any = false;
    for (int r = 0; r < h;) {
        if (!fresh && hashes[static_cast<std::size_t>(r)] == t.rowHash[static_cast<std::size_t>(r)]) {
            ++r;
            ++m_stats.rowsSkipped;
            continue;
        }
        int end = r + 1;
        while (end < h && (fresh || hashes[static_cast<std::size_t>(end)] != t.rowHash[static_cast<std::size_t>(end)])) ++end;
        const std::size_t off = std::size_t(r0 + r) * std::size_t(cols) + std::size_t(c0);
        glBindTexture(GL_TEXTURE_2D, t.values);
        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, r, w, end - r, GL_RED, GL_FLOAT, m.data() + off);
        if (hasMask) {
            glBindTexture(GL_TEXTURE_2D, t.mask);
            glTexSubImage2D(GL_TEXTURE_2D, 0, 0, r, w, end - r, GL_RED, GL_UNSIGNED_BYTE, src.mask->data() + off);
        }
        m_stats.rowsUploaded += end - r;
        any = true;
        r = end;
    }
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    if (any) ++m_stats.hostUploads;
    t.rowHash = std::move(hashes);
    t.hasMask = hasMask;
    t.maskKnown = false;
    t.generation = src.generation;
}

void GlHeatmapRenderer::drawTiles(Entry& e, ImDrawList* dl, ImVec2 a, ImVec2 b, ImVec2 visMin, ImVec2 visMax, const HeatmapSource& src)
{
    const int rows = src.rows(), cols = src.cols();  // (also of a map whose cells are on the device only)
    const bool hasMask = src.mask && src.mask->size() == Eigen::Index(rows) * cols;
    const int ts = m_tileSize;
    if (e.tiledRows != rows || e.tiledCols != cols) {
        releaseTiles(e);
        e.tiledRows = rows;
        e.tiledCols = cols;
        e.tileRows = (rows + ts - 1) / ts;
        e.tileCols = (cols + ts - 1) / ts;
        e.tiles.resize(std::size_t(e.tileRows) * std::size_t(e.tileCols));
    }
    const float cw = (b.x - a.x) / static_cast<float>(cols), ch = (b.y - a.y) / static_cast<float>(rows);
    // Visible cells, then the tiles holding them.
    const int c0 = std::clamp(static_cast<int>((visMin.x - a.x) / cw), 0, cols - 1);
    const int c1 = std::clamp(static_cast<int>((visMax.x - a.x) / cw), 0, cols - 1);
    const int r0 = std::clamp(static_cast<int>((visMin.y - a.y) / ch), 0, rows - 1);
    const int r1 = std::clamp(static_cast<int>((visMax.y - a.y) / ch), 0, rows - 1);
    std::vector<std::size_t>& visible = m_visible;  // (members: no allocation a heatmap a frame)
    std::vector<std::size_t>& stale = m_stale;
    visible.clear();
    stale.clear();
    for (int tr = r0 / ts; tr <= r1 / ts; ++tr)
        for (int tc = c0 / ts; tc <= c1 / ts; ++tc) {
            const std::size_t i = std::size_t(tr) * std::size_t(e.tileCols) + std::size_t(tc);
            visible.push_back(i);
            if (e.tiles[i].generation != src.generation) stale.push_back(i);
        }
    // Asked only when something is to be filled: deviceReady may wait for the device's lock (the window's worker
    // holds it while a map comes back), which a frame with nothing new need not.
    if (!stale.empty()) {
        const bool device = deviceReady(src) && fillFromDevice(e, stale, src, hasMask);
        if (!device) {
            if (src.deviceGeneration != 0 && e.fallbackGeneration != src.generation) {
                ++m_stats.deviceFallbacks;  // a device-resident result, uploaded from the host (counted once)
                e.fallbackGeneration = src.generation;
            }
            if (src.onHost())
                for (std::size_t i : stale) {
                    const CellRect c = tileCells(e, i);
                    refreshTile(e.tiles[i], c.r0, c.c0, c.h, c.w, src, hasMask);
                }
        }
    }
    for (std::size_t i : visible) {
        Tile& t = e.tiles[i];
        t.lastDrawn = m_frame;
        // Not filled: cells on the device only that cannot fill textures now (a compute is replacing the result,
        // or interop is off) are left blank; tiles that hold this result's texels are drawn.
        if (t.generation != src.generation) continue;
        const CellRect c = tileCells(e, i);
        const ImVec2 p0(a.x + cw * static_cast<float>(c.c0), a.y + ch * static_cast<float>(c.r0));
        const ImVec2 p1(a.x + cw * static_cast<float>(c.c0 + c.w), a.y + ch * static_cast<float>(c.r0 + c.h));
        addDraw(dl, t.values, hasMask ? t.mask : 0, p0, p1, src);
    }
}

GlHeatmapRenderer::CellRect GlHeatmapRenderer::tileCells(const Entry& e, std::size_t i) const
{
    const int r0 = static_cast<int>(i / std::size_t(e.tileCols)) * m_tileSize, c0 = static_cast<int>(i % std::size_t(e.tileCols)) * m_tileSize;
    return {r0, c0, std::min(m_tileSize, e.tiledRows - r0), std::min(m_tileSize, e.tiledCols - c0)};
}

void GlHeatmapRenderer::setTileSize(int side) { m_tileSize = std::clamp(side, 1, std::max(1, m_maxTextureSize)); }

void GlHeatmapRenderer::releaseTile(Tile& t)
{
    if (t.registered) (void)attn::unregisterGlTexture(t.values);  // before the texture goes (the interop's contract)
    if (t.values) glDeleteTextures(1, &t.values);
    if (t.mask) glDeleteTextures(1, &t.mask);
    t = Tile{};
}

void GlHeatmapRenderer::releaseTiles(Entry& e)
{
    for (Tile& t : e.tiles) releaseTile(t);
    e.tiles.clear();
    e.tiledRows = e.tiledCols = e.tileRows = e.tileCols = 0;
}

ImTextureID GlHeatmapRenderer::uploadImage(const std::string& key, int width, int height, const std::uint8_t* rgba)
{
    if (width <= 0 || height <= 0 || !rgba) return nullptr;
    unsigned& t = m_images[key];
    if (!t) {
        t = makeTexture();
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR_MIPMAP_LINEAR);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
    }
    glBindTexture(GL_TEXTURE_2D, t);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
    glGenerateMipmap(GL_TEXTURE_2D);
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(t));
}

bool GlHeatmapRenderer::deviceReady(const HeatmapSource& src)
{
    if (src.deviceGeneration == 0 || m_interop == Interop::Off) return false;
    if (m_interop == Interop::Unknown) {
        // Asked once, when the first result of the CUDA backend is shown (never for CPU-only sessions).
        std::string why;
        if (!attn::deviceInteropAvailable(&why)) {
            m_interop = Interop::Off;
            postInfo("heatmaps are uploaded from host memory: " + why);
            return false;
        }
        m_interop = Interop::On;
    }
    // The document may show an older result than the device holds (a later compute failed and the last
    // good result was kept): its host copy is then the only one, and uploading it is not an error.
    return attn::deviceResultCurrent(src.deviceGeneration);
}

bool GlHeatmapRenderer::fillFromDevice(Entry& e, const std::vector<std::size_t>& stale, const HeatmapSource& src, bool hasMask)
{
    const int cols = e.tiledCols;
    std::vector<attn::GlTextureFill> fills;
    fills.reserve(stale.size());
    for (std::size_t i : stale) {
        Tile& t = e.tiles[i];
        const CellRect c = tileCells(e, i);
        if (!t.values) {
            // Storage first (CUDA registers an existing level), then the registration, kept for the tile's life.
            t.values = makeTexture();
            glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, c.w, c.h, 0, GL_RED, GL_FLOAT, nullptr);
        }
        if (!t.registered) {
            const attn::Status st = attn::registerGlTexture(t.values);
            if (!st.ok()) {
                disableInterop(st.message);
                return false;
            }
            t.registered = true;
        }
        fills.push_back({t.values, src.deviceMatrix, src.deviceHead, c.r0, c.c0});
    }
    const attn::Status st = attn::fillGlTextures(src.deviceGeneration, fills);
    // Unavailable: a compute started after deviceReady and replaces the result (the fill does not wait for it):
    // the host copy is uploaded, as for any result the device no longer holds. Other errors end interop.
    if (st.code == attn::StatusCode::Unavailable) return false;
    if (!st.ok()) {
        disableInterop(st.message);
        return false;
    }
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, cols);  // rows of a tile's mask are `cols` apart in the mask
    for (std::size_t i : stale) {
        Tile& t = e.tiles[i];
        const auto [r0, c0, h, w] = tileCells(e, i);
        if (hasMask) {
            // The mask's part, uploaded only when it changed (an edit of X leaves it as it was).
            const std::uint8_t* m0 = src.mask->data() + std::size_t(r0) * std::size_t(cols) + std::size_t(c0);
            std::uint64_t hash = 0xCBF29CE484222325ull;
            for (int r = 0; r < h; ++r) hash = hashBytes(m0 + std::size_t(r) * std::size_t(cols), std::size_t(w), hash);
            if (!t.mask) {
                t.mask = makeTexture();
                glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, w, h, 0, GL_RED, GL_UNSIGNED_BYTE, nullptr);
                t.maskKnown = false;
            }
            if (!t.maskKnown || t.maskHash != hash) {
                glBindTexture(GL_TEXTURE_2D, t.mask);
                glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, GL_RED, GL_UNSIGNED_BYTE, m0);
            }
            t.maskHash = hash;
            t.maskKnown = true;
        }
        t.hasMask = hasMask;
        t.rowHash.clear();  // the host does not know these texels: its next upload sends every row
        t.generation = src.generation;
        ++m_stats.deviceFills;
    }
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    return true;
}

void GlHeatmapRenderer::disableInterop(const std::string& why)
{
    m_interop = Interop::Off;
    for (auto& [key, e] : m_entries)
        for (Tile& t : e.tiles)
            if (t.registered) {
                (void)attn::unregisterGlTexture(t.values);
                t.registered = false;
            }
    postWarning("heatmaps: filling textures from the GPU failed, uploading from host memory from now on: " + why);
}

void GlHeatmapRenderer::endFrame()
{
    m_params.clear();
    ++m_frame;
    for (auto it = m_entries.begin(); it != m_entries.end();) {
        if (m_frame - it->second.lastUsed > kEvictAfterFrames) {
            releaseTiles(it->second);
            it = m_entries.erase(it);
            continue;
        }
        // Tiles of a map in use but scrolled off screen for a while (a large map panned across) go too.
        for (Tile& t : it->second.tiles)
            if (t.values && m_frame - t.lastDrawn > kEvictAfterFrames) {
                releaseTile(t);
                ++m_stats.tilesEvicted;
            }
        ++it;
    }
}

void GlHeatmapRenderer::shutdown()
{
    for (auto& [key, e] : m_entries) releaseTiles(e);
    m_entries.clear();
    m_params.clear();
}

} // namespace app
