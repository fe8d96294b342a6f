// What the model views (the grid, the lines view, the figures) draw from: an encoder's attn::ModelRun, a decoder's
// attn::DecoderRun, or an attention bundle's maps (attnscope/bundle.h). References into the source; valid while it
// lives. The figures read every map through the tile seam (maps()); the window's grid of a model's run also reads
// the heads' weights (headWeights) for its textures.
#pragma once

#include <attnscope/attention_maps.h>
#include <attnscope/decoder.h>
#include <attnscope/model.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace app {

struct RunView {
    const std::vector<std::string>& tokens;                // the queries' tokens (a decoder's: each token's text)
    const std::vector<std::string>& keyTokens;             // the keys' tokens (= tokens but in a bundle that says so)
    const std::vector<std::pair<int, int>>& ablated;       // (layer, head)
    const std::vector<attn::AttentionResult>* dense;       // a model's run: per layer, per query head; null: a bundle

    RunView(const attn::ModelRun& r)  // NOLINT: a run is a view
        : tokens(r.encoding.tokens), keyTokens(r.encoding.tokens), ablated(r.ablated), dense(&r.attention),
          m_dense(r.attention)
    {
    }
    // A decoder's run with its maps (attn::decoderMaps): a dense run keeps its heads' weights in r.weights.
    RunView(const attn::DecoderRun& r, std::shared_ptr<const attn::AttentionMaps> maps)
        : tokens(r.encoding.tokens), keyTokens(r.encoding.tokens), ablated(r.ablated), dense(&r.attention),
          m_dense(noResults()), m_decoderWeights(&r.weights), m_owned(std::move(maps)), m_maps(m_owned.get())
    {
    }
    // Maps that are not a run's (a bundle): nothing is ablated.
    RunView(const attn::AttentionMaps& maps, const std::vector<std::string>& queryTokens,
            const std::vector<std::string>& keyTokens_)
        : tokens(queryTokens), keyTokens(keyTokens_), ablated(noAblation()), dense(nullptr), m_dense(noResults()),
          m_maps(&maps)
    {
    }

    const attn::AttentionMaps& maps() const { return m_maps ? *m_maps : m_dense; }

    // A model run's (dense non-null) head `head` of layer `layer`: its n×n weights, an encoder's matrix or a dense
    // decoder run's kept map (rows with a stride).
    attn::MatrixCMap headWeights(int layer, int head) const
    {
        const auto l = static_cast<std::size_t>(layer), h = static_cast<std::size_t>(head);
        if (m_decoderWeights) return (*m_decoderWeights)[l][h].view();
        const attn::Matrix& w = (*dense)[l].heads[h].weights;
        return attn::MatrixCMap(w.data(), w.rows(), w.cols(), Eigen::OuterStride<>(w.cols()));
    }
    bool isDecoderRun() const { return m_decoderWeights != nullptr; }

    bool isAblated(int layer, int head) const
    {
        for (const auto& p : ablated)
            if (p.first == layer && p.second == head) return true;
        return false;
    }

private:
    static const std::vector<std::pair<int, int>>& noAblation()
    {
        static const std::vector<std::pair<int, int>> none;
        return none;
    }
    static const std::vector<attn::AttentionResult>& noResults()
    {
        static const std::vector<attn::AttentionResult> none;
        return none;
    }
    attn::DenseMaps m_dense;
    const std::vector<std::vector<attn::HeadWeights>>* m_decoderWeights = nullptr;
    std::shared_ptr<const attn::AttentionMaps> m_owned;
    const attn::AttentionMaps* m_maps = nullptr;
};

} // namespace app
