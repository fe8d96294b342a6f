#include "panels/display_text.h"

#include <attnscope/bpe_tokenizer.h>

#include <unicode/ubidi.h>
#include <unicode/unistr.h>
#include <unicode/ushape.h>

#include <unordered_map>
#include <vector>

namespace app {
namespace {

// Whether `s` may hold a right-to-left character, by the UTF-8 lead bytes of the BMP's right-to-left blocks:
// U+0580-U+07FF (Hebrew, Arabic, Syriac, Thaana, NKo; Armenian's last row too), U+0800-U+08FF (Samaritan, Mandaic,
// Arabic Extended) and U+FB00-U+FEFF (Hebrew and Arabic presentation forms). A false positive only costs the ICU
// pass, which leaves left-to-right text as it is.
bool mayHoldRightToLeft(std::string_view s)
{
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (b[i] >= 0xD6 && b[i] <= 0xDF) return true;
        if (i + 1 < s.size() && b[i] == 0xE0 && b[i + 1] >= 0xA0 && b[i + 1] <= 0xA3) return true;
        if (i + 1 < s.size() && b[i] == 0xEF && b[i + 1] >= 0xAC && b[i + 1] <= 0xBB) return true;
    }
    return false;
}

std::string reorder(std::string_view utf8)
{
    const icu::UnicodeString text = icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), int32_t(utf8.size())));
    const int32_t n = text.length();
    // Joined forms first (shaping reads the logical order); lam + alef become one ligature, so it can only shrink.
    std::vector<UChar> shaped(std::size_t(n) + 1);
    UErrorCode err = U_ZERO_ERROR;
    int32_t m = u_shapeArabic(text.getBuffer(), n, shaped.data(), int32_t(shaped.size()), U_SHAPE_LETTERS_SHAPE, &err);
    if (U_FAILURE(err)) {  // as it was, unshaped
        err = U_ZERO_ERROR;
        text.extract(shaped.data(), int32_t(shaped.size()), err);
        m = n;
        if (U_FAILURE(err)) return std::string(utf8);
    }
    UBiDi* bidi = ubidi_openSized(m, 0, &err);
    if (!bidi || U_FAILURE(err)) return std::string(utf8);
    ubidi_setPara(bidi, shaped.data(), m, UBIDI_LTR, nullptr, &err);
    std::vector<UChar> visual(std::size_t(m) * 2 + 1);  // mirroring keeps the length; removed controls shrink it
    const int32_t v = U_SUCCESS(err) ? ubidi_writeReordered(bidi, visual.data(), int32_t(visual.size()),
                                                            UBIDI_DO_MIRRORING | UBIDI_REMOVE_BIDI_CONTROLS, &err)
                                     : 0;
    ubidi_close(bidi);
    if (U_FAILURE(err)) return std::string(utf8);
    std::string out;
    icu::UnicodeString(visual.data(), v).toUTF8String(out);
    return out;
}

} // namespace

std::string visualOrder(std::string_view utf8)
{
    if (!mayHoldRightToLeft(utf8)) return std::string(utf8);
    // Frames draw the same tokens again and again: their visual forms are kept (the window's thread only), up to a
    // bound past which the cache starts over.
    static std::unordered_map<std::string, std::string> cache;
    std::string key(utf8);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    if (cache.size() >= 16384) cache.clear();
    std::string out = reorder(utf8);
    cache.emplace(std::move(key), out);
    return out;
}

std::string partialCharacterNote(std::string_view raw)
{
    if (attn::firstInvalidUtf8(raw) == std::string_view::npos) return "";  // the tokenizers' own check
    const auto* b = reinterpret_cast<const unsigned char*>(raw.data());
    std::string out = raw.size() == 1 ? "byte" : "bytes";
    for (std::size_t i = 0; i < raw.size() && i < 8; ++i) {
        static const char* hex = "0123456789ABCDEF";
        out += ' ';
        out += hex[b[i] >> 4];
        out += hex[b[i] & 15];
    }
    if (raw.size() > 8) out += " \u2026";
    return out + " (part of a UTF-8 character)";
}

} // namespace app
