#include "attnscope/status.h"
#include "attnscope/types.h"

namespace attn {

const char* statusCodeName(StatusCode code)
{
    switch (code) {
    case StatusCode::Ok: return "ok";
    case StatusCode::InvalidArgument: return "invalid argument";
    case StatusCode::ResourceExhausted: return "resource exhausted";
    case StatusCode::ParseError: return "parse error";
    case StatusCode::IoError: return "I/O error";
    case StatusCode::Unsupported: return "unsupported";
    case StatusCode::Unavailable: return "unavailable";
    case StatusCode::Internal: return "internal error";
    case StatusCode::Cancelled: return "cancelled";
    }
    return "unknown";
}

const char* toString(Layout v) { return v == Layout::Row ? "row" : "column"; }

const char* toString(Mode v)
{
    switch (v) {
    case Mode::Self: return "self";
    case Mode::Cross: return "cross";
    case Mode::Direct: return "direct";
    }
    return "?";
}

const char* toString(Score v)
{
    switch (v) {
    case Score::ScaledDot: return "scaled_dot";
    case Score::Dot: return "dot";
    case Score::Additive: return "additive";
    }
    return "?";
}

const char* toString(Backend v)
{
    switch (v) {
    case Backend::Auto: return "auto";
    case Backend::Cpu: return "cpu";
    case Backend::Cuda: return "cuda";
    }
    return "?";
}

} // namespace attn
