// An attention bundle in the window: see bundle_state.h.
#include "state/bundle_state.h"

#include "messages.h"
#include "state/app_state.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace app {

int nextThumbnail(const std::vector<std::uint8_t>& done, int heads, int firstLayer, int lastLayer)
{
    const int count = static_cast<int>(done.size());
    if (heads > 0 && firstLayer <= lastLayer) {
        const int a = std::max(0, firstLayer) * heads, b = std::min(count, (std::max(0, lastLayer) + 1) * heads);
        for (int i = a; i < b; ++i)
            if (!done[std::size_t(i)]) return i;
    }
    for (int i = 0; i < count; ++i)
        if (!done[std::size_t(i)]) return i;
    return -1;
}

// Makes every thumbnail of a bundle on its own thread, the layers the grid shows first; stops when destroyed.
class BundleThumbs {
public:
    explicit BundleThumbs(std::shared_ptr<const OpenedBundle> b) : m_bundle(std::move(b))
    {
        const std::size_t count = std::size_t(m_bundle->maps->layers()) * std::size_t(m_bundle->maps->heads());
        m_values.resize(count);
        m_errors.resize(count);
        m_done.assign(count, 0);
        m_thread = std::thread([this] { run(); });
    }
    ~BundleThumbs()
    {
        m_stop = true;
        if (m_thread.joinable()) m_thread.join();
    }
    BundleThumbs(const BundleThumbs&) = delete;
    BundleThumbs& operator=(const BundleThumbs&) = delete;

    std::uint64_t generation() const { return m_generation.load(); }
    void prefer(int firstLayer, int lastLayer)
    {
        m_firstLayer = firstLayer;
        m_lastLayer = lastLayer;
    }
    bool busy() const { return !m_finished.load(); }

    // Copies the thumbnails done since `have` (flags per thumbnail) into `values`, `errors`.
    int copyNew(std::vector<attn::Matrix>& values, std::vector<std::string>& errors, std::vector<std::uint8_t>& have)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        int done = 0;
        for (std::size_t i = 0; i < m_done.size(); ++i) {
            if (!m_done[i]) continue;
            ++done;
            if (have[i]) continue;
            values[i] = m_values[i];
            errors[i] = m_errors[i];
            have[i] = 1;
        }
        return done;
    }

private:
    void run()
    {
        const attn::AttentionMaps& maps = *m_bundle->maps;
        const int H = maps.heads(), T = maps.queries(), S = maps.keys();
        std::vector<std::uint8_t> taken(m_done.size(), 0);  // the worker's own copy: m_done is read under the lock
        while (!m_stop) {
            const int i = nextThumbnail(taken, H, m_firstLayer.load(), m_lastLayer.load());
            if (i < 0) break;
            taken[std::size_t(i)] = 1;
            attn::Matrix m;
            const attn::Status s = maps.pooled(attn::MapKind::Weights, i / H, i % H, attn::MapRect{0, 0, T, S},
                                               kBundleThumbCells, kBundleThumbCells, m);
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (s.ok()) m_values[std::size_t(i)] = std::move(m);
                else m_errors[std::size_t(i)] = s.message;
                m_done[std::size_t(i)] = 1;
            }
            ++m_generation;
        }
        m_finished = true;
        ++m_generation;
    }

    std::shared_ptr<const OpenedBundle> m_bundle;
    std::mutex m_mutex;
    std::vector<attn::Matrix> m_values;
    std::vector<std::string> m_errors;
    std::vector<std::uint8_t> m_done;
    std::atomic<bool> m_stop{false}, m_finished{false};
    std::atomic<int> m_firstLayer{0}, m_lastLayer{-1};  // the layers the grid shows (none yet: grid order)
    std::atomic<std::uint64_t> m_generation{0};
    std::thread m_thread;
};


attn::Status openBundleInWindow(AppState& state, const std::string& path)
{
    attn::Expected<OpenedBundle> b = openBundle(path);
    if (!b) {
        state.bundle.error = b.status().message;
        postError("cannot open bundle " + path + ": " + b.status().message);
        return b.status();
    }
    showBundle(state, std::move(*b));
    postInfo("opened bundle " + path + ": " + std::to_string(state.bundle.bundle->maps->layers()) + " layers × " +
             std::to_string(state.bundle.bundle->maps->heads()) + " heads, " +
             std::to_string(state.bundle.bundle->maps->queries()) + " tokens");
    return {};
}

void showBundle(AppState& state, OpenedBundle bundle)
{
    BundleState& s = state.bundle;
    closeBundle(s);  // a new bundle starts on its grid
    replaceMaps(s, std::move(bundle));
    s.error.clear();
    s.showView = true;
    s.layer = s.head = 0;
    state.model.showView = false;  // the bundle's views are shown instead of a model's
}

void preferThumbLayers(BundleState& b, int firstLayer, int lastLayer)
{
    if (b.thumbs) b.thumbs->prefer(firstLayer, lastLayer);
}

void pollBundleThumbs(BundleState& b)
{
    if (!b.thumbs) return;
    while (b.waitForThumbs && b.thumbs->busy()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::uint64_t g = b.thumbs->generation();
    if (g == b.thumbsGeneration) return;
    b.thumbsGeneration = g;
    b.thumbCopied.resize(b.thumbnails.size(), 0);
    b.thumbsDone = b.thumbs->copyNew(b.thumbnails, b.thumbErrors, b.thumbCopied);
}

bool bundleThumbsBusy(const BundleState& b) { return b.thumbs && b.thumbs->busy(); }

void closeBundle(BundleState& b)
{
    b.thumbs.reset();  // joins the worker
    b.bundle.reset();
    b.thumbnails.clear();
    b.thumbErrors.clear();
    b.thumbCopied.clear();
    b.thumbShown.clear();
    b.thumbShownSide = 0;
    b.linesMap.resize(0, 0);
    b.linesLayer = b.linesHead = -1;
    b.tile.resize(0, 0);
    b.headOpen = false;
}

void replaceMaps(BundleState& b, OpenedBundle bundle)
{
    const bool headOpen = b.headOpen;
    const int layer = b.layer, head = b.head;
    const MapViewport viewport = b.viewport;
    const bool sameShape = b.bundle && b.bundle->maps->layers() == bundle.maps->layers() &&
                           b.bundle->maps->heads() == bundle.maps->heads() && b.bundle->maps->queries() == bundle.maps->queries();
    closeBundle(b);
    b.bundle = std::make_shared<const OpenedBundle>(std::move(bundle));
    const std::size_t count = std::size_t(b.bundle->maps->layers()) * std::size_t(b.bundle->maps->heads());
    b.thumbnails.assign(count, attn::Matrix());
    b.thumbErrors.assign(count, std::string());
    b.thumbCopied.assign(count, 0);
    b.thumbsDone = 0;
    b.thumbsGeneration = ~std::uint64_t(0);  // a generation the new worker never reports: its first poll copies
    b.tileLayer = b.tileHead = -1;
    b.shownFrame = {};
    b.thumbs = std::make_shared<BundleThumbs>(b.bundle);
    b.headOpen = headOpen;  // closeBundle (a bundle never shown) leaves it false
    b.layer = std::clamp(layer, 0, b.bundle->maps->layers() - 1);
    b.head = std::clamp(head, 0, b.bundle->maps->heads() - 1);
    b.viewport = sameShape ? viewport : MapViewport{};
}

const MapFrame& updateBundleTile(BundleState& b, double width, double height)
{
    const attn::AttentionMaps& maps = *b.bundle->maps;
    const int T = maps.queries(), S = maps.keys();
    b.viewport = clampViewport(b.viewport, T, S, width, height);
    const MapFrame f = planMapFrame(b.viewport, T, S, width, height);
    const bool sameCells = f.rect == b.shownFrame.rect && f.outRows == b.shownFrame.outRows &&
                           f.outCols == b.shownFrame.outCols && b.tileLayer == b.layer && b.tileHead == b.head;
    if (!sameCells) {
        const auto t0 = std::chrono::steady_clock::now();
        attn::Status s = f.pooled ? maps.pooled(attn::MapKind::Weights, b.layer, b.head, f.rect, f.outRows, f.outCols, b.tile)
                                  : maps.tile(attn::MapKind::Weights, b.layer, b.head, f.rect, b.tile);
        b.tileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        b.tileError = s.ok() ? std::string() : s.message;
        if (!s.ok()) b.tile.resize(0, 0);
        b.tileLayer = b.layer;
        b.tileHead = b.head;
        ++b.tileGeneration;
    }
    b.shownFrame = f;  // the offsets and scale change with a pan inside the same cells
    return b.shownFrame;
}

} // namespace app
