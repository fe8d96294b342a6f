// The platform layer: a GLFW window with an OpenGL 3.3 core context (glad loader), and ImGui's GLFW and
// OpenGL3 backends (from Debian's libimgui). Nothing here knows about attention or panels.
//
// Off screen (PlatformOptions::offscreen): no display and no window. An OpenGL 3.3 core context from EGL (libEGL,
// loaded when asked for, so that the window's own dependencies do not change) renders into a framebuffer object of
// the window's size; ImGui runs with its OpenGL3 backend alone, no input, the clock taken here. It lets the
// screenshots and `bench --gui` run where there is no X server: a GPU machine's EGL device (so that the heatmaps
// come from device memory there through the CUDA-OpenGL interop, as in a window), or Mesa's surfaceless platform.
#pragma once

#include <attnscope/status.h>

#include <string>
#include <vector>

struct GLFWwindow;

namespace app {

struct PlatformOptions {
    int width = 1280;   // window size in screen coordinates
    int height = 800;
    std::string title = "attnscope";
    bool vsync = true;  // off for benchmarks
    bool offscreen = false;  // no window: an EGL context and a framebuffer object (see above)
};

// Files dropped on the window together, and where (window coordinates, as ImGui's mouse position).
struct FileDrop {
    std::vector<std::string> paths;
    double x = -1, y = -1;
};

class Platform {
public:
    Platform() = default;
    Platform(const Platform&) = delete;
    Platform& operator=(const Platform&) = delete;
    ~Platform();

    // Creates the window, the GL context and the ImGui context with both backends. Errors (Unavailable):
    // no display, no OpenGL 3.3, loader failure; off screen: no libEGL, no EGL display with an OpenGL 3.3
    // context, an incomplete framebuffer. The message says which.
    attn::Status init(const PlatformOptions& opt);
    void shutdown();

    bool shouldClose() const;
    void requestClose();
    void cancelClose();  // the close button was pressed, but the app asks first
    // Processes events: waits up to `timeoutSeconds` for one (0 = poll and return at once).
    void pollEvents(double timeoutSeconds);
    // Backends' NewFrame + ImGui::NewFrame. screenshot: the pointer is treated as absent and the clock runs at
    // a fixed 60 Hz (screenshots must depend neither on where the X server left the pointer nor on speed).
    void beginFrame(bool screenshot = false);
    void renderFrame();       // ImGui::Render, clear, draw (leaves the picture in the back buffer)
    void swapBuffers();
    void framebufferSize(int& w, int& h) const;
    // Files dropped on the window since the last call (GLFW's drop callback), oldest first.
    std::vector<FileDrop> takeDroppedFiles();
    GLFWwindow* window() const { return m_window; }  // null off screen
    bool offscreen() const { return m_egl != nullptr; }
    // Off screen: what EGL gave ("EGL 1.5 (NVIDIA), device platform"); "" with a window.
    const std::string& offscreenDescription() const { return m_offscreenWhat; }

private:
    struct Egl;  // the loaded libEGL, its display and context (platform.cpp)
    static void onDrop(GLFWwindow* w, int count, const char** paths);
    attn::Status initOffscreen(const PlatformOptions& opt);
    attn::Status initImGui();

    GLFWwindow* m_window = nullptr;
    std::vector<FileDrop> m_drops;
    bool m_imguiReady = false;
    bool m_glfwReady = false;
    Egl* m_egl = nullptr;
    std::string m_offscreenWhat;
    unsigned m_fbo = 0, m_colour = 0;  // off screen: the framebuffer object drawn into, and its colour buffer
    int m_width = 0, m_height = 0;     // off screen: its size
    double m_lastFrame = 0;            // off screen: the clock at the last frame (seconds)
    bool m_closeRequested = false;     // off screen: requestClose()
};

} // namespace app
