#include "view/heatmap_description.h"

#include <nlohmann/json.hpp>

#include <utility>

namespace app::view {
namespace {

// The figure's panel names (figure.h toString), used in the error messages both callers show.
const char* errorName(MapKind k)
{
    switch (k) {
    case MapKind::X: return "x";
    case MapKind::Xkv: return "xkv";
    case MapKind::Wq: return "wq";
    case MapKind::Wk: return "wk";
    case MapKind::Wv: return "wv";
    case MapKind::Wo: return "wo";
    case MapKind::Q: case MapKind::HeadQ: return "q";
    case MapKind::K: case MapKind::HeadK: return "k";
    case MapKind::V: case MapKind::HeadV: return "v";
    case MapKind::Scores: return "scores";
    case MapKind::Weights: return "weights";
    case MapKind::HeadOut: return "output";
    case MapKind::Concat: return "concat";
    case MapKind::Output: return "final";
    }
    return "";
}

bool perHead(MapKind k)
{
    switch (k) {
    case MapKind::Wq: case MapKind::Wk: case MapKind::Wv: case MapKind::Wo: case MapKind::HeadQ: case MapKind::HeadK:
    case MapKind::HeadV: case MapKind::Scores: case MapKind::Weights: case MapKind::HeadOut: return true;
    default: return false;
    }
}

} // namespace

std::string plainText(const std::string& rich)
{
    std::string out;
    out.reserve(rich.size());
    for (char c : rich)
        if (c != '{' && c != '}') out += c;
    return out;
}

attn::Expected<MapDescription> describeMap(const attn::Session& s, const attn::AttentionResult& r, MapKind kind, int head)
{
    const int H = static_cast<int>(r.heads.size());
    if (perHead(kind) && (head < 0 || head >= H))
        return attn::invalidArgument("head " + std::to_string(head) + ": the result has " + std::to_string(H) + " head" +
                                     (H == 1 ? "" : "s"));
    const auto fail = [&](const std::string& why) { return attn::invalidArgument(std::string("panel ") + errorName(kind) + ": " + why); };
    const bool column = s.config.layout == attn::Layout::Column;
    const bool direct = s.config.mode == attn::Mode::Direct;
    const std::vector<std::string>& qTok = s.queryTokens;
    const std::vector<std::string>& kTok = !s.keyTokens.empty() || s.config.mode != attn::Mode::Self ? s.keyTokens : s.queryTokens;
    const attn::HeadResult* hr = perHead(kind) ? &r.heads[static_cast<std::size_t>(head)] : (H > 0 ? &r.heads[0] : nullptr);
    // Per-head widths, from the result (Row: a head's Q is T×d_q; Column: d_q×T).
    const auto width = [&](const attn::Matrix& m) { return hr ? (column ? m.rows() : m.cols()) : Eigen::Index(0); };
    const Eigen::Index dq = hr ? width(hr->Q) : 0, dk = hr ? width(hr->K) : 0, dv = hr ? width(hr->V) : 0;

    // Described in Row orientation (tokens on rows), then turned for Column layout at the end.
    MapDescription d;
    AxisDescription rowAx, colAx;
    const auto tokens = [](AxisKind k, const std::vector<std::string>& t) { return AxisDescription{k, k == AxisKind::Query ? "query" : "key", t.empty() ? nullptr : &t}; };
    const auto feature = [](const char* title) { return AxisDescription{AxisKind::Feature, title, nullptr}; };
    // A block of columns of `m` (Row orientation): head `h`'s `w` features.
    Eigen::Index blockStart = 0, blockWidth = -1;
    bool blockOfRows = false;
    switch (kind) {
    case MapKind::X:
        if (direct) return fail("direct mode has no X");
        d.name = "X", d.source = &s.input.X, rowAx = tokens(AxisKind::Query, qTok), colAx = feature("d_{model}");
        break;
    case MapKind::Xkv:
        if (s.config.mode != attn::Mode::Cross) return fail("the session is not in cross mode");
        d.name = "X_{kv}", d.source = &s.input.Xkv, rowAx = tokens(AxisKind::Key, kTok), colAx = feature("d_{model}");
        break;
    case MapKind::Wq:
    case MapKind::Wk:
    case MapKind::Wv: {
        if (direct) return fail("direct mode has no projection weights");
        d.source = kind == MapKind::Wq ? &s.input.Wq : kind == MapKind::Wk ? &s.input.Wk : &s.input.Wv;
        d.name = kind == MapKind::Wq ? "W_{Q}" : kind == MapKind::Wk ? "W_{K}" : "W_{V}";
        const Eigen::Index w = kind == MapKind::Wq ? dq : kind == MapKind::Wk ? dk : dv;
        blockStart = head * w, blockWidth = w;
        rowAx = feature("d_{model}"), colAx = feature(kind == MapKind::Wv ? "d_{v}" : "d_{k}");
        break;
    }
    case MapKind::Wo:
        if (s.input.Wo.size() == 0) return fail("the session has no W_O");
        d.name = "W_{O}", d.source = &s.input.Wo, blockStart = head * dv, blockWidth = dv, blockOfRows = true;
        rowAx = feature("d_{v}"), colAx = feature("d_{out}");
        break;
    case MapKind::Q:
        d.name = "Q", d.source = &r.Q, rowAx = tokens(AxisKind::Query, qTok), colAx = feature(direct ? "h·d_{q}" : "h·d_{k}");
        d.headBlock = H > 1 ? static_cast<int>(dq) : 0;
        break;
    case MapKind::K:
        d.name = "K", d.source = &r.K, rowAx = tokens(AxisKind::Key, kTok), colAx = feature("h·d_{k}");
        d.headBlock = H > 1 ? static_cast<int>(dk) : 0;
        break;
    case MapKind::V:
        d.name = "V", d.source = &r.V, rowAx = tokens(AxisKind::Key, kTok), colAx = feature("h·d_{v}");
        d.headBlock = H > 1 ? static_cast<int>(dv) : 0;
        break;
    case MapKind::HeadQ: d.name = "Q", d.source = &hr->Q, rowAx = tokens(AxisKind::Query, qTok), colAx = feature("d_{k}"); break;
    case MapKind::HeadK: d.name = "K", d.source = &hr->K, rowAx = tokens(AxisKind::Key, kTok), colAx = feature("d_{k}"); break;
    case MapKind::HeadV: d.name = "V", d.source = &hr->V, rowAx = tokens(AxisKind::Key, kTok), colAx = feature("d_{v}"); break;
    case MapKind::Scores:
    case MapKind::Weights:
        d.name = kind == MapKind::Scores ? "scores" : "weights";
        d.source = kind == MapKind::Scores ? &hr->scores : &hr->weights;
        d.masked = hr->masked.size() == d.source->size() ? &hr->masked : nullptr;
        rowAx = tokens(AxisKind::Query, qTok), colAx = tokens(AxisKind::Key, kTok);
        break;
    case MapKind::HeadOut: d.name = "output", d.source = &hr->output, rowAx = tokens(AxisKind::Query, qTok), colAx = feature("d_{v}"); break;
    case MapKind::Concat:
        d.name = "concat", d.source = &r.concat, rowAx = tokens(AxisKind::Query, qTok), colAx = feature("h·d_{v}");
        d.headBlock = H > 1 ? static_cast<int>(dv) : 0;
        break;
    case MapKind::Output:
        d.name = "output", d.source = &r.output, rowAx = tokens(AxisKind::Query, qTok);
        colAx = feature(s.input.Wo.size() > 0 ? "d_{out}" : "h·d_{v}");
        break;
    }
    d.rows = d.source->rows(), d.cols = d.source->cols();
    if ((kind == MapKind::Scores || kind == MapKind::Weights) && d.source->size() == 0 && r.mapsOnDevice) {
        // Maps still on the device (a large CUDA result shown before its maps came back): the shape they have there,
        // so that the map is laid out, labelled and drawn (from the device) as it will be.
        // (As stored: T × S, or S × T in Column, where Q and K are stored transposed: app::storedMapShape's rule.)
        const Eigen::Index T = column ? r.Q.cols() : r.Q.rows(), S = column ? r.K.cols() : r.K.rows();
        d.rows = column ? S : T, d.cols = column ? T : S;
    }
    if (blockWidth >= 0) {
        // A head's block: columns in Row orientation (rows for W^O), the other way round in Column.
        if (blockOfRows != column) d.row0 = blockStart, d.rows = blockWidth;
        else d.col0 = blockStart, d.cols = blockWidth;
    }
    if (column) std::swap(rowAx, colAx);
    // Token labels only where there is one per row / column.
    if (rowAx.tokens && static_cast<Eigen::Index>(rowAx.tokens->size()) != d.rows) rowAx.tokens = nullptr;
    if (colAx.tokens && static_cast<Eigen::Index>(colAx.tokens->size()) != d.cols) colAx.tokens = nullptr;
    d.row = std::move(rowAx);
    d.col = std::move(colAx);
    return d;
}

attn::DisplayRange drawnRange(MapKind kind, const attn::DisplayRange& data, bool fixedWeights, attn::WeightsScale resolvedScale)
{
    if (kind != MapKind::Weights) return data;
    attn::DisplayRange r = data;
    if (fixedWeights) {
        r.lo = 0.0f;
        r.hi = 1.0f;
    }
    return attn::weightsRange(resolvedScale, r);
}

attn::WeightsScale viewWeightsScale(const std::string& viewJson)
{
    const nlohmann::json j = nlohmann::json::parse(viewJson, nullptr, false);
    if (!j.is_object()) return attn::WeightsScale::Auto;
    const auto it = j.find("weights_scale");
    if (it == j.end() || !it->is_string()) return attn::WeightsScale::Auto;
    return attn::weightsScaleFromString(it->get<std::string>()).value_or(attn::WeightsScale::Auto);
}

long keyCount(const MapDescription& d)
{
    if (d.col.kind == AxisKind::Key) return static_cast<long>(d.cols);
    if (d.row.kind == AxisKind::Key) return static_cast<long>(d.rows);
    return 0;
}

bool viewFixesWeightsRange(const std::string& viewJson)
{
    const nlohmann::json j = nlohmann::json::parse(viewJson, nullptr, false);
    if (!j.is_object()) return true;
    const auto it = j.find("weights_range");
    return it == j.end() || !it->is_string() || (*it != "auto" && *it != "locked");
}

} // namespace app::view
