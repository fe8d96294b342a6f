// A decoder's weight matrix as the model holds it: dense float32 (Hugging Face directories, edits, the
// dequantized oracle path) or a view of a GGUF tensor in the file's own format (Q4_1, Q8_0, Q4_K, F16, ...),
// memory-mapped, dequantized only inside the products (issue 18, "Weights in their own format").
//
// Part of attnscope_model (core/model/weight_matrix.cpp), documented in docs/model.md ("Decoder models").
// Logically W is in×out (the attention core's x·W convention). A GGUF tensor (like a PyTorch Linear weight) stores
// it out×in: `out` rows of `in` values, each row a run of the type's blocks, so a row is one output column of W.
#pragma once

#include "attnscope/gguf.h"
#include "attnscope/types.h"

#include <cstddef>
#include <memory>
#include <vector>

namespace attn {

namespace detail {
class BurstScope;
}

class WeightMatrix {
public:
    WeightMatrix() = default;
    // Dense, in×out.
    explicit WeightMatrix(Matrix inByOut) : m_dense(std::move(inByOut)) {}
    // Dense, stored out×in (a V×M embedding matrix used as the unembedding: x·Eᵀ).
    static WeightMatrix denseTransposed(Matrix outByIn);
    // A view of rows [row0, row0 + rows) of GGUF tensor `info` (a ne1×ne0 = out×in matrix) of `file`, kept alive
    // by the shared ownership. `order` (empty = identity, else `rows` entries): output column j of W is stored
    // row order[j] (llama GGUFs' permuted Q/K rows). The caller has checked the shape; Unsupported for a type
    // dequantizeRow does not handle.
    static Expected<WeightMatrix> quantized(std::shared_ptr<const GgufFile> file, const GgufTensorInfo& info,
                                            std::int64_t row0, std::int64_t rows, std::vector<int> order = {});

    Eigen::Index inputs() const { return m_quant ? m_in : m_transposed ? m_dense.cols() : m_dense.rows(); }
    Eigen::Index outputs() const { return m_quant ? m_out : m_transposed ? m_dense.rows() : m_dense.cols(); }
    bool empty() const { return inputs() == 0 || outputs() == 0; }
    // Whether the values stay in the file's format (a view); false for dense float32.
    bool isQuantized() const { return m_quant; }
    // The storage type: GgmlType::F32 for dense.
    GgmlType type() const { return m_quant ? m_type : GgmlType::F32; }

    // The dense in×out float32 matrix; only for a dense, not transposed weight (asserted).
    const Matrix& dense() const;
    // For an edit: the in×out float32 matrix, dequantized (and held dense from now on) if it was a view.
    Matrix& edit();
    // The whole in×out matrix in float32, whatever the storage (tests' references, small models).
    Matrix toMatrix() const;
    // Output column j of W (the GGUF tensor's row, or the embedding of token j): `inputs()` floats into dst.
    void column(Eigen::Index j, float* dst) const;
    // W·v (v: `outputs()` values): the columns weighted by v, summed (what a logit direction v reads through W^O).
    Vector times(const Vector& v) const;
    // Output columns [c0, c0 + cols) as a cols×in float32 matrix (their stored rows), for a caller that multiplies
    // the same columns with many rows of x (the panels below; the LM head over the positions of a forward): a
    // view's rows dequantized into `buffer` (the AVX2 row kernels where there is one), a dense in×out weight's
    // columns copied into it transposed, or a transposed dense weight's own rows, without a copy. Valid while
    // *this and `buffer` live unchanged.
    MatrixCMap columnPanel(Eigen::Index c0, Eigen::Index cols, Matrix& buffer) const;

    // Bytes one product streams: the file's bytes of the view, or the float32 bytes of a dense weight.
    std::size_t streamedBytes() const;
    // Float32 bytes this weight holds in memory (0 for a view: its bytes are the file's mapping).
    std::size_t denseBytes() const { return m_quant ? 0 : static_cast<std::size_t>(m_dense.size()) * sizeof(float); }

    // out = x·W (x: n×in, out: n×out), split over the thread team. A few rows (a token appended): a matrix-vector
    // product that dequantizes each block in registers as it streams the weights; more rows: panels of output
    // columns dequantized into a float32 buffer, then Eigen's GEMM (dequantization amortised over the rows).
    friend void product(const Matrix& x, const WeightMatrix& w, Matrix& out);

    // Internal to the kernels (core/model/weight_matrix.cpp): the stored row of output column j.
    const std::uint8_t* storedRow(Eigen::Index j) const
    {
        const std::int64_t r = m_order.empty() ? j : m_order[static_cast<std::size_t>(j)];
        return m_data + static_cast<std::size_t>(r) * m_rowBytes;
    }

private:
    Matrix m_dense;              // in×out, or out×in when m_transposed
    bool m_transposed = false;
    bool m_quant = false;
    std::shared_ptr<const GgufFile> m_file;
    const std::uint8_t* m_data = nullptr;  // the view's first row
    GgmlType m_type = GgmlType::F32;
    std::int64_t m_in = 0, m_out = 0;
    std::size_t m_rowBytes = 0;
    std::vector<int> m_order;
};

void product(const Matrix& x, const WeightMatrix& w, Matrix& out);

// The same product with the dense path only (the oracle of the quantized kernels): the weight dequantized whole
// (toMatrix) then Eigen's float32 product. For tests.
Matrix referenceProduct(const Matrix& x, const WeightMatrix& w);

// A burst of products: while one lives, the products called on this thread (these, and the decoders' float32 ones)
// run their tasks on a team of its own whose threads spin between products, instead of opening an OpenMP region
// each. The program's OpenMP threads sleep while they wait (app/main.cpp), and waking them costs 75–120 µs a
// region on the 2-core virtual machine: an appended token's ~250 products of a few hundred microseconds each lost
// half their time to it. appendTokens opens one; the team's threads sleep again once no product has come for
// 0.3 ms, and end with the burst. Threads: OpenMP's setting when it is made. Results are the same bits as without.
class ProductBurst {
public:
    ProductBurst();
    ~ProductBurst();
    ProductBurst(const ProductBurst&) = delete;
    ProductBurst& operator=(const ProductBurst&) = delete;

    // The team's threads sleep now, before work that opens OpenMP teams of its own (a long text's attention) and
    // whose threads they would otherwise take cores from; the next product wakes them.
    void rest();

private:
    std::unique_ptr<detail::BurstScope> m_scope;
};

} // namespace attn
