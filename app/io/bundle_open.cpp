// Opening an attention bundle for the app: see bundle_open.h.
#include "io/bundle_open.h"

#include <attnscope/bundle.h>

#include <filesystem>

namespace app {

bool isBundlePath(const std::string& path)
{
    const std::string ext = ".safetensors";
    return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

attn::Expected<OpenedBundle> openBundle(const std::string& path)
{
    attn::Expected<std::shared_ptr<attn::BundleMaps>> maps = attn::BundleMaps::open(path);
    if (!maps) return maps.status();
    const attn::BundleMaps& b = **maps;
    OpenedBundle out;
    out.tokens = b.tokens();
    out.keyTokens = b.keyTokens();
    out.layerLabels = b.layerLabels();
    out.headLabels = b.headLabels();
    out.name = b.modelName().empty() ? std::filesystem::path(path).filename().string() : b.modelName();
    out.path = path;
    out.maps = std::move(*maps);
    return out;
}

} // namespace app
