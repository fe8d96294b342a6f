// An attention bundle as the app uses it (docs/bundle.md): the maps (read tile by tile from the mapped file), the
// tokens and labels. The one place the app opens attnscope/bundle.h; the views read OpenedBundle only.
#pragma once

#include <attnscope/attention_maps.h>
#include <attnscope/status.h>

#include <memory>
#include <string>
#include <vector>

namespace app {

struct OpenedBundle {
    std::shared_ptr<const attn::AttentionMaps> maps;
    std::vector<std::string> tokens, keyTokens;      // queries' and keys' tokens (equal unless the bundle says)
    std::vector<std::string> layerLabels, headLabels;  // empty = "L0"…, "H0"…
    std::string name;   // the bundle's "model" (or the file name)
    std::string path;   // as opened
};

// True for a path that names a bundle by its extension (.safetensors): what `attnscope FILE`, File → Open… and a
// dropped file look at first.
bool isBundlePath(const std::string& path);

// Opens and validates a bundle (attn::BundleMaps::open: every shape and label checked first). The message names
// the file and what disagrees.
attn::Expected<OpenedBundle> openBundle(const std::string& path);

} // namespace app
