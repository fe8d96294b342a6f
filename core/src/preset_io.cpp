// Session files: JSON <-> Session, documented in docs/session-format.md. Also result JSON and file helpers.
//
// [SECTION] File helpers
// [SECTION] Reading JSON values with field-named errors
// [SECTION] parseSession
// [SECTION] Writing
#include "attnscope/attention.h"
#include "attnscope/matrix_names.h"
#include "attnscope/preset_io.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace attn {
using json = nlohmann::json;

// -----------------------------------------------------------------------------------------------------
// [SECTION] File helpers
// -----------------------------------------------------------------------------------------------------

namespace {

// The session file key of an input array (matrix_names.h).
const char* key(InputMatrix m) { return matrixNames(m).key; }

const char* fileKind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a named pipe";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file";
}

// Whether process `pid` still exists (EPERM: it exists but belongs to someone else).
bool processAlive(long pid) { return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno == EPERM); }

} // namespace

void removeTree(const std::string& path)
{
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        if (DIR* d = ::opendir(path.c_str())) {
            while (const dirent* e = ::readdir(d)) {
                const std::string n = e->d_name;
                if (n != "." && n != "..") removeTree(path + "/" + n);
            }
            ::closedir(d);
        }
        ::rmdir(path.c_str());
    } else {
        ::unlink(path.c_str());
    }
}

Expected<std::string> readFile(const std::string& path, std::size_t maxBytes)
{
    // O_NONBLOCK: opening a named pipe must not wait for a writer; fstat on the open descriptor then tells
    // what it is, with no window between the check and the read.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return makeError(StatusCode::IoError, path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return makeError(StatusCode::IoError, path + ": cannot examine: " + why);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return makeError(StatusCode::IoError, path + ": is " + std::string(fileKind(st.st_mode)) + ", expected a regular file");
    }
    if (static_cast<std::size_t>(st.st_size) > maxBytes) {
        ::close(fd);
        return makeError(StatusCode::IoError, path + ": file is " + std::to_string(st.st_size) +
                                                  " bytes, more than the limit of " + std::to_string(maxBytes));
    }
    std::string data(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < data.size()) {
        const ssize_t r = ::read(fd, data.data() + got, data.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const std::string why = std::strerror(errno);
            ::close(fd);
            return makeError(StatusCode::IoError, path + ": read failed: " + why);
        }
        if (r == 0) break;  // the file shrank while we read it: keep what is there
        got += std::size_t(r);
    }
    ::close(fd);
    data.resize(got);
    return data;
}

void removeStaleTemporaries(const std::string& path)
{
    const std::size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
    const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp-";
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() <= prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
        std::string digits = n.substr(prefix.size());
        if (digits.size() > 4 && digits.compare(digits.size() - 4, 4, "-old") == 0) digits.resize(digits.size() - 4);
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
        if (!processAlive(std::stol(digits))) stale.push_back(dir + "/" + n);
    }
    ::closedir(d);
    for (const std::string& s : stale) removeTree(s);
}

Status writeFileAtomic(const std::string& path, std::string_view bytes)
{
    removeStaleTemporaries(path);
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return makeError(StatusCode::IoError, path + ": cannot write: " + std::strerror(errno));
    const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    const int closeErr = std::fclose(f);
    if (!wrote || !flushed || closeErr != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        return makeError(StatusCode::IoError, path + ": write failed: " + why);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        return makeError(StatusCode::IoError, path + ": cannot replace file: " + why);
    }
    return {};
}

std::string clipForMessage(std::string_view text, std::size_t maxBytes)
{
    if (text.size() <= maxBytes) return std::string(text);
    std::size_t cut = maxBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    return std::string(text.substr(0, cut)) + "…(" + std::to_string(text.size()) + " bytes)";
}

Status checkJsonDepth(std::string_view text, int maxDepth, std::string_view source)
{
    int depth = 0;
    bool inString = false;
    // The top-level key being read: the text of the last string closed at depth 1 (it becomes the key when
    // a ':' follows). Escapes are kept as written; the name is only for the message.
    std::size_t strBegin = 0;
    std::string_view lastString, topKey;
    bool topIsObject = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\') ++i;
            else if (c == '"') {
                inString = false;
                if (depth == 1) lastString = text.substr(strBegin, i - strBegin);
            }
            continue;
        }
        switch (c) {
        case '"': inString = true; strBegin = i + 1; break;
        case ':': if (depth == 1) topKey = lastString; break;
        case '{': case '[':
            if (depth == 0) topIsObject = c == '{';
            if (++depth > maxDepth) {
                const std::string field = topIsObject && !topKey.empty() ? clipForMessage(topKey) : std::string("document");
                return makeError(StatusCode::ParseError, std::string(source) + ": " + field + ": nested deeper than " +
                                                             std::to_string(maxDepth) + " levels (the limit)");
            }
            break;
        case '}': case ']': if (depth > 0) --depth; break;
        default: break;
        }
    }
    return {};
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Reading JSON values with field-named errors
// -----------------------------------------------------------------------------------------------------
namespace {

// Thrown only inside this file and always caught in parseSession: it carries the field-named message.
struct FieldError {
    std::string message;
};

[[noreturn]] void fail(const std::string& field, const std::string& what) { throw FieldError{field + ": " + what}; }

std::string typeName(const json& j)
{
    if (j.is_string()) return "string " + clipForMessage(j.dump());
    if (j.is_boolean()) return std::string("boolean ") + (j.get<bool>() ? "true" : "false");
    if (j.is_null()) return "null";
    if (j.is_array()) return "an array of " + std::to_string(j.size());
    if (j.is_object()) return "an object";
    return "number " + clipForMessage(j.dump());
}

// Numbers; also the strings "-inf"/"inf"/"nan" so that a value written by hand is reported precisely.
float readFloat(const json& j, const std::string& field)
{
    if (!j.is_number()) fail(field, "expected a number, got " + typeName(j));
    const double v = j.get<double>();
    if (!std::isfinite(v)) fail(field, "value is not finite");
    if (std::fabs(v) > double(std::numeric_limits<float>::max()))
        fail(field, "value " + j.dump() + " does not fit in float32 (|v| ≤ 3.4e38)");
    return static_cast<float>(v);
}

Matrix readMatrix(const json& j, const std::string& field)
{
    if (!j.is_array()) fail(field, "expected an array of rows (a matrix), got " + typeName(j));
    const std::size_t rows = j.size();
    if (rows == 0) return Matrix();
    if (!j[0].is_array()) fail(field + "[0]", "expected a row (an array of numbers), got " + typeName(j[0]));
    const std::size_t cols = j[0].size();
    Matrix m(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    for (std::size_t r = 0; r < rows; ++r) {
        const json& row = j[r];
        const std::string rf = field + "[" + std::to_string(r) + "]";
        if (!row.is_array()) fail(rf, "expected a row (an array of numbers), got " + typeName(row));
        if (row.size() != cols)
            fail(rf, "expected " + std::to_string(cols) + " values (as in row 0), got " + std::to_string(row.size()));
        for (std::size_t c = 0; c < cols; ++c)
            m(Eigen::Index(r), Eigen::Index(c)) = readFloat(row[c], rf + "[" + std::to_string(c) + "]");
    }
    return m;
}

Vector readVector(const json& j, const std::string& field)
{
    if (!j.is_array()) fail(field, "expected an array of numbers, got " + typeName(j));
    Vector v(static_cast<Eigen::Index>(j.size()));
    for (std::size_t i = 0; i < j.size(); ++i) v[Eigen::Index(i)] = readFloat(j[i], field + "[" + std::to_string(i) + "]");
    return v;
}

std::vector<std::string> readStrings(const json& j, const std::string& field)
{
    if (!j.is_array()) fail(field, "expected an array of strings, got " + typeName(j));
    std::vector<std::string> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
        if (!j[i].is_string()) fail(field + "[" + std::to_string(i) + "]", "expected a string, got " + typeName(j[i]));
        out.push_back(j[i].get<std::string>());
    }
    return out;
}

template <class E>
E readEnum(const json& j, const std::string& field, std::initializer_list<std::pair<const char*, E>> options)
{
    std::string allowed;
    for (auto& [name, v] : options) allowed += (allowed.empty() ? "" : ", ") + std::string("\"") + name + "\"";
    if (!j.is_string()) fail(field, "expected one of " + allowed + ", got " + typeName(j));
    const std::string s = j.get<std::string>();
    for (auto& [name, v] : options)
        if (s == name) return v;
    fail(field, "expected one of " + allowed + ", got \"" + clipForMessage(s) + "\"");
}

int readInt(const json& j, const std::string& field, long lo, long hi)
{
    if (!j.is_number_integer() && !(j.is_number_float() && std::floor(j.get<double>()) == j.get<double>()))
        fail(field, "expected an integer, got " + typeName(j));
    const double v = j.get<double>();
    if (v < double(lo) || v > double(hi))
        fail(field, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + j.dump());
    return static_cast<int>(v);
}

MaskSpec readMask(const json& j)
{
    MaskSpec m;
    if (!j.is_object()) fail("mask", "expected an object, got " + typeName(j));
    if (j.contains("causal")) {
        if (!j["causal"].is_boolean()) fail("mask.causal", "expected true or false, got " + typeName(j["causal"]));
        m.causal = j["causal"].get<bool>();
    }
    if (j.contains("key_padding") && !j["key_padding"].is_null()) {
        const json& kp = j["key_padding"];
        if (!kp.is_array()) fail("mask.key_padding", "expected an array of booleans, got " + typeName(kp));
        for (std::size_t i = 0; i < kp.size(); ++i) {
            const json& e = kp[i];
            const std::string f = "mask.key_padding[" + std::to_string(i) + "]";
            if (e.is_boolean()) m.keyPadding.push_back(e.get<bool>() ? 1 : 0);
            else if (e.is_number_integer() && (e.get<long>() == 0 || e.get<long>() == 1)) m.keyPadding.push_back(std::uint8_t(e.get<long>()));
            else fail(f, "expected true/false (or 1/0), got " + typeName(e));
        }
    }
    if (j.contains("valid_lens") && !j["valid_lens"].is_null()) {
        const json& vl = j["valid_lens"];
        constexpr long kMax = 1 << 30;
        if (vl.is_array()) {
            for (std::size_t i = 0; i < vl.size(); ++i)
                m.validLens.push_back(readInt(vl[i], "mask.valid_lens[" + std::to_string(i) + "]", 0, kMax));
        } else {
            m.validLens.push_back(readInt(vl, "mask.valid_lens", 0, kMax));
        }
    }
    if (j.contains("custom") && !j["custom"].is_null()) {
        const Matrix c = readMatrix(j["custom"], "mask.custom");
        for (Eigen::Index r = 0; r < c.rows(); ++r)
            for (Eigen::Index k = 0; k < c.cols(); ++k)
                if (c(r, k) != 0.0f && c(r, k) != 1.0f)
                    fail("mask.custom[" + std::to_string(r) + "][" + std::to_string(k) + "]",
                         "expected 0 (kept) or 1 (masked), got " + std::to_string(c(r, k)));
        m.custom = c.cast<std::uint8_t>();
    }
    if (j.contains("fill") && !j["fill"].is_null()) {
        const json& f = j["fill"];
        if (f.is_string()) {
            const std::string s = f.get<std::string>();
            if (s == "-inf" || s == "-infinity") m.fill = -std::numeric_limits<float>::infinity();
            else fail("mask.fill", "expected \"-inf\" or a finite number such as -1e6, got \"" + clipForMessage(s) + "\"");
        } else {
            m.fill = readFloat(f, "mask.fill");
        }
    }
    return m;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] parseSession
// -----------------------------------------------------------------------------------------------------

Session parseSessionJson(const json& j)
{
    if (!j.is_object()) fail("session", "expected a JSON object, got " + typeName(j));
    if (!j.contains("attnscope"))
        fail("attnscope", "missing: a session file starts with {\"attnscope\": 1, ...} (the format version)");
    const json& ver = j["attnscope"];
    if (!ver.is_number_integer()) fail("attnscope", "expected the format version as an integer, got " + typeName(ver));
    if (ver.get<long>() != kSessionFormatVersion)
        throw FieldError{"attnscope: format version " + ver.dump() + " is not supported by this build (it reads version " +
                         std::to_string(kSessionFormatVersion) +
                         "); the file was written by a newer attnscope: update attnscope, or re-save it in version 1"};

    Session s;
    AttentionConfig& cfg = s.config;
    if (j.contains("name")) {
        if (!j["name"].is_string()) fail("name", "expected a string, got " + typeName(j["name"]));
        s.name = j["name"].get<std::string>();
    }
    if (j.contains("description")) {
        if (!j["description"].is_string()) fail("description", "expected a string, got " + typeName(j["description"]));
        s.description = j["description"].get<std::string>();
    }
    if (j.contains("layout")) cfg.layout = readEnum<Layout>(j["layout"], "layout", {{"row", Layout::Row}, {"column", Layout::Column}});
    if (j.contains("mode"))
        cfg.mode = readEnum<Mode>(j["mode"], "mode", {{"self", Mode::Self}, {"cross", Mode::Cross}, {"direct", Mode::Direct}});
    if (j.contains("heads")) cfg.heads = readInt(j["heads"], "heads", 1, 4096);
    // Grouped-query attention: absent = as many KV heads as heads; validate() checks that it divides heads.
    if (j.contains("kv_heads")) cfg.kvHeads = readInt(j["kv_heads"], "kv_heads", 1, 4096);
    if (j.contains("score"))
        cfg.score = readEnum<Score>(j["score"], "score",
                                    {{"scaled_dot", Score::ScaledDot}, {"dot", Score::Dot}, {"additive", Score::Additive}});
    if (j.contains("scale") && !j["scale"].is_null()) cfg.scale = readFloat(j["scale"], "scale");

    if (j.contains("tokens") && !j["tokens"].is_null()) {
        const json& t = j["tokens"];
        if (t.is_array()) {
            s.queryTokens = readStrings(t, "tokens");
            s.keyTokens = s.queryTokens;
        } else if (t.is_object()) {
            if (t.contains("query")) s.queryTokens = readStrings(t["query"], "tokens.query");
            if (t.contains("key")) s.keyTokens = readStrings(t["key"], "tokens.key");
        } else {
            fail("tokens", "expected an array of labels or {\"query\": [...], \"key\": [...]}, got " + typeName(t));
        }
    }

    AttentionInput& in = s.input;
    auto mat = [&](const char* key, Matrix& m) {
        if (j.contains(key) && !j[key].is_null()) m = readMatrix(j[key], key);
    };
    auto vec = [&](const char* key, Vector& v) {
        if (j.contains(key) && !j[key].is_null()) v = readVector(j[key], key);
    };
    mat(key(InputMatrix::X), in.X);
    mat(key(InputMatrix::Xkv), in.Xkv);
    mat(key(InputMatrix::Wq), in.Wq);
    mat(key(InputMatrix::Wk), in.Wk);
    mat(key(InputMatrix::Wv), in.Wv);
    mat(key(InputMatrix::Wo), in.Wo);
    vec(key(InputMatrix::Bq), in.bq);
    vec(key(InputMatrix::Bk), in.bk);
    vec(key(InputMatrix::Bv), in.bv);
    vec(key(InputMatrix::Bo), in.bo);
    mat(key(InputMatrix::Q), in.Q);
    mat(key(InputMatrix::K), in.K);
    mat(key(InputMatrix::V), in.V);
    if (j.contains("additive") && !j["additive"].is_null()) {
        const json& a = j["additive"];
        if (!a.is_object()) fail("additive", "expected {\"Wq\": [[...]], \"Wk\": [[...]], \"wv\": [...]}, got " + typeName(a));
        const std::string prefix = "additive.";
        if (const char* k = key(InputMatrix::Aq); a.contains(k)) in.additive.Aq = readMatrix(a[k], prefix + k);
        if (const char* k = key(InputMatrix::Ak); a.contains(k)) in.additive.Ak = readMatrix(a[k], prefix + k);
        if (const char* k = key(InputMatrix::Wv_additive); a.contains(k)) in.additive.wv = readVector(a[k], prefix + k);
    }
    if (j.contains("mask") && !j["mask"].is_null()) in.mask = readMask(j["mask"]);
    if (j.contains("view") && !j["view"].is_null()) {
        if (!j["view"].is_object()) fail("view", "expected an object, got " + typeName(j["view"]));
        s.viewJson = j["view"].dump();
    }
    return s;
}

Status checkTokens(const Session& s, const Dims& d)
{
    if (!s.queryTokens.empty() && static_cast<int>(s.queryTokens.size()) != d.T)
        return invalidArgument("tokens" + std::string(s.queryTokens == s.keyTokens ? "" : ".query") + ": expected " +
                               std::to_string(d.T) + " labels (one per query), got " + std::to_string(s.queryTokens.size()));
    if (!s.keyTokens.empty() && static_cast<int>(s.keyTokens.size()) != d.S)
        return invalidArgument("tokens" + std::string(s.queryTokens == s.keyTokens ? "" : ".key") + ": expected " +
                               std::to_string(d.S) + " labels (one per key), got " + std::to_string(s.keyTokens.size()));
    return {};
}

std::string prefixed(std::string_view source, const std::string& msg) { return std::string(source) + ": " + msg; }

} // namespace

Expected<Session> parseSession(std::string_view text, std::string_view source)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, kMaxJsonDepth, source));
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        // The one place parser exceptions become a Status: parse_error (syntax; nlohmann's message ends with
        // the byte offset, which is what a person needs to find it) and out_of_range (a number past the range
        // of double, such as 1e999). Both are bad input.
        return makeError(StatusCode::ParseError, prefixed(source, "not valid JSON: " + clipForMessage(e.what(), 200)));
    }
    Session s;
    try {
        s = parseSessionJson(j);
    } catch (const FieldError& e) {
        const bool version = e.message.rfind("attnscope: format version", 0) == 0;
        return makeError(version ? StatusCode::Unsupported : StatusCode::InvalidArgument, prefixed(source, e.message));
    } catch (const json::exception& e) {
        return makeError(StatusCode::ParseError, prefixed(source, clipForMessage(e.what(), 200)));
    }
    Expected<Dims> d = validate(s.input, s.config);
    if (!d) return Status{d.status().code, prefixed(source, d.status().message)};
    if (Status t = checkTokens(s, *d); !t.ok()) return Status{t.code, prefixed(source, t.message)};
    return s;
}

Expected<Session> loadSession(const std::string& path)
{
    Expected<std::string> text = readFile(path, kMaxSessionFileBytes);
    if (!text) return text.status();
    return parseSession(*text, path);
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Writing
// -----------------------------------------------------------------------------------------------------
namespace {

json toJson(const Matrix& m)
{
    json a = json::array();
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
        json row = json::array();
        for (Eigen::Index c = 0; c < m.cols(); ++c) row.push_back(m(r, c));
        a.push_back(std::move(row));
    }
    return a;
}

json toJson(const MaskMatrix& m, bool asBool)
{
    json a = json::array();
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
        json row = json::array();
        for (Eigen::Index c = 0; c < m.cols(); ++c) {
            if (asBool) row.push_back(m(r, c) != 0);
            else row.push_back(int(m(r, c)));
        }
        a.push_back(std::move(row));
    }
    return a;
}

json toJson(const Vector& v)
{
    json a = json::array();
    for (Eigen::Index i = 0; i < v.size(); ++i) a.push_back(v[i]);
    return a;
}

} // namespace

std::string sessionToJson(const Session& s)
{
    const AttentionConfig& c = s.config;
    const AttentionInput& in = s.input;
    json j = json::object();
    j["attnscope"] = kSessionFormatVersion;
    if (!s.name.empty()) j["name"] = s.name;
    if (!s.description.empty()) j["description"] = s.description;
    j["layout"] = toString(c.layout);
    j["mode"] = toString(c.mode);
    j["heads"] = c.heads;
    if (c.kvHeads > 0 && c.kvHeads != c.heads) j["kv_heads"] = c.kvHeads;  // written only for grouped-query attention
    j["score"] = toString(c.score);
    if (c.scale) j["scale"] = *c.scale;
    if (!s.queryTokens.empty() || !s.keyTokens.empty()) {
        if (s.queryTokens == s.keyTokens) j["tokens"] = s.queryTokens;
        else j["tokens"] = {{"query", s.queryTokens}, {"key", s.keyTokens}};
    }
    auto putM = [&](const char* k, const Matrix& m) { if (m.size()) j[k] = toJson(m); };
    auto putV = [&](const char* k, const Vector& v) { if (v.size()) j[k] = toJson(v); };
    putM(key(InputMatrix::X), in.X);
    putM(key(InputMatrix::Xkv), in.Xkv);
    putM(key(InputMatrix::Wq), in.Wq);
    putM(key(InputMatrix::Wk), in.Wk);
    putM(key(InputMatrix::Wv), in.Wv);
    putM(key(InputMatrix::Wo), in.Wo);
    putV(key(InputMatrix::Bq), in.bq);
    putV(key(InputMatrix::Bk), in.bk);
    putV(key(InputMatrix::Bv), in.bv);
    putV(key(InputMatrix::Bo), in.bo);
    putM(key(InputMatrix::Q), in.Q);
    putM(key(InputMatrix::K), in.K);
    putM(key(InputMatrix::V), in.V);
    if (in.additive.Aq.size() || in.additive.Ak.size() || in.additive.wv.size()) {
        json a = json::object();
        if (in.additive.Aq.size()) a[key(InputMatrix::Aq)] = toJson(in.additive.Aq);
        if (in.additive.Ak.size()) a[key(InputMatrix::Ak)] = toJson(in.additive.Ak);
        if (in.additive.wv.size()) a[key(InputMatrix::Wv_additive)] = toJson(in.additive.wv);
        j["additive"] = a;
    }
    const MaskSpec& m = in.mask;
    json mj = json::object();
    mj["causal"] = m.causal;
    if (!m.keyPadding.empty()) {
        json kp = json::array();
        for (auto f : m.keyPadding) kp.push_back(f != 0);
        mj["key_padding"] = kp;
    }
    if (m.validLens.size() == 1) mj["valid_lens"] = m.validLens[0];
    else if (!m.validLens.empty()) mj["valid_lens"] = m.validLens;
    if (m.custom.size()) mj["custom"] = toJson(m.custom, false);
    if (std::isinf(m.fill)) mj["fill"] = "-inf";
    else mj["fill"] = m.fill;
    j["mask"] = mj;
    json view = json::parse(s.viewJson.empty() ? std::string("{}") : s.viewJson, nullptr, false);
    if (view.is_object() && !view.empty()) j["view"] = view;
    return j.dump(2);
}

Status saveSession(const std::string& path, const Session& s) { return writeFileAtomic(path, sessionToJson(s) + "\n"); }

std::string resultToJson(const AttentionResult& r)
{
    json j = json::object();
    j["attnscope"] = kSessionFormatVersion;
    j["layout"] = toString(r.layout);
    j["backend"] = toString(r.backend);
    j["scale"] = r.scale;
    json heads = json::array();
    for (const HeadResult& h : r.heads) {
        json hj = json::object();
        hj["Q"] = toJson(h.Q);
        hj["K"] = toJson(h.K);
        hj["V"] = toJson(h.V);
        hj["scores"] = toJson(h.scores);
        hj["masked"] = toJson(h.masked, true);
        hj["weights"] = toJson(h.weights);
        hj["output"] = toJson(h.output);
        heads.push_back(std::move(hj));
    }
    j["heads"] = std::move(heads);
    j["concat"] = toJson(r.concat);
    j["output"] = toJson(r.output);
    j["warnings"] = r.warnings;
    return j.dump();
}

} // namespace attn
