// The window's model mode: see model_state.h.
#include "state/model_state.h"

#include "messages.h"
#include "state/app_state.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace app {

std::string defaultModelDirectory()
{
    if (const char* env = std::getenv("ATTNSCOPE_MODEL_DIR"); env && *env) return env;
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return "build/models/all-MiniLM-L6-v2";
    return (exe.parent_path().parent_path() / "models" / "all-MiniLM-L6-v2").string();
}

namespace {

std::optional<std::string> pairText(const ModelState& m)
{
    return m.textB.empty() ? std::nullopt : std::optional<std::string>(m.textB);
}

// cos(emb(A), emb(B)) with each sentence run alone (as sentence-transformers compares two sentences),
// under the current weights and ablations.
void updateCosine(ModelState& m, int fromLayer)
{
    m.hasCosine = false;
    if (m.textB.empty() || !m.model || !m.run) return;
    // A and B run alone are kept: after an edit or ablation in layer l only layers l…L−1 are recomputed
    // (the layers below saw neither), like the pair run itself; a new text or model reruns them whole.
    bool ok = true;
    for (auto [side, text] : {std::pair{&m.runA, &m.textA}, {&m.runB, &m.textB}}) {
        if (fromLayer > 0 && *side && (*side)->hidden.size() == m.run->hidden.size()) {
            (*side)->ablated = m.run->ablated;
            ok = ok && attn::recomputeFrom(*m.model, fromLayer, **side).ok();
        } else {
            if (!*side) side->emplace();
            attn::ModelOptions o;
            o.ablate = m.run->ablated;
            ok = ok && attn::runModel(*m.model, *text, std::nullopt, o, **side).ok();
        }
    }
    // runModel and recomputeFrom set each layer's X to their run's input: put back the pair run's, which the
    // chain view shows.
    for (std::size_t l = 0; l < m.model->layers.size(); ++l) m.model->layers[l].attention.X = m.run->hidden[l];
    if (!ok) {
        m.runA.reset();  // left unspecified by the failure: the next change reruns them whole
        m.runB.reset();
        return;
    }
    m.cosine = attn::cosineSimilarity(m.runA->embedding, m.runB->embedding);
    m.hasCosine = true;
}

void noteChange(ModelState& m, const std::string& why, int fromLayer)
{
    m.hasCosineBefore = m.hasCosine;
    m.cosineBefore = m.cosine;
    updateCosine(m, fromLayer);
    m.lastChange = why;
}

void bumpFrom(ModelState& m, int layer)
{
    m.layerGeneration.resize(m.model ? m.model->layers.size() : 0, 0);
    for (std::size_t l = static_cast<std::size_t>(std::max(layer, 0)); l < m.layerGeneration.size(); ++l) ++m.layerGeneration[l];
}

} // namespace

void rerunModel(AppState& state, const std::string& why)
{
    ModelState& m = state.model;
    if (!m.model) return;
    attn::ModelOptions o;
    if (m.run) o.ablate = m.run->ablated;
    auto run = attn::runModel(*m.model, m.textA, pairText(m), o);
    if (!run) {
        m.error = run.status().message;  // the last good run stays on screen
        return;
    }
    m.error.clear();
    for (const std::string& w : run->warnings) postWarning(w);
    m.run = std::move(*run);
    m.embedding = m.run->embedding;
    m.openLayer = -1;  // the chain view's layer belongs to the old text
    bumpFrom(m, 0);
    noteChange(m, why, 0);
}

attn::Status openModel(AppState& state, const std::string& dir)
{
    auto model = attn::loadModel(dir);
    if (!model) {
        postError(model.status().message);
        return model.status();
    }
    ModelState& m = state.model;
    m.model = std::move(*model);
    m.dir = dir;
    m.run.reset();
    m.active = true;
    m.showView = true;
    if (m.textA.empty()) m.textA = "The cat sat on the mat.";
    rerunModel(state, "opened " + m.model->name);
    m.hasCosineBefore = false;
    return {};
}

void toggleAblation(AppState& state, int layer, int head)
{
    ModelState& m = state.model;
    if (!m.model || !m.run) return;
    auto& ab = m.run->ablated;
    const auto it = std::find(ab.begin(), ab.end(), std::make_pair(layer, head));
    const bool on = it == ab.end();
    if (on) ab.emplace_back(layer, head);
    else ab.erase(it);
    if (attn::Status s = attn::recomputeFrom(*m.model, layer, *m.run); !s.ok()) {
        postError(s.message);
        return;
    }
    m.embedding = m.run->embedding;
    bumpFrom(m, layer);
    noteChange(m, std::string(on ? "ablated" : "restored") + " layer " + std::to_string(layer) + " head " +
                      std::to_string(head), layer);
}

void openLayerInChain(AppState& state, int layer)
{
    ModelState& m = state.model;
    if (!m.model || !m.run || layer < 0 || layer >= static_cast<int>(m.model->layers.size())) return;
    attn::Session s;
    s.name = m.model->name + " layer " + std::to_string(layer);
    s.description = "Layer " + std::to_string(layer) + " of " + m.model->name +
                    ": X is the layer's input (hidden states), W^Q/W^K/W^V/W^O its trained weights. "
                    "Edits of the weights flow back into the model.";
    s.queryTokens = s.keyTokens = m.run->encoding.tokens;
    s.input = m.model->layers[static_cast<std::size_t>(layer)].attention;
    s.input.X = m.run->hidden[static_cast<std::size_t>(layer)];
    s.config.heads = m.model->config.heads;
    state.doc.resetSession(std::move(s), "");  // no undo to another layer: its weights would flow into this one
    m.openLayer = layer;
    m.showView = false;  // the chain view shows the layer; View → Model view brings the grid back
    m.syncedRevision = state.doc.revision();
}

void syncModelEdits(AppState& state)
{
    ModelState& m = state.model;
    if (m.openLayer < 0 || !m.model || !m.run || state.doc.revision() == m.syncedRevision) return;
    m.syncedRevision = state.doc.revision();
    const attn::AttentionInput& in = state.doc.session().input;
    attn::AttentionInput& dst = m.model->layers[static_cast<std::size_t>(m.openLayer)].attention;
    auto same = [](const auto& a, const auto& b) { return a.rows() == b.rows() && a.cols() == b.cols(); };
    if (!same(in.Wq, dst.Wq) || !same(in.Wk, dst.Wk) || !same(in.Wv, dst.Wv) || !same(in.Wo, dst.Wo) ||
        !same(in.bq, dst.bq) || !same(in.bk, dst.bk) || !same(in.bv, dst.bv) || !same(in.bo, dst.bo) ||
        state.doc.session().config.heads != m.model->config.heads) {
        postWarning("model layer " + std::to_string(m.openLayer) +
                    ": the session's shapes no longer match the model; its edits no longer flow back");
        m.openLayer = -1;
        return;
    }
    if (in.Wq == dst.Wq && in.Wk == dst.Wk && in.Wv == dst.Wv && in.Wo == dst.Wo && in.bq == dst.bq &&
        in.bk == dst.bk && in.bv == dst.bv && in.bo == dst.bo)
        return;  // an X edit, mask or view change: nothing for the model
    dst.Wq = in.Wq, dst.Wk = in.Wk, dst.Wv = in.Wv, dst.Wo = in.Wo;
    dst.bq = in.bq, dst.bk = in.bk, dst.bv = in.bv, dst.bo = in.bo;
    if (attn::Status s = attn::recomputeFrom(*m.model, m.openLayer, *m.run); !s.ok()) {
        postError(s.message);
        return;
    }
    m.embedding = m.run->embedding;
    bumpFrom(m, m.openLayer);
    noteChange(m, "edited layer " + std::to_string(m.openLayer) + "'s weights", m.openLayer);
}

void startModelMode(AppState& state, const ModelStartup& startup)
{
    state.model.textA = startup.text;
    state.model.textB = startup.pair;
    const std::string dir = startup.dir.empty() ? defaultModelDirectory() : startup.dir;
    state.model.dirField = dir;
    if (openModel(state, dir).ok() && startup.openLayer >= 0) {
        if (startup.openLayer < static_cast<int>(state.model.model->layers.size())) openLayerInChain(state, startup.openLayer);
        else postError("--model-layer " + std::to_string(startup.openLayer) + ": the model has " +
                       std::to_string(state.model.model->layers.size()) + " layers");
    }
}

} // namespace app
