// ComputeWorker: runs attn::compute on its own thread so that the frame loop never waits for it.
//
// One job at a time; a job submitted while another is waiting replaces it (the latest edit wins: a burst of
// edits during a compute costs one more compute, not a queue). The result is written into a buffer only the
// worker touches; take() hands it to the caller by swapping it with the caller's shown result, so the views
// never see a half-written result, and the worker's next compute reuses the buffer the views just let go of
// (two buffers in all: core's compute() reuses a result's storage and, for an unchanged config, recomputes
// only what changed since the inputs that buffer was computed from).
//
// The worker does not start a new job until the finished one is taken: the caller takes it on its next frame.
//
// When the result taken has other shapes than the buffer the caller gave back (a new session, other sizes),
// the worker makes that buffer a copy of the result taken (attn::copyResult, with its snapshot of the inputs)
// right away, while the new result is on screen: the first edit then computes into memory that is already
// there, and incrementally (only what the edit reaches) rather than from nothing. At n=4096, h=8 a buffer is
// 1.2 GB: first touching it took longer than the compute (page faults were a quarter of `bench --gui`), and
// a full compute into it made the first edit after a load cost 1.3 s instead of the incremental ~0.2 s.
// The copy reads the caller's `shown` on the worker's thread: the caller must leave it unchanged until the
// next take() (reading it is fine), which a Document does (only take() replaces its result).
//
// A result whose maps stayed on the device (attn::AttentionConfig::mapsOnDevice: a CUDA result whose HeadResults hold
// no scores, weights or mask) is handed over at once; then the worker brings its maps back (attn::fetchDeviceMaps,
// one map at a time) into storage of its own, and takeMaps() moves them into the shown result. A job submitted
// meanwhile comes first: the fetch stops before its next map (its compute replaces the device's result anyway), so
// the fetch delays the next compute by one map's copy at most. The fetch's storage is taken from the buffer the
// caller gave back (the result shown before, whose maps the next compute on the device drops anyway), so that
// bringing 4 GB back at n = 8192 writes into pages that are mapped already. A CPU result never calls into CUDA.
#pragma once

#include <attnscope/attention.h>
#include <attnscope/background_release.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace app {

// What the worker runs for each job: compute `in` (which it may change, e.g. transpose) with `cfg` into `out`.
// The default is attn::compute.
using ComputeFn = std::function<attn::Status(attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out)>;
// What the worker runs to bring a mapsOnDevice result's maps back: attn::fetchDeviceMaps by default (tests: a gated
// one). `carryOn` says false once newer work waits.
using FetchFn = std::function<attn::Status(attn::AttentionResult& result, const std::function<bool()>& carryOn)>;

class ComputeWorker {
public:
    explicit ComputeWorker(ComputeFn fn = {}, FetchFn fetch = {});
    ~ComputeWorker();  // waits for the running compute to end, drops a waiting job
    ComputeWorker(const ComputeWorker&) = delete;
    ComputeWorker& operator=(const ComputeWorker&) = delete;

    // Queues a compute of `in` with `cfg`, tagged `revision` (the document revision it shows). Replaces a job
    // that has not started yet.
    void submit(attn::AttentionInput in, attn::AttentionConfig cfg, std::uint64_t revision);

    struct Finished {
        attn::Status status;      // ok: the result was swapped into `shown`
        std::uint64_t revision = 0;
        double ms = 0;            // wall time of the compute
    };
    // When a compute has finished since the last call: on success swaps its result with `shown` (the worker
    // keeps `shown`'s old buffer for its next job) and returns what finished; on error leaves `shown` as it
    // is. Never waits.
    std::optional<Finished> take(attn::AttentionResult& shown);

    struct MapsFinished {
        attn::Status status;          // ok: the maps came back (Cancelled never comes here: newer work follows)
        std::uint64_t generation = 0; // the device generation of the result they are the maps of
        bool moved = false;           // they were moved into `shown` (it was still that result, maps on the device)
        double ms = 0;                // wall time of the fetch
    };
    // When a fetch of maps has ended since the last call: on success, when `shown` is still the result they belong
    // to (same device generation, mapsOnDevice, as many heads), swaps them into its HeadResults (no copy) and clears
    // shown.mapsOnDevice. Never waits.
    std::optional<MapsFinished> takeMaps(attn::AttentionResult& shown);
    // Asks for the maps of `shown` (a mapsOnDevice result of the device) to be fetched: take() does so for each such
    // result it hands over; the caller may ask again (a failed compute that did not replace the device's result).
    void fetchMapsOf(const attn::AttentionResult& shown);
    // A fetch of maps runs or waits to start.
    bool fetchingMaps() const;
    // Fetches stopped because newer work came (tests).
    long fetchesAbandoned() const;

    // A compute is running or waiting to start.
    bool busy() const;
    // Milliseconds the running compute has taken so far (0 when none runs).
    double runningMs() const;
    // Blocks until no job or fetch runs or waits (a finished one may still wait for take() or takeMaps()).
    void waitUntilDone();
    // Jobs started since construction (tests: coalescing).
    long jobsStarted() const;
    // Tests: every matrix of the worker's buffer has the shape of the same matrix in `r`. Call after
    // waitUntilDone(), with no finished result waiting.
    bool bufferShapedLike(const attn::AttentionResult& r) const;

    // The shapes of every matrix of a result, in a fixed order (its Q, K, V, concat, output, then per head
    // Q, K, V, scores, masked, weights, output).
    using Shapes = std::vector<std::pair<Eigen::Index, Eigen::Index>>;
    static Shapes shapesOf(const attn::AttentionResult& r);

private:
    struct Job {
        attn::AttentionInput in;
        attn::AttentionConfig cfg;
        std::uint64_t revision = 0;
    };
    struct FetchJob {
        std::uint64_t generation = 0;
        std::size_t heads = 0;
        attn::Layout layout = attn::Layout::Row;
    };
    // The fetch a shown result needs: its maps' device generation, heads and layout (none for a result whose maps
    // are on the host).
    static std::optional<FetchJob> fetchJobOf(const attn::AttentionResult& shown);
    void run();
    void fetch(std::unique_lock<std::mutex>& lock);
    // The buffer's host maps (the result shown before the last) become the next fetch's storage: moved into those of
    // m_maps' first `heads` heads that hold none (m_maps grown to them); with `rest`, the buffer's other maps are
    // moved there. Only while m_maps is the worker's (no fetched maps wait for takeMaps). Before a fetch (the
    // buffer's next compute makes its maps again anyway), and before a compute that keeps its maps on the device,
    // which would free them inside the compute.
    void parkBufferMaps(std::size_t heads, std::vector<attn::HeadResult>* rest);
    bool fetchWaits() const { return m_fetch && !m_finished && !m_mapsFinished; }

    ComputeFn m_fn;
    FetchFn m_fetchFn;
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::optional<Job> m_pending;
    bool m_running = false;
    bool m_stop = false;
    std::optional<Finished> m_finished;  // set while m_buffer holds a finished, untaken result
    std::optional<Shapes> m_reshape;     // shapes to give m_buffer before the next job (set by take())
    const attn::AttentionResult* m_copyFrom = nullptr;  // the result taken, copied into m_buffer with m_reshape
    bool m_reshaping = false;
    attn::AttentionResult m_buffer;      // the worker's result buffer (only the worker touches it while running)
    std::optional<FetchJob> m_fetch;     // maps to fetch (set by take() / fetchMapsOf(), dropped by a newer job)
    bool m_fetching = false;
    std::optional<MapsFinished> m_mapsFinished;  // set while m_maps holds fetched maps, untaken
    attn::AttentionResult m_maps;        // the fetch's target: only HeadResults' maps (the worker's while fetching)
    long m_fetchesAbandoned = 0;
    // Frees the maps parkBufferMaps returns off the worker's compute: a result's maps at n = 8192 are 4 GB, whose
    // pages take a quarter of a second to hand back.
    attn::BackgroundRelease m_release;
    std::chrono::steady_clock::time_point m_started;
    long m_jobsStarted = 0;
    std::thread m_thread;  // last: starts after every other member is ready
};

} // namespace app
