// The weight-format seam: safetensors and GGUF behind one interface. See weight_source.h.
#include "weight_source.h"

#include "attnscope/preset_io.h"  // readFile, checkJsonDepth, clipForMessage

#include <nlohmann/json.hpp>

#include <set>
#include <sys/stat.h>

namespace attn::detail {
using json = nlohmann::json;

std::string shapeText(const std::vector<std::int64_t>& s)
{
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "×" : "") + std::to_string(s[i]);
    return s.empty() ? "a scalar" : out;
}

Status WeightSource::linear(const std::string& name, int in, int out, const char* dims, Matrix& w)
{
    Matrix stored;
    ATTNSCOPE_RETURN_IF_ERROR(matrix(name, out, in, dims, stored));
    w = stored.transpose();
    return Status::success();
}

Status WeightSource::weight(const std::string& name, int in, int total, const char* dims, int row0, int rows,
                            const std::vector<int>& order, WeightMatrix& w)
{
    Matrix all;
    ATTNSCOPE_RETURN_IF_ERROR(linear(name, in, total, dims, all));
    Matrix part(in, rows);
    for (int j = 0; j < rows; ++j) part.col(j) = all.col(row0 + (order.empty() ? j : order[static_cast<std::size_t>(j)]));
    w = WeightMatrix(std::move(part));
    return Status::success();
}

Status WeightSource::weights(const std::string& name, int in, int total, const char* dims, const std::vector<Part>& parts)
{
    Matrix all;
    ATTNSCOPE_RETURN_IF_ERROR(linear(name, in, total, dims, all));
    for (const Part& p : parts) {
        Matrix part(in, p.rows);
        for (int j = 0; j < p.rows; ++j) part.col(j) = all.col(p.row0 + (p.order.empty() ? j : p.order[static_cast<std::size_t>(j)]));
        *p.out = WeightMatrix(std::move(part));
    }
    return Status::success();
}

Status GgufSource::weights(const std::string& name, int in, int total, const char* dims, const std::vector<Part>& parts)
{
    for (const Part& p : parts) ATTNSCOPE_RETURN_IF_ERROR(weight(name, in, total, dims, p.row0, p.rows, p.order, *p.out));
    return Status::success();
}

Status WeightSource::embedding(const std::string& name, int vocab, int hidden, const char* dims, WeightMatrix& w)
{
    Matrix e;
    ATTNSCOPE_RETURN_IF_ERROR(matrix(name, vocab, hidden, dims, e));
    w = WeightMatrix::denseTransposed(std::move(e));
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// safetensors
// -----------------------------------------------------------------------------------------------------

namespace {
bool isFile(const std::string& p)
{
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
} // namespace

Expected<std::unique_ptr<SafetensorsSource>> SafetensorsSource::open(const std::string& dir)
{
    std::vector<std::string> files;
    const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
    if (isFile(single)) {
        files.push_back(single);
    } else if (isFile(index)) {
        auto text = readFile(index, 64u << 20);
        if (!text) return text.status();
        ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(*text, 8, index));
        const json j = json::parse(*text, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            return makeError(StatusCode::ParseError, index + ": expected an object with a \"weight_map\" object");
        std::set<std::string> shards;
        for (const auto& [name, file] : j["weight_map"].items()) {
            if (!file.is_string()) return makeError(StatusCode::ParseError, index + ": weight_map[\"" + name + "\"] is not a string");
            const std::string f = file.get<std::string>();
            // A shard is a plain file name beside the index; anything else (a path, "..") is refused.
            if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
                return makeError(StatusCode::ParseError, index + ": weight_map[\"" + name + "\"]: \"" + clipForMessage(f) +
                                                             "\" is not a file name beside the index");
            shards.insert(f);
        }
        if (shards.empty()) return makeError(StatusCode::ParseError, index + ": weight_map is empty");
        for (const auto& s : shards) files.push_back(dir + "/" + s);
    } else {
        return makeError(StatusCode::IoError, dir + ": neither model.safetensors nor model.safetensors.index.json is there");
    }
    auto src = std::make_unique<SafetensorsSource>();
    for (const std::string& f : files) {
        auto map = readSafetensorsFile(f);
        if (!map) return map.status();
        for (auto& [name, t] : *map) {
            if (src->m_tensors.count(name))
                return makeError(StatusCode::ParseError, f + ": tensor " + name + " is also in " + src->m_tensors[name].file);
            src->m_tensors[name] = Entry{std::move(t), f};
        }
    }
    return src;
}

bool SafetensorsSource::has(const std::string& name) const { return m_tensors.count(name) != 0; }

std::string SafetensorsSource::where(const std::string& name) const
{
    auto it = m_tensors.find(name);
    return it != m_tensors.end() ? it->second.file : std::string("the safetensors files");
}

Status SafetensorsSource::find(const std::string& name, Entry*& e)
{
    auto it = m_tensors.find(name);
    if (it == m_tensors.end()) return invalidArgument(where(name) + ": tensor " + name + " is missing");
    const SafeTensor& t = it->second.tensor;
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) count *= d;
    if (t.values.empty() && count > 0 && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16"))
        return invalidArgument(it->second.file + ": " + name + " is read twice (each tensor is taken once, then freed)");
    if (t.values.empty() && t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
        return makeError(StatusCode::Unsupported, it->second.file + ": " + name + ": dtype " + t.dtype +
                                                      " is not supported (supported: F32, F16, BF16)");
    e = &it->second;
    return Status::success();
}

Status SafetensorsSource::matrix(const std::string& name, int rows, int cols, const char* dims, Matrix& out)
{
    Entry* e = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(find(name, e));
    const auto& s = e->tensor.shape;
    if (s.size() != 2 || s[0] != rows || s[1] != cols)
        return invalidArgument(e->file + ": " + name + ": expected " + std::to_string(rows) + "×" + std::to_string(cols) +
                               " (" + dims + "), got " + shapeText(s));
    out = Eigen::Map<const Matrix>(e->tensor.values.data(), rows, cols);
    std::vector<float>().swap(e->tensor.values);  // each tensor is taken once: free its floats now
    return Status::success();
}

Status SafetensorsSource::vector(const std::string& name, int n, const char* dims, Vector& out)
{
    Entry* e = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(find(name, e));
    const auto& s = e->tensor.shape;
    if (s.size() != 1 || s[0] != n)
        return invalidArgument(e->file + ": " + name + ": expected " + std::to_string(n) + " (" + dims + "), got " + shapeText(s));
    out = Eigen::Map<const Vector>(e->tensor.values.data(), n);
    std::vector<float>().swap(e->tensor.values);
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// GGUF
// -----------------------------------------------------------------------------------------------------

Status GgufSource::find(const std::string& name, int rows, int cols, const char* dims, const GgufTensorInfo*& found) const
{
    const GgufTensorInfo* t = m_file.tensor(name);
    if (t == nullptr) return invalidArgument(m_file.what() + ": tensor " + name + " is missing");
    // GGUF lists dims fastest first: a rows×cols matrix is [cols, rows].
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows)
        return invalidArgument(m_file.what() + ": " + name + ": expected " + std::to_string(rows) + "×" +
                               std::to_string(cols) + " (" + dims + "), got " +
                               (t->dims.size() == 2 ? std::to_string(t->dims[1]) + "×" + std::to_string(t->dims[0])
                                                    : shapeText(t->dims) + " (GGUF order)"));
    found = t;
    return Status::success();
}

Status GgufSource::matrix(const std::string& name, int rows, int cols, const char* dims, Matrix& out)
{
    const GgufTensorInfo* t = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(find(name, rows, cols, dims, t));
    out.resize(rows, cols);
    return m_file.dequantize(*t, out.data(), static_cast<std::size_t>(out.size()));
}

Status GgufSource::weight(const std::string& name, int in, int total, const char* dims, int row0, int rows,
                          const std::vector<int>& order, WeightMatrix& w)
{
    const GgufTensorInfo* t = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(find(name, total, in, dims, t));
    // A type dequantizeRow refuses goes the float32 way, which names the tensor and the type.
    if (m_dequantize || !ggmlTypeSupported(t->type)) return WeightSource::weight(name, in, total, dims, row0, rows, order, w);
    auto view = WeightMatrix::quantized(m_shared, *t, row0, rows, order);
    if (!view) return view.status();
    w = std::move(*view);
    return Status::success();
}

Status GgufSource::embedding(const std::string& name, int vocab, int hidden, const char* dims, WeightMatrix& w)
{
    const GgufTensorInfo* t = nullptr;
    ATTNSCOPE_RETURN_IF_ERROR(find(name, vocab, hidden, dims, t));
    if (m_dequantize || !ggmlTypeSupported(t->type)) return WeightSource::embedding(name, vocab, hidden, dims, w);
    auto view = WeightMatrix::quantized(m_shared, *t, 0, vocab);
    if (!view) return view.status();
    w = std::move(*view);
    return Status::success();
}

Status GgufSource::vector(const std::string& name, int n, const char* dims, Vector& out)
{
    const GgufTensorInfo* t = m_file.tensor(name);
    if (t == nullptr) return invalidArgument(m_file.what() + ": tensor " + name + " is missing");
    if (t->dims.size() != 1 || t->dims[0] != n)
        return invalidArgument(m_file.what() + ": " + name + ": expected " + std::to_string(n) + " (" + dims + "), got " +
                               shapeText(t->dims));
    out.resize(n);
    return m_file.dequantize(*t, out.data(), static_cast<std::size_t>(n));
}

} // namespace attn::detail
