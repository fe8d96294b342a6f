#include "platform/platform.h"

#include "panels/glyph_atlas.h"

#include <glad/gl.h>
// glad first: it provides the GL declarations; GLFW must not include its own GL header.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

// EGL's types and constants only: libEGL itself is loaded by dlopen when a context off screen is asked for.
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <dlfcn.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace app {
namespace {
// GLFW's error callback is process-wide and has no user pointer (errors come before any window exists), so
// its last text is the one state kept outside a Platform; it is only read and written on the main thread.
std::string g_glfwError;
bool g_reportGlfwErrors = false;  // during init the error goes into init's own one-line message instead

void onGlfwError(int code, const char* text)
{
    g_glfwError = text ? text : "unknown";
    if (g_reportGlfwErrors) std::fprintf(stderr, "attnscope: warning: GLFW error %d: %s\n", code, g_glfwError.c_str());
}

// glad's loader takes a plain function; off screen it asks EGL (one context per process, so one pointer).
PFNEGLGETPROCADDRESSPROC g_eglGetProcAddress = nullptr;
GLADapiproc loadThroughEgl(const char* name) { return reinterpret_cast<GLADapiproc>(g_eglGetProcAddress(name)); }

double secondsNow()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool hasExtension(const char* list, const char* name)
{
    if (!list) return false;
    const std::size_t n = std::strlen(name);
    for (const char* p = list; (p = std::strstr(p, name)) != nullptr; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

} // namespace

struct Platform::Egl {
    void* lib = nullptr;
    PFNEGLGETDISPLAYPROC getDisplay = nullptr;
    PFNEGLINITIALIZEPROC initialize = nullptr;
    PFNEGLTERMINATEPROC terminate = nullptr;
    PFNEGLBINDAPIPROC bindApi = nullptr;
    PFNEGLCHOOSECONFIGPROC chooseConfig = nullptr;
    PFNEGLCREATECONTEXTPROC createContext = nullptr;
    PFNEGLDESTROYCONTEXTPROC destroyContext = nullptr;
    PFNEGLMAKECURRENTPROC makeCurrent = nullptr;
    PFNEGLQUERYSTRINGPROC queryString = nullptr;
    PFNEGLGETERRORPROC getError = nullptr;
    EGLDisplay display = EGL_NO_DISPLAY;
    EGLContext context = EGL_NO_CONTEXT;
};

// The drop lands where the pointer is: GLFW's X11 and Wayland backends move the cursor position to the
// drop point (XdndPosition / wl_data_device motion) before they call this.
void Platform::onDrop(GLFWwindow* w, int count, const char** paths)
{
    auto* self = static_cast<Platform*>(glfwGetWindowUserPointer(w));
    if (!self || count <= 0) return;
    FileDrop d;
    glfwGetCursorPos(w, &d.x, &d.y);
    for (int i = 0; i < count; ++i) d.paths.emplace_back(paths[i]);
    self->m_drops.push_back(std::move(d));
}

Platform::~Platform() { shutdown(); }

attn::Status Platform::init(const PlatformOptions& opt)
{
    if (opt.offscreen) {
        attn::Status st = initOffscreen(opt);
        return st.ok() ? initImGui() : st;
    }
    glfwSetErrorCallback(onGlfwError);
    if (!glfwInit())
        return attn::makeError(attn::StatusCode::Unavailable,
                               "cannot open a window: GLFW failed to initialise (" + g_glfwError +
                                   "); is DISPLAY set? Without a display, run under xvfb-run -a, or render off "
                                   "screen with --offscreen");
    m_glfwReady = true;
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    m_window = glfwCreateWindow(opt.width, opt.height, opt.title.c_str(), nullptr, nullptr);
    if (!m_window)
        return attn::makeError(attn::StatusCode::Unavailable,
                               "cannot create an OpenGL 3.3 core window (" + g_glfwError + ")");
    glfwMakeContextCurrent(m_window);
    if (gladLoadGL(glfwGetProcAddress) == 0)
        return attn::makeError(attn::StatusCode::Unavailable, "cannot load the OpenGL 3.3 functions (glad)");
    glfwSwapInterval(opt.vsync ? 1 : 0);
    glfwSetWindowUserPointer(m_window, this);  // ImGui's GLFW backend (1.86) does not use it
    glfwSetDropCallback(m_window, &Platform::onDrop);
    attn::Status st = initImGui();
    if (st.ok()) g_reportGlfwErrors = true;
    return st;
}

attn::Status Platform::initImGui()
{
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    m_imguiReady = true;
    if (m_window && !ImGui_ImplGlfw_InitForOpenGL(m_window, true))
        return attn::makeError(attn::StatusCode::Unavailable, "cannot start ImGui's GLFW backend");
    if (!ImGui_ImplOpenGL3_Init("#version 330 core"))
        return attn::makeError(attn::StatusCode::Unavailable, "cannot start ImGui's OpenGL3 backend");
    if (!m_window) {
        ImGuiIO& io = ImGui::GetIO();
        io.BackendPlatformName = "attnscope offscreen (EGL)";
        // ImGui 1.86 wants every key of its navigation mapped to a slot of KeysDown, as a platform backend does;
        // off screen no key is ever down.
        for (int k = 0; k < ImGuiKey_COUNT; ++k) io.KeyMap[k] = k;
    }
    m_lastFrame = secondsNow();
    return {};
}

// The displays tried, in order: every EGL device (EGL_EXT_platform_device: on a GPU machine its first is the GPU,
// where CUDA's device 0 is), Mesa's surfaceless platform, then the default display. The first on which an
// OpenGL 3.3 core context can be made current without a surface is used.
attn::Status Platform::initOffscreen(const PlatformOptions& opt)
{
    auto fail = [](const std::string& what) {
        return attn::makeError(attn::StatusCode::Unavailable, "cannot render off screen: " + what);
    };
    if (opt.width < 1 || opt.height < 1)
        return fail("the size must be positive, got " + std::to_string(opt.width) + "x" + std::to_string(opt.height));
    m_egl = new Egl();
    Egl& e = *m_egl;
    e.lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!e.lib) return fail(std::string("libEGL.so.1 is not installed (") + dlerror() + "); install libegl1");
    bool all = true;
    auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(e.lib, name));
        all = all && fn != nullptr;
    };
    sym(g_eglGetProcAddress, "eglGetProcAddress");
    sym(e.getDisplay, "eglGetDisplay");
    sym(e.initialize, "eglInitialize");
    sym(e.terminate, "eglTerminate");
    sym(e.bindApi, "eglBindAPI");
    sym(e.chooseConfig, "eglChooseConfig");
    sym(e.createContext, "eglCreateContext");
    sym(e.destroyContext, "eglDestroyContext");
    sym(e.makeCurrent, "eglMakeCurrent");
    sym(e.queryString, "eglQueryString");
    sym(e.getError, "eglGetError");
    if (!all) return fail("libEGL.so.1 lacks the EGL 1.4 functions");

    struct Candidate {
        EGLDisplay display;
        std::string what;
    };
    std::vector<Candidate> candidates;
    const char* clientExt = e.queryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    auto platformDisplay = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(g_eglGetProcAddress("eglGetPlatformDisplayEXT"));
    if (platformDisplay && hasExtension(clientExt, "EGL_EXT_platform_device")) {
        auto queryDevices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(g_eglGetProcAddress("eglQueryDevicesEXT"));
        EGLDeviceEXT devices[16];
        EGLint n = 0;
        if (queryDevices && queryDevices(16, devices, &n))
            for (EGLint i = 0; i < n; ++i)
                candidates.push_back({platformDisplay(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr), "EGL device " + std::to_string(i)});
    }
    if (platformDisplay && hasExtension(clientExt, "EGL_MESA_platform_surfaceless"))
        candidates.push_back({platformDisplay(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr), "Mesa surfaceless"});
    candidates.push_back({e.getDisplay(EGL_DEFAULT_DISPLAY), "default display"});

    std::string why;
    for (const Candidate& c : candidates) {
        if (c.display == EGL_NO_DISPLAY) continue;
        EGLint major = 0, minor = 0;
        if (!e.initialize(c.display, &major, &minor)) {
            why += "; " + c.what + ": eglInitialize failed";
            continue;
        }
        EGLConfig config = nullptr;
        EGLint count = 0;
        // Off screen needs no surface, but the default surface type asks for windows: pbuffers first, then any.
        const EGLint pbuffer[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
        const EGLint anySurface[] = {EGL_SURFACE_TYPE, 0, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
        const EGLint context[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 3, EGL_CONTEXT_OPENGL_PROFILE_MASK,
                                  EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
        EGLContext ctx = EGL_NO_CONTEXT;
        if (e.bindApi(EGL_OPENGL_API) &&
            ((e.chooseConfig(c.display, pbuffer, &config, 1, &count) && count > 0) ||
             (e.chooseConfig(c.display, anySurface, &config, 1, &count) && count > 0)))
            ctx = e.createContext(c.display, config, EGL_NO_CONTEXT, context);
        if (ctx == EGL_NO_CONTEXT) {
            why += "; " + c.what + ": no OpenGL 3.3 core context";
            e.terminate(c.display);
            continue;
        }
        if (!e.makeCurrent(c.display, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx)) {
            why += "; " + c.what + ": cannot make a context current without a surface";
            e.destroyContext(c.display, ctx);
            e.terminate(c.display);
            continue;
        }
        e.display = c.display;
        e.context = ctx;
        const char* vendor = e.queryString(c.display, EGL_VENDOR);
        m_offscreenWhat = "EGL " + std::to_string(major) + "." + std::to_string(minor) + " (" + (vendor ? vendor : "?") + "), " + c.what;
        break;
    }
    if (e.context == EGL_NO_CONTEXT)
        return fail("no EGL display gives an OpenGL 3.3 core context without a surface" + (why.empty() ? std::string() : " (" + why.substr(2) + ")"));
    const int version = gladLoadGL(loadThroughEgl);
    if (version == 0 || GLAD_VERSION_MAJOR(version) * 10 + GLAD_VERSION_MINOR(version) < 33)
        return fail("cannot load the OpenGL 3.3 functions through EGL (glad)");

    GLint maxSize = 0;
    glGetIntegerv(GL_MAX_RENDERBUFFER_SIZE, &maxSize);
    if (opt.width > maxSize || opt.height > maxSize)
        return fail("the size " + std::to_string(opt.width) + "x" + std::to_string(opt.height) + " is over this OpenGL's largest framebuffer, " +
                    std::to_string(maxSize) + "x" + std::to_string(maxSize));
    m_width = opt.width;
    m_height = opt.height;
    glGenRenderbuffers(1, &m_colour);
    glBindRenderbuffer(GL_RENDERBUFFER, m_colour);
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, m_width, m_height);
    glGenFramebuffers(1, &m_fbo);
    glBindFramebuffer(GL_FRAMEBUFFER, m_fbo);  // stays bound: every frame draws into it
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, m_colour);
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
        return fail("the framebuffer object of " + std::to_string(m_width) + "x" + std::to_string(m_height) + " is incomplete");
    if (const GLubyte* renderer = glGetString(GL_RENDERER)) m_offscreenWhat += ", " + std::string(reinterpret_cast<const char*>(renderer));
    return {};
}

void Platform::shutdown()
{
    if (m_imguiReady) {
        if (ImGui::GetIO().BackendRendererUserData) ImGui_ImplOpenGL3_Shutdown();
        if (ImGui::GetIO().BackendPlatformUserData) ImGui_ImplGlfw_Shutdown();
        ImGui::DestroyContext();
        m_imguiReady = false;
    }
    if (m_egl) {
        Egl& e = *m_egl;
        if (e.context != EGL_NO_CONTEXT) {
            if (m_fbo) glDeleteFramebuffers(1, &m_fbo);
            if (m_colour) glDeleteRenderbuffers(1, &m_colour);
            e.makeCurrent(e.display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
            e.destroyContext(e.display, e.context);
        }
        if (e.display != EGL_NO_DISPLAY) e.terminate(e.display);
        if (e.lib) dlclose(e.lib);
        delete m_egl;
        m_egl = nullptr;
        m_fbo = m_colour = 0;
        g_eglGetProcAddress = nullptr;
    }
    if (m_window) {
        glfwDestroyWindow(m_window);
        m_window = nullptr;
    }
    if (m_glfwReady) {
        glfwTerminate();
        m_glfwReady = false;
    }
}

bool Platform::shouldClose() const { return m_window ? glfwWindowShouldClose(m_window) != 0 : m_closeRequested; }
void Platform::requestClose()
{
    if (m_window) glfwSetWindowShouldClose(m_window, GLFW_TRUE);
    m_closeRequested = true;
}
void Platform::cancelClose()
{
    if (m_window) glfwSetWindowShouldClose(m_window, GLFW_FALSE);
    m_closeRequested = false;
}

void Platform::pollEvents(double timeoutSeconds)
{
    if (!m_window) return;  // off screen: no events
    if (timeoutSeconds > 0) glfwWaitEventsTimeout(timeoutSeconds);
    else glfwPollEvents();
}

void Platform::beginFrame(bool screenshot)
{
    ImGui_ImplOpenGL3_NewFrame();  // its device objects, the font texture among them, exist from here
    // Characters the last frame asked for (panels/glyph_atlas.h): a new atlas, its texture uploaded again.
    if (rebuildGlyphAtlasIfNeeded()) {
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
    }
    if (m_window) {
        ImGui_ImplGlfw_NewFrame();
    } else {  // off screen: what the GLFW backend would set, for a window of the framebuffer's size and no pointer
        ImGuiIO& io = ImGui::GetIO();
        io.DisplaySize = ImVec2(static_cast<float>(m_width), static_cast<float>(m_height));
        io.DisplayFramebufferScale = ImVec2(1.0f, 1.0f);
        const double now = secondsNow();
        io.DeltaTime = static_cast<float>(std::max(now - m_lastFrame, 1e-4));
        m_lastFrame = now;
        io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    }
    if (screenshot) {
        // Screenshot runs: no mouse, and a fixed 60 Hz clock, so that what fades in over time (a modal's
        // dimmed background, toasts) looks the same however fast the machine renders the frames.
        ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
        ImGui::GetIO().DeltaTime = 1.0f / 60.0f;
    }
    ImGui::NewFrame();
}

void Platform::renderFrame()
{
    ImGui::Render();
    int w = 0, h = 0;
    framebufferSize(w, h);
    glViewport(0, 0, w, h);
    glClearColor(0.10f, 0.10f, 0.12f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void Platform::swapBuffers()
{
    if (m_window) glfwSwapBuffers(m_window);
    else glFlush();  // off screen: the picture stays in the framebuffer object
}

void Platform::framebufferSize(int& w, int& h) const
{
    if (m_window) {
        glfwGetFramebufferSize(m_window, &w, &h);
    } else {
        w = m_width;
        h = m_height;
    }
}

std::vector<FileDrop> Platform::takeDroppedFiles()
{
    std::vector<FileDrop> out;
    out.swap(m_drops);
    return out;
}

} // namespace app
