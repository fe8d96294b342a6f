// Byte-level BPE tokenizer. See attnscope/bpe_tokenizer.h for the pipeline. Learned from Hugging Face tokenizers
// (models/bpe/model.rs: merges by rank through a priority queue, ignore_merges; pre_tokenizers/byte_level.rs:
// GPT-2's byte→unicode alphabet and pattern; pre_tokenizers/digits.rs, split.rs) and llama.cpp
// (src/llama-vocab.cpp: the pre-tokeniser patterns of each tokenizer.ggml.pre).
// The vocabulary table (pieces, bytes, merges, lookups) and tokenizer.json's vocabulary and template are shared with
// the other BPE tokenizer: vocab_table.h.
//
// [SECTION] Byte-level alphabet and UTF-8 helpers
// [SECTION] Pre-tokeniser (ICU regex)
// [SECTION] Construction (shared by fromSpec and fromTokenizerJson)
// [SECTION] fromSpec
// [SECTION] fromTokenizerJson
// [SECTION] Encoding and decoding
#include "attnscope/bpe_tokenizer.h"

#include "attnscope/preset_io.h"  // checkJsonDepth, clipForMessage
#include "vocab_table.h"

#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <new>
#include <optional>
#include <queue>
#include <unordered_map>

namespace attn {
using json = nlohmann::json;

namespace {

using detail::lossyUtf8;
using detail::pairKey;
using detail::splitMerge;
// Largest vocabulary (vocab_table.h) and merge list accepted (Llama 3 and Qwen2 have ~150k merges). A bigger array is
// a broken or hostile file.
constexpr std::size_t kMaxTokens = detail::kMaxVocabTokens;
constexpr std::size_t kMaxMerges = 1'000'000;
// Words cached per tokenizer before the cache is cleared (a cached word costs ~100 bytes; this caps it at a few MB).
constexpr std::size_t kMaxCachedWords = 65'536;
// ICU regex steps per match before it gives up (see applyStep).
constexpr int32_t kRegexStepLimit = 2000;

// The patterns, as the models' own files write them (Oniguruma syntax, as Hugging Face tokenizers runs them).
// ICU reads them unchanged: its \s is Unicode White_Space, as Oniguruma's (U+000B and U+0085 included; the
// vertical_tab_nel golden text checks it), \p{L} / \p{N} are the general categories, (?i:…) and (?!…) work.
// GPT-2 (and Hugging Face's ByteLevel pre-tokeniser with use_regex): contractions, letters, numbers, other
// symbols (each with an optional leading space), then whitespace.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tokenizer.json's Split, llama.cpp's llama-bpe): case-insensitive contractions, a letter run with
// one optional leading non-letter, numbers in groups of up to three digits, newlines kept apart.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: Llama 3's pattern with every digit on its own.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o's tokenizer, Phi-4-mini's; GGUF pre "gpt-4o"): a letter run split where lower case turns to upper
// (marks and other letters go either way), its contraction kept on it, numbers in threes, "/" after punctuation.
constexpr const char* kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Tekken (Mistral Nemo, Mistral Small 3; GGUF pre "tekken"): o200k's letter runs without the contractions, single
// digits.
constexpr const char* kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// llama.cpp's "default" BPE pre-tokeniser: punctuation runs, GPT-2's pattern, number runs, then ASCII digits
// in threes.
constexpr const char* kDefaultPunctPattern = R"([\p{P}\$\+<=>\^~\|]+)";
constexpr const char* kNumberRunPattern = R"(\p{N}+)";
constexpr const char* kThreeDigitsPattern = R"([0-9][0-9][0-9])";

// [SECTION] Byte-level alphabet and UTF-8 helpers

// GPT-2's byte→unicode map: printable Latin-1 bytes stand for themselves, the other 68 bytes (controls, space,
// DEL, NBSP, soft hyphen, …) for U+0100 onwards in byte order.
struct ByteAlphabet {
    std::array<std::string, 256> byteToSymbol;        // UTF-8 of each byte's symbol
    std::unordered_map<UChar32, std::uint8_t> toByte; // symbol code point → byte
    ByteAlphabet()
    {
        int next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            const UChar32 cp = printable ? b : next++;
            icu::UnicodeString(cp).toUTF8String(byteToSymbol[static_cast<std::size_t>(b)]);
            toByte.emplace(cp, static_cast<std::uint8_t>(b));
        }
    }
};

const ByteAlphabet& byteAlphabet()
{
    static const ByteAlphabet a;
    return a;
}


} // namespace

std::size_t firstInvalidUtf8(std::string_view s)
{
    // ICU's U8_NEXT is strict: overlong forms, surrogates, code points past U+10FFFF and a character cut off at the
    // end all read as negative.
    const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
    const std::int32_t n = static_cast<std::int32_t>(s.size());
    for (std::int32_t i = 0; i < n;) {
        const std::int32_t at = i;
        UChar32 c;
        U8_NEXT(p, i, n, c);
        if (c < 0) return static_cast<std::size_t>(at);
    }
    return std::string::npos;
}

namespace {

// A byte-level token's bytes. A token with a character outside the alphabet (an added token such as
// " <mask>") stands for its own UTF-8, as Hugging Face's ByteLevel decoder does.
std::string byteLevelDecode(const std::string& token)
{
    const ByteAlphabet& a = byteAlphabet();
    std::string out;
    const auto* p = reinterpret_cast<const std::uint8_t*>(token.data());
    const std::int32_t n = static_cast<std::int32_t>(token.size());
    for (std::int32_t i = 0; i < n;) {
        UChar32 c;
        U8_NEXT(p, i, n, c);
        auto it = c < 0 ? a.toByte.end() : a.toByte.find(c);
        if (it == a.toByte.end()) return token;
        out.push_back(static_cast<char>(it->second));
    }
    return out;
}

std::string byteLevelEncode(const std::string& bytes)
{
    const ByteAlphabet& a = byteAlphabet();
    std::string out;
    for (unsigned char b : bytes) out += a.byteToSymbol[b];
    return out;
}

} // namespace

// [SECTION] Pre-tokeniser (ICU regex)

// One step of the pre-tokeniser, applied to every piece the steps before it made.
struct PreStep {
    enum class Kind { Regex, Digits, ByteLevel };
    Kind kind = Kind::Regex;
    std::shared_ptr<const icu::RegexPattern> pattern;  // Regex, and ByteLevel with use_regex
    bool removeMatches = false;                         // Split behavior Removed (else Isolated)
    bool individualDigits = false;                      // Digits
    bool addPrefixSpace = false;                        // ByteLevel
};

// The vocabulary table (vocab_table.h: pieces in their byte-level form, each unique) and what byte-level BPE adds.
struct BpeTokenizer::Impl : detail::VocabTable {
    std::array<int, 256> byteId{};     // id of each single-byte token, -1 when missing
    int unk = -1;
    bool ignoreMerges = false;
    bool nfc = false;
    std::vector<PreStep> steps;
    // Added tokens matched whole in the raw text: by first byte, longest first.
    std::array<std::vector<std::pair<std::string, int>>, 256> specials;
    std::vector<int> prefix, suffix;   // the template around the text (addSpecial)

    mutable std::mutex cacheMutex;
    mutable std::unordered_map<std::string, std::vector<int>> cache;

    std::vector<int> bpe(const std::string& piece, std::vector<std::string>& warnings) const;
    Status preTokenize(const std::string& text, std::vector<std::string>& pieces) const;
};

namespace {

Expected<std::shared_ptr<const icu::RegexPattern>> compilePattern(const std::string& pattern, bool literal,
                                                                  const std::string& where)
{
    UParseError pe{};
    UErrorCode err = U_ZERO_ERROR;
    const icu::UnicodeString p = icu::UnicodeString::fromUTF8(pattern);
    std::unique_ptr<icu::RegexPattern> re(icu::RegexPattern::compile(p, literal ? UREGEX_LITERAL : 0, pe, err));
    if (U_FAILURE(err) || !re)
        return makeError(StatusCode::Unsupported, where + ": pattern \"" + clipForMessage(pattern, 120) +
                                                      "\" does not compile (" + u_errorName(err) + " at offset " +
                                                      std::to_string(pe.offset) + ")");
    return std::shared_ptr<const icu::RegexPattern>(std::move(re));
}

bool isNumeric(UChar32 c)
{
    const int8_t t = u_charType(c);  // Rust's char::is_numeric: Nd, Nl, No
    return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

// Splits each piece by one step. Pieces are UTF-16 (ICU's regex works on UnicodeString).
Status applyStep(const PreStep& step, std::vector<icu::UnicodeString>& pieces)
{
    std::vector<icu::UnicodeString> out;
    out.reserve(pieces.size());
    for (icu::UnicodeString& piece : pieces) {
        if (step.kind == PreStep::Kind::ByteLevel && step.addPrefixSpace && !piece.startsWith(icu::UnicodeString(u' ')))
            piece.insert(0, u' ');
        if (step.kind == PreStep::Kind::Digits) {
            int32_t start = 0;
            int32_t i = 0;
            bool inDigits = false;
            while (i < piece.length()) {
                const UChar32 c = piece.char32At(i);
                const int32_t next = piece.moveIndex32(i, 1);
                const bool d = isNumeric(c);
                if (d && step.individualDigits) {
                    if (i > start) out.emplace_back(piece, start, i - start);
                    out.emplace_back(piece, i, next - i);
                    start = next;
                } else if (i > start && d != inDigits) {
                    out.emplace_back(piece, start, i - start);
                    start = i;
                }
                inDigits = d;
                i = next;
            }
            if (piece.length() > start) out.emplace_back(piece, start, piece.length() - start);
            continue;
        }
        if (!step.pattern) { out.push_back(std::move(piece)); continue; }
        UErrorCode err = U_ZERO_ERROR;
        std::unique_ptr<icu::RegexMatcher> m(step.pattern->matcher(piece, err));
        if (U_FAILURE(err)) return makeError(StatusCode::Internal, std::string("ICU regex matcher: ") + u_errorName(err));
        // A pattern from a file could backtrack catastrophically; ICU stops a match after this many of its
        // steps (each "on the order of milliseconds", ICU's uregex_setTimeLimit) with U_REGEX_TIME_OUT.
        m->setTimeLimit(kRegexStepLimit, err);
        int32_t last = 0;
        while (m->find(err) && U_SUCCESS(err)) {
            const int32_t s = m->start(err), e = m->end(err);
            if (e == s) continue;  // an empty match splits nothing
            if (s > last) out.emplace_back(piece, last, s - last);
            if (!step.removeMatches) out.emplace_back(piece, s, e - s);
            last = e;
        }
        if (err == U_REGEX_TIME_OUT || err == U_REGEX_STACK_OVERFLOW)
            return makeError(StatusCode::ResourceExhausted, "text: the pre-tokeniser's pattern gave up on a piece of " +
                                                                std::to_string(piece.length()) + " UTF-16 units (" + u_errorName(err) + ")");
        if (U_FAILURE(err)) return makeError(StatusCode::Internal, std::string("ICU regex: ") + u_errorName(err));
        if (piece.length() > last) out.emplace_back(piece, last, piece.length() - last);
    }
    pieces = std::move(out);
    return Status::success();
}

Expected<PreStep> regexStep(const std::string& pattern, const std::string& where)
{
    auto re = compilePattern(pattern, false, where);
    if (!re) return re.status();
    PreStep s;
    s.pattern = *re;
    return s;
}

} // namespace

Status BpeTokenizer::Impl::preTokenize(const std::string& text, std::vector<std::string>& pieces) const
{
    std::vector<icu::UnicodeString> us{icu::UnicodeString::fromUTF8(text)};
    if (nfc) {
        UErrorCode err = U_ZERO_ERROR;
        const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(err);
        if (U_FAILURE(err)) return makeError(StatusCode::Internal, "ICU: no NFC normaliser");
        us[0] = n->normalize(us[0], err);
        if (U_FAILURE(err)) return makeError(StatusCode::Internal, std::string("ICU NFC: ") + u_errorName(err));
    }
    for (const PreStep& s : steps) ATTNSCOPE_RETURN_IF_ERROR(applyStep(s, us));
    for (const auto& u : us) {
        std::string s;
        u.toUTF8String(s);
        pieces.push_back(std::move(s));
    }
    return Status::success();
}

// BPE of one pre-tokenised piece (its raw bytes): every byte a symbol, then the lowest-rank merge of two
// neighbours first (leftmost on ties) until no neighbouring pair has a merge. Symbols are a linked list and
// candidate merges a priority queue, so a piece of n bytes costs O(n log n).
std::vector<int> BpeTokenizer::Impl::bpe(const std::string& piece, std::vector<std::string>& warnings) const
{
    if (ignoreMerges) {
        if (auto it = vocab.find(byteLevelEncode(piece)); it != vocab.end()) return {it->second};
    }
    struct Sym { int id, prev, next; };
    std::vector<Sym> sym;
    sym.reserve(piece.size());
    for (unsigned char b : piece) {
        int id = byteId[b];
        if (id < 0) {
            if (unk < 0) {
                // Hugging Face drops a symbol that has no token when the model has no unk_token; say so.
                if (warnings.size() < 8)
                    warnings.push_back("byte 0x" + std::string(1, "0123456789ABCDEF"[b >> 4]) +
                                       std::string(1, "0123456789ABCDEF"[b & 15]) +
                                       " has no token and the vocabulary no unknown token: dropped");
                continue;
            }
            id = unk;
        }
        const int i = static_cast<int>(sym.size());
        sym.push_back({id, i - 1, -1});
        if (i > 0) sym[static_cast<std::size_t>(i - 1)].next = i;
    }
    struct Cand { int rank, left, right, leftId, rightId, merged; };
    auto worse = [](const Cand& a, const Cand& b) { return a.rank != b.rank ? a.rank > b.rank : a.left > b.left; };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> queue(worse);
    auto consider = [&](int left) {
        if (left < 0) return;
        const int right = sym[static_cast<std::size_t>(left)].next;
        if (right < 0) return;
        const int a = sym[static_cast<std::size_t>(left)].id, b = sym[static_cast<std::size_t>(right)].id;
        if (auto it = merges.find(pairKey(a, b)); it != merges.end())
            queue.push({it->second.first, left, right, a, b, it->second.second});
    };
    for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i);
    while (!queue.empty()) {
        const Cand c = queue.top();
        queue.pop();
        Sym& l = sym[static_cast<std::size_t>(c.left)];
        if (l.id != c.leftId || l.next != c.right || sym[static_cast<std::size_t>(c.right)].id != c.rightId)
            continue;  // stale: one side has merged since
        Sym& r = sym[static_cast<std::size_t>(c.right)];
        l.id = c.merged;
        l.next = r.next;
        if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = c.left;
        r.id = -1;
        consider(l.prev);
        consider(c.left);
    }
    std::vector<int> ids;
    for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<std::size_t>(i)].next) ids.push_back(sym[static_cast<std::size_t>(i)].id);
    return ids;
}

// [SECTION] Construction (shared by fromSpec and fromTokenizerJson)

namespace {

// What both paths know before the Impl is built.
struct Parts {
    std::vector<std::string> tokens;                  // id → byte-level form
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<int> specialIds;                      // matched whole in the raw text
    std::vector<PreStep> steps;
    int unk = -1;
    bool ignoreMerges = false, nfc = false;
    std::vector<int> prefix, suffix;
};

Expected<std::shared_ptr<const BpeTokenizer::Impl>> build(Parts&& p, const std::string& tokensWhere, const std::string& mergesWhere)
{
    auto im = std::make_shared<BpeTokenizer::Impl>();
    ATTNSCOPE_RETURN_IF_ERROR(im->setTokens(std::move(p.tokens), tokensWhere, true));
    std::vector<std::string> bytes(im->tokens.size());
    for (std::size_t id = 0; id < bytes.size(); ++id) bytes[id] = byteLevelDecode(im->tokens[id]);
    im->setBytes(std::move(bytes), [](int) { return true; });  // decoded bytes → lowest id
    const ByteAlphabet& a = byteAlphabet();
    for (int b = 0; b < 256; ++b) {
        auto it = im->vocab.find(a.byteToSymbol[static_cast<std::size_t>(b)]);
        im->byteId[static_cast<std::size_t>(b)] = it == im->vocab.end() ? -1 : it->second;
    }
    ATTNSCOPE_RETURN_IF_ERROR(im->setMerges(p.merges, mergesWhere));
    for (int id : p.specialIds) {
        const std::string& s = im->tokens[static_cast<std::size_t>(id)];
        im->specials[static_cast<unsigned char>(s[0])].emplace_back(s, id);
    }
    for (auto& list : im->specials)
        std::stable_sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
    im->unk = p.unk;
    im->ignoreMerges = p.ignoreMerges;
    im->nfc = p.nfc;
    im->steps = std::move(p.steps);
    im->prefix = std::move(p.prefix);
    im->suffix = std::move(p.suffix);
    return std::shared_ptr<const BpeTokenizer::Impl>(std::move(im));
}

} // namespace

// [SECTION] fromSpec

namespace {

// What a GGUF's tokenizer.ggml.pre asks of the pre-tokeniser. The names are the ones llama.cpp's converter writes
// (it names a tokenizer by hashing what it makes of a test text) and src/llama-vocab.cpp reads; several share a
// pattern, and files carry whichever name their model's tokenizer hashed to.
enum class PreKind { Gpt2, Llama3, Llama3KeepMerges, Qwen2, Gpt4o, Tekken, SmolLM, Default };
struct PreName {
    const char* name;
    PreKind kind;
};
constexpr PreName kPreNames[] = {
    {"gpt-2", PreKind::Gpt2},           // GPT-2
    {"gpt2", PreKind::Gpt2},            // as attnscope's own test fixtures write it
    {"olmo", PreKind::Gpt2},            // GPT-NeoX-20B's tokenizer: Pythia, OLMo 1
    {"mpt", PreKind::Gpt2},             // the same tokenizer, hashed first to MPT's name
    {"llama-bpe", PreKind::Llama3},     // Llama 3.x
    {"llama3", PreKind::Llama3},
    {"llama-v3", PreKind::Llama3},
    {"falcon3", PreKind::Llama3},       // Falcon 3 (a llama architecture)
    {"dbrx", PreKind::Llama3KeepMerges},  // cl100k-style tokenizers: Llama 3's pattern, merges applied
    {"smaug-bpe", PreKind::Llama3KeepMerges},
    {"qwen2", PreKind::Qwen2},          // Qwen 2, 2.5, 3
    {"deepseek-r1-qwen", PreKind::Qwen2},  // DeepSeek-R1's Qwen distillations
    {"gpt-4o", PreKind::Gpt4o},         // o200k: Phi-4-mini (merges applied, as llama.cpp)
    {"tekken", PreKind::Tekken},        // Mistral Nemo, Mistral Small 3 (llama architecture; whole pieces first)
    {"smollm", PreKind::SmolLM},        // SmolLM, SmolLM2
    {"default", PreKind::Default},
};

std::optional<PreKind> preKindOf(const std::string& pre)
{
    if (pre.empty()) return PreKind::Default;
    for (const PreName& n : kPreNames)
        if (pre == n.name) return n.kind;
    return std::nullopt;
}

std::string supportedPreNames()
{
    std::string out;
    for (const PreName& n : kPreNames) out += (out.empty() ? "" : ", ") + std::string(n.name);
    return out;
}

} // namespace

Expected<BpeTokenizer> BpeTokenizer::fromSpec(const BpeVocabSpec& spec)
{
    const std::string where = "tokenizer.ggml";
    if (spec.tokens.size() > kMaxTokens)
        return invalidArgument(where + ".tokens: " + std::to_string(spec.tokens.size()) + " tokens, over the limit of " +
                               std::to_string(kMaxTokens));
    if (spec.merges.size() > kMaxMerges)
        return invalidArgument(where + ".merges: " + std::to_string(spec.merges.size()) + " merges, over the limit of " +
                               std::to_string(kMaxMerges));
    if (!spec.tokenTypes.empty() && spec.tokenTypes.size() != spec.tokens.size())
        return invalidArgument(where + ".token_type: expected " + std::to_string(spec.tokens.size()) +
                               " entries (one per token), got " + std::to_string(spec.tokenTypes.size()));
    Parts p;
    const std::string& pre = spec.pre;
    auto add = [&](const char* pattern) -> Status {
        auto s = regexStep(pattern, where + ".pre \"" + pre + "\"");
        if (!s) return s.status();
        p.steps.push_back(std::move(*s));
        return Status::success();
    };
    const std::optional<PreKind> kind = preKindOf(pre);
    if (!kind)
        return makeError(StatusCode::Unsupported, where + ".pre \"" + clipForMessage(pre) + "\" is not supported (supported: " +
                                                      supportedPreNames() + ")");
    switch (*kind) {
    case PreKind::Gpt2: ATTNSCOPE_RETURN_IF_ERROR(add(kGpt2Pattern)); break;
    case PreKind::Llama3:
        ATTNSCOPE_RETURN_IF_ERROR(add(kLlama3Pattern));
        p.ignoreMerges = true;  // Llama 3's tokenizer.json sets model.ignore_merges; llama.cpp does the same
        break;
    case PreKind::Llama3KeepMerges: ATTNSCOPE_RETURN_IF_ERROR(add(kLlama3Pattern)); break;
    case PreKind::Qwen2: ATTNSCOPE_RETURN_IF_ERROR(add(kQwen2Pattern)); break;
    case PreKind::Gpt4o: ATTNSCOPE_RETURN_IF_ERROR(add(kGpt4oPattern)); break;
    case PreKind::Tekken:
        ATTNSCOPE_RETURN_IF_ERROR(add(kTekkenPattern));
        p.ignoreMerges = true;  // as llama.cpp reads "tekken", and Tekken's tokenizer.json
        break;
    case PreKind::SmolLM: {
        PreStep digits;  // SmolLM2's tokenizer.json: Digits(individual_digits), then ByteLevel with GPT-2's pattern
        digits.kind = PreStep::Kind::Digits;
        digits.individualDigits = true;
        p.steps.push_back(digits);
        ATTNSCOPE_RETURN_IF_ERROR(add(kGpt2Pattern));
        break;
    }
    case PreKind::Default:
        for (const char* pat : {kDefaultPunctPattern, kGpt2Pattern, kNumberRunPattern, kThreeDigitsPattern})
            ATTNSCOPE_RETURN_IF_ERROR(add(pat));
        break;
    }
    p.tokens = spec.tokens;
    p.merges.reserve(spec.merges.size());
    for (std::size_t r = 0; r < spec.merges.size(); ++r) {
        std::pair<std::string, std::string> m;
        if (!splitMerge(spec.merges[r], m))
            return invalidArgument(where + ".merges[" + std::to_string(r) + "]: expected \"a b\" (two tokens, one space), got \"" +
                                   clipForMessage(spec.merges[r]) + "\"");
        p.merges.push_back(std::move(m));
    }
    for (std::size_t id = 0; id < spec.tokenTypes.size(); ++id) {
        const int t = spec.tokenTypes[id];
        if (t < 1 || t > 6)
            return invalidArgument(where + ".token_type[" + std::to_string(id) + "]: expected 1..6, got " + std::to_string(t));
        if ((t == 3 || t == 4) && !spec.tokens[id].empty()) p.specialIds.push_back(static_cast<int>(id));
        if (t == 2 && p.unk < 0) p.unk = static_cast<int>(id);
    }
    const int n = static_cast<int>(spec.tokens.size());
    auto checkId = [&](int id, const char* field) -> Status {
        if (id < -1 || id >= n)
            return invalidArgument(where + "." + field + ": id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                   std::to_string(n - 1) + ")");
        return Status::success();
    };
    ATTNSCOPE_RETURN_IF_ERROR(checkId(spec.bos, "bos_token_id"));
    ATTNSCOPE_RETURN_IF_ERROR(checkId(spec.eos, "eos_token_id"));
    if (spec.addBos) {
        if (spec.bos < 0) return invalidArgument(where + ".add_bos_token is true but there is no bos_token_id");
        p.prefix.push_back(spec.bos);
    }
    auto im = build(std::move(p), where + ".tokens", where + ".merges");
    if (!im) return im.status();
    BpeTokenizer t;
    t.m_impl = std::move(*im);
    t.m_bos = spec.bos;
    t.m_eos = spec.eos;
    return t;
}

// [SECTION] fromTokenizerJson

namespace {

Status parsePreTokenizer(const json& j, const std::string& path, Parts& p, bool& byteLevel, int depth)
{
    auto bad = [&](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + path + m); };
    if (!j.is_object()) return bad(": expected an object");
    auto ty = j.find("type");
    const std::string type = ty != j.end() && ty->is_string() ? ty->get<std::string>() : std::string();
    auto flag = [&](const char* key, bool dflt) -> Expected<bool> {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return dflt;
        if (!it->is_boolean()) return bad(std::string(".") + key + ": expected true or false, got " + clipForMessage(it->dump()));
        return it->get<bool>();
    };
    if (type == "Sequence") {
        if (depth > 4) return bad(": Sequence nested too deep");
        auto list = j.find("pretokenizers");
        if (list == j.end() || !list->is_array()) return bad(".pretokenizers: expected an array");
        for (std::size_t i = 0; i < list->size(); ++i)
            ATTNSCOPE_RETURN_IF_ERROR(parsePreTokenizer((*list)[i], path + ".pretokenizers[" + std::to_string(i) + "]", p, byteLevel, depth + 1));
        return Status::success();
    }
    if (type == "ByteLevel") {
        auto prefix = flag("add_prefix_space", true);
        auto useRegex = flag("use_regex", true);
        if (!prefix) return prefix.status();
        if (!useRegex) return useRegex.status();
        PreStep s;
        s.kind = PreStep::Kind::ByteLevel;
        s.addPrefixSpace = *prefix;
        if (*useRegex) {
            auto re = compilePattern(kGpt2Pattern, false, "tokenizer.json: " + path);
            if (!re) return re.status();
            s.pattern = *re;
        }
        p.steps.push_back(std::move(s));
        byteLevel = true;
        return Status::success();
    }
    if (type == "Digits") {
        auto ind = flag("individual_digits", false);
        if (!ind) return ind.status();
        PreStep s;
        s.kind = PreStep::Kind::Digits;
        s.individualDigits = *ind;
        p.steps.push_back(s);
        return Status::success();
    }
    if (type == "Split") {
        auto pat = j.find("pattern");
        if (pat == j.end() || !pat->is_object()) return bad(".pattern: expected {\"Regex\": …} or {\"String\": …}");
        auto re = pat->find("Regex");
        auto str = pat->find("String");
        const bool literal = re == pat->end();
        const auto& src = literal ? str : re;
        if (src == pat->end() || !src->is_string()) return bad(".pattern: expected {\"Regex\": …} or {\"String\": …}");
        const std::string behavior = j.value("behavior", std::string());
        if (behavior != "Isolated" && behavior != "Removed")
            return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + ".behavior \"" + clipForMessage(behavior) +
                                                          "\" is not supported (supported: Isolated, Removed)");
        auto invert = flag("invert", false);
        if (!invert) return invert.status();
        if (*invert) return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + ".invert true is not supported");
        auto compiled = compilePattern(src->get<std::string>(), literal, "tokenizer.json: " + path);
        if (!compiled) return compiled.status();
        PreStep s;
        s.pattern = *compiled;
        s.removeMatches = behavior == "Removed";
        p.steps.push_back(std::move(s));
        return Status::success();
    }
    return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + ".type \"" + clipForMessage(type) +
                                                  "\" is not supported (supported: ByteLevel, Split, Digits, Sequence)");
}


} // namespace

Expected<BpeTokenizer> BpeTokenizer::fromTokenizerJson(const std::string& text)
{
    return detail::catchingJsonErrors([&] { return fromTokenizerJsonImpl(text); });
}

Expected<BpeTokenizer> BpeTokenizer::fromTokenizerJsonImpl(const std::string& text)
{
    auto unsupported = [](const std::string& m) { return makeError(StatusCode::Unsupported, "tokenizer.json: " + m); };
    json j;
    ATTNSCOPE_RETURN_IF_ERROR(detail::parseJsonBpe(text, j));
    const json* model = &j["model"];

    Parts p;
    if (model->value("byte_fallback", false)) return unsupported("model.byte_fallback true is not supported (a SentencePiece-style BPE)");
    p.ignoreMerges = model->value("ignore_merges", false);

    auto v = detail::readJsonVocab(j, *model, kMaxMerges);
    if (!v) return v.status();
    p.tokens = std::move(v->tokens);
    p.merges = std::move(v->merges);
    p.unk = v->unk;
    // Added tokens are matched whole in the raw text, special or not (Hugging Face matches normalized ones after the
    // normaliser; for NFC that is the same unless the token itself changes under NFC).
    for (const detail::JsonVocab::Added& a : v->added) p.specialIds.push_back(a.id);

    if (auto n = j.find("normalizer"); n != j.end() && !n->is_null()) {
        const std::string nt = n->is_object() ? n->value("type", std::string()) : std::string();
        const bool emptySequence = nt == "Sequence" && n->contains("normalizers") && (*n)["normalizers"].is_array() &&
                                   (*n)["normalizers"].empty();
        if (nt == "NFC") p.nfc = true;
        else if (!emptySequence)
            return unsupported("normalizer.type \"" + clipForMessage(nt) + "\" is not supported (supported: null, NFC)");
    }
    auto pre = j.find("pre_tokenizer");
    if (pre == j.end() || pre->is_null()) return unsupported("no pre_tokenizer: only byte-level BPE (a ByteLevel pre_tokenizer) is supported");
    bool byteLevel = false;
    ATTNSCOPE_RETURN_IF_ERROR(parsePreTokenizer(*pre, "pre_tokenizer", p, byteLevel, 0));
    if (!byteLevel) return unsupported("pre_tokenizer has no ByteLevel step: only byte-level BPE is supported");
    if (auto d = j.find("decoder"); d != j.end() && !d->is_null()) {
        const std::string dt = d->is_object() ? d->value("type", std::string()) : std::string();
        if (dt != "ByteLevel") return unsupported("decoder.type \"" + clipForMessage(dt) + "\" is not supported (supported: ByteLevel)");
    }
    std::unordered_map<std::string, int> ids;
    for (std::size_t id = 0; id < p.tokens.size(); ++id) ids.emplace(p.tokens[id], static_cast<int>(id));
    if (auto pp = j.find("post_processor"); pp != j.end() && !pp->is_null())
        ATTNSCOPE_RETURN_IF_ERROR(detail::readJsonTemplate(*pp, "post_processor", ids, p.tokens.size(), p.prefix, p.suffix, 0));

    std::vector<int> prefix = p.prefix;
    auto im = build(std::move(p), "tokenizer.json: token", "tokenizer.json: model.merges");
    if (!im) return makeError(StatusCode::ParseError, im.status().message);
    BpeTokenizer t;
    t.m_impl = std::move(*im);
    // tokenizer.json does not name BOS/EOS (tokenizer_config.json does): the template's first token, else the
    // usual names.
    auto named = [&](std::initializer_list<const char*> names) {
        for (const char* n : names)
            if (auto it = ids.find(n); it != ids.end()) return it->second;
        return -1;
    };
    t.m_bos = !prefix.empty() ? prefix.front() : named({"<|begin_of_text|>", "<s>", "<|endoftext|>"});
    t.m_eos = named({"<|end_of_text|>", "</s>", "<|endoftext|>"});
    return t;
}

// [SECTION] Encoding and decoding

int BpeTokenizer::vocabSize() const { return m_impl ? static_cast<int>(m_impl->tokens.size()) : 0; }

Status BpeTokenizer::setBosEos(int bos, int eos)
{
    if (!m_impl) return detail::VocabTable().checkBosEos(bos, eos);
    ATTNSCOPE_RETURN_IF_ERROR(m_impl->checkBosEos(bos, eos));
    m_bos = bos;
    m_eos = eos;
    return Status::success();
}

std::string BpeTokenizer::tokenText(int id) const { return m_impl ? m_impl->tokenText(id) : std::string(); }

std::optional<int> BpeTokenizer::idOf(const std::string& decodedText) const
{
    return m_impl ? m_impl->idOf(decodedText) : std::nullopt;
}

std::string BpeTokenizer::decode(const std::vector<int>& ids) const
{
    std::string out;
    if (!m_impl) return out;
    for (int id : ids)
        if (id >= 0 && id < vocabSize()) out += m_impl->bytes[static_cast<std::size_t>(id)];
    return out;
}

Expected<Encoding> BpeTokenizer::encode(const std::string& text, bool addSpecial) const
{
    if (!m_impl) return invalidArgument("BpeTokenizer: not loaded");
    const Impl& im = *m_impl;
    if (const std::size_t bad = firstInvalidUtf8(text); bad != std::string::npos)
        return invalidArgument("text: invalid UTF-8 at byte " + std::to_string(bad));
    Encoding enc;
    if (addSpecial) enc.ids = im.prefix;
    std::vector<std::string> pieces;
    auto encodeSegment = [&](std::size_t from, std::size_t to) -> Status {
        if (to <= from) return Status::success();
        pieces.clear();
        ATTNSCOPE_RETURN_IF_ERROR(im.preTokenize(text.substr(from, to - from), pieces));
        for (const std::string& piece : pieces) {
            {
                std::lock_guard<std::mutex> lock(im.cacheMutex);
                if (auto it = im.cache.find(piece); it != im.cache.end()) {
                    enc.ids.insert(enc.ids.end(), it->second.begin(), it->second.end());
                    continue;
                }
            }
            std::vector<int> ids = im.bpe(piece, enc.warnings);
            enc.ids.insert(enc.ids.end(), ids.begin(), ids.end());
            std::lock_guard<std::mutex> lock(im.cacheMutex);
            if (im.cache.size() >= kMaxCachedWords) im.cache.clear();
            im.cache.emplace(piece, std::move(ids));
        }
        return Status::success();
    };
    // Added tokens: the leftmost match, the longest one where several start at the same byte.
    std::size_t segment = 0;
    for (std::size_t i = 0; i < text.size();) {
        const auto& candidates = im.specials[static_cast<unsigned char>(text[i])];
        const std::pair<std::string, int>* hit = nullptr;
        for (const auto& c : candidates)
            if (text.compare(i, c.first.size(), c.first) == 0) { hit = &c; break; }
        if (!hit) { ++i; continue; }
        ATTNSCOPE_RETURN_IF_ERROR(encodeSegment(segment, i));
        enc.ids.push_back(hit->second);
        i += hit->first.size();
        segment = i;
    }
    ATTNSCOPE_RETURN_IF_ERROR(encodeSegment(segment, text.size()));
    if (addSpecial) enc.ids.insert(enc.ids.end(), im.suffix.begin(), im.suffix.end());
    im.finishEncoding(enc);
    return enc;
}

} // namespace attn
