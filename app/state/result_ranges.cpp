#include "state/result_ranges.h"

#include <attnscope/device_maps.h>
#include <attnscope/result_change.h>

#include <algorithm>
#include <cmath>
#include <thread>

namespace app {

namespace {

// Line l of the map (length n), its mask flags (null: none). In chunks, so that where the min and max sit is
// found by a second look at one chunk each, not at the line.
void scanLine(const float* p, const std::uint8_t* mk, Eigen::Index n, LineRanges& L, std::size_t l)
{
    constexpr Eigen::Index kChunk = 256;
    float lo = INFINITY, hi = -INFINITY;
    Eigen::Index loC = -1, hiC = -1;
    for (Eigen::Index c0 = 0; c0 < n; c0 += kChunk) {
        float clo = INFINITY, chi = -INFINITY;
        attn::extendFiniteRange(p + c0, mk ? mk + c0 : nullptr, std::min(kChunk, n - c0), clo, chi, L.nonFinite);
        if (clo < lo) lo = clo, loC = c0;
        if (chi > hi) hi = chi, hiC = c0;
    }
    L.lo[l] = lo;
    L.hi[l] = hi;
    auto find = [&](Eigen::Index c0, float v) {
        for (Eigen::Index k = c0; k < std::min(c0 + kChunk, n); ++k)
            if (p[k] == v && !(mk && mk[k])) return int(k);
        return -1;
    };
    L.loAt[l] = loC < 0 ? -1 : find(loC, lo);
    L.hiAt[l] = hiC < 0 ? -1 : find(hiC, hi);
}

const std::uint8_t* maskOf(const attn::Matrix& m, const attn::MaskMatrix& mask)
{
    // Same shape and storage order: value k and flag k belong to the same cell (as attn::displayRange).
    return mask.size() == m.size() && mask.rows() == m.rows() && mask.size() ? mask.data() : nullptr;
}

void scanAll(const attn::Matrix& m, const attn::MaskMatrix& mask, LineRanges& L)
{
    const std::size_t lines = std::size_t(m.rows());
    L.lo.assign(lines, INFINITY);
    L.hi.assign(lines, -INFINITY);
    L.loAt.assign(lines, -1);
    L.hiAt.assign(lines, -1);
    L.nonFinite = 0;
    const std::uint8_t* mk = maskOf(m, mask);
    for (std::size_t l = 0; l < lines; ++l)
        scanLine(m.data() + l * std::size_t(m.cols()), mk ? mk + l * std::size_t(m.cols()) : nullptr, m.cols(), L, l);
}

// Line l's range after its value at position j changed to v (finite, unmasked): widened to it, or false when the
// old min or max sat at j and v moved inward, so that the line's new one may be anywhere in it (a rescan).
bool widen(LineRanges& L, std::size_t l, int j, float v)
{
    if ((j == L.hiAt[l] && v < L.hi[l]) || (j == L.loAt[l] && v > L.lo[l])) return false;
    if (v > L.hi[l] || L.hiAt[l] < 0) L.hi[l] = v, L.hiAt[l] = j;
    if (v < L.lo[l] || L.loAt[l] < 0) L.lo[l] = v, L.loAt[l] = j;
    return true;
}

// L (prev's lines) brought up to date after lines `lines` changed whole and every other line at positions
// `at`. False where it cannot (a non-finite value): the caller scans the map whole.
// With `scale`, every value of line l not at `at` was multiplied by scale[l] first (NaN: the line changed whole).
bool updateLines(const attn::Matrix& m, const attn::MaskMatrix& mask, const std::vector<int>& lines,
                 const std::vector<int>& at, const float* scale, LineRanges& L)
{
    const std::size_t rows = std::size_t(m.rows()), n = std::size_t(m.cols());
    if (L.lo.size() != rows || L.nonFinite) return false;
    const std::uint8_t* mk = maskOf(m, mask);
    std::vector<char> whole(rows, 0);
    for (int l : lines) {
        if (l < 0 || std::size_t(l) >= rows) return false;
        whole[std::size_t(l)] = 1;
    }
    for (int j : at)
        if (j < 0 || std::size_t(j) >= n) return false;
    for (std::size_t l = 0; l < rows; ++l) {
        const float* p = m.data() + l * n;
        const std::uint8_t* f = mk ? mk + l * n : nullptr;
        if (!whole[l] && scale && scale[l] != 1.0f) {
            const float c = scale[l];
            if (!(c > 0.0f) || !std::isfinite(c)) {
                whole[l] = 1;
            } else if (L.loAt[l] >= 0) {  // the same float products as the values' (x·c keeps the order for c > 0)
                L.lo[l] *= c;
                L.hi[l] *= c;
            }
        }
        if (!whole[l]) {
            for (int j : at) {
                if (f && f[j]) continue;  // masked before and after (the mask did not change)
                const float v = p[j];
                if (!std::isfinite(v)) return false;
                if (!widen(L, l, j, v)) {
                    whole[l] = 1;
                    break;
                }
            }
        }
        if (whole[l]) {
            scanLine(p, f, Eigen::Index(n), L, l);
            if (L.nonFinite) return false;
        }
    }
    return true;
}

// Column layout's weights: the lines are the stored columns (queries), each of which a softmax rescale multiplies
// by one factor. Scanned in storage order, a row at a time, each column's min and max carried along (the
// comparisons are selects, so the loop over a row vectorises).
void scanAllColumns(const attn::Matrix& m, const attn::MaskMatrix& mask, LineRanges& L)
{
    const Eigen::Index rows = m.rows(), cols = m.cols();
    L.lo.assign(std::size_t(cols), INFINITY);
    L.hi.assign(std::size_t(cols), -INFINITY);
    L.loAt.assign(std::size_t(cols), -1);
    L.hiAt.assign(std::size_t(cols), -1);
    int nonFinite = 0;
    const std::uint8_t* mk = maskOf(m, mask);
    float* lo = L.lo.data();
    float* hi = L.hi.data();
    int* loAt = L.loAt.data();
    int* hiAt = L.hiAt.data();
    for (Eigen::Index r = 0; r < rows; ++r) {
        const float* p = m.data() + r * cols;
        const std::uint8_t* f = mk ? mk + r * cols : nullptr;
        const int at = int(r);
        for (Eigen::Index c = 0; c < cols; ++c) {
            const float v = p[c];
            const bool open = !(f && f[c]);
            const bool finite = v - v == 0.0f;  // false for ±inf and NaN
            nonFinite += open && !finite;
            const bool below = open && finite && v < lo[c], above = open && finite && v > hi[c];
            lo[c] = below ? v : lo[c];
            loAt[c] = below ? at : loAt[c];
            hi[c] = above ? v : hi[c];
            hiAt[c] = above ? at : hiAt[c];
        }
    }
    L.nonFinite = nonFinite;
}

// Column j of m (strided): its min and max and where (updateColumns' rescans of a few columns).
void scanColumn(const attn::Matrix& m, const std::uint8_t* mk, Eigen::Index j, LineRanges& L)
{
    const std::size_t c = std::size_t(j);
    L.lo[c] = INFINITY, L.hi[c] = -INFINITY, L.loAt[c] = -1, L.hiAt[c] = -1;
    for (Eigen::Index r = 0; r < m.rows(); ++r) {
        const std::size_t k = std::size_t(r * m.cols() + j);
        if (mk && mk[k]) continue;
        const float v = m.data()[k];
        if (!std::isfinite(v)) {
            ++L.nonFinite;
            continue;
        }
        if (v < L.lo[c]) L.lo[c] = v, L.loAt[c] = int(r);
        if (v > L.hi[c]) L.hi[c] = v, L.hiAt[c] = int(r);
    }
}

// updateLines for Column layout's weights, whose lines are m's columns (queries): columns `whole` changed whole,
// every other column was multiplied by scale[column] and then changed at the stored rows (keys) `at`. False where
// it cannot (a non-finite value): the caller scans the map whole.
bool updateColumns(const attn::Matrix& m, const attn::MaskMatrix& mask, const std::vector<int>& whole,
                   const std::vector<int>& at, const float* scale, LineRanges& L)
{
    const Eigen::Index rows = m.rows(), cols = m.cols();
    if (L.lo.size() != std::size_t(cols) || L.nonFinite) return false;
    const std::uint8_t* mk = maskOf(m, mask);
    std::vector<char> rescan(std::size_t(cols), 0);
    for (int j : whole) {
        if (j < 0 || j >= cols) return false;
        rescan[std::size_t(j)] = 1;
    }
    for (int r : at)
        if (r < 0 || r >= rows) return false;
    for (Eigen::Index j = 0; j < cols; ++j) {
        const std::size_t c = std::size_t(j);
        if (rescan[c] || scale[c] == 1.0f) continue;
        if (!(scale[c] > 0.0f) || !std::isfinite(scale[c])) rescan[c] = 1;
        else if (L.loAt[c] >= 0) L.lo[c] *= scale[c], L.hi[c] *= scale[c];  // x·c keeps the order for c > 0
    }
    for (int r : at) {  // a changed key: a row of m, read in storage order
        const float* p = m.data() + std::size_t(r) * std::size_t(cols);
        const std::uint8_t* f = mk ? mk + std::size_t(r) * std::size_t(cols) : nullptr;
        for (Eigen::Index j = 0; j < cols; ++j) {
            const std::size_t c = std::size_t(j);
            if (rescan[c] || (f && f[j])) continue;
            const float v = p[j];
            if (!std::isfinite(v)) return false;
            if (!widen(L, c, r, v)) rescan[c] = 1;
        }
    }
    // A column is rows values a cache line apart: past a few dozen of them the caller's one pass over the map in
    // storage order costs less.
    if (std::count(rescan.begin(), rescan.end(), 1) > 64) return false;
    for (Eigen::Index j = 0; j < cols; ++j)
        if (rescan[std::size_t(j)]) {
            scanColumn(m, mk, j, L);
            if (L.nonFinite) return false;
        }
    return true;
}

attn::DisplayRange rangeOfLines(const LineRanges& L, bool symmetric)
{
    float lo = INFINITY, hi = -INFINITY;
    for (std::size_t l = 0; l < L.lo.size(); ++l)
        if (L.loAt[l] >= 0) {
            lo = std::min(lo, L.lo[l]);
            hi = std::max(hi, L.hi[l]);
        }
    return attn::rangeFromMinMax(lo, hi, L.nonFinite, symmetric);
}

// The scores' and weights' ranges of every head of a CUDA result the device still holds, from the device
// (attn::DeviceMaps::ranges: two kernels a kind, a few values a head back), so the host reads none of its 2·H·T·S
// cells, whether they were copied back or not. False when the device cannot give them (no longer holds the result,
// or a CUDA error): the caller scans the host's maps (empty for a mapsOnDevice result: the empty maps' ranges). A
// CPU result never gets here, so never calls into CUDA.
bool deviceRanges(const attn::AttentionResult& r, const RangeOptions& o, ResultRanges& g)
{
    if (r.backend != attn::Backend::Cuda) return false;
    const attn::DeviceMaps maps(r);
    if (!maps.current()) return false;
    std::vector<attn::DisplayRange> scores, weights;
    if (!maps.ranges(attn::MapKind::Scores, 0, o.scores, scores).ok() ||
        !maps.ranges(attn::MapKind::Weights, 0, o.weights, weights).ok() || scores.size() != r.heads.size() ||
        weights.size() != r.heads.size())
        return false;
    g.scores = std::move(scores);
    g.weights = std::move(weights);
    return true;
}

} // namespace

ResultRanges computeResultRanges(const attn::AttentionResult& r, const RangeOptions& o, const ResultRanges* prev)
{
    ResultRanges g;
    g.options = o;
    g.valid = true;
    g.q = attn::displayRange(r.Q, nullptr, o.projection);
    g.k = attn::displayRange(r.K, nullptr, o.projection);
    g.v = attn::displayRange(r.V, nullptr, o.projection);
    g.concat = attn::displayRange(r.concat, nullptr, o.output);
    g.output = attn::displayRange(r.output, nullptr, o.output);
    const std::size_t H = r.heads.size();
    // A device result's scores and weights: their ranges from the device, no per-line ranges (CUDA results are never
    // incremental, and a later result based on this one finds no lines and scans whole).
    const bool onDevice = deviceRanges(r, o, g);
    g.scores.resize(H);
    g.weights.resize(H);
    g.headOut.resize(H);
    if (!onDevice) {
        g.scoreLines.resize(H);
        g.weightLines.resize(H);
    }
    const attn::ResultChange* change = attn::resultChange(r);
    g.serial = change ? change->serial : 0;
    // The rows of the stored scores are queries in Row layout, keys in Column layout.
    const bool row = r.layout == attn::Layout::Row;
    static const std::vector<int> none;
    const std::vector<int>& lines = !change ? none : row ? change->queries : change->keys;
    const std::vector<int>& at = !change ? none : row ? change->keys : change->queries;
    const bool fromPrev = !onDevice && prev && change && !change->all && prev->serial != 0 && change->base == prev->serial &&
                          prev->scoreLines.size() == H && change->headAll.size() == H;
    std::vector<char> updated(H, 0), wUpdated(H, 0);
    auto heads = [&](std::size_t first, std::size_t step) {
        for (std::size_t k = first; k < H; k += step) {
            const attn::HeadResult& h = r.heads[k];
            g.headOut[k] = attn::displayRange(h.output, nullptr, o.output);
            if (onDevice) continue;
            LineRanges& L = g.scoreLines[k];
            if (fromPrev && !change->headAll[k]) {
                L = prev->scoreLines[k];
                updated[k] = updateLines(h.scores, h.masked, lines, at, nullptr, L);
            }
            if (!updated[k]) scanAll(h.scores, h.masked, L);
            g.scores[k] = rangeOfLines(L, o.scores);
            // The weights' lines are queries in both layouts (a row's softmax rescale is one factor a query): the
            // stored rows in Row layout, the stored columns in Column layout.
            LineRanges& W = g.weightLines[k];
            const std::size_t queries = std::size_t(row ? h.weights.rows() : h.weights.cols());
            if (fromPrev && !change->headAll[k] && prev->weightLines.size() == H && change->rowScale.size() == H * queries) {
                W = prev->weightLines[k];
                const float* scale = change->rowScale.data() + k * queries;
                wUpdated[k] = row ? updateLines(h.weights, h.masked, lines, at, scale, W)
                                  : updateColumns(h.weights, h.masked, change->queries, change->keys, scale, W);
            }
            if (!wUpdated[k]) {
                if (row) scanAll(h.weights, h.masked, W);
                else scanAllColumns(h.weights, h.masked, W);
            }
            g.weights[k] = rangeOfLines(W, o.weights);
        }
    };
    // Heads are independent: large results scan them on a few threads (at n=4096, h=8, 268 M values: the scan
    // is bound by memory, which one core does not saturate). Small ones stay on this thread (a thread's start
    // costs more than their scan).
    constexpr std::size_t kThreadedValues = std::size_t(1) << 22;
    const std::size_t values = H && !onDevice ? H * std::size_t(r.heads[0].weights.size()) : 0;
    const std::size_t n = values >= kThreadedValues ? std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::min<std::size_t>(4, H)) : 1;
    std::vector<std::thread> team;
    for (std::size_t t = 1; t < n; ++t) team.emplace_back(heads, t, n);
    heads(0, n);
    for (std::thread& t : team) t.join();
    g.scoresUpdated = int(std::count(updated.begin(), updated.end(), 1));
    g.weightsUpdated = int(std::count(wUpdated.begin(), wUpdated.end(), 1));
    if (o.shared && r.heads.size() > 1) {
        const attn::DisplayRange a = attn::unionRange(g.scores, o.scores);
        const attn::DisplayRange b = attn::unionRange(g.weights, o.weights);
        const attn::DisplayRange c = attn::unionRange(g.headOut, o.output);
        std::fill(g.scores.begin(), g.scores.end(), a);
        std::fill(g.weights.begin(), g.weights.end(), b);
        std::fill(g.headOut.begin(), g.headOut.end(), c);
    }
    return g;
}

} // namespace app
