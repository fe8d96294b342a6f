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
std::vector<std::string> g_dropped;
std::string g_glfwError;
bool g_reportGlfwErrors = false;  // during init the error goes into init's own one-line message instead

void onGlfwError(int code, const char* text)
{
    g_glfwError = text ? text : "unknown";
    if (g_reportGlfwErrors) std::fprintf(stderr, "attnscope: warning: GLFW error %d: %s\n", code, g_glfwError.c_str());
}

void onDrop(GLFWwindow*, int count, const char** paths)
{
    for (int i = 0; i < count; ++i) g_dropped.emplace_back(paths[i]);
}
} // namespace

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
    glfwSetDropCallback(m_window, onDrop);

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

std::vector<std::string> Platform::takeDroppedFiles()
{
    std::vector<std::string> out;
    out.swap(g_dropped);
    return out;
}

} // namespace app
