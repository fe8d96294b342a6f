// The compute worker and the document on it (and the autosave writer, the other thing kept off the frame loop): edits made while a compute runs are coalesced (one more compute,
// of the latest inputs), and the shown result is never a half-written one. Deterministic: the fake compute
// stops at a gate the test opens, so no verdict depends on timing or machine load.
#include "state/background_saver.h"
#include "state/compute_worker.h"
#include "state/document.h"

#include <attnscope/colormap.h>
#include <attnscope/preset_io.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

// A compute that records the X[0][0] it was given, writes garbage into its result buffer (as a half-done
// compute would), then waits until the test has opened the gate for it, then computes for real.
class GatedCompute {
public:
    attn::Status operator()(attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out)
    {
        int index = 0;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_seen.push_back(in.X.size() > 0 ? in.X(0, 0) : 0.0f);
            index = static_cast<int>(m_seen.size());
            m_cv.notify_all();
            m_cv.wait(lock, [&] { return m_opened >= index; });
        }
        out.output.setConstant(3, 3, -12345.0f);  // half-written: must never be shown
        out.heads.clear();
        return attn::compute(in, cfg, out);
    }
    void open(int upTo)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_opened = upTo;
        m_cv.notify_all();
    }
    // Blocks until `count` computes have started.
    void waitStarted(int count)
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [&] { return static_cast<int>(m_seen.size()) >= count; });
    }
    std::vector<float> seen()
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_seen;
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::vector<float> m_seen;
    int m_opened = 0;
};

attn::Session seed000()
{
    auto s = attn::loadSession(std::string(ATTNSCOPE_PRESETS_DIR) + "/seed000_worked_example.json");
    EXPECT_TRUE(s.ok());
    return s.ok() ? *s : attn::Session{};
}

attn::AttentionInput inputWithX00(float v)
{
    attn::AttentionInput in = seed000().input;
    in.X(0, 0) = v;
    return in;
}

// Calls recomputeIfNeeded until it shows something (the worker finishes on its own thread: this only waits,
// the verdict does not depend on how long it takes).
bool pollUntilShown(app::Document& d)
{
    for (int i = 0; i < 600000; ++i) {
        if (d.recomputeIfNeeded()) return true;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return false;
}

TEST(ComputeWorker, LatestSubmissionWinsWhileBusy)
{
    GatedCompute gate;
    app::ComputeWorker w([&](attn::AttentionInput& in, const attn::AttentionConfig& c, attn::AttentionResult& o) { return gate(in, c, o); });
    const attn::AttentionConfig cfg = seed000().config;
    w.submit(inputWithX00(1.0f), cfg, 1);
    gate.waitStarted(1);
    // A burst of edits while the first compute runs: each replaces the one waiting.
    for (int k = 2; k <= 9; ++k) w.submit(inputWithX00(static_cast<float>(k)), cfg, static_cast<std::uint64_t>(k));
    EXPECT_TRUE(w.busy());
    attn::AttentionResult shown;
    EXPECT_FALSE(w.take(shown).has_value()) << "nothing finished yet";

    gate.open(2);
    w.waitUntilDone();
    auto first = w.take(shown);
    ASSERT_TRUE(first.has_value());
    EXPECT_TRUE(first->status.ok()) << first->status.message;
    EXPECT_EQ(first->revision, 1u);
    w.waitUntilDone();
    auto second = w.take(shown);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->revision, 9u) << "the latest submission is computed, the ones in between are dropped";
    EXPECT_EQ(w.jobsStarted(), 2);
    EXPECT_EQ(gate.seen(), (std::vector<float>{1.0f, 9.0f}));
    EXPECT_FALSE(w.busy());

    // The shown result is the latest inputs' result, bit for bit what a direct compute gives.
    auto direct = attn::compute(inputWithX00(9.0f), cfg);
    ASSERT_TRUE(direct.ok());
    EXPECT_TRUE(shown.output.isApprox(direct->output, 1e-6f));
}

TEST(ComputeWorker, DocumentCoalescesEditsAndNeverShowsATornResult)
{
    GatedCompute gate;
    app::Document d;
    d.setSession(seed000(), "");
    d.startWorker([&](attn::AttentionInput& in, const attn::AttentionConfig& c, attn::AttentionResult& o) { return gate(in, c, o); });
    gate.open(1);
    d.waitForCompute();
    ASSERT_TRUE(d.hasResult());
    ASSERT_FALSE(d.computing());
    const attn::AttentionResult before = d.result();
    const std::uint64_t gen = d.resultGeneration();

    // Edit 1 starts a compute, which stops at the gate after scribbling over its buffer.
    d.beginGesture();
    d.setCellInGesture(app::MatrixId::X, 0, 0, 2.0f);
    EXPECT_FALSE(d.recomputeIfNeeded()) << "the frame loop never waits";
    gate.waitStarted(2);
    // Edits 2…20 while it runs (one per frame, as when dragging a cell).
    for (int k = 3; k <= 21; ++k) {
        d.setCellInGesture(app::MatrixId::X, 0, 0, static_cast<float>(k));
        EXPECT_FALSE(d.recomputeIfNeeded());
        EXPECT_TRUE(d.computing());
        // The views still show the last complete result, untouched.
        EXPECT_EQ(d.resultGeneration(), gen);
        EXPECT_TRUE(d.result().output == before.output);
        ASSERT_EQ(d.result().heads.size(), before.heads.size());
        EXPECT_TRUE(d.result().heads[0].weights == before.heads[0].weights);
    }
    EXPECT_EQ(gate.seen().size(), 2u) << "no compute is queued per edit";

    gate.open(2);
    ASSERT_TRUE(pollUntilShown(d));
    EXPECT_EQ(d.resultGeneration(), gen + 1);
    // The result of edit 1 (X[0][0] = 2), complete; the latest edit is computed next.
    auto direct2 = attn::compute(inputWithX00(2.0f), seed000().config);
    ASSERT_TRUE(direct2.ok());
    EXPECT_TRUE(d.result().output.isApprox(direct2->output, 1e-6f));
    EXPECT_TRUE(d.computing());

    gate.open(3);
    d.waitForCompute();
    EXPECT_FALSE(d.computing());
    EXPECT_EQ(d.resultGeneration(), gen + 2);
    EXPECT_EQ(d.resultRevision(), d.revision());
    EXPECT_EQ(gate.seen(), (std::vector<float>{1.0f, 2.0f, 21.0f})) << "a burst of 20 edits cost two computes";
    auto direct21 = attn::compute(inputWithX00(21.0f), seed000().config);
    ASSERT_TRUE(direct21.ok());
    EXPECT_TRUE(d.result().output.isApprox(direct21->output, 1e-6f));
}

TEST(ComputeWorker, ResultOfAnOtherShapeIsFlagged)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.startWorker();
    d.waitForCompute();
    EXPECT_TRUE(d.resultMatchesShape());
    app::Sizes z = d.sizes();
    z.T += 1;
    ASSERT_TRUE(d.setSizes(z).ok());
    // Until the new result is shown, the old one has the old number of tokens: panels must not mix them.
    EXPECT_FALSE(d.resultMatchesShape());
    d.waitForCompute();
    EXPECT_TRUE(d.resultMatchesShape());
    EXPECT_EQ(d.result().output.rows(), z.T);
}

// After a result of new shapes is taken, the worker gives the buffer it got back those shapes in the background
// (its memory mapped before the first edit needs it), and the next compute into it is still exact.
TEST(ComputeWorker, TheBufferGivenBackTakesTheNewShapes)
{
    app::ComputeWorker w;
    const attn::Session s = seed000();
    const attn::AttentionConfig cfg = s.config;
    auto shownAfter = [&](const attn::AttentionInput& in, attn::AttentionResult& shown) {
        w.submit(in, cfg, 1);
        w.waitUntilDone();
        const auto f = w.take(shown);
        ASSERT_TRUE(f.has_value());
        ASSERT_TRUE(f->status.ok()) << f->status.message;
        w.waitUntilDone();  // and the reshaping that taking it started
    };
    const attn::AttentionInput small = s.input;
    attn::AttentionResult shown;
    shownAfter(small, shown);
    // More tokens (a document does it through setSizes; here directly): 9 rows of X.
    attn::AttentionInput large = small;
    large.X = attn::Matrix::Random(9, small.X.cols());
    shownAfter(large, shown);
    ASSERT_EQ(shown.heads.size(), std::size_t(cfg.heads));
    EXPECT_EQ(shown.heads[0].weights.rows(), 9);
    EXPECT_NE(small.X.rows(), 9);
    EXPECT_TRUE(w.bufferShapedLike(shown));  // it held the smaller result before
    // The next compute lands in the reshaped buffer, which is a copy of the result shown (with its snapshot of
    // the inputs): it is an incremental one, and equals a compute of its own.
    large.X(2, 1) += 0.5f;
    shownAfter(large, shown);
    EXPECT_TRUE(shown.incremental);
    attn::AttentionResult want;
    ASSERT_TRUE(attn::compute(large, cfg, want).ok());
    // Incremental and full differ by float rounding only (test_incremental.cpp bounds it at 1e-5).
    EXPECT_TRUE(shown.output.isApprox(want.output, 1e-5f));
    for (std::size_t h = 0; h < shown.heads.size(); ++h) EXPECT_TRUE(shown.heads[h].weights.isApprox(want.heads[h].weights, 1e-5f));
}

// A compute that keeps its maps on the device drops its buffer's host maps (the result shown before the last, whose
// maps came back): they become the storage the next fetch writes into, instead of being freed by the compute and
// allocated again by the fetch (4 GB each way at n = 8192, a quarter of a second to free). A fake device: the compute
// runs on the CPU and empties the maps, the fetch fills them with the CPU's maps again.
TEST(ComputeWorker, TheBuffersMapsBecomeTheNextFetchsStorage)
{
    std::mutex mutex;
    std::vector<bool> computeHadMaps;            // per compute: did its buffer still hold host maps?
    std::vector<const float*> fetchedInto;       // per fetch: the storage of head 0's scores
    attn::AttentionResult hostMaps;              // what the fetch hands back
    auto compute = [&](attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            computeHadMaps.push_back(!out.heads.empty() && out.heads[0].scores.size() > 0);
        }
        attn::AttentionConfig cpu = cfg;
        cpu.mapsOnDevice = false;
        cpu.incremental = false;
        out.cache = attn::IncrementalCache();
        const attn::Status st = attn::compute(in, cpu, out);
        if (!st.ok()) return st;
        std::lock_guard<std::mutex> lock(mutex);
        hostMaps = out;
        for (attn::HeadResult& h : out.heads) h.scores.resize(0, 0), h.weights.resize(0, 0), h.masked.resize(0, 0);
        out.backend = attn::Backend::Cuda;
        out.deviceGeneration = static_cast<std::uint64_t>(computeHadMaps.size());
        out.mapsOnDevice = true;
        return st;
    };
    auto fetch = [&](attn::AttentionResult& r, const std::function<bool()>&) {
        std::lock_guard<std::mutex> lock(mutex);
        fetchedInto.push_back(r.heads.empty() ? nullptr : r.heads[0].scores.data());
        for (std::size_t h = 0; h < r.heads.size(); ++h) {
            r.heads[h].scores = hostMaps.heads[h].scores;  // into the storage it has when the shape is the same
            r.heads[h].weights = hostMaps.heads[h].weights;
            r.heads[h].masked = hostMaps.heads[h].masked;
        }
        return attn::Status();
    };
    app::ComputeWorker w(compute, fetch);
    attn::AttentionConfig cfg = seed000().config;
    cfg.mapsOnDevice = true;
    attn::AttentionResult shown;
    auto computeAndTake = [&](float x00) {
        w.submit(inputWithX00(x00), cfg, 1);
        w.waitUntilDone();
        ASSERT_TRUE(w.take(shown).has_value());
    };
    // 1. A result whose maps stay on the device, then its maps fetched into the shown result.
    computeAndTake(1.0f);
    w.waitUntilDone();
    const auto maps = w.takeMaps(shown);
    ASSERT_TRUE(maps.has_value() && maps->moved);
    ASSERT_GT(shown.heads[0].scores.size(), 0);
    const float* first = shown.heads[0].scores.data();
    // 2. A second result, and before its maps are fetched an edit: the worker computes the edit first, into the buffer
    // given back, which holds the first result's maps.
    w.submit(inputWithX00(2.0f), cfg, 2);
    w.waitUntilDone();
    w.submit(inputWithX00(3.0f), cfg, 3);
    ASSERT_TRUE(w.take(shown).has_value());
    w.waitUntilDone();
    ASSERT_TRUE(w.take(shown).has_value());
    w.waitUntilDone();
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_EQ(computeHadMaps.size(), 3u);
    EXPECT_FALSE(computeHadMaps[2]) << "the edit's compute was given the first result's maps to drop";
    ASSERT_FALSE(fetchedInto.empty());
    EXPECT_EQ(fetchedInto.back(), first) << "the last fetch did not write into the first result's maps";
}

TEST(ComputeWorker, ErrorKeepsTheLastResult)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.startWorker([](attn::AttentionInput& in, const attn::AttentionConfig& c, attn::AttentionResult& o) {
        if (in.X(0, 0) == 7.0f) return attn::invalidArgument("X[0][0]: 7 refused by the test");
        return attn::compute(in, c, o);
    });
    d.waitForCompute();
    const attn::Matrix good = d.result().output;
    d.beginGesture();
    d.setCellInGesture(app::MatrixId::X, 0, 0, 7.0f);
    d.waitForCompute();
    EXPECT_FALSE(d.lastError().ok());
    EXPECT_NE(d.lastError().message.find("refused by the test"), std::string::npos);
    EXPECT_TRUE(d.result().output == good);
    d.setCellInGesture(app::MatrixId::X, 0, 0, 1.5f);
    d.waitForCompute();
    EXPECT_TRUE(d.lastError().ok());
}

TEST(ComputeWorker, ColumnLayoutGivesTheSameResultAsComputingInPlace)
{
    auto col = attn::loadSession(std::string(ATTNSCOPE_PRESETS_DIR) + "/lesson_two_formulas_column.json");
    ASSERT_TRUE(col.ok()) << col.status().message;
    ASSERT_EQ(col->config.layout, attn::Layout::Column);
    app::Document inPlace, onWorker;
    inPlace.setSession(*col, "");
    onWorker.setSession(*col, "");
    onWorker.startWorker();
    ASSERT_TRUE(inPlace.recomputeIfNeeded());
    onWorker.waitForCompute();
    ASSERT_TRUE(inPlace.lastError().ok()) << inPlace.lastError().message;
    ASSERT_TRUE(onWorker.lastError().ok()) << onWorker.lastError().message;
    EXPECT_TRUE(onWorker.result().output == inPlace.result().output) << "the worker transposes like the frame loop did";
    ASSERT_EQ(onWorker.result().heads.size(), inPlace.result().heads.size());
    EXPECT_TRUE(onWorker.result().heads[0].weights == inPlace.result().heads[0].weights);
    EXPECT_EQ(onWorker.ranges().weights.size(), inPlace.ranges().weights.size());
}

// A part a frame drew pooled is pooled by the worker with the next result: the values equal poolMax of that
// result's matrix, a part nobody asked for is not there, and the request lasts one job (the frames ask again).
TEST(ComputeWorker, PartsTheFramesPooledComeWithTheNextResult)
{
    app::Document d;
    d.setSession(seed000(), "");
    d.startWorker();
    d.waitForCompute();
    const attn::Matrix& w0 = d.result().heads[0].weights;
    const app::PoolPart whole{0, 0, int(w0.rows()), int(w0.cols()), 2, 2};
    const app::PoolPart corner{1, 1, int(w0.rows()) - 1, int(w0.cols()) - 1, 1, 2};
    EXPECT_EQ(d.prepooled(&w0, whole), nullptr);  // nothing asked for yet
    d.wantPooled(&w0, whole);
    d.wantPooled(&w0, corner);
    const app::PoolPart tooLarge{0, 0, 1000, 1000, 2, 2};
    d.wantPooled(&w0, tooLarge);                // outside the map: left out, no crash
    d.wantPooled(&d.session().input.X, whole);  // not a result matrix: ignored
    d.beginGesture();
    d.setCellInGesture(app::MatrixId::X, 0, 0, 2.5f);
    d.waitForCompute();
    const attn::Matrix& w = d.result().heads[0].weights;
    const attn::Matrix* a = d.prepooled(&w, whole);
    const attn::Matrix* b = d.prepooled(&w, corner);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(*a, attn::poolMax(w, 2, 2));
    EXPECT_EQ(*b, attn::poolMax(w.block(1, 1, w.rows() - 1, w.cols() - 1), 1, 2));
    EXPECT_EQ(d.prepooled(&d.result().heads[0].scores, whole), nullptr);
    EXPECT_EQ(d.prepooled(&d.session().input.X, whole), nullptr);
    EXPECT_EQ(d.prepooled(&w, tooLarge), nullptr);
    // Nobody drew it since the last submit: the next result comes without it.
    d.setCellInGesture(app::MatrixId::X, 0, 0, 3.5f);
    d.waitForCompute();
    EXPECT_EQ(d.prepooled(&d.result().heads[0].weights, whole), nullptr);
}

// Every float matrix of a result has a slot that names it back; other matrices have none.
TEST(ComputeWorker, ResultSlotsNameTheirMatrices)
{
    const attn::Session s = seed000();
    attn::AttentionResult r;
    ASSERT_TRUE(attn::compute(s.input, s.config, r).ok());
    std::vector<const attn::Matrix*> all = {&r.Q, &r.K, &r.V, &r.concat, &r.output};
    for (const attn::HeadResult& h : r.heads)
        for (const attn::Matrix* m : {&h.Q, &h.K, &h.V, &h.scores, &h.weights, &h.output}) all.push_back(m);
    for (const attn::Matrix* m : all) {
        const int slot = app::resultSlot(r, m);
        ASSERT_GE(slot, 0);
        EXPECT_EQ(app::resultMatrixAt(r, slot), m);
    }
    EXPECT_EQ(app::resultSlot(r, &s.input.X), -1);
    EXPECT_EQ(app::resultSlot(r, nullptr), -1);
    EXPECT_EQ(app::resultMatrixAt(r, -1), nullptr);
    EXPECT_EQ(app::resultMatrixAt(r, 5 + 7 * int(r.heads.size())), nullptr);
    EXPECT_EQ(app::resultMatrixAt(r, 5 + 4), nullptr);  // a head's mask: bytes, never pooled
}

TEST(BackgroundSaver, WritesOffTheCallerAndReportsFailures)
{
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("attnscope_saver_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    app::BackgroundSaver saver;
    EXPECT_FALSE(saver.take().has_value());
    attn::Session s = seed000();
    s.input.X(0, 0) = 42.0f;
    saver.save((dir / "a.json").string(), s, 7);
    saver.flush();
    auto done = saver.take();
    ASSERT_TRUE(done.has_value());
    EXPECT_TRUE(done->status.ok()) << done->status.message;
    EXPECT_EQ(done->revision, 7u);
    auto back = attn::loadSession((dir / "a.json").string());
    ASSERT_TRUE(back.ok()) << back.status().message;
    EXPECT_EQ(back->input.X(0, 0), 42.0f);

    saver.save((dir / "no_such_folder" / "b.json").string(), s, 8);
    saver.flush();
    done = saver.take();
    ASSERT_TRUE(done.has_value());
    EXPECT_FALSE(done->status.ok()) << "a write that cannot happen reports it";
    EXPECT_EQ(done->revision, 8u);
    std::filesystem::remove_all(dir);
}

} // namespace
