#include "messages.h"

#include <cstdio>
#include <map>

namespace app {
namespace {
std::vector<Message> g_log;
std::map<std::string, int> g_batched;  // key → times posted since the last clear
double g_now = 0;

const char* levelName(MessageLevel l)
{
    switch (l) {
    case MessageLevel::Info: return "info";
    case MessageLevel::Warning: return "warning";
    case MessageLevel::Error: return "error";
    }
    return "?";
}
} // namespace

void setMessageClock(double now) { g_now = now; }

void postMessage(MessageLevel level, const std::string& text)
{
    std::fprintf(stderr, "attnscope: %s: %s\n", levelName(level), text.c_str());
    g_log.push_back({level, text, g_now});
    if (g_log.size() > kMaxLogEntries) g_log.erase(g_log.begin(), g_log.begin() + (g_log.size() - kMaxLogEntries));
}

void postWarningOnce(const std::string& key, const std::string& text)
{
    if (g_batched[key]++ == 0) postWarning(text);
}

void clearBatched(const std::string& key)
{
    auto it = g_batched.find(key);
    if (it == g_batched.end()) return;
    if (it->second > 1)
        std::fprintf(stderr, "attnscope: info: (the warning above repeated %d times)\n", it->second - 1);
    g_batched.erase(it);
}

const std::vector<Message>& messageLog() { return g_log; }

std::vector<Message> activeToasts(double now)
{
    std::vector<Message> out;
    for (const Message& m : g_log)
        if (now - m.time < kToastSeconds && m.level != MessageLevel::Info) out.push_back(m);  // info: log only
    // At most the 4 newest: older ones are still in the log.
    if (out.size() > 4) out.erase(out.begin(), out.end() - 4);
    return out;
}

} // namespace app
