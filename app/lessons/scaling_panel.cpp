// Lesson 3 (seeds 002/003): why q·k is divided by √d_k. Histograms of sampled q·k and q·k/√d_k against the
// predicted mean and variance, one softmax row with and without scaling, naive vs stable softmax, and
// the split form q/d^¼·k/d^¼.
#include "lessons/lesson_panels.h"

#include <algorithm>
#include <string>

namespace app {

namespace {

std::string samplingKey(const attn::ScalingSampleConfig& c)
{
    std::string k = std::to_string(c.mu) + "/" + std::to_string(c.sigma) + "/" + std::to_string(c.samples) + "/" +
                    std::to_string(c.seed) + "/" + std::to_string(c.bins);
    for (int d : c.dks) k += "/" + std::to_string(d);
    return k;
}

void drawSampling(LessonState& st)
{
    sectionTitle("q.k for q, k with entries ~ N(mu, sigma^2), as d_k grows");
    bool changed = false;
    float mu = float(st.sampling.mu), sigma = float(st.sampling.sigma);
    ImGui::SetNextItemWidth(120);
    changed |= ImGui::DragFloat("mu", &mu, 0.01f, -3.0f, 3.0f);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(120);
    changed |= ImGui::DragFloat("sigma", &sigma, 0.01f, 0.0f, 3.0f);
    ImGui::SameLine();
    int seed = int(st.sampling.seed);
    ImGui::SetNextItemWidth(100);
    changed |= ImGui::InputInt("seed", &seed);
    if (changed) {
        st.sampling.mu = mu;
        st.sampling.sigma = sigma;
        st.sampling.seed = std::uint64_t(std::max(0, seed));
    }
    const std::string key = samplingKey(st.sampling);
    if (!st.stats || st.statsKey != key) {  // sampling takes ~0.1 s: only when a parameter changed
        auto stats = attn::sampleDotProducts(st.sampling);
        if (!stats) {
            errorText(stats.status().message);
            return;
        }
        st.stats = std::move(*stats);
        st.statsKey = key;
    }
    const auto& all = *st.stats;
    ImGui::Checkbox("one x axis for every d_k", &st.commonAxis);
    const std::string histsKey = st.statsKey + (st.commonAxis ? "|common" : "|own");
    if (st.histsKey != histsKey) {
        // Re-bin on one range (the union of the per-d_k ranges) so the widths compare across rows; or keep
        // each d_k's own range (the shapes compare). Binning is core's attn::histogram.
        float lo = all.front().hist.lo, hi = all.front().hist.hi;
        for (const auto& d : all) {
            lo = std::min(lo, d.hist.lo);
            hi = std::max(hi, d.hist.hi);
        }
        st.hists.clear();
        for (const auto& d : all) {
            LessonState::HistPair p;
            if (st.commonAxis) {
                p.raw = *attn::histogram(d.dots, lo, hi, st.sampling.bins);
                p.scaled = *attn::histogram(d.scaledDots, lo, hi, st.sampling.bins);
            } else {
                p.raw = d.hist;
                p.scaled = d.scaledHist;
            }
            p.rawCurve = attn::normalBinCounts(p.raw, d.predictedMean, d.predictedVar, st.sampling.samples);
            p.scaledCurve = attn::normalBinCounts(p.scaled, d.predictedScaledMean, d.predictedScaledVar, st.sampling.samples);
            st.hists.push_back(std::move(p));
        }
        st.histsKey = histsKey;
    }
    textWrapped("q.k (blue) and q.k/sqrt(d_k) (orange); lines: normal with the predicted mean and variance");
    const float w = std::max(160.0f, std::min(560.0f, ImGui::GetContentRegionAvail().x - 90.0f));
    for (std::size_t i = 0; i < all.size(); ++i) {
        const LessonState::HistPair& p = st.hists[i];
        float maxCount = 1.0f;
        for (int c : p.raw.counts) maxCount = std::max(maxCount, float(c));
        for (int c : p.scaled.counts) maxCount = std::max(maxCount, float(c));
        ImGui::Text("d_k = %d", all[i].dk);
        ImGui::SameLine(90);
        const ImVec2 at = ImGui::GetCursorScreenPos();
        drawHistogram(("raw" + std::to_string(i)).c_str(), p.raw, &p.rawCurve, IM_COL32(70, 130, 200, 170), ImVec2(w, 56), maxCount);
        const ImVec2 after = ImGui::GetCursorScreenPos();
        ImGui::SetCursorScreenPos(at);
        drawHistogram(("scaled" + std::to_string(i)).c_str(), p.scaled, &p.scaledCurve, IM_COL32(230, 140, 40, 150),
                      ImVec2(w, 56), maxCount);
        ImGui::SetCursorScreenPos(after);
    }

    if (ImGui::BeginTable("moments", 7, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
        for (const char* h : {"d_k", "E(q.k) predicted", "empirical", "Var(q.k) predicted", "empirical",
                              "Var(scaled) predicted", "empirical"})
            ImGui::TableSetupColumn(h);
        ImGui::TableHeadersRow();
        for (const auto& d : all) {
            ImGui::TableNextRow();
            const double cells[6] = {d.predictedMean, d.mean, d.predictedVar, d.var, d.predictedScaledVar, d.scaledVar};
            ImGui::TableNextColumn();
            ImGui::Text("%d", d.dk);
            for (double c : cells) {
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(attn::formatValue(float(c), 4).c_str());
            }
        }
        ImGui::EndTable();
    }
    noteText("Seed 003: E(q.k) = d_k mu^2 and Var(q.k) = d_k (sigma^4 + 2 mu^2 sigma^2), so the spread grows "
             "with d_k; dividing by sqrt(d_k) makes the variance sigma^4 + 2 mu^2 sigma^2 whatever d_k is.");
}

void drawSoftmaxColumn(const char* title, const attn::Vector& scores, const attn::SoftmaxSummary& sm,
                       const attn::NaiveSoftmax& naive)
{
    ImGui::BeginGroup();
    ImGui::TextUnformatted(title);
    ImGui::Text("max weight %s, entropy %s of %s nats", attn::formatValue(sm.maxWeight, 3).c_str(),
                attn::formatValue(sm.entropy, 3).c_str(), attn::formatValue(sm.maxEntropy, 3).c_str());
    drawWeightBars(title, sm.weights, {}, nullptr, 300.0f, sm.argmax);
    ImGui::Text("naive exp(x)/sum exp(x): %d inf, %d NaN", naive.infCount, naive.nanCount);
    for (Eigen::Index j = 0; j < scores.size(); ++j) {
        const bool bad = !std::isfinite(naive.weights[j]);
        if (bad) ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(230, 80, 70, 255));
        ImGui::Text("x = %-10s exp = %-10s w = %s", attn::formatValue(scores[j], 4).c_str(),
                    attn::formatValue(naive.exps[j], 3).c_str(), attn::formatValue(naive.weights[j], 3).c_str());
        if (bad) ImGui::PopStyleColor();
    }
    ImGui::EndGroup();
}

void drawRow(const LessonInputs& in, LessonState& st)
{
    sectionTitle("One softmax row, with and without 1/sqrt(d_k)");
    // A result whose maps are still on the device (they follow it) has no row to read yet: a sampled one meanwhile.
    const bool haveSession = in.result && !in.result->heads.empty() && !in.result->mapsOnDevice && in.session &&
                             in.session->config.score != attn::Score::Additive;
    if (haveSession) ImGui::Checkbox("use the session's query (else sample one)", &st.rowFromSession);
    attn::Vector q;
    attn::Matrix K;
    if (st.rowFromSession && haveSession) {
        clampSelection(*in.result, st);
        auto v = attn::vectorView(*in.result, in.session->config.score, st.head, st.query);
        if (!v) {
            errorText(v.status().message);
            return;
        }
        q = v->q;
        K = v->keys;
        ImGui::Text("head %d, query %d of the session", st.head, st.query);
    } else {
        ImGui::SetNextItemWidth(140);
        ImGui::SliderInt("d_k", &st.rowDk, 1, 1024);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120);
        ImGui::SliderInt("keys", &st.rowKeys, 2, 16);
        ImGui::SetNextItemWidth(120);
        ImGui::DragFloat("entry mean", &st.rowMu, 0.01f, -3.0f, 3.0f);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120);
        ImGui::DragFloat("entry sd", &st.rowSigma, 0.01f, 0.0f, 3.0f);
        auto qk = attn::sampleQueryKeys(st.rowDk, st.rowKeys, st.rowMu, st.rowSigma, st.rowSeed);
        if (!qk) {
            errorText(qk.status().message);
            return;
        }
        q = qk->q;
        K = qk->K;
    }
    auto d = attn::scalingRowDemo(q, K);
    if (!d) {
        errorText(d.status().message);
        return;
    }
    ImGui::Checkbox("split form: (q / d_k^(1/4)) . (k / d_k^(1/4))", &st.splitForm);
    if (st.splitForm)
        textWrapped("split vs scaled scores: max |difference| = %s (float rounding): identical results",
                    attn::formatValue(d->maxAbsSplitDiff, 3).c_str());
    const attn::Vector& scaledScores = st.splitForm ? d->splitScores : d->scaledScores;
    drawSoftmaxColumn("without scaling: softmax(q.k)", d->rawScores, d->unscaled, d->naiveUnscaled);
    sameLineIfFits(300.0f, 40);   // the second column's weight bars are 300 px wide
    drawSoftmaxColumn(st.splitForm ? "split form: softmax(q/d^(1/4) . k/d^(1/4))" : "scaled: softmax(q.k / sqrt(d_k))",
                      scaledScores, d->scaled, d->naiveScaled);
    noteText("Seed 002: exp overflows float past 88.7, so a softmax without max-subtraction turns large scores into "
             "inf/inf = NaN. The stable softmax subtracts the row maximum first and never overflows; scaling keeps "
             "the scores small enough that the softmax does not saturate into one-hot.");
}

} // namespace

void drawScalingPanel(const LessonInputs& in, LessonState& st, bool* open)
{
    if (!beginLessonPanel(LessonId::Scaling, ImVec2(760, 820), open)) return;
    drawSampling(st);
    drawRow(in, st);
    ImGui::End();
}

} // namespace app
