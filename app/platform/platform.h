// The platform layer: a GLFW window with an OpenGL 3.3 core context (glad loader), and ImGui's GLFW and
// OpenGL3 backends (from Debian's libimgui). Nothing here knows about attention or panels.
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
    // no display, no OpenGL 3.3, loader failure; the message says which.
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
    GLFWwindow* window() const { return m_window; }

private:
    static void onDrop(GLFWwindow* w, int count, const char** paths);

    GLFWwindow* m_window = nullptr;
    std::vector<FileDrop> m_drops;
    bool m_imguiReady = false;
    bool m_glfwReady = false;
};

} // namespace app
