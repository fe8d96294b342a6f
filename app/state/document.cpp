// [SECTION] Helpers (resizing, undo budget)
// [SECTION] Names, transposition, fills
// [SECTION] Loading and saving
// [SECTION] Editing and undo
// [SECTION] Sizes, modes, scores, tokens
// [SECTION] Cell access
// [SECTION] Computing
#include "state/document.h"

#include "messages.h"

#include <attnscope/layout.h>
#include <attnscope/result_change.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

namespace app {
// -----------------------------------------------------------------------------------------------------
// [SECTION] Helpers (resizing, undo budget)
// -----------------------------------------------------------------------------------------------------

namespace {

// Undo keeps at most this many steps and this many bytes of snapshots (a session at n=1024, d_model=512 is
// ~12 MB, so large sessions keep fewer steps instead of growing without bound).
constexpr std::size_t kMaxUndoSteps = 200;
constexpr std::size_t kMaxUndoBytes = std::size_t(512) << 20;

std::size_t sessionBytes(const attn::Session& s)
{
    const attn::AttentionInput& in = s.input;
    std::size_t n = 0;
    for (const attn::Matrix* m : {&in.X, &in.Xkv, &in.Wq, &in.Wk, &in.Wv, &in.Wo, &in.Q, &in.K, &in.V,
                                  &in.additive.Aq, &in.additive.Ak})
        n += static_cast<std::size_t>(m->size()) * sizeof(float);
    return n + static_cast<std::size_t>(in.mask.custom.size());
}

void resizeKeep(attn::Matrix& m, int rows, int cols)
{
    if (m.rows() == rows && m.cols() == cols) return;
    attn::Matrix out = attn::Matrix::Zero(rows, cols);
    const int r = std::min<int>(rows, static_cast<int>(m.rows())), c = std::min<int>(cols, static_cast<int>(m.cols()));
    if (r > 0 && c > 0) out.topLeftCorner(r, c) = m.topLeftCorner(r, c);
    m.swap(out);
}

void resizeKeep(attn::Vector& v, int n)
{
    if (v.size() == 0 || v.size() == n) return;  // absent stays absent
    attn::Vector out = attn::Vector::Zero(n);
    const int k = std::min<int>(n, static_cast<int>(v.size()));
    out.head(k) = v.head(k);
    v.swap(out);
}

// Keeps each head's block when the per-head width changes (a width H·d is H column blocks of d).
void resizeHeadBlocks(attn::Matrix& m, int rows, int oldHeads, int oldD, int heads, int d)
{
    if (oldHeads <= 0 || oldD <= 0 || m.cols() != oldHeads * oldD) {
        resizeKeep(m, rows, heads * d);
        return;
    }
    attn::Matrix out = attn::Matrix::Zero(rows, heads * d);
    const int r = std::min<int>(rows, static_cast<int>(m.rows()));
    for (int h = 0; h < std::min(heads, oldHeads); ++h) {
        const int w = std::min(d, oldD);
        if (r > 0 && w > 0) out.block(0, h * d, r, w) = m.block(0, h * oldD, r, w);
    }
    m.swap(out);
}

// Head blocks: column blocks of width d (W^Q, W^K, W^V, and Q, K, V in direct mode), or row blocks of height
// d (W^O, whose rows are the concatenated heads' values).
attn::Matrix::BlockXpr headBlock(attn::Matrix& m, int h, int d, bool rowBlocks)
{
    return rowBlocks ? m.block(h * d, 0, d, m.cols()) : m.block(0, h * d, m.rows(), d);
}

float round2(double v) { return static_cast<float>(std::round(v * 100.0) / 100.0); }

void resizeTokens(std::vector<std::string>& t, int n, const char* prefix)
{
    if (t.empty()) return;
    const int old = static_cast<int>(t.size());
    t.resize(static_cast<std::size_t>(n));
    for (int i = old; i < n; ++i) t[static_cast<std::size_t>(i)] = prefix + std::to_string(i + 1);
}

} // namespace

// -----------------------------------------------------------------------------------------------------
// [SECTION] Names, transposition, fills
// -----------------------------------------------------------------------------------------------------

const char* matrixName(MatrixId id) { return attn::matrixNames(id).label; }

attn::Matrix makeFilled(FillKind kind, int rows, int cols, unsigned seed)
{
    attn::Matrix m = attn::Matrix::Zero(rows, cols);
    std::mt19937 rng(seed);
    switch (kind) {
    case FillKind::Zeros: break;
    case FillKind::Identity:
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c)
                if ((cols > 0 && r % cols == c) || (rows > 0 && c % rows == r)) m(r, c) = 1.0f;
        break;
    case FillKind::RandomNormal: {
        std::normal_distribution<float> d(0.0f, 1.0f);
        for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
        break;
    }
    case FillKind::Xavier: {
        // Glorot & Bengio (2010) normal initialisation: std = sqrt(2 / (fan_in + fan_out)).
        std::normal_distribution<float> d(0.0f, std::sqrt(2.0f / static_cast<float>(std::max(1, rows + cols))));
        for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
        break;
    }
    }
    return m;
}

std::uint64_t wordSeed(const std::string& word)
{
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64-bit offset basis and prime (fixed by the algorithm)
    for (unsigned char c : word) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

attn::Matrix seededNormal(int rows, int cols, std::uint64_t seed, float sigma)
{
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
    std::mt19937 rng(seq);
    auto uniform = [&] { return (static_cast<double>(rng()) + 0.5) / 4294967296.0; };  // in (0, 1), never 0
    attn::Matrix m(rows, cols);
    constexpr double kTwoPi = 6.283185307179586;
    for (Eigen::Index i = 0; i < m.size(); i += 2) {
        const double r = std::sqrt(-2.0 * std::log(uniform())), t = kTwoPi * uniform();
        m.data()[i] = round2(sigma * r * std::cos(t));
        if (i + 1 < m.size()) m.data()[i + 1] = round2(sigma * r * std::sin(t));
    }
    return m;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Loading and saving
// -----------------------------------------------------------------------------------------------------

Document::Document()
{
    attn::Session s;
    s.name = "untitled";
    s.queryTokens = s.keyTokens = {"x1", "x2", "x3"};
    s.input.X = makeFilled(FillKind::Identity, 3, 3, 0);
    s.input.Wq = makeFilled(FillKind::Identity, 3, 3, 0);
    s.input.Wk = makeFilled(FillKind::Identity, 3, 3, 0);
    s.input.Wv = makeFilled(FillKind::Identity, 3, 3, 0);
    m_session = std::move(s);
}

void Document::setSession(attn::Session s, const std::string& path)
{
    attn::restateInput(s.input, s.config.layout, attn::Layout::Row);  // stored as token rows
    if (s.config.mode == attn::Mode::Self && s.keyTokens.empty()) s.keyTokens = s.queryTokens;
    if (!m_pristine) pushUndo();  // the snapshot holds the old path too: undo brings both back
    m_pristine = false;
    m_stateId = ++m_nextId;
    m_sessionSerial = m_stateId;  // a value no earlier session had (the id counter only grows)
    m_session = std::move(s);
    m_path = path;
    m_cleanIds[m_path] = m_stateId;
    m_removedHeads.clear();
    m_hasResult = false;
    markDirty();
}

void Document::replaceSession(attn::Session s, bool inGesture)
{
    attn::restateInput(s.input, s.config.layout, attn::Layout::Row);  // stored as token rows
    if (s.config.mode == attn::Mode::Self && s.keyTokens.empty()) s.keyTokens = s.queryTokens;
    if (!inGesture) pushUndo();
    m_session = std::move(s);
    fitMaskAndTokens();
    markDirty();
}

bool Document::modified() const
{
    const auto it = m_cleanIds.find(m_path);
    return it == m_cleanIds.end() || it->second != m_stateId;
}

void Document::resetSession(attn::Session s, const std::string& path)
{
    setSession(std::move(s), path);
    m_undo.clear();
    m_redo.clear();
}

attn::Status Document::load(const std::string& path)
{
    auto s = attn::loadSession(path);
    if (!s.ok()) return s.status();
    setSession(std::move(*s), path);
    return {};
}

attn::Session Document::sessionForSave(const std::string& viewJson) const
{
    attn::Session s = m_session;
    attn::restateInput(s.input, attn::Layout::Row, s.config.layout);
    s.viewJson = viewJson;
    return s;
}

Sizes Document::sizes() const
{
    const attn::AttentionInput& in = m_session.input;
    const attn::AttentionConfig& cfg = m_session.config;
    Sizes z;
    z.H = std::max(1, cfg.heads);
    z.Hkv = cfg.kvHeads > 0 && cfg.kvHeads <= z.H ? cfg.kvHeads : z.H;
    if (cfg.mode == attn::Mode::Direct) {
        z.T = static_cast<int>(in.Q.rows());
        z.S = static_cast<int>(in.K.rows());
        z.dq = static_cast<int>(in.Q.cols()) / z.H;
        z.dk = static_cast<int>(in.K.cols()) / z.Hkv;
        z.dv = static_cast<int>(in.V.cols()) / z.Hkv;
        z.M = static_cast<int>(in.X.cols());
    } else {
        z.T = static_cast<int>(in.X.rows());
        z.S = cfg.mode == attn::Mode::Cross ? static_cast<int>(in.Xkv.rows()) : z.T;
        z.M = static_cast<int>(in.X.cols());
        z.dk = static_cast<int>(in.Wk.cols()) / z.Hkv;
        z.dq = z.dk;
        z.dv = static_cast<int>(in.Wv.cols()) / z.Hkv;
    }
    z.O = static_cast<int>(in.Wo.cols());
    z.A = cfg.score == attn::Score::Additive ? static_cast<int>(in.additive.wv.size()) : 0;
    return z;
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Editing and undo
// -----------------------------------------------------------------------------------------------------

void Document::pushUndo()
{
    m_undo.push_back({m_session, m_path, m_stateId, m_sessionSerial});
    m_stateId = ++m_nextId;  // the state about to be made
    m_pristine = false;
    m_redo.clear();
    std::size_t bytes = 0;
    for (const auto& s : m_undo) bytes += sessionBytes(s.session);
    while (m_undo.size() > 1 && (m_undo.size() > kMaxUndoSteps || bytes > kMaxUndoBytes)) {
        bytes -= sessionBytes(m_undo.front().session);
        m_undo.pop_front();
    }
}

void Document::edit(const std::function<void(attn::Session&)>& f)
{
    pushUndo();
    f(m_session);
    fitMaskAndTokens();
    markDirty();
}

void Document::beginGesture() { pushUndo(); }

void Document::applyInGesture(const std::function<void(attn::Session&)>& f)
{
    f(m_session);
    markDirty();
}

void Document::setCellInGesture(MatrixId id, int r, int c, float v)
{
    assert(std::isfinite(v) && r >= 0 && r < rows(id) && c >= 0 && c < cols(id));
    if (auto* m = matrixPtr(id)) (*m)(r, c) = v;
    else (*vectorPtr(id))(c) = v;
    markDirty();
}

bool Document::travel(std::deque<Snapshot>& from, std::deque<Snapshot>& to)
{
    if (from.empty()) return false;
    to.push_back({std::move(m_session), std::move(m_path), m_stateId, m_sessionSerial});
    Snapshot& back = from.back();
    m_session = std::move(back.session);
    m_path = std::move(back.path);
    m_stateId = back.id;
    m_sessionSerial = back.serial;
    from.pop_back();
    markDirty();
    return true;
}

bool Document::undo() { return travel(m_undo, m_redo); }
bool Document::redo() { return travel(m_redo, m_undo); }

// -----------------------------------------------------------------------------------------------------
// [SECTION] Sizes, modes, scores, tokens
// -----------------------------------------------------------------------------------------------------

attn::Status Document::setSizes(const Sizes& sizesIn)
{
    // A multi-head session stays multi-head when only the heads change (H_kv follows H).
    Sizes z = sizesIn;
    if (const Sizes cur = sizes(); cur.Hkv == cur.H && z.Hkv == cur.Hkv && z.H != cur.H) z.Hkv = z.H;
    auto bad = [](const char* what, int v, int lo, int hi) {
        return attn::invalidArgument(std::string(what) + ": expected an integer in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "], got " + std::to_string(v));
    };
    if (z.T < 1 || z.T > kMaxTokens) return bad("n", z.T, 1, kMaxTokens);
    if (z.S < 1 || z.S > kMaxTokens) return bad("n_kv", z.S, 1, kMaxTokens);
    if (z.M < 1 || z.M > kMaxWidth) return bad("d_model", z.M, 1, kMaxWidth);
    if (z.H < 1 || z.H > kMaxHeads) return bad("heads", z.H, 1, kMaxHeads);
    if (z.Hkv < 1 || z.Hkv > z.H || z.H % z.Hkv != 0)
        return attn::invalidArgument("kv heads: expected a divisor of heads = " + std::to_string(z.H) + ", got " +
                                     std::to_string(z.Hkv));
    if (z.dk < 1 || z.H * z.dk > kMaxWidth) return bad("d_k", z.dk, 1, kMaxWidth / z.H);
    if (z.dq < 1 || z.H * z.dq > kMaxWidth) return bad("d_q", z.dq, 1, kMaxWidth / z.H);
    if (z.dv < 1 || z.H * z.dv > kMaxWidth) return bad("d_v", z.dv, 1, kMaxWidth / z.H);
    if (z.O < 0 || z.O > kMaxWidth) return bad("d_out", z.O, 0, kMaxWidth);
    if (z.A < 0 || z.A > kMaxWidth) return bad("additive width", z.A, 0, kMaxWidth);

    const Sizes old = sizes();
    pushUndo();
    attn::Session& s = m_session;
    attn::AttentionInput& in = s.input;
    const bool direct = s.config.mode == attn::Mode::Direct;
    const bool cross = s.config.mode == attn::Mode::Cross;
    const int S = (direct || cross) ? z.S : z.T;
    // Heads removed keep their blocks for a later increase; heads added get them back or seeded weights.
    // A block counts only when the matrix has exactly old.H blocks of the old width (else it is new).
    // Query-side matrices have H blocks, key/value-side ones H_kv (grouped-query attention).
    auto resizeBlocks = [&](attn::Matrix& m, MatrixId id, int rows, int oldD, int d, int oldN, int n) {
        const bool blocks = m.cols() == oldN * oldD;
        if (blocks && n < oldN) stashHeads(m, id, n, oldN, oldD, false);
        resizeHeadBlocks(m, rows, oldN, oldD, n, d);
        if (blocks && n > oldN) fillNewHeads(m, id, oldN, n, d, false);
    };
    auto kvSide = [](MatrixId id) {
        return id == MatrixId::Wk || id == MatrixId::Wv || id == MatrixId::Bk || id == MatrixId::Bv || id == MatrixId::K ||
               id == MatrixId::V;
    };
    auto resizeHeads = [&](attn::Matrix& m, MatrixId id, int rows, int oldD, int d) {
        if (kvSide(id)) resizeBlocks(m, id, rows, oldD, d, old.Hkv, z.Hkv);
        else resizeBlocks(m, id, rows, oldD, d, old.H, z.H);
    };
    if (!direct) {
        resizeKeep(in.X, z.T, z.M);
        if (cross) resizeKeep(in.Xkv, S, z.M);
        resizeHeads(in.Wq, MatrixId::Wq, z.M, old.dk, z.dk);
        resizeHeads(in.Wk, MatrixId::Wk, z.M, old.dk, z.dk);
        resizeHeads(in.Wv, MatrixId::Wv, z.M, old.dv, z.dv);
        // Biases as 1×width rows, so removed heads' biases come back too (new ones start at zero).
        auto resizeBias = [&](attn::Vector& v, MatrixId id, int oldD, int d) {
            if (v.size() == 0) return;  // absent stays absent
            attn::Matrix m = v.transpose();
            resizeHeads(m, id, 1, oldD, d);
            v = m.row(0).transpose();
        };
        resizeBias(in.bq, MatrixId::Bq, old.dk, z.dk);
        resizeBias(in.bk, MatrixId::Bk, old.dk, z.dk);
        resizeBias(in.bv, MatrixId::Bv, old.dv, z.dv);
    } else {
        attn::Matrix q = in.Q, k = in.K, v = in.V;
        resizeHeads(q, MatrixId::Q, z.T, old.dq, z.dq);
        resizeHeads(k, MatrixId::K, S, old.dk, z.dk);
        resizeHeads(v, MatrixId::V, S, old.dv, z.dv);
        in.Q.swap(q);
        in.K.swap(k);
        in.V.swap(v);
    }
    if (z.O > 0) {
        if (in.Wo.size() == 0) {
            in.Wo = makeFilled(FillKind::Identity, z.H * z.dv, z.O, 0);
        } else {
            // W^O's rows are the heads' value blocks: resized as head blocks of its transpose.
            const bool blocks = in.Wo.rows() == old.H * old.dv;
            if (blocks && z.H < old.H) stashHeads(in.Wo, MatrixId::Wo, z.H, old.H, old.dv, true);
            attn::Matrix woT = in.Wo.transpose();
            resizeHeadBlocks(woT, z.O, old.H, old.dv, z.H, z.dv);
            in.Wo = woT.transpose();
            if (blocks && z.H > old.H) fillNewHeads(in.Wo, MatrixId::Wo, old.H, z.H, z.dv, true);
        }
        resizeKeep(in.bo, z.O);
    } else {
        in.Wo.resize(0, 0);
        in.bo.resize(0);
    }
    if (s.config.score == attn::Score::Additive) {
        const int a = std::max(1, z.A);
        resizeKeep(in.additive.Aq, direct ? z.dq : z.dk, a);
        resizeKeep(in.additive.Ak, z.dk, a);
        if (in.additive.wv.size() == 0) in.additive.wv = attn::Vector::Ones(a);
        else resizeKeep(in.additive.wv, a);
    }
    s.config.heads = z.H;
    s.config.kvHeads = z.Hkv == z.H ? 0 : z.Hkv;
    resizeTokens(s.queryTokens, z.T, direct ? "q" : "x");
    if (cross || direct) resizeTokens(s.keyTokens, S, direct ? "k" : "y");
    else s.keyTokens = s.queryTokens;
    fitMaskAndTokens();
    markDirty();
    return {};
}

void Document::stashHeads(const attn::Matrix& m, MatrixId id, int fromHead, int toHead, int d, bool rowBlocks)
{
    for (int h = fromHead; h < toHead; ++h)
        m_removedHeads[{static_cast<int>(id), h}] =
            rowBlocks ? attn::Matrix(m.block(h * d, 0, d, m.cols())) : attn::Matrix(m.block(0, h * d, m.rows(), d));
}

void Document::fillNewHeads(attn::Matrix& m, MatrixId id, int fromHead, int toHead, int d, bool rowBlocks)
{
    for (int h = fromHead; h < toHead; ++h) {
        auto block = headBlock(m, h, d, rowBlocks);
        auto it = m_removedHeads.find({static_cast<int>(id), h});
        if (it != m_removedHeads.end() && it->second.rows() == block.rows() && it->second.cols() == block.cols()) {
            block = it->second;
            continue;
        }
        if (id == MatrixId::Bq || id == MatrixId::Bk || id == MatrixId::Bv) {
            block.setZero();  // biases start at zero, as in the usual initialisations
            continue;
        }
        // Xavier/Glorot normal (std = sqrt(2 / (fan_in + fan_out))) for weights; Q, K, V given directly are
        // activations: unit variance. Seeded by matrix and head, so the same head gets the same numbers.
        const bool weights = id == MatrixId::Wq || id == MatrixId::Wk || id == MatrixId::Wv || id == MatrixId::Wo;
        const int fanIn = rowBlocks ? d : static_cast<int>(block.rows());
        const int fanOut = rowBlocks ? static_cast<int>(block.cols()) : d;
        const float sigma = weights ? std::sqrt(2.0f / static_cast<float>(std::max(1, fanIn + fanOut))) : 1.0f;
        block = seededNormal(static_cast<int>(block.rows()), static_cast<int>(block.cols()),
                             wordSeed(std::string(matrixName(id)) + " head " + std::to_string(h)), sigma);
    }
}

attn::Status Document::setHeads(int heads, bool keepWidths)
{
    if (heads < 1 || heads > kMaxHeads)
        return attn::invalidArgument("heads: expected an integer in [1, " + std::to_string(kMaxHeads) + "], got " +
                                     std::to_string(heads));
    const Sizes z = sizes();
    if (heads == z.H) return {};
    // KV heads: multi-head stays multi-head; grouped keeps H_kv, or the largest divisor of heads below it.
    int kv = heads;
    if (z.Hkv != z.H) {
        kv = std::min(z.Hkv, heads);
        while (heads % kv != 0) --kv;
    }
    if (!keepWidths) {
        Sizes nz = z;
        nz.H = heads;
        nz.Hkv = kv;
        return setSizes(nz);
    }
    const int tq = z.H * z.dq, tk = z.Hkv * z.dk, tv = z.Hkv * z.dv;
    if (tq % heads != 0 || tk % kv != 0 || tv % kv != 0 ||
        (m_session.config.score != attn::Score::Additive && tq / heads != tk / kv)) {
        if (kv == heads)
            return attn::invalidArgument("heads: keeping d_model×d_model splits the projections' widths (Q·K " +
                                         std::to_string(tk) + ", V " + std::to_string(tv) + ") into " +
                                         std::to_string(heads) + " equal heads, and they are not divisible by " +
                                         std::to_string(heads) + "; uncheck \"keep d_model×d_model\" to add or remove whole heads");
        return attn::invalidArgument("heads: keeping d_model×d_model splits Q (" + std::to_string(tq) + " wide) into " +
                                     std::to_string(heads) + " heads and K, V (" + std::to_string(tk) + ", " +
                                     std::to_string(tv) + ") into " + std::to_string(kv) +
                                     " KV heads of the same width, which these widths do not allow; uncheck "
                                     "\"keep d_model×d_model\" to add or remove whole heads");
    }
    // The projections keep their shape and every value: only how they are split into heads changes.
    edit([&](attn::Session& s) {
        s.config.heads = heads;
        s.config.kvHeads = kv == heads ? 0 : kv;
        if (s.config.score == attn::Score::Additive) {
            attn::AdditiveParams& a = s.input.additive;
            resizeKeep(a.Aq, tq / heads, static_cast<int>(a.Aq.cols()));
            resizeKeep(a.Ak, tk / kv, static_cast<int>(a.Ak.cols()));
        }
    });
    return {};
}

attn::Status Document::setKvHeads(int kvHeads)
{
    const Sizes z = sizes();
    if (kvHeads < 1 || kvHeads > z.H || z.H % kvHeads != 0)
        return attn::invalidArgument("kv heads: expected a divisor of heads = " + std::to_string(z.H) + ", got " +
                                     std::to_string(kvHeads));
    if (kvHeads == z.Hkv) return {};
    Sizes nz = z;
    nz.Hkv = kvHeads;
    return setSizes(nz);
}

void Document::fitMaskAndTokens()
{
    const Sizes z = sizes();
    attn::MaskSpec& m = m_session.input.mask;
    const bool selfMode = m_session.config.mode == attn::Mode::Self;
    const int S = selfMode ? z.T : z.S;
    if (!m.keyPadding.empty()) m.keyPadding.resize(static_cast<std::size_t>(S), 0);
    if (m.validLens.size() > 1) m.validLens.resize(static_cast<std::size_t>(z.T), S);
    if (m.custom.size() > 0 && (m.custom.rows() != z.T || m.custom.cols() != S)) {
        attn::MaskMatrix c = attn::MaskMatrix::Zero(z.T, S);
        const int r = std::min<int>(z.T, static_cast<int>(m.custom.rows()));
        const int k = std::min<int>(S, static_cast<int>(m.custom.cols()));
        if (r > 0 && k > 0) c.topLeftCorner(r, k) = m.custom.topLeftCorner(r, k);
        m.custom.swap(c);
    }
    if (selfMode) m_session.keyTokens = m_session.queryTokens;
}

void Document::setMode(attn::Mode mode)
{
    if (mode == m_session.config.mode) return;
    edit([&](attn::Session& s) {
        attn::AttentionInput& in = s.input;
        const bool wasDirect = s.config.mode == attn::Mode::Direct;
        if (mode == attn::Mode::Direct && m_hasResult) {
            // Start from the projections just computed (converted back to canonical orientation).
            const bool col = m_result.layout == attn::Layout::Column;
            in.Q = col ? attn::Matrix(m_result.Q.transpose()) : m_result.Q;
            in.K = col ? attn::Matrix(m_result.K.transpose()) : m_result.K;
            in.V = col ? attn::Matrix(m_result.V.transpose()) : m_result.V;
        }
        if (mode == attn::Mode::Direct && in.Q.size() == 0) {
            in.Q = makeFilled(FillKind::Identity, 3, 3, 0);
            in.K = in.Q;
            in.V = in.Q;
        }
        if (mode != attn::Mode::Direct && (in.X.size() == 0 || in.Wq.size() == 0)) {
            const int n = wasDirect ? static_cast<int>(in.Q.rows()) : 3;
            const int w = wasDirect ? static_cast<int>(in.K.cols()) : 3;
            in.X = makeFilled(FillKind::Identity, n, w, 0);
            in.Wq = makeFilled(FillKind::Identity, w, w, 0);
            in.Wk = in.Wq;
            in.Wv = makeFilled(FillKind::Identity, w, wasDirect ? static_cast<int>(in.V.cols()) : w, 0);
        }
        if (mode == attn::Mode::Cross && in.Xkv.size() == 0) in.Xkv = in.X;
        if (mode == attn::Mode::Cross && (s.keyTokens.empty() || s.keyTokens.size() != static_cast<std::size_t>(in.Xkv.rows()))) {
            s.keyTokens.clear();
            for (int i = 0; i < in.Xkv.rows(); ++i) s.keyTokens.push_back("y" + std::to_string(i + 1));
        }
        if (mode == attn::Mode::Direct) {
            if (s.queryTokens.size() != static_cast<std::size_t>(in.Q.rows())) s.queryTokens.clear();
            if (s.keyTokens.size() != static_cast<std::size_t>(in.K.rows())) s.keyTokens.clear();
        }
        if (mode == attn::Mode::Self) {
            if (s.queryTokens.size() != static_cast<std::size_t>(in.X.rows())) s.queryTokens.clear();
            s.keyTokens = s.queryTokens;
        }
        if (mode == attn::Mode::Cross && s.queryTokens.size() != static_cast<std::size_t>(in.X.rows()))
            s.queryTokens.clear();
        s.config.mode = mode;
        // Masks sized for the old key count would not fit: keep only the ones that still do.
        const int S = mode == attn::Mode::Direct ? static_cast<int>(in.K.rows())
                      : mode == attn::Mode::Cross ? static_cast<int>(in.Xkv.rows())
                                                  : static_cast<int>(in.X.rows());
        if (!in.mask.keyPadding.empty()) in.mask.keyPadding.assign(static_cast<std::size_t>(S), 0);
        if (in.mask.custom.size() > 0) in.mask.custom.resize(0, 0);
        if (in.mask.validLens.size() > 1) in.mask.validLens.clear();
    });
}

void Document::setScore(attn::Score sc)
{
    if (sc == m_session.config.score) return;
    edit([&](attn::Session& s) {
        s.config.score = sc;
        if (sc == attn::Score::Additive) {
            s.config.scale.reset();  // core refuses a scale with the additive score
            const Sizes z = sizes();
            const int a = std::max(1, z.dk);
            if (s.input.additive.Aq.size() == 0) {
                // Seeded random parameters scaled so that q·A_q + k·A_k stays where tanh is not flat: with
                // identity A and w_v = 1 (before), tanh saturated and every score was ≈ a (issue 11).
                // A column of N(0, σ²) dotted with a vector of norm |q| has std σ·|q|: σ = 0.7/|q| gives each
                // part a std of 0.7, the sum ≈ 1. |q| is estimated from the shown result's Q (any layout:
                // the root mean square of its entries times √d).
                const int dq = s.config.mode == attn::Mode::Direct ? z.dq : z.dk;
                auto sigmaFor = [&](const attn::Matrix& m, int d) {
                    if (m.size() == 0) return std::sqrt(2.0f / static_cast<float>(d + a));  // Xavier
                    const double rms = std::sqrt(m.squaredNorm() / static_cast<double>(m.size()));
                    return static_cast<float>(0.7 / std::max(1e-3, rms * std::sqrt(static_cast<double>(d))));
                };
                const bool direct = s.config.mode == attn::Mode::Direct;
                const attn::Matrix& q = direct ? s.input.Q : m_hasResult ? m_result.Q : attn::Matrix();
                const attn::Matrix& k = direct ? s.input.K : m_hasResult ? m_result.K : attn::Matrix();
                s.input.additive.Aq = seededNormal(dq, a, wordSeed("A_q"), sigmaFor(q, dq));
                s.input.additive.Ak = seededNormal(z.dk, a, wordSeed("A_k"), sigmaFor(k, z.dk));
                s.input.additive.wv = seededNormal(1, a, wordSeed("w_v"), 1.0f).row(0).transpose();
            }
        }
    });
}

attn::Status Document::setTokensFromSentence(const std::string& sentence, bool keys)
{
    std::vector<std::string> words;
    std::string w;
    for (char c : sentence + " ") {
        if (std::isspace(static_cast<unsigned char>(c))) {
            if (!w.empty()) words.push_back(w);
            w.clear();
        } else {
            w.push_back(c);
        }
    }
    if (words.empty()) return attn::invalidArgument("tokens: the sentence has no words");
    if (words.size() > static_cast<std::size_t>(kMaxTokens))
        return attn::invalidArgument("tokens: " + std::to_string(words.size()) + " words, at most " +
                                     std::to_string(kMaxTokens));
    Sizes z = sizes();
    const bool selfMode = m_session.config.mode == attn::Mode::Self;
    const bool direct = m_session.config.mode == attn::Mode::Direct;
    const bool keySide = keys && !selfMode;
    // The matrices whose rows are this side's tokens, with a salt so that K and V rows of one word differ.
    struct Target {
        MatrixId id;
        const char* salt;
        attn::Matrix old;
    };
    std::vector<Target> targets;
    if (direct && keySide) targets = {{MatrixId::K, "", {}}, {MatrixId::V, "V:", {}}};
    else if (direct) targets = {{MatrixId::Q, "", {}}};
    else targets = {{keySide ? MatrixId::Xkv : MatrixId::X, "", {}}};
    for (Target& t : targets) t.old = *matrixPtr(t.id);
    const std::vector<std::string> oldWords = keySide ? m_session.keyTokens : m_session.queryTokens;

    if (keySide) z.S = static_cast<int>(words.size());
    else z.T = static_cast<int>(words.size());
    if (selfMode) z.S = z.T;
    ATTNSCOPE_RETURN_IF_ERROR(setSizes(z));  // one undo step for the resize...
    // ...and the rows and labels join it (no separate step: the user did one thing).
    std::map<std::string, int> oldRow;  // a word's first row before
    for (int i = static_cast<int>(oldWords.size()) - 1; i >= 0; --i) oldRow[oldWords[static_cast<std::size_t>(i)]] = i;
    for (Target& t : targets) {
        attn::Matrix& m = *matrixPtr(t.id);
        for (int i = 0; i < static_cast<int>(words.size()); ++i) {
            const std::string& w = words[static_cast<std::size_t>(i)];
            const auto it = oldRow.find(w);
            if (it != oldRow.end() && it->second < t.old.rows() && t.old.cols() == m.cols())
                m.row(i) = t.old.row(it->second);
            else
                m.row(i) = seededNormal(1, static_cast<int>(m.cols()), wordSeed(t.salt + w), 1.0f).row(0);
        }
    }
    if (keySide) m_session.keyTokens = words;
    else m_session.queryTokens = words;
    if (selfMode) m_session.keyTokens = m_session.queryTokens;
    markDirty();
    return {};
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Cell access
// -----------------------------------------------------------------------------------------------------

attn::Matrix* Document::matrixPtr(MatrixId id)
{
    attn::AttentionInput& in = m_session.input;
    switch (id) {
    case MatrixId::X: return &in.X;
    case MatrixId::Xkv: return &in.Xkv;
    case MatrixId::Wq: return &in.Wq;
    case MatrixId::Wk: return &in.Wk;
    case MatrixId::Wv: return &in.Wv;
    case MatrixId::Wo: return &in.Wo;
    case MatrixId::Q: return &in.Q;
    case MatrixId::K: return &in.K;
    case MatrixId::V: return &in.V;
    case MatrixId::Aq: return &in.additive.Aq;
    case MatrixId::Ak: return &in.additive.Ak;
    default: return nullptr;
    }
}

attn::Vector* Document::vectorPtr(MatrixId id)
{
    attn::AttentionInput& in = m_session.input;
    switch (id) {
    case MatrixId::Bq: return &in.bq;
    case MatrixId::Bk: return &in.bk;
    case MatrixId::Bv: return &in.bv;
    case MatrixId::Bo: return &in.bo;
    case MatrixId::Wv_additive: return &in.additive.wv;
    default: return nullptr;
    }
}

const attn::Matrix* Document::matrixPtr(MatrixId id) const { return const_cast<Document*>(this)->matrixPtr(id); }
const attn::Vector* Document::vectorPtr(MatrixId id) const { return const_cast<Document*>(this)->vectorPtr(id); }

int Document::rows(MatrixId id) const
{
    if (auto* m = matrixPtr(id)) return static_cast<int>(m->rows());
    return vectorPtr(id)->size() > 0 ? 1 : 0;
}

int Document::cols(MatrixId id) const
{
    if (auto* m = matrixPtr(id)) return static_cast<int>(m->cols());
    return static_cast<int>(vectorPtr(id)->size());
}

float Document::cell(MatrixId id, int r, int c) const
{
    if (auto* m = matrixPtr(id)) return (*m)(r, c);
    return (*vectorPtr(id))(c);
}

bool Document::present(MatrixId id) const { return rows(id) > 0 && cols(id) > 0; }

attn::Status Document::setMatrix(MatrixId id, const attn::Matrix& m)
{
    if (m.rows() != rows(id) || m.cols() != cols(id))
        return attn::invalidArgument(std::string(matrixName(id)) + ": expected " + std::to_string(rows(id)) + "×" +
                                     std::to_string(cols(id)) + ", got " + std::to_string(m.rows()) + "×" +
                                     std::to_string(m.cols()) + " (change the sizes first)");
    for (Eigen::Index i = 0; i < m.size(); ++i)
        if (!std::isfinite(m.data()[i])) return attn::invalidArgument(std::string(matrixName(id)) + ": values must be finite");
    edit([&](attn::Session&) {
        if (auto* p = matrixPtr(id)) *p = m;
        else *vectorPtr(id) = m.row(0).transpose();
    });
    return {};
}

void Document::setPresent(MatrixId id, bool on)
{
    if (present(id) == on) return;
    const Sizes z = sizes();
    if (id == MatrixId::Wo) {
        Sizes nz = z;
        nz.O = on ? z.H * z.dv : 0;
        setSizes(nz);
        return;
    }
    edit([&](attn::Session&) {
        attn::Vector* v = vectorPtr(id);
        if (!v) return;
        if (!on) { v->resize(0); return; }
        int n = 0;
        if (id == MatrixId::Bq || id == MatrixId::Bk) n = z.H * z.dk;
        else if (id == MatrixId::Bv) n = z.H * z.dv;
        else if (id == MatrixId::Bo) n = z.O;
        if (n > 0) *v = attn::Vector::Zero(n);
    });
}

// -----------------------------------------------------------------------------------------------------
// [SECTION] Computing
// -----------------------------------------------------------------------------------------------------

namespace {

// Threads that pool a result's parts on the worker (the cores, at most 4: a frame's parts are a few maps). The
// compute itself runs on the cores too, but not at the same time (pooling follows it).
int poolThreads() { return int(std::clamp(std::thread::hardware_concurrency(), 1u, 4u)); }

// What every compute runs.
attn::Status computeCanonical(attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out)
{
    attn::restateInput(in, attn::Layout::Row, cfg.layout);  // stored as token rows
    return attn::compute(in, cfg, out);
}

} // namespace

Document::~Document() = default;

Document::ShapeKey Document::shapeKey() const
{
    const Sizes z = sizes();
    const attn::AttentionConfig& c = m_session.config;
    return {z.T, z.S, z.M, z.H, z.dq, z.dk, z.dv, z.O, z.A, static_cast<int>(c.mode), static_cast<int>(c.score),
            static_cast<int>(c.layout), static_cast<int>(backend)};
}

void Document::startWorker(ComputeFn fn, FetchFn fetch)
{
    // The worker transposes for the Column layout (the caller's fn sees the inputs as core gets them), then
    // computes, then the result's colour ranges and the pooled parts its maps' views asked for: all off the
    // frame loop. m_jobRangeOptions, m_workerRanges, m_jobPoolWanted and m_workerPooled are touched by the
    // worker only while its job runs, by take() only when none runs.
    m_worker = std::make_unique<ComputeWorker>(
        [this, inner = std::move(fn)](attn::AttentionInput& in, const attn::AttentionConfig& cfg, attn::AttentionResult& out) {
            attn::restateInput(in, attn::Layout::Row, cfg.layout);  // stored as token rows
            const attn::Status st = inner ? inner(in, cfg, out) : attn::compute(in, cfg, out);
            if (st.ok()) {
                const auto t0 = std::chrono::steady_clock::now();
                // The buffer computed into held the result shown before the one now shown (its ranges are
                // m_workerRanges since take()'s swap) or a copy of the one now shown (m_jobPrevRanges): the
                // one whose serial the change names serves as the base (none: a full scan).
                const attn::ResultChange* ch = attn::resultChange(out);
                const ResultRanges* prev = ch && ch->base == m_workerRanges.serial ? &m_workerRanges : &m_jobPrevRanges;
                m_workerRanges = computeResultRanges(out, m_jobRangeOptions, prev);
                m_workerRanges.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                const auto t1 = std::chrono::steady_clock::now();
                m_workerPooled = poolParts(out, m_jobPoolWanted, poolThreads());
                m_workerPoolMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
            } else {
                m_workerPooled.clear();
            }
            return st;
        },
        std::move(fetch));
}

void Document::setRangeOptions(const RangeOptions& o)
{
    m_rangeOptions = o;
    if (m_hasResult && (!m_ranges.valid || m_ranges.options != o)) m_ranges = computeResultRanges(m_result, o);
}

const attn::Matrix* Document::prepooled(const attn::Matrix* source, const PoolPart& part) const
{
    const int slot = resultSlot(m_result, source);
    return slot >= 0 ? findPooled(m_pooled, slot, part) : nullptr;
}

void Document::wantPooled(const attn::Matrix* source, const PoolPart& part)
{
    // Only with a worker: without one the frame computes, and pools, anyway.
    if (!m_worker || part.empty()) return;
    // At most a few dozen maps are on screen at once; the cap keeps a bug from growing the list without bound.
    constexpr std::size_t kMaxPoolRequests = 64;
    if (const int slot = resultSlot(m_result, source); slot >= 0 && m_poolWanted.size() < kMaxPoolRequests)
        addPoolRequest(m_poolWanted, slot, part);
}

void Document::showFinished(const attn::Status& st, std::uint64_t revision, const ShapeKey& shape, double ms)
{
    m_resultRevision = revision;
    if (!st.ok()) {
        if (st.message != m_lastError.message) postError(st.message);
        m_lastError = st;
        return;
    }
    m_hasResult = true;
    m_resultShape = shape;
    m_resultMs = ms;
    m_lastError = {};
    ++m_generation;
    for (const std::string& w : m_result.warnings) postWarningOnce("compute:" + w, w);
}

bool Document::recomputeIfNeeded()
{
    if (m_worker) {
        bool shown = false;
        // The shown result's maps, back from the device: the same result, whole now (a new generation: views that
        // made something of its empty maps make it again).
        if (std::optional<ComputeWorker::MapsFinished> m = m_worker->takeMaps(m_result)) {
            if (m->moved) {
                m_mapsMs = m->ms;
                ++m_generation;
                shown = true;
            } else if (!m->status.ok() && m_result.mapsOnDevice && m->generation == m_result.deviceGeneration) {
                // The device lost the result before its maps came back (another compute on the device replaced it,
                // or a CUDA error): compute the same inputs again with the maps copied back, unless newer inputs
                // are on their way anyway; inputs that no longer compute leave the maps lost.
                if (m_resultRevision == m_revision && m_lastError.ok()) {
                    m_copyMapsNext = true;
                    m_dirty = true;
                } else if (!m_dirty && !m_awaiting) {
                    m_mapsLost = true;
                }
            }
        }
        // Take first: the worker starts a new job only once its finished result was taken.
        if (std::optional<ComputeWorker::Finished> f = m_worker->take(m_result)) {
            m_awaiting = false;
            if (f->status.ok()) {
                std::swap(m_ranges, m_workerRanges);
                std::swap(m_pooled, m_workerPooled);
                m_poolMs = m_workerPoolMs;
                m_mapsLost = false;
                m_mapsMs = 0;
                if (m_ranges.options != m_rangeOptions) m_ranges = computeResultRanges(m_result, m_rangeOptions);
            } else if (m_result.mapsOnDevice && !m_dirty) {
                // The last good result stays without its maps: they may still be on the device (a compute that
                // failed before it reached the device), else its maps are lost.
                m_worker->fetchMapsOf(m_result);
                if (!m_worker->fetchingMaps()) m_mapsLost = true;
            }
            showFinished(f->status, f->revision, m_submittedShape, f->ms);
            shown = true;
        }
        if (m_dirty && !m_awaiting) {
            m_dirty = false;
            m_awaiting = true;
            m_submittedShape = shapeKey();
            m_jobRangeOptions = m_rangeOptions;
            m_jobPrevRanges = m_ranges;  // a copy: the frames keep reading m_ranges
            m_jobPoolWanted = std::move(m_poolWanted);
            m_poolWanted.clear();
            attn::AttentionConfig cfg = m_session.config;
            cfg.backend = backend;
            // On the device large maps stay there and come back after the result is shown (ComputeWorker); the CPU
            // backend ignores the field (and a Cpu session never asks for it).
            const Sizes z = sizes();
            const double mapBytes = 2.0 * z.H * double(z.T) * double(z.S) * sizeof(float);
            cfg.mapsOnDevice = backend != attn::Backend::Cpu && !m_copyMapsNext && mapBytes >= double(mapsOnDeviceFromBytes);
            m_copyMapsNext = false;
            m_worker->submit(m_session.input, cfg, m_revision);
        }
        return shown;
    }
    if (!m_dirty) return false;
    m_dirty = false;
    attn::AttentionInput in = m_session.input;
    attn::AttentionConfig cfg = m_session.config;
    cfg.backend = backend;
    const auto t0 = std::chrono::steady_clock::now();
    attn::Status st = computeCanonical(in, cfg, m_scratch);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (st.ok()) {
        std::swap(m_result, m_scratch);
        m_ranges = computeResultRanges(m_result, m_rangeOptions);
        m_pooled.clear();
    }
    showFinished(st, m_revision, shapeKey(), ms);
    return true;
}

void Document::waitForWorkerIdle()
{
    waitForCompute();
    if (m_worker) m_worker->waitUntilDone();
}

void Document::waitForCompute()
{
    if (!m_worker) {
        recomputeIfNeeded();
        return;
    }
    for (;;) {
        recomputeIfNeeded();
        if (!computing() && !mapsArriving()) return;
        // The maps still owed with nothing left to bring them (cannot happen: a fetch or a compute is always
        // queued while mapsArriving()); never wait forever for them.
        if (!computing() && !m_worker->fetchingMaps()) {
            m_worker->waitUntilDone();
            recomputeIfNeeded();
            if (!computing() && mapsArriving() && !m_worker->fetchingMaps()) m_mapsLost = true;
            continue;
        }
        m_worker->waitUntilDone();
    }
}

} // namespace app
