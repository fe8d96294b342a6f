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
// readFile refuses what is not a regular file (a folder, a named pipe, a device) without blocking on it,
// and files over maxBytes. Errors: IoError ("p: cannot open: No such file or directory", "p: is a named
// pipe, expected a regular file", "p: file is N bytes, more than the limit of M").
Expected<std::string> readFile(const std::string& path, std::size_t maxBytes);
// Writes `bytes` to a temporary file beside `path` ("<path>.tmp-<pid>"), syncs it and renames it into place:
// a failure or a kill never leaves a partial `path`. Temporaries left by a killed earlier run (their process
// is gone) are removed first. Errors: IoError naming the path and the system's reason.
Status writeFileAtomic(const std::string& path, std::string_view bytes);
// Removes a file or a folder with everything in it (best effort; no error when it is not there).
void removeTree(const std::string& path);
// Removes "<path>.tmp-<pid>" and "<path>.tmp-<pid>-old" entries (files or folders) beside `path` whose process no longer exists.
void removeStaleTemporaries(const std::string& path);

// ---- Limits for every JSON document the project reads (sessions, safetensors headers, model files) ----
// Deeper nesting is refused before parsing: nothing in a session nests more than 4 levels, and a
// recursive walk of a 100 000-level document overflows the stack (issue 13, finding 1).
inline constexpr int kMaxJsonDepth = 64;
// Checks the nesting depth of JSON text with one linear scan (no recursion, strings and escapes skipped).
// Error (ParseError): "<source>: <field>: nested deeper than 64 levels (the limit)", where field is the
// top-level key the deep value sits under (or "document" when it is not inside an object).
Status checkJsonDepth(std::string_view text, int maxDepth, std::string_view source);
// Text echoed in a message: at most maxBytes bytes (cut at a UTF-8 boundary) and, when cut, "…" plus the
// full length, so a 10 MB value never becomes a 10 MB line on stderr.
std::string clipForMessage(std::string_view text, std::size_t maxBytes = 48);

} // namespace attn
