// The window's font (issue 21): CJK tokens draw as their glyphs when Droid Sans Fallback is installed, and a
// glyph no font has shows as the replacement mark U+FFFD, not as '?' (which reads as the text's own).
#include "headless_imgui.h"

#include <imgui.h>

#include <gtest/gtest.h>

#include <filesystem>

namespace {

class Fonts : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!std::filesystem::exists(ATTNSCOPE_FONT_PATH)) GTEST_SKIP() << ATTNSCOPE_FONT_PATH << " not installed";
        createHeadlessImGui();
        ImGui::NewFrame();  // a current font
    }
    void TearDown() override
    {
        if (ImGui::GetCurrentContext()) {
            ImGui::Render();
            ImGui::DestroyContext();
        }
    }
};

TEST_F(Fonts, MissingGlyphsShowTheReplacementMark)
{
    ImFont* f = ImGui::GetFont();
    EXPECT_EQ(f->FallbackChar, ImWchar(0xFFFD)) << "not '?'";
    EXPECT_NE(f->FindGlyphNoFallback(0xFFFD), nullptr);
}

TEST_F(Fonts, CjkTokensHaveGlyphs)
{
    if (!std::filesystem::exists(ATTNSCOPE_CJK_FONT_PATH))
        GTEST_SKIP() << ATTNSCOPE_CJK_FONT_PATH << " not installed (Debian fonts-droid-fallback)";
    ImFont* f = ImGui::GetFont();
    for (ImWchar c : {ImWchar(0x6211), ImWchar(0x4F60), ImWchar(0x3042), ImWchar(0x30AB)})  // 我 你 あ カ
        EXPECT_NE(f->FindGlyphNoFallback(c), nullptr) << "U+" << std::hex << int(c);
    EXPECT_NE(f->FindGlyphNoFallback('A'), nullptr) << "Latin still from DejaVu";
}

} // namespace
