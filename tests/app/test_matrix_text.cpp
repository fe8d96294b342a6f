// Pasting matrices and typing cell values: every accepted form and every refusal message.
#include "state/matrix_text.h"

#include <gtest/gtest.h>

namespace {

attn::Matrix parseOk(const std::string& text)
{
    auto m = app::parseMatrixText(text);
    EXPECT_TRUE(m.ok()) << text << " -> " << (m.ok() ? "" : m.status().message);
    return m.ok() ? *m : attn::Matrix();
}

TEST(MatrixText, CsvRows)
{
    const attn::Matrix m = parseOk("1, 2, 3\n4, 5, 6\n");
    ASSERT_EQ(m.rows(), 2);
    ASSERT_EQ(m.cols(), 3);
    EXPECT_EQ(m(1, 2), 6.0f);
}

TEST(MatrixText, WhitespaceRowsWithExponents)
{
    const attn::Matrix m = parseOk("  1.5\t-2e-3\n 3   4 \n\n");
    ASSERT_EQ(m.rows(), 2);
    EXPECT_FLOAT_EQ(m(0, 1), -0.002f);
    EXPECT_EQ(m(1, 0), 3.0f);
}

TEST(MatrixText, TorchPrintout)
{
    const attn::Matrix m = parseOk("tensor([[1., 2.],\n        [3., 4.]], dtype=torch.float64, requires_grad=True)");
    ASSERT_EQ(m.rows(), 2);
    ASSERT_EQ(m.cols(), 2);
    EXPECT_EQ(m(1, 0), 3.0f);
}

TEST(MatrixText, NumpyPrintoutWrappedRows)
{
    // NumPy wraps long rows over several lines inside the brackets: still one row.
    const attn::Matrix m = parseOk("array([[ 0.1,  0.2,\n         0.3],\n       [ 1. ,  2. ,\n         3. ]], dtype=float32)");
    ASSERT_EQ(m.rows(), 2);
    ASSERT_EQ(m.cols(), 3);
    EXPECT_FLOAT_EQ(m(0, 2), 0.3f);
}

TEST(MatrixText, SingleRowAndValue)
{
    EXPECT_EQ(parseOk("[1, 2, 3]").cols(), 3);
    EXPECT_EQ(parseOk("7").size(), 1);
}

TEST(MatrixText, RaggedRowsRefused)
{
    auto m = app::parseMatrixText("1 2\n3 4 5");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message, "paste: row 2 has 3 values, row 1 has 2");
}

TEST(MatrixText, TextAndNanRefused)
{
    auto m = app::parseMatrixText("1 abc\n3 4");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message, "paste: row 1, value 2: 'abc' is not a finite number");
    auto n = app::parseMatrixText("1 nan");
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.status().message.find("'nan' is not a finite number"), std::string::npos);
    EXPECT_FALSE(app::parseMatrixText("  \n ").ok());
}

TEST(MatrixText, CellValues)
{
    EXPECT_EQ(*app::parseCellValue(" 2.5 "), 2.5f);
    EXPECT_EQ(app::parseCellValue("abc").status().message, "'abc' is not a number");
    EXPECT_EQ(app::parseCellValue("nan").status().message, "NaN is not allowed: type a finite number");
    EXPECT_EQ(app::parseCellValue("1e99").status().message, "'1e99' is out of the float range");
    EXPECT_EQ(app::parseCellValue("inf").status().message, "'inf' is out of the float range");
    EXPECT_EQ(app::parseCellValue("").status().message, "empty value: type a number");
    EXPECT_EQ(app::parseCellValue("3x").status().message, "'3x' is not a number");
}

TEST(MatrixText, CsvRoundTrip)
{
    attn::Matrix m(2, 2);
    m << 0.125f, -3.0f, 1e-7f, 42.0f;
    const attn::Matrix back = parseOk(app::matrixToCsv(m));
    EXPECT_TRUE(back.isApprox(m));
}

} // namespace
