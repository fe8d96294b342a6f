// fake_portal URI READY_FILE: serves the stand-in FileChooser portal (fake_portal.h) on the session bus,
// answering every OpenFile / SaveFile with URI; writes READY_FILE once it owns the portal's name, and runs
// until SIGTERM. Used by e2e_portal.py (run under dbus-run-session) to click the window's Browse button.
#include "fake_portal.h"

#include <csignal>
#include <cstdio>
#include <fstream>

namespace {
volatile std::sig_atomic_t g_stop = 0;
void onTerm(int) { g_stop = 1; }
} // namespace

int main(int argc, char** argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: fake_portal URI READY_FILE\n");
        return 2;
    }
    std::signal(SIGTERM, onTerm);
    std::signal(SIGINT, onTerm);
    attnscope_test::FakePortal portal(argv[1]);
    if (!portal.owned()) {
        std::fprintf(stderr, "fake_portal: cannot own org.freedesktop.portal.Desktop on %s\n", app::sessionBusAddress().c_str());
        return 1;
    }
    std::ofstream(argv[2]) << "ready\n";
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::printf("fake_portal: last call %s '%s'\n", portal.lastMethod().c_str(), portal.lastTitle().c_str());
    return 0;
}
