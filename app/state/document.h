// Document: what the user edits (an attn::Session), the last good result of computing it, and undo/redo.
//
// The session is kept in Row orientation whatever its layout ("canonical": tokens are rows), so that an edit
// means the same cell in both layouts; config.layout says how it is computed and shown. Only the boundary
// transposes: computing (core gets the layout's orientation) and saving/loading files.
// Every number comes from attn::compute; the document never does attention math.
#pragma once

#include "state/compute_worker.h"
#include "state/pooled_parts.h"
#include "state/result_ranges.h"

#include <attnscope/matrix_names.h>
#include <attnscope/attention.h>
#include <attnscope/preset_io.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace app {

// The editable matrices and vectors. Vectors (biases, w_v) are shown and edited as 1×k rows.
using MatrixId = attn::InputMatrix;  // X, Xkv, Wq, ..., Wv_additive; names in attnscope/matrix_names.h
const char* matrixName(MatrixId id);  // "X", "X_kv", "W^Q", ..., "b^Q", "w_v"

// The sizes a user can change. Per-head widths: projected widths are H·dk etc.
// The session's sizes as its matrices state them, named as core's attn::Dims (T, S, M, H, d_q, d_k, d_v, O, A).
// Unlike Dims (what validate() returns for a consistent input) these are read from a session being edited,
// which may disagree with itself mid-edit, and O = 0 says "no W^O" (Dims::O is then H·d_v).
struct Sizes {
    int T = 1;       // queries (rows of X, or of Q in direct mode)
    int S = 1;       // keys/values (rows of X_kv in cross mode, of K/V in direct mode; T in self mode)
    int M = 1;       // d_model: width of X and X_kv (self, cross)
    int H = 1;       // heads
    int Hkv = 1;     // key/value heads (grouped-query attention; = H for multi-head), dividing H
    int dq = 1;      // per-head query width (= dk except in direct mode with the additive score)
    int dk = 1;      // per-head key width
    int dv = 1;      // per-head value width
    int O = 0;       // columns of W^O; 0 = no W^O (the output is the concat)
    int A = 0;       // hidden width of the additive score (0 unless score is additive)
};
// Limits on sizes typed in the window (beyond these the UI gets unusable; core has its own memory budget).
inline constexpr int kMaxTokens = 8192;  // heatmaps keep full resolution to here (tiled textures)
inline constexpr int kMaxWidth = 4096;
inline constexpr int kMaxHeads = 64;


class Document {
public:
    Document();  // a small built-in session (used when no preset can be found)
    ~Document();
    Document(const Document&) = delete;
    Document& operator=(const Document&) = delete;

    // Replaces the session by `s` (given in its file orientation, as parseSession returns it) and the path:
    // one undo step (undo brings the previous session and its path back), except over the untouched built-in
    // session, which has nothing to lose. The session opened counts as saved (modified() is false).
    void setSession(attn::Session s, const std::string& path);
    // As setSession, but clears the undo history: for sessions whose earlier states must not come back (a
    // model layer, whose edits flow back into the model by shape: undoing to another layer would write it
    // over this one).
    void resetSession(attn::Session s, const std::string& path);
    // Which opened session is shown: a new value for each setSession/resetSession, and undo/redo across an
    // open brings the value of the session it returns to (the app restores that session's view options).
    std::uint64_t sessionSerial() const { return m_sessionSerial; }
    // Keeps `json` as the current session's view options (no undo step, no recompute), so that the undo
    // step of the next open holds the view as the user left it.
    void setViewJson(std::string json) { m_session.viewJson = std::move(json); }
    // Loads a file; on failure returns the error and leaves everything unchanged.
    attn::Status load(const std::string& path);
    // The session in file orientation, with `viewJson` as its view object, ready for attn::saveSession.
    attn::Session sessionForSave(const std::string& viewJson) const;

    const attn::Session& session() const { return m_session; }  // canonical (Row-oriented) storage
    const std::string& path() const { return m_path; }
    void setPath(const std::string& p) { m_path = p; }
    // The session differs from what its path last opened or saved (markSaved) by an edit, an undo or a redo.
    // Untitled sessions (path "") compare with the last one opened untitled.
    bool modified() const;
    void markSaved() { m_cleanIds[m_path] = m_stateId; }
    // The session is in no file as it is (a restored autosave): modified() until saved.
    void markUnsaved() { m_cleanIds.erase(m_path); }
    Sizes sizes() const;

    // ---- Editing: each public edit is one undo step --------------------------------------------------
    // Applies f to the session as one undo step. f must keep shapes consistent (use setSizes for sizes).
    void edit(const std::function<void(attn::Session&)>& f);
    // A gesture (e.g. dragging a value) is one undo step however many frames it lasts:
    // beginGesture() saves the undo point, applyInGesture() changes without adding steps.
    void beginGesture();
    void applyInGesture(const std::function<void(attn::Session&)>& f);
    void setCellInGesture(MatrixId id, int r, int c, float v);  // v must be finite
    // Resizes every matrix to `s`, keeping the values already entered (new cells are 0). Returns an
    // InvalidArgument status (and changes nothing) for sizes out of range. A multi-head session whose H changes
    // with s.Hkv left as it was stays multi-head (H_kv = the new H).
    attn::Status setSizes(const Sizes& s);
    // Changes the number of heads as one undo step. keepWidths = false: every head keeps d_q, d_k, d_v, so
    // the projections grow or shrink by whole heads; a new head's weights are seeded Xavier values (the same
    // head index gives the same numbers), or the weights it had when it was removed earlier in this session.
    // keepWidths = true ("keep d_model×d_model"): the projections keep their shape and are split into
    // `heads` blocks (d_k = width / heads); InvalidArgument when a width is not divisible by `heads`.
    // The KV heads stay valid: a multi-head session stays multi-head; a grouped one keeps its H_kv when it
    // divides `heads`, else takes the largest divisor of `heads` below it.
    attn::Status setHeads(int heads, bool keepWidths);
    // Grouped-query attention: `kvHeads` key/value heads shared by the query heads (one undo step). Each KV head
    // keeps d_k and d_v, so W^K, W^V, b^K, b^V (K and V in direct mode) grow or shrink by whole KV heads, as
    // setHeads does for heads. InvalidArgument unless kvHeads divides the number of heads.
    attn::Status setKvHeads(int kvHeads);
    // Switches mode, creating what the new mode needs (X_kv from X; Q, K, V from the current projections).
    void setMode(attn::Mode m);
    // Switches the score, creating additive parameters when needed (and dropping the scale override).
    void setScore(attn::Score sc);
    // Sets the query (and in self mode key) tokens from a sentence: one token per whitespace-separated word,
    // n follows, as one undo step. Each distinct word gets one embedding row (of X or X_kv; of Q, or K and V,
    // in direct mode): the row it had when the word was already a token on that side, else one seeded by the
    // word (wordSeed), so the same word always gets the same vector. Returns InvalidArgument for an empty
    // sentence or more than kMaxTokens words.
    attn::Status setTokensFromSentence(const std::string& sentence, bool keys);

    // Accessors for editable cells in canonical orientation (vectors: row 0).
    int rows(MatrixId id) const;
    int cols(MatrixId id) const;
    float cell(MatrixId id, int r, int c) const;
    bool present(MatrixId id) const;  // false for optional inputs left out (W^O, biases)
    // Replaces the whole session by `s` (file orientation, as parseSession returns it) keeping the path: one
    // undo step, or part of the current gesture when `inGesture` (see beginGesture). The lesson panels use it.
    void replaceSession(attn::Session s, bool inGesture = false);
    // Replaces a whole matrix, as one undo step (`m` in canonical orientation; shape must match).
    attn::Status setMatrix(MatrixId id, const attn::Matrix& m);
    // Creates (zeros) or removes an optional input: W^O (with d_out = H·d_v) or a bias.
    void setPresent(MatrixId id, bool on);

    bool undo();
    bool redo();
    bool canUndo() const { return !m_undo.empty(); }
    bool canRedo() const { return !m_redo.empty(); }

    // ---- Computing -----------------------------------------------------------------------------------
    // Without a worker (tests, headless tools): recomputes now when an input changed since the last call and
    // returns true when it did (success or not).
    // With a worker (startWorker, the window): never waits. Sends the inputs to the worker when they changed
    // and it is free (edits made while it computes are coalesced: the latest wins), and shows a finished
    // compute; returns true when a new result or error became visible.
    bool recomputeIfNeeded();
    // Computes on a worker thread from now on. `fn` replaces attn::compute (tests: a gated fake), `fetch`
    // attn::fetchDeviceMaps. With a worker, a compute on the device keeps its maps there (mapsOnDevice): the result is
    // shown at once (its heatmaps filled from the device, its ranges and pooled parts made there) and its maps come
    // back on the worker afterwards (mapsArriving() until then); a CPU session computes as without it.
    void startWorker(ComputeFn fn = {}, FetchFn fetch = {});
    bool hasWorker() const { return m_worker != nullptr; }
    // With a worker: the inputs changed since the shown result (or error) was computed, i.e. a compute is
    // waiting, running, or finished but not shown yet. Always false without a worker.
    bool computing() const { return m_worker && (m_dirty || m_awaiting); }
    double computingMs() const { return m_worker ? m_worker->runningMs() : 0.0; }
    // With a worker: blocks until the result of the current inputs is shown, with its maps (screenshots, bench, tests).
    void waitForCompute();
    // The shown result's maps are still on the device only (its HeadResults' scores, weights and masked are empty)
    // and the worker is bringing them back (or a compute that will bring them is coming). Readers of whole maps wait
    // for them (or show that they are coming); a hovered cell can be read through attn::DeviceMaps meanwhile.
    bool mapsArriving() const { return m_hasResult && m_result.mapsOnDevice && !m_mapsLost; }
    // Maps of at least this many bytes (every head's scores and weights) stay on the device and come after the result;
    // smaller ones come back with it, as their copy takes a few milliseconds (64 MiB: n = 1024 with 8 heads), where
    // the views would otherwise say "maps coming from the GPU…" for a frame at every edit. Tests set 0.
    static constexpr std::size_t kMapsOnDeviceFromBytes = std::size_t(64) << 20;
    std::size_t mapsOnDeviceFromBytes = kMapsOnDeviceFromBytes;
    // The shown result's maps are on the device only and will not come back: the device lost the result and the
    // inputs since failed to compute (the last good result is kept without its maps until the next good compute).
    bool mapsLost() const { return m_hasResult && m_result.mapsOnDevice && m_mapsLost; }
    // Milliseconds the worker took to bring the shown result's maps back (0 when none were fetched).
    double mapsFetchMs() const { return m_mapsMs; }
    // Also waits for the worker's background work after a result was taken (giving its spare buffer the new
    // shapes): what a person looking at the new picture for a moment before editing leaves it time for.
    void waitForWorkerIdle();
    // The shown result was computed with the current sizes, heads, mode, score and layout (so panels may
    // read it with the session's shape). False when there is no result.
    bool resultMatchesShape() const { return m_hasResult && m_resultShape == shapeKey(); }
    // Colour ranges of the shown result under `o`, computed with each result (on the worker when there is
    // one); changing the options recomputes them for the shown result now.
    void setRangeOptions(const RangeOptions& o);
    const ResultRanges& ranges() const { return m_ranges; }
    // Pooled parts of the shown result's maps, made on the worker with it (pooled_parts.h): `part` of `source`
    // (one of result()'s matrices) pooled, or null when it was not.
    const attn::Matrix* prepooled(const attn::Matrix* source, const PoolPart& part) const;
    // A frame drew `part` of `source` pooled: the worker pools that part of the results it computes next (a
    // source that is not one of result()'s matrices is ignored). Requests last until the next job is submitted.
    void wantPooled(const attn::Matrix* source, const PoolPart& part);
    // Milliseconds the worker took to pool the shown result's parts (0 without a worker; bench --gui reports it).
    double pooledMs() const { return m_poolMs; }
    void markDirty() { m_dirty = true; ++m_revision; }
    // The last good result (empty before the first success), in the session's layout.
    const attn::AttentionResult& result() const { return m_result; }
    bool hasResult() const { return m_hasResult; }
    // The error of the last compute, or ok.
    const attn::Status& lastError() const { return m_lastError; }
    // +1 for each successful compute, and when its maps arrive from the device (the shown result changed)
    std::uint64_t resultGeneration() const { return m_generation; }
    std::uint64_t revision() const { return m_revision; }             // +1 for each change of the inputs
    std::uint64_t resultRevision() const { return m_resultRevision; } // the revision the shown result was computed from
    // Wall time of the compute that made the shown result (worker: the whole job, colour ranges included).
    double resultComputeMs() const { return m_resultMs; }
    attn::Backend backend = attn::Backend::Cpu;

private:
    attn::Matrix* matrixPtr(MatrixId id);
    attn::Vector* vectorPtr(MatrixId id);
    const attn::Matrix* matrixPtr(MatrixId id) const;
    const attn::Vector* vectorPtr(MatrixId id) const;
    struct Snapshot {
        attn::Session session;
        std::string path;
        std::uint64_t id = 0;      // which state of the document it is (modified() compares ids)
        std::uint64_t serial = 0;  // sessionSerial() of the opened session it belongs to
    };
    void pushUndo();
    // Undo (from m_undo to m_redo) or redo (the other way): the current state goes onto `to`.
    bool travel(std::deque<Snapshot>& from, std::deque<Snapshot>& to);
    void fitMaskAndTokens();
    // Fills head blocks [fromHead, toHead) of `m` (column blocks of width d, or row blocks when `rowBlocks`)
    // with the stashed weights of that head when their shape fits, else seeded Xavier values.
    void fillNewHeads(attn::Matrix& m, MatrixId id, int fromHead, int toHead, int d, bool rowBlocks);
    // Keeps head blocks [fromHead, toHead) of `m` for fillNewHeads, before they are removed.
    void stashHeads(const attn::Matrix& m, MatrixId id, int fromHead, int toHead, int d, bool rowBlocks);
    using ShapeKey = std::array<int, 13>;
    ShapeKey shapeKey() const;
    // Shows a finished compute (status, the inputs' revision and shape, its time).
    void showFinished(const attn::Status& st, std::uint64_t revision, const ShapeKey& shape, double ms);

    attn::Session m_session;
    std::string m_path;
    std::deque<Snapshot> m_undo, m_redo;
    std::uint64_t m_stateId = 0, m_nextId = 0;
    std::uint64_t m_sessionSerial = 0;
    std::map<std::string, std::uint64_t> m_cleanIds{{"", 0}};  // per path: the state its file holds
    bool m_pristine = true;  // still the built-in session, never edited
    // Blocks of heads removed by setHeads, by matrix and head index (this session only: opening clears it).
    std::map<std::pair<int, int>, attn::Matrix> m_removedHeads;
    attn::AttentionResult m_result, m_scratch;
    bool m_hasResult = false;
    bool m_dirty = true;
    attn::Status m_lastError;
    std::uint64_t m_generation = 0;
    std::uint64_t m_revision = 0;
    std::uint64_t m_resultRevision = 0;
    ShapeKey m_resultShape{};
    double m_resultMs = 0;
    RangeOptions m_rangeOptions;     // what the panels asked for (main thread)
    RangeOptions m_jobRangeOptions;  // the options of the submitted job (read by the worker while it runs)
    ResultRanges m_jobPrevRanges;    // the shown result's ranges at submit (the job's may start from them)
    ResultRanges m_ranges;           // of m_result
    ResultRanges m_workerRanges;     // of the worker's buffer (written by the worker while it runs)
    PoolRequests m_poolWanted;       // asked for by the frames since the last submit (main thread)
    PoolRequests m_jobPoolWanted;    // of the submitted job (read by the worker while it runs)
    PooledParts m_pooled;            // of m_result
    PooledParts m_workerPooled;      // of the worker's buffer (written by the worker while it runs)
    double m_poolMs = 0, m_workerPoolMs = 0;  // time the worker took to pool them (of m_result, of its buffer)
    std::unique_ptr<ComputeWorker> m_worker;
    bool m_awaiting = false;         // a job was submitted and its outcome is not shown yet
    bool m_copyMapsNext = false;     // the next job brings its maps back with it (the device lost the shown ones)
    bool m_mapsLost = false;         // the shown result's maps are on the device only and will not come back
    double m_mapsMs = 0;
    ShapeKey m_submittedShape{};
};

// Fills a matrix in canonical orientation. Identity/block identity: rows×cols with 1 where r % cols == c
// or c % rows == r (so a d_model×H·d_k matrix is H stacked identities, seed 003's head split).
enum class FillKind { Zeros, Identity, RandomNormal, Xavier };
attn::Matrix makeFilled(FillKind kind, int rows, int cols, unsigned seed);
// A fixed 64-bit hash of a word (FNV-1a over its UTF-8 bytes): the same on every run and platform.
std::uint64_t wordSeed(const std::string& word);
// rows×cols values drawn from N(0, sigma²) by a generator seeded with `seed`, rounded to 2 decimals (readable
// in the cells). Platform-independent: mt19937 and Box–Muller, not std::normal_distribution.
attn::Matrix seededNormal(int rows, int cols, std::uint64_t seed, float sigma);

} // namespace app
