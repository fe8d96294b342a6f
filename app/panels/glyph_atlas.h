// The window's font atlas: which characters the window can draw (ImGui 1.86 draws only what its atlas holds;
// anything else shows as the replacement mark U+FFFD).
//
// At start the atlas holds every glyph of DejaVu Sans in the Basic Multilingual Plane (Latin in all its European
// and Vietnamese forms, Greek, Cyrillic, Armenian, Georgian, Hebrew, Arabic letters, currency signs, arrows,
// maths) and the common CJK ideographs with kana from Droid Sans Fallback. Text of other scripts (a model's
// tokens and predictions, a typed sentence, a file name) asks for its characters with wantGlyphs() as it is
// drawn; before the next frame the atlas is built again with them, each from the first installed font that has
// it (fontconfig's fallback order for sans-serif, outline fonts only), so that from the next frame on it shows.
// A character no installed font has is remembered and not asked for again.
//
// Limits, which are ImGui 1.86's as Debian builds it: characters past U+FFFF (emoji, rarer CJK) cannot be in the
// atlas (16-bit ImWchar: ImGui decodes them to U+FFFD), and text is not shaped (right-to-left runs and Arabic's
// joining are done before drawing, panels/display_text.h; the Indic scripts show without their conjuncts).
// Figures (cairo/Pango) have neither limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace app {

// Builds the current ImGui context's atlas as described above; forgets what an earlier context asked for.
// Returns "" or a warning (DejaVu Sans missing: ImGui's built-in font is used instead).
std::string setupGlyphAtlas();

// The characters of `utf8` (UTF-8; bad bytes are skipped) that the atlas lacks are asked for. Cheap for
// characters it has (a bit per character). Call from the thread that draws.
void wantGlyphs(std::string_view utf8);

// Between frames: when characters were asked for since the last build, builds the atlas again with them and
// returns true (the renderer must then upload the atlas's texture again). Otherwise returns false at once.
bool rebuildGlyphAtlasIfNeeded();

// The characters of `utf8` past U+FFFF, which the atlas can never hold (emoji among them), as code points the
// window can print beside the text: "U+1F600 U+1F44D" (at most four, then "…"); "" when there are none.
std::string codesPastTheBmp(std::string_view utf8);

struct GlyphAtlasStats {
    int glyphs = 0;        // glyphs in the atlas's font
    int added = 0;         // characters added since start on request
    int unavailable = 0;   // characters asked for that no installed font has (or past the cap)
    int rebuilds = 0;      // atlases built since start (the first included)
    double lastBuildMs = 0;  // the last build's time (fonts read, glyphs rasterized and packed)
    std::vector<std::string> fonts;  // the font files the atlas holds, the first being DejaVu Sans
};
GlyphAtlasStats glyphAtlasStats();

// At most this many characters are added on request (an atlas texture of about 4096 × 2048 at the UI's size);
// past it, further ones show the replacement mark and a warning says so once.
inline constexpr std::size_t kMaxAddedGlyphs = 20000;

} // namespace app
