#include "render/heatmap_gl.h"

#include "messages.h"

#include <attnscope/device_interop.h>

#include <glad/gl.h>

#include <cstddef>
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
    m_locMaskedColor = glGetUniformLocation(m_program, "uMaskedColor");

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

void GlHeatmapRenderer::drawCells(ImDrawList* dl, ImVec2 a, ImVec2 b, const std::string& key, const HeatmapSource& src)
{
    const attn::Matrix& m = *src.values;
    if (m.size() == 0) return;
    Entry& e = m_entries[key];
    e.lastUsed = m_frame;
    const int rows = static_cast<int>(m.rows()), cols = static_cast<int>(m.cols());
    const bool hasMask = src.mask && src.mask->size() == m.size();
    if (e.generation != src.generation || e.rows != rows || e.cols != cols || e.hasMask != hasMask) {
        if (!fillFromDevice(e, rows, cols, src)) {
            if (src.deviceGeneration != 0) ++m_stats.deviceFallbacks;
            if (e.registered) {
                // CUDA must let go of the texture before its storage is respecified.
                (void)attn::unregisterGlTexture(e.values);
                e.registered = false;
            }
            if (!e.values) e.values = makeTexture();
            glBindTexture(GL_TEXTURE_2D, e.values);
            glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
            // Row-major rows×cols floats: texture width = cols, texture row 0 = matrix row 0 (drawn at the top).
            glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, cols, rows, 0, GL_RED, GL_FLOAT, m.data());
            ++m_stats.hostUploads;
        }
        if (hasMask) {
            if (!e.mask) e.mask = makeTexture();
            glBindTexture(GL_TEXTURE_2D, e.mask);
            glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, cols, rows, 0, GL_RED, GL_UNSIGNED_BYTE, src.mask->data());
        }
        e.rows = rows;
        e.cols = cols;
        e.hasMask = hasMask;
        e.generation = src.generation;
    }
    DrawParams& p = m_params.emplace_back();
    p.self = this;
    p.lut = m_luts[static_cast<int>(src.colormap)];
    p.mask = hasMask ? e.mask : m_emptyMask;
    p.hasMask = hasMask;
    p.lo = src.range.lo;
    p.hi = src.range.hi;
    dl->AddCallback(drawCallback, &p);
    dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(e.values)), a, b);
    dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
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

bool GlHeatmapRenderer::fillFromDevice(Entry& e, int rows, int cols, const HeatmapSource& src)
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
    if (!attn::deviceResultCurrent(src.deviceGeneration)) return false;
    if (!e.values) e.values = makeTexture();
    if (!e.registered || e.rows != rows || e.cols != cols) {
        if (e.registered) {
            attn::Status st = attn::unregisterGlTexture(e.values);
            e.registered = false;
            if (!st.ok()) {
                disableInterop(st.message);
                return false;
            }
        }
        // Storage first (CUDA registers an existing level), then the registration, kept while the size holds.
        glBindTexture(GL_TEXTURE_2D, e.values);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, cols, rows, 0, GL_RED, GL_FLOAT, nullptr);
        attn::Status st = attn::registerGlTexture(e.values);
        if (!st.ok()) {
            disableInterop(st.message);
            return false;
        }
        e.registered = true;
    }
    attn::Status st = attn::fillGlTexture(e.values, src.deviceGeneration, src.deviceMatrix, src.deviceHead);
    if (!st.ok()) {
        disableInterop(st.message);
        return false;
    }
    ++m_stats.deviceFills;
    return true;
}

void GlHeatmapRenderer::disableInterop(const std::string& why)
{
    m_interop = Interop::Off;
    for (auto& [key, e] : m_entries)
        if (e.registered) {
            (void)attn::unregisterGlTexture(e.values);
            e.registered = false;
        }
    postWarning("heatmaps: filling textures from the GPU failed, uploading from host memory from now on: " + why);
}

void GlHeatmapRenderer::releaseEntry(Entry& e)
{
    if (e.registered) (void)attn::unregisterGlTexture(e.values);
    e.registered = false;
    if (e.values) glDeleteTextures(1, &e.values);
    if (e.mask) glDeleteTextures(1, &e.mask);
    e.values = e.mask = 0;
}

void GlHeatmapRenderer::endFrame()
{
    m_params.clear();
    ++m_frame;
    for (auto it = m_entries.begin(); it != m_entries.end();) {
        if (m_frame - it->second.lastUsed > kEvictAfterFrames) {
            releaseEntry(it->second);
            it = m_entries.erase(it);
        } else {
            ++it;
        }
    }
}

void GlHeatmapRenderer::shutdown()
{
    for (auto& [key, e] : m_entries) releaseEntry(e);
    m_entries.clear();
    m_params.clear();
}

} // namespace app
