// The window's per-result work on a CUDA result (state/result_ranges.h, state/pooled_parts.h) done on the device:
// the scores' and weights' ranges by DeviceMaps::ranges, their pooled parts by DeviceMaps::pooledStored. Each must
// equal, bit for bit, the host path over the same result downloaded (the oracle: the same result with no device
// generation, whose maps the host scans and pools), for maps copied back and for maps kept on the device, in both
// layouts, with and without masks, multi-head and grouped-query, T ≠ S; and once the device no longer holds the
// result, the host path (maps copied back) or nothing (maps only on the device), without a crash.
// The window's document on the device (state/document.h, state/compute_worker.h): a result computed with its maps
// kept on the device is shown at once, with the ranges of the copied path's maps, then its maps come back on the
// worker, bit for bit the copied path's; a fetch gives way to newer work; a result the device lost before its maps
// came back is computed again with its maps copied; a CPU session never asks the device for anything.
// Built over the emulated runtime (test_device_state_emulated, label unit) and for a GPU (test_device_state, label
// gpu: 77 without a device).
#include "state/document.h"
#include "state/pooled_parts.h"
#include "state/result_ranges.h"

#include "device_result_cases.h"
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/device_maps.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

namespace {

using attn::AttentionConfig;
using attn::AttentionInput;
using attn::AttentionResult;
using attn::Layout;
using attn::Matrix;

::testing::AssertionResult sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 ? ::testing::AssertionSuccess() : ::testing::AssertionFailure(); }

::testing::AssertionResult sameRanges(const app::ResultRanges& a, const app::ResultRanges& b)
{
    for (auto [x, y, name] : {std::tuple{&a.q, &b.q, "Q"}, {&a.k, &b.k, "K"}, {&a.v, &b.v, "V"},
                              {&a.concat, &b.concat, "concat"}, {&a.output, &b.output, "output"}})
        if (auto ok = attn::test::sameRangeBits(*x, *y, name); !ok) return ok;
    if (a.scores.size() != b.scores.size() || a.weights.size() != b.weights.size() || a.headOut.size() != b.headOut.size())
        return ::testing::AssertionFailure() << "head counts differ";
    for (std::size_t h = 0; h < a.scores.size(); ++h) {
        const std::string hs = "head " + std::to_string(h);
        for (auto ok : {attn::test::sameRangeBits(a.scores[h], b.scores[h], hs + " scores"),
                        attn::test::sameRangeBits(a.weights[h], b.weights[h], hs + " weights"),
                        attn::test::sameRangeBits(a.headOut[h], b.headOut[h], hs + " output")})
            if (!ok) return ok;
    }
    return ::testing::AssertionSuccess();
}

struct Case {
    attn::test::ProblemSpec p;
    Layout layout;
};

std::vector<Case> cases()
{
    std::vector<Case> out;
    for (const auto& [p, layout] : attn::test::deviceResultCases(300, 12)) out.push_back({p, layout});
    return out;
}

// The public compute on the CUDA backend (the emulated one in the unit build), maps copied back or kept there.
AttentionResult computeOnDevice(const Case& c, bool mapsOnDevice)
{
    AttentionInput in;
    AttentionConfig cfg;
    attn::test::makeProblem(c.p, in, cfg);
    if (c.layout == Layout::Column) in = attn::test::transposed(in);
    cfg.layout = c.layout;
    cfg.backend = attn::Backend::Cuda;
    cfg.mapsOnDevice = mapsOnDevice;
    attn::Expected<AttentionResult> r = attn::compute(in, cfg);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.status().message);
    if (!r.ok()) return {};
    EXPECT_EQ(r->backend, attn::Backend::Cuda);
    return std::move(*r);
}

// The same result as the host sees it once the device no longer holds it: the host path is the oracle.
AttentionResult onHostOnly(AttentionResult r)
{
    r.deviceGeneration = 0;
    return r;
}

std::string describe(const Case& c)
{
    return std::string(attn::toString(c.layout)) + " H=" + std::to_string(c.p.heads) + " T=" + std::to_string(c.p.T) +
           " S=" + std::to_string(c.p.S) + " masks=" + std::to_string(c.p.custom);
}

TEST(DeviceResultRanges, AreTheHostsRangesOfTheSameMapsWithoutAHostScan)
{
    app::RangeOptions perHead, swapped;
    perHead.shared = swapped.shared = false;
    swapped.scores = false;  // plain scores, symmetric weights
    swapped.weights = true;
    for (const Case& c : cases())
        for (const app::RangeOptions& o : {app::RangeOptions{}, perHead, swapped}) {
            SCOPED_TRACE(describe(c) + (o.shared ? " shared" : " per head"));
            const AttentionResult copied = computeOnDevice(c, false);
            ASSERT_FALSE(copied.heads.empty());
            const app::ResultRanges want = app::computeResultRanges(onHostOnly(copied), o);
            ASSERT_EQ(want.scoreLines.size(), copied.heads.size());  // the host scanned its lines
            // Copied back and still on the device: from the device, no per-line scan.
            const app::ResultRanges fromCopied = app::computeResultRanges(copied, o);
            EXPECT_TRUE(sameRanges(fromCopied, want));
            EXPECT_TRUE(fromCopied.scoreLines.empty() && fromCopied.weightLines.empty());
            // Kept on the device (the same maps: the kernels and products are the copied path's).
            const AttentionResult kept = computeOnDevice(c, true);
            ASSERT_TRUE(kept.mapsOnDevice);
            EXPECT_TRUE(sameRanges(app::computeResultRanges(kept, o), want));
            // `copied` is no longer on the device: the host scans its maps; `prev` from a device result is harmless.
            EXPECT_TRUE(sameRanges(app::computeResultRanges(copied, o, &fromCopied), want));
            (void)computeOnDevice(c, false);
            // `kept` neither: its maps are nowhere to be read, so their ranges are the empty maps' (no crash).
            const app::ResultRanges lost = app::computeResultRanges(kept, o);
            ASSERT_EQ(lost.scores.size(), kept.heads.size());
            EXPECT_EQ(lost.weights[0].lo, o.weights ? -1.0f : 0.0f);
            EXPECT_EQ(lost.weights[0].hi, 1.0f);
            EXPECT_TRUE(attn::test::sameRangeBits(lost.output, want.output, "output"));
        }
}

// Every part pooled, against the oracle's: the same (slot, part)s, bit for bit.
::testing::AssertionResult samePooled(const app::PooledParts& got, const app::PooledParts& want)
{
    if (got.size() != want.size())
        return ::testing::AssertionFailure() << got.size() << " parts pooled, the host " << want.size();
    for (const app::PrepooledPart& w : want) {
        const Matrix* g = app::findPooled(got, w.slot, w.part);
        if (!g) return ::testing::AssertionFailure() << "slot " << w.slot << " missing";
        if (g->rows() != w.values.rows() || g->cols() != w.values.cols())
            return ::testing::AssertionFailure() << "slot " << w.slot << ": shape differs";
        for (Eigen::Index i = 0; i < g->size(); ++i) {
            const float a = g->data()[i], b = w.values.data()[i];
            if (!(std::isnan(a) && std::isnan(b)) && !sameBits(a, b))
                return ::testing::AssertionFailure() << "slot " << w.slot << " cell #" << i << ": " << a << ", the host " << b;
        }
    }
    return ::testing::AssertionSuccess();
}

TEST(DeviceResultPooledParts, AreTheHostsPoolsOfTheSameMaps)
{
    for (const Case& c : cases()) {
        SCOPED_TRACE(describe(c));
        const AttentionResult copied = computeOnDevice(c, false);
        ASSERT_FALSE(copied.heads.empty());
        const AttentionResult host = onHostOnly(copied);
        // Slots by the host copy's matrices (resultSlot): the output, head 0's scores and output, the last head's
        // weights; parts whole, inner, a single cell, pooled from 1×1 to the part's own size.
        const attn::HeadResult& h0 = host.heads[0];
        const attn::HeadResult& hl = host.heads.back();
        const int R = int(h0.scores.rows()), C = int(h0.scores.cols());
        app::PoolRequests wanted;
        const int mapSlots[] = {app::resultSlot(host, &h0.scores), app::resultSlot(host, &hl.weights)};
        for (int slot : mapSlots)
            for (const app::PoolPart& part : {app::PoolPart{0, 0, R, C, 4, 5}, app::PoolPart{1, 2, R - 3, C - 4, 3, 2},
                                              app::PoolPart{R - 1, C - 1, 1, 1, 1, 1}, app::PoolPart{0, 1, R, C - 1, R, C - 1}})
                app::addPoolRequest(wanted, slot, part);
        app::addPoolRequest(wanted, app::resultSlot(host, &host.output), app::PoolPart{0, 0, int(host.output.rows()), 2, 3, 1});
        app::addPoolRequest(wanted, app::resultSlot(host, &h0.output),
                            app::PoolPart{0, 1, int(h0.output.rows()), int(h0.output.cols()) - 1, 2, 2});
        app::addPoolRequest(wanted, mapSlots[0], app::PoolPart{0, 0, R + 1, C, 2, 2});  // does not fit: left out
        for (int threads : {1, 3}) {
            const app::PooledParts want = app::poolParts(host, wanted, threads);
            ASSERT_EQ(want.size(), wanted.size() - 1);
            EXPECT_TRUE(samePooled(app::poolParts(copied, wanted, threads), want));
            const AttentionResult kept = computeOnDevice(c, true);
            EXPECT_TRUE(samePooled(app::poolParts(kept, wanted, threads), want));
            // No longer on the device: `copied` pools on the host; `kept` has only its small matrices' parts.
            (void)computeOnDevice(c, false);
            EXPECT_TRUE(samePooled(app::poolParts(copied, wanted, threads), want));
            const app::PooledParts small = app::poolParts(kept, wanted, threads);
            EXPECT_EQ(small.size(), 2u);
            for (int slot : mapSlots)
                for (const app::PrepooledPart& p : small) EXPECT_NE(p.slot, slot);
        }
    }
}

// ---- The window's document: two publications ---------------------------------------------------------------------

// A door the test opens: the worker's fetch waits at it.
class Gate {
public:
    void open()
    {
        {
            std::lock_guard<std::mutex> l(m_mutex);
            m_open = true;
        }
        m_cv.notify_all();
    }
    void pass()
    {
        std::unique_lock<std::mutex> l(m_mutex);
        m_cv.wait(l, [this] { return m_open; });
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_open = false;
};

// Frames (recomputeIfNeeded) until `done`; false after a minute (a hang, not a slow machine: each step is a few ms).
template <class Pred>
bool frameUntil(app::Document& doc, Pred done)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        doc.recomputeIfNeeded();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

::testing::AssertionResult sameMatrixBits(const Matrix& a, const Matrix& b, const std::string& name)
{
    if (a.rows() != b.rows() || a.cols() != b.cols())
        return ::testing::AssertionFailure() << name << ": " << a.rows() << "×" << a.cols() << ", expected " << b.rows() << "×" << b.cols();
    if (a.size() > 0 && std::memcmp(a.data(), b.data(), sizeof(float) * std::size_t(a.size())) != 0)
        return ::testing::AssertionFailure() << name << " differs";
    return ::testing::AssertionSuccess();
}

// The shown result's matrices against the copied path's (the oracle): the maps too unless `mapsHere` is false (then
// they must be empty).
::testing::AssertionResult sameAsCopied(const AttentionResult& got, const AttentionResult& want, bool mapsHere)
{
    if (got.heads.size() != want.heads.size()) return ::testing::AssertionFailure() << "head counts differ";
    for (auto [x, y, name] : {std::tuple{&got.Q, &want.Q, "Q"}, {&got.K, &want.K, "K"}, {&got.V, &want.V, "V"},
                              {&got.concat, &want.concat, "concat"}, {&got.output, &want.output, "output"}})
        if (auto ok = sameMatrixBits(*x, *y, name); !ok) return ok;
    for (std::size_t h = 0; h < got.heads.size(); ++h) {
        const attn::HeadResult &x = got.heads[h], &y = want.heads[h];
        const std::string head = "head " + std::to_string(h) + " ";
        if (auto ok = sameMatrixBits(x.output, y.output, head + "output"); !ok) return ok;
        if (!mapsHere) {
            if (x.scores.size() || x.weights.size() || x.masked.size()) return ::testing::AssertionFailure() << head << "holds maps";
            continue;
        }
        if (auto ok = sameMatrixBits(x.scores, y.scores, head + "scores"); !ok) return ok;
        if (auto ok = sameMatrixBits(x.weights, y.weights, head + "weights"); !ok) return ok;
        if (x.masked.rows() != y.masked.rows() || x.masked.cols() != y.masked.cols() || x.masked != y.masked)
            return ::testing::AssertionFailure() << head << "masked differs";
    }
    return ::testing::AssertionSuccess();
}

// A document on the case's session (file orientation, as opening it gives) computing on the device through a
// worker, with `fetch` as its fetch; `asked` gets each job's mapsOnDevice.
void startDocument(app::Document& doc, const Case& c, attn::Backend backend, app::FetchFn fetch, std::vector<int>& asked)
{
    attn::Session s;
    attn::test::makeProblem(c.p, s.input, s.config);
    if (c.layout == Layout::Column) s.input = attn::test::transposed(s.input);
    s.config.layout = c.layout;
    doc.setSession(s, "");
    doc.backend = backend;
    doc.mapsOnDeviceFromBytes = 0;  // the cases' maps are small: every one stays on the device first
    doc.startWorker(
        [&asked](attn::AttentionInput& in, const AttentionConfig& cfg, AttentionResult& out) {
            asked.push_back(cfg.mapsOnDevice);
            return attn::compute(in, cfg, out);
        },
        std::move(fetch));
}

std::vector<Case> windowCases()
{
    std::vector<Case> all = cases(), some;
    for (std::size_t k = 0; k < all.size(); k += 3) some.push_back(all[k]);  // both layouts, masks or not, GQA, cross
    return some;
}

TEST(DeviceResultWindow, ShowsTheResultAtOnceThenItsMapsAsTheCopiedPathsBitForBit)
{
    for (const Case& c : windowCases()) {
        SCOPED_TRACE(describe(c));
        const AttentionResult want = computeOnDevice(c, false);
        Gate gate;
        std::atomic<int> fetches{0};
        std::vector<int> asked;
        app::Document doc;
        startDocument(doc, c, attn::Backend::Cuda,
                      [&](AttentionResult& r, const std::function<bool()>& carryOn) {
                          gate.pass();
                          ++fetches;
                          return attn::fetchDeviceMaps(r, carryOn);
                      },
                      asked);
        ASSERT_TRUE(frameUntil(doc, [&] { return doc.hasResult(); }));
        // First publication: no maps on the host, everything else the copied path's, its ranges the host's of the
        // copied maps (made on the device).
        EXPECT_TRUE(doc.result().mapsOnDevice);
        EXPECT_TRUE(doc.mapsArriving());
        EXPECT_TRUE(sameAsCopied(doc.result(), want, false));
        EXPECT_TRUE(sameRanges(doc.ranges(), app::computeResultRanges(onHostOnly(want), doc.ranges().options)));
        const std::uint64_t generation = doc.resultGeneration();
        // Second: the maps, the copied path's bit for bit, with the ranges unchanged.
        gate.open();
        doc.waitForCompute();
        EXPECT_FALSE(doc.result().mapsOnDevice);
        EXPECT_FALSE(doc.mapsArriving());
        EXPECT_FALSE(doc.mapsLost());
        EXPECT_TRUE(sameAsCopied(doc.result(), want, true));
        EXPECT_TRUE(sameRanges(doc.ranges(), app::computeResultRanges(onHostOnly(want), doc.ranges().options)));
        EXPECT_EQ(doc.resultGeneration(), generation + 1) << "the shown result changed: views made of its empty maps remake";
        EXPECT_EQ(asked, std::vector<int>{1});
        EXPECT_EQ(fetches.load(), 1);
    }
}

TEST(DeviceResultWindow, AFetchGivesWayToNewerWorkBeforeItsNextMap)
{
    const Case c = windowCases().front();
    const AttentionResult want = computeOnDevice(c, false);
    Gate inFetch, resume;
    std::mutex m;
    std::vector<attn::Status> outcomes;
    std::vector<int> mapsBeforeEnd;
    std::vector<int> asked;
    app::Document doc;
    startDocument(doc, c, attn::Backend::Cuda,
                  [&](AttentionResult& r, const std::function<bool()>& carryOn) {
                      int asks = 0;
                      const bool first = outcomes.empty();
                      const attn::Status st = attn::fetchDeviceMaps(r, [&] {
                          if (first && asks == 1) {  // one map copied: newer work comes now
                              inFetch.open();
                              resume.pass();
                          }
                          ++asks;
                          return carryOn();
                      });
                      std::lock_guard<std::mutex> l(m);
                      outcomes.push_back(st);
                      mapsBeforeEnd.push_back(asks);
                      return st;
                  },
                  asked);
    ASSERT_TRUE(frameUntil(doc, [&] { return doc.hasResult(); }));
    inFetch.pass();
    doc.markDirty();        // an edit: the same inputs again, a newer job all the same
    doc.recomputeIfNeeded();  // submitted while the fetch waits between maps
    resume.open();
    doc.waitForCompute();
    std::lock_guard<std::mutex> l(m);
    ASSERT_EQ(outcomes.size(), 2u);
    EXPECT_EQ(outcomes[0].code, attn::StatusCode::Cancelled) << outcomes[0].message;
    EXPECT_EQ(mapsBeforeEnd[0], 2) << "stopped before its second map";
    EXPECT_TRUE(outcomes[1].ok()) << outcomes[1].message;
    EXPECT_EQ(asked, (std::vector<int>{1, 1}));
    EXPECT_FALSE(doc.result().mapsOnDevice);
    EXPECT_TRUE(sameAsCopied(doc.result(), want, true));
}

TEST(DeviceResultWindow, AResultTheDeviceLostBeforeItsMapsCameIsComputedAgainWithItsMaps)
{
    const std::vector<Case> all = windowCases();
    const Case c = all.back();
    const AttentionResult want = computeOnDevice(c, false);
    Gate gate;
    std::vector<attn::Status> outcomes;
    std::vector<int> asked;
    app::Document doc;
    startDocument(doc, c, attn::Backend::Cuda,
                  [&](AttentionResult& r, const std::function<bool()>& carryOn) {
                      gate.pass();
                      outcomes.push_back(attn::fetchDeviceMaps(r, carryOn));
                      return outcomes.back();
                  },
                  asked);
    ASSERT_TRUE(frameUntil(doc, [&] { return doc.hasResult(); }));
    ASSERT_TRUE(doc.mapsArriving());
    (void)computeOnDevice(all.front(), true);  // another compute on the device replaces the shown result there
    gate.open();
    doc.waitForCompute();
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].code, attn::StatusCode::Unavailable) << outcomes[0].message;
    EXPECT_EQ(asked, (std::vector<int>{1, 0})) << "computed again with the maps copied back";
    EXPECT_FALSE(doc.result().mapsOnDevice);
    EXPECT_FALSE(doc.mapsLost());
    EXPECT_TRUE(sameAsCopied(doc.result(), want, true));
}

TEST(DeviceResultWindow, MapsBelowTheThresholdComeBackWithTheResult)
{
    const Case c = windowCases().front();
    const AttentionResult want = computeOnDevice(c, false);
    std::atomic<int> fetches{0};
    std::vector<int> asked;
    app::Document doc;
    startDocument(doc, c, attn::Backend::Cuda,
                  [&](AttentionResult& r, const std::function<bool()>& carryOn) {
                      ++fetches;
                      return attn::fetchDeviceMaps(r, carryOn);
                  },
                  asked);
    const std::size_t mapBytes = 2 * want.heads.size() * std::size_t(want.heads[0].weights.size()) * sizeof(float);
    doc.mapsOnDeviceFromBytes = mapBytes + 1;  // one byte more than this case's maps: they come with the result
    doc.waitForCompute();
    ASSERT_TRUE(doc.hasResult());
    EXPECT_EQ(doc.result().backend, attn::Backend::Cuda);
    EXPECT_FALSE(doc.result().mapsOnDevice);
    EXPECT_FALSE(doc.mapsArriving());
    EXPECT_TRUE(sameAsCopied(doc.result(), want, true));
    EXPECT_EQ(asked, std::vector<int>{0});
    EXPECT_EQ(fetches.load(), 0);
    // At the threshold they stay on the device first.
    doc.mapsOnDeviceFromBytes = mapBytes;
    doc.edit([](attn::Session& s) { s.input.X(0, 0) += 0.5f; });
    doc.waitForCompute();
    EXPECT_EQ(asked, (std::vector<int>{0, 1}));
    EXPECT_EQ(fetches.load(), 1);
}

TEST(DeviceResultWindow, ACpuSessionNeverAsksTheDevice)
{
    const Case c = windowCases().front();
    std::atomic<int> fetches{0};
    std::vector<int> asked;
    app::Document doc;
    startDocument(doc, c, attn::Backend::Cpu,
                  [&](AttentionResult& r, const std::function<bool()>& carryOn) {
                      ++fetches;
                      return attn::fetchDeviceMaps(r, carryOn);
                  },
                  asked);
    doc.waitForCompute();
    ASSERT_TRUE(doc.hasResult());
    EXPECT_EQ(doc.result().backend, attn::Backend::Cpu);
    EXPECT_EQ(doc.result().deviceGeneration, 0u);
    EXPECT_FALSE(doc.result().mapsOnDevice);
    EXPECT_FALSE(doc.mapsArriving());
    EXPECT_GT(doc.result().heads[0].weights.size(), 0);
    EXPECT_EQ(asked, std::vector<int>{0});
    EXPECT_EQ(fetches.load(), 0);
}

} // namespace

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    const std::vector<attn::Backend> backends = attn::availableBackends();
    if (!GTEST_FLAG_GET(list_tests) && std::find(backends.begin(), backends.end(), attn::Backend::Cuda) == backends.end()) {
        std::printf("SKIPPED: the device results' state tests need a CUDA device\n");
        return 77;  // CTest SKIP_RETURN_CODE
    }
    return RUN_ALL_TESTS();
}
