// Messages shown to the user: non-modal toasts plus a log, each mirrored to stderr as one line.
// Repeated warnings with the same key (e.g. "NaN in the scores") are batched: shown once until cleared.
// The log is process-wide on purpose, like stderr which it mirrors: messages are posted from code that has
// no AppState (the document, export actions, file readers, the command line). The UI state around it (which
// toasts a window shows, the log window's visibility) lives in AppState.
#pragma once

#include <string>
#include <vector>

namespace app {

enum class MessageLevel { Info, Warning, Error };

struct Message {
    MessageLevel level = MessageLevel::Info;
    std::string text;
    double time = 0;  // seconds since the program started, when it was posted
};

// Posts a message: log + toast + stderr ("attnscope: error: <text>").
void postMessage(MessageLevel level, const std::string& text);
inline void postInfo(const std::string& t) { postMessage(MessageLevel::Info, t); }
inline void postWarning(const std::string& t) { postMessage(MessageLevel::Warning, t); }
inline void postError(const std::string& t) { postMessage(MessageLevel::Error, t); }

// Posts `text` once for `key`; later calls with the same key are counted, not shown, until clearBatched(key).
void postWarningOnce(const std::string& key, const std::string& text);
void clearBatched(const std::string& key);

// The whole log, oldest first (bounded: the oldest entries are dropped past kMaxLogEntries).
inline constexpr std::size_t kMaxLogEntries = 500;
const std::vector<Message>& messageLog();
// Messages still shown as toasts at `now` (each stays kToastSeconds).
inline constexpr double kToastSeconds = 6.0;
std::vector<Message> activeToasts(double now);

// The clock messages are stamped with (set by the frame loop; 0 in tests that do not set it).
void setMessageClock(double now);

} // namespace app
