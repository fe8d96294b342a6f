// The window's model mode: see model_state.h.
#include "state/model_state.h"

#include "messages.h"
#include "state/app_state.h"
#include "state/paths.h"
#include "state/text_file.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>
#include <thread>
#include <variant>

namespace app {

namespace {
std::filesystem::path modelsFolder() { return modelsDirectory(); }
} // namespace

std::string defaultDecoderPath()
{
    const std::filesystem::path p = modelsFolder() / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf";
    std::error_code ec;
    return std::filesystem::exists(p, ec) ? p.string() : defaultModelDirectory();
}

std::string defaultModelDirectory()
{
    if (const char* env = std::getenv("ATTNSCOPE_MODEL_DIR"); env && *env) return env;
    return (modelsFolder() / "all-MiniLM-L6-v2").string();
}

// [SECTION] The worker ----------------------------------------------------------------------------------

namespace {

std::optional<std::string> pairText(const std::string& b)
{
    return b.empty() ? std::nullopt : std::optional<std::string>(b);
}

// The lowest layer whose result differs between a run of `a` and one of `b` with the same texts (L = none):
// changed weights (pointer compare: snapshots are immutable), the ablation set, the pin.
int firstChangedLayer(const ModelRequest& a, const ModelRequest& b, bool withPin)
{
    const int L = static_cast<int>(b.weights.size());
    int from = L;
    for (int l = 0; l < L; ++l)
        if (static_cast<std::size_t>(l) >= a.weights.size() || a.weights[static_cast<std::size_t>(l)] != b.weights[static_cast<std::size_t>(l)]) {
            from = l;
            break;
        }
    auto has = [](const ModelRequest& r, std::pair<int, int> p) {
        return std::find(r.ablated.begin(), r.ablated.end(), p) != r.ablated.end();
    };
    for (const auto& p : a.ablated) if (!has(b, p)) from = std::min(from, p.first);
    for (const auto& p : b.ablated) if (!has(a, p)) from = std::min(from, p.first);
    if (withPin && a.pin != b.pin) {
        if (a.pin && a.pin->layer >= 0) from = std::min(from, a.pin->layer);
        if (b.pin && b.pin->layer >= 0) from = std::min(from, b.pin->layer);
    }
    if (a.qkvPin != b.qkvPin) {
        if (a.qkvPin && a.qkvPin->layer >= 0) from = std::min(from, a.qkvPin->layer);
        if (b.qkvPin && b.qkvPin->layer >= 0) from = std::min(from, b.qkvPin->layer);
    }
    return from;
}

} // namespace

// One complete run, what the views show: the pair run, A and B alone, and the request they come from.
struct ModelBuffer {
    std::optional<attn::ModelRun> run, runA, runB;
    std::optional<attn::DecoderRun> drun;  // a decoder's run (instead of the three above)
    InterpResults interp;                  // what explains the decoder's run (when the request asked)
    ModelRequest request;
    bool valid = false;  // false: the buffers hold no run of `request` (none yet, or a failed one)
};

// Runs model requests on its own thread; the pattern of ComputeWorker (compute_worker.h): one job at a time,
// a request sent while another waits replaces it, the result waits in the worker's buffer until take()
// swaps it with the shown one, and the next job reuses the buffer the views let go of (recomputing it from
// the lowest layer where its request and the new one differ).
class ModelWorker {
public:
    explicit ModelWorker(attn::Model model) : m_model(std::move(model)), m_thread([this] { loop(); }) {}
    explicit ModelWorker(attn::DecoderModel model) : m_decoder(std::move(model)), m_thread([this] { loop(); }) {}
    ~ModelWorker()
    {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_stop = true;
            m_pending.reset();
        }
        m_cv.notify_all();
        m_thread.join();
    }
    ModelWorker(const ModelWorker&) = delete;
    ModelWorker& operator=(const ModelWorker&) = delete;

    const attn::Model& model() const { return m_model; }  // name, config, tokenizer only (see ModelState::model)
    // A decoder's name, config, tokenizer, final norm and unembedding (see ModelState::decoder).
    const attn::DecoderModel& decoder() const { return *m_decoder; }

    void submit(ModelRequest r)
    {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_pending = std::move(r);
        }
        m_newer = true;  // a long forward under way stops at its next layer: the latest request wins
        m_cv.notify_all();
    }

    // Stops the forward under way at its next layer (the shown run stays); a no-op when none runs.
    void cancel() { m_cancel = true; }

    // The forward under way: layers done of those to do (0 of 0 before its first layer).
    std::pair<int, int> progress() const { return {m_layersDone.load(), m_layersTotal.load()}; }
    // Its tokens (0 until the text is tokenised).
    int runTokens() const { return m_runTokens.load(); }

    struct Finished {
        attn::Status status;
        double ms = 0;
        std::string why;
        std::uint64_t id = 0;
    };
    // Swaps a finished successful run into `shown` (whose old content the worker reuses). Never waits.
    std::optional<Finished> take(ModelBuffer& shown)
    {
        std::optional<Finished> f;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (!m_finished) return std::nullopt;
            f = std::move(m_finished);
            m_finished.reset();
            if (f->status.ok()) std::swap(shown, m_buffer);  // the worker waits while m_finished is set
        }
        m_cv.notify_all();
        return f;
    }

    bool busy() const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_running || m_pending.has_value();
    }
    // Nothing running, waiting, or finished and not yet taken.
    bool idle() const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return !m_running && !m_pending && !m_finished;
    }
    double runningMs() const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_running ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count() : 0;
    }
    // Blocks until no job runs, and none waits unless a finished one waits to be taken.
    void waitUntilDone()
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [this] { return !m_running && (!m_pending || m_finished); });
    }
    long jobsStarted() const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_jobsStarted;
    }
    bool scanning() const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_scanJob.has_value();
    }
    // The scans' results when they changed since `generation`, else nothing. Never waits (beyond the copy).
    std::optional<ScanResults> scanIfNewer(std::uint64_t generation) const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_scan.generation == generation) return std::nullopt;
        return m_scan;
    }
    // Blocks until no job runs or waits and no scan is left (tests).
    void waitForScans()
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [this] { return !m_running && !m_pending && !m_scanJob && !m_qkJob; });
    }
    // "Why here?": its results when they changed since `generation`, else nothing.
    std::optional<QkResults> qkIfNewer(std::uint64_t generation) const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_qk.generation == generation) return std::nullopt;
        return m_qk;
    }
    // Stops the decomposition under way after its current step.
    void cancelQk() { m_qkCancel = true; }
    // "Why here?" of the run on screen without a model job (the frame loop's thread): `request` is the shown run's
    // request with the cell, `shown` that run (the UI's; read here, before this returns). The worker's own buffer
    // holds an older run, which a model request would first bring up to date: a whole forward after a new text.
    void submitQk(const ModelRequest& request, const attn::DecoderRun& shown)
    {
        queueQkFrom(request, shown);
        m_cv.notify_all();
    }
    bool qkBusy() const
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_qkJob.has_value();
    }

private:
    void loop()
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        for (;;) {
            m_cv.wait(lock, [this] { return m_stop || (m_pending && !m_finished) || ((m_scanJob || m_qkJob) && !m_pending); });
            if (m_stop) return;
            if (!m_pending) {
                // A "Why here?" decomposition (first: it is what the user just asked for, and short) or a scan,
                // between jobs: any request sent meanwhile stops it (it is about the run before).
                const bool qk = m_qkJob.has_value();
                const std::uint64_t serial = qk ? m_qkJob->serial : 0;
                lock.unlock();
                if (qk) runQk();
                else runScans();
                lock.lock();
                if (!qk) m_scanJob.reset();
                else if (m_qkJob && m_qkJob->serial == serial) m_qkJob.reset();  // (not a newer one submitQk queued)
                m_cv.notify_all();
                continue;
            }
            ModelRequest req = std::move(*m_pending);
            m_pending.reset();
            m_newer = false;
            m_cancel = false;
            m_layersDone = 0;
            m_layersTotal = 0;
            m_runTokens = 0;
            m_running = true;
            m_started = std::chrono::steady_clock::now();
            ++m_jobsStarted;
            lock.unlock();

            attn::Status st = runJob(req);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count();

            lock.lock();
            m_running = false;
            m_finished = Finished{std::move(st), ms, req.why, req.id};
            m_cv.notify_all();
        }
    }

    // Brings m_buffer from the request it holds to `req`. Only this thread touches m_model and m_buffer here.
    attn::Status runJob(const ModelRequest& req)
    {
        if (m_decoder) {
            attn::Status s = runDecoderJob(req);
            if (m_buffer.drun) m_buffer.drun->onLayer = nullptr;  // the run may be shown after this worker is gone
            return s;
        }
        // The model's weights follow the request (layers whose snapshot changed since the last job).
        const std::size_t L = m_model.layers.size();
        if (req.weights.size() != L) return attn::invalidArgument("model request: expected " + std::to_string(L) + " layers' weights");
        m_applied.resize(L);
        for (std::size_t l = 0; l < L; ++l) {
            if (m_applied[l] == req.weights[l]) continue;
            const attn::AttentionInput& w = *req.weights[l];
            attn::AttentionInput& dst = m_model.layers[l].attention;
            dst.Wq = w.Wq, dst.Wk = w.Wk, dst.Wv = w.Wv, dst.Wo = w.Wo;
            dst.bq = w.bq, dst.bk = w.bk, dst.bv = w.bv, dst.bo = w.bo;
            m_applied[l] = req.weights[l];
        }
        ModelBuffer& b = m_buffer;
        const bool whole = !b.valid || !b.run || b.request.textA != req.textA || b.request.textB != req.textB;
        const int from = whole ? 0 : firstChangedLayer(b.request, req, true);
        const int fromAlone = whole ? 0 : firstChangedLayer(b.request, req, false);
        b.valid = false;  // until the whole job succeeded
        attn::Status st = runPair(req, whole, from);
        if (st.ok()) st = runAlone(req, whole, fromAlone);
        if (!st.ok()) return st;
        b.request = req;
        b.valid = true;
        return st;
    }

    attn::Status runPair(const ModelRequest& req, bool whole, int from)
    {
        ModelBuffer& b = m_buffer;
        const int L = static_cast<int>(m_model.layers.size());
        const attn::PinnedInput none;
        const attn::PinnedInput& pin = req.pin ? *req.pin : none;
        if (whole) {
            if (!b.run) b.run.emplace();
            attn::ModelOptions o;
            o.ablate = req.ablated;
            ATTNSCOPE_RETURN_IF_ERROR(attn::runModel(m_model, req.textA, pairText(req.textB), o, *b.run));
            return pin.layer >= 0 ? attn::recomputeFrom(m_model, pin.layer, *b.run, pin) : attn::Status::success();
        }
        if (from >= L) return attn::Status::success();  // nothing changed
        b.run->ablated = req.ablated;
        return attn::recomputeFrom(m_model, from, *b.run, pin);
    }

    // A and B run alone (as sentence-transformers compares two sentences), under the same weights and
    // ablations; a pin is an edit of the pair run's hidden states and does not apply to them.
    attn::Status runAlone(const ModelRequest& req, bool whole, int from)
    {
        ModelBuffer& b = m_buffer;
        if (req.textB.empty()) {
            b.runA.reset();
            b.runB.reset();
            return attn::Status::success();
        }
        const int L = static_cast<int>(m_model.layers.size());
        for (auto [side, text] : {std::pair{&b.runA, &req.textA}, {&b.runB, &req.textB}}) {
            if (!whole && *side && from >= L) continue;
            if (!whole && *side) {
                (*side)->ablated = req.ablated;
                ATTNSCOPE_RETURN_IF_ERROR(attn::recomputeFrom(m_model, from, **side));
                continue;
            }
            if (!*side) side->emplace();
            attn::ModelOptions o;
            o.ablate = req.ablated;
            ATTNSCOPE_RETURN_IF_ERROR(attn::runModel(m_model, *text, std::nullopt, o, **side));
        }
        return attn::Status::success();
    }

    // A decoder: the text's tokens are run reusing the buffer's positions before the first changed token
    // (rerunDecoder: typing at the end and Generate compute only the new tokens); the same text with other
    // ablations, an edited W^O or pinned Q/K/V recomputes from the lowest layer that changed.
    attn::Status runDecoderJob(const ModelRequest& req)
    {
        attn::DecoderModel& dm = *m_decoder;
        const std::size_t L = dm.layers.size();
        if (req.weights.size() != L) return attn::invalidArgument("model request: expected " + std::to_string(L) + " layers' weights");
        m_applied.resize(L);
        int edited = static_cast<int>(L);
        for (std::size_t l = 0; l < L; ++l) {
            if (m_applied[l] == req.weights[l] || !req.weights[l]) continue;
            dm.layers[l].Wo = attn::WeightMatrix(req.weights[l]->Wo);
            dm.layers[l].bo = req.weights[l]->bo;
            m_applied[l] = req.weights[l];
            edited = std::min(edited, static_cast<int>(l));
        }
        ModelBuffer& b = m_buffer;
        const bool hadRun = b.valid && b.drun;
        const bool sameText = hadRun && b.request.textA == req.textA && b.request.chat == req.chat &&
                              b.request.generated == req.generated;
        int from = hadRun ? firstChangedLayer(b.request, req, false) : 0;
        from = std::min(from, edited);
        b.valid = false;  // until the job succeeded
        if (!b.drun) b.drun.emplace();
        attn::DecoderRun& r = *b.drun;
        r.onLayer = [this](int done, int total) {
            m_layersDone = done;
            m_layersTotal = total;
            return !m_cancel && !m_newer;
        };
        r.pinned = req.qkvPin ? *req.qkvPin : attn::DecoderRun::PinnedQKV{};
        if (sameText) {
            m_runTokens = static_cast<int>(r.encoding.ids.size());
            if (from < static_cast<int>(L)) {
                r.ablated = req.ablated;
                ATTNSCOPE_RETURN_IF_ERROR(attn::recomputeDecoderFrom(dm, from, r, req.backend));
            }
        } else {
            auto enc = attn::encodeForDecoder(dm, req.textA, req.chat);
            if (!enc) return enc.status();
            enc->ids.insert(enc->ids.end(), req.generated.begin(), req.generated.end());
            if (enc->ids.empty()) return attn::invalidArgument("the text has no tokens: type something");
            m_runTokens = std::min(static_cast<int>(enc->ids.size()), dm.config.maxPositions);  // cut at the context
            attn::DecoderOptions o;
            o.ablate = req.ablated;
            o.backend = req.backend;
            // Long texts keep no n×n maps (issue 18): long as run, after the cut at the context.
            o.lazy = std::min(static_cast<int>(enc->ids.size()), dm.config.maxPositions) > kLazyTokens;
            // The positions kept from the buffer's run are valid only under the same weights and ablations.
            const bool sameModel = hadRun && from >= static_cast<int>(L) && !req.qkvPin;
            ATTNSCOPE_RETURN_IF_ERROR(attn::rerunDecoder(dm, enc->ids, o, sameModel, r));
            if (req.qkvPin) ATTNSCOPE_RETURN_IF_ERROR(attn::recomputeDecoderFrom(dm, req.qkvPin->layer, r, req.backend));
        }
        b.request = req;
        b.valid = true;
        explain(req);
        queueQk(req);
        return attn::Status::success();
    }

    // [SECTION] Why the model says it (issue 20) --------------------------------------------------------

    // The cheap views of the run just made (no forward), into the buffer; the lens (L·n rows through the
    // unembedding, hundreds of ms) only while it is shown, not after every run of every other view.
    void explain(const ModelRequest& req)
    {
        ModelBuffer& b = m_buffer;
        b.interp = {};
        if (req.interp.cheap) {
            const attn::DecoderModel& dm = *m_decoder;
            const attn::DecoderRun& r = *b.drun;
            auto target = attn::interpTarget(dm, r, req.interp.target);
            auto dla = target ? attn::directLogitAttribution(dm, r, target->id) : attn::Expected<attn::DirectLogitAttribution>(target.status());
            auto lens = req.interp.lens ? attn::logitLens(dm, r, 5, req.interp.lensPositions) : attn::LogitLens{};
            if (!target) b.interp.error = target.status().message;
            else if (!dla) b.interp.error = dla.status().message;
            else if (!lens) b.interp.error = lens.status().message;
            else {
                b.interp.target = std::move(*target);
                b.interp.dla = std::move(*dla);
                b.interp.lens = std::move(*lens);
                b.interp.types = attn::headTypes(r);
                b.interp.valid = true;
            }
        }
        queueScans(req);
    }

    // What a scan's map depends on besides the run: the run's text, weights, ablations and pin, and the scan's
    // own settings. A finished scan of an equal key is kept (switching views does not redo it).
    struct ScanKey {
        std::string text;
        bool chat = false;
        std::vector<int> generated;
        std::vector<std::pair<int, int>> ablated;
        std::vector<std::shared_ptr<const attn::AttentionInput>> weights;
        std::shared_ptr<const attn::DecoderRun::PinnedQKV> pin;
        int target = -1;
        std::string clean;
        int a = -1, b = -1;
        bool operator==(const ScanKey&) const = default;
    };
    static ScanKey keyOf(const ModelRequest& r, bool patching)
    {
        ScanKey k{r.textA, r.chat, r.generated, r.ablated, r.weights, r.qkvPin, -1, {}, -1, -1};
        if (patching) {
            k.clean = r.interp.cleanText;
            k.a = r.interp.targetA;
            k.b = r.interp.targetB;
        } else {
            k.target = r.interp.target;
        }
        return k;
    }

    struct ScanJob {
        std::uint64_t request = 0;
        bool importance = false, patching = false;
        int target = -1;
        attn::DecoderRun run;   // the run explained, without its maps (the scans need the streams and contexts)
        ModelRequest req;
    };

    // A run's copy for a scan: everything but the heads' maps (n×n each, the bulk of a long run).
    static attn::DecoderRun scanCopy(const attn::DecoderRun& r)
    {
        attn::DecoderRun c;
        c.encoding = r.encoding;
        c.ablated = r.ablated;
        c.hidden = r.hidden;
        c.finalHidden = r.finalHidden;
        c.lastLogits = r.lastLogits;
        c.pinned = r.pinned;
        c.attention.resize(r.attention.size());
        for (std::size_t l = 0; l < r.attention.size(); ++l) {
            const attn::AttentionResult& a = r.attention[l];
            attn::AttentionResult& d = c.attention[l];
            d.scale = a.scale;
            d.concat = a.concat;
            d.Q = a.Q;
            d.K = a.K;
            d.V = a.V;
            d.heads.resize(a.heads.size());  // the heads' count, not their maps
        }
        return c;
    }

    // Called on this thread at the end of a job (the mutex not held): what the scans must (re)do for `req`.
    void queueScans(const ModelRequest& req)
    {
        const int L = static_cast<int>(m_decoder->layers.size()), H = m_decoder->config.heads;
        const attn::DecoderRun& r = *m_buffer.drun;
        ScanJob job;
        job.request = req.id;
        const bool importanceKept = m_importanceKey && *m_importanceKey == keyOf(req, false);
        const bool patchingKept = m_patchingKey && *m_patchingKey == keyOf(req, true);
        job.importance = req.interp.importance && !importanceKept;
        job.patching = req.interp.patching && !patchingKept && req.interp.targetA >= 0 && req.interp.targetB >= 0 &&
                       !req.interp.cleanText.empty();
        // A long text's run keeps no per-head results, which the scans need: refused here, before a copy of its
        // residual streams (585 MB at 8192 tokens) is made for nothing.
        const bool refused = r.lazy && (job.importance || job.patching);
        if (refused) job.importance = job.patching = false;
        if (job.importance) {
            auto t = attn::interpTarget(*m_decoder, r, req.interp.target);
            job.target = t ? t->id : -1;
        }
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_scan.generation;
        m_scan.request = req.id;
        m_scan.error.clear();
        if (refused)
            m_scan.error = "head importance and patching need a text of at most " + std::to_string(kLazyTokens) +
                           " tokens (a longer one keeps no per-head results)";
        if (job.importance) m_scan.importanceTarget = job.target;
        prepareMap(m_scan.importance, job.importance, importanceKept, m_importanceKey, L, H);
        prepareMap(m_scan.patching, job.patching, patchingKept, m_patchingKey, L, H);
        if (!job.importance && !job.patching) {
            m_scanJob.reset();
            return;
        }
        job.run = scanCopy(r);
        job.req = req;
        m_scanJob = std::move(job);
    }

    // One scan's map as a job starts (the mutex held): all NaN when it is scanned again, empty when it is neither
    // scanned nor kept (a finished map of the same run and settings stays as it is).
    static void prepareMap(ScanMap& map, bool scanned, bool kept, std::optional<ScanKey>& key, int L, int H)
    {
        if (!scanned && kept) return;
        const long scans = map.scans + (scanned ? 1 : 0);
        map = {};
        map.scans = scans;
        if (scanned) {
            map.values = attn::Matrix::Constant(L, H, std::numeric_limits<float>::quiet_NaN());
            map.pending = attn::MaskMatrix::Ones(L, H);
        }
        key.reset();
    }

    // A scan's finished row `layer` of `out` into the shared map (when it is still this request's), with the count
    // of rows and the time so far; false when the scan should stop (a new request, or closing).
    bool publishRow(std::uint64_t request, const attn::Matrix& out, int layer, ScanMap ScanResults::*which,
                    std::chrono::steady_clock::time_point t0)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        ScanMap& map = m_scan.*which;
        if (m_scan.request == request && map.values.rows() == out.rows()) {
            map.values.row(layer) = out.row(layer);
            map.pending.row(layer).setZero();
            ++map.rows;
            map.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            ++m_scan.generation;
        }
        return !m_stop && !m_pending;
    }

    // The whole map once its scan finished (and its key: the map is kept while the key stays).
    void publishMap(const ScanJob& job, const attn::Matrix& out, ScanMap ScanResults::*which,
                    std::chrono::steady_clock::time_point t0, std::optional<ScanKey>& key, bool patching)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_scan.request != job.request) return;
        ScanMap& map = m_scan.*which;
        map.values = out;
        map.pending = attn::MaskMatrix::Zero(out.rows(), out.cols());
        map.done = true;
        map.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        ++m_scan.generation;
        key = keyOf(job.req, patching);
    }

    // Runs the queued scans (this thread; the mutex not held). Each row is published as it is done.
    void runScans()
    {
        ScanJob job;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            job = std::move(*m_scanJob);  // the optional stays set (scanning) until the loop resets it
        }
        attn::DecoderModel& dm = *m_decoder;
        using Clock = std::chrono::steady_clock;
        auto stopWanted = [this] {
            std::lock_guard<std::mutex> lock(m_mutex);
            return m_stop || m_pending.has_value();
        };
        auto fail = [this, &job](const std::string& message) {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_scan.request != job.request) return;
            m_scan.error = message;
            ++m_scan.generation;
        };
        if (job.importance) {
            attn::Matrix out;
            const auto t0 = Clock::now();
            auto progress = [&](int layer) {
                return publishRow(job.request, out, layer, &ScanResults::importance, t0);
            };
            attn::Status st = attn::headImportance(dm, job.run, job.target, out, progress);
            if (!st.ok()) return fail("head importance: " + st.message);
            if (stopWanted()) return;
            publishMap(job, out, &ScanResults::importance, t0, m_importanceKey, false);
        }
        if (job.patching) {
            const auto t0 = Clock::now();
            // The clean prompt's run, under the same weights and ablations (not the pin: an edit of the text's
            // own layer input).
            auto enc = attn::encodeForDecoder(dm, job.req.interp.cleanText, job.req.chat);
            if (!enc) return fail("patching: the clean prompt: " + enc.status().message);
            attn::DecoderOptions o;
            o.ablate = job.run.ablated;
            o.backend = job.run.backend;  // where the run to patch ran (its scan runs there too)
            attn::DecoderRun clean;
            if (attn::Status st = attn::runDecoder(dm, enc->ids, o, clean); !st.ok()) return fail("patching: " + st.message);
            if (stopWanted()) return;
            clean = scanCopy(clean);
            attn::Matrix out;
            attn::PatchingMetric metric;
            auto progress = [&](int layer) {
                return publishRow(job.request, out, layer, &ScanResults::patching, t0);
            };
            attn::Status st = attn::activationPatching(dm, clean, job.run, job.req.interp.targetA, job.req.interp.targetB,
                                                       out, &metric, progress);
            if (!st.ok()) return fail("patching: " + st.message);
            if (stopWanted()) return;
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (m_scan.request == job.request) m_scan.metric = metric;
            }
            publishMap(job, out, &ScanResults::patching, t0, m_patchingKey, true);
        }
    }

    // [SECTION] Why here? (issue 35) ----------------------------------------------------------------------

    // What a decomposition depends on: the run's inputs (as ScanKey, without the scans' settings) and the cell.
    struct QkKey {
        ScanKey run;
        QkRequest cell;
        bool operator==(const QkKey&) const = default;
    };
    static QkKey qkKeyOf(const ModelRequest& r)
    {
        return {ScanKey{r.textA, r.chat, r.generated, r.ablated, r.weights, r.qkvPin, -1, {}, -1, -1}, r.interp.qk};
    }

    struct QkJob {
        std::uint64_t serial = 0;  // m_qkSerial when queued: the results are this job's while it is unchanged
        std::uint64_t request = 0;
        QkRequest cell;
        QkKey key;
        bool cellKept = false;  // the cell's decomposition is the one shown (only the patch changed)
        attn::DecoderRun run;   // what the decomposition reads of the run (qkCopy)
    };

    // A run's copy for one head's decomposition: the residual streams entering layers 0..layer+1, those layers'
    // contexts, the layer's Q and K and the head's weights (the rest empty but sized, as core checks the shapes).
    // A lazy run is only marked lazy: core refuses it with its reason.
    static attn::DecoderRun qkCopy(const attn::DecoderRun& r, int layer, int head)
    {
        attn::DecoderRun c;
        c.lazy = r.lazy;
        c.ablated = r.ablated;
        c.pinned.layer = r.pinned.layer;
        const int L = static_cast<int>(r.attention.size());
        c.hidden.resize(r.hidden.size());
        c.attention.resize(r.attention.size());
        c.weights.resize(r.weights.size());
        if (r.lazy || layer < 0 || layer >= L || static_cast<int>(r.hidden.size()) != L + 1) return c;
        c.hidden[static_cast<std::size_t>(layer) + 1] = r.hidden[static_cast<std::size_t>(layer) + 1];  // core checks its shape
        for (int k = 0; k <= layer; ++k) {
            c.hidden[static_cast<std::size_t>(k)] = r.hidden[static_cast<std::size_t>(k)];
            const attn::AttentionResult& a = r.attention[static_cast<std::size_t>(k)];
            attn::AttentionResult& d = c.attention[static_cast<std::size_t>(k)];
            d.scale = a.scale;
            d.concat = a.concat;
            d.heads.resize(a.heads.size());
        }
        const attn::AttentionResult& a = r.attention[static_cast<std::size_t>(layer)];
        attn::AttentionResult& d = c.attention[static_cast<std::size_t>(layer)];
        d.Q = a.Q;
        d.K = a.K;
        if (static_cast<std::size_t>(layer) < r.weights.size()) {
            const auto& w = r.weights[static_cast<std::size_t>(layer)];
            c.weights[static_cast<std::size_t>(layer)].resize(w.size());
            if (head >= 0 && static_cast<std::size_t>(head) < w.size())
                c.weights[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)] = w[static_cast<std::size_t>(head)];
        }
        return c;
    }

    // Called on this thread at the end of a job (the mutex not held): the decomposition to (re)do for `req`, or
    // none (the panel closed, or the shown one is of the same run and cell).
    void queueQk(const ModelRequest& req) { queueQkFrom(req, *m_buffer.drun); }

    // The same for `run` (the worker's buffer, or the run on screen for submitQk).
    void queueQkFrom(const ModelRequest& req, const attn::DecoderRun& run)
    {
        const QkRequest& q = req.interp.qk;
        const QkKey key = qkKeyOf(req);
        // The copy is made before the mutex is taken (the frame loop polls under it), unless the results are kept.
        bool kept = false;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            kept = q.layer >= 0 && m_qkKey && *m_qkKey == key;
        }
        attn::DecoderRun copy = q.layer >= 0 && !kept ? qkCopy(run, q.layer, q.head) : attn::DecoderRun{};
        std::lock_guard<std::mutex> lock(m_mutex);
        if (q.layer < 0) {
            m_qkJob.reset();
            ++m_qkSerial;  // a decomposition under way stops
            if (m_qk.of.layer >= 0 || m_qk.running) {
                const std::uint64_t g = m_qk.generation + 1;
                m_qk = {};
                m_qk.generation = g;
            }
            m_qkKey.reset();
            return;
        }
        if (kept) {  // the same run and cell: kept (a view or target changed)
            m_qk.request = req.id;
            ++m_qk.generation;
            return;
        }
        QkJob job;
        job.serial = ++m_qkSerial;
        job.request = req.id;
        job.cell = q;
        job.key = key;
        // Only the patch changed: the cell's decomposition stays, the pattern is patched.
        QkKey sameCell = key;
        sameCell.cell.patchComponent = m_qk.of.patchComponent;
        sameCell.cell.row = m_qk.of.row;
        sameCell.cell.patchSide = m_qk.of.patchSide;
        job.cellKept = m_qkKey && *m_qkKey == sameCell && m_qk.cell.has_value();
        job.run = std::move(copy);
        m_qkCancel = false;
        m_qkKey.reset();
        const std::uint64_t g = m_qk.generation + 1;
        QkResults next;
        next.generation = g;
        next.request = req.id;
        next.of = q;
        next.running = true;
        next.steps = 1 + (q.patchComponent.empty() ? 0 : 1) + (q.row ? 1 : 0);
        if (job.cellKept) {
            next.cell = std::move(m_qk.cell);
            next.pairs = std::move(m_qk.pairs);
            next.step = 1;
        }
        m_qk = std::move(next);
        m_qkJob = std::move(job);
    }

    // Runs the queued decomposition (this thread; the mutex not held): the cell, then the patch, each published
    // when done. A newer request stops it between steps (its own job follows); Cancel stops it and says so.
    void runQk()
    {
        QkJob job;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            job = std::move(*m_qkJob);  // the optional stays set (busy) until the loop resets it
        }
        const attn::DecoderModel& dm = *m_decoder;
        const auto t0 = std::chrono::steady_clock::now();
        // Applies `change` to the shared results while they are still this job's; false when the job should stop.
        auto publish = [&](auto change) {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_qkSerial != job.serial) return false;
            change(m_qk);
            m_qk.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            ++m_qk.generation;
            return !m_stop && !m_pending;
        };
        auto cancelled = [&] {
            if (!m_qkCancel) return false;
            publish([](QkResults& r) {
                r.running = false;
                r.cancelled = true;
            });
            return true;
        };
        const QkRequest& q = job.cell;
        if (!job.cellKept) {
            auto cell = attn::qkAttribution(dm, job.run, q.layer, q.head, q.query, q.key);
            if (!cell) {
                publish([&](QkResults& r) {
                    r.running = false;
                    r.error = cell.status().message;
                });
                std::lock_guard<std::mutex> lock(m_mutex);
                if (m_qkSerial == job.serial) m_qkKey = job.key;  // an error of this run and cell is kept too
                return;
            }
            std::vector<attn::QkPair> pairs = attn::strongestQkPairs(*cell, kQkPairs);
            const bool go = publish([&](QkResults& r) {
                r.cell = std::move(*cell);
                r.pairs = std::move(pairs);
                r.step = 1;
            });
            if (!go) return;
        }
        if (!q.patchComponent.empty()) {
            if (cancelled()) return;
            auto patch = attn::patchPattern(dm, job.run, q.layer, q.head, q.patchComponent, q.patchSide);
            const bool go = publish([&](QkResults& r) {
                if (patch) r.patch = std::move(*patch);
                else r.patchError = patch.status().message;
                r.step = 2;
            });
            if (!go) return;
        }
        if (q.row) {
            if (cancelled()) return;
            auto row = attn::qkAttributionRow(dm, job.run, q.layer, q.head, q.query);
            const bool go = publish([&](QkResults& r) {
                if (row) r.row = std::move(*row);
                else r.rowError = row.status().message;
                r.step = r.steps;
            });
            if (!go) return;
        }
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_qkSerial != job.serial) return;
        m_qk.running = false;
        m_qk.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        ++m_qk.generation;
        m_qkKey = job.key;
    }

    attn::Model m_model;                 // this thread's: weights as of the last job, each layer's X
    std::optional<attn::DecoderModel> m_decoder;  // or a decoder (then m_model is empty)
    std::vector<std::shared_ptr<const attn::AttentionInput>> m_applied;  // the weight snapshots in m_model
    ModelBuffer m_buffer;
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::optional<ModelRequest> m_pending;
    std::optional<Finished> m_finished;
    bool m_running = false, m_stop = false;
    std::atomic<bool> m_newer{false}, m_cancel{false};       // stop the forward under way (checked after each layer)
    std::atomic<int> m_layersDone{0}, m_layersTotal{0};      // its progress
    std::atomic<int> m_runTokens{0};                         // its tokens (0 until tokenised)
    std::chrono::steady_clock::time_point m_started;
    long m_jobsStarted = 0;
    std::optional<ScanJob> m_scanJob;      // the scans still to run for the last job (set = scanning)
    ScanResults m_scan;                    // their results so far (read by the frame loop under the mutex)
    std::optional<ScanKey> m_importanceKey, m_patchingKey;  // what the finished maps in m_scan are of
    std::optional<QkJob> m_qkJob;          // the decomposition still to run for the last job (set = busy)
    QkResults m_qk;                        // its results so far (read by the frame loop under the mutex)
    std::optional<QkKey> m_qkKey;          // what the finished results in m_qk are of
    std::atomic<bool> m_qkCancel{false};   // Cancel: stop the decomposition after its current step
    std::uint64_t m_qkSerial = 0;          // the queued job whose results m_qk holds (QkJob::serial)
    std::thread m_thread;  // last: starts once every other member is ready
};

// [SECTION] Opening a model in the background --------------------------------------------------------------

namespace {
// A model of either family, as read from its files.
using LoadedModel = std::variant<attn::Model, attn::DecoderModel>;

attn::Expected<LoadedModel> loadEither(const std::string& path)
{
    if (attn::isDecoderModelPath(path)) {
        auto d = attn::loadDecoder(path);
        if (!d) return d.status();
        return LoadedModel(std::move(*d));
    }
    auto m = attn::loadModel(path);
    if (!m) return m.status();
    return LoadedModel(std::move(*m));
}
} // namespace

// One open request: loadEither(path) on a thread of its own (std::async). Its future is read only once the
// load is done; like every std::async future it waits for the load when destroyed (at most one load's time:
// loadModel cannot be interrupted).
class ModelLoad {
public:
    explicit ModelLoad(std::string dir)
        : m_dir(std::move(dir)), m_started(std::chrono::steady_clock::now()),
          m_result(std::async(std::launch::async, [d = m_dir] { return loadEither(d); }))
    {
    }

    const std::string& dir() const { return m_dir; }
    double elapsedMs() const
    {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_started).count();
    }
    // Also after take(): a retired load is dropped once done, taken or not.
    bool done() const { return !m_result.valid() || m_result.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
    // The load's result once it is done (once), else nothing. Never waits.
    std::optional<attn::Expected<LoadedModel>> take()
    {
        if (!m_result.valid() || !done()) return std::nullopt;
        return m_result.get();
    }

private:
    const std::string m_dir;
    const std::chrono::steady_clock::time_point m_started;
    std::future<attn::Expected<LoadedModel>> m_result;
};

bool ModelState::loading() const { return load != nullptr; }
std::string ModelState::loadingDir() const { return load ? load->dir() : std::string(); }
double ModelState::loadingMs() const { return load ? load->elapsedMs() : 0; }

namespace {

// Moves the request in flight, if any, to the retired ones (its result is discarded) and drops the retired
// ones that have finished (their threads join at once).
void retireLoad(ModelState& m)
{
    if (m.load) m.retiredLoads.push_back(std::move(m.load));
    m.load.reset();
    std::erase_if(m.retiredLoads, [](const std::shared_ptr<ModelLoad>& l) { return l->done(); });
}

} // namespace

// [SECTION] The model mode -------------------------------------------------------------------------------

std::string ModelState::modelName() const { return decoder ? decoder->name : model ? model->name : std::string(); }
int ModelState::layers() const
{
    return decoder ? decoder->config.layers : model ? static_cast<int>(model->layers.size()) : 0;
}
int ModelState::heads() const { return decoder ? decoder->config.heads : model ? model->config.heads : 0; }
int ModelState::kvHeads() const { return decoder ? decoder->config.kvHeads : heads(); }

bool ModelState::computing() const { return worker && worker->busy(); }
bool ModelState::scanning() const { return worker && worker->scanning(); }
double ModelState::computingMs() const { return worker ? worker->runningMs() : 0; }
std::pair<int, int> ModelState::runProgress() const { return worker ? worker->progress() : std::pair<int, int>{0, 0}; }
void ModelState::cancelRun() { if (worker) worker->cancel(); }
int ModelState::runTokens() const { return worker ? worker->runTokens() : 0; }
long ModelState::runsStarted() const { return worker ? worker->jobsStarted() : 0; }

namespace {

void bumpFrom(ModelState& m, int layer)
{
    m.layerGeneration.resize(static_cast<std::size_t>(m.layers()), 0);
    for (std::size_t l = static_cast<std::size_t>(std::max(layer, 0)); l < m.layerGeneration.size(); ++l) ++m.layerGeneration[l];
}

void submit(ModelState& m, const std::string& why)
{
    if (!m.worker) return;
    m.wanted.textA = m.textA;
    m.wanted.textB = m.isDecoder() ? std::string() : m.textB;
    m.wanted.chat = m.isDecoder() && m.chat;
    m.wanted.backend = m.backend;
    m.wanted.generated = m.chat ? m.generated : std::vector<int>();
    const WhyView v = m.isDecoder() ? m.why.view : WhyView::Attention;
    m.wanted.interp.cheap = v != WhyView::Attention;
    m.wanted.interp.lens = v == WhyView::LogitLens;
    m.wanted.interp.importance = v == WhyView::Importance;
    m.wanted.interp.patching = v == WhyView::Patching;
    m.wanted.interp.target = m.why.target;
    m.wanted.interp.qk = m.isDecoder() && m.qk.open ? m.qk.cell : QkRequest{};
    m.wanted.why = why;
    ++m.wanted.id;
    m.worker->submit(m.wanted);
}

// Shows a finished run, if any (the frame loop's side of the worker; never waits).
void takeFinished(ModelState& m)
{
    if (!m.worker) return;
    const bool hadRun = m.hasRun();
    const ModelRequest before = m.shown;  // cheap: texts and shared snapshots
    // A decoder's predictions before this run, for the change of each one's log p: kept when the text stays.
    attn::Vector logitsBefore = m.shownLogits;
    ModelBuffer shown{std::move(m.run), std::move(m.runA), std::move(m.runB), std::move(m.drun), std::move(m.why.results),
                      std::move(m.shown)};
    shown.valid = hadRun;
    const std::optional<ModelWorker::Finished> f = m.worker->take(shown);
    m.run = std::move(shown.run);
    m.runA = std::move(shown.runA);
    m.runB = std::move(shown.runB);
    m.drun = std::move(shown.drun);
    m.why.results = std::move(shown.interp);
    m.shown = std::move(shown.request);
    if (!f) return;
    m.lastRunMs = f->ms;
    if (f->status.code == attn::StatusCode::Cancelled) {
        // Stopped for a newer request (which runs now: nothing to say) or by Cancel (the shown run stays).
        if (!m.worker->busy())
            m.error = m.hasRun() ? "the run was cancelled: the text shown is the last one run"
                                 : "the run was cancelled before it finished: nothing to show yet (Run starts it again)";
        return;
    }
    if (!f->status.ok()) {
        // The last good run stays on screen. A text error is shown until the text is fixed; with no run yet
        // the model window is not drawn, so it goes to the message log too.
        m.error = f->status.message;
        if (!m.run) postError(m.error);
        return;
    }
    m.error.clear();
    if (m.isDecoder()) {
        // A long run's maps, shown by the grid and head view of longView (rebuilt with every run: its thumbnails
        // are of this run); a dense run is drawn from its own results.
        if (m.drun && m.drun->lazy) {
            OpenedBundle ob;
            ob.maps = attn::decoderMaps(*m.decoder, *m.drun);
            ob.tokens = ob.keyTokens = m.drun->encoding.tokens;
            ob.name = m.modelName();
            ob.path = m.dir;
            m.longView.keyPrefix = "long";
            replaceMaps(m.longView, std::move(ob));
        } else {
            closeBundle(m.longView);
        }
    }
    // The thumbnails whose layer changed since the run shown before (not since the worker's older buffer).
    const bool sameText = hadRun && before.textA == m.shown.textA && before.textB == m.shown.textB && before.chat == m.shown.chat;
    bumpFrom(m, sameText ? firstChangedLayer(before, m.shown, true) : 0);
    if (m.isDecoder()) {
        // A request that changed only what explains the run (the view, a target) leaves the predictions' "before".
        const bool sameRun = sameText && firstChangedLayer(before, m.shown, true) >= m.layers() &&
                             before.generated == m.shown.generated;
        if (!sameRun) for (const std::string& w : m.drun->warnings) postWarning(w);
        if (!sameRun) {
            m.hasBefore = sameText && logitsBefore.size() > 0;
            if (m.hasBefore) m.beforeLogits = std::move(logitsBefore);
            m.lastChange = f->why;
        }
        if (!sameText) m.predictPosition = -1;
        m.predictionsFor = {};  // recomputed by updatePredictions
        updatePredictions(m);
        // Generate: the next token once this run is shown.
        if (m.generateLeft > 0) {
            --m.generateLeft;
            const attn::TokenProbability next = m.predictions.empty() ? attn::TokenProbability{} : m.predictions.front();
            int id = next.id;
            if (m.sample) {
                const attn::Vector& logits = m.drun->lastLogits;
                id = attn::sampleToken(logits, m.temperature, m.sampleCount++);
            }
            if (id == m.decoder->tokenizer.eos()) {
                m.generateLeft = 0;
                postMessage(MessageLevel::Info, "Generate stopped at the end-of-text token");
                return;
            }
            // Without the chat template the token joins the text (editable like the rest); with it, it follows
            // the template's assistant prompt as a token id.
            if (m.chat) m.generated.push_back(id);
            else m.textA += m.decoder->tokenizer.tokenText(id);
            submit(m, "generated a token");
        }
        return;
    }
    for (const std::string& w : m.run->warnings) postWarning(w);
    m.embedding = m.run->embedding;
    m.hasCosineBefore = m.hasCosine;
    m.cosineBefore = m.cosine;
    m.hasCosine = m.runA && m.runB;
    if (m.hasCosine) m.cosine = attn::cosineSimilarity(m.runA->embedding, m.runB->embedding);
    m.lastChange = f->why;
}

// The scans' rows finished since the last frame (never waits but for the copy).
void pollScans(ModelState& m)
{
    if (!m.worker || !m.isDecoder()) return;
    if (std::optional<ScanResults> r = m.worker->scanIfNewer(m.why.scan.generation)) m.why.scan = std::move(*r);
}

// "Why here?"'s results changed since the last frame (never waits but for the copy).
void pollQk(ModelState& m)
{
    if (!m.worker || !m.isDecoder()) return;
    if (std::optional<QkResults> r = m.worker->qkIfNewer(m.qk.results.generation)) m.qk.results = std::move(*r);
}

} // namespace

void rerunModel(AppState& state, const std::string& why)
{
    ModelState& m = state.model;
    if (!m.worker) return;
    m.openLayer = -1;  // the chain view's layer belongs to the old text
    m.wanted.pin.reset();  // so does an edited X
    m.wanted.qkvPin.reset();  // and a decoder layer's edited Q, K, V
    m.generated.clear();
    m.generateLeft = 0;  // an edit of the text stops Generate
    submit(m, why);
}

attn::Status openModelText(AppState& state, const std::string& path)
{
    ModelState& m = state.model;
    auto fail = [&m](attn::Status st) {
        m.textOpenError = st.message;
        postError("Open text: " + st.message);
        return st;
    };
    if (!m.isDecoder() || !m.worker)
        return fail(attn::invalidArgument("a text file is a decoder's text: open a decoder model first (File → Open model…)"));
    auto text = readTextFile(path);
    if (!text) return fail(text.status());
    m.textOpenError.clear();
    m.textPath = path;
    m.textA = std::move(*text);
    m.textEditedAt = -1;  // a debounced edit of the old text is void
    m.showTextDialog = false;
    rerunModel(state, "opened " + std::filesystem::path(path).filename().string());
    return attn::Status::success();
}

namespace {

// Makes `model` (read from `dir`) the window's: a new worker, the UI's copy of its weights, no run yet, then
// the first run on the fields' text. The one install path of openModel and pollOpenModel.
void installModel(AppState& state, LoadedModel loaded, const std::string& dir)
{
    ModelState& m = state.model;
    m.worker.reset();  // waits for the old model's run to end
    m.wanted = {};
    closeBundle(m.longView);
    m.model.reset();
    m.decoder.reset();
    m.weightFormats.clear();
    if (auto* model = std::get_if<attn::Model>(&loaded)) {
        for (const attn::EncoderLayer& layer : model->layers) {
            auto w = std::make_shared<attn::AttentionInput>(layer.attention);
            w->X.resize(0, 0);
            m.wanted.weights.push_back(std::move(w));
        }
        auto worker = std::make_shared<ModelWorker>(std::move(*model));
        // Aliases the worker's model: the UI reads its name, config and tokenizer, fixed after loading.
        m.model = std::shared_ptr<const attn::Model>(worker, &worker->model());
        m.worker = std::move(worker);
    } else {
        auto& decoder = std::get<attn::DecoderModel>(loaded);
        m.wanted.weights.assign(decoder.layers.size(), nullptr);  // the model's own W^O until one is edited
        m.weightFormats = attn::weightFormats(decoder);  // before the worker owns (and may edit) the layers
        auto worker = std::make_shared<ModelWorker>(std::move(decoder));
        m.decoder = std::shared_ptr<const attn::DecoderModel>(worker, &worker->decoder());
        m.worker = std::move(worker);
    }
    m.dir = dir;
    m.startupLeft.reset();  // the command line's --model-layer / --why were for the model it opened
    m.drun.reset();
    m.generated.clear();
    m.generateLeft = 0;
    m.predictions.clear();
    m.shownLogits.resize(0);
    m.hasBefore = false;
    m.predictPosition = -1;
    m.run.reset();
    m.runA.reset();
    m.runB.reset();
    m.shown = {};
    m.openLayer = -1;
    m.active = true;
    m.showView = true;
    closeBundle(state.bundle);  // a model opened after a bundle: its views replace the bundle's
    m.hasCosine = m.hasCosineBefore = false;
    m.layerGeneration.assign(static_cast<std::size_t>(m.layers()), 0);
    m.thumbs.clear();
    m.decoderMask.resize(0, 0);  // another model may have another window
    m.qk = {};                   // "Why here?" was about the other model's heads
    if (m.textA.empty()) m.textA = m.isDecoder() ? "The capital of France is" : "The cat sat on the mat.";
    submit(m, "opened " + m.modelName());
}

} // namespace

attn::Status openModel(AppState& state, const std::string& dir)
{
    retireLoad(state.model);  // the latest request wins
    auto model = loadEither(dir);
    if (!model) {
        postError(model.status().message);
        return model.status();
    }
    installModel(state, std::move(*model), dir);
    return {};
}

void requestOpenModel(AppState& state, const std::string& dir)
{
    ModelState& m = state.model;
    retireLoad(m);
    m.openError.clear();
    m.load = std::make_shared<ModelLoad>(dir);
}

void cancelOpenModel(AppState& state) { retireLoad(state.model); }

std::optional<attn::Status> pollOpenModel(AppState& state)
{
    ModelState& m = state.model;
    std::erase_if(m.retiredLoads, [](const std::shared_ptr<ModelLoad>& l) { return l->done(); });
    if (!m.load) return std::nullopt;
    std::optional<attn::Expected<LoadedModel>> r = m.load->take();
    if (!r) return std::nullopt;
    const std::string dir = m.load->dir();
    m.load.reset();  // done: joins at once
    if (!r->ok()) {
        m.openError = r->status().message;
        postError(m.openError);
        return r->status();
    }
    installModel(state, std::move(**r), dir);
    m.showOpenDialog = false;
    return attn::Status::success();
}

void toggleAblation(AppState& state, int layer, int head)
{
    ModelState& m = state.model;
    if (!m.worker) return;
    auto& ab = m.wanted.ablated;
    const auto it = std::find(ab.begin(), ab.end(), std::make_pair(layer, head));
    const bool on = it == ab.end();
    if (on) ab.emplace_back(layer, head);
    else ab.erase(it);
    submit(m, std::string(on ? "ablated" : "restored") + " layer " + std::to_string(layer) + " head " + std::to_string(head));
}

namespace {

void applyStartupViews(AppState& state, const ModelStartup& startup);  // below startModelMode

// A decoder's layer in the chain view: what the attention core computed (Q and K after RoPE, V, the causal
// mask) and W^O, in Direct mode (RoPE sits between W^Q/W^K and the scores, so Q, K and V are what is edited).
void openDecoderLayerInChain(AppState& state, int layer, int head)
{
    ModelState& m = state.model;
    if (!m.decoder || !m.drun || layer < 0 || layer >= m.layers()) return;
    attn::Session s;
    s.name = m.decoder->name + " layer " + std::to_string(layer);
    s.description = "Layer " + std::to_string(layer) + " of " + m.decoder->name +
                    ": Q and K as the scores use them (after RoPE), V, and W^O, with " + std::to_string(m.heads()) +
                    " query heads over " + std::to_string(m.kvHeads()) +
                    " key/value heads. Edits flow back into the model: the layers from this one on and the "
                    "predictions are recomputed.";
    s.queryTokens = s.keyTokens = m.drun->encoding.tokens;
    attn::Status st = attn::decoderLayerInput(*m.decoder, *m.drun, layer, s.input, s.config);
    if (!st.ok()) {
        postError(st.message);
        return;
    }
    // The UI's W^O of the layer: the model's own (read-only for the worker), or the last edit sent.
    if (const auto& w = m.wanted.weights[static_cast<std::size_t>(layer)]) {
        s.input.Wo = w->Wo;
        s.input.bo = w->bo;
    }
    m.chainQ = s.input.Q;
    m.chainK = s.input.K;
    m.chainV = s.input.V;
    m.chainWo = s.input.Wo;
    state.view.head = std::clamp(head, 0, std::max(0, m.heads() - 1));
    s.viewJson = viewToJson(state.view);
    state.doc.resetSession(std::move(s), "");
    m.openLayer = layer;
    m.showView = false;
    m.syncedRevision = state.doc.revision();
}

// Edits of a decoder layer's session: Q, K, V pinned (recompute from the layer), W^O/b^O as the layer's.
void syncDecoderEdits(AppState& state)
{
    ModelState& m = state.model;
    const attn::Session& s = state.doc.session();
    const attn::AttentionInput& in = s.input;
    const std::size_t l = static_cast<std::size_t>(m.openLayer);
    auto same = [](const auto& a, const auto& b) { return a.rows() == b.rows() && a.cols() == b.cols(); };
    const attn::DecoderLayer& own = m.decoder->layers[l];
    const attn::Matrix& wo = m.chainWo;
    const attn::Vector& bo = m.wanted.weights[l] ? m.wanted.weights[l]->bo : own.bo;
    if (s.config.mode != attn::Mode::Direct || !same(in.Q, m.chainQ) || !same(in.K, m.chainK) || !same(in.V, m.chainV) ||
        !same(in.Wo, wo) || !same(in.bo, bo) || s.config.heads != m.heads() || s.config.kvHeads != m.kvHeads()) {
        postWarning("model layer " + std::to_string(m.openLayer) +
                    ": the session's shapes no longer match the model; its edits no longer flow back");
        m.openLayer = -1;
        return;
    }
    const bool woEdited = !(in.Wo == wo && in.bo == bo);
    const bool qkvEdited = in.Q != m.chainQ || in.K != m.chainK || in.V != m.chainV;
    if (!woEdited && !qkvEdited) return;  // a mask or view change: nothing for the model
    if (woEdited) {
        auto w = std::make_shared<attn::AttentionInput>();
        w->Wo = in.Wo;
        w->bo = in.bo;
        m.wanted.weights[l] = std::move(w);
        m.chainWo = in.Wo;
    }
    if (qkvEdited) {
        // One pin at a time, as for an encoder's X.
        m.wanted.qkvPin = std::make_shared<const attn::DecoderRun::PinnedQKV>(attn::DecoderRun::PinnedQKV{m.openLayer, in.Q, in.K, in.V});
        m.chainQ = in.Q;
        m.chainK = in.K;
        m.chainV = in.V;
    }
    const std::string what = woEdited && qkvEdited ? "Q/K/V and W^O" : woEdited ? "W^O" : "Q/K/V";
    submit(m, "edited layer " + std::to_string(m.openLayer) + "'s " + what);
}

} // namespace

void openLayerInChain(AppState& state, int layer, int head)
{
    ModelState& m = state.model;
    if (m.isDecoder()) return openDecoderLayerInChain(state, layer, head);
    if (!m.model || !m.run || layer < 0 || layer >= static_cast<int>(m.model->layers.size())) return;
    attn::Session s;
    s.name = m.model->name + " layer " + std::to_string(layer);
    s.description = "Layer " + std::to_string(layer) + " of " + m.model->name +
                    ": X is the layer's input (hidden states), W^Q/W^K/W^V/W^O its trained weights. "
                    "Edits flow back into the model: the layers from this one on are recomputed.";
    s.queryTokens = s.keyTokens = m.run->encoding.tokens;
    s.input = *m.wanted.weights[static_cast<std::size_t>(layer)];
    s.input.X = m.run->hidden[static_cast<std::size_t>(layer)];
    s.config.heads = m.model->config.heads;
    m.chainX = s.input.X;
    // The clicked head, not head 0. The session carries the view (the window adopts a new session's view on
    // the next frame, and a session's default "{}" would reset the head to 0).
    state.view.head = std::clamp(head, 0, std::max(0, m.model->config.heads - 1));
    s.viewJson = viewToJson(state.view);
    state.doc.resetSession(std::move(s), "");  // no undo to another layer: its weights would flow into this one
    m.openLayer = layer;
    m.showView = false;  // the chain view shows the layer; View → Model view brings the grid back
    m.syncedRevision = state.doc.revision();
}

void syncModelEdits(AppState& state)
{
    ModelState& m = state.model;
    pollOpenModel(state);
    takeFinished(m);
    pollScans(m);
    pollQk(m);
    // An async start (ModelStartup::async): --why and --model-layer once the first run is shown; with no run
    // (it failed or was cancelled: the panel says so) there is nothing to apply them to.
    if (m.startupLeft && (m.hasRun() || !m.computing())) {
        const ModelStartup startup = std::move(*m.startupLeft);
        m.startupLeft.reset();
        applyStartupViews(state, startup);
    }
    if (m.openLayer < 0 || !m.worker || state.doc.revision() == m.syncedRevision) return;
    m.syncedRevision = state.doc.revision();
    if (m.isDecoder()) return syncDecoderEdits(state);
    const attn::AttentionInput& in = state.doc.session().input;
    const std::size_t l = static_cast<std::size_t>(m.openLayer);
    const attn::AttentionInput& dst = *m.wanted.weights[l];
    auto same = [](const auto& a, const auto& b) { return a.rows() == b.rows() && a.cols() == b.cols(); };
    if (!same(in.Wq, dst.Wq) || !same(in.Wk, dst.Wk) || !same(in.Wv, dst.Wv) || !same(in.Wo, dst.Wo) ||
        !same(in.bq, dst.bq) || !same(in.bk, dst.bk) || !same(in.bv, dst.bv) || !same(in.bo, dst.bo) ||
        !same(in.X, m.chainX) || state.doc.session().config.heads != m.model->config.heads) {
        postWarning("model layer " + std::to_string(m.openLayer) +
                    ": the session's shapes no longer match the model; its edits no longer flow back");
        m.openLayer = -1;
        return;
    }
    const bool weightsEdited = !(in.Wq == dst.Wq && in.Wk == dst.Wk && in.Wv == dst.Wv && in.Wo == dst.Wo &&
                                 in.bq == dst.bq && in.bk == dst.bk && in.bv == dst.bv && in.bo == dst.bo);
    const bool xEdited = in.X != m.chainX;
    if (!weightsEdited && !xEdited) return;  // a mask or view change: nothing for the model
    if (weightsEdited) {
        auto w = std::make_shared<attn::AttentionInput>();
        w->Wq = in.Wq, w->Wk = in.Wk, w->Wv = in.Wv, w->Wo = in.Wo;
        w->bq = in.bq, w->bk = in.bk, w->bv = in.bv, w->bo = in.bo;
        m.wanted.weights[l] = std::move(w);
    }
    if (xEdited) {
        // Layer l's input pinned to the edited X: layers l…L−1 recompute from it. One pin at a time: an X edit
        // of another layer moves it there (the layers below that one go back to their own hidden states).
        m.wanted.pin = std::make_shared<const attn::PinnedInput>(attn::PinnedInput{m.openLayer, in.X});
        m.chainX = in.X;
    }
    const std::string what = weightsEdited && xEdited ? "weights and X" : weightsEdited ? "weights" : "X";
    submit(m, "edited layer " + std::to_string(m.openLayer) + "'s " + what);
}

void finishModelRuns(AppState& state)
{
    ModelState& m = state.model;
    // Taking a run may send the next (Generate), which a small model can finish before the check below: stop
    // only when nothing is running, waiting or left untaken.
    while (m.worker) {
        m.worker->waitUntilDone();
        takeFinished(m);
        if (m.worker->idle()) break;
    }
}

void startModelMode(AppState& state, const ModelStartup& startup)
{
    state.model.textA = startup.text;
    state.model.textB = startup.pair;
    const std::string dir = startup.dir.empty() ? defaultModelDirectory() : startup.dir;
    state.model.dirField = dir;
    state.model.longView.waitForThumbs = startup.waitForViews;  // a long text's screenshot shows every thumbnail
    state.model.startupLeft.reset();
    if (!openModel(state, dir).ok()) return;
    if (startup.async) {
        // The window opens at once on the run's progress; the rest follows when the run is shown.
        if (!startup.why.empty() || !startup.patchFrom.empty() || startup.openLayer >= 0) state.model.startupLeft = startup;
        return;
    }
    finishModelRuns(state);  // before the first frame: the window opens on the run
    applyStartupViews(state, startup);
}

namespace {

// --why, --patch-from and --model-layer over the first run shown (none: a text error, whose message is in the
// panel). Waits for the views only when the start-up waits (screenshots).
void applyStartupViews(AppState& state, const ModelStartup& startup)
{
    if (!state.model.hasRun()) return;
    if (!startup.why.empty() || !startup.patchFrom.empty()) {
        ModelState& m = state.model;
        const std::optional<WhyView> v = whyViewFromName(startup.why.empty() ? "patching" : startup.why);
        if (!m.isDecoder()) postError("--why / --patch-from: the views that explain a prediction are a decoder's");
        else if (!v) postError("--why: expected attention, importance, dla, lens, types or patching, got '" + startup.why + "'");
        else {
            if (!startup.patchFrom.empty()) {
                const std::size_t comma = startup.targets.find(',');
                const std::string a = comma == std::string::npos ? m.why.targetAText : startup.targets.substr(0, comma);
                const std::string b = comma == std::string::npos ? m.why.targetBText : startup.targets.substr(comma + 1);
                setPatching(state, startup.patchFrom, a, b);
                if (!m.why.patchError.empty()) postError("--patch-from: " + m.why.patchError);
            }
            setWhyView(state, *v);
            if (startup.waitForViews) finishScans(state);
            else if (!startup.async) finishModelRuns(state);
        }
    }
    if (startup.openLayer >= 0) {
        if (startup.openLayer < state.model.layers()) openLayerInChain(state, startup.openLayer);
        else postError("--model-layer " + std::to_string(startup.openLayer) + ": the model has " +
                       std::to_string(state.model.layers()) + " layers");
    }
}

} // namespace

} // namespace app

namespace app {

void generateTokens(AppState& state, int count)
{
    ModelState& m = state.model;
    if (!m.isDecoder() || !m.worker || count <= 0) return;
    const bool idle = m.generateLeft == 0;
    m.generateLeft += count;
    // The first token goes from the run on screen; the rest follow each finished run (takeFinished).
    if (idle && m.hasRun() && !m.computing()) {
        --m.generateLeft;
        updatePredictions(m);
        int id = m.predictions.empty() ? -1 : m.predictions.front().id;
        if (m.sample) id = attn::sampleToken(m.drun->lastLogits, m.temperature, m.sampleCount++);
        if (id < 0 || id == m.decoder->tokenizer.eos()) {
            m.generateLeft = 0;
            if (id >= 0) postMessage(MessageLevel::Info, "Generate stopped at the end-of-text token");
            return;
        }
        if (m.chat) m.generated.push_back(id);
        else m.textA += m.decoder->tokenizer.tokenText(id);
        submit(m, "generated a token");
    }
}

void updatePredictions(ModelState& m)
{
    if (!m.isDecoder() || !m.drun) return;
    const int n = static_cast<int>(m.drun->encoding.ids.size());
    if (m.predictPosition >= n) m.predictPosition = -1;
    const ModelState::PredictionKey key{m.shown.id, m.predictPosition, m.topK, m.temperature};
    if (key == m.predictionsFor && !m.predictions.empty()) return;
    m.predictionsFor = key;
    if (m.predictPosition < 0) m.shownLogits = m.drun->lastLogits;
    else {
        auto logits = attn::logitsAt(*m.decoder, *m.drun, m.predictPosition);
        if (!logits) return;
        m.shownLogits = std::move(*logits);
    }
    m.predictions = attn::topTokens(*m.decoder, m.shownLogits, std::clamp(m.topK, 1, 50), m.temperature);
}

} // namespace app

namespace app {

const char* toString(WhyView v)
{
    switch (v) {
    case WhyView::Attention: return "Attention";
    case WhyView::Importance: return "Head importance";
    case WhyView::Dla: return "Logit attribution";
    case WhyView::LogitLens: return "Logit lens";
    case WhyView::HeadTypes: return "Head types";
    case WhyView::Patching: return "Patching";
    }
    return "?";
}

const char* toString(HeadTypeScore s)
{
    switch (s) {
    case HeadTypeScore::Previous: return "previous token";
    case HeadTypeScore::Duplicate: return "duplicate token";
    case HeadTypeScore::Induction: return "induction";
    case HeadTypeScore::Sink: return "first token (sink)";
    }
    return "?";
}

std::optional<WhyView> whyViewFromName(const std::string& name)
{
    if (name == "attention") return WhyView::Attention;
    if (name == "importance") return WhyView::Importance;
    if (name == "dla") return WhyView::Dla;
    if (name == "lens") return WhyView::LogitLens;
    if (name == "types") return WhyView::HeadTypes;
    if (name == "patching") return WhyView::Patching;
    return std::nullopt;
}

const char* whyFileName(WhyView v)
{
    switch (v) {
    case WhyView::Importance: return "importance";
    case WhyView::Dla: return "attribution";
    case WhyView::LogitLens: return "logit_lens";
    case WhyView::HeadTypes: return "head_types";
    case WhyView::Patching: return "patching";
    case WhyView::Attention: break;
    }
    return "attention";
}

void setWhyView(AppState& state, WhyView view)
{
    ModelState& m = state.model;
    if (!m.isDecoder() || m.why.view == view) return;
    // The save row's file name follows the view while it is the previous view's own (the user's name stays).
    if (m.why.exportPath.rfind(whyFileName(m.why.view), 0) == 0) m.why.exportPath.clear();
    m.why.overwriteKind = -1;
    m.why.view = view;
    submit(m, std::string("showing ") + toString(view));
}

void setWhyTargetId(AppState& state, int id)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    m.why.targetError.clear();
    m.why.target = id;
    m.why.targetText = id >= 0 ? m.decoder->tokenizer.tokenText(id) : std::string();
    submit(m, id >= 0 ? "target '" + m.why.targetText + "'" : "target: the top prediction");
}

void setWhyTarget(AppState& state, const std::string& token)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    if (token.empty()) return setWhyTargetId(state, -1);
    auto id = attn::targetTokenId(*m.decoder, token);
    if (!id) {
        m.why.targetText = token;
        m.why.targetError = id.status().message;
        return;
    }
    setWhyTargetId(state, *id);
}

void setPatching(AppState& state, const std::string& clean, const std::string& a, const std::string& b)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    m.why.cleanText = clean;
    m.why.targetAText = a;
    m.why.targetBText = b;
    m.why.patchError.clear();
    auto ia = attn::targetTokenId(*m.decoder, a);
    auto ib = attn::targetTokenId(*m.decoder, b);
    auto enc = attn::encodeForDecoder(*m.decoder, clean, m.chat);
    auto own = attn::encodeForDecoder(*m.decoder, m.textA, m.chat);
    if (!ia) m.why.patchError = "target A: " + ia.status().message;
    else if (!ib) m.why.patchError = "target B: " + ib.status().message;
    else if (*ia == *ib) m.why.patchError = "targets A and B are the same token: the difference is always 0";
    else if (!enc) m.why.patchError = "the clean prompt: " + enc.status().message;
    else if (own && enc->ids.size() != own->ids.size() + m.generated.size())
        m.why.patchError = "the clean prompt has " + std::to_string(enc->ids.size()) + " tokens, the text has " +
                           std::to_string(own->ids.size() + m.generated.size()) + "; patching needs equal lengths";
    const bool ok = m.why.patchError.empty();
    m.wanted.interp.cleanText = ok ? clean : std::string();
    m.wanted.interp.targetA = ok ? *ia : -1;
    m.wanted.interp.targetB = ok ? *ib : -1;
    submit(m, "patching from '" + clean + "'");
}

void fillInductionProbe(AppState& state, std::uint64_t seed)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    auto probe = attn::inductionProbe(*m.decoder, 20, seed);
    if (!probe) {
        postError(probe.status().message);
        return;
    }
    m.textA = probe->text;
    m.chat = false;
    rerunModel(state, "the induction probe (a random sequence, repeated)");
}

void finishScans(AppState& state)
{
    ModelState& m = state.model;
    if (!m.worker) return;
    finishModelRuns(state);
    m.worker->waitForScans();
    pollScans(m);
    pollQk(m);
}

namespace {

// Sends the panel's cell to the worker. While a run is under way or waiting it goes with a request (the latest wins,
// and the decomposition follows that run); on the run shown the worker gets a copy of what it reads from this
// thread (qkCopy: a few MB for a short text, ~140 MB at 973 tokens and layer 29, one frame's copy) instead, since a
// request would first bring the worker's older buffer up to date (after a new text: the whole forward again, 24 s
// at 973 tokens).
void sendQk(ModelState& m, const std::string& why)
{
    m.wanted.interp.qk = m.isDecoder() && m.qk.open ? m.qk.cell : QkRequest{};
    if (!m.worker) return;
    if (m.computing() || !m.drun) return submit(m, why);
    ModelRequest r = m.shown;
    r.interp.qk = m.wanted.interp.qk;
    m.worker->submitQk(r, *m.drun);
}

} // namespace

void openQkCell(AppState& state, int layer, int head, int query, int key)
{
    ModelState& m = state.model;
    if (!m.isDecoder()) return;
    m.qk.open = true;
    const bool row = m.qk.open && m.qk.cell.row;  // the row mode stays on from cell to cell
    m.qk.cell = QkRequest{layer, head, query, key, {}, attn::QkSide::Key, row};
    m.qk.rowOther = -1;
    m.qk.expanded.clear();
    m.qk.overwriteAsked = false;
    sendQk(m, "why L" + std::to_string(layer) + ".H" + std::to_string(head) + " attends from " + std::to_string(query) +
                  " to " + std::to_string(key));
}

void closeQk(AppState& state)
{
    ModelState& m = state.model;
    if (!m.qk.open) return;
    m.qk.open = false;
    m.qk.overwriteAsked = false;
    sendQk(m, "closed Why here?");
}

void setQkPatch(AppState& state, const std::string& component, attn::QkSide side)
{
    ModelState& m = state.model;
    if (!m.qk.open) return;
    m.qk.cell.patchComponent = component;
    m.qk.cell.patchSide = side;
    sendQk(m, component.empty() ? std::string("the pattern unpatched")
                                : "removed " + component + " from the " + attn::toString(side) + " side");
}

void setQkRow(AppState& state, bool on)
{
    ModelState& m = state.model;
    if (!m.qk.open || m.qk.cell.row == on) return;
    m.qk.cell.row = on;
    m.qk.rowOther = -1;
    sendQk(m, on ? "the query's whole row" : "the cell alone");
}

void cancelQk(AppState& state)
{
    if (state.model.worker) state.model.worker->cancelQk();
}

void retryQk(AppState& state)
{
    ModelState& m = state.model;
    if (m.qk.open) sendQk(m, "Why here? again");
}

bool qkComputing(const ModelState& m)
{
    if (!m.qk.open) return false;
    if (m.qk.results.running) return true;
    // Sent but not yet queued (the run before it under way), or the run shown is about to change.
    if (!(m.qk.results.of == m.qk.cell)) return m.worker && (m.worker->busy() || m.worker->qkBusy());
    return m.computing();
}

} // namespace app
