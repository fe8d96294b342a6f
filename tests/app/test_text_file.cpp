// A model's text read from a file (state/text_file.h): the UTF-8 check, and each refusal's message naming the
// file, what was expected and what was found.
#include "state/text_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
constexpr auto npos = std::string_view::npos;

TEST(FirstInvalidUtf8, ValidTextHasNone)
{
    EXPECT_EQ(app::firstInvalidUtf8(""), npos);
    EXPECT_EQ(app::firstInvalidUtf8("The capital of France is"), npos);
    EXPECT_EQ(app::firstInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E \xF4\x8F\xBF\xBF"), npos);  // é € 𝄞 U+10FFFF
    EXPECT_EQ(app::firstInvalidUtf8("\xED\x9F\xBF"), npos);  // U+D7FF, just below the surrogates
}

TEST(FirstInvalidUtf8, NamesTheOffsetOfTheFirstBadByte)
{
    EXPECT_EQ(app::firstInvalidUtf8("ab\x80"), 2u);               // a continuation byte without a lead
    EXPECT_EQ(app::firstInvalidUtf8("caf\xE9!"), 3u);             // Latin-1 é
    EXPECT_EQ(app::firstInvalidUtf8("\xC0\xAF"), 0u);             // an overlong '/'
    EXPECT_EQ(app::firstInvalidUtf8("x\xE0\x80\xAF"), 1u);        // an overlong three-byte form
    EXPECT_EQ(app::firstInvalidUtf8("\xED\xA0\x80"), 0u);         // a UTF-16 surrogate (U+D800)
    EXPECT_EQ(app::firstInvalidUtf8("\xF4\x90\x80\x80"), 0u);     // past U+10FFFF
    EXPECT_EQ(app::firstInvalidUtf8("\xF5\x80\x80\x80"), 0u);     // no such lead byte
    EXPECT_EQ(app::firstInvalidUtf8("ok \xE2\x82"), 3u);          // a character cut off at the end
    EXPECT_EQ(app::firstInvalidUtf8("\xE2\x28\xA1"), 0u);         // a lead byte followed by ASCII
}

TEST(FormatBytes, InTheUnitsOfTheMessage)
{
    EXPECT_EQ(app::formatBytes(1), "1 byte");
    EXPECT_EQ(app::formatBytes(37), "37 bytes");
    EXPECT_EQ(app::formatBytes(812 * 1024), "812 KiB");
    EXPECT_EQ(app::formatBytes(app::kMaxTextFileBytes), "4 MiB");
    EXPECT_EQ(app::formatBytes(std::size_t(19) << 19), "9.5 MiB");
}

class TextFile : public ::testing::Test {
protected:
    void SetUp() override
    {
        dir = fs::temp_directory_path() / ("attnscope_text_file_" + std::to_string(::getpid()));
        fs::create_directories(dir);
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::string write(const std::string& name, const std::string& bytes)
    {
        const fs::path p = dir / name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p.string();
    }
    fs::path dir;
};

TEST_F(TextFile, ReadsUtf8AndDropsAByteOrderMark)
{
    auto t = app::readTextFile(write("a.txt", "The capital of France is\n"));
    ASSERT_TRUE(t.ok()) << t.status().message;
    EXPECT_EQ(*t, "The capital of France is\n");
    auto b = app::readTextFile(write("bom.txt", "\xEF\xBB\xBFna\xC3\xAFve"));
    ASSERT_TRUE(b.ok()) << b.status().message;
    EXPECT_EQ(*b, "na\xC3\xAFve");
}

TEST_F(TextFile, EachRefusalSaysWhatIsWrong)
{
    struct Case {
        std::string path, message;
    };
    const std::string big(std::size_t(64) + 1, 'a');
    const Case cases[] = {
        {write("latin1.txt", "caf\xE9 au lait"), "latin1.txt: not UTF-8 (byte 0xe9 at offset 3 begins no valid character); expected a UTF-8 text file"},
        {write("bom_latin1.txt", "\xEF\xBB\xBF" "caf\xE9"), "byte 0xe9 at offset 6"},  // offsets are the file's
        {write("binary.bin", std::string("PK\x03\x04\0\0", 6)), "binary.bin: a binary file (a NUL byte at offset 4); expected a UTF-8 text file"},
        {write("empty.txt", ""), "empty.txt: the file is empty; expected a UTF-8 text file"},
        {write("blank.txt", " \n\t\r\n"), "blank.txt: the file holds only white space; expected a UTF-8 text file"},
        {(dir / "no_such.txt").string(), "no_such.txt: cannot open"},
        {dir.string(), "expected a regular file"},
    };
    for (const Case& c : cases) {
        auto t = app::readTextFile(c.path);
        ASSERT_FALSE(t.ok()) << c.path;
        EXPECT_NE(t.status().message.find(c.message), std::string::npos) << t.status().message;
    }
    auto tooBig = app::readTextFile(write("big.txt", big), 64);
    ASSERT_FALSE(tooBig.ok());
    EXPECT_NE(tooBig.status().message.find("big.txt: the file is 65 bytes; a text is read up to 64 bytes"), std::string::npos)
        << tooBig.status().message;
}

TEST_F(TextFile, TheDefaultCapIsFourMiB)
{
    auto t = app::readTextFile(write("huge.txt", std::string(app::kMaxTextFileBytes + 1, 'a')));
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message.find("the file is 4.0 MiB (4194305 bytes); a text is read up to 4 MiB"), std::string::npos) << t.status().message;
    EXPECT_TRUE(app::readTextFile(write("max.txt", std::string(app::kMaxTextFileBytes, 'a'))).ok());
}

} // namespace
