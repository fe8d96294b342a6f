// CUDA-OpenGL interop on a real GPU (label gpu): an off-screen EGL context on the CUDA device, GL_R32F
// textures filled by attn::fillGlTexture from the CUDA backend's buffers, read back with glGetTexImage and
// compared bit for bit with the host result, per head, for scores, weights and output in both layouts.
// Exits 77 (CTest: skipped) without a usable CUDA device, without an EGL/GL context, or when the context is
// not on the CUDA device; the emulated twin (test_gl_interop_emulated, label unit) runs everywhere.
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/device_interop.h>

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/gl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace attn {
namespace {

Expected<AttentionResult> computeOnDevice(Layout layout, int heads)
{
    test::ProblemSpec p;
    p.heads = heads;
    p.mode = Mode::Cross;  // so that S can differ from T
    p.T = 37;  // T ≠ S ≠ d_v, and odd widths: a transposed or mis-strided copy cannot match by accident
    p.S = 53;
    p.dv = 5;
    p.wo = true;
    p.causal = true;
    AttentionInput in;
    AttentionConfig cfg;
    test::makeProblem(p, in, cfg);
    cfg.layout = layout;
    if (layout == Layout::Column) in = test::transposed(in);
    cfg.backend = Backend::Cuda;
    return compute(in, cfg);
}

GLuint makeR32fTexture(int width, int height)
{
    GLuint t = 0;
    glGenTextures(1, &t);
    glBindTexture(GL_TEXTURE_2D, t);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, width, height, 0, GL_RED, GL_FLOAT, nullptr);
    return t;
}

std::vector<float> readBack(GLuint t, int width, int height)
{
    std::vector<float> v(std::size_t(width) * height, -1.0f);
    glBindTexture(GL_TEXTURE_2D, t);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glGetTexImage(GL_TEXTURE_2D, 0, GL_RED, GL_FLOAT, v.data());
    return v;
}

TEST(GlInteropGpu, TexturesHoldTheHostResultBitForBit)
{
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Expected<AttentionResult> r = computeOnDevice(layout, 3);
        ASSERT_TRUE(r.ok()) << r.status().message;
        ASSERT_NE(r->deviceGeneration, 0u);
        for (int h = 0; h < 3; ++h)
            for (DeviceMatrix which : {DeviceMatrix::Scores, DeviceMatrix::Weights, DeviceMatrix::Output}) {
                const HeadResult& hr = r->heads[std::size_t(h)];
                const Matrix& m = which == DeviceMatrix::Scores ? hr.scores : which == DeviceMatrix::Weights ? hr.weights : hr.output;
                const std::string what = std::string(toString(layout)) + " head " + std::to_string(h) + " " + toString(which);
                const GLuint t = makeR32fTexture(int(m.cols()), int(m.rows()));
                ASSERT_EQ(glGetError(), GLenum(GL_NO_ERROR)) << what;
                Status s = registerGlTexture(t);
                ASSERT_TRUE(s.ok()) << what << ": " << s.message;
                s = fillGlTexture(t, r->deviceGeneration, which, h);
                ASSERT_TRUE(s.ok()) << what << ": " << s.message;
                const std::vector<float> got = readBack(t, int(m.cols()), int(m.rows()));
                EXPECT_EQ(std::memcmp(got.data(), m.data(), got.size() * sizeof(float)), 0) << what << ": texels differ";
                EXPECT_TRUE(unregisterGlTexture(t).ok());
                glDeleteTextures(1, &t);
            }
    }
}

// The window's tiles (GlHeatmapRenderer): textures of 16 × 16 texels or less, each filled with its part of a matrix,
// every part of a head's three matrices in one batch (one map, one unmap). Read back, each equals its cells.
TEST(GlInteropGpu, TilesHoldTheirPartsBitForBit)
{
    constexpr int kSide = 16;
    for (Layout layout : {Layout::Row, Layout::Column}) {
        Expected<AttentionResult> r = computeOnDevice(layout, 2);
        ASSERT_TRUE(r.ok()) << r.status().message;
        for (int h = 0; h < 2; ++h) {
            struct Tile {
                GLuint texture;
                int row0, col0, width, height;
                const Matrix* m;
                DeviceMatrix which;
            };
            std::vector<Tile> tiles;
            std::vector<GlTextureFill> fills;
            for (DeviceMatrix which : {DeviceMatrix::Scores, DeviceMatrix::Weights, DeviceMatrix::Output}) {
                const HeadResult& hr = r->heads[std::size_t(h)];
                const Matrix& m = which == DeviceMatrix::Scores ? hr.scores : which == DeviceMatrix::Weights ? hr.weights : hr.output;
                for (int r0 = 0; r0 < m.rows(); r0 += kSide)
                    for (int c0 = 0; c0 < m.cols(); c0 += kSide) {
                        const int w = std::min<int>(kSide, int(m.cols()) - c0), hh = std::min<int>(kSide, int(m.rows()) - r0);
                        const GLuint t = makeR32fTexture(w, hh);
                        ASSERT_TRUE(registerGlTexture(t).ok());
                        tiles.push_back({t, r0, c0, w, hh, &m, which});
                        fills.push_back({t, which, h, r0, c0});
                    }
            }
            const Status s = fillGlTextures(r->deviceGeneration, fills);
            ASSERT_TRUE(s.ok()) << s.message;
            for (const Tile& t : tiles) {
                const std::vector<float> got = readBack(t.texture, t.width, t.height);
                for (int y = 0; y < t.height; ++y)
                    for (int x = 0; x < t.width; ++x) {
                        const float want = (*t.m)(t.row0 + y, t.col0 + x), have = got[std::size_t(y) * t.width + x];
                        ASSERT_EQ(std::memcmp(&have, &want, sizeof have), 0)
                            << toString(layout) << " head " << h << " " << toString(t.which) << ": texel (" << y << ", " << x
                            << ") of the tile at (" << t.row0 << ", " << t.col0 << ") is " << have << ", the cell has " << want;
                    }
                EXPECT_TRUE(unregisterGlTexture(t.texture).ok());
                glDeleteTextures(1, &t.texture);
            }
        }
    }
}

TEST(GlInteropGpu, AStaleResultIsRefused)
{
    Expected<AttentionResult> a = computeOnDevice(Layout::Row, 2);
    ASSERT_TRUE(a.ok()) << a.status().message;
    Expected<AttentionResult> b = computeOnDevice(Layout::Row, 2);
    ASSERT_TRUE(b.ok()) << b.status().message;
    const Matrix& m = a->heads[0].weights;
    const GLuint t = makeR32fTexture(int(m.cols()), int(m.rows()));
    ASSERT_TRUE(registerGlTexture(t).ok());
    const Status s = fillGlTexture(t, a->deviceGeneration, DeviceMatrix::Weights, 0);
    EXPECT_EQ(s.code, StatusCode::Unavailable) << s.message;
    EXPECT_TRUE(fillGlTexture(t, b->deviceGeneration, DeviceMatrix::Weights, 0).ok());
    EXPECT_TRUE(unregisterGlTexture(t).ok());
    glDeleteTextures(1, &t);
}

// An off-screen GL context current on this thread: on an EGL device of the platform-device extension when
// there is one (NVIDIA's headless path), else on the default display. Returns "" or why none could be made.
std::string makeGlContext()
{
    std::vector<EGLDisplay> displays;
    auto queryDevices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
    auto platformDisplay = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
    if (queryDevices && platformDisplay) {
        EGLDeviceEXT devices[8];
        EGLint n = 0;
        if (queryDevices(8, devices, &n))
            for (EGLint i = 0; i < n; ++i) displays.push_back(platformDisplay(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr));
    }
    displays.push_back(eglGetDisplay(EGL_DEFAULT_DISPLAY));
    std::string why = "no EGL display";
    for (EGLDisplay dpy : displays) {
        if (dpy == EGL_NO_DISPLAY || !eglInitialize(dpy, nullptr, nullptr)) continue;
        const EGLint attribs[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
        EGLConfig config;
        EGLint count = 0;
        if (!eglBindAPI(EGL_OPENGL_API) || !eglChooseConfig(dpy, attribs, &config, 1, &count) || count < 1) {
            why = "no EGL config for desktop OpenGL";
            continue;
        }
        EGLContext ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, nullptr);
        if (ctx == EGL_NO_CONTEXT) {
            why = "eglCreateContext failed";
            continue;
        }
        // Surfaceless (EGL_KHR_surfaceless_context): the test draws nothing, it only uses textures.
        if (!eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx)) {
            why = "eglMakeCurrent without a surface failed";
            continue;
        }
        if (deviceInteropAvailable(&why)) return "";
        eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    }
    return why;
}

} // namespace
} // namespace attn

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    // Listing (CTest discovery) must work on every machine; running needs a device and a GL context on it.
    if (!GTEST_FLAG_GET(list_tests)) {
        const std::vector<attn::Backend> b = attn::availableBackends();
        if (b.size() < 2) {
            std::printf("SKIPPED: CUDA-OpenGL interop needs a usable GPU: %s\n",
                        attn::backendDescription(attn::Backend::Cuda).c_str());
            return 77;  // CTest SKIP_RETURN_CODE
        }
        const std::string why = attn::makeGlContext();
        if (!why.empty()) {
            std::printf("SKIPPED: no OpenGL context on the CUDA device: %s\n", why.c_str());
            return 77;
        }
    }
    return RUN_ALL_TESTS();
}
