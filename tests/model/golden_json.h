// A golden of tests/model/goldens (the target's ATTNSCOPE_DECODER_GOLDENS) read as JSON. Shared by the decoder golden
// tests.
#pragma once

#include <attnscope/preset_io.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace attn::testing {

// The golden `name`, at most `maxBytes`; a file that cannot be read is a failure of the calling test, naming it, and
// gives null (so that the test's own checks of its content fail too).
inline nlohmann::json readGoldenJson(const std::string& name, std::size_t maxBytes)
{
    auto text = attn::readFile(std::string(ATTNSCOPE_DECODER_GOLDENS) + "/" + name, maxBytes);
    if (!text.ok()) {
        ADD_FAILURE() << "goldens/" << name << ": " << text.status().message;
        return nlohmann::json();
    }
    return nlohmann::json::parse(*text);
}

} // namespace attn::testing
