#include "platform/portal.h"

#include <gio/gio.h>
#include <libportal/portal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

namespace app {

std::string sessionBusAddress()
{
    if (const char* a = std::getenv("DBUS_SESSION_BUS_ADDRESS"); a && *a) return a;
    if (const char* rt = std::getenv("XDG_RUNTIME_DIR"); rt && *rt) {
        std::error_code ec;
        const std::string sock = std::string(rt) + "/bus";
        if (std::filesystem::is_socket(sock, ec)) return "unix:path=" + sock;
    }
    return "";
}

namespace {

// One dialog, run to its end on the calling (worker) thread inside `ctx`.
struct Request {
    ChooserKind kind = ChooserKind::Open;
    bool done = false;
    GVariant* reply = nullptr;
    GError* error = nullptr;
};

void onFinished(GObject* source, GAsyncResult* res, gpointer data)
{
    auto* r = static_cast<Request*>(data);
    r->done = true;
    // Both finish functions return the same a{sv} ("uris", "choices", ...).
    XdpPortal* portal = XDP_PORTAL(source);
    if (r->kind == ChooserKind::Save)
        r->reply = xdp_portal_save_file_finish(portal, res, &r->error);
    else
        r->reply = xdp_portal_open_file_finish(portal, res, &r->error);
}

std::string takeMessage(GError*& e)
{
    std::string m = e && e->message ? e->message : "unknown error";
    g_clear_error(&e);
    return m;
}

// The first file of the reply's "uris" as a local path.
std::string firstPath(GVariant* reply, std::string& why)
{
    const gchar** uris = nullptr;
    if (!g_variant_lookup(reply, "uris", "^a&s", &uris) || !uris || !uris[0]) {
        g_free(uris);
        why = "the desktop's file chooser returned no file";
        return "";
    }
    GError* e = nullptr;
    gchar* p = g_filename_from_uri(uris[0], nullptr, &e);
    std::string out = p ? p : "";
    if (!p) why = "the chosen file is not a local path (" + std::string(uris[0]) + "): " + takeMessage(e);
    g_free(p);
    g_free(uris);
    return out;
}

ChooserResult runDialog(ChooserKind kind, const std::string& title, const std::string& suggested, GCancellable* cancel)
{
    ChooserResult out;
    if (sessionBusAddress().empty()) {
        out.unavailable = true;
        out.message = "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)";
        return out;
    }
    GMainContext* ctx = g_main_context_new();
    g_main_context_push_thread_default(ctx);
    GError* e = nullptr;
    GDBusConnection* bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancel, &e);
    if (!bus) {
        out.unavailable = true;
        out.message = "cannot reach the D-Bus session bus: " + takeMessage(e);
    } else {
        // The probe: the FileChooser portal's version property, with a timeout. libportal's own calls wait
        // for the user's choice, so they cannot tell "no portal" from "the user is still choosing".
        GVariant* v = g_dbus_connection_call_sync(bus, "org.freedesktop.portal.Desktop", "/org/freedesktop/portal/desktop",
                                                  "org.freedesktop.DBus.Properties", "Get",
                                                  g_variant_new("(ss)", "org.freedesktop.portal.FileChooser", "version"),
                                                  G_VARIANT_TYPE("(v)"), G_DBUS_CALL_FLAGS_NONE,
                                                  DesktopChooser::kProbeTimeoutMs, cancel, &e);
        if (!v) {
            out.unavailable = true;
            out.message = "no xdg-desktop-portal file chooser answered: " + takeMessage(e);
        } else {
            g_variant_unref(v);
            XdpPortal* portal = xdp_portal_new();
            Request req;
            req.kind = kind;
            if (kind == ChooserKind::Save)
                xdp_portal_save_file(portal, nullptr, title.c_str(), suggested.empty() ? nullptr : suggested.c_str(), nullptr,
                                     nullptr, nullptr, nullptr, nullptr, XDP_SAVE_FILE_FLAG_NONE, cancel, onFinished, &req);
            else
                xdp_portal_open_file(portal, nullptr, title.c_str(), nullptr, nullptr, nullptr, XDP_OPEN_FILE_FLAG_NONE, cancel,
                                     onFinished, &req);
            while (!req.done) g_main_context_iteration(ctx, TRUE);
            if (req.reply) {
                out.path = firstPath(req.reply, out.message);
                g_variant_unref(req.reply);
            } else if (req.error && g_error_matches(req.error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
                g_clear_error(&req.error);  // the user (or the window closing) cancelled: nothing to say
            } else {
                out.message = "the desktop's file chooser failed: " + takeMessage(req.error);
            }
            g_object_unref(portal);
        }
        g_object_unref(bus);
    }
    g_main_context_pop_thread_default(ctx);
    g_main_context_unref(ctx);
    return out;
}

} // namespace

struct DesktopChooser::Impl {
    mutable std::mutex mutex;
    std::thread worker;
    GCancellable* cancel = nullptr;
    bool running = false;
    std::optional<ChooserResult> result;
    bool unavailable = false;
};

DesktopChooser::DesktopChooser() : m(std::make_unique<Impl>()) {}

DesktopChooser::~DesktopChooser()
{
    {
        std::lock_guard lock(m->mutex);
        if (m->cancel) g_cancellable_cancel(m->cancel);
    }
    if (m->worker.joinable()) m->worker.join();
    if (m->cancel) g_object_unref(m->cancel);
}

bool DesktopChooser::mayBeAvailable() const
{
    std::lock_guard lock(m->mutex);
    return !m->unavailable && !sessionBusAddress().empty();
}

bool DesktopChooser::busy() const
{
    std::lock_guard lock(m->mutex);
    return m->running;
}

bool DesktopChooser::start(ChooserKind kind, const std::string& title, const std::string& suggestedName)
{
    if (!mayBeAvailable() || busy()) return false;
    if (m->worker.joinable()) m->worker.join();  // the previous dialog's thread, already finished
    std::lock_guard lock(m->mutex);
    if (m->cancel) g_object_unref(m->cancel);
    m->cancel = g_cancellable_new();
    m->running = true;
    m->result.reset();
    m->worker = std::thread([this, kind, title, suggestedName, cancel = m->cancel] {
        ChooserResult r = runDialog(kind, title, suggestedName, cancel);
        std::lock_guard l(m->mutex);
        m->unavailable = m->unavailable || r.unavailable;
        m->result = std::move(r);
        m->running = false;
    });
    return true;
}

std::optional<ChooserResult> DesktopChooser::take()
{
    std::lock_guard lock(m->mutex);
    std::optional<ChooserResult> r;
    r.swap(m->result);
    return r;
}

} // namespace app
