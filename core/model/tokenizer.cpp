// BERT WordPiece tokenizer. See attnscope/tokenizer.h for the pipeline; the character classes follow Hugging
// Face tokenizers' BertNormalizer / BertPreTokenizer (normalizers/bert.rs, pre_tokenizers/bert.rs).
#include "attnscope/tokenizer.h"

#include "attnscope/preset_io.h"  // checkJsonDepth, clipForMessage

#include <nlohmann/json.hpp>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cstdint>

namespace attn {
using json = nlohmann::json;

namespace {

// Largest vocabulary accepted (BERT's is 30522, multilingual ones ~250k).
constexpr std::size_t kMaxVocab = 2'000'000;
// Longest word limit a tokenizer.json may set (Hugging Face uses 100); larger values only slow WordPiece down.
constexpr std::int64_t kMaxWordCharsLimit = 1'000'000;

// UTF-8 → code points; InvalidArgument naming the first bad byte.
Expected<std::vector<UChar32>> decodeUtf8(const std::string& s, const char* what)
{
    std::vector<UChar32> cps;
    cps.reserve(s.size());
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    const int32_t n = static_cast<int32_t>(s.size());
    for (int32_t i = 0; i < n;) {
        const int32_t at = i;
        UChar32 c;
        U8_NEXT(p, i, n, c);
        if (c < 0) return invalidArgument(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(at));
        cps.push_back(c);
    }
    return cps;
}

void appendUtf8(std::string& out, UChar32 c)
{
    char buf[4];
    int32_t len = 0;
    UBool err = false;
    U8_APPEND(reinterpret_cast<uint8_t*>(buf), len, 4, c, err);
    if (!err) out.append(buf, static_cast<std::size_t>(len));
}

bool isBertWhitespace(UChar32 c) { return c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c); }

bool isBertControl(UChar32 c)
{
    if (c == '\t' || c == '\n' || c == '\r') return false;
    const int8_t t = u_charType(c);  // "other" categories: Cc, Cf, Cn, Co, Cs
    return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED || t == U_PRIVATE_USE_CHAR ||
           t == U_SURROGATE;
}

bool isBertPunctuation(UChar32 c)
{
    if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return u_ispunct(c);  // general category P*
}

// The CJK Unified Ideograph blocks BERT pads with spaces (the list in Google's tokenization.py).
bool isCjk(UChar32 c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

} // namespace

Status Tokenizer::finish()
{
    if (m_vocab.find(m_unk) == m_vocab.end()) return invalidArgument("vocabulary: no unknown token " + m_unk);
    if (m_vocab.find(m_cls) == m_vocab.end()) return invalidArgument("vocabulary: no " + m_cls + " token");
    if (m_vocab.find(m_sep) == m_vocab.end()) return invalidArgument("vocabulary: no " + m_sep + " token");
    return Status::success();
}

Expected<Tokenizer> Tokenizer::fromTokenizerJson(const std::string& text)
{
    auto bad = [](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + m); };
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, kMaxJsonDepth, "tokenizer.json"));
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    Tokenizer t;
    auto model = j.find("model");
    if (model == j.end() || !model->is_object()) return bad("no \"model\" object");
    auto typeIt = model->find("type");
    const std::string type = (typeIt != model->end() && typeIt->is_string()) ? typeIt->get<std::string>() : std::string();
    if (type != "WordPiece")
        return makeError(StatusCode::Unsupported, "tokenizer.json: model.type \"" + type +
                                                      "\" is not supported (supported: WordPiece)");
    try {
        t.m_unk = model->value("unk_token", t.m_unk);
        t.m_prefix = model->value("continuing_subword_prefix", t.m_prefix);
        // Read as an integer explicitly: nlohmann's value<int>() converts a JSON float such as 1e81 to int,
        // which is undefined behaviour (found by tests/fuzz/fuzz_tokenizer under UBSan).
        if (auto m = model->find("max_input_chars_per_word"); m != model->end() && !m->is_null()) {
            if (!m->is_number_integer() || m->get<std::int64_t>() < 1 || m->get<std::int64_t>() > kMaxWordCharsLimit)
                return bad("model.max_input_chars_per_word: expected an integer in 1.." +
                           std::to_string(kMaxWordCharsLimit) + ", got " + clipForMessage(m->dump()));
            t.m_maxWordChars = static_cast<int>(m->get<std::int64_t>());
        }
        auto norm = j.find("normalizer");
        if (norm != j.end() && !norm->is_null()) {
            const std::string nt = norm->value("type", std::string());
            if (nt != "BertNormalizer")
                return makeError(StatusCode::Unsupported, "tokenizer.json: normalizer.type \"" + nt +
                                                              "\" is not supported (supported: BertNormalizer)");
            t.m_clean = norm->value("clean_text", true);
            t.m_chinese = norm->value("handle_chinese_chars", true);
            t.m_lowercase = norm->value("lowercase", true);
            auto sa = norm->find("strip_accents");
            // null means "as lowercase" (Hugging Face's BertNormalizer).
            t.m_stripAccents = (sa == norm->end() || sa->is_null()) ? t.m_lowercase : sa->get<bool>();
        }
    } catch (const json::exception& e) {
        return bad(std::string("a field has the wrong type: ") + e.what());
    }
    auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) return bad("model.vocab missing or not an object");
    if (vocab->size() > kMaxVocab) return bad("model.vocab has " + std::to_string(vocab->size()) + " entries, over the limit");
    t.m_idToToken.assign(vocab->size(), std::string());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        if (!it->is_number_unsigned() || it->get<std::uint64_t>() >= vocab->size())
            return bad("model.vocab[\"" + it.key() + "\"]: id must be an integer in 0.." +
                       std::to_string(vocab->size() - 1));
        const int id = static_cast<int>(it->get<std::uint64_t>());
        if (!t.m_idToToken[static_cast<std::size_t>(id)].empty())
            return bad("model.vocab: id " + std::to_string(id) + " is used twice");
        t.m_idToToken[static_cast<std::size_t>(id)] = it.key();
        t.m_vocab.emplace(it.key(), id);
    }
    auto added = j.find("added_tokens");
    if (added != j.end() && !added->is_null()) {
        if (!added->is_array()) return bad("added_tokens is not an array");
        for (std::size_t i = 0; i < added->size(); ++i) {
            const json& a = (*added)[i];
            auto content = a.is_object() ? a.find("content") : a.end();
            if (!a.is_object() || content == a.end() || !content->is_string() || content->get<std::string>().empty())
                return bad("added_tokens[" + std::to_string(i) + "]: expected an object with a non-empty \"content\" string");
            auto normalized = a.find("normalized");
            // normalized = true tokens would be matched in the normalised text: not supported, left to WordPiece.
            if (normalized != a.end() && normalized->is_boolean() && normalized->get<bool>()) continue;
            if (t.m_vocab.count(content->get<std::string>()) == 0) continue;  // no id to give it in this vocabulary
            t.m_added.push_back(content->get<std::string>());
        }
    }
    if (auto s = t.finish(); !s.ok()) return makeError(StatusCode::ParseError, "tokenizer.json: " + s.message);
    return t;
}

Expected<Tokenizer> Tokenizer::fromVocabTxt(const std::string& text, bool lowercase)
{
    Tokenizer t;
    t.m_lowercase = t.m_stripAccents = lowercase;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string tok = text.substr(start, end - start);
        if (!tok.empty() && tok.back() == '\r') tok.pop_back();
        if (t.m_idToToken.size() >= kMaxVocab) return makeError(StatusCode::ParseError, "vocab.txt: too many lines");
        t.m_vocab.emplace(tok, static_cast<int>(t.m_idToToken.size()));
        t.m_idToToken.push_back(std::move(tok));
        start = end + 1;
    }
    // Hugging Face's BertTokenizer never splits its special tokens.
    for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
        if (t.m_vocab.count(special)) t.m_added.emplace_back(special);
    if (auto s = t.finish(); !s.ok()) return makeError(StatusCode::ParseError, "vocab.txt: " + s.message);
    return t;
}

Expected<std::vector<std::string>> Tokenizer::pieces(const std::string& text) const
{
    if (m_added.empty()) return wordPieces(text);
    // Validate the whole text first, so that a bad byte's offset is the text's, not a segment's.
    if (auto cps = decodeUtf8(text, "text"); !cps) return cps.status();
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        // The earliest added token at or after pos, the longest one where several start there. A match in
        // valid UTF-8 always starts on a character boundary (UTF-8 is self-synchronising).
        std::size_t at = std::string::npos, len = 0;
        for (const std::string& a : m_added) {
            const std::size_t f = text.find(a, pos);
            if (f != std::string::npos && (f < at || (f == at && a.size() > len))) {
                at = f;
                len = a.size();
            }
        }
        const std::size_t end = at == std::string::npos ? text.size() : at;
        if (end > pos) {
            auto w = wordPieces(text.substr(pos, end - pos));
            if (!w) return w.status();
            out.insert(out.end(), w->begin(), w->end());
        }
        if (at == std::string::npos) break;
        out.push_back(text.substr(at, len));
        pos = at + len;
    }
    return out;
}

Expected<std::vector<std::string>> Tokenizer::wordPieces(const std::string& text) const
{
    auto cps = decodeUtf8(text, "text");
    if (!cps) return cps.status();

    // Normaliser.
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* nfd = m_stripAccents ? icu::Normalizer2::getNFDInstance(err) : nullptr;
    if (U_FAILURE(err)) return makeError(StatusCode::Internal, "ICU: no NFD normaliser");
    std::vector<UChar32> norm;
    norm.reserve(cps->size());
    auto pushLower = [&](UChar32 c) {
        if (!m_lowercase) { norm.push_back(c); return; }
        // Full per-character lowercase (e.g. U+0130 → "i̇"), with no context (as Rust's char::to_lowercase).
        icu::UnicodeString s(c);
        s.toLower(icu::Locale::getRoot());
        for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) norm.push_back(s.char32At(i));
    };
    for (UChar32 c : *cps) {
        if (m_clean) {
            if (c == 0 || c == 0xFFFD || isBertControl(c)) continue;
            if (isBertWhitespace(c)) c = ' ';
        }
        const bool cjk = m_chinese && isCjk(c);
        if (cjk) norm.push_back(' ');
        if (nfd) {
            icu::UnicodeString d;
            UErrorCode e2 = U_ZERO_ERROR;
            nfd->normalize(icu::UnicodeString(c), d, e2);
            for (int32_t i = 0; i < d.length(); i = d.moveIndex32(i, 1)) {
                const UChar32 x = d.char32At(i);
                if (u_charType(x) != U_NON_SPACING_MARK) pushLower(x);
            }
        } else pushLower(c);
        if (cjk) norm.push_back(' ');
    }

    // Pre-tokeniser: words split on whitespace, punctuation isolated.
    std::vector<std::vector<UChar32>> words;
    std::vector<UChar32> cur;
    auto flush = [&] { if (!cur.empty()) { words.push_back(std::move(cur)); cur.clear(); } };
    for (UChar32 c : norm) {
        if (u_isUWhiteSpace(c) || c == '\t' || c == '\n' || c == '\r') flush();
        else if (isBertPunctuation(c)) { flush(); words.push_back({c}); }
        else cur.push_back(c);
    }
    flush();

    // WordPiece: greedy longest match first.
    std::vector<std::string> out;
    for (const auto& w : words) {
        if (static_cast<int>(w.size()) > m_maxWordChars) { out.push_back(m_unk); continue; }
        std::vector<std::string> pieces;
        std::size_t start = 0;
        bool ok = true;
        while (start < w.size()) {
            std::size_t end = w.size();
            std::string found;
            while (end > start) {
                std::string sub = start > 0 ? m_prefix : std::string();
                for (std::size_t i = start; i < end; ++i) appendUtf8(sub, w[i]);
                if (m_vocab.count(sub)) { found = std::move(sub); break; }
                --end;
            }
            if (found.empty()) { ok = false; break; }
            pieces.push_back(std::move(found));
            start = end;
        }
        if (ok) out.insert(out.end(), pieces.begin(), pieces.end());
        else out.push_back(m_unk);
    }
    return out;
}

Expected<std::vector<std::string>> Tokenizer::tokenize(const std::string& text) const { return pieces(text); }

Expected<Encoding> Tokenizer::encode(const std::string& a, const std::optional<std::string>& b, int maxLength) const
{
    auto ta = pieces(a);
    if (!ta) return ta.status();
    std::vector<std::string> tb;
    if (b) {
        auto r = pieces(*b);
        if (!r) return makeError(r.status().code, "pair " + r.status().message);
        tb = std::move(*r);
    }
    const int specials = b ? 3 : 2;
    if (maxLength < specials)
        return invalidArgument("maximum length " + std::to_string(maxLength) + " leaves no room for the text");
    Encoding enc;
    const std::size_t total = ta->size() + tb.size() + specials;
    if (total > static_cast<std::size_t>(maxLength)) {
        // Longest first: drop from the end of the longer sequence (A on ties), as Hugging Face's LongestFirst.
        const std::size_t room = static_cast<std::size_t>(maxLength - specials);
        while (ta->size() + tb.size() > room) {
            if (ta->size() >= tb.size()) ta->pop_back();
            else tb.pop_back();
        }
        enc.truncated = true;
        enc.warnings.push_back("text: " + std::to_string(total) + " tokens are more than the model's " +
                               std::to_string(maxLength) + " positions; truncated to " +
                               std::to_string(maxLength) + (b ? " (longest sentence first)" : ""));
    }
    auto add = [&](const std::string& tok, int type) {
        auto it = m_vocab.find(tok);
        enc.ids.push_back(it == m_vocab.end() ? m_vocab.at(m_unk) : it->second);
        enc.tokens.push_back(tok);
        enc.typeIds.push_back(type);
    };
    add(m_cls, 0);
    for (const auto& t : *ta) add(t, 0);
    add(m_sep, 0);
    if (b) {
        for (const auto& t : tb) add(t, 1);
        add(m_sep, 1);
    }
    return enc;
}

} // namespace attn
