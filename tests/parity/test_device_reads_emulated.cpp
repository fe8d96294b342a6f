// Reads of a result on the device never wait for a compute (issue 34: frames while computing). A frame filling a
// texture, the window's worker asking for ranges or a tile: once a compute is in flight, the result they ask about
// is being replaced, so they answer at once (not current, Unavailable) and the caller uses the host's copy. Before,
// each took the workspace's lock and waited for the whole compute (at n = 8192 on an H100, ~0.7 s for a frame).
//
// Over the emulated runtime (label unit), whose launch hook holds a second compute inside the backend, at its first
// kernel, while the test reads from another thread.
#include "attnscope/attention.h"
#include "attnscope/device_interop.h"
#include "attnscope/device_maps.h"
#include "cuda_emulator.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>

namespace attn {
namespace {

TEST(DeviceReads, NeverWaitForACompute)
{
    std::mt19937 rng(5);
    AttentionInput in;
    in.Q = test::randomMatrix(rng, 16, 8);
    in.K = test::randomMatrix(rng, 16, 8);
    in.V = test::randomMatrix(rng, 16, 8);
    in.mask.causal = true;
    AttentionConfig cfg;
    cfg.mode = Mode::Direct;
    cfg.heads = 2;
    cfg.backend = Backend::Cuda;
    AttentionResult first;
    ASSERT_TRUE(compute(in, cfg, first).ok());
    ASSERT_NE(first.deviceGeneration, 0u);
    ASSERT_TRUE(deviceResultCurrent(first.deviceGeneration));
    ASSERT_TRUE(DeviceMaps(first).current());

    // A second compute, held at its first kernel (inside the backend, the workspace locked) until the reads are done.
    std::promise<void> inside, go;
    std::shared_future<void> released = go.get_future().share();
    std::atomic<bool> held{false};
    emu::setLaunchHook([&] {
        if (held.exchange(true)) return;
        inside.set_value();
        released.wait();
    });
    auto second = std::async(std::launch::async, [&] {
        AttentionResult r;
        return compute(in, cfg, r);
    });
    inside.get_future().wait();

    struct Answers {
        bool current = true, mapsCurrent = true;
        Status tile, pooled;
        std::vector<DisplayRange> ranges;
        Status rangesStatus;
    };
    auto reads = std::async(std::launch::async, [&] {
        Answers a;
        const DeviceMaps maps(first);
        a.current = deviceResultCurrent(first.deviceGeneration);
        a.mapsCurrent = maps.current();
        Matrix out;
        a.tile = maps.tile(MapKind::Weights, 0, 0, MapRect{0, 0, 4, 4}, out);
        a.pooled = maps.pooled(MapKind::Scores, 0, 1, MapRect{0, 0, 16, 16}, 2, 2, out);
        a.rangesStatus = maps.ranges(MapKind::Weights, 0, false, a.ranges);
        return a;
    });
    // Generous: the reads answer at once; a read that waited for the held compute would never answer before `go`.
    const bool answered = reads.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    go.set_value();
    const Status secondStatus = second.get();
    emu::setLaunchHook({});
    ASSERT_TRUE(answered) << "a read of the first result waited for the second compute";
    const Answers a = reads.get();
    EXPECT_FALSE(a.current);
    EXPECT_FALSE(a.mapsCurrent);
    EXPECT_EQ(a.tile.code, StatusCode::Unavailable) << a.tile.message;
    EXPECT_EQ(a.pooled.code, StatusCode::Unavailable) << a.pooled.message;
    EXPECT_EQ(a.rangesStatus.code, StatusCode::Unavailable) << a.rangesStatus.message;
    EXPECT_NE(a.tile.message.find("replacing"), std::string::npos) << a.tile.message;
    EXPECT_TRUE(secondStatus.ok()) << secondStatus.message;
    // Afterwards the first result is gone from the device (the second replaced it), and no compute is in flight.
    EXPECT_FALSE(deviceResultCurrent(first.deviceGeneration));
    AttentionResult third;
    ASSERT_TRUE(compute(in, cfg, third).ok());
    EXPECT_TRUE(DeviceMaps(third).current());
}

} // namespace
} // namespace attn
