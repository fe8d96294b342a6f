// Guards run before nlohmann-json parses untrusted text (its parser recurses once per nesting level).
#pragma once

#include "attnscope/status.h"

#include <string>

namespace attn::detail {

// InvalidArgument when arrays/objects nest deeper than `maxDepth` (strings are skipped, escapes honoured).
inline Status checkJsonDepth(const std::string& text, int maxDepth)
{
    int depth = 0;
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\') ++i;
            else if (c == '"') inString = false;
        } else if (c == '"') inString = true;
        else if (c == '[' || c == '{') {
            if (++depth > maxDepth)
                return invalidArgument("JSON nests deeper than " + std::to_string(maxDepth) + " levels at byte " +
                                       std::to_string(i));
        } else if (c == ']' || c == '}') --depth;
    }
    return Status::success();
}

} // namespace attn::detail
