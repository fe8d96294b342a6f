// The window's font (issue 21; panels/glyph_atlas.h): CJK tokens draw as their glyphs when Droid Sans Fallback is
// installed, and a glyph no font has shows as the replacement mark U+FFFD, not as '?' (which reads as the text's
// own). Every script DejaVu Sans has is there from the start; other characters are added when text asks for them,
// from the installed font fontconfig finds, and one no font has is asked for once.
#include "headless_imgui.h"
#include "messages.h"
#include "panels/display_text.h"
#include "panels/glyph_atlas.h"

#include <imgui.h>

#include <fontconfig/fontconfig.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string>

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

const ImFontGlyph* glyph(ImWchar c) { return ImGui::GetIO().Fonts->Fonts[0]->FindGlyphNoFallback(c); }

// The window rebuilds the atlas between frames (Platform::beginFrame): after one frame's Render, before the next.
bool rebuildBetweenFrames()
{
    ImGui::Render();
    const bool rebuilt = app::rebuildGlyphAtlasIfNeeded();
    ImGui::NewFrame();
    return rebuilt;
}

// Whether fontconfig lists an outline font (not a colour one) with character c: the fonts the atlas may take it
// from. Asked with FcFontList, not the atlas's FcFontSort, so that the two answers are independent.
bool installedOutlineFontHas(char32_t c)
{
    FcPattern* p = FcPatternCreate();
    FcCharSet* cs = FcCharSetCreate();
    FcCharSetAddChar(cs, c);
    FcPatternAddCharSet(p, FC_CHARSET, cs);
    FcObjectSet* os = FcObjectSetBuild(FC_FILE, FC_COLOR, nullptr);
    FcFontSet* fs = FcFontList(nullptr, p, os);
    bool found = false;
    for (int i = 0; fs && i < fs->nfont && !found; ++i) {
        FcChar8* file = nullptr;
        FcBool colour = FcFalse;
        FcPatternGetBool(fs->fonts[i], FC_COLOR, 0, &colour);
        if (FcPatternGetString(fs->fonts[i], FC_FILE, 0, &file) != FcResultMatch || colour) continue;
        std::string ext = std::filesystem::path(reinterpret_cast<const char*>(file)).extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
        found = ext == ".ttf" || ext == ".otf" || ext == ".ttc" || ext == ".otc";
    }
    if (fs) FcFontSetDestroy(fs);
    FcObjectSetDestroy(os);
    FcCharSetDestroy(cs);
    FcPatternDestroy(p);
    return found;
}

TEST_F(Fonts, EveryScriptOfDejaVuSansIsThereFromTheStart)
{
    // Cyrillic Ж, Polish ł, Hungarian ő, Vietnamese ệ, the euro sign, Hebrew ש, Arabic ب, Armenian Ա, Georgian ა:
    // each showed as U+FFFD when the atlas held Latin-1, Greek, arrows and maths only.
    for (ImWchar c : {0x0416, 0x0142, 0x0151, 0x1EC7, 0x20AC, 0x05E9, 0x0628, 0x0531, 0x10D0})
        EXPECT_NE(glyph(c), nullptr) << "U+" << std::hex << int(c);
    app::wantGlyphs("Привет, мир! Zażółć gęślą jaźń. Tiếng Việt. 5 € שלום");
    EXPECT_FALSE(rebuildBetweenFrames()) << "nothing to add";
    EXPECT_EQ(app::glyphAtlasStats().rebuilds, 1);
    EXPECT_GT(app::glyphAtlasStats().glyphs, 5000) << "DejaVu Sans's BMP";
}

TEST_F(Fonts, ARareIdeographIsAddedWhenTextAsksForIt)
{
    if (!std::filesystem::exists(ATTNSCOPE_CJK_FONT_PATH)) GTEST_SKIP() << ATTNSCOPE_CJK_FONT_PATH << " not installed";
    const ImWchar toge = 0x5CE0;  // 峠: Japanese, not among the common Chinese ideographs loaded at start
    ASSERT_EQ(glyph(toge), nullptr);
    app::wantGlyphs("the pass \u5CE0");
    EXPECT_TRUE(rebuildBetweenFrames());
    EXPECT_NE(glyph(toge), nullptr) << "Droid Sans Fallback has it";
    EXPECT_NE(glyph(0x6211), nullptr) << "the common ones stay";
    EXPECT_NE(glyph(0x0416), nullptr) << "DejaVu's stay";
    EXPECT_EQ(app::glyphAtlasStats().added, 1);
    app::wantGlyphs("\u5CE0 again");
    EXPECT_FALSE(rebuildBetweenFrames()) << "asked once";
    // The atlas the renderer uploads has it: the texture is built.
    unsigned char* px = nullptr;
    int w = 0, h = 0;
    ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&px, &w, &h);
    EXPECT_NE(px, nullptr);
    EXPECT_GT(w * h, 0);
}

TEST_F(Fonts, ACharacterFromAnInstalledFontOrTheReplacementMark)
{
    // Hangul, which neither DejaVu Sans nor Droid Sans Fallback has: from another installed font (scripts/setup.sh
    // installs fonts-unifont) when fontconfig lists one, else unavailable, with a warning naming it.
    const char32_t han = 0xD55C;  // 한
    ASSERT_EQ(glyph(ImWchar(han)), nullptr);
    const bool installed = installedOutlineFontHas(han);
    app::wantGlyphs("\uD55C\uAD6D\uC5B4");  // 한국어
    EXPECT_TRUE(rebuildBetweenFrames());
    const app::GlyphAtlasStats st = app::glyphAtlasStats();
    if (installed) {
        EXPECT_NE(glyph(ImWchar(han)), nullptr);
        EXPECT_EQ(st.added, 3);
        EXPECT_EQ(st.unavailable, 0);
        EXPECT_GE(st.fonts.size(), 2u) << "DejaVu Sans and the font with Hangul";
    } else {
        EXPECT_EQ(glyph(ImWchar(han)), nullptr);
        EXPECT_EQ(st.unavailable, 3);
    }
}

// fontconfig's current configuration replaced, for one test, by one that knows only the fonts of `dir`.
class OnlyFontsOf {
public:
    explicit OnlyFontsOf(const std::string& dir)
    {
        FcInit();
        m_saved = FcConfigReference(nullptr);
        FcConfig* only = FcConfigCreate();
        FcConfigAppFontAddDir(only, reinterpret_cast<const FcChar8*>(dir.c_str()));
        FcConfigSetCurrent(only);
        FcConfigDestroy(only);  // the current configuration holds it
    }
    ~OnlyFontsOf()
    {
        FcConfigSetCurrent(m_saved);
        FcConfigDestroy(m_saved);
    }
    OnlyFontsOf(const OnlyFontsOf&) = delete;
    OnlyFontsOf& operator=(const OnlyFontsOf&) = delete;

private:
    FcConfig* m_saved = nullptr;
};

TEST_F(Fonts, ACharacterNoFontHasIsAskedForOnceAndNamed)
{
    // Unifont (scripts/setup.sh installs it) has a glyph for every BMP code point, so the fonts fontconfig knows are
    // narrowed to DejaVu's; Droid Sans Fallback, which the atlas always asks, lacks it too.
    const OnlyFontsOf dejavu(std::filesystem::path(ATTNSCOPE_FONT_PATH).parent_path().string());
    const char32_t unassigned = 0x0378;  // in the Greek block, assigned to nothing
    ASSERT_FALSE(installedOutlineFontHas(unassigned));
    app::wantGlyphs("\u0378");
    EXPECT_TRUE(rebuildBetweenFrames());
    EXPECT_EQ(glyph(ImWchar(unassigned)), nullptr);
    EXPECT_EQ(app::glyphAtlasStats().unavailable, 1);
    EXPECT_EQ(app::glyphAtlasStats().added, 0);
    bool named = false;
    for (const app::Message& m : app::messageLog()) named |= m.text.find("No installed font has U+0378") != std::string::npos;
    EXPECT_TRUE(named) << "the warning names the character";
    app::wantGlyphs("\u0378");
    EXPECT_FALSE(rebuildBetweenFrames()) << "not asked again";
    EXPECT_EQ(ImGui::GetFont()->FallbackChar, ImWchar(0xFFFD));
}

TEST_F(Fonts, TheCharactersAddedAreCapped)
{
    // Every unified ideograph and Hangul syllable at once (a text that holds them, or a vocabulary shown whole):
    // the atlas takes kMaxAddedGlyphs of those it lacks and no more, so that its texture stays bounded; the rest
    // show the replacement mark, and a warning says so.
    std::string text;
    int asked = 0;
    const int before = app::glyphAtlasStats().glyphs;
    auto put = [&](char32_t c) {  // UTF-8 of a three-byte character
        text += char(0xE0 | (c >> 12));
        text += char(0x80 | ((c >> 6) & 0x3F));
        text += char(0x80 | (c & 0x3F));
        if (!glyph(ImWchar(c))) ++asked;
    };
    for (char32_t c = 0x4E00; c <= 0x9FFF; ++c) put(c);
    for (char32_t c = 0xAC00; c <= 0xD7A3; ++c) put(c);
    ASSERT_GT(asked, int(app::kMaxAddedGlyphs));
    app::wantGlyphs(text);
    EXPECT_TRUE(rebuildBetweenFrames());
    const app::GlyphAtlasStats st = app::glyphAtlasStats();
    EXPECT_LE(st.added, int(app::kMaxAddedGlyphs));
    EXPECT_EQ(st.added + st.unavailable, asked) << "each character asked for is added or unavailable";
    EXPECT_LE(st.glyphs, before + int(app::kMaxAddedGlyphs));
    bool warned = false;
    for (const app::Message& m : app::messageLog())
        warned |= m.text.find("holds " + std::to_string(app::kMaxAddedGlyphs)) != std::string::npos;
    EXPECT_TRUE(warned);
    app::wantGlyphs(text);
    EXPECT_FALSE(rebuildBetweenFrames()) << "the characters past the cap are not asked again";
}

TEST_F(Fonts, BadUtf8AndCharactersPastTheBmpAskForNothing)
{
    // Bad bytes, a truncated sequence, an encoded surrogate, C1 controls, and an emoji (past U+FFFF: ImGui 1.86
    // with 16-bit characters draws it as U+FFFD whatever the fonts).
    for (const char* s : {"\xff\xfe\x80", "ab\xe5\xb3", "\xed\xa0\x80", "\xc2\x85", "\xf0\x9f\x98\x80", ""})
        app::wantGlyphs(s);
    EXPECT_FALSE(rebuildBetweenFrames());
    EXPECT_EQ(app::glyphAtlasStats().unavailable, 0);
}

TEST(GlyphCodes, CharactersPastTheBmpAreNamedByTheirCodePoints)
{
    // What the window prints beside a token it cannot draw whole (the predictions, the token's tooltip).
    EXPECT_EQ(app::codesPastTheBmp("\xf0\x9f\x98\x80"), "U+1F600");                 // 😀
    EXPECT_EQ(app::codesPastTheBmp("a\xf0\x9f\x98\x80" "b\xf0\x9f\x91\x8d"), "U+1F600 U+1F44D");
    EXPECT_EQ(app::codesPastTheBmp("\xf0\xa0\x80\x8b"), "U+2000B");                 // an ideograph of plane 2
    EXPECT_EQ(app::codesPastTheBmp("\u65E5\u672C caf\u00E9"), "") << "the BMP is drawn";
    EXPECT_EQ(app::codesPastTheBmp(std::string(5 * 4, '\0').replace(0, 20,
                  "\xf0\x9f\x98\x80\xf0\x9f\x98\x81\xf0\x9f\x98\x82\xf0\x9f\x98\x83\xf0\x9f\x98\x84")),
              "U+1F600 U+1F601 U+1F602 U+1F603 \u2026");
    // Bad UTF-8: truncated, overlong, past U+10FFFF, a lone continuation.
    for (const char* bad : {"\xf0\x9f\x98", "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\x80\x80\x80\x80", ""})
        EXPECT_EQ(app::codesPastTheBmp(bad), "") << bad;
}

// UTF-8 of the code points `cps`, for the expectations below.
std::string utf8Of(std::initializer_list<char32_t> cps)
{
    std::string out;
    for (char32_t c : cps) {
        if (c < 0x80) out += char(c);
        else if (c < 0x800) out += char(0xC0 | (c >> 6)), out += char(0x80 | (c & 0x3F));
        else out += char(0xE0 | (c >> 12)), out += char(0x80 | ((c >> 6) & 0x3F)), out += char(0x80 | (c & 0x3F));
    }
    return out;
}

TEST(VisualOrder, RightToLeftRunsAreDrawnInVisualOrderWithArabicJoined)
{
    // Hebrew: the letters of a run reversed (ImGui draws left to right); a token's leading space stays on its left,
    // and left-to-right words around a run keep their places. Digits after a run join it (the bidi algorithm's
    // rules W and N1: "של 12" reads right to left as a whole, so 12 is drawn on its left).
    EXPECT_EQ(app::visualOrder(utf8Of({0x05E9, 0x05DC, 0x05D5, 0x05DD})), utf8Of({0x05DD, 0x05D5, 0x05DC, 0x05E9}));  // שלום
    EXPECT_EQ(app::visualOrder(utf8Of({' ', 0x05E9, 0x05DC})), utf8Of({' ', 0x05DC, 0x05E9}));
    EXPECT_EQ(app::visualOrder(utf8Of({'a', 'b', ' ', 0x05E9, 0x05DC, ' ', 'c', 'd'})),
              utf8Of({'a', 'b', ' ', 0x05DC, 0x05E9, ' ', 'c', 'd'}));
    EXPECT_EQ(app::visualOrder(utf8Of({'a', 'b', ' ', 0x05E9, 0x05DC, ' ', '1', '2'})),
              utf8Of({'a', 'b', ' ', '1', '2', ' ', 0x05DC, 0x05E9}));
    // Arabic: the presentation forms by the joining rules, then reversed. بب: an initial then a final beh.
    EXPECT_EQ(app::visualOrder(utf8Of({0x0628, 0x0628})), utf8Of({0xFE90, 0xFE91}));
    // سلام: seen initial, lam + alef as one final ligature (alef joins only to its right), meem isolated.
    EXPECT_EQ(app::visualOrder(utf8Of({0x0633, 0x0644, 0x0627, 0x0645})), utf8Of({0xFEE1, 0xFEFC, 0xFEB3}));
    // Everything else as it is.
    for (const std::string t : {std::string("the cat"), utf8Of({0x041A, 0x043E, 0x0442}), utf8Of({0x65E5, 0x672C}),
                                std::string("\xf0\x9f\x98\x80"), std::string()})
        EXPECT_EQ(app::visualOrder(t), t);
    // Bad UTF-8 with a right-to-left lead byte: no crash, and UTF-8 back.
    const std::string bad = app::visualOrder("\xd7\xd7\x80\xef\xbb");
    EXPECT_FALSE(bad.empty());
}

TEST(PartialCharacters, ATokenThatCutsACharacterNamesItsBytes)
{
    // 峠 is E5 B3 A0: a byte-fallback token holds one of those bytes, a byte-level BPE token may hold two.
    EXPECT_EQ(app::partialCharacterNote("\xe5"), "byte E5 (part of a UTF-8 character)");
    EXPECT_EQ(app::partialCharacterNote("\xe5\xb3"), "bytes E5 B3 (part of a UTF-8 character)");
    EXPECT_EQ(app::partialCharacterNote("\xa0 the"), "bytes A0 20 74 68 65 (part of a UTF-8 character)");
    EXPECT_EQ(app::partialCharacterNote("\xc0\x80"), "bytes C0 80 (part of a UTF-8 character)") << "overlong";
    EXPECT_EQ(app::partialCharacterNote(std::string(10, '\xb3')),
              "bytes B3 B3 B3 B3 B3 B3 B3 B3 \u2026 (part of a UTF-8 character)");
    // Whole characters: nothing to say.
    for (const char* whole : {"", " the", "\xe5\xb3\xa0", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "<0xE5>"})
        EXPECT_EQ(app::partialCharacterNote(whole), "") << whole;
}

TEST_F(Fonts, ANewContextStartsFromItsOwnAtlas)
{
    if (!std::filesystem::exists(ATTNSCOPE_CJK_FONT_PATH)) GTEST_SKIP() << ATTNSCOPE_CJK_FONT_PATH << " not installed";
    app::wantGlyphs("\u5CE0");
    ASSERT_TRUE(rebuildBetweenFrames());
    ImGui::Render();
    ImGui::DestroyContext();
    createHeadlessImGui();
    ImGui::NewFrame();
    EXPECT_EQ(glyph(0x5CE0), nullptr) << "a new atlas holds what it starts with";
    EXPECT_EQ(app::glyphAtlasStats().added, 0);
    app::wantGlyphs("\u5CE0");
    EXPECT_TRUE(rebuildBetweenFrames()) << "and is asked again";
    EXPECT_NE(glyph(0x5CE0), nullptr);
}

} // namespace
