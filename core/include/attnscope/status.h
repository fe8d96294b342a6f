// Status and Expected<T>: how core reports errors without throwing.
//
// Every public core function that can fail returns a Status or an Expected<T>. The message names the
// offending field and gives expected vs actual, e.g. "Wk: expected 4×3 (d_model × h·d_k), got 4×2".
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace attn {

enum class StatusCode {
    Ok,
    InvalidArgument,   // bad shape, bad value (NaN/Inf), unknown enum, heads not dividing a width
    ResourceExhausted, // the problem would exceed the memory budget
    ParseError,        // malformed JSON / file content
    IoError,           // a file could not be read or written
    Unsupported,       // e.g. a format version this build does not know
    Unavailable,       // a backend that was not built or has no device
    Internal,          // a backend failure (e.g. a CUDA error) that is not the caller's fault
    Cancelled,         // the caller asked a long computation to stop (its result is incomplete)
};

struct Status {
    StatusCode code = StatusCode::Ok;
    std::string message;

    bool ok() const { return code == StatusCode::Ok; }
    static Status success() { return {}; }
};

inline Status makeError(StatusCode code, std::string message) { return Status{code, std::move(message)}; }
inline Status invalidArgument(std::string message) { return {StatusCode::InvalidArgument, std::move(message)}; }

const char* statusCodeName(StatusCode code);

// A value or the Status that explains why there is none.
template <class T>
class Expected {
public:
    Expected(T value) : m_v(std::move(value)) {}
    Expected(Status status) : m_v(std::move(status)) { assert(!std::get<Status>(m_v).ok()); }

    bool ok() const { return std::holds_alternative<T>(m_v); }
    explicit operator bool() const { return ok(); }

    T& value() & { assert(ok()); return std::get<T>(m_v); }
    const T& value() const& { assert(ok()); return std::get<T>(m_v); }
    T&& value() && { assert(ok()); return std::get<T>(std::move(m_v)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    // The error; only valid when !ok().
    const Status& status() const { assert(!ok()); return std::get<Status>(m_v); }

private:
    std::variant<T, Status> m_v;
};

} // namespace attn

// Evaluates `expr`, an attn::Status; when it is an error, returns it from the enclosing function (which returns
// a Status or an Expected<T>). The one way core, its CUDA backend and the app pass a failure up unchanged.
#define ATTNSCOPE_RETURN_IF_ERROR(expr)                                                                       \
    do {                                                                                                      \
        ::attn::Status attnscopeStatus_ = (expr);                                                             \
        if (!attnscopeStatus_.ok()) return attnscopeStatus_;                                                  \
    } while (0)
