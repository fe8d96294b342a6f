// Text the window draws but did not write (a model's tokens, axis labels), in the order ImGui can draw it.
//
// ImGui draws one glyph per character, left to right. A token in a right-to-left script (Hebrew, Arabic, Persian,
// Urdu, Syriac, Thaana) therefore read backwards, and Arabic letters stood in their isolated forms. visualOrder()
// gives Arabic letters their joined forms (ICU's u_shapeArabic: the presentation forms, which DejaVu Sans has) and
// puts each right-to-left run in visual order (ICU's bidi algorithm, in a left-to-right paragraph: a token's
// leading space stays on its left, as beside the other tokens of the strip). Text without right-to-left characters
// comes back as it is, at the cost of one pass over its bytes. Fields being edited keep the logical order.
#pragma once

#include <string>
#include <string_view>

namespace app {

std::string visualOrder(std::string_view utf8);

// For a token whose bytes are not whole UTF-8 characters (a byte-fallback token, or a byte-level BPE token that cuts
// a character: the token strip shows it as U+FFFD): "bytes E6 97 (part of a UTF-8 character)", naming each byte
// in hex (at most eight, then "…"). "" for a token of whole characters.
std::string partialCharacterNote(std::string_view rawBytes);

} // namespace app
