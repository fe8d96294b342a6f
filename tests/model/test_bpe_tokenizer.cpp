// The byte-level BPE tokenizer (attnscope/bpe_tokenizer.h) against Hugging Face tokenizers: token ids and decoded
// token texts identical to tests/model/goldens/bpe_goldens.json (made by make_bpe_goldens.py) for SmolLM2 (its
// vocabulary read from the GGUF in build/models; skipped when it is not installed) and for tiny gpt2 / llama3 /
// qwen2 tokenizers (tests/model/data/bpe_*/tokenizer.json); round trips; the GGUF path (fromSpec) against the
// tokenizer.json path; chat templates; and every validation message.
#include <attnscope/bpe_tokenizer.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
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
    static const json g = json::parse(readFile(ATTNSCOPE_BPE_GOLDENS));
    return g;
}

std::string fixture(const std::string& name) { return readFile(std::string(ATTNSCOPE_BPE_DATA) + "/bpe_" + name + "/tokenizer.json"); }

std::string gguf()
{
    if (const char* e = std::getenv("ATTNSCOPE_SMOLLM2_GGUF")) return e;
    return ATTNSCOPE_SMOLLM2_GGUF;
}

// Reads the tokenizer.ggml.* metadata of a GGUF file into a BpeVocabSpec. Just enough of GGUF v2/v3 for this
// test (the lead switches it to the real reader, attnscope/gguf.h): the header, then key/value pairs, skipping
// the values of other keys; tensor data is never read.
attn::Expected<attn::BpeVocabSpec> loadSpecForTest(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    if (!f) return attn::makeError(attn::StatusCode::IoError, path + ": cannot open");
    auto u32 = [&] { std::uint32_t v = 0; f.read(reinterpret_cast<char*>(&v), 4); return v; };
    auto u64 = [&] { std::uint64_t v = 0; f.read(reinterpret_cast<char*>(&v), 8); return v; };
    auto str = [&] { std::string s(static_cast<std::size_t>(u64()), '\0'); f.read(s.data(), static_cast<std::streamsize>(s.size())); return s; };
    auto scalarSize = [](std::uint32_t t) -> int {
        switch (t) {
        case 0: case 1: case 7: return 1;
        case 2: case 3: return 2;
        case 4: case 5: case 6: return 4;
        case 10: case 11: case 12: return 8;
        default: return -1;
        }
    };
    auto integer = [&](std::uint32_t t) -> std::int64_t {
        std::int64_t v = 0;
        const int n = scalarSize(t);
        f.read(reinterpret_cast<char*>(&v), n);
        if (t == 5 && (v & 0x80000000)) v -= (std::int64_t(1) << 32);
        return v;
    };
    if (u32() != 0x46554747u) return attn::invalidArgument(path + ": not a GGUF file");
    u32();                 // version
    u64();                 // tensor count
    const std::uint64_t kvs = u64();
    attn::BpeVocabSpec spec;
    for (std::uint64_t i = 0; i < kvs && f; ++i) {
        const std::string key = str();
        const std::uint32_t type = u32();
        if (type == 8) {
            std::string v = str();
            if (key == "tokenizer.ggml.pre") spec.pre = v;
        } else if (type == 9) {
            const std::uint32_t et = u32();
            const std::uint64_t n = u64();
            for (std::uint64_t k = 0; k < n && f; ++k) {
                if (et == 8) {
                    std::string v = str();
                    if (key == "tokenizer.ggml.tokens") spec.tokens.push_back(std::move(v));
                    else if (key == "tokenizer.ggml.merges") spec.merges.push_back(std::move(v));
                } else if (scalarSize(et) > 0) {
                    const std::int64_t v = integer(et);
                    if (key == "tokenizer.ggml.token_type") spec.tokenTypes.push_back(static_cast<int>(v));
                } else return attn::invalidArgument(path + ": nested arrays are not read by this test reader");
            }
        } else if (scalarSize(type) > 0) {
            const std::int64_t v = integer(type);
            if (key == "tokenizer.ggml.bos_token_id") spec.bos = static_cast<int>(v);
            else if (key == "tokenizer.ggml.eos_token_id") spec.eos = static_cast<int>(v);
            else if (key == "tokenizer.ggml.add_bos_token") spec.addBos = v != 0;
        } else return attn::invalidArgument(path + ": value type " + std::to_string(type) + " of " + key);
    }
    if (!f) return attn::invalidArgument(path + ": truncated metadata");
    return spec;
}

// The golden cases of one tokenizer against `tok`: ids with and without the template, decoded token texts,
// and decode(encode(text)) == text (for a normalising tokenizer, only texts the normaliser leaves as they are).
void checkGoldens(const attn::BpeTokenizer& tok, const std::string& name, bool normalises)
{
    const json& texts = goldens()["texts"];
    const json& cases = goldens()["tokenizers"][name]["cases"];
    ASSERT_EQ(texts.size(), cases.size());
    int roundTrips = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::string text = texts[i]["text"];
        SCOPED_TRACE(name + " text " + texts[i]["name"].get<std::string>());
        auto e = tok.encode(text, true);
        ASSERT_TRUE(e.ok()) << e.status().message;
        EXPECT_EQ(e->ids, cases[i]["ids"].get<std::vector<int>>());
        EXPECT_EQ(e->tokens, cases[i]["tokens"].get<std::vector<std::string>>());
        EXPECT_EQ(e->typeIds, std::vector<int>(e->ids.size(), 0));
        auto plain = tok.encode(text, false);
        ASSERT_TRUE(plain.ok());
        EXPECT_EQ(plain->ids, cases[i]["ids_no_special"].get<std::vector<int>>());
        if (!normalises || texts[i]["nfc"].get<bool>()) {
            EXPECT_EQ(tok.decode(plain->ids), text);
            ++roundTrips;
        }
    }
    EXPECT_GE(roundTrips, static_cast<int>(texts.size()) - 2);
}

attn::BpeTokenizer loadFixture(const std::string& name)
{
    auto t = attn::BpeTokenizer::fromTokenizerJson(fixture(name));
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.status().message);
    return std::move(t).value();
}

// A GGUF-style spec made from a fixture's tokenizer.json: the same vocabulary, merges and added tokens (as
// control tokens), with the GGUF pre-tokeniser name of that model family.
attn::BpeVocabSpec specFromFixture(const std::string& name, const std::string& pre)
{
    const json j = json::parse(fixture(name));
    attn::BpeVocabSpec spec;
    spec.pre = pre;
    std::size_t n = j["model"]["vocab"].size() + j["added_tokens"].size();
    spec.tokens.assign(n, std::string());
    spec.tokenTypes.assign(n, 1);
    for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) spec.tokens[it->get<std::size_t>()] = it.key();
    for (const json& a : j["added_tokens"]) {
        spec.tokens[a["id"].get<std::size_t>()] = a["content"];
        spec.tokenTypes[a["id"].get<std::size_t>()] = 3;
    }
    while (!spec.tokens.empty() && spec.tokens.back().empty()) { spec.tokens.pop_back(); spec.tokenTypes.pop_back(); }
    for (const json& m : j["model"]["merges"])
        spec.merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
    return spec;
}

TEST(BpeTokenizer, Gpt2FixtureMatchesHuggingFace) { checkGoldens(loadFixture("gpt2"), "gpt2", false); }
TEST(BpeTokenizer, Llama3FixtureMatchesHuggingFace) { checkGoldens(loadFixture("llama3"), "llama3", false); }
TEST(BpeTokenizer, Qwen2FixtureMatchesHuggingFace) { checkGoldens(loadFixture("qwen2"), "qwen2", true); }
TEST(BpeTokenizer, Gpt4oFixtureMatchesHuggingFace) { checkGoldens(loadFixture("gpt4o"), "gpt4o", false); }
TEST(BpeTokenizer, TekkenFixtureMatchesHuggingFace) { checkGoldens(loadFixture("tekken"), "tekken", false); }

TEST(BpeTokenizer, SmolLM2FromGgufMatchesHuggingFace)
{
    if (!std::filesystem::exists(gguf())) GTEST_SKIP() << "SmolLM2 GGUF not installed at " << gguf() << " (scripts/setup.sh installs it)";
    auto spec = loadSpecForTest(gguf());
    ASSERT_TRUE(spec.ok()) << spec.status().message;
    const json& meta = goldens()["tokenizers"]["smollm2"];
    EXPECT_EQ(spec->tokens.size(), meta["vocab"].get<std::size_t>());
    EXPECT_EQ(spec->merges.size(), meta["merges"].get<std::size_t>());
    EXPECT_EQ(spec->pre, "smollm");
    auto tok = attn::BpeTokenizer::fromSpec(*spec);
    ASSERT_TRUE(tok.ok()) << tok.status().message;
    EXPECT_EQ(tok->vocabSize(), 49152);
    EXPECT_EQ(tok->bos(), meta["bos"].get<int>());
    EXPECT_EQ(tok->eos(), meta["eos"].get<int>());
    checkGoldens(*tok, "smollm2", false);
    // " Paris" is one token, and idOf finds it by its text.
    const json& paris = meta["cases"][1]["ids"];
    ASSERT_EQ(paris.size(), 1u);
    EXPECT_EQ(tok->idOf(" Paris"), paris[0].get<int>());
    EXPECT_EQ(tok->tokenText(paris[0].get<int>()), " Paris");
    EXPECT_EQ(tok->idOf("<|im_start|>"), 1);
    EXPECT_FALSE(tok->idOf("no such token text at all").has_value());
}

TEST(BpeTokenizer, SpecAndTokenizerJsonAgree)
{
    const json& texts = goldens()["texts"];
    // Each family under every name llama.cpp's converter writes for it (GPT-2's "gpt-2", GPT-NeoX's "olmo" or "mpt",
    // Llama 3's "llama-bpe" and aliases, DeepSeek-R1's Qwen distillations' "deepseek-r1-qwen", Phi-4-mini's "gpt-4o", Mistral Nemo's "tekken").
    const std::vector<std::pair<std::string, std::string>> names = {
        {"gpt2", "gpt2"},       {"gpt2", "gpt-2"},     {"gpt2", "olmo"},    {"gpt2", "mpt"},
        {"llama3", "llama-bpe"}, {"llama3", "llama3"},  {"llama3", "llama-v3"}, {"llama3", "falcon3"},
        {"qwen2", "qwen2"},     {"qwen2", "deepseek-r1-qwen"}, {"gpt4o", "gpt-4o"},
        {"tekken", "tekken"}};
    for (const auto& [name, pre] : names) {
        attn::BpeVocabSpec spec = specFromFixture(name, pre);
        const attn::BpeTokenizer fromJson = loadFixture(name);
        if (name == "llama3") {  // Llama 3's GGUF says add_bos_token, its tokenizer.json a template with BOS
            spec.bos = fromJson.bos();
            spec.addBos = true;
        }
        auto fromSpec = attn::BpeTokenizer::fromSpec(spec);
        ASSERT_TRUE(fromSpec.ok()) << name << ": " << fromSpec.status().message;
        EXPECT_EQ(fromSpec->vocabSize(), fromJson.vocabSize());
        for (const json& t : texts) {
            // Qwen2's tokenizer.json normalises to NFC; its GGUF path (as llama.cpp) does not.
            if (name == "qwen2" && !t["nfc"].get<bool>()) continue;
            auto a = fromSpec->encode(t["text"], true), b = fromJson.encode(t["text"], true);
            ASSERT_TRUE(a.ok() && b.ok());
            EXPECT_EQ(a->ids, b->ids) << name << " text " << t["name"];
        }
    }
}

TEST(BpeTokenizer, WholePieceNamesTakeAWholeWordTokenAndTheOthersMergeToIt)
{
    // A vocabulary token no merge makes (GPT-2's vocabulary plus "Ġzqxj"): Llama 3's names ignore merges when the
    // whole pre-token is a token (as llama.cpp and tokenizer.json's ignore_merges), and so does "tekken"; "dbrx",
    // "smaug-bpe" and "gpt-4o" merge as usual.
    for (const char* pre : {"llama-bpe", "falcon3", "tekken", "dbrx", "smaug-bpe", "gpt-4o"}) {
        SCOPED_TRACE(pre);
        attn::BpeVocabSpec spec = specFromFixture("gpt2", pre);
        spec.tokens.push_back("\u0120zqxj");
        spec.tokenTypes.push_back(1);
        const int whole = static_cast<int>(spec.tokens.size()) - 1;
        auto tok = attn::BpeTokenizer::fromSpec(spec);
        ASSERT_TRUE(tok.ok()) << tok.status().message;
        auto enc = tok->encode(" zqxj", false);
        ASSERT_TRUE(enc.ok());
        const bool ignoresMerges = std::string(pre) == "llama-bpe" || std::string(pre) == "falcon3" || std::string(pre) == "tekken";
        if (ignoresMerges) {
            EXPECT_EQ(enc->ids, std::vector<int>{whole});
        } else {
            EXPECT_GT(enc->ids.size(), 1u);
            EXPECT_EQ(std::count(enc->ids.begin(), enc->ids.end(), whole), 0);
            EXPECT_EQ(tok->decode(enc->ids), " zqxj");
        }
    }
}

// Whether the pre-tokeniser of `pre` leaves `left` and `right` (adjacent in `text`, byte-level symbols) in one piece:
// a merge of the two, ranked first, makes their token only where no piece boundary falls between them.
bool samePiece(const std::string& pre, const std::string& text, const std::string& left, const std::string& right)
{
    attn::BpeVocabSpec spec = specFromFixture(pre == "tekken" ? "tekken" : "gpt4o", pre);
    const auto it = std::find(spec.tokens.begin(), spec.tokens.end(), left + right);
    const int id = static_cast<int>(it - spec.tokens.begin());
    if (it == spec.tokens.end()) {
        spec.tokens.push_back(left + right);
        spec.tokenTypes.push_back(1);
    }
    spec.merges.insert(spec.merges.begin(), left + " " + right);
    auto tok = attn::BpeTokenizer::fromSpec(spec);
    EXPECT_TRUE(tok.ok()) << tok.status().message;
    if (!tok.ok()) return false;
    auto enc = tok->encode(text, false);
    EXPECT_TRUE(enc.ok());
    return enc.ok() && std::count(enc->ids.begin(), enc->ids.end(), id) > 0;
}

TEST(BpeTokenizer, Gpt4osPiecesAreO200ksAndNotLlama3s)
{
    // The fixture's small vocabulary cannot tell some of o200k's splits from Llama 3's (its merges never cross
    // either's boundaries): each boundary is probed with a merge across it.
    EXPECT_TRUE(samePiece("gpt-4o", "12345", "4", "5"));  // (a probe at a piece's end: later merges would consume "12")
    EXPECT_FALSE(samePiece("gpt-4o", "12345", "3", "4"));  // numbers in threes
    EXPECT_FALSE(samePiece("gpt-4o", "CamelCase", "l", "C"));  // a lower-to-upper change splits letters
    EXPECT_TRUE(samePiece("llama-bpe", "CamelCase", "l", "C"));
    EXPECT_TRUE(samePiece("gpt-4o", "we've", "e", "'"));  // the contraction stays on its word
    EXPECT_FALSE(samePiece("llama-bpe", "we've", "e", "'"));
    EXPECT_TRUE(samePiece("gpt-4o", "a+/", "+", "/"));  // "/" kept after a punctuation run
    EXPECT_FALSE(samePiece("llama-bpe", "a+/", "+", "/") && samePiece("llama-bpe", "a+/b", "/", "b"));
}

TEST(BpeTokenizer, TekkensPiecesAreSingleDigitsAndNoContractions)
{
    EXPECT_FALSE(samePiece("tekken", "12", "1", "2"));
    EXPECT_FALSE(samePiece("tekken", "CamelCase", "l", "C"));
    EXPECT_FALSE(samePiece("tekken", "we've", "e", "'"));
    EXPECT_TRUE(samePiece("tekken", " zq", "\u0120", "z"));  // (not " we": a piece that is a token is taken whole)
}

TEST(BpeTokenizer, TokensAreDecodedTextAndPartialUtf8Reassembles)
{
    const attn::BpeTokenizer tok = loadFixture("gpt2");
    // "👍" is 4 bytes that the tiny vocabulary never merged: four byte tokens, each shown as U+FFFD, and the
    // sequence decodes to the emoji again.
    auto e = tok.encode("👍", false);
    ASSERT_TRUE(e.ok());
    ASSERT_EQ(e->ids.size(), 4u);
    for (const std::string& t : e->tokens) EXPECT_EQ(t, "\xEF\xBF\xBD");
    EXPECT_EQ(tok.decode(e->ids), "👍");
    std::string pieces;
    for (int id : e->ids) pieces += tok.decode({id});
    EXPECT_EQ(pieces, "👍");
    EXPECT_EQ(tok.tokenText(-1), "");
    EXPECT_EQ(tok.tokenText(tok.vocabSize()), "");
    EXPECT_EQ(tok.decode({-5, tok.vocabSize()}), "");
    // A copy shares the vocabulary and gives the same result.
    const attn::BpeTokenizer copy = tok;
    EXPECT_EQ(copy.encode("The capital of France is")->ids, tok.encode("The capital of France is")->ids);
}

TEST(BpeTokenizer, InvalidUtf8NamesTheByte)
{
    const attn::BpeTokenizer tok = loadFixture("llama3");
    for (const auto& [text, at] : std::vector<std::pair<std::string, int>>{
             {"ab\xff" "c", 2}, {"caf\xc3", 3}, {"\xed\xa0\x80", 0}, {"ok \xc0\xaf", 3}}) {
        auto e = tok.encode(text);
        ASSERT_FALSE(e.ok());
        EXPECT_EQ(e.status().code, attn::StatusCode::InvalidArgument);
        EXPECT_EQ(e.status().message, "text: invalid UTF-8 at byte " + std::to_string(at));
    }
}

TEST(BpeTokenizer, LongTextIsTheConcatenationOfItsLines)
{
    // Newline-separated paragraphs: the gpt2 pattern never merges across "\n" followed by a letter, so the
    // text's ids are its parts' ids (checks the word cache returns what a fresh BPE gives).
    const attn::BpeTokenizer tok = loadFixture("gpt2");
    const std::string line = goldens()["texts"].back()["text"];
    std::string many;
    std::vector<int> expected;
    for (int i = 0; i < 4; ++i) {
        many += line + "\n";
        auto e = tok.encode(line + "\n", false);
        ASSERT_TRUE(e.ok());
        expected.insert(expected.end(), e->ids.begin(), e->ids.end());
    }
    auto all = tok.encode(many, false);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(tok.decode(all->ids), many);
    EXPECT_GT(all->ids.size(), 2000u);
}

TEST(BpeTokenizer, ChatTemplatesMatchHuggingFace)
{
    for (const json& c : goldens()["chat"]) {
        auto r = attn::applyChatTemplate(c["template"], c["user"], c.value("bos", std::string()));
        ASSERT_TRUE(r.ok()) << c["name"] << ": " << r.status().message;
        EXPECT_EQ(*r, c["expected"].get<std::string>()) << c["name"];
    }
    // Zephyr's <|user|> turns close with </s> and open the assistant's the same way: not a recognised family.
    auto zephyr = attn::applyChatTemplate("{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + eos_token }}"
                                          "{% endfor %}", "hi");
    ASSERT_FALSE(zephyr.ok());
    EXPECT_EQ(zephyr.status().code, attn::StatusCode::Unsupported);
    EXPECT_NE(zephyr.status().message.find("not a ChatML (<|im_start|>), Llama 3 (<|start_header_id|>), Gemma (<start_of_turn>), "
                                           "Llama 2 ([INST]), Phi (<|user|> … <|end|>) or Tülu (<|user|> … <|assistant|>) template"),
              std::string::npos);
    auto empty = attn::applyChatTemplate("", "hi");
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.status().code, attn::StatusCode::InvalidArgument);
}

TEST(BpeTokenizer, ChatTextEncodesSpecialTokensWhole)
{
    const attn::BpeTokenizer tok = loadFixture("llama3");
    auto text = attn::applyChatTemplate(goldens()["chat"][4]["template"], "Hi");
    ASSERT_TRUE(text.ok());
    auto e = tok.encode(*text, false);
    ASSERT_TRUE(e.ok());
    ASSERT_GE(e->ids.size(), 6u);
    EXPECT_EQ(e->tokens.front(), "<|begin_of_text|>");
    EXPECT_EQ(e->tokens[1], "<|start_header_id|>");
    EXPECT_EQ(tok.decode(e->ids), *text);
}

// [SECTION] bad input

void expectError(const attn::Status& s, attn::StatusCode code, const std::string& part)
{
    EXPECT_EQ(s.code, code) << s.message;
    EXPECT_NE(s.message.find(part), std::string::npos) << "message: " << s.message << "\nexpected to contain: " << part;
}

attn::Status jsonError(const json& j)
{
    auto t = attn::BpeTokenizer::fromTokenizerJson(j.dump());
    return t.ok() ? attn::Status::success() : t.status();
}

TEST(BpeTokenizer, BadTokenizerJsonGivesClearErrors)
{
    using attn::StatusCode;
    const json good = json::parse(fixture("gpt2"));
    ASSERT_TRUE(jsonError(good).ok());
    expectError(attn::BpeTokenizer::fromTokenizerJson("{not json").status(), StatusCode::ParseError, "not a JSON object");
    json j = good;
    j["model"]["type"] = "WordPiece";
    expectError(jsonError(j), StatusCode::Unsupported, "model.type \"WordPiece\" is not supported here (supported: BPE)");
    j = good;
    j["model"].erase("vocab");
    expectError(jsonError(j), StatusCode::ParseError, "model.vocab missing or not an object");
    j = good;
    j["model"]["merges"].push_back("Ġzzz qqq");
    expectError(jsonError(j), StatusCode::ParseError, "\"Ġzzz qqq\": its left token is not in the vocabulary");
    j = good;
    j["model"]["merges"].push_back("a b c");
    expectError(jsonError(j), StatusCode::ParseError, "expected \"a b\" or [\"a\", \"b\"], got \"a b c\"");
    j = good;
    j["model"]["vocab"]["Ġduplicate"] = j["model"]["vocab"]["a"];
    expectError(jsonError(j), StatusCode::ParseError, "is used twice");
    j = good;
    j["model"]["vocab"]["far"] = 5000;
    expectError(jsonError(j), StatusCode::ParseError, "ids must have no gaps");
    j = good;
    j["model"]["vocab"]["huge"] = 4000000000u;
    expectError(jsonError(j), StatusCode::ParseError, "model.vocab[\"huge\"]: expected an id in 0..999999");
    j = good;
    j["pre_tokenizer"] = {{"type", "Metaspace"}};
    expectError(jsonError(j), StatusCode::Unsupported, "pre_tokenizer.type \"Metaspace\" is not supported (supported: ByteLevel, Split, Digits, Sequence)");
    j = good;
    j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}};
    expectError(jsonError(j), StatusCode::Unsupported, "no ByteLevel step");
    j = good;
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}}, good["pre_tokenizer"]})}};
    expectError(jsonError(j), StatusCode::Unsupported, "pre_tokenizer.pretokenizers[0]: pattern \"(unclosed\" does not compile");
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\d";
    j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Contiguous";
    expectError(jsonError(j), StatusCode::Unsupported, "behavior \"Contiguous\" is not supported (supported: Isolated, Removed)");
    j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = 7;
    expectError(jsonError(j), StatusCode::ParseError, "wrong type");
    j = good;
    j["normalizer"] = {{"type", "Lowercase"}};
    expectError(jsonError(j), StatusCode::Unsupported, "normalizer.type \"Lowercase\" is not supported");
    j = good;
    j["decoder"] = {{"type", "Metaspace"}};
    expectError(jsonError(j), StatusCode::Unsupported, "decoder.type \"Metaspace\" is not supported");
    j = good;
    j["model"]["byte_fallback"] = true;
    expectError(jsonError(j), StatusCode::Unsupported, "byte_fallback");
    j = good;
    j["added_tokens"].push_back({{"id", 3}, {"content", "<new>"}});
    expectError(jsonError(j), StatusCode::ParseError, "added_tokens[1]: id 3 is already token");
    j = good;
    j["added_tokens"].push_back({{"content", "<noid>"}});
    expectError(jsonError(j), StatusCode::ParseError, "added_tokens[1]: expected an object with an \"id\"");
    const json llama = json::parse(fixture("llama3"));
    j = llama;
    j["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] = json::array({123456});
    expectError(jsonError(j), StatusCode::ParseError, "ids: expected ids in 0..524, got 123456");
    j = llama;
    j["post_processor"] = {{"type", "RobertaProcessing"}};
    expectError(jsonError(j), StatusCode::Unsupported, "post_processor.type \"RobertaProcessing\" is not supported");
    std::string deep(100, '[');
    expectError(attn::BpeTokenizer::fromTokenizerJson(deep).status(), StatusCode::ParseError, "tokenizer.json");
}

attn::Status specError(const attn::BpeVocabSpec& s)
{
    auto t = attn::BpeTokenizer::fromSpec(s);
    return t.ok() ? attn::Status::success() : t.status();
}

TEST(BpeTokenizer, BadSpecGivesClearErrors)
{
    using attn::StatusCode;
    const attn::BpeVocabSpec good = specFromFixture("gpt2", "gpt2");
    ASSERT_TRUE(specError(good).ok());
    attn::BpeVocabSpec s = good;
    s.pre = "chatglm-bpe";
    expectError(specError(s), StatusCode::Unsupported,
                "tokenizer.ggml.pre \"chatglm-bpe\" is not supported (supported: gpt-2, gpt2, olmo, mpt, llama-bpe, llama3, "
                "llama-v3, falcon3, dbrx, smaug-bpe, qwen2, deepseek-r1-qwen, gpt-4o, tekken, smollm, default)");
    s = good;
    s.tokens.clear();
    s.tokenTypes.clear();
    s.merges.clear();
    expectError(specError(s), StatusCode::InvalidArgument, "tokenizer.ggml.tokens: the vocabulary is empty");
    s = good;
    s.tokens[300] = s.tokens[200];
    expectError(specError(s), StatusCode::InvalidArgument, "tokenizer.ggml.tokens[300]: \"" + s.tokens[200] + "\" duplicates token 200");
    s = good;
    s.merges.push_back("Ġ zzz");
    expectError(specError(s), StatusCode::InvalidArgument, "\"Ġ zzz\": its right token is not in the vocabulary");
    s = good;
    s.merges.push_back("nospace");
    expectError(specError(s), StatusCode::InvalidArgument, "expected \"a b\" (two tokens, one space), got \"nospace\"");
    s = good;
    s.tokenTypes.pop_back();
    expectError(specError(s), StatusCode::InvalidArgument, "token_type: expected " + std::to_string(good.tokens.size()));
    s = good;
    s.tokenTypes[5] = 9;
    expectError(specError(s), StatusCode::InvalidArgument, "token_type[5]: expected 1..6, got 9");
    s = good;
    s.bos = static_cast<int>(good.tokens.size());
    expectError(specError(s), StatusCode::InvalidArgument, "bos_token_id: id " + std::to_string(good.tokens.size()) + " is outside the vocabulary");
    s = good;
    s.addBos = true;
    expectError(specError(s), StatusCode::InvalidArgument, "add_bos_token is true but there is no bos_token_id");
    s = good;
    s.tokens[7] = "";
    expectError(specError(s), StatusCode::InvalidArgument, "tokenizer.ggml.tokens[7]: the token is empty");
    s = good;
    s.tokens[7] = "\xff";
    expectError(specError(s), StatusCode::InvalidArgument, "tokenizer.ggml.tokens[7]: not valid UTF-8");
    s = good;
    s.merges.resize(1'000'001);  // a lying GGUF array: refused by its count before any merge is looked at
    expectError(specError(s), StatusCode::InvalidArgument, "merges: 1000001 merges, over the limit of 1000000");
}

TEST(BpeTokenizer, SetBosEosChecksTheRange)
{
    attn::BpeTokenizer tok = loadFixture("gpt2");
    EXPECT_EQ(tok.bos(), 0);  // <|endoftext|>, as GPT-2
    EXPECT_EQ(tok.eos(), 0);
    EXPECT_TRUE(tok.setBosEos(-1, 1).ok());
    EXPECT_EQ(tok.bos(), -1);
    expectError(tok.setBosEos(0, tok.vocabSize()), attn::StatusCode::InvalidArgument, "outside the vocabulary");
}

} // namespace
