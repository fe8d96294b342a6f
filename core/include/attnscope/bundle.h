// Attention bundles (docs/bundle.md): attention weights computed elsewhere (Hugging Face, TransformerLens,
// NumPy), saved as one safetensors file and read here through the tile seam (attnscope/attention_maps.h).
//
// Part of attnscope_model (core/model/bundle.cpp). A bundle holds one tensor per layer, attn.0 … attn.<L−1>, each
// heads × queries × keys (H × T × S; or 1 × H × T × S, a batch of one), F32, F16 or BF16, all of one shape and
// dtype. Its __metadata__ (safetensors metadata is string → string) holds:
//   tokens        JSON text of a list of T strings (required)
//   key_tokens    JSON text of a list of S strings (required when S ≠ T; optional, and checked, when S = T)
//   model         the model's name, plain text (optional)
//   layer_labels  JSON text of a list of L strings (optional)
//   head_labels   JSON text of a list of H strings (optional)
//   attnscope_bundle  the format version, "1" (optional: files written by other tools open without it)
// Other metadata keys are ignored (the Python safetensors writers add e.g. "format": "pt").
//
// The file is memory-mapped and nothing but the header is read at open: tile() and pooled() convert the cells
// they are asked for, so a bundle larger than memory opens. Values are checked as they are read: a NaN or Inf
// fails the read, naming layer, head, query and key. Bundles carry no mask (causal() is false; a decoder's
// masked cells are simply 0) and weights only (has(Scores) is false).
#pragma once

#include "attnscope/attention_maps.h"
#include "attnscope/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn {

class MappedFile;

enum class BundleDtype { F32, F16, BF16 };
const char* toString(BundleDtype d);  // "F32", "F16", "BF16", as safetensors writes them

// The format version this build writes and reads (metadata "attnscope_bundle").
inline constexpr int kBundleVersion = 1;

class BundleMaps final : public AttentionMaps {
public:
    // Memory-maps `path` and checks it (messages start with `path`). IoError when it cannot be opened or mapped
    // (missing, a directory, not a regular file); otherwise as fromBytes.
    static Expected<std::shared_ptr<BundleMaps>> open(const std::string& path);

    // Checks `size` bytes held in memory as a bundle, in place: the caller keeps them alive as long as the
    // BundleMaps. `what` names them in messages. ParseError for what parseSafetensorsHeader refuses (short file,
    // header size past the end, offsets lying about sizes, …); InvalidArgument naming the tensor or metadata key
    // and giving expected vs actual for: a tensor not named attn.<layer>, a layer missing (a gap) or none at all,
    // a rank other than 3 (or 4 with a batch of 1), a dtype other than F32/F16/BF16 or differing across layers,
    // a shape differing from attn.0's, an empty dimension or one over 2^31−1, metadata that is not string →
    // string, tokens missing, not a JSON list of strings or not T long, key_tokens missing when S ≠ T or not S
    // long, model not a string, layer_labels / head_labels not L / H strings; Unsupported for a newer
    // attnscope_bundle version.
    static Expected<std::shared_ptr<BundleMaps>> fromBytes(const std::uint8_t* bytes, std::size_t size,
                                                           const std::string& what);

    int layers() const override { return m_layers; }
    int heads() const override { return m_heads; }
    int queries() const override { return m_queries; }
    int keys() const override { return m_keys; }
    bool has(MapKind kind) const override { return kind == MapKind::Weights; }
    bool causal() const override { return false; }

    // The cells of `rect`, converted to float. InvalidArgument as checkTile, and "WHAT: attn.L head H query Q
    // key K is NaN (…)" for the first non-finite value of the rect (row-major order).
    Status tile(MapKind kind, int layer, int head, const MapRect& rect, Matrix& out) const override;
    // As AttentionMaps::pooled (the same blocks as attn::poolMax), read straight from the mapped rows without a
    // tile; a non-finite value fails it as in tile() rather than being skipped.
    Status pooled(MapKind kind, int layer, int head, const MapRect& rect, int outRows, int outCols,
                  Matrix& out) const override;
    // Reads every value of every map, failing as tile() at the first non-finite one (reads the whole file:
    // for a command that wants the check up front).
    Status checkValues() const;

    const std::string& path() const { return m_what; }                     // the path (or fromBytes' name)
    BundleDtype dtype() const { return m_dtype; }
    const char* dtypeName() const { return toString(m_dtype); }
    const std::vector<std::string>& tokens() const { return m_tokens; }        // T query tokens
    const std::vector<std::string>& keyTokens() const { return m_keyTokens; }  // S key tokens (= tokens when absent)
    const std::string& modelName() const { return m_model; }                   // empty when absent
    const std::vector<std::string>& layerLabels() const { return m_layerLabels; }  // L labels, or empty
    const std::vector<std::string>& headLabels() const { return m_headLabels; }    // H labels, or empty

private:
    BundleMaps() = default;
    // The row of query q of (layer, head), from key c0 on, converted into dst[0 .. n); the first non-finite
    // value's key (relative to c0) is returned, or −1.
    int readRow(int layer, int head, int q, int c0, int n, float* dst) const;
    Status nonFinite(int layer, int head, int q, int k, float v) const;

    std::shared_ptr<const MappedFile> m_file;  // set by open(); fromBytes leaves the bytes to the caller
    const std::uint8_t* m_bytes = nullptr;
    std::vector<std::uint64_t> m_layerOffset;  // byte offset of attn.<l>'s data in m_bytes
    std::string m_what;
    BundleDtype m_dtype = BundleDtype::F32;
    int m_layers = 0, m_heads = 0, m_queries = 0, m_keys = 0;
    std::vector<std::string> m_tokens, m_keyTokens, m_layerLabels, m_headLabels;
    std::string m_model;
};

} // namespace attn
