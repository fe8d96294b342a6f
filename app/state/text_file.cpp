// A model's text read from a file: see text_file.h.
#include "state/text_file.h"

#include <attnscope/preset_io.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>

namespace app {

std::string formatBytes(std::size_t bytes)
{
    char buf[48];
    if (bytes >= (std::size_t(1) << 20)) {
        const double mib = double(bytes) / double(1 << 20);
        std::snprintf(buf, sizeof buf, mib == double(std::size_t(mib)) ? "%.0f MiB" : "%.1f MiB", mib);
    } else if (bytes >= 1024) {
        std::snprintf(buf, sizeof buf, "%.0f KiB", double(bytes) / 1024.0);
    } else {
        std::snprintf(buf, sizeof buf, "%zu byte%s", bytes, bytes == 1 ? "" : "s");
    }
    return buf;
}

std::string invalidUtf8Byte(std::string_view s, std::size_t offsetShift)
{
    const std::size_t bad = firstInvalidUtf8(s);
    if (bad == std::string_view::npos) return {};
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", unsigned(static_cast<unsigned char>(s[bad])));
    return "byte " + std::string(hex) + " at offset " + std::to_string(bad + offsetShift);
}

attn::Expected<std::string> readTextFile(const std::string& path, std::size_t maxBytes)
{
    const std::string expected = "; expected a UTF-8 text file";
    std::error_code ec;
    // The size first, for a message in the user's units (readFile checks it again, against a file that grows).
    if (std::filesystem::is_regular_file(path, ec)) {
        const std::uintmax_t size = std::filesystem::file_size(path, ec);
        if (!ec && size > maxBytes) {
            const std::string exact = size >= 1024 ? " (" + std::to_string(size) + " bytes)" : std::string();
            return attn::makeError(attn::StatusCode::IoError, path + ": the file is " + formatBytes(std::size_t(size)) + exact +
                                                                  "; a text is read up to " + formatBytes(maxBytes) +
                                                                  " (about a million tokens, past any model's context)");
        }
    }
    auto bytes = attn::readFile(path, maxBytes);
    if (!bytes) return bytes.status();
    std::string text = std::move(*bytes);
    // A byte-order mark is no part of the text (offsets below still count it: they are the file's).
    const std::size_t bom = text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
    text.erase(0, bom);
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
        return attn::invalidArgument(path + ": a binary file (a NUL byte at offset " + std::to_string(nul + bom) + ")" + expected);
    if (const std::string bad = invalidUtf8Byte(text, bom); !bad.empty())
        return attn::invalidArgument(path + ": not UTF-8 (" + bad + " begins no valid character)" + expected +
                                     " (convert it, e.g. iconv -t UTF-8)");
    if (text.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
        return attn::invalidArgument(path + (text.empty() ? ": the file is empty" : ": the file holds only white space") +
                                     expected + " with something for the model to read");
    return text;
}

} // namespace app
