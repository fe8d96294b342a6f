// A model's text read from a file (File → Open text…, --model-text-file): checked whole before it replaces the
// text in the window, so that a wrong file says what is wrong while the current text and its run stay.
#pragma once

#include <attnscope/bpe_tokenizer.h>
#include <attnscope/status.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace app {

// The largest text file read whole: 4 MiB, about a million tokens of English, far past any model's context
// (SmolLM2's 8192 tokens are ~40 KB); a larger file is a data set or a binary, not a text to run.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t(4) << 20;

// The core's UTF-8 check (attnscope/bpe_tokenizer.h), which the tokenisers use too.
using attn::firstInvalidUtf8;

// Where `s` stops being UTF-8, for a message: "byte 0xe9 at offset 3" (the offset plus `offsetShift`, for a
// text whose first bytes were dropped); "" when all of `s` is valid.
std::string invalidUtf8Byte(std::string_view s, std::size_t offsetShift = 0);

// Reads `path` as a model's text: a regular file of at most `maxBytes`, valid UTF-8 (a leading byte-order
// mark is dropped) with no NUL byte (a binary file), and not empty or only white space. Errors name the path
// and what was expected against what was found: IoError for the file ("cannot open: No such file or
// directory", "is a folder, expected a regular file", "is 9.5 MiB; a text is read up to 4 MiB"),
// InvalidArgument for its content ("is not UTF-8 text: byte 0xff at offset 12", "is binary: a NUL byte at
// offset 3", "is empty").
attn::Expected<std::string> readTextFile(const std::string& path, std::size_t maxBytes = kMaxTextFileBytes);

// "4 MiB", "9.5 MiB", "812 KiB", "37 bytes": a file size for a message.
std::string formatBytes(std::size_t bytes);

} // namespace app
