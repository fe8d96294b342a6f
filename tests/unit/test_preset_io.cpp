// preset_io.h: session JSON parsing, messages, round trips, presets, atomic writes.
#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace attn {
namespace {

namespace fs = std::filesystem;

const char* kMinimal = R"({"attnscope": 1, "X": [[1,0],[0,1]], "Wq": [[1],[0]], "Wk": [[1],[1]], "Wv": [[2],[3]]})";

std::string parseError(const std::string& text)
{
    Expected<Session> s = parseSession(text, "s.json");
    return s.ok() ? std::string("(accepted)") : s.status().message;
}

TEST(Parse, MinimalSessionUsesTheDefaults)
{
    Expected<Session> s = parseSession(kMinimal);
    ASSERT_TRUE(s.ok()) << s.status().message;
    EXPECT_EQ(s->config.layout, Layout::Row);
    EXPECT_EQ(s->config.mode, Mode::Self);
    EXPECT_EQ(s->config.heads, 1);
    EXPECT_EQ(s->config.score, Score::ScaledDot);
    EXPECT_FALSE(s->config.scale.has_value());
    EXPECT_TRUE(std::isinf(s->input.mask.fill));
    EXPECT_EQ(s->input.Wv(1, 0), 3.0f);
}

TEST(Parse, UnknownFieldsAreHarmless)
{
    std::string t = kMinimal;
    t.insert(t.size() - 1, R"(, "future_field": {"x": [1, 2]}, "colour": "blue")");
    EXPECT_TRUE(parseSession(t).ok());
}

TEST(Parse, MessagesNameTheField)
{
    EXPECT_EQ(parseError("{"), parseError("{"));  // deterministic
    EXPECT_NE(parseError("{").find("s.json: not valid JSON"), std::string::npos) << parseError("{");
    EXPECT_EQ(parseError("[1]"), "s.json: session: expected a JSON object, got an array of 1");
    EXPECT_EQ(parseError(R"({"X": []})"),
              "s.json: attnscope: missing: a session file starts with {\"attnscope\": 1, ...} (the format version)");
    EXPECT_NE(parseError(R"({"attnscope": 7})").find("format version 7 is not supported"), std::string::npos);
    EXPECT_EQ(parseError(R"({"attnscope": 1, "layout": "diagonal"})"),
              "s.json: layout: expected one of \"row\", \"column\", got \"diagonal\"");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "score": 3})"),
              "s.json: score: expected one of \"scaled_dot\", \"dot\", \"additive\", got number 3");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "heads": -2})"), "s.json: heads: expected an integer in [1, 4096], got -2");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "X": [[1, 2], [3]]})"), "s.json: X[1]: expected 2 values (as in row 0), got 1");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "X": [[1, "nan"]]})"), "s.json: X[0][1]: expected a number, got string \"nan\"");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "X": [[1, 1e39]]})"),
              "s.json: X[0][1]: value 1e+39 does not fit in float32 (|v| ≤ 3.4e38)");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "mask": {"fill": "-huge"}})"),
              "s.json: mask.fill: expected \"-inf\" or a finite number such as -1e6, got \"-huge\"");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "mask": {"custom": [[0, 2]]}})"),
              "s.json: mask.custom[0][1]: expected 0 (kept) or 1 (masked), got 2.000000");
    // Shapes are checked by validate(), with the file name in front.
    std::string t = kMinimal;
    t.replace(t.find(R"("Wk": [[1],[1]])"), 15, R"("Wk": [[1,2],[1,2]])");
    EXPECT_EQ(parseError(t), "s.json: Wk: expected width H·d_k = 1 (the width of Wq) for a dot-product score, got 2");
    std::string tok = kMinimal;
    tok.insert(tok.size() - 1, R"(, "tokens": ["a", "b", "c"])");
    EXPECT_EQ(parseError(tok), "s.json: tokens: expected 2 labels (one per query), got 3");
}

TEST(Parse, MissingAndUnreadableFiles)
{
    Expected<Session> s = loadSession("/nonexistent/dir/s.json");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code, StatusCode::IoError);
    EXPECT_NE(s.status().message.find("/nonexistent/dir/s.json: cannot open"), std::string::npos);
    Expected<Session> d = loadSession("/tmp");
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message.find("is a directory"), std::string::npos);
}

TEST(RoundTrip, EveryFieldSurvivesSaveAndLoad)
{
    Session s;
    s.name = "round trip";
    s.queryTokens = {"a", "b"};
    s.keyTokens = {"x", "y", "z"};
    s.config.mode = Mode::Cross;
    s.config.layout = Layout::Column;
    s.config.heads = 1;
    s.config.scale = 0.25f;
    AttentionInput& in = s.input;
    in.X = Matrix{{0.1f, 0.2f}, {0.3f, 0.4f}};        // column layout: d_model × T
    in.Xkv = Matrix{{1, 2, 3}, {4, 5, 6.5f}};         // d_model × S
    in.Wq = Matrix{{1, 2}, {3, 4}};
    in.Wk = Matrix{{1, 0}, {0, 1}};
    in.Wv = Matrix{{2, 1}};
    in.bq = Vector::Constant(2, 0.5f);
    in.Wo = Matrix{{1.5f}, {2}};
    in.bo = Vector::Constant(2, -1);
    in.mask.keyPadding = {0, 0, 1};
    in.mask.validLens = {2, 3};
    in.mask.custom = MaskMatrix{{0, 1}, {0, 0}, {1, 0}};
    in.mask.fill = -1e6f;
    s.viewJson = R"({"colormap":"magma"})";
    const std::string path = (fs::temp_directory_path() / "attnscope_roundtrip.json").string();
    ASSERT_TRUE(saveSession(path, s).ok());
    Expected<Session> back = loadSession(path);
    ASSERT_TRUE(back.ok()) << back.status().message;
    EXPECT_EQ(back->name, s.name);
    EXPECT_EQ(back->queryTokens, s.queryTokens);
    EXPECT_EQ(back->keyTokens, s.keyTokens);
    EXPECT_EQ(back->config.layout, Layout::Column);
    EXPECT_EQ(back->config.mode, Mode::Cross);
    EXPECT_EQ(back->config.scale, 0.25f);
    EXPECT_EQ(back->input.X, in.X);
    EXPECT_EQ(back->input.Xkv, in.Xkv);
    EXPECT_EQ(back->input.Wo, in.Wo);
    EXPECT_EQ(back->input.bo, in.bo);
    EXPECT_EQ(back->input.mask.keyPadding, in.mask.keyPadding);
    EXPECT_EQ(back->input.mask.validLens, in.mask.validLens);
    EXPECT_EQ(back->input.mask.custom, in.mask.custom);
    EXPECT_EQ(back->input.mask.fill, -1e6f);
    EXPECT_EQ(back->viewJson, s.viewJson);
    // Saving again gives byte-identical text (stable field order, exact floats).
    EXPECT_EQ(sessionToJson(*back), sessionToJson(s));
    fs::remove(path);
}

TEST(RoundTrip, KvHeadsSurvivesAndDefaultsToHeads)
{
    // 4 query heads of d_k = 1 sharing 2 KV heads: Wk and Wv are 2 columns wide.
    Session s;
    s.config.heads = 4;
    s.config.kvHeads = 2;
    s.input.X = Matrix{{1, 0}, {0.5f, 2}, {-1, 1}};
    s.input.Wq = Matrix{{1, 2, 3, 4}, {0, 1, 0, -1}};
    s.input.Wk = Matrix{{1, 0}, {0, 1}};
    s.input.Wv = Matrix{{2, 1}, {1, 3}};
    s.input.bk = Vector::Constant(2, 0.5f);
    const std::string text = sessionToJson(s);
    EXPECT_NE(text.find("\"kv_heads\": 2"), std::string::npos) << text;
    Expected<Session> back = parseSession(text, "s.json");
    ASSERT_TRUE(back.ok()) << back.status().message;
    EXPECT_EQ(back->config.heads, 4);
    EXPECT_EQ(back->config.kvHeads, 2);
    EXPECT_EQ(back->input.Wk, s.input.Wk);
    EXPECT_EQ(sessionToJson(*back), text);
    EXPECT_TRUE(compute(back->input, back->config).ok());

    // Absent: as many KV heads as heads, and a multi-head session is written without the field.
    Session mha = s;
    mha.config.kvHeads = 0;
    EXPECT_EQ(sessionToJson(mha).find("kv_heads"), std::string::npos);
    mha.config.kvHeads = 4;
    EXPECT_EQ(sessionToJson(mha).find("kv_heads"), std::string::npos);
}

TEST(Parse, KvHeadsMessages)
{
    EXPECT_EQ(parseError(R"({"attnscope": 1, "kv_heads": 0})"), "s.json: kv_heads: expected an integer in [1, 4096], got 0");
    EXPECT_EQ(parseError(R"({"attnscope": 1, "kv_heads": "two"})").rfind("s.json: kv_heads: expected an integer", 0), 0u)
        << parseError(R"({"attnscope": 1, "kv_heads": "two"})");
    // Its relation to heads and the widths is validate()'s, with the file name in front.
    std::string t = kMinimal;
    t.insert(t.size() - 1, R"(, "heads": 1, "kv_heads": 2)");
    EXPECT_EQ(parseError(t), "s.json: kv_heads: expected at most heads = 1, got 2");
}

TEST(Write, AtomicWriteLeavesNoPartialFile)
{
    Status bad = writeFileAtomic("/nonexistent/dir/out.json", "{}");
    EXPECT_FALSE(bad.ok());
    EXPECT_EQ(bad.code, StatusCode::IoError);
    EXPECT_NE(bad.message.find("/nonexistent/dir/out.json: cannot write"), std::string::npos) << bad.message;
    const fs::path p = fs::temp_directory_path() / "attnscope_atomic.txt";
    ASSERT_TRUE(writeFileAtomic(p.string(), "first").ok());
    ASSERT_TRUE(writeFileAtomic(p.string(), "second").ok());
    EXPECT_EQ(*readFile(p.string(), 100), "second");
    for (auto& e : fs::directory_iterator(p.parent_path()))
        EXPECT_EQ(e.path().filename().string().find("attnscope_atomic.txt.tmp"), std::string::npos);
    fs::remove(p);
}

TEST(Presets, EveryPresetLoadsAndComputesWithoutWarnings)
{
    int count = 0;
    for (auto& e : fs::directory_iterator(fs::path(ATTNSCOPE_SOURCE_DIR) / "assets" / "presets")) {
        if (e.path().extension() != ".json") continue;
        ++count;
        Expected<Session> s = loadSession(e.path().string());
        ASSERT_TRUE(s.ok()) << s.status().message;
        EXPECT_FALSE(s->name.empty()) << e.path();
        Expected<AttentionResult> r = compute(s->input, s->config);
        ASSERT_TRUE(r.ok()) << e.path() << ": " << r.status().message;
    }
    EXPECT_GE(count, 3);
}

} // namespace
} // namespace attn
