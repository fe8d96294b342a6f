// "Copy as code": a NumPy or PyTorch program that rebuilds a session and computes the same attention, so a
// reader of a figure can reproduce it. The program is standalone (numpy or torch only) and leaves its
// results in variables: per_head (a list of dicts with Q, K, V, scores, masked, weights, output in the
// session's layout), concat and output, and prints a short summary when run.
#pragma once

#include <attnscope/preset_io.h>
#include <attnscope/status.h>

#include <string>

namespace app::io {

enum class CodeLang { NumPy, Torch };

// The program text. Values are written with 9 significant digits, so float32 inputs are rebuilt exactly.
// Errors (InvalidArgument) come from validating the session first.
attn::Expected<std::string> sessionCode(const attn::Session& s, CodeLang lang);

} // namespace app::io
