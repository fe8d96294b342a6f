#include "state/paths.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace app {
namespace fs = std::filesystem;

std::string stateDirectory(const std::string& override)
{
    fs::path dir;
    if (!override.empty()) dir = override;
    else if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) dir = fs::path(x) / "attnscope";
    else if (const char* h = std::getenv("HOME"); h && *h) dir = fs::path(h) / ".local" / "state" / "attnscope";
    else return "";
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir, ec)) return "";
    return dir.string();
}

namespace {
// The folder holding the running program ("" when /proc/self/exe cannot be read): assets and models are looked
// up relative to it, so that the build tree and any install prefix both work without configuration.
fs::path executableDirectory()
{
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}
} // namespace

std::string presetsDirectory()
{
    std::error_code ec;
    std::vector<fs::path> candidates;
    if (const fs::path bin = executableDirectory(); !bin.empty()) {
        candidates.push_back(bin / ".." / ".." / "assets" / "presets");
        candidates.push_back(bin / ".." / "share" / "attnscope" / "assets" / "presets");
    }
    candidates.push_back(fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "presets");
    for (const fs::path& p : candidates)
        if (fs::is_directory(p, ec)) return fs::weakly_canonical(p, ec).string();
    return "";
}

std::string modelsDirectory()
{
    const fs::path bin = executableDirectory();
    if (bin.empty()) return "build/models";  // no /proc: the layout scripts/setup.sh makes, from the checkout
    std::error_code ec;
    const fs::path built = bin.parent_path() / "models";
    const fs::path installed = bin.parent_path() / "share" / "attnscope" / "models";
    if (fs::is_directory(built, ec)) return built.string();
    if (fs::is_directory(installed, ec) || fs::is_directory(installed.parent_path(), ec)) return installed.string();
    return built.string();
}

std::vector<std::string> listJsonFiles(const std::string& dir)
{
    std::vector<std::string> out;
    std::error_code ec;
    if (dir.empty()) return out;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec) && it->path().extension() == ".json") out.push_back(it->path().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::string fileName(const std::string& path) { return fs::path(path).filename().string(); }

} // namespace app
