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

} // namespace app
