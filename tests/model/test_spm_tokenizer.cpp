// The SentencePiece-style BPE tokenizer (attnscope/spm_tokenizer.h) and the decoder's tokenizer routing
// (decoder_tokenizer.h, attnscope/text_tokenizer.h): token ids identical to tests/model/goldens/spm_goldens.json
// (made by make_spm_goldens.py: sentencepiece behind llama.cpp's special split for GGUF vocabularies, Hugging Face
// tokenizers for the tokenizer.json) for the real Gemma 3 vocabulary (read from the GGUF in build/models; skipped when
// it is not installed) and a tiny SentencePiece BPE trained on the seed texts (tests/model/data/spm_tiny: a GGUF and
// a tokenizer.json); round trips; the special split and space-prefix rules; chat templates; every validation message.
#include <attnscope/decoder.h>
#include <attnscope/gguf.h>
#include <attnscope/spm_tokenizer.h>
#include <attnscope/text_tokenizer.h>

#include "decoder_tokenizer.h"  // core/model (internal)

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

namespace {

using json = nlohmann::json;

std::string readFile(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

const json& goldens()
{
    static const json g = json::parse(readFile(ATTNSCOPE_SPM_GOLDENS));
    return g;
}

std::string dataPath(const std::string& name) { return std::string(ATTNSCOPE_SPM_DATA) + "/spm_tiny/" + name; }

std::string gemmaPath()
{
    if (const char* e = std::getenv("ATTNSCOPE_GEMMA3_GGUF")) return e;
    return ATTNSCOPE_GEMMA3_GGUF;
}

attn::Expected<attn::TextTokenizer> fromGgufFile(const std::string& path)
{
    auto f = attn::GgufFile::open(path);
    if (!f) return f.status();
    return attn::tokenizerFromGguf(*f, path);
}

std::vector<int> idsOf(const json& j) { return j.get<std::vector<int>>(); }

// Every golden text: ids without and with the special tokens, tokens are the ids' texts, and decode(encode(x)) == x.
void checkCases(const attn::TextTokenizer& tok, const json& cases, bool roundTrip = true)
{
    ASSERT_FALSE(cases.empty());
    for (const json& c : cases) {
        const std::string text = c["text"];
        SCOPED_TRACE("text: \"" + text.substr(0, 60) + "\"");
        auto plain = tok.encode(text, false);
        ASSERT_TRUE(plain.ok()) << plain.status().message;
        EXPECT_EQ(plain->ids, idsOf(c["ids"]));
        ASSERT_EQ(plain->tokens.size(), plain->ids.size());
        for (std::size_t i = 0; i < plain->ids.size(); ++i) EXPECT_EQ(plain->tokens[i], tok.tokenText(plain->ids[i]));
        // A "▁" typed in the text decodes as a space (as in llama.cpp and Hugging Face): no round trip for it.
        if (roundTrip && text.find("\xE2\x96\x81") == std::string::npos) EXPECT_TRUE(tok.decode(plain->ids) == text);
        auto special = tok.encode(text, true);
        ASSERT_TRUE(special.ok()) << special.status().message;
        EXPECT_EQ(special->ids, idsOf(c["ids_special"]));
    }
}

// [Gemma 3: the real vocabulary] ---------------------------------------------------------------------------------

TEST(SpmGolden, Gemma3Vocabulary)
{
    if (!std::filesystem::exists(gemmaPath())) GTEST_SKIP() << gemmaPath() << " is not installed (scripts/setup.sh)";
    auto tok = fromGgufFile(gemmaPath());
    ASSERT_TRUE(tok.ok()) << tok.status().message;
    const json& g = goldens()["gemma3"];
    EXPECT_EQ(tok->kind(), attn::TokenizerKind::SentencePiece);
    EXPECT_EQ(tok->vocabSize(), g["vocab_size"].get<int>());
    EXPECT_EQ(tok->bos(), g["bos"].get<int>());
    EXPECT_EQ(tok->eos(), g["eos"].get<int>());
    ASSERT_NE(tok->spm(), nullptr);
    EXPECT_EQ(tok->spm()->unk(), g["unk"].get<int>());
    EXPECT_EQ(tok->spm()->pad(), g["pad"].get<int>());
    EXPECT_FALSE(tok->spm()->addSpacePrefix());
    // Runs of spaces and newlines are user-defined pieces, matched in the raw text before "▁"-escaping.
    EXPECT_EQ(tok->encode("    ", false)->ids, std::vector<int>{140});
    EXPECT_EQ(tok->encode("\n", false)->ids, std::vector<int>{107});
    EXPECT_EQ(tok->idOf("<start_of_turn>"), std::optional<int>(105));
    EXPECT_EQ(tok->tokenText(248), "\n");  // <0x0A>
    checkCases(*tok, g["cases"]);
}

// End to end: loading the Gemma 3 GGUF as a decoder no longer stops at its tokenizer (tokenizer.ggml.model
// "llama"). Until the gemma3 family is in, the load is refused for the architecture; once it is, the model
// loads and its tokenizer is the SentencePiece one. Either way, no message about the tokenizer.
TEST(SpmGolden, Gemma3LoadsPastTheTokenizer)
{
    if (!std::filesystem::exists(gemmaPath())) GTEST_SKIP() << gemmaPath() << " is not installed (scripts/setup.sh)";
    auto m = attn::loadDecoder(gemmaPath());
    if (!m.ok()) {
        EXPECT_EQ(m.status().message.find("tokenizer"), std::string::npos) << m.status().message;
        EXPECT_NE(m.status().message.find("gemma3"), std::string::npos) << m.status().message;
        return;
    }
    EXPECT_EQ(m->tokenizer.kind(), attn::TokenizerKind::SentencePiece);
    EXPECT_EQ(m->tokenizer.encode("Hello world", true)->ids, (std::vector<int>{2, 9259, 1902}));
}

// [The tiny trained vocabulary: GGUF and tokenizer.json] ---------------------------------------------------------

TEST(SpmGolden, TinyGguf)
{
    auto tok = fromGgufFile(dataPath("tiny.gguf"));
    ASSERT_TRUE(tok.ok()) << tok.status().message;
    EXPECT_EQ(tok->kind(), attn::TokenizerKind::SentencePiece);
    EXPECT_EQ(tok->vocabSize(), goldens()["tiny_gguf"]["vocab_size"].get<int>());
    EXPECT_EQ(tok->bos(), 1);
    EXPECT_EQ(tok->eos(), 2);
    EXPECT_TRUE(tok->spm()->addSpacePrefix());
    checkCases(*tok, goldens()["tiny_gguf"]["cases"]);
}

TEST(SpmGolden, TinyTokenizerJson)
{
    const std::string text = readFile(dataPath("tokenizer.json"));
    auto tok = attn::tokenizerFromJson(text, "spm_tiny/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status().message;
    EXPECT_EQ(tok->kind(), attn::TokenizerKind::SentencePiece);
    EXPECT_EQ(tok->bos(), 1);
    EXPECT_EQ(tok->eos(), 2);
    checkCases(*tok, goldens()["tiny_json"]["cases"]);
    // The same ids as the GGUF of the same vocabulary (merge ranks and scores agree on it).
    auto gguf = fromGgufFile(dataPath("tiny.gguf"));
    ASSERT_TRUE(gguf.ok());
    for (const json& c : goldens()["tiny_json"]["cases"])
        EXPECT_EQ(tok->encode(c["text"], true)->ids, gguf->encode(c["text"], true)->ids) << c["text"];
}

// [Rules on a hand-made vocabulary] ------------------------------------------------------------------------------

// A vocabulary of pieces, with scores and types: "<s>" "</s>" "<unk>" control/unknown, then pieces.
attn::SpmVocabSpec smallSpec()
{
    attn::SpmVocabSpec s;
    s.tokens = {"<unk>", "<s>", "</s>", "<ab>", "<abc>", "\xE2\x96\x81", "a", "b", "c", "ab", "\xE2\x96\x81" "a",
                "\xE2\x96\x81" "ab", "bc", "<0x41>", "<0xE2>", "<0x82>", "<0xAC>"};
    s.scores = {0, 0, 0, 0, 0, -1, -2, -3, -4, -5, -6, -7, -0.5f, 0, 0, 0, 0};
    s.tokenTypes = {2, 3, 3, 4, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 6, 6};
    s.bos = 1;
    s.eos = 2;
    s.unk = 0;
    return s;
}

std::vector<int> enc(const attn::SpmTokenizer& t, const std::string& text, bool special = false)
{
    auto e = t.encode(text, special);
    EXPECT_TRUE(e.ok()) << e.status().message;
    return e.ok() ? e->ids : std::vector<int>{};
}

TEST(SpmRules, HighestScoreMergesFirst)
{
    auto t = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(t.ok()) << t.status().message;
    // "▁abc": "bc" (-0.5) merges first, then "▁a" (-6); "▁ab" never forms, as "ab" lost "b" to "bc".
    EXPECT_EQ(enc(*t, "abc"), (std::vector<int>{10, 12}));
    // "▁ab": "▁a" (-6) then "▁ab" (-7); "ab" (-5) beats "▁a", so "▁" "ab" then "▁ab".
    EXPECT_EQ(enc(*t, "ab"), (std::vector<int>{11}));
    EXPECT_EQ(enc(*t, "ab", true), (std::vector<int>{1, 11}));
    EXPECT_EQ(t->decode({1, 11}), "<s>ab");
}

TEST(SpmRules, SpacePrefixAfterSpecialTokens)
{
    auto t = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(t.ok());
    // llama.cpp: each fragment that starts the text or follows a cut-out token gets " " in front.
    EXPECT_EQ(enc(*t, "<s>ab</s>ab"), (std::vector<int>{1, 11, 2, 11}));
    EXPECT_EQ(t->decode({1, 11, 2, 11}), "<s>ab</s>ab");
    EXPECT_EQ(t->decode(enc(*t, " ab")), " ab");
    attn::SpmVocabSpec noPrefix = smallSpec();
    noPrefix.addSpacePrefix = false;
    auto g = attn::SpmTokenizer::fromSpec(noPrefix);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(enc(*g, "<s>ab"), (std::vector<int>{1, 9}));
    EXPECT_EQ(g->decode({1, 9}), "<s>ab");
}

TEST(SpmRules, LongestSpecialTokenFirst)
{
    auto t = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(t.ok());
    // "<abc>" (5 bytes) is cut before "<ab>" (4), wherever they are; user-defined "<ab>" stays one token.
    EXPECT_EQ(enc(*t, "<abc><ab>"), (std::vector<int>{4, 3}));
    EXPECT_EQ(enc(*t, "<ab>"), (std::vector<int>{3}));
}

TEST(SpmRules, ByteFallbackAndUnknown)
{
    auto t = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(t.ok());
    // "€" (E2 82 AC) has no piece: its three byte tokens. "A" has only its byte token <0x41>.
    EXPECT_EQ(enc(*t, "\xE2\x82\xAC"), (std::vector<int>{5, 14, 15, 16}));
    EXPECT_EQ(t->decode({5, 14, 15, 16}), "\xE2\x82\xAC");
    EXPECT_EQ(t->tokenText(14), "\xEF\xBF\xBD");  // one byte of a character: U+FFFD on its own
    // "z" has no piece and no byte token: the unknown token, with a warning.
    auto z = t->encode("z", false);
    ASSERT_TRUE(z.ok());
    EXPECT_EQ(z->ids, (std::vector<int>{5, 0}));
    ASSERT_EQ(z->warnings.size(), 1u);
    EXPECT_EQ(z->warnings[0], "\"z\" has no token and no byte tokens: encoded as the unknown token");
    // Without an unknown token either: a message, not a crash.
    attn::SpmVocabSpec s = smallSpec();
    s.unk = -1;
    s.tokenTypes[0] = 1;
    auto noUnk = attn::SpmTokenizer::fromSpec(s);
    ASSERT_TRUE(noUnk.ok()) << noUnk.status().message;
    auto bad = noUnk->encode("z", false);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().message, "text: \"z\" (byte 0x7A) has no token, no <0xXX> byte tokens and the vocabulary no unknown token");
}

TEST(SpmRules, InvalidUtf8AndEmpty)
{
    auto t = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(t.ok());
    auto bad = t->encode("ab\xC3", false);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().message, "text: invalid UTF-8 at byte 2");
    EXPECT_TRUE(enc(*t, "").empty());
    EXPECT_EQ(enc(*t, "", true), std::vector<int>{1});
    EXPECT_EQ(t->decode({-1, 99}), "");
    EXPECT_EQ(t->tokenText(99), "");
}

TEST(SpmRules, HostileTextsFinish)
{
    auto t = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(t.ok());
    // 200 000 characters in one fragment, and text made of special-token prefixes: linear-ish, no blow-up.
    std::string a(200'000, 'a');
    auto e = t->encode(a, false);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(t->decode(e->ids) == a);  // (not EXPECT_EQ: a failure would print 200 000 characters)
    // "<" has no piece and no byte token: the unknown token, with at most 8 warnings however many there are.
    std::string lt;
    for (int i = 0; i < 20'000; ++i) lt += "<ab<abc<ab>";
    auto f = t->encode(lt, false);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->warnings.size(), 8u);
    EXPECT_EQ(std::count(f->ids.begin(), f->ids.end(), 3), 20'000);  // every "<ab>" whole
    // Nested special tokens ("a", "aa", … 600 of them) over 60 000 "a"s: 36 M matches, refused rather than stored.
    attn::SpmVocabSpec nested;
    nested.bos = nested.eos = nested.unk = -1;
    nested.addBos = false;
    for (int k = 1; k <= 600; ++k) {
        nested.tokens.push_back(std::string(static_cast<std::size_t>(k), 'a'));
        nested.tokenTypes.push_back(4);
    }
    auto nt = attn::SpmTokenizer::fromSpec(nested);
    ASSERT_TRUE(nt.ok()) << nt.status().message;
    auto big = nt->encode(std::string(60'000, 'a'), false);
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code, attn::StatusCode::ResourceExhausted);
    EXPECT_EQ(big.status().message, "text: more than 16777216 special-token matches in 60000 bytes; split the text");
    auto small = nt->encode(std::string(1'250, 'a'), false);  // 600 + 600 + 50
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(small->ids, (std::vector<int>{599, 599, 49}));
}

// [Validation messages] ------------------------------------------------------------------------------------------

std::string specError(const std::function<void(attn::SpmVocabSpec&)>& edit)
{
    attn::SpmVocabSpec s = smallSpec();
    edit(s);
    auto t = attn::SpmTokenizer::fromSpec(s);
    return t.ok() ? std::string("(loaded)") : t.status().message;
}

TEST(SpmValidation, SpecMessages)
{
    EXPECT_EQ(specError([](auto& s) { s.scores.pop_back(); }), "tokenizer.ggml.scores: expected 17 entries (one per token), got 16");
    EXPECT_EQ(specError([](auto& s) { s.tokenTypes.push_back(1); }), "tokenizer.ggml.token_type: expected 17 entries (one per token), got 18");
    EXPECT_EQ(specError([](auto& s) { s.tokenTypes[6] = 9; }), "tokenizer.ggml.token_type[6]: expected 1..6, got 9");
    EXPECT_EQ(specError([](auto& s) { s.scores[7] = std::nanf(""); }), "tokenizer.ggml.scores[7]: expected a number, got NaN");
    EXPECT_EQ(specError([](auto& s) { s.bos = 17; }), "tokenizer.ggml.bos_token_id: id 17 is outside the vocabulary (0..16)");
    EXPECT_EQ(specError([](auto& s) { s.unk = -2; }), "tokenizer.ggml.unknown_token_id: id -2 is outside the vocabulary (0..16)");
    EXPECT_EQ(specError([](auto& s) { s.bos = -1; }), "tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
    EXPECT_EQ(specError([](auto& s) { s.tokens[6].clear(); }), "tokenizer.ggml.tokens[6]: the token is empty");
    EXPECT_EQ(specError([](auto& s) { s.tokens[6] = "\xFF"; }), "tokenizer.ggml.tokens[6]: not valid UTF-8");
    EXPECT_EQ(specError([](auto& s) { s.tokens[13] = "<0xZZ>"; }),
              "tokenizer.ggml.tokens[13]: a byte token (type 6) must be <0xXX>, got \"<0xZZ>\"");
    EXPECT_EQ(specError([](auto& s) { s.tokens.clear(); s.scores.clear(); s.tokenTypes.clear(); s.bos = s.eos = s.unk = -1; s.addBos = false; }),
              "tokenizer.ggml.tokens: the vocabulary is empty");
    // No scores and no types: all 0 and all normal; the "<0xXX>" pieces are still the byte fallback (by their text).
    EXPECT_EQ(specError([](auto& s) { s.scores.clear(); s.tokenTypes.clear(); }), "(loaded)");
    attn::SpmVocabSpec untyped = smallSpec();
    untyped.tokenTypes.clear();
    auto u = attn::SpmTokenizer::fromSpec(untyped);
    ASSERT_TRUE(u.ok());
    EXPECT_EQ(u->encode("A", false)->ids, (std::vector<int>{5, 13}));
}

// A GGUF holding only key/value pairs (tokenizer metadata), written byte by byte.
struct GgufKv {
    std::string bytes;
    std::uint64_t count = 0;
    void u32(std::uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); }
    void u64(std::uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), 8); }
    void str(const std::string& s) { u64(s.size()); bytes += s; }
    void key(const std::string& k, std::uint32_t type) { str(k); u32(type); ++count; }
    void string(const std::string& k, const std::string& v) { key(k, 8); str(v); }
    void uint(const std::string& k, std::uint32_t v) { key(k, 4); u32(v); }
    void strings(const std::string& k, const std::vector<std::string>& v) { key(k, 9); u32(8); u64(v.size()); for (auto& s : v) str(s); }
    void floats(const std::string& k, const std::vector<float>& v) { key(k, 9); u32(6); u64(v.size()); for (float f : v) bytes.append(reinterpret_cast<const char*>(&f), 4); }
    void ints(const std::string& k, const std::vector<std::int32_t>& v) { key(k, 9); u32(5); u64(v.size()); for (auto i : v) bytes.append(reinterpret_cast<const char*>(&i), 4); }
    std::string file() const
    {
        std::string h = "GGUF";
        auto put = [&](auto v) { h.append(reinterpret_cast<const char*>(&v), sizeof v); };
        put(std::uint32_t{3});
        put(std::uint64_t{0});
        put(count);
        return h + bytes;
    }
};

attn::Expected<attn::TextTokenizer> fromKv(const GgufKv& kv)
{
    const std::string f = kv.file();
    auto g = attn::GgufFile::parse(reinterpret_cast<const std::uint8_t*>(f.data()), f.size(), "test.gguf");
    if (!g) return g.status();
    return attn::tokenizerFromGguf(*g, "test.gguf");
}

TEST(SpmValidation, GgufRouting)
{
    GgufKv kv;
    kv.string("tokenizer.ggml.model", "bert");
    auto bert = fromKv(kv);
    ASSERT_FALSE(bert.ok());
    EXPECT_EQ(bert.status().code, attn::StatusCode::Unsupported);
    EXPECT_EQ(bert.status().message,
              "test.gguf: tokenizer.ggml.model \"bert\" is not supported (supported: gpt2 (byte-level BPE), llama (SentencePiece BPE))");

    // "llama" with int32 scores (older files), llama.cpp's defaults for the absent keys (bos 1, eos 2, unk 0).
    GgufKv ok;
    ok.string("tokenizer.ggml.model", "llama");
    ok.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "\xE2\x96\x81", "a"});
    ok.ints("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3});
    ok.ints("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1});
    auto t = fromKv(ok);
    ASSERT_TRUE(t.ok()) << t.status().message;
    EXPECT_EQ(t->encode("a a")->ids, (std::vector<int>{1, 3, 3}));
    EXPECT_EQ(t->decode({1, 3, 3}), "<s>a a");

    GgufKv badScores = ok;
    badScores.strings("tokenizer.ggml.scores", {"x"});
    // The later key wins in our reader or it is refused as a duplicate: either way a message, not a crash.
    EXPECT_FALSE(fromKv(badScores).ok());

    GgufKv shortScores;
    shortScores.string("tokenizer.ggml.model", "llama");
    shortScores.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    shortScores.floats("tokenizer.ggml.scores", {0, 0});
    auto s = fromKv(shortScores);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().message, "test.gguf: tokenizer.ggml.scores: expected 3 entries (one per token), got 2");

    GgufKv badBos = shortScores;
    badBos.bytes.clear();
    badBos.count = 0;
    badBos.string("tokenizer.ggml.model", "llama");
    badBos.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    badBos.uint("tokenizer.ggml.bos_token_id", 7);
    auto b = fromKv(badBos);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().message, "test.gguf: tokenizer.ggml.bos_token_id: 7 is outside the vocabulary of 3 tokens");
}

TEST(SpmValidation, TokenizerJsonMessages)
{
    const json good = json::parse(readFile(dataPath("tokenizer.json")));
    auto err = [&](const std::function<void(json&)>& edit) {
        json j = good;
        edit(j);
        auto t = attn::SpmTokenizer::fromTokenizerJson(j.dump());
        return t.ok() ? std::string("(loaded)") : t.status().message;
    };
    EXPECT_EQ(err([](json&) {}), "(loaded)");
    EXPECT_EQ(err([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }),
              "tokenizer.json: normalizer.type \"NFKC\" is not supported (supported: Replace, Prepend, Sequence)");
    EXPECT_EQ(err([](json& j) { j["model"]["type"] = "Unigram"; }),
              "tokenizer.json: model.type \"Unigram\" is not supported here (supported: BPE)");
    EXPECT_EQ(err([](json& j) { j["model"]["merges"][0] = 5; }),
              "tokenizer.json: model.merges[0]: expected \"a b\" or [\"a\", \"b\"], got 5");
    EXPECT_EQ(err([](json& j) { j["model"]["merges"][0] = "zz qq"; }),
              "tokenizer.json: model.merges[0] \"zz qq\": its left token is not in the vocabulary");
    EXPECT_EQ(err([](json& j) { j["normalizer"] = nullptr; }),
              "tokenizer.json: neither normalizer Replace(\" \" → \"▁\") nor pre_tokenizer Metaspace: not a SentencePiece-style tokenizer");
    EXPECT_EQ(err([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }),
              "tokenizer.json: decoder.type \"WordPiece\" is not supported (supported: Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
    EXPECT_EQ(err([](json& j) { j["model"]["byte_fallback"] = "yes"; }),
              "tokenizer.json: model.byte_fallback: expected true or false, got \"yes\"");
    EXPECT_EQ(err([](json& j) { j["model"]["vocab"]["\xE2\x96\x81" "the"] = 99999; }),
              "tokenizer.json: token ids reach 99999 but there are only 1007 tokens (ids must have no gaps)");
    EXPECT_NE(err([](json& j) { j = json::array(); }).find("not a JSON object"), std::string::npos);
}

TEST(SpmRules, MetaspaceFirstOnly)
{
    // Llama non-legacy: no normalizer, Metaspace(prepend_scheme "first", split false): "▁" before the text's
    // start only, not after a special token (llama.cpp #7094), and not when the text already starts with a space.
    json j = json::parse(readFile(dataPath("tokenizer.json")));
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", false}};
    auto first = attn::SpmTokenizer::fromTokenizerJson(j.dump());
    ASSERT_TRUE(first.ok()) << first.status().message;
    auto legacy = attn::SpmTokenizer::fromTokenizerJson(readFile(dataPath("tokenizer.json")));
    ASSERT_TRUE(legacy.ok());
    const std::string text = "<start_of_turn>user";
    auto a = first->encode(text, false), b = legacy->encode(text, false);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->ids[0], 3);
    EXPECT_NE(a->ids, b->ids);                 // "user" vs "▁user"
    EXPECT_EQ(first->decode(a->ids), text);
    EXPECT_EQ(legacy->decode(b->ids), text);
    EXPECT_EQ(first->encode("hello", false)->ids, legacy->encode("hello", false)->ids);
    EXPECT_EQ(first->encode(" hello", false)->ids, legacy->encode("hello", false)->ids);  // no double "▁"
}

TEST(TextTokenizer, KindsAndDefault)
{
    attn::TextTokenizer empty;
    EXPECT_EQ(empty.kind(), attn::TokenizerKind::ByteLevelBpe);
    EXPECT_EQ(empty.vocabSize(), 0);
    EXPECT_FALSE(empty.encode("x").ok());
    auto spm = attn::SpmTokenizer::fromSpec(smallSpec());
    ASSERT_TRUE(spm.ok());
    attn::TextTokenizer t(*spm);
    EXPECT_EQ(t.kind(), attn::TokenizerKind::SentencePiece);
    EXPECT_STREQ(attn::toString(t.kind()), "SentencePiece BPE");
    EXPECT_EQ(t.vocabSize(), 17);
    EXPECT_EQ(t.idOf(" ab"), std::optional<int>(11));
    EXPECT_TRUE(t.setBosEos(2, 1).ok());
    EXPECT_EQ(t.bos(), 2);
    EXPECT_EQ(t.eos(), 1);
    EXPECT_EQ(t.setBosEos(17, 1).message, "BOS/EOS id 17 is outside the vocabulary (0..16, or -1 for none)");
}

// [Chat templates] -----------------------------------------------------------------------------------------------

TEST(SpmChatTemplate, GemmaAndLlama2)
{
    // Gemma's template (as its tokenizer_config.json writes it, shortened): bos_token, then the turns.
    const std::string gemma =
        "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim "
        "+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
    auto g = attn::applyChatTemplate(gemma, "  What is 2+2? ");
    ASSERT_TRUE(g.ok()) << g.status().message;
    EXPECT_EQ(*g, "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
    // Llama 2: "[INST]" around the user's text, after the BOS.
    const std::string llama2 =
        "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] | trim "
        "+ ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + message['content'] | trim + ' ' + eos_token }}"
        "{% endif %}{% endfor %}";
    auto l = attn::applyChatTemplate(llama2, " Hi there ");
    ASSERT_TRUE(l.ok()) << l.status().message;
    EXPECT_EQ(*l, "<s>[INST] Hi there [/INST]");
    // Gemma's rendering tokenised with the real vocabulary: the special tokens whole, "user" without a "▁".
    if (std::filesystem::exists(gemmaPath())) {
        auto tok = fromGgufFile(gemmaPath());
        ASSERT_TRUE(tok.ok());
        auto e = tok->encode(*g, false);
        ASSERT_TRUE(e.ok());
        ASSERT_GE(e->ids.size(), 4u);
        EXPECT_EQ((std::vector<int>(e->ids.begin(), e->ids.begin() + 4)), (std::vector<int>{2, 105, 2364, 107}));
    }
}

} // namespace
