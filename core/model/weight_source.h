// The weight-format seam of the decoder models (STYLE.md §8): one interface over a Hugging Face directory's
// safetensors (single file or shards) and a GGUF file. Internal to attnscope_model.
#pragma once

#include "attnscope/gguf.h"
#include "attnscope/safetensors.h"
#include "attnscope/status.h"
#include "attnscope/types.h"
#include "attnscope/weight_matrix.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace attn { struct DecoderModel; }

namespace attn::detail {

class WeightSource {
public:
    virtual ~WeightSource() = default;
    virtual bool has(const std::string& name) const = 0;
    // The tensor `name` as a row-major rows×cols float32 matrix (rows = the outer dimension as PyTorch writes it:
    // a Linear weight is out×in; a GGUF tensor of dims [ne0, ne1] is ne1×ne0). `dims` names the expected shape
    // in messages ("H_kv·D × d_model"). InvalidArgument when missing or of another shape; Unsupported for a type
    // this build cannot convert.
    virtual Status matrix(const std::string& name, int rows, int cols, const char* dims, Matrix& out) = 0;
    virtual Status vector(const std::string& name, int n, const char* dims, Vector& out) = 0;
    // "model.gguf" or "DIR/model.safetensors": for messages.
    virtual std::string where(const std::string& name) const = 0;

    // A Linear weight stored out×in, returned in×out (the attention core's x·W convention).
    Status linear(const std::string& name, int in, int out, const char* dims, Matrix& w);
    // A Linear weight stored total×in (checked as linear() does), output columns [row0, row0 + rows) of it as a
    // WeightMatrix in×rows; `order` (empty or `rows` entries): output column j is stored row row0 + order[j].
    // Here float32 (dense); a GGUF keeps its tensors' format (a view of the mapping).
    virtual Status weight(const std::string& name, int in, int total, const char* dims, int row0, int rows,
                          const std::vector<int>& order, WeightMatrix& w);
    // Several views of one fused tensor (Q|K|V, gate|up): each part as weight() gives it, the tensor read once
    // (a safetensors tensor is freed once taken; a GGUF's parts are views of the mapping).
    struct Part {
        int row0 = 0, rows = 0;
        std::vector<int> order;
        WeightMatrix* out = nullptr;
    };
    virtual Status weights(const std::string& name, int in, int total, const char* dims, const std::vector<Part>& parts);
    // An embedding matrix stored V×M as the weight x·E (in M, out V): column id is token id's embedding.
    virtual Status embedding(const std::string& name, int vocab, int hidden, const char* dims, WeightMatrix& w);
};

// Safetensors: `files` are read whole (float32 in memory); a tensor name is looked up across them.
class SafetensorsSource final : public WeightSource {
public:
    // dir/model.safetensors, or the shards model.safetensors.index.json names.
    static Expected<std::unique_ptr<SafetensorsSource>> open(const std::string& dir);
    bool has(const std::string& name) const override;
    Status matrix(const std::string& name, int rows, int cols, const char* dims, Matrix& out) override;
    Status vector(const std::string& name, int n, const char* dims, Vector& out) override;
    std::string where(const std::string& name) const override;

private:
    struct Entry { SafeTensor tensor; std::string file; };
    std::map<std::string, Entry> m_tensors;
    Status find(const std::string& name, Entry*& e);
};

// GGUF: with `dequantize`, every tensor in float32 (the oracle path); otherwise matrices stay views of the
// mapping in the file's format (WeightMatrix::quantized), which `file`'s shared ownership keeps alive.
class GgufSource final : public WeightSource {
public:
    GgufSource(std::shared_ptr<const GgufFile> file, bool dequantize)
        : m_shared(std::move(file)), m_file(*m_shared), m_dequantize(dequantize) {}
    bool has(const std::string& name) const override { return m_file.tensor(name) != nullptr; }
    Status matrix(const std::string& name, int rows, int cols, const char* dims, Matrix& out) override;
    Status vector(const std::string& name, int n, const char* dims, Vector& out) override;
    std::string where(const std::string&) const override { return m_file.what(); }
    Status weight(const std::string& name, int in, int total, const char* dims, int row0, int rows,
                  const std::vector<int>& order, WeightMatrix& w) override;
    Status embedding(const std::string& name, int vocab, int hidden, const char* dims, WeightMatrix& w) override;
    Status weights(const std::string& name, int in, int total, const char* dims, const std::vector<Part>& parts) override;

private:
    // The tensor `name` when it is rows×cols (as matrix() checks), else the message matrix() gives.
    Status find(const std::string& name, int rows, int cols, const char* dims, const GgufTensorInfo*& t) const;
    std::shared_ptr<const GgufFile> m_shared;
    const GgufFile& m_file;
    bool m_dequantize = false;
};

std::string shapeText(const std::vector<std::int64_t>& shape);

// Every tensor of m.config's family from `w` under the Hugging Face names, then the model's consistency checks (what
// loading a directory does after its config and tokenizer): how a synthetic model (synthetic_decoder.cpp) is built
// through the same family code as a real one. Defined in decoder.cpp.
Status assembleDecoder(WeightSource& w, DecoderModel& m);

} // namespace attn::detail
