// Tests of attnscope/matrix_names.h: one entry per input array, in enum order, with names that tell the arrays
// apart in every medium, and the session file keys that preset_io really reads and writes.
#include "attnscope/matrix_names.h"
#include "attnscope/preset_io.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace attn;

TEST(MatrixNames, OneEntryPerArrayInEnumOrder)
{
    const auto table = matrixNameTable();
    ASSERT_EQ(table.size(), std::size_t(InputMatrix::Wv_additive) + 1);
    for (std::size_t i = 0; i < table.size(); ++i) {
        EXPECT_EQ(int(table[i].id), int(i));
        EXPECT_EQ(&matrixNames(table[i].id), &table[i]);
    }
    EXPECT_STREQ(matrixNames(InputMatrix::Wq).label, "W^Q");
    EXPECT_STREQ(matrixNames(InputMatrix::Wq).key, "Wq");
    EXPECT_STREQ(matrixNames(InputMatrix::Wq).latex, "W_{Q}");
}

TEST(MatrixNames, LabelsAndArrayNamesAreUnique)
{
    std::set<std::string> labels, arrays;
    for (const MatrixNames& n : matrixNameTable()) {
        EXPECT_TRUE(labels.insert(n.label).second) << n.label;
        EXPECT_TRUE(arrays.insert(n.arrayName).second) << n.arrayName;
    }
}

// A session with every array written and parsed back: the file keys of the table are the ones in the file.
TEST(MatrixNames, SessionFilesUseTheTableKeys)
{
    Session s;
    s.config.score = Score::Additive;
    AttentionInput& in = s.input;
    in.X = Matrix::Constant(2, 3, 1.0f);
    in.Wq = Matrix::Constant(3, 2, 2.0f);
    in.Wk = Matrix::Constant(3, 2, 3.0f);
    in.Wv = Matrix::Constant(3, 2, 4.0f);
    in.Wo = Matrix::Constant(2, 2, 5.0f);
    in.bq = Vector::Constant(2, 6.0f);
    in.additive.Aq = Matrix::Constant(2, 4, 7.0f);
    in.additive.Ak = Matrix::Constant(2, 4, 8.0f);
    in.additive.wv = Vector::Constant(4, 9.0f);
    const std::string text = sessionToJson(s);
    for (InputMatrix m : {InputMatrix::X, InputMatrix::Wq, InputMatrix::Wk, InputMatrix::Wv, InputMatrix::Wo,
                          InputMatrix::Bq, InputMatrix::Aq, InputMatrix::Ak, InputMatrix::Wv_additive})
        EXPECT_NE(text.find(std::string("\"") + matrixNames(m).key + "\""), std::string::npos) << matrixNames(m).label;
    auto back = parseSession(text, "test");
    ASSERT_TRUE(back.ok()) << back.status().message;
    EXPECT_EQ(back->input.additive.Ak, in.additive.Ak);
    EXPECT_EQ(back->input.additive.wv, in.additive.wv);
    EXPECT_EQ(back->input.Wo, in.Wo);
}
