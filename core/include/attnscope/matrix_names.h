// One set of names per input array of a session, in one table: what the window shows ("W^Q"), the key in
// session files ("Wq"), the name of the exported array and of the variable in generated code ("Wq",
// "additive_Wq"), and the LaTeX of figures ("W_{Q}"). Labels, files and code generation all read it, so a
// matrix has one name per medium.
#pragma once

#include <span>

namespace attn {

// The input arrays of an AttentionInput (app: MatrixId). Wv_additive is the additive score's w_v.
enum class InputMatrix { X, Xkv, Wq, Wk, Wv, Wo, Q, K, V, Aq, Ak, Bq, Bk, Bv, Bo, Wv_additive };

struct MatrixNames {
    InputMatrix id;
    const char* label;      // the window and messages: "W^Q", "b^Q", "A_q"
    const char* key;        // session files: "Wq" (the additive parameters: the key inside "additive")
    const char* arrayName;  // exported/imported arrays and generated code: "Wq", "additive_Wq"
    const char* latex;      // figures: "W_{Q}"
    bool vector;            // a vector (a bias, w_v) rather than a matrix
};

// Every input array, in InputMatrix order.
std::span<const MatrixNames> matrixNameTable();
const MatrixNames& matrixNames(InputMatrix m);

} // namespace attn
