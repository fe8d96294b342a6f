// Session files (JSON, format documented in docs/session-format.md) and result JSON.
#pragma once

#include "attnscope/status.h"
#include "attnscope/types.h"

#include <string>
#include <string_view>
#include <vector>

namespace attn {

inline constexpr int kSessionFormatVersion = 1;
// Session files larger than this are refused before parsing (a 4096×4096 float matrix in JSON is ~200 MB).
inline constexpr std::size_t kMaxSessionFileBytes = std::size_t(512) << 20;

// A session: what a user edits and saves. The backend is not part of it.
struct Session {
    std::string name;                      // optional display name
    std::string description;               // optional free text shown with presets
    std::vector<std::string> queryTokens;  // optional labels, T of them (empty = none)
    std::vector<std::string> keyTokens;    // optional labels, S of them (same as queryTokens in self mode)
    AttentionInput input;
    AttentionConfig config;                // backend/cpuPath/memoryBudget are not stored
    std::string viewJson = "{}";           // the "view" object (UI settings), kept verbatim as JSON text
};

// Parses a session from JSON text. `source` names the file in messages. Errors (ParseError, Unsupported,
// InvalidArgument) name the field, e.g. "s.json: Wq: expected an array of 4 rows, got 3". Values are
// checked to be finite numbers; shapes are checked by attn::validate (called here too).
Expected<Session> parseSession(std::string_view json, std::string_view source = "session");
Expected<Session> loadSession(const std::string& path);

// Serialises a session (pretty JSON, format version kSessionFormatVersion). Round-trips through parseSession.
std::string sessionToJson(const Session& s);
// Writes atomically (temporary file in the same folder, then rename): a failure leaves no partial file.
Status saveSession(const std::string& path, const Session& s);

// The result of `attnscope compute` as JSON (see docs/session-format.md, "Result files").
std::string resultToJson(const AttentionResult& r);

// File helpers shared by every reader and writer of the project.
Expected<std::string> readFile(const std::string& path, std::size_t maxBytes);
Status writeFileAtomic(const std::string& path, std::string_view bytes);

} // namespace attn
