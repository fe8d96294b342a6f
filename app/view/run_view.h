// What the model views (the grid, the lines view, the figures) draw from a run, whichever family ran it: an
// encoder's attn::ModelRun or a decoder's attn::DecoderRun. References into the run; valid while it lives.
#pragma once

#include <attnscope/decoder.h>
#include <attnscope/model.h>

#include <utility>
#include <vector>

namespace app {

struct RunView {
    const attn::Encoding& encoding;                        // the tokens (a decoder's: each token's decoded text)
    const std::vector<attn::AttentionResult>& attention;   // per layer, per query head
    const std::vector<std::pair<int, int>>& ablated;       // (layer, head)

    RunView(const attn::ModelRun& r) : encoding(r.encoding), attention(r.attention), ablated(r.ablated) {}  // NOLINT
    RunView(const attn::DecoderRun& r) : encoding(r.encoding), attention(r.attention), ablated(r.ablated) {}  // NOLINT

    bool isAblated(int layer, int head) const
    {
        for (const auto& p : ablated)
            if (p.first == layer && p.second == head) return true;
        return false;
    }
};

} // namespace app
