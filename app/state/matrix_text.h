// Matrices as text: what the clipboard holds when a user pastes a matrix, and what Copy puts there.
#pragma once

#include <attnscope/status.h>
#include <attnscope/types.h>

#include <string>
#include <string_view>

namespace app {

// Parses a matrix from text in any of these forms:
//   CSV rows ("1, 2\n3, 4"), whitespace-separated rows ("1 2\n3 4"),
//   NumPy/PyTorch printouts ("array([[1., 2.],\n [3., 4.]])", "tensor([[1., 2.], [3., 4.]], dtype=...)"),
//   nested lists ("[[1, 2], [3, 4]]"); a single row or a single value is a 1×k / 1×1 matrix.
// Errors (InvalidArgument): no numbers, rows of different lengths ("row 2 has 3 values, row 1 has 2"),
// a token that is not a finite number ("row 1, value 2: 'abc' is not a number").
attn::Expected<attn::Matrix> parseMatrixText(std::string_view text);

// Parses one cell value: a finite float. Errors name the problem ("'abc' is not a number", "NaN is not
// allowed", "1e99 is out of the float range").
attn::Expected<float> parseCellValue(std::string_view text);

// Rows as comma-separated values, one row per line, values with 7 significant digits.
std::string matrixToCsv(const attn::Matrix& m);

} // namespace app
