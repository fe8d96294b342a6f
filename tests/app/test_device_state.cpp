// The window's per-result work on a CUDA result (state/result_ranges.h, state/pooled_parts.h) done on the device:
// the scores' and weights' ranges by DeviceMaps::ranges, their pooled parts by DeviceMaps::pooledStored. Each must
// equal, bit for bit, the host path over the same result downloaded (the oracle: the same result with no device
// generation, whose maps the host scans and pools), for maps copied back and for maps kept on the device, in both
// layouts, with and without masks, multi-head and grouped-query, T ≠ S; and once the device no longer holds the
// result, the host path (maps copied back) or nothing (maps only on the device), without a crash.
// Built over the emulated runtime (test_device_state_emulated, label unit) and for a GPU (test_device_state, label
// gpu: 77 without a device).
#include "state/pooled_parts.h"
#include "state/result_ranges.h"

#include "device_result_cases.h"
#include "test_util.h"

#include <attnscope/attention.h>
#include <attnscope/device_maps.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
