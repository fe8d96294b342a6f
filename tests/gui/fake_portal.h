// A stand-in for xdg-desktop-portal's FileChooser on the D-Bus session bus, for the tests of the desktop
// chooser (test_portal.cpp) and of the window's Browse button (fake_portal.cpp, e2e_portal.py).
#pragma once

#include "platform/portal.h"

#include <gio/gio.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace attnscope_test {

inline constexpr const char* kIntrospection = R"(<node>
  <interface name="org.freedesktop.portal.FileChooser">
    <method name="OpenFile">
      <arg type="s" name="parent_window" direction="in"/><arg type="s" name="title" direction="in"/>
      <arg type="a{sv}" name="options" direction="in"/><arg type="o" name="handle" direction="out"/>
    </method>
    <method name="SaveFile">
      <arg type="s" name="parent_window" direction="in"/><arg type="s" name="title" direction="in"/>
      <arg type="a{sv}" name="options" direction="in"/><arg type="o" name="handle" direction="out"/>
    </method>
    <property name="version" type="u" access="read"/>
  </interface>
</node>)";

// A stand-in for xdg-desktop-portal's FileChooser: answers each call at once with `response` (0 = chosen,
// 1 = cancelled) and the file `uri`, as the Response signal of the request object the caller named.
class FakePortal {
public:
    static constexpr unsigned kNeverAnswer = 99;  // `response` for a dialog that stays open

    explicit FakePortal(std::string uri, unsigned response = 0) : m_uri(std::move(uri)), m_response(response)
    {
        m_thread = std::thread([this] { run(); });
        std::unique_lock lock(m_mutex);
        while (!m_ready) {
            lock.unlock();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            lock.lock();
        }
    }
    ~FakePortal()
    {
        m_stop = true;
        if (m_ctx) g_main_context_wakeup(m_ctx);
        m_thread.join();
    }
    bool owned() const { return m_owned; }
    std::string lastMethod()
    {
        std::lock_guard l(m_mutex);
        return m_method;
    }
    std::string lastTitle()
    {
        std::lock_guard l(m_mutex);
        return m_title;
    }
    std::string lastName()
    {
        std::lock_guard l(m_mutex);
        return m_currentName;
    }

private:
    static void onCall(GDBusConnection* conn, const gchar* sender, const gchar*, const gchar*, const gchar* method,
                       GVariant* params, GDBusMethodInvocation* inv, gpointer data)
    {
        auto* self = static_cast<FakePortal*>(data);
        const gchar *parent = nullptr, *title = nullptr;
        GVariant* options = nullptr;
        g_variant_get(params, "(&s&s@a{sv})", &parent, &title, &options);
        const gchar* token = "t";
        g_variant_lookup(options, "handle_token", "&s", &token);
        const gchar* name = "";
        g_variant_lookup(options, "current_name", "&s", &name);
        {
            std::lock_guard l(self->m_mutex);
            self->m_method = method;
            self->m_title = title;
            self->m_currentName = name;
        }
        // The request object's path, as the portal documentation defines it from the caller and its token.
        std::string who = sender + 1;  // ":1.42" → "1_42"
        for (char& c : who)
            if (c == '.') c = '_';
        const std::string handle = std::string("/org/freedesktop/portal/desktop/request/") + who + "/" + token;
        g_dbus_method_invocation_return_value(inv, g_variant_new("(o)", handle.c_str()));
        if (self->m_response == kNeverAnswer) {  // a dialog the user keeps open
            g_variant_unref(options);
            return;
        }
        GVariantBuilder results;
        g_variant_builder_init(&results, G_VARIANT_TYPE("a{sv}"));
        if (self->m_response == 0) {
            const gchar* uris[] = {self->m_uri.c_str(), nullptr};
            g_variant_builder_add(&results, "{sv}", "uris", g_variant_new_strv(uris, -1));
        }
        g_dbus_connection_emit_signal(conn, sender, handle.c_str(), "org.freedesktop.portal.Request", "Response",
                                      g_variant_new("(u@a{sv})", self->m_response, g_variant_builder_end(&results)), nullptr);
        g_variant_unref(options);
    }
    static GVariant* onGet(GDBusConnection*, const gchar*, const gchar*, const gchar*, const gchar*, GError**, gpointer)
    {
        return g_variant_new_uint32(3);
    }

    void run()
    {
        m_ctx = g_main_context_new();
        g_main_context_push_thread_default(m_ctx);
        GError* e = nullptr;
        // A connection of its own: the chooser under test uses the process's shared session connection.
        GDBusConnection* conn = g_dbus_connection_new_for_address_sync(
            app::sessionBusAddress().c_str(),
            GDBusConnectionFlags(G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION),
            nullptr, nullptr, &e);
        GDBusNodeInfo* info = g_dbus_node_info_new_for_xml(kIntrospection, nullptr);
        if (conn) {
            static const GDBusInterfaceVTable vtable = {onCall, onGet, nullptr, {}};
            g_dbus_connection_register_object(conn, "/org/freedesktop/portal/desktop", info->interfaces[0], &vtable, this,
                                              nullptr, nullptr);
            GVariant* r = g_dbus_connection_call_sync(conn, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                      "org.freedesktop.DBus", "RequestName",
                                                      g_variant_new("(su)", "org.freedesktop.portal.Desktop", 4u /* do not queue */),
                                                      G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NONE, -1, nullptr, nullptr);
            if (r) {
                guint32 code = 0;
                g_variant_get(r, "(u)", &code);
                m_owned = code == 1;  // primary owner
                g_variant_unref(r);
            }
        }
        g_clear_error(&e);
        {
            std::lock_guard l(m_mutex);
            m_ready = true;
        }
        while (!m_stop) g_main_context_iteration(m_ctx, TRUE);
        if (conn) {
            g_dbus_connection_close_sync(conn, nullptr, nullptr);
            g_object_unref(conn);
        }
        g_dbus_node_info_unref(info);
        g_main_context_pop_thread_default(m_ctx);
        g_main_context_unref(m_ctx);
    }

    std::string m_uri;
    unsigned m_response = 0;
    std::thread m_thread;
    std::mutex m_mutex;
    bool m_ready = false;
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_owned{false};
    GMainContext* m_ctx = nullptr;
    std::string m_method, m_title, m_currentName;
};

} // namespace attnscope_test
