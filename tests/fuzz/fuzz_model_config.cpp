// libFuzzer target: config.json of a Hugging Face BERT-family model (attn::parseModelConfig).
// Whatever the bytes: a ModelConfig or a Status, no crash, no sanitizer report, no hang.
#include <attnscope/model.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    (void)attn::parseModelConfig(text);
    return 0;
}
