// The table of matrix names (matrix_names.h).
#include "attnscope/matrix_names.h"

#include <cassert>
#include <iterator>

namespace attn {
namespace {

using M = InputMatrix;
constexpr MatrixNames kNames[] = {
    {M::X, "X", "X", "X", "X", false},
    {M::Xkv, "X_kv", "X_kv", "X_kv", "X_{kv}", false},
    {M::Wq, "W^Q", "Wq", "Wq", "W_{Q}", false},
    {M::Wk, "W^K", "Wk", "Wk", "W_{K}", false},
    {M::Wv, "W^V", "Wv", "Wv", "W_{V}", false},
    {M::Wo, "W^O", "Wo", "Wo", "W_{O}", false},
    {M::Q, "Q", "Q", "Q", "Q", false},
    {M::K, "K", "K", "K", "K", false},
    {M::V, "V", "V", "V", "V", false},
    {M::Aq, "A_q", "Wq", "additive_Wq", "A_{q}", false},
    {M::Ak, "A_k", "Wk", "additive_Wk", "A_{k}", false},
    {M::Bq, "b^Q", "bq", "bq", "b_{Q}", true},
    {M::Bk, "b^K", "bk", "bk", "b_{K}", true},
    {M::Bv, "b^V", "bv", "bv", "b_{V}", true},
    {M::Bo, "b^O", "bo", "bo", "b_{O}", true},
    {M::Wv_additive, "w_v", "wv", "additive_wv", "w_{v}", true},
};

} // namespace

std::span<const MatrixNames> matrixNameTable() { return kNames; }

const MatrixNames& matrixNames(InputMatrix m)
{
    assert(int(m) >= 0 && int(m) < int(std::size(kNames)) && kNames[int(m)].id == m);  // the table is in enum order
    return kNames[int(m)];
}

} // namespace attn
