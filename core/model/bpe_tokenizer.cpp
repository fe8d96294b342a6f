// Byte-level BPE. See attnscope/bpe_tokenizer.h for the pipeline and docs/model.md ("Byte-level BPE").
//
// [SECTION] Byte-level stand-ins
// [SECTION] Pre-tokenizers
// [SECTION] Building
// [SECTION] Encoding and decoding
// [SECTION] Chat templates
#include "attnscope/bpe_tokenizer.h"

#include "attnscope/preset_io.h"  // checkJsonDepth, clipForMessage

#include <nlohmann/json.hpp>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <climits>
#include <mutex>

namespace attn {
using json = nlohmann::json;

// -----------------------------------------------------------------------------------------------------
// [SECTION] Byte-level stand-ins
// -----------------------------------------------------------------------------------------------------

namespace {

// GPT-2's map from a byte to a printable character: the printable Latin-1 bytes stand for themselves, the other
// 68 take the code points 256, 257, … in byte order. Returned as UTF-8 strings, with the inverse.
struct ByteMap {
    std::string toChar[256];
    std::unordered_map<std::string, unsigned char> toByte;
    ByteMap()
    {
        int next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            const UChar32 cp = printable ? b : next++;
            char buf[4];
            int len = 0;
            U8_APPEND_UNSAFE(buf, len, cp);
            toChar[b].assign(buf, static_cast<std::size_t>(len));
            toByte[toChar[b]] = static_cast<unsigned char>(b);
        }
    }
};
const ByteMap& byteMap()
{
    static const ByteMap m;
    return m;
}

Status checkUtf8(const std::string& s, const char* what)
{
    const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
    const int32_t n = static_cast<int32_t>(std::min<std::size_t>(s.size(), INT32_MAX));
    for (int32_t i = 0; i < n;) {
        const int32_t at = i;
        UChar32 c;
        U8_NEXT(p, i, n, c);
        if (c < 0) return invalidArgument(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(at));
    }
    return Status::success();
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Pre-tokenizers
// -----------------------------------------------------------------------------------------------------

// GPT-2's pattern: contractions, letters, numbers, other symbols, each optionally after one space; runs of spaces.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's: case-insensitive contractions, a letter run after one non-letter/non-digit, numbers of up to three
// digits, symbols with their trailing newlines, newline runs.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's: Llama 3's with single digits.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDigitPattern = R"(\p{N})";

// One splitting step: every piece is cut at the matches of `regex`, matches and the text between them kept
// (Hugging Face's Split with behavior "Isolated"). ICU's RegexMatcher is not thread-safe; a pattern is.
struct SplitStep {
    std::unique_ptr<icu::RegexPattern> pattern;
    std::string source;
};

Expected<SplitStep> makeStep(const std::string& regex)
{
    UErrorCode err = U_ZERO_ERROR;
    UParseError pe{};
    SplitStep s;
    s.source = regex;
    s.pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(regex), pe, err));
    if (U_FAILURE(err) || !s.pattern)
        return invalidArgument("pre-tokenizer pattern \"" + clipForMessage(regex, 80) + "\" does not compile (" +
                               u_errorName(err) + " at offset " + std::to_string(pe.offset) + ")");
    return s;
}

void splitPiece(const SplitStep& step, const std::string& piece, std::vector<std::string>& out)
{
    const icu::UnicodeString u = icu::UnicodeString::fromUTF8(piece);
    UErrorCode err = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(step.pattern->matcher(u, err));
    if (U_FAILURE(err) || !m) {
        out.push_back(piece);
        return;
    }
    int32_t last = 0;
    auto emit = [&](int32_t a, int32_t b) {
        if (b <= a) return;
        std::string s;
        u.tempSubStringBetween(a, b).toUTF8String(s);
        out.push_back(std::move(s));
    };
    while (m->find(err) && U_SUCCESS(err)) {
        const int32_t a = m->start(err), b = m->end(err);
        if (b == a) continue;  // the patterns here never match empty; guard all the same
        emit(last, a);
        emit(a, b);
        last = b;
    }
    emit(last, u.length());
}

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] Building
// -----------------------------------------------------------------------------------------------------

struct BpeTokenizer::Impl {
    std::vector<std::string> tokens;                 // byte-level forms (specials as written)
    std::vector<std::string> bytesOf;                // each token's bytes
    std::unordered_map<std::string, int> vocab;      // byte-level form → id
    std::unordered_map<std::string, int> ranks;      // "a b" → merge rank
    std::vector<std::pair<std::string, int>> specials;  // matched whole in the raw text, longest first
    std::vector<SplitStep> steps;
    std::string pre;
    bool ignoreMerges = false, addPrefixSpace = false;
    int bos = -1, eos = -1;
    bool addBos = false;
    std::unordered_map<std::string, int> byText;     // decoded text → id (first id wins)
    mutable std::mutex cacheMutex;
    mutable std::unordered_map<std::string, std::vector<int>> cache;  // piece → ids

    Status finish()
    {
        bytesOf.resize(tokens.size());
        std::vector<bool> special(tokens.size(), false);
        for (const auto& [text, id] : specials) special[static_cast<std::size_t>(id)] = true;
        const ByteMap& bm = byteMap();
        for (std::size_t id = 0; id < tokens.size(); ++id) {
            const std::string& t = tokens[id];
            if (special[id]) {
                bytesOf[id] = t;
            } else {
                // Byte-level characters back to bytes; a character outside the map stays as its UTF-8.
                std::string b;
                const auto* p = reinterpret_cast<const std::uint8_t*>(t.data());
                const int32_t n = static_cast<int32_t>(t.size());
                for (int32_t i = 0; i < n;) {
                    const int32_t a = i;
                    UChar32 c;
                    U8_NEXT(p, i, n, c);
                    const std::string ch(t, static_cast<std::size_t>(a), static_cast<std::size_t>(i - a));
                    auto it = bm.toByte.find(ch);
                    if (it != bm.toByte.end()) b += static_cast<char>(it->second);
                    else b += ch;
                }
                bytesOf[id] = std::move(b);
            }
            byText.emplace(bytesOf[id], static_cast<int>(id));
        }
        std::sort(specials.begin(), specials.end(),
                  [](const auto& a, const auto& b) { return a.first.size() > b.first.size() || (a.first.size() == b.first.size() && a.first < b.first); });
        return Status::success();
    }

    Status addMerges(const std::vector<std::string>& merges)
    {
        ranks.reserve(merges.size());
        for (std::size_t r = 0; r < merges.size(); ++r) {
            const std::string& mg = merges[r];
            const auto sp = mg.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 >= mg.size() || mg.find(' ', sp + 1) != std::string::npos)
                return invalidArgument("merge " + std::to_string(r) + ": \"" + clipForMessage(mg) + "\" is not two tokens separated by one space");
            const std::string a = mg.substr(0, sp), b = mg.substr(sp + 1);
            if (!vocab.count(a) || !vocab.count(b))
                return invalidArgument("merge " + std::to_string(r) + ": \"" + clipForMessage(mg) + "\" names a token that is not in the vocabulary");
            ranks.emplace(mg, static_cast<int>(r));
        }
        return Status::success();
    }

    Status setPre(const std::string& name)
    {
        std::vector<const char*> patterns;
        if (name == "default" || name == "gpt2" || name == "gpt-2") patterns = {kGpt2Pattern};
        else if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") patterns = {kLlama3Pattern}, ignoreMerges = true;
        else if (name == "qwen2") patterns = {kQwen2Pattern};
        else if (name == "smollm") patterns = {kDigitPattern, kGpt2Pattern};
        else
            return makeError(StatusCode::Unsupported, "tokenizer.ggml.pre \"" + clipForMessage(name) +
                                                          "\" is not supported (supported: default, gpt2, llama-bpe, qwen2, smollm)");
        pre = name;
        for (const char* p : patterns) {
            auto s = makeStep(p);
            if (!s) return s.status();
            steps.push_back(std::move(*s));
        }
        return Status::success();
    }
};

BpeTokenizer::BpeTokenizer() : m(std::make_unique<Impl>()) {}
BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;

Expected<BpeTokenizer> BpeTokenizer::fromSpec(const BpeVocabSpec& spec)
{
    BpeTokenizer t;
    Impl& m = *t.m;
    if (spec.tokens.empty()) return invalidArgument("tokenizer.ggml.tokens is empty");
    if (!spec.tokenTypes.empty() && spec.tokenTypes.size() != spec.tokens.size())
        return invalidArgument("tokenizer.ggml.token_type: expected " + std::to_string(spec.tokens.size()) +
                               " values (one per token), got " + std::to_string(spec.tokenTypes.size()));
    m.tokens = spec.tokens;
    for (std::size_t i = 0; i < m.tokens.size(); ++i) {
        if (!m.vocab.emplace(m.tokens[i], static_cast<int>(i)).second)
            return invalidArgument("tokenizer.ggml.tokens: token " + std::to_string(i) + " \"" + clipForMessage(m.tokens[i]) +
                                   "\" appears twice");
        // Control and user-defined tokens are matched whole in the text, as llama.cpp does with parse_special.
        const int type = spec.tokenTypes.empty() ? 1 : spec.tokenTypes[i];
        if ((type == 3 || type == 4) && !m.tokens[i].empty()) m.specials.emplace_back(m.tokens[i], static_cast<int>(i));
    }
    ATTNSCOPE_RETURN_IF_ERROR(m.addMerges(spec.merges));
    ATTNSCOPE_RETURN_IF_ERROR(m.setPre(spec.pre));
    const int n = static_cast<int>(m.tokens.size());
    if (spec.bos >= n || spec.eos >= n) return invalidArgument("tokenizer: bos/eos id outside the vocabulary of " + std::to_string(n));
    m.bos = spec.bos;
    m.eos = spec.eos;
    m.addBos = spec.addBos && spec.bos >= 0;
    ATTNSCOPE_RETURN_IF_ERROR(m.finish());
    return t;
}

namespace {

// A tokenizer.json pre_tokenizer (null, ByteLevel, Split, Digits, or a Sequence of them) as split steps.
Status preTokenizerSteps(const json& p, std::vector<SplitStep>& steps, bool& addPrefixSpace, int depth = 0)
{
    if (p.is_null()) return Status::success();
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
        return makeError(StatusCode::ParseError, "pre_tokenizer: expected an object with a \"type\"");
    const std::string type = p["type"].get<std::string>();
    if (type == "Sequence") {
        if (depth > 4 || !p.contains("pretokenizers") || !p["pretokenizers"].is_array())
            return makeError(StatusCode::ParseError, "pre_tokenizer: Sequence without a \"pretokenizers\" array");
        for (const json& q : p["pretokenizers"]) ATTNSCOPE_RETURN_IF_ERROR(preTokenizerSteps(q, steps, addPrefixSpace, depth + 1));
        return Status::success();
    }
    if (type == "ByteLevel") {
        addPrefixSpace = p.value("add_prefix_space", false);
        if (p.value("use_regex", true)) {
            auto s = makeStep(kGpt2Pattern);
            if (!s) return s.status();
            steps.push_back(std::move(*s));
        }
        return Status::success();
    }
    if (type == "Digits") {
        if (p.value("individual_digits", false)) {
            auto s = makeStep(kDigitPattern);
            if (!s) return s.status();
            steps.push_back(std::move(*s));
        } else {
            auto s = makeStep(R"(\p{N}+)");
            if (!s) return s.status();
            steps.push_back(std::move(*s));
        }
        return Status::success();
    }
    if (type == "Split") {
        const std::string behavior = p.value("behavior", std::string("Isolated"));
        if (behavior != "Isolated" || p.value("invert", false))
            return makeError(StatusCode::Unsupported, "pre_tokenizer Split: behavior \"" + clipForMessage(behavior) +
                                                          "\" is not supported (supported: Isolated, not inverted)");
        const json& pat = p.contains("pattern") ? p["pattern"] : json();
        std::string regex;
        if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) regex = pat["Regex"].get<std::string>();
        else if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) {
            // A literal: every character escaped.
            const std::string lit = pat["String"].get<std::string>();
            regex = "\\Q" + lit + "\\E";
        } else return makeError(StatusCode::ParseError, "pre_tokenizer Split: expected pattern.Regex or pattern.String");
        auto s = makeStep(regex);
        if (!s) return s.status();
        steps.push_back(std::move(*s));
        return Status::success();
    }
    return makeError(StatusCode::Unsupported, "pre_tokenizer \"" + clipForMessage(type) +
                                                  "\" is not supported (supported: ByteLevel, Split, Digits, Sequence)");
}

} // namespace

Expected<BpeTokenizer> BpeTokenizer::fromTokenizerJson(const std::string& text)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, 64, "tokenizer.json"));
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return makeError(StatusCode::ParseError, "tokenizer.json: not a JSON object");
    const json& model = j.contains("model") ? j["model"] : json();
    if (!model.is_object() || model.value("type", std::string()) != "BPE")
        return makeError(StatusCode::Unsupported, "tokenizer.json: model.type " +
                                                      (model.is_object() && model.contains("type") ? clipForMessage(model["type"].dump()) : std::string("(none)")) +
                                                      " is not supported here (supported: BPE)");
    if (!model.contains("vocab") || !model["vocab"].is_object())
        return makeError(StatusCode::ParseError, "tokenizer.json: model.vocab is not an object");
    BpeTokenizer t;
    Impl& m = *t.m;
    // Ids may come in any order and leave no gap below the largest.
    std::size_t maxId = 0;
    for (const auto& [tok, id] : model["vocab"].items()) {
        if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > 10'000'000)
            return makeError(StatusCode::ParseError, "tokenizer.json: model.vocab[\"" + clipForMessage(tok) + "\"]: expected an id in 0..10000000");
        maxId = std::max(maxId, static_cast<std::size_t>(id.get<long long>()));
    }
    const json added = j.contains("added_tokens") && j["added_tokens"].is_array() ? j["added_tokens"] : json::array();
    for (const json& a : added)
        if (a.is_object() && a.contains("id") && a["id"].is_number_integer() && a["id"].get<long long>() >= 0 &&
            a["id"].get<long long>() <= 10'000'000)
            maxId = std::max(maxId, static_cast<std::size_t>(a["id"].get<long long>()));
    m.tokens.assign(maxId + 1, std::string());
    std::vector<bool> seen(maxId + 1, false);
    for (const auto& [tok, id] : model["vocab"].items()) {
        const auto i = static_cast<std::size_t>(id.get<long long>());
        if (seen[i]) return makeError(StatusCode::ParseError, "tokenizer.json: id " + std::to_string(i) + " is given to two tokens");
        seen[i] = true;
        m.tokens[i] = tok;
        m.vocab[tok] = static_cast<int>(i);
    }
    for (const json& a : added) {
        if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string() || !a["id"].is_number_integer())
            return makeError(StatusCode::ParseError, "tokenizer.json: added_tokens: expected objects with id and content");
        const auto i = static_cast<std::size_t>(a["id"].get<long long>());
        const std::string content = a["content"].get<std::string>();
        if (seen[i] && m.tokens[i] != content)
            return makeError(StatusCode::ParseError, "tokenizer.json: added token " + std::to_string(i) + " \"" + clipForMessage(content) +
                                                         "\" has the id of \"" + clipForMessage(m.tokens[i]) + "\"");
        seen[i] = true;
        m.tokens[i] = content;
        m.vocab[content] = static_cast<int>(i);
        if (!content.empty()) m.specials.emplace_back(content, static_cast<int>(i));
    }
    for (std::size_t i = 0; i < seen.size(); ++i)
        if (!seen[i]) return makeError(StatusCode::ParseError, "tokenizer.json: no token has id " + std::to_string(i));
    std::vector<std::string> merges;
    if (model.contains("merges")) {
        if (!model["merges"].is_array()) return makeError(StatusCode::ParseError, "tokenizer.json: model.merges is not an array");
        merges.reserve(model["merges"].size());
        for (const json& mg : model["merges"]) {
            if (mg.is_string()) merges.push_back(mg.get<std::string>());
            else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
                merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
            else return makeError(StatusCode::ParseError, "tokenizer.json: model.merges: expected \"a b\" or [\"a\", \"b\"], got " + clipForMessage(mg.dump()));
        }
    }
    if (auto s = m.addMerges(merges); !s.ok()) return makeError(StatusCode::ParseError, "tokenizer.json: model." + s.message);
    m.ignoreMerges = model.value("ignore_merges", false);
    if (model.value("byte_fallback", false))
        return makeError(StatusCode::Unsupported, "tokenizer.json: model.byte_fallback (SentencePiece-style BPE) is not supported");
    const json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
    ATTNSCOPE_RETURN_IF_ERROR(preTokenizerSteps(pre, m.steps, m.addPrefixSpace));
    m.pre = "tokenizer.json";
    // A BOS from the post-processor's template (Llama 3's TemplateProcessing puts <|begin_of_text|> first).
    if (j.contains("post_processor") && j["post_processor"].is_object()) {
        const json& pp = j["post_processor"];
        const json* tp = nullptr;
        if (pp.value("type", std::string()) == "TemplateProcessing") tp = &pp;
        else if (pp.value("type", std::string()) == "Sequence" && pp.contains("processors") && pp["processors"].is_array())
            for (const json& q : pp["processors"])
                if (q.is_object() && q.value("type", std::string()) == "TemplateProcessing") tp = &q;
        if (tp && tp->contains("single") && (*tp)["single"].is_array() && !(*tp)["single"].empty()) {
            const json& first = (*tp)["single"][0];
            if (first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object()) {
                const std::string id = first["SpecialToken"].value("id", std::string());
                if (auto it = m.vocab.find(id); it != m.vocab.end()) {
                    m.bos = it->second;
                    m.addBos = true;
                }
            }
        }
    }
    // EOS and BOS by their usual names when the template did not say.
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "</s>"})
        if (m.eos < 0)
            if (auto it = m.vocab.find(name); it != m.vocab.end()) m.eos = it->second;
    ATTNSCOPE_RETURN_IF_ERROR(m.finish());
    return t;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Encoding and decoding
// -----------------------------------------------------------------------------------------------------

namespace {

// BPE over one piece in byte-level form: symbols are its characters; the adjacent pair of lowest rank merges
// until no pair has a rank. Pieces are short (a word), so the quadratic scan is cheap; long ones are rare.
std::vector<int> bpePiece(const BpeTokenizer& self, const std::unordered_map<std::string, int>& vocab,
                          const std::unordered_map<std::string, int>& ranks, const std::string& piece)
{
    (void)self;
    std::vector<std::string> sym;
    const auto* p = reinterpret_cast<const std::uint8_t*>(piece.data());
    const int32_t n = static_cast<int32_t>(piece.size());
    for (int32_t i = 0; i < n;) {
        const int32_t a = i;
        UChar32 c;
        U8_NEXT(p, i, n, c);
        sym.emplace_back(piece, static_cast<std::size_t>(a), static_cast<std::size_t>(i - a));
    }
    std::string key;
    while (sym.size() > 1) {
        int best = INT_MAX;
        std::size_t at = 0;
        for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
            key.assign(sym[i]).append(1, ' ').append(sym[i + 1]);
            auto it = ranks.find(key);
            if (it != ranks.end() && it->second < best) {
                best = it->second;
                at = i;
            }
        }
        if (best == INT_MAX) break;
        sym[at] += sym[at + 1];
        sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    std::vector<int> ids;
    for (const std::string& s : sym) {
        auto it = vocab.find(s);
        if (it != vocab.end()) {
            ids.push_back(it->second);
            continue;
        }
        // A symbol the vocabulary lacks (a vocabulary without every byte): its characters one by one, those
        // missing too are dropped (Hugging Face drops them as well when no unk token is set).
        const auto* q = reinterpret_cast<const std::uint8_t*>(s.data());
        const int32_t m = static_cast<int32_t>(s.size());
        for (int32_t i = 0; i < m;) {
            const int32_t a = i;
            UChar32 c;
            U8_NEXT(q, i, m, c);
            auto ch = vocab.find(std::string(s, static_cast<std::size_t>(a), static_cast<std::size_t>(i - a)));
            if (ch != vocab.end()) ids.push_back(ch->second);
        }
    }
    return ids;
}

} // namespace

Expected<Encoding> BpeTokenizer::encode(const std::string& text, bool addSpecial) const
{
    ATTNSCOPE_RETURN_IF_ERROR(checkUtf8(text, "text"));
    Encoding enc;
    if (addSpecial && m->addBos) enc.ids.push_back(m->bos);
    // Special tokens first: the earliest occurrence, the longest at a position.
    std::vector<std::pair<std::string, int>> segments;  // (text, -1) or (special, id)
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t bestAt = std::string::npos;
        int bestId = -1;
        std::size_t bestLen = 0;
        for (const auto& [s, id] : m->specials) {
            const std::size_t at = text.find(s, pos);
            if (at != std::string::npos && (at < bestAt || (at == bestAt && s.size() > bestLen))) {
                bestAt = at;
                bestId = id;
                bestLen = s.size();
            }
        }
        if (bestAt == std::string::npos) {
            segments.emplace_back(text.substr(pos), -1);
            break;
        }
        if (bestAt > pos) segments.emplace_back(text.substr(pos, bestAt - pos), -1);
        segments.emplace_back(std::string(), bestId);
        pos = bestAt + bestLen;
    }
    const ByteMap& bm = byteMap();
    bool first = true;
    for (const auto& [segment, special] : segments) {
        if (special >= 0) {
            enc.ids.push_back(special);
            first = false;
            continue;
        }
        std::vector<std::string> pieces{segment};
        if (m->addPrefixSpace && first && !segment.empty() && segment[0] != ' ') pieces[0] = " " + segment;
        first = false;
        for (const SplitStep& step : m->steps) {
            std::vector<std::string> next;
            for (const std::string& pc : pieces) splitPiece(step, pc, next);
            pieces.swap(next);
        }
        for (const std::string& pc : pieces) {
            std::string level;
            for (unsigned char b : pc) level += bm.toChar[b];
            if (m->ignoreMerges)
                if (auto it = m->vocab.find(level); it != m->vocab.end()) {
                    enc.ids.push_back(it->second);
                    continue;
                }
            {
                const std::lock_guard<std::mutex> lock(m->cacheMutex);
                if (auto it = m->cache.find(level); it != m->cache.end()) {
                    enc.ids.insert(enc.ids.end(), it->second.begin(), it->second.end());
                    continue;
                }
            }
            std::vector<int> ids = bpePiece(*this, m->vocab, m->ranks, level);
            enc.ids.insert(enc.ids.end(), ids.begin(), ids.end());
            const std::lock_guard<std::mutex> lock(m->cacheMutex);
            if (m->cache.size() > 200'000) m->cache.clear();  // bounded: a huge text of unique words
            m->cache.emplace(std::move(level), std::move(ids));
        }
    }
    for (int id : enc.ids) enc.tokens.push_back(tokenText(id));
    enc.typeIds.assign(enc.ids.size(), 0);
    return enc;
}

std::string BpeTokenizer::decode(const std::vector<int>& ids) const
{
    std::string out;
    for (int id : ids) out += tokenText(id);
    return out;
}

std::string BpeTokenizer::tokenText(int id) const
{
    return id >= 0 && id < static_cast<int>(m->bytesOf.size()) ? m->bytesOf[static_cast<std::size_t>(id)] : std::string();
}

std::optional<int> BpeTokenizer::idOf(const std::string& text) const
{
    auto it = m->byText.find(text);
    return it == m->byText.end() ? std::nullopt : std::optional<int>(it->second);
}

int BpeTokenizer::vocabSize() const { return static_cast<int>(m->tokens.size()); }
int BpeTokenizer::bos() const { return m->bos; }
int BpeTokenizer::eos() const { return m->eos; }
const std::string& BpeTokenizer::preTokenizer() const { return m->pre; }

// -----------------------------------------------------------------------------------------------------
// [SECTION] Chat templates
// -----------------------------------------------------------------------------------------------------

Expected<std::string> applyChatTemplate(const std::string& tpl, const std::string& userText)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkUtf8(userText, "text"));
    if (tpl.find("<|im_start|>") != std::string::npos) {
        // ChatML. A template that writes a system turn when the conversation has none (SmolLM2's, Qwen2's) has
        // it as a literal: '<|im_start|>system\n…<|im_end|>' inside the branch for a missing system message.
        std::string system;
        const std::string open = "<|im_start|>system\n";
        for (std::size_t at = tpl.find(open); at != std::string::npos; at = tpl.find(open, at + 1)) {
            const std::size_t begin = at + open.size(), end = tpl.find("<|im_end|>", begin);
            if (end == std::string::npos) break;
            const std::string body = tpl.substr(begin, end - begin);
            // Literal text only (no Jinja expression inside).
            if (body.find("{{") == std::string::npos && body.find('\'') == std::string::npos && body.find('+') == std::string::npos) {
                system = body;
                break;
            }
        }
        std::string out;
        if (!system.empty()) out += open + system + "<|im_end|>\n";
        out += "<|im_start|>user\n" + userText + "<|im_end|>\n<|im_start|>assistant\n";
        return out;
    }
    if (tpl.find("<|start_header_id|>") != std::string::npos) {
        // Llama 3. 3.1 and later templates always write a system turn with the knowledge cut-off and a date
        // (Hugging Face's default date string when none is given).
        std::string out = "<|begin_of_text|>";
        if (tpl.find("Cutting Knowledge Date") != std::string::npos)
            out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>";
        out += "<|start_header_id|>user<|end_header_id|>\n\n" + userText +
               "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
        return out;
    }
    return makeError(StatusCode::Unsupported, "the model's chat template is neither ChatML (<|im_start|>) nor Llama 3 "
                                              "(<|start_header_id|>): run without --chat and write the turns yourself");
}

} // namespace attn
