#include "panels/glyph_atlas.h"

#include "messages.h"
#include "panels/style.h"

#include <imgui.h>

#include <fontconfig/fontconfig.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

namespace app {
namespace {

using FontKey = std::pair<std::string, int>;  // a font file and the face's index in it (a .ttc collection)

struct AtlasState {
    ImFontAtlas* atlas = nullptr;      // the atlas described here; another context's starts over
    bool builtIn = false;              // DejaVu Sans missing: ImGui's built-in font, nothing is added
    std::vector<bool> known;           // per BMP character: in the atlas, asked for, or unavailable
    std::vector<char32_t> pending;     // asked for since the last build
    std::map<FontKey, std::vector<char32_t>> perFont;  // what each font beyond the first gives
    int added = 0, unavailable = 0, rebuilds = 0;
    double lastBuildMs = 0;
    std::vector<std::vector<ImWchar>> ranges;  // ImGui keeps pointers to these until the next build
};

AtlasState& state()
{
    static AtlasState s;
    return s;
}

bool readable(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return false;
    std::ifstream f(path, std::ios::binary);
    return f.good();
}

// Fonts ImGui's rasterizer (stb_truetype) reads: TrueType and OpenType files and collections.
bool outlineFontFile(const std::string& path)
{
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return ext == ".ttf" || ext == ".otf" || ext == ".ttc" || ext == ".otc";
}

// `cps` (sorted, unique) appended to `out` as ImGui's ranges: a pair per run of consecutive characters.
void appendRuns(const std::vector<char32_t>& cps, std::vector<ImWchar>& out)
{
    for (std::size_t i = 0; i < cps.size();) {
        std::size_t j = i;
        while (j + 1 < cps.size() && cps[j + 1] == cps[j] + 1) ++j;
        out.push_back(ImWchar(cps[i]));
        out.push_back(ImWchar(cps[j]));
        i = j + 1;
    }
}

// f(c) for each well-formed character of `utf8` (ICU's U8_NEXT; ill-formed bytes and overlong forms are skipped).
template <class F>
void forEachCharacter(std::string_view utf8, F f)
{
    const auto* b = reinterpret_cast<const std::uint8_t*>(utf8.data());
    const std::int32_t n = std::int32_t(std::min<std::size_t>(utf8.size(), INT32_MAX));  // what is drawn is far shorter
    for (std::int32_t i = 0; i < n;) {
        UChar32 c = 0;
        U8_NEXT(b, i, n, c);
        if (c >= 0) f(char32_t(c));
    }
}

// For each character, the first font in fontconfig's fallback order for sans-serif that has it, among outline
// fonts that are not colour fonts (stb_truetype draws neither bitmaps nor colour layers). Characters fontconfig
// finds in no font go to Droid Sans Fallback, the broad fallback always asked (fontconfig's lists may differ from
// what the font holds): ImGui's builder skips those it lacks.
std::map<FontKey, std::vector<char32_t>> installedFontsFor(const std::vector<char32_t>& cps)
{
    std::map<FontKey, std::vector<char32_t>> out;
    std::vector<bool> found(cps.size(), false);
    auto rest = [&] {
        for (std::size_t k = 0; k < cps.size(); ++k)
            if (!found[k]) out[{ATTNSCOPE_CJK_FONT_PATH, 0}].push_back(cps[k]);
        return out;
    };
    if (cps.empty() || !FcInit()) return rest();
    FcPattern* pattern = FcNameParse(reinterpret_cast<const FcChar8*>("sans-serif"));
    if (!pattern) return rest();
    FcConfigSubstitute(nullptr, pattern, FcMatchPattern);
    FcDefaultSubstitute(pattern);
    FcResult result = FcResultNoMatch;
    FcFontSet* fonts = FcFontSort(nullptr, pattern, FcFalse, nullptr, &result);
    FcPatternDestroy(pattern);
    if (!fonts) return rest();
    std::size_t left = cps.size();
    for (int i = 0; i < fonts->nfont && left > 0; ++i) {
        FcPattern* p = fonts->fonts[i];
        FcChar8* file = nullptr;
        FcCharSet* chars = nullptr;
        if (FcPatternGetString(p, FC_FILE, 0, &file) != FcResultMatch || !file ||
            FcPatternGetCharSet(p, FC_CHARSET, 0, &chars) != FcResultMatch || !chars)
            continue;
        FcBool colour = FcFalse;
        if (FcPatternGetBool(p, FC_COLOR, 0, &colour) == FcResultMatch && colour) continue;
        const std::string path(reinterpret_cast<const char*>(file));
        if (!outlineFontFile(path)) continue;
        int index = 0;
        FcPatternGetInteger(p, FC_INDEX, 0, &index);
        std::vector<char32_t>* mine = nullptr;
        for (std::size_t k = 0; k < cps.size(); ++k) {
            if (found[k] || !FcCharSetHasChar(chars, cps[k])) continue;
            if (!mine) mine = &out[{path, index & 0xFFFF}];  // the upper half names a variable font's instance
            mine->push_back(cps[k]);
            found[k] = true;
            --left;
        }
    }
    FcFontSetDestroy(fonts);
    return rest();
}

// Clears the context's atlas and adds its fonts: DejaVu Sans's whole BMP, Droid Sans Fallback's common CJK and
// what it was asked for, and each other font's characters. Returns whether the atlas was built.
bool buildFonts(AtlasState& s)
{
    ImFontAtlas* fonts = ImGui::GetIO().Fonts;
    fonts->Clear();
    s.ranges.clear();
    s.ranges.reserve(s.perFont.size() + 2);  // no reallocation: ImGui points into them
    const std::string dejavu = ATTNSCOPE_FONT_PATH, droid = ATTNSCOPE_CJK_FONT_PATH;
    // Every glyph DejaVu Sans has up to the replacement mark (ImGui's builder skips those it lacks): about 5,700.
    // The atlas with the common CJK then takes 59 ms to build against 33 ms with the Latin-1/Greek/arrows/maths
    // subset it was (one standalone build of each on the development machine), once at start.
    // U+FFFD is the fallback: a glyph no font has shows as that visible mark, not as a '?' that reads as the text's.
    static const ImWchar kBmp[] = {0x0020, 0xFFFD, 0};
    ImFontConfig cfg;
    cfg.OversampleH = 2;
    s.builtIn = !readable(dejavu) || !fonts->AddFontFromFileTTF(dejavu.c_str(), kFontSize, &cfg, kBmp);
    if (s.builtIn) {
        fonts->Clear();
        fonts->AddFontDefault();
        return fonts->Build();
    }
    auto merge = [&](const std::string& path, int index, std::vector<ImWchar> ranges) {
        if (ranges.empty() || !readable(path)) return;
        ranges.push_back(0);
        s.ranges.push_back(std::move(ranges));
        ImFontConfig m;
        m.MergeMode = true;
        m.OversampleH = 1;
        m.FontNo = index;
        fonts->AddFontFromFileTTF(path.c_str(), kFontSize, &m, s.ranges.back().data());
    };
    // CJK: the common Chinese ideographs with kana and CJK punctuation (ImGui's ChineseSimplifiedCommon, about
    // 2,500) from Droid Sans Fallback (Debian's fonts-droid-fallback), with the rarer ones asked for.
    std::vector<ImWchar> cjk;
    for (const ImWchar* r = fonts->GetGlyphRangesChineseSimplifiedCommon(); *r; ++r) cjk.push_back(*r);
    if (auto it = s.perFont.find({droid, 0}); it != s.perFont.end()) appendRuns(it->second, cjk);
    merge(droid, 0, std::move(cjk));
    for (const auto& [font, cps] : s.perFont) {
        if (font.first == dejavu || font == FontKey{droid, 0}) continue;
        std::vector<ImWchar> ranges;
        appendRuns(cps, ranges);
        merge(font.first, font.second, std::move(ranges));
    }
    return fonts->Build();
}

bool build(AtlasState& s)
{
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = buildFonts(s);
    s.lastBuildMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return ok;
}

} // namespace

std::string setupGlyphAtlas()
{
    AtlasState& s = state();
    s = AtlasState{};
    s.atlas = ImGui::GetIO().Fonts;
    s.known.assign(0x10000, false);
    clearBatched("glyphs-unavailable");  // a new atlas names what it lacks again
    clearBatched("glyph-atlas-full");
    build(s);
    s.rebuilds = 1;
    if (s.builtIn) return std::string("font ") + ATTNSCOPE_FONT_PATH + " not found (install fonts-dejavu-core); using ImGui's built-in font";
    return "";
}

void wantGlyphs(std::string_view utf8)
{
    AtlasState& s = state();
    if (s.builtIn || !ImGui::GetCurrentContext() || ImGui::GetIO().Fonts != s.atlas || s.atlas->Fonts.empty()) return;
    const ImFont* font = s.atlas->Fonts[0];
    forEachCharacter(utf8, [&](char32_t cp) {
        // ASCII is always there, C1 controls are not drawn, and past U+FFFF cannot be in the atlas.
        if (cp < 0xA0 || cp >= 0xFFFE || s.known[cp]) return;
        s.known[cp] = true;
        if (!font->FindGlyphNoFallback(ImWchar(cp))) s.pending.push_back(cp);
    });
}

bool rebuildGlyphAtlasIfNeeded()
{
    AtlasState& s = state();
    if (s.pending.empty() || s.builtIn || !ImGui::GetCurrentContext() || ImGui::GetIO().Fonts != s.atlas) return false;
    std::vector<char32_t> asked;
    asked.swap(s.pending);
    std::sort(asked.begin(), asked.end());
    const std::size_t room = kMaxAddedGlyphs > std::size_t(s.added) ? kMaxAddedGlyphs - std::size_t(s.added) : 0;
    if (asked.size() > room) {
        s.unavailable += int(asked.size() - room);
        asked.resize(room);
        postWarningOnce("glyph-atlas-full", "The window's font atlas holds " + std::to_string(kMaxAddedGlyphs) +
                                                " characters added for the text shown; further ones show as \uFFFD "
                                                "(figures and exported data have them all)");
        if (asked.empty()) return false;
    }
    const auto before = s.perFont;
    for (const auto& [font, cps] : installedFontsFor(asked)) {
        std::vector<char32_t>& mine = s.perFont[font];
        mine.insert(mine.end(), cps.begin(), cps.end());
        std::sort(mine.begin(), mine.end());
        mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    }
    ++s.rebuilds;
    if (!build(s)) {
        // A font ImGui could not read after all: back to the last atlas, the characters asked for unavailable.
        s.perFont = before;
        build(s);
    }
    const ImFont* font = s.atlas->Fonts.empty() ? nullptr : s.atlas->Fonts[0];
    std::string missing;
    int listed = 0;
    for (char32_t c : asked) {
        if (font && font->FindGlyphNoFallback(ImWchar(c))) {
            ++s.added;
            continue;
        }
        ++s.unavailable;
        if (listed++ < 8) {
            char code[16];
            std::snprintf(code, sizeof code, "%sU+%04X", missing.empty() ? "" : ", ", unsigned(c));
            missing += code;
        }
    }
    if (!missing.empty())
        postWarningOnce("glyphs-unavailable", "No installed font has " + missing + (listed > 8 ? ", …" : "") +
                                                  ": the window shows \uFFFD for them (figures and exported data keep "
                                                  "them). A font that has them, such as Debian's fonts-noto-core or "
                                                  "fonts-noto-cjk, is used from the next start.");
    return true;
}

std::string codesPastTheBmp(std::string_view utf8)
{
    std::string out;
    int listed = 0;
    forEachCharacter(utf8, [&](char32_t cp) {
        if (cp < 0x10000 || listed > 4) return;
        if (listed++ == 4) {
            out += " \u2026";
            return;
        }
        char code[16];
        std::snprintf(code, sizeof code, "%sU+%04X", out.empty() ? "" : " ", unsigned(cp));
        out += code;
    });
    return out;
}

GlyphAtlasStats glyphAtlasStats()
{
    const AtlasState& s = state();
    GlyphAtlasStats st;
    st.added = s.added;
    st.unavailable = s.unavailable;
    st.rebuilds = s.rebuilds;
    st.lastBuildMs = s.lastBuildMs;
    if (ImGui::GetCurrentContext() && ImGui::GetIO().Fonts == s.atlas) {
        if (!s.atlas->Fonts.empty()) st.glyphs = s.atlas->Fonts[0]->Glyphs.Size;
        for (const ImFontConfig& c : s.atlas->ConfigData) {
            std::string name = c.Name;  // "DejaVuSans.ttf, 14px": the file's name as ImGui records it
            if (const auto comma = name.find(','); comma != std::string::npos) name.resize(comma);
            if (std::find(st.fonts.begin(), st.fonts.end(), name) == st.fonts.end()) st.fonts.push_back(name);
        }
    }
    return st;
}

} // namespace app
