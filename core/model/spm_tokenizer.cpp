// SentencePiece-style BPE tokenizer. See attnscope/spm_tokenizer.h for the pipeline. Learned from llama.cpp
// (src/llama-vocab.cpp: the SPM session's bigram queue, tokenizer_st_partition, the space prefix after special
// tokens), sentencepiece (src/bpe_model.cc: the same merge loop by piece score) and Hugging Face tokenizers
// (models/bpe: merges by rank, byte_fallback; normalizers Prepend / Replace; pre_tokenizers Metaspace / Split;
// the added-vocabulary's leftmost-longest match).
// The vocabulary table (pieces, bytes, merges, lookups) and tokenizer.json's vocabulary and template are shared with
// the other BPE tokenizer: vocab_table.h.
//
// [SECTION] Helpers
// [SECTION] Impl
// [SECTION] Special split
// [SECTION] BPE of one piece
// [SECTION] Construction
// [SECTION] fromSpec
// [SECTION] fromTokenizerJson
// [SECTION] Encoding and decoding
#include "attnscope/spm_tokenizer.h"

#include "attnscope/bpe_tokenizer.h"  // firstInvalidUtf8
#include "attnscope/preset_io.h"      // checkJsonDepth, clipForMessage
#include "vocab_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <new>
#include <optional>
#include <queue>
#include <string_view>
#include <unordered_map>

namespace attn {
using json = nlohmann::json;

namespace {

using detail::lossyUtf8;
using detail::pairKey;
using detail::splitMerge;
// Largest vocabulary (vocab_table.h) and merge list accepted (a tokenizer.json's merges; Gemma 3's vocabulary of
// 262 144 pieces has fewer); a bigger array is a broken or hostile file.
constexpr std::size_t kMaxTokens = detail::kMaxVocabTokens;
constexpr std::size_t kMaxMerges = 2'000'000;
// Special-token matches (start, length, id; 12 bytes each) collected per text before it is refused. Every prefix of
// a run that is a token matches at every position (Gemma 3: up to 31 per position in a run of newlines), so
// this is about 500 KB of nothing but newlines; a hostile vocabulary of nested tokens reaches it sooner.
constexpr std::size_t kMaxSpecialMatches = 16u << 20;
// Warnings kept per encoding (one per character that became the unknown token would flood the log).
constexpr std::size_t kMaxWarnings = 8;

// "▁" (U+2581 LOWER ONE EIGHTH BLOCK): SentencePiece's stand-in for a space.
constexpr std::string_view kSpace = "\xE2\x96\x81";

enum Type : std::uint8_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// [SECTION] Helpers

std::string replaceAll(std::string_view s, std::string_view from, std::string_view to)
{
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        if (s.compare(i, from.size(), from) == 0) {
            out += to;
            i += from.size();
        } else {
            out += s[i++];
        }
    }
    return out;
}

// "<0x0A>" → 10; -1 for anything else (SentencePiece writes byte pieces with two upper-case hex digits).
int bytePieceValue(const std::string& piece)
{
    if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; ++k) {
        const char c = piece[static_cast<std::size_t>(k)];
        v *= 16;
        if (c >= '0' && c <= '9') v += c - '0';
        else if (c >= 'A' && c <= 'F') v += c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') v += c - 'a' + 10;
        else return -1;
    }
    return v;
}

std::size_t utf8Length(unsigned char c)
{
    return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

std::string hexByte(unsigned char b)
{
    const char* h = "0123456789ABCDEF";
    return std::string("0x") + h[b >> 4] + h[b & 15];
}

} // namespace

// [SECTION] Impl

// The vocabulary table (vocab_table.h: a repeated piece's first id is its id) and what SentencePiece adds.
struct SpmTokenizer::Impl : detail::VocabTable {
    enum class Prefix { None, EveryFragment, FirstOnly };  // where the encoder puts "▁" before a fragment
    enum class Order { Score, Rank };                       // llama.cpp's scores or Hugging Face's merge ranks
    enum class Split { None, MergedWithPrevious, MergedWithNext, Isolated, Removed };
    enum class SpecialMatch { LongestFirst, LeftmostLongest };  // llama.cpp's partition, Hugging Face's added vocabulary

    std::vector<std::uint8_t> types;
    std::vector<float> scores;
    // byDecoded: normal and user-defined pieces before the others; merges: Rank order only.
    std::array<int, 256> byteId{};
    std::size_t maxTokenBytes = 0;
    Order order = Order::Score;
    Prefix prefix = Prefix::EveryFragment;
    bool prefixIfMissing = false;  // Metaspace: no "▁" added when the fragment already starts with one
    bool replaceSpaces = true;     // " " → "▁"
    std::string splitOn;           // pre-tokeniser split (after the spaces are replaced); empty = none
    Split split = Split::None;
    SpecialMatch specialMatch = SpecialMatch::LongestFirst;
    bool charFallback = true;      // llama.cpp: a byte with no <0xXX> piece may be its one-character token
    int unk = -1, pad = -1;
    std::vector<int> before, after;  // the template around the text (addSpecial)

    // Trie of the special tokens (control, user-defined, unknown): node → byte → node.
    std::vector<int> nodeToken{-1};
    std::unordered_map<std::uint64_t, int> edges;

    bool isSpecial(int id) const
    {
        const std::uint8_t t = types[static_cast<std::size_t>(id)];
        return t == Control || t == UserDefined || t == Unknown;
    }

    struct Fragment { std::size_t from, to; int id; };  // raw text [from, to) when id < 0, else one token
    // The text cut into fragments; nullopt when it holds more than kMaxSpecialMatches special-token matches.
    std::optional<std::vector<Fragment>> splitSpecial(const std::string& text) const;
    Status bpe(const std::string& piece, std::vector<int>& out, std::vector<std::string>& warnings) const;
};

// [SECTION] Special split

std::optional<std::vector<SpmTokenizer::Impl::Fragment>> SpmTokenizer::Impl::splitSpecial(const std::string& text) const
{
    const std::size_t n = text.size();
    std::vector<Fragment> out;
    auto longestAt = [&](std::size_t pos, auto&& each) {
        int node = 0;
        for (std::size_t i = pos; i < n; ++i) {
            auto e = edges.find((static_cast<std::uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
            if (e == edges.end()) break;
            node = e->second;
            if (nodeToken[static_cast<std::size_t>(node)] >= 0) each(nodeToken[static_cast<std::size_t>(node)], i + 1 - pos);
        }
    };
    if (edges.empty()) {
        if (n) out.push_back({0, n, -1});
        return out;
    }
    if (specialMatch == SpecialMatch::LeftmostLongest) {
        std::size_t start = 0;
        for (std::size_t i = 0; i < n;) {
            int best = -1;
            std::size_t bestLen = 0;
            longestAt(i, [&](int id, std::size_t len) { best = id; bestLen = len; });
            if (best < 0) { ++i; continue; }
            if (i > start) out.push_back({start, i, -1});
            out.push_back({i, i + bestLen, best});
            i += bestLen;
            start = i;
        }
        if (n > start) out.push_back({start, n, -1});
        return out;
    }
    // llama.cpp's tokenizer_st_partition: the special tokens longest first (lower id first among equals), each
    // cutting its occurrences out of what is still raw text, leftmost first and not overlapping. Done from the
    // matches a trie finds (the same result without a pass over the text per token): an occurrence is cut when it
    // starts at or after the token's previous cut and none of its bytes is cut yet. A cut region is at least as
    // long as the occurrence, so it overlaps the occurrence only if it covers its first or its last byte.
    struct Match { std::uint32_t pos, len; int id; };
    if (n > UINT32_MAX) return std::nullopt;
    std::vector<Match> matches;
    for (std::size_t i = 0; i < n && matches.size() <= kMaxSpecialMatches; ++i)
        longestAt(i, [&](int id, std::size_t len) {
            matches.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(len), id});
        });
    if (matches.size() > kMaxSpecialMatches) return std::nullopt;
    std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) {
        return a.len != b.len ? a.len > b.len : a.id != b.id ? a.id < b.id : a.pos < b.pos;
    });
    std::vector<int> cutBy(n, -1);
    std::vector<std::size_t> cutStart;
    std::size_t lastEnd = 0;
    int lastId = -1;
    std::vector<Match> taken;
    for (const Match& m : matches) {
        if (m.id != lastId) { lastId = m.id; lastEnd = 0; }
        if (m.pos < lastEnd || cutBy[m.pos] >= 0 || cutBy[m.pos + m.len - 1] >= 0) continue;
        for (std::size_t k = m.pos; k < std::size_t{m.pos} + m.len; ++k) cutBy[k] = m.id;
        lastEnd = m.pos + m.len;
        taken.push_back(m);
    }
    std::sort(taken.begin(), taken.end(), [](const Match& a, const Match& b) { return a.pos < b.pos; });
    std::size_t start = 0;
    for (const Match& m : taken) {
        if (m.pos > start) out.push_back({start, m.pos, -1});
        out.push_back({m.pos, m.pos + m.len, m.id});
        start = m.pos + m.len;
    }
    if (n > start) out.push_back({start, n, -1});
    return out;
}

// [SECTION] BPE of one piece

// The piece's UTF-8 characters are the symbols (a linked list); candidate merges of neighbours wait in a priority
// queue: the merged token's score (Order::Score) or the pair's merges rank (Order::Rank) first, then the leftmost.
// A candidate whose sides have changed since it was queued is dropped when it comes up. O(n log n) for n
// characters.
Status SpmTokenizer::Impl::bpe(const std::string& piece, std::vector<int>& out, std::vector<std::string>& warnings) const
{
    struct Sym { std::size_t start, len; int prev, next, id; };
    std::vector<Sym> sym;
    for (std::size_t i = 0; i < piece.size();) {
        const std::size_t len = std::min(utf8Length(static_cast<unsigned char>(piece[i])), piece.size() - i);
        auto it = vocab.find(std::string_view(piece).substr(i, len));
        const int k = static_cast<int>(sym.size());
        sym.push_back({i, len, k - 1, -1, it == vocab.end() ? -1 : it->second});
        if (k > 0) sym[static_cast<std::size_t>(k - 1)].next = k;
        i += len;
    }
    struct Cand { double priority; int left, right; std::size_t size; int merged; };
    auto worse = [](const Cand& a, const Cand& b) {
        return a.priority != b.priority ? a.priority < b.priority : a.left > b.left;
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> queue(worse);
    auto consider = [&](int left) {
        if (left < 0) return;
        const Sym& l = sym[static_cast<std::size_t>(left)];
        if (l.next < 0) return;
        const Sym& r = sym[static_cast<std::size_t>(l.next)];
        if (order == Order::Rank) {
            if (l.id < 0 || r.id < 0) return;
            auto m = merges.find(pairKey(l.id, r.id));
            if (m == merges.end()) return;
            queue.push({-static_cast<double>(m->second.first), left, l.next, l.len + r.len, m->second.second});
            return;
        }
        const std::size_t size = l.len + r.len;
        if (size > maxTokenBytes) return;
        auto it = vocab.find(std::string_view(piece).substr(l.start, size));
        if (it == vocab.end()) return;
        queue.push({scores[static_cast<std::size_t>(it->second)], left, l.next, size, it->second});
    };
    for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i);
    while (!queue.empty()) {
        const Cand c = queue.top();
        queue.pop();
        Sym& l = sym[static_cast<std::size_t>(c.left)];
        Sym& r = sym[static_cast<std::size_t>(c.right)];
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.size) continue;  // stale
        l.len += r.len;
        l.id = c.merged;
        l.next = r.next;
        if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = c.left;
        r.len = 0;
        consider(l.prev);
        consider(c.left);
    }
    for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<std::size_t>(i)].next) {
        const Sym& s = sym[static_cast<std::size_t>(i)];
        if (s.id >= 0) { out.push_back(s.id); continue; }
        // Byte fallback: every byte its <0xXX> piece (llama.cpp also takes a one-character token of that byte).
        std::vector<int> ids;
        for (std::size_t k = s.start; k < s.start + s.len; ++k) {
            const unsigned char b = static_cast<unsigned char>(piece[k]);
            int id = byteId[b];
            if (id < 0 && charFallback)
                if (auto it = vocab.find(std::string_view(piece).substr(k, 1)); it != vocab.end()) id = it->second;
            if (id < 0) { ids.clear(); break; }
            ids.push_back(id);
        }
        if (!ids.empty()) { out.insert(out.end(), ids.begin(), ids.end()); continue; }
        const std::string ch = piece.substr(s.start, s.len);
        if (unk < 0)
            return invalidArgument("text: \"" + clipForMessage(ch) + "\" (byte " + hexByte(static_cast<unsigned char>(ch[0])) +
                                   ") has no token, no <0xXX> byte tokens and the vocabulary no unknown token");
        if (warnings.size() < kMaxWarnings)
            warnings.push_back("\"" + clipForMessage(ch) + "\" has no token and no byte tokens: encoded as the unknown token");
        out.push_back(unk);
    }
    return Status::success();
}

// [SECTION] Construction

namespace {

// What both paths know before the Impl is built.
struct Parts {
    std::vector<std::string> tokens;
    std::vector<int> types;    // 1..6, one per token
    std::vector<float> scores; // one per token
    std::vector<std::pair<std::string, std::string>> merges;  // Rank order only
};

Expected<std::shared_ptr<SpmTokenizer::Impl>> build(Parts&& p, SpmTokenizer::Impl::Order order, const std::string& tokensWhere,
                                                   const std::string& mergesWhere)
{
    using Impl = SpmTokenizer::Impl;
    auto im = std::make_shared<Impl>();
    ATTNSCOPE_RETURN_IF_ERROR(im->setTokens(std::move(p.tokens), tokensWhere, false));
    const std::size_t n = im->tokens.size();
    im->types.resize(n);
    for (std::size_t id = 0; id < n; ++id) {
        im->types[id] = static_cast<std::uint8_t>(p.types[id]);
        im->maxTokenBytes = std::max(im->maxTokenBytes, im->tokens[id].size());
    }
    im->scores = std::move(p.scores);
    im->order = order;
    im->byteId.fill(-1);
    std::vector<std::string> bytes(n);
    for (std::size_t id = 0; id < n; ++id) {
        const std::string& t = im->tokens[id];
        const int b = im->types[id] == Byte ? bytePieceValue(t) : -1;
        if (im->types[id] == Byte && b < 0)
            return invalidArgument(tokensWhere + "[" + std::to_string(id) + "]: a byte token (type 6) must be <0xXX>, got \"" +
                                   clipForMessage(t) + "\"");
        if (b >= 0) {
            if (im->byteId[static_cast<std::size_t>(b)] < 0) im->byteId[static_cast<std::size_t>(b)] = static_cast<int>(id);
            bytes[id] = std::string(1, static_cast<char>(b));
        } else if (im->types[id] == Normal || im->types[id] == Unused) {
            bytes[id] = replaceAll(t, kSpace, " ");
        } else {
            bytes[id] = t;  // control, unknown and user-defined tokens stand for their own text
        }
    }
    // A vocabulary without token types still falls back to its "<0xXX>" pieces, as llama.cpp looks them up by text.
    for (std::size_t id = 0; id < n; ++id)
        if (const int b = bytePieceValue(im->tokens[id]); b >= 0 && im->byteId[static_cast<std::size_t>(b)] < 0)
            im->byteId[static_cast<std::size_t>(b)] = static_cast<int>(id);
    im->setBytes(std::move(bytes), [&im](int id) {
        const std::uint8_t t = im->types[static_cast<std::size_t>(id)];
        return t == Normal || t == UserDefined;
    });
    // The special tokens' trie.
    for (std::size_t id = 0; id < n; ++id) {
        if (!im->isSpecial(static_cast<int>(id))) continue;
        int node = 0;
        for (unsigned char c : im->tokens[id]) {
            const std::uint64_t key = (static_cast<std::uint64_t>(node) << 8) | c;
            auto it = im->edges.find(key);
            if (it == im->edges.end()) {
                it = im->edges.emplace(key, static_cast<int>(im->nodeToken.size())).first;
                im->nodeToken.push_back(-1);
            }
            node = it->second;
        }
        if (im->nodeToken[static_cast<std::size_t>(node)] < 0) im->nodeToken[static_cast<std::size_t>(node)] = static_cast<int>(id);
    }
    ATTNSCOPE_RETURN_IF_ERROR(im->setMerges(p.merges, mergesWhere));
    return im;
}

} // namespace

// [SECTION] fromSpec

Expected<SpmTokenizer> SpmTokenizer::fromSpec(const SpmVocabSpec& spec)
{
    const std::string where = "tokenizer.ggml";
    const std::size_t n = spec.tokens.size();
    if (n > kMaxTokens)
        return invalidArgument(where + ".tokens: " + std::to_string(n) + " tokens, over the limit of " + std::to_string(kMaxTokens));
    if (!spec.scores.empty() && spec.scores.size() != n)
        return invalidArgument(where + ".scores: expected " + std::to_string(n) + " entries (one per token), got " +
                               std::to_string(spec.scores.size()));
    if (!spec.tokenTypes.empty() && spec.tokenTypes.size() != n)
        return invalidArgument(where + ".token_type: expected " + std::to_string(n) + " entries (one per token), got " +
                               std::to_string(spec.tokenTypes.size()));
    Parts p;
    p.tokens = spec.tokens;
    p.scores = spec.scores.empty() ? std::vector<float>(n, 0.0f) : spec.scores;
    for (std::size_t id = 0; id < p.scores.size(); ++id)
        if (std::isnan(p.scores[id]))
            return invalidArgument(where + ".scores[" + std::to_string(id) + "]: expected a number, got NaN");
    p.types = spec.tokenTypes.empty() ? std::vector<int>(n, Normal) : spec.tokenTypes;
    for (std::size_t id = 0; id < p.types.size(); ++id)
        if (p.types[id] < 1 || p.types[id] > 6)
            return invalidArgument(where + ".token_type[" + std::to_string(id) + "]: expected 1..6, got " + std::to_string(p.types[id]));
    const int size = static_cast<int>(n);
    auto checkId = [&](int id, const char* field) -> Status {
        if (id < -1 || id >= size)
            return invalidArgument(where + "." + field + ": id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                   std::to_string(size - 1) + ")");
        return Status::success();
    };
    ATTNSCOPE_RETURN_IF_ERROR(checkId(spec.bos, "bos_token_id"));
    ATTNSCOPE_RETURN_IF_ERROR(checkId(spec.eos, "eos_token_id"));
    ATTNSCOPE_RETURN_IF_ERROR(checkId(spec.unk, "unknown_token_id"));
    ATTNSCOPE_RETURN_IF_ERROR(checkId(spec.pad, "padding_token_id"));
    if (spec.addBos && spec.bos < 0) return invalidArgument(where + ".add_bos_token is true but there is no bos_token_id");
    if (spec.addEos && spec.eos < 0) return invalidArgument(where + ".add_eos_token is true but there is no eos_token_id");
    auto im = build(std::move(p), Impl::Order::Score, where + ".tokens", where + ".merges");
    if (!im) return im.status();
    Impl& m = **im;
    m.prefix = spec.addSpacePrefix ? Impl::Prefix::EveryFragment : Impl::Prefix::None;
    m.unk = spec.unk;
    m.pad = spec.pad;
    if (spec.addBos) m.before.push_back(spec.bos);
    if (spec.addEos) m.after.push_back(spec.eos);
    SpmTokenizer t;
    t.m_impl = std::move(*im);
    t.m_bos = spec.bos;
    t.m_eos = spec.eos;
    return t;
}

// [SECTION] fromTokenizerJson

namespace {

struct JsonOptions {
    bool prepend = false, replace = false;                 // normalizer
    bool metaspace = false;                                 // pre_tokenizer Metaspace
    SpmTokenizer::Impl::Prefix metaspacePrefix = SpmTokenizer::Impl::Prefix::EveryFragment;
    std::string splitOn;
    SpmTokenizer::Impl::Split split = SpmTokenizer::Impl::Split::None;
};

Status parseNormalizer(const json& j, const std::string& path, JsonOptions& o, int depth)
{
    auto bad = [&](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + path + m); };
    auto unsupported = [&](const std::string& m) { return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + m); };
    if (!j.is_object()) return bad(": expected an object");
    const std::string type = j.value("type", std::string());
    if (type == "Sequence") {
        if (depth > 4) return bad(": Sequence nested too deep");
        auto list = j.find("normalizers");
        if (list == j.end() || !list->is_array()) return bad(".normalizers: expected an array");
        for (std::size_t i = 0; i < list->size(); ++i)
            ATTNSCOPE_RETURN_IF_ERROR(parseNormalizer((*list)[i], path + ".normalizers[" + std::to_string(i) + "]", o, depth + 1));
        return Status::success();
    }
    if (type == "Prepend") {
        auto p = j.find("prepend");
        if (p == j.end() || !p->is_string() || p->get<std::string>() != kSpace)
            return unsupported(".prepend: only \"▁\" is supported, got " + (p == j.end() ? std::string("nothing") : clipForMessage(p->dump())));
        o.prepend = true;
        return Status::success();
    }
    if (type == "Replace") {
        auto pat = j.find("pattern");
        auto content = j.find("content");
        const bool spaceToMeta = pat != j.end() && pat->is_object() && pat->contains("String") && (*pat)["String"].is_string() &&
                                 (*pat)["String"].get<std::string>() == " " && content != j.end() && content->is_string() &&
                                 content->get<std::string>() == kSpace;
        if (!spaceToMeta)
            return unsupported(": only Replace(\" \" → \"▁\") is supported, got " + clipForMessage(j.dump(), 120));
        o.replace = true;
        return Status::success();
    }
    return unsupported(".type \"" + clipForMessage(type) + "\" is not supported (supported: Replace, Prepend, Sequence)");
}

Status parsePreTokenizer(const json& j, const std::string& path, JsonOptions& o, int depth)
{
    using Impl = SpmTokenizer::Impl;
    auto bad = [&](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + path + m); };
    auto unsupported = [&](const std::string& m) { return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + m); };
    if (!j.is_object()) return bad(": expected an object");
    const std::string type = j.value("type", std::string());
    if (type == "Sequence") {
        if (depth > 4) return bad(": Sequence nested too deep");
        auto list = j.find("pretokenizers");
        if (list == j.end() || !list->is_array()) return bad(".pretokenizers: expected an array");
        for (std::size_t i = 0; i < list->size(); ++i)
            ATTNSCOPE_RETURN_IF_ERROR(parsePreTokenizer((*list)[i], path + ".pretokenizers[" + std::to_string(i) + "]", o, depth + 1));
        return Status::success();
    }
    if (type == "Metaspace") {
        if (o.metaspace) return unsupported(": a second Metaspace is not supported");
        const std::string rep = j.value("replacement", std::string(kSpace));
        if (rep != kSpace) return unsupported(".replacement \"" + clipForMessage(rep) + "\" is not supported (only \"▁\")");
        std::string scheme = j.value("prepend_scheme", std::string());
        if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";  // tokenizers < 0.14
        if (scheme == "always") o.metaspacePrefix = Impl::Prefix::EveryFragment;
        else if (scheme == "first") o.metaspacePrefix = Impl::Prefix::FirstOnly;
        else if (scheme == "never") o.metaspacePrefix = Impl::Prefix::None;
        else return unsupported(".prepend_scheme \"" + clipForMessage(scheme) + "\" is not supported (supported: always, first, never)");
        o.metaspace = true;
        if (j.value("split", true)) {
            if (o.split != Impl::Split::None) return unsupported(": a second split is not supported");
            o.splitOn = std::string(kSpace);
            o.split = Impl::Split::MergedWithNext;
        }
        return Status::success();
    }
    if (type == "Split") {
        if (o.split != Impl::Split::None) return unsupported(": a second split is not supported");
        auto pat = j.find("pattern");
        if (pat == j.end() || !pat->is_object() || !pat->contains("String") || !(*pat)["String"].is_string() ||
            (*pat)["String"].get<std::string>().empty())
            return unsupported(".pattern: only a non-empty {\"String\": …} is supported here, got " +
                               (pat == j.end() ? std::string("nothing") : clipForMessage(pat->dump())));
        if (j.value("invert", false)) return unsupported(".invert true is not supported");
        const std::string behavior = j.value("behavior", std::string());
        if (behavior == "MergedWithPrevious") o.split = Impl::Split::MergedWithPrevious;
        else if (behavior == "MergedWithNext") o.split = Impl::Split::MergedWithNext;
        else if (behavior == "Isolated") o.split = Impl::Split::Isolated;
        else if (behavior == "Removed") o.split = Impl::Split::Removed;
        else return unsupported(".behavior \"" + clipForMessage(behavior) +
                                "\" is not supported (supported: MergedWithPrevious, MergedWithNext, Isolated, Removed)");
        o.splitOn = (*pat)["String"].get<std::string>();
        return Status::success();
    }
    return unsupported(".type \"" + clipForMessage(type) + "\" is not supported (supported: Metaspace, Split, Sequence)");
}

Status checkDecoder(const json& j, const std::string& path, int depth)
{
    auto bad = [&](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + path + m); };
    if (!j.is_object()) return bad(": expected an object");
    const std::string type = j.value("type", std::string());
    if (type == "Sequence") {
        if (depth > 4) return bad(": Sequence nested too deep");
        auto list = j.find("decoders");
        if (list == j.end() || !list->is_array()) return bad(".decoders: expected an array");
        for (std::size_t i = 0; i < list->size(); ++i)
            ATTNSCOPE_RETURN_IF_ERROR(checkDecoder((*list)[i], path + ".decoders[" + std::to_string(i) + "]", depth + 1));
        return Status::success();
    }
    // These undo what the encoder did ("▁" → " ", bytes, the prefix space); decode() does the same from the
    // encoder's own settings, so that decode(encode(text)) == text.
    for (const char* ok : {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"})
        if (type == ok) return Status::success();
    return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + ".type \"" + clipForMessage(type) +
                                                  "\" is not supported (supported: Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
}

// TemplateProcessing's single template: the special tokens before and after $A.

} // namespace

bool SpmTokenizer::looksLikeSpmJson(const std::string& text)
{
    try {
        if (!checkJsonDepth(text, kMaxJsonDepth, "tokenizer.json").ok()) return false;
        const json j = json::parse(text, nullptr, false);
        if (!j.is_object()) return false;
        auto model = j.find("model");
        if (model == j.end() || !model->is_object()) return false;
        if (model->value("type", std::string()) != "BPE") return false;
        if (auto b = model->find("byte_fallback"); b != model->end() && b->is_boolean() && b->get<bool>()) return true;
        const std::string dump = (j.contains("normalizer") ? j["normalizer"].dump() : std::string()) +
                                 (j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : std::string());
        return dump.find("Metaspace") != std::string::npos || dump.find(kSpace) != std::string::npos;
    } catch (const std::exception&) {
        return false;
    }
}

Expected<SpmTokenizer> SpmTokenizer::fromTokenizerJson(const std::string& text)
{
    return detail::catchingJsonErrors([&] { return fromTokenizerJsonImpl(text); });
}

Expected<SpmTokenizer> SpmTokenizer::fromTokenizerJsonImpl(const std::string& text)
{
    auto unsupported = [](const std::string& m) { return makeError(StatusCode::Unsupported, "tokenizer.json: " + m); };
    json j;
    ATTNSCOPE_RETURN_IF_ERROR(detail::parseJsonBpe(text, j));
    const json* model = &j["model"];
    if (model->value("ignore_merges", false)) return unsupported("model.ignore_merges true is not supported (expected false)");
    const bool byteFallback = model->value("byte_fallback", false);

    auto v = detail::readJsonVocab(j, *model, kMaxMerges);
    if (!v) return v.status();
    Parts p;
    const std::size_t size = v->tokens.size();
    p.types.assign(size, Normal);
    p.scores.assign(size, 0.0f);
    if (byteFallback)
        for (std::size_t id = 0; id < size; ++id)
            if (bytePieceValue(v->tokens[id]) >= 0) p.types[id] = Byte;
    // Matched whole in the raw text (Hugging Face's added vocabulary): special ones are control tokens, the others
    // user-defined (SentencePiece's user_defined_symbols, which the converters write that way).
    for (const detail::JsonVocab::Added& a : v->added) p.types[static_cast<std::size_t>(a.id)] = a.special ? Control : UserDefined;
    const int unk = v->unk;
    if (unk >= 0 && p.types[static_cast<std::size_t>(unk)] == Normal) p.types[static_cast<std::size_t>(unk)] = Unknown;
    p.tokens = std::move(v->tokens);
    p.merges = std::move(v->merges);

    JsonOptions o;
    if (auto nz = j.find("normalizer"); nz != j.end() && !nz->is_null())
        ATTNSCOPE_RETURN_IF_ERROR(parseNormalizer(*nz, "normalizer", o, 0));
    if (auto pre = j.find("pre_tokenizer"); pre != j.end() && !pre->is_null())
        ATTNSCOPE_RETURN_IF_ERROR(parsePreTokenizer(*pre, "pre_tokenizer", o, 0));
    if (o.prepend && o.metaspace)
        return unsupported("normalizer Prepend together with pre_tokenizer Metaspace is not supported (expected one of them)");
    if (!o.replace && !o.metaspace)
        return unsupported("neither normalizer Replace(\" \" → \"▁\") nor pre_tokenizer Metaspace: not a SentencePiece-style tokenizer");
    if (auto d = j.find("decoder"); d != j.end() && !d->is_null()) ATTNSCOPE_RETURN_IF_ERROR(checkDecoder(*d, "decoder", 0));
    std::unordered_map<std::string, int> ids;
    for (std::size_t id = 0; id < p.tokens.size(); ++id) ids.emplace(p.tokens[id], static_cast<int>(id));
    std::vector<int> before, after;
    if (auto pp = j.find("post_processor"); pp != j.end() && !pp->is_null())
        ATTNSCOPE_RETURN_IF_ERROR(detail::readJsonTemplate(*pp, "post_processor", ids, p.tokens.size(), before, after, 0));

    auto im = build(std::move(p), Impl::Order::Rank, "tokenizer.json: token", "tokenizer.json: model.merges");
    if (!im) return makeError(StatusCode::ParseError, im.status().message);
    Impl& m = **im;
    m.specialMatch = Impl::SpecialMatch::LeftmostLongest;
    m.charFallback = false;
    if (!byteFallback) m.byteId.fill(-1);
    m.unk = unk;
    m.replaceSpaces = true;
    if (o.metaspace) {
        m.prefix = o.metaspacePrefix;
        m.prefixIfMissing = true;
    } else {
        m.prefix = o.prepend ? Impl::Prefix::EveryFragment : Impl::Prefix::None;
    }
    m.splitOn = o.splitOn;
    m.split = o.split;
    m.before = before;
    m.after = after;
    // tokenizer.json does not name BOS/EOS/PAD (tokenizer_config.json does): the template's first token, else the
    // names the SentencePiece models use.
    auto named = [&](std::initializer_list<const char*> names) {
        for (const char* nm : names)
            if (auto it = ids.find(nm); it != ids.end()) return it->second;
        return -1;
    };
    m.pad = named({"<pad>"});
    SpmTokenizer t;
    t.m_impl = std::move(*im);
    t.m_bos = !before.empty() ? before.front() : named({"<s>", "<bos>"});
    t.m_eos = named({"</s>", "<eos>"});
    return t;
}

// [SECTION] Encoding and decoding

int SpmTokenizer::vocabSize() const { return m_impl ? static_cast<int>(m_impl->tokens.size()) : 0; }
int SpmTokenizer::unk() const { return m_impl ? m_impl->unk : -1; }
int SpmTokenizer::pad() const { return m_impl ? m_impl->pad : -1; }
bool SpmTokenizer::addSpacePrefix() const { return m_impl && m_impl->prefix != Impl::Prefix::None; }

Status SpmTokenizer::setBosEos(int bos, int eos)
{
    if (!m_impl) return detail::VocabTable().checkBosEos(bos, eos);
    ATTNSCOPE_RETURN_IF_ERROR(m_impl->checkBosEos(bos, eos));
    m_bos = bos;
    m_eos = eos;
    return Status::success();
}

std::string SpmTokenizer::tokenText(int id) const { return m_impl ? m_impl->tokenText(id) : std::string(); }

std::optional<int> SpmTokenizer::idOf(const std::string& decodedText) const
{
    return m_impl ? m_impl->idOf(decodedText) : std::nullopt;
}

std::string SpmTokenizer::decode(const std::vector<int>& ids) const
{
    std::string out;
    if (!m_impl) return out;
    const Impl& im = *m_impl;
    bool fragmentStart = true;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const int id = ids[k];
        if (id < 0 || id >= vocabSize()) continue;
        const std::string& b = im.bytes[static_cast<std::size_t>(id)];
        if (im.isSpecial(id)) {
            out += b;
            fragmentStart = true;
            continue;
        }
        // The encoder's one prefix space: before every fragment, or (Metaspace "first") before the text's first.
        const bool prefixed = im.prefix == Impl::Prefix::EveryFragment ||
                              (im.prefix == Impl::Prefix::FirstOnly && k == 0);
        if (fragmentStart && prefixed && !b.empty() && b[0] == ' ') out.append(b, 1, std::string::npos);
        else out += b;
        fragmentStart = false;
    }
    return out;
}

Expected<Encoding> SpmTokenizer::encode(const std::string& text, bool addSpecial) const
{
    if (!m_impl) return invalidArgument("SpmTokenizer: not loaded");
    const Impl& im = *m_impl;
    if (const std::size_t bad = firstInvalidUtf8(text); bad != std::string::npos)
        return invalidArgument("text: invalid UTF-8 at byte " + std::to_string(bad));
    Encoding enc;
    if (addSpecial) enc.ids = im.before;
    bool prevSpecial = true;
    const auto fragments = im.splitSpecial(text);
    if (!fragments)
        return makeError(StatusCode::ResourceExhausted, "text: more than " + std::to_string(kMaxSpecialMatches) +
                                                            " special-token matches in " + std::to_string(text.size()) +
                                                            " bytes; split the text");
    for (const Impl::Fragment& f : *fragments) {
        if (f.id >= 0) {
            enc.ids.push_back(f.id);
            prevSpecial = true;
            continue;
        }
        std::string s;
        std::string_view raw = std::string_view(text).substr(f.from, f.to - f.from);
        if (im.prefix == Impl::Prefix::EveryFragment && prevSpecial) s = " ";
        if (im.prefix == Impl::Prefix::FirstOnly && f.from == 0) s = " ";
        if (!s.empty() && im.prefixIfMissing && (raw.substr(0, 1) == " " || raw.substr(0, kSpace.size()) == kSpace)) s.clear();
        s += raw;
        if (im.replaceSpaces) s = replaceAll(s, " ", kSpace);
        prevSpecial = false;
        if (im.split == Impl::Split::None) {
            ATTNSCOPE_RETURN_IF_ERROR(im.bpe(s, enc.ids, enc.warnings));
            continue;
        }
        // The pre-tokeniser's split: BPE never merges across it.
        const std::string& d = im.splitOn;
        std::size_t start = 0;
        auto piece = [&](std::size_t a, std::size_t b) -> Status {
            if (b > a) return im.bpe(s.substr(a, b - a), enc.ids, enc.warnings);
            return Status::success();
        };
        for (std::size_t at = s.find(d); at != std::string::npos; at = s.find(d, at + d.size())) {
            switch (im.split) {
            case Impl::Split::MergedWithPrevious:
                ATTNSCOPE_RETURN_IF_ERROR(piece(start, at + d.size()));
                start = at + d.size();
                break;
            case Impl::Split::MergedWithNext:
                ATTNSCOPE_RETURN_IF_ERROR(piece(start, at));
                start = at;
                break;
            case Impl::Split::Isolated:
            case Impl::Split::Removed:
                ATTNSCOPE_RETURN_IF_ERROR(piece(start, at));
                if (im.split == Impl::Split::Isolated) ATTNSCOPE_RETURN_IF_ERROR(piece(at, at + d.size()));
                start = at + d.size();
                break;
            case Impl::Split::None: break;
            }
        }
        ATTNSCOPE_RETURN_IF_ERROR(piece(start, s.size()));
    }
    if (addSpecial) enc.ids.insert(enc.ids.end(), im.after.begin(), im.after.end());
    im.finishEncoding(enc);
    return enc;
}

} // namespace attn
