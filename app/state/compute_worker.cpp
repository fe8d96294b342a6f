#include "state/compute_worker.h"

#include <attnscope/device_maps.h>

#include <utility>

namespace app {
namespace {

// Resizes every matrix of r to the shapes `s` (as shapesOf lists them) and writes zeros into it, so that its
// pages are mapped now rather than by the next compute.
void reshapeAndTouch(attn::AttentionResult& r, const ComputeWorker::Shapes& s)
{
    std::size_t k = 0;
    auto next = [&](auto& m) {
        m.resize(s[k].first, s[k].second);
        m.setZero();
        ++k;
    };
    for (attn::Matrix* m : {&r.Q, &r.K, &r.V, &r.concat, &r.output}) next(*m);
    r.cache = attn::IncrementalCache();  // its snapshot of the inputs no longer describes the zeroed buffer
    r.heads.resize((s.size() - 5) / 7);
    for (attn::HeadResult& h : r.heads) {
        next(h.Q), next(h.K), next(h.V), next(h.scores), next(h.masked), next(h.weights), next(h.output);
    }
}

} // namespace

ComputeWorker::Shapes ComputeWorker::shapesOf(const attn::AttentionResult& r)
{
    Shapes s;
    auto add = [&](const auto& m) { s.emplace_back(m.rows(), m.cols()); };
    for (const attn::Matrix* m : {&r.Q, &r.K, &r.V, &r.concat, &r.output}) add(*m);
    for (const attn::HeadResult& h : r.heads) {
        add(h.Q), add(h.K), add(h.V), add(h.scores), add(h.masked), add(h.weights), add(h.output);
    }
    return s;
}

ComputeWorker::ComputeWorker(ComputeFn fn, FetchFn fetch)
    : m_fn(fn ? std::move(fn)
              : ComputeFn([](attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out) {
                    return attn::compute(in, cfg, out);
                })),
      m_fetchFn(fetch ? std::move(fetch)
                      : FetchFn([](attn::AttentionResult& r, const std::function<bool()>& carryOn) {
                            return attn::fetchDeviceMaps(r, carryOn);
                        })),
      m_thread([this] { run(); })
{
}

ComputeWorker::~ComputeWorker()
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
        m_pending.reset();
        m_reshape.reset();
        m_copyFrom = nullptr;
        m_fetch.reset();
    }
    m_cv.notify_all();
    m_thread.join();
}

void ComputeWorker::submit(attn::AttentionInput in, attn::AttentionConfig cfg, std::uint64_t revision)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending = Job{std::move(in), std::move(cfg), revision};
    }
    m_cv.notify_all();
}

std::optional<ComputeWorker::Finished> ComputeWorker::take(attn::AttentionResult& shown)
{
    std::optional<Finished> f;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_finished) return std::nullopt;
        f = std::move(m_finished);
        m_finished.reset();
        // The worker waits while m_finished is set, so it does not touch m_buffer now.
        if (f->status.ok()) {
            std::swap(shown, m_buffer);
            // A CPU result only: a device result's matrices are the backend's business.
            Shapes want = shapesOf(shown);
            if (shown.backend == attn::Backend::Cpu && want != shapesOf(m_buffer)) {
                m_reshape = std::move(want);
                m_copyFrom = &shown;
            }
            m_mapsFinished.reset();  // maps of the result shown before: no longer wanted
            m_fetch = fetchJobOf(shown);
        }
    }
    m_cv.notify_all();  // the worker may start the next job
    return f;
}

std::optional<ComputeWorker::MapsFinished> ComputeWorker::takeMaps(attn::AttentionResult& shown)
{
    std::optional<MapsFinished> f;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_mapsFinished) return std::nullopt;
        f = std::move(m_mapsFinished);
        m_mapsFinished.reset();
        // The worker fetches again only after this (fetchWaits), so m_maps is not being written now.
        if (f->status.ok() && shown.mapsOnDevice && shown.deviceGeneration == f->generation &&
            shown.heads.size() == m_maps.heads.size()) {
            for (std::size_t h = 0; h < shown.heads.size(); ++h) {
                std::swap(shown.heads[h].scores, m_maps.heads[h].scores);
                std::swap(shown.heads[h].weights, m_maps.heads[h].weights);
                std::swap(shown.heads[h].masked, m_maps.heads[h].masked);
            }
            shown.mapsOnDevice = false;
            f->moved = true;
        }
    }
    m_cv.notify_all();
    return f;
}

std::optional<ComputeWorker::FetchJob> ComputeWorker::fetchJobOf(const attn::AttentionResult& shown)
{
    // Only a device result's: a CPU result's maps are on the host, and it never calls into CUDA.
    if (!shown.mapsOnDevice || shown.backend != attn::Backend::Cuda || shown.deviceGeneration == 0) return std::nullopt;
    return FetchJob{shown.deviceGeneration, shown.heads.size(), shown.layout};
}

void ComputeWorker::fetchMapsOf(const attn::AttentionResult& shown)
{
    std::optional<FetchJob> job = fetchJobOf(shown);
    if (!job) return;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_fetch = job;
    }
    m_cv.notify_all();
}

bool ComputeWorker::fetchingMaps() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_fetching || fetchWaits();
}

long ComputeWorker::fetchesAbandoned() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_fetchesAbandoned;
}

bool ComputeWorker::busy() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_running || m_pending.has_value();
}

double ComputeWorker::runningMs() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_running) return 0;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count();
}

void ComputeWorker::waitUntilDone()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    // A waiting job cannot start while a finished one is untaken: then it does not count as waiting here.
    m_cv.wait(lock, [this] {
        return !m_running && !m_reshaping && !m_reshape && (!m_pending || m_finished) && !m_fetching && !fetchWaits();
    });
}

long ComputeWorker::jobsStarted() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_jobsStarted;
}

bool ComputeWorker::bufferShapedLike(const attn::AttentionResult& r) const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return shapesOf(m_buffer) == shapesOf(r);
}

void ComputeWorker::run()
{
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [this] { return m_stop || m_reshape || (m_pending && !m_finished) || fetchWaits(); });
        if (m_stop) return;
        if (m_reshape) {  // set by take(), so no finished result waits: m_buffer is the worker's
            const Shapes shapes = std::move(*m_reshape);
            const attn::AttentionResult* from = m_copyFrom;
            m_reshape.reset();
            m_copyFrom = nullptr;
            m_reshaping = true;
            lock.unlock();
            // The result taken, unchanged until the next take(), which cannot come before this job's end.
            if (from && shapesOf(*from) == shapes) attn::copyResult(*from, m_buffer);
            else reshapeAndTouch(m_buffer, shapes);
            lock.lock();
            m_reshaping = false;
            m_cv.notify_all();
            continue;
        }
        if (!(m_pending && !m_finished)) {  // no newer work: the maps of the result shown
            fetch(lock);
            continue;
        }
        if (m_fetch) ++m_fetchesAbandoned;  // not started: this compute replaces the device's result
        m_fetch.reset();
        Job job = std::move(*m_pending);
        m_pending.reset();
        m_running = true;
        m_started = std::chrono::steady_clock::now();
        ++m_jobsStarted;
        std::vector<attn::HeadResult> dropped;
        if (job.cfg.mapsOnDevice) parkBufferMaps(m_mapsFinished ? 0 : m_buffer.heads.size(), &dropped);
        lock.unlock();
        if (!dropped.empty()) m_release.release(std::move(dropped));

        attn::Status st = m_fn(job.in, job.cfg, m_buffer);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count();

        lock.lock();
        m_running = false;
        m_finished = Finished{std::move(st), job.revision, ms};
        m_cv.notify_all();
    }
}

void ComputeWorker::parkBufferMaps(std::size_t heads, std::vector<attn::HeadResult>* rest)
{
    if (m_maps.heads.size() < heads) m_maps.heads.resize(heads);
    for (std::size_t h = 0; h < m_buffer.heads.size(); ++h) {
        attn::HeadResult& from = m_buffer.heads[h];
        if (from.scores.size() == 0 && from.weights.size() == 0 && from.masked.size() == 0) continue;
        const bool room = h < heads && m_maps.heads[h].scores.size() == 0 && m_maps.heads[h].weights.size() == 0;
        if (!room && !rest) continue;
        attn::HeadResult& to = room ? m_maps.heads[h] : rest->emplace_back();
        std::swap(to.scores, from.scores);
        std::swap(to.weights, from.weights);
        std::swap(to.masked, from.masked);
        m_buffer.cache = attn::IncrementalCache();  // its maps are gone: nothing to update incrementally
    }
}

void ComputeWorker::fetch(std::unique_lock<std::mutex>& lock)
{
    const FetchJob job = *m_fetch;
    m_fetch.reset();
    m_fetching = true;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    // Storage: the maps the buffer given back still holds (the result shown before this one).
    m_maps.heads.resize(job.heads);
    parkBufferMaps(job.heads, nullptr);
    m_maps.layout = job.layout;
    m_maps.backend = attn::Backend::Cuda;
    m_maps.deviceGeneration = job.generation;
    m_maps.mapsOnDevice = true;
    const attn::Status st = m_fetchFn(m_maps, [this] {
        std::lock_guard<std::mutex> l(m_mutex);
        return !m_stop && !m_pending;
    });
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    m_fetching = false;
    if (st.code == attn::StatusCode::Cancelled) ++m_fetchesAbandoned;  // the job waiting replaces the result
    else m_mapsFinished = MapsFinished{st, job.generation, false, ms};
    m_cv.notify_all();
}

} // namespace app
