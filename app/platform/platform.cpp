#include "platform/platform.h"

#include <glad/gl.h>
// glad first: it provides the GL declarations; GLFW must not include its own GL header.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <cfloat>
#include <cstdio>

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

} // namespace

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
    glfwSetErrorCallback(onGlfwError);
    if (!glfwInit())
        return attn::makeError(attn::StatusCode::Unavailable,
                               "cannot open a window: GLFW failed to initialise (" + g_glfwError +
                                   "); is DISPLAY set? Without a display, run under xvfb-run -a");
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

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    if (!ImGui_ImplGlfw_InitForOpenGL(m_window, true) || !ImGui_ImplOpenGL3_Init("#version 330 core"))
        return attn::makeError(attn::StatusCode::Unavailable, "cannot start ImGui's GLFW/OpenGL3 backends");
    m_imguiReady = true;
    g_reportGlfwErrors = true;
    return {};
}

void Platform::shutdown()
{
    if (m_imguiReady) {
        ImGui_ImplOpenGL3_Shutdown();
        ImGui_ImplGlfw_Shutdown();
        ImGui::DestroyContext();
        m_imguiReady = false;
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

bool Platform::shouldClose() const { return glfwWindowShouldClose(m_window) != 0; }
void Platform::requestClose() { glfwSetWindowShouldClose(m_window, GLFW_TRUE); }
void Platform::cancelClose() { glfwSetWindowShouldClose(m_window, GLFW_FALSE); }

void Platform::pollEvents(double timeoutSeconds)
{
    if (timeoutSeconds > 0) glfwWaitEventsTimeout(timeoutSeconds);
    else glfwPollEvents();
}

void Platform::beginFrame(bool screenshot)
{
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
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
    glfwGetFramebufferSize(m_window, &w, &h);
    glViewport(0, 0, w, h);
    glClearColor(0.10f, 0.10f, 0.12f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void Platform::swapBuffers() { glfwSwapBuffers(m_window); }

void Platform::framebufferSize(int& w, int& h) const { glfwGetFramebufferSize(m_window, &w, &h); }

std::vector<FileDrop> Platform::takeDroppedFiles()
{
    std::vector<FileDrop> out;
    out.swap(m_drops);
    return out;
}

} // namespace app
