#include "state/model_state.h"

#include <cstdlib>
#include <filesystem>

namespace app {

std::string defaultModelDirectory()
{
    if (const char* env = std::getenv("ATTNSCOPE_MODEL_DIR"); env && *env) return env;
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return "build/models/all-MiniLM-L6-v2";
    return (exe.parent_path().parent_path() / "models" / "all-MiniLM-L6-v2").string();
}

} // namespace app
