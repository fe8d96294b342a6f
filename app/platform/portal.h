// The desktop's own file chooser, through xdg-desktop-portal (Debian's libportal, no GTK): the dialog runs
// on a worker thread with its own GLib main context, so the frame loop never waits for it. When no portal
// answers (no D-Bus session bus, as under Xvfb and in CI; or no xdg-desktop-portal service), the chooser
// says so and the window keeps its in-app path field (panels/path_field.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace app {

enum class ChooserKind { Open, Save };

// The outcome of one dialog.
struct ChooserResult {
    bool unavailable = false;  // no portal answered (`message` says why); the in-app field stays the way
    std::string path;          // the chosen file; "" when the user cancelled or the portal failed
    std::string message;       // why there is no path ("" after a choice or a plain cancel)
};

class DesktopChooser {
public:
    DesktopChooser();
    ~DesktopChooser();  // cancels a running dialog and joins its thread
    DesktopChooser(const DesktopChooser&) = delete;
    DesktopChooser& operator=(const DesktopChooser&) = delete;

    // Whether a portal may answer: false once a request found none (then the window offers only the
    // in-app field), and at once when there is no D-Bus session bus to ask.
    bool mayBeAvailable() const;
    // Opens the portal's Open or Save dialog (`suggestedName`: the Save dialog's file name). False when a
    // dialog is already open or no portal can answer.
    bool start(ChooserKind kind, const std::string& title, const std::string& suggestedName);
    bool busy() const;
    // The finished dialog's outcome, once (nullopt while it runs or when none was started).
    std::optional<ChooserResult> take();

    // How long a portal has to answer its first call (the availability probe), in milliseconds: a portal
    // started by D-Bus activation answers within a second; more means none will.
    static constexpr int kProbeTimeoutMs = 3000;

private:
    struct Impl;
    std::unique_ptr<Impl> m;
};

// The session bus address the portal would be reached at, "" when there is none (DBUS_SESSION_BUS_ADDRESS,
// else $XDG_RUNTIME_DIR/bus when that socket exists). Without one nothing is asked: GLib would otherwise try
// to autolaunch a bus on the X display.
std::string sessionBusAddress();

} // namespace app
