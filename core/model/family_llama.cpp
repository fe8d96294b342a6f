// The llama family (Llama 2/3, Mistral, Qwen2, SmolLM2): RMSNorm, RoPE, grouped-query attention, SwiGLU.
//   h = RMSNorm(x)·g₁;  Q, K, V = h·W^Q (+b), h·W^K (+b), h·W^V (+b);  Q, K = RoPE(Q), RoPE(K)
//   x' = x + attention(Q, K, V)·W^O;  out = x' + (SiLU(RMSNorm(x')·g₂·W_gate) ⊙ (RMSNorm(x')·g₂·W_up))·W_down
// Names as the checkpoints name them: Hugging Face's model.layers.N.self_attn.q_proj, GGUF's blk.N.attn_q.
#include "decoder_family.h"

#include "attnscope/preset_io.h"  // checkJsonDepth, clipForMessage

#include <nlohmann/json.hpp>

#include <cmath>

namespace attn::detail {
using json = nlohmann::json;

namespace {

Status intField(const json& j, const std::string& file, const char* key, int lo, int hi, int& out, bool required = true)
{
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (required) return invalidArgument(file + ": " + key + " is missing");
        return Status::success();
    }
    if (!it->is_number_integer() || it->get<long long>() < lo || it->get<long long>() > hi)
        return invalidArgument(file + ": " + key + ": expected an integer in " + std::to_string(lo) + ".." +
                               std::to_string(hi) + ", got " + clipForMessage(it->dump()));
    out = static_cast<int>(it->get<long long>());
    return Status::success();
}

Status floatField(const json& j, const std::string& file, const char* key, double lo, double hi, float& out)
{
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::success();
    if (!it->is_number() || !(it->get<double>() > lo) || !(it->get<double>() < hi))
        return invalidArgument(file + ": " + key + ": expected a number in (" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "), got " + clipForMessage(it->dump()));
    out = static_cast<float>(it->get<double>());
    return Status::success();
}

Status checkShapes(const std::string& file, DecoderConfig& c)
{
    if (c.headDim == 0) {
        if (c.hidden % c.heads != 0)
            return invalidArgument(file + ": num_attention_heads " + std::to_string(c.heads) + " does not divide hidden_size " +
                                   std::to_string(c.hidden));
        c.headDim = c.hidden / c.heads;
    }
    if (c.kvHeads == 0) c.kvHeads = c.heads;
    if (c.heads % c.kvHeads != 0)
        return invalidArgument(file + ": num_key_value_heads " + std::to_string(c.kvHeads) +
                               " does not divide num_attention_heads " + std::to_string(c.heads));
    if (c.headDim % 2 != 0) return invalidArgument(file + ": head width " + std::to_string(c.headDim) + " is odd (RoPE rotates pairs)");
    return Status::success();
}

// Llama 3's RoPE scaling (rope_scaling.rope_type "llama3"): long wavelengths divided by `factor`, short ones
// kept, a smooth ramp between; stored as a per-pair divisor of the inverse frequency.
void llama3FreqFactors(DecoderConfig& c, double factor, double lowFreq, double highFreq, double originalContext)
{
    const int pairs = c.headDim / 2;
    c.ropeFreqFactors.assign(static_cast<std::size_t>(pairs), 1.0f);
    const double lowWavelen = originalContext / lowFreq, highWavelen = originalContext / highFreq;
    for (int i = 0; i < pairs; ++i) {
        const double invFreq = std::pow(double(c.ropeTheta), -2.0 * i / c.headDim);
        const double wavelen = 2 * M_PI / invFreq;
        double f = 1.0;
        if (wavelen > lowWavelen) f = factor;
        else if (wavelen >= highWavelen) {
            const double smooth = (originalContext / wavelen - lowFreq) / (highFreq - lowFreq);
            f = 1.0 / ((1 - smooth) / factor + smooth);
        }
        c.ropeFreqFactors[static_cast<std::size_t>(i)] = static_cast<float>(f);
    }
}

} // namespace

Status llamaConfigFromJson(const std::string& text, const std::string& file, DecoderConfig& c)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, 32, file));
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return makeError(StatusCode::ParseError, file + ": not a JSON object");
    c.family = DecoderFamily::Llama;
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "num_hidden_layers", 1, 1024, c.layers));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "num_attention_heads", 1, 1024, c.heads));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "num_key_value_heads", 1, 1024, c.kvHeads, false));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "hidden_size", 1, 65536, c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "head_dim", 2, 4096, c.headDim, false));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "intermediate_size", 1, 1 << 20, c.intermediate));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "vocab_size", 2, 4'000'000, c.vocab));
    ATTNSCOPE_RETURN_IF_ERROR(intField(j, file, "max_position_embeddings", 2, 1 << 24, c.maxPositions));
    ATTNSCOPE_RETURN_IF_ERROR(floatField(j, file, "rms_norm_eps", 0, 1, c.normEps));
    ATTNSCOPE_RETURN_IF_ERROR(floatField(j, file, "rope_theta", 0, 1e12, c.ropeTheta));
    if (auto it = j.find("hidden_act"); it != j.end() && !(it->is_string() && it->get<std::string>() == "silu"))
        return makeError(StatusCode::Unsupported, file + ": hidden_act " + clipForMessage(it->dump()) + " is not supported (supported: silu)");
    // A flag of another type (a hostile or hand-edited file) reads as false: json::value() would throw.
    auto flag = [&](const char* key) {
        auto it = j.find(key);
        return it != j.end() && it->is_boolean() && it->get<bool>();
    };
    c.tiedEmbeddings = flag("tie_word_embeddings");
    // Mistral's sliding window; Qwen2 writes one too but uses it only with use_sliding_window.
    if (auto it = j.find("sliding_window"); it != j.end() && it->is_number_integer() && it->get<long long>() > 0 &&
                                            (c.architecture != "qwen2" || flag("use_sliding_window")))
        c.slidingWindow = static_cast<int>(std::min<long long>(it->get<long long>(), 1 << 30));
    ATTNSCOPE_RETURN_IF_ERROR(checkShapes(file, c));
    if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
        // Read field by field: json::value() throws on a value of another type, and a hostile file must get a message.
        auto str = [&](const char* key) {
            auto f = it->is_object() ? it->find(key) : it->end();
            return f != it->end() && f->is_string() ? f->get<std::string>() : std::string();
        };
        std::string type = str("rope_type");
        if (type.empty()) type = str("type");
        if (type == "llama3") {
            double factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
            for (auto [key, dst] : {std::pair<const char*, double*>{"factor", &factor}, {"low_freq_factor", &low},
                                    {"high_freq_factor", &high}, {"original_max_position_embeddings", &original}}) {
                auto f = it->find(key);
                if (f == it->end()) continue;
                if (!f->is_number() || !std::isfinite(f->get<double>()) || !(f->get<double>() > 0) || f->get<double>() > 1e9)
                    return invalidArgument(file + ": rope_scaling." + key + ": expected a positive number, got " + clipForMessage(f->dump()));
                *dst = f->get<double>();
            }
            if (!(high > low))
                return invalidArgument(file + ": rope_scaling: high_freq_factor " + std::to_string(high) +
                                       " must be above low_freq_factor " + std::to_string(low));
            llama3FreqFactors(c, factor, low, high, original);
        } else if (type != "default") {
            return makeError(StatusCode::Unsupported, file + ": rope_scaling " + clipForMessage(it->dump(), 80) +
                                                          " is not supported (supported: none, llama3)");
        }
    }
    return Status::success();
}

Status llamaConfigFromGguf(const GgufFile& f, const std::string& arch, DecoderConfig& c)
{
    c.family = DecoderFamily::Llama;
    auto getInt = [&](const std::string& key, int lo, int hi, int& out, bool required = true) -> Status {
        if (!f.has(key)) return required ? invalidArgument(f.what() + ": " + key + ": no such key") : Status::success();
        auto v = f.getUint(key);
        if (!v) return v.status();
        if (*v < std::uint64_t(lo) || *v > std::uint64_t(hi))
            return invalidArgument(f.what() + ": " + key + ": expected " + std::to_string(lo) + ".." + std::to_string(hi) +
                                   ", got " + std::to_string(*v));
        out = static_cast<int>(*v);
        return Status::success();
    };
    auto getFloat = [&](const std::string& key, float& out) -> Status {
        if (!f.has(key)) return Status::success();
        auto v = f.getFloat(key);
        if (!v) return v.status();
        if (!(*v > 0) || !std::isfinite(*v)) return invalidArgument(f.what() + ": " + key + ": expected a positive number, got " + std::to_string(*v));
        out = static_cast<float>(*v);
        return Status::success();
    };
    const std::string p = arch + ".";
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "block_count", 1, 1024, c.layers));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.head_count", 1, 1024, c.heads));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.head_count_kv", 1, 1024, c.kvHeads, false));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "embedding_length", 1, 65536, c.hidden));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "feed_forward_length", 1, 1 << 20, c.intermediate));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "context_length", 2, 1 << 24, c.maxPositions));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "attention.key_length", 2, 4096, c.headDim, false));
    ATTNSCOPE_RETURN_IF_ERROR(getFloat(p + "attention.layer_norm_rms_epsilon", c.normEps));
    ATTNSCOPE_RETURN_IF_ERROR(getFloat(p + "rope.freq_base", c.ropeTheta));
    ATTNSCOPE_RETURN_IF_ERROR(checkShapes(f.what(), c));
    int ropeDims = c.headDim;
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "rope.dimension_count", 2, 4096, ropeDims, false));
    if (ropeDims != c.headDim)
        return makeError(StatusCode::Unsupported, f.what() + ": " + p + "rope.dimension_count " + std::to_string(ropeDims) +
                                                      " differs from the head width " + std::to_string(c.headDim) +
                                                      " (partial RoPE is not supported)");
    const GgufTensorInfo* emb = f.tensor("token_embd.weight");
    if (emb == nullptr) return invalidArgument(f.what() + ": tensor token_embd.weight is missing");
    if (emb->dims.size() != 2) return invalidArgument(f.what() + ": token_embd.weight: expected 2 dimensions, got " + shapeText(emb->dims));
    c.vocab = static_cast<int>(std::min<std::int64_t>(emb->dims[1], 1 << 30));
    ATTNSCOPE_RETURN_IF_ERROR(getInt(p + "vocab_size", 2, 4'000'000, c.vocab, false));
    c.tiedEmbeddings = f.tensor("output.weight") == nullptr;
    if (const GgufTensorInfo* rf = f.tensor("rope_freqs.weight")) {
        if (rf->dims.size() != 1 || rf->dims[0] != c.headDim / 2)
            return invalidArgument(f.what() + ": rope_freqs.weight: expected " + std::to_string(c.headDim / 2) +
                                   " (head width / 2), got " + shapeText(rf->dims));
        auto v = f.dequantize("rope_freqs.weight");
        if (!v) return v.status();
        c.ropeFreqFactors = std::move(*v);
    }
    return Status::success();
}

namespace {

// Hugging Face row (head h, half s, index i) was written by llama.cpp's converter at (h, i, s): the stored row of
// each Hugging Face row, for `rows` rows of `heads` heads.
std::vector<int> unpermuteOrder(int rows, int heads)
{
    const int D = rows / heads, half = D / 2;
    std::vector<int> order(static_cast<std::size_t>(rows));
    for (int h = 0; h < heads; ++h)
        for (int s = 0; s < 2; ++s)
            for (int i = 0; i < half; ++i) order[static_cast<std::size_t>(h * D + s * half + i)] = h * D + 2 * i + s;
    return order;
}

// The same order applied to a matrix's rows (biases).
Matrix unpermuteRows(const Matrix& w, int heads)
{
    const Eigen::Index D = w.rows() / heads, half = D / 2;
    Matrix out(w.rows(), w.cols());
    for (Eigen::Index h = 0; h < heads; ++h)
        for (Eigen::Index s = 0; s < 2; ++s)
            for (Eigen::Index i = 0; i < half; ++i) out.row(h * D + s * half + i) = w.row(h * D + 2 * i + s);
    return out;
}

} // namespace

Status llamaTensors(WeightSource& w, bool gguf, bool unpermuteQK, DecoderModel& m)
{
    const DecoderConfig& c = m.config;
    const int M = c.hidden, F = c.intermediate, V = c.vocab, QD = c.heads * c.headDim, KD = c.kvHeads * c.headDim;
    ATTNSCOPE_RETURN_IF_ERROR(w.embedding(gguf ? "token_embd.weight" : "model.embed_tokens.weight", V, M, "vocab × d_model",
                                          m.tokenEmbeddings));
    ATTNSCOPE_RETURN_IF_ERROR(w.vector(gguf ? "output_norm.weight" : "model.norm.weight", M, "d_model", m.finalNormGamma));
    const std::string head = gguf ? "output.weight" : "lm_head.weight";
    if (!c.tiedEmbeddings)
        ATTNSCOPE_RETURN_IF_ERROR(w.embedding(head, V, M, "vocab × d_model", m.lmHead));
    m.layers.resize(static_cast<std::size_t>(c.layers));
    for (int l = 0; l < c.layers; ++l) {
        DecoderLayer& L = m.layers[static_cast<std::size_t>(l)];
        const std::string p = gguf ? "blk." + std::to_string(l) + "." : "model.layers." + std::to_string(l) + ".";
        auto name = [&](const char* g, const char* hf) { return p + (gguf ? g : hf); };
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(name("attn_norm.weight", "input_layernorm.weight"), M, "d_model", L.attnNormGamma));
        ATTNSCOPE_RETURN_IF_ERROR(w.vector(name("ffn_norm.weight", "post_attention_layernorm.weight"), M, "d_model", L.ffnNormGamma));
        // The un-permutation is a row order of the view: output column j is read from stored row order[j].
        const std::vector<int> qOrder = unpermuteQK ? unpermuteOrder(QD, c.heads) : std::vector<int>{};
        const std::vector<int> kOrder = unpermuteQK ? unpermuteOrder(KD, c.kvHeads) : std::vector<int>{};
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_q.weight", "self_attn.q_proj.weight"), M, QD, "H·D × d_model", 0, QD, qOrder, L.Wq));
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_k.weight", "self_attn.k_proj.weight"), M, KD, "H_kv·D × d_model", 0, KD, kOrder, L.Wk));
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_v.weight", "self_attn.v_proj.weight"), M, KD, "H_kv·D × d_model", 0, KD, {}, L.Wv));
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("attn_output.weight", "self_attn.o_proj.weight"), QD, M, "d_model × H·D", 0, M, {}, L.Wo));
        // Biases of Q, K, V: Qwen2 always, Llama with attention_bias. GGUF keeps Q/K biases in HF order for qwen2;
        // a permuted llama GGUF with biases would need the same row order as its weights.
        const std::string bqName = name("attn_q.bias", "self_attn.q_proj.bias");
        if (w.has(bqName)) {
            ATTNSCOPE_RETURN_IF_ERROR(w.vector(bqName, QD, "H·D", L.bq));
            ATTNSCOPE_RETURN_IF_ERROR(w.vector(name("attn_k.bias", "self_attn.k_proj.bias"), KD, "H_kv·D", L.bk));
            ATTNSCOPE_RETURN_IF_ERROR(w.vector(name("attn_v.bias", "self_attn.v_proj.bias"), KD, "H_kv·D", L.bv));
            if (unpermuteQK) {
                L.bq = unpermuteRows(Matrix(L.bq), c.heads).col(0);
                L.bk = unpermuteRows(Matrix(L.bk), c.kvHeads).col(0);
            }
        }
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_gate.weight", "mlp.gate_proj.weight"), M, F, "d_ff × d_model", 0, F, {}, L.Wgate));
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_up.weight", "mlp.up_proj.weight"), M, F, "d_ff × d_model", 0, F, {}, L.Wup));
        ATTNSCOPE_RETURN_IF_ERROR(w.weight(name("ffn_down.weight", "mlp.down_proj.weight"), F, M, "d_model × d_ff", 0, M, {}, L.Wdown));
    }
    return Status::success();
}

namespace {

// RoPE with Hugging Face's pairing (dimension i with i + D/2 of each head), computed as transformers does in
// float32: inv_freq[i] = θ^(−2i/D) (÷ the Llama 3 factor), angle = position · inv_freq[i].
// With period > 0 the rows are blocks of `period` tokens each (stacked variants of one text, as the head scans of
// interp.cpp run them): row r is position pos0 + r mod period.
void rope(const DecoderConfig& c, Matrix& x, int heads, int pos0, int period)
{
    const int D = c.headDim, half = D / 2;
    std::vector<float> invFreq(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
        float f = static_cast<float>(1.0 / std::pow(double(c.ropeTheta), double(2 * i) / D));
        if (!c.ropeFreqFactors.empty()) f /= c.ropeFreqFactors[static_cast<std::size_t>(i)];
        invFreq[static_cast<std::size_t>(i)] = f;
    }
    const Eigen::Index n = x.rows();
#pragma omp parallel for schedule(static) if (n * heads * D >= (1 << 16))
    for (Eigen::Index r = 0; r < n; ++r) {
        const float pos = static_cast<float>(pos0 + (period > 0 ? r % period : r));
        float* row = x.row(r).data();
        for (int i = 0; i < half; ++i) {
            const float angle = pos * invFreq[static_cast<std::size_t>(i)];
            const float cs = static_cast<float>(std::cos(double(angle))), sn = static_cast<float>(std::sin(double(angle)));
            for (int h = 0; h < heads; ++h) {
                float* v = row + h * D;
                const float a = v[i], b = v[i + half];
                v[i] = a * cs - b * sn;
                v[i + half] = b * cs + a * sn;
            }
        }
    }
}

} // namespace

void llamaAttentionInputs(const DecoderModel& m, const DecoderLayer& L, const Matrix& x, int pos0, Matrix& h, Matrix& Q,
                          Matrix& K, Matrix& V, int period)
{
    const DecoderConfig& c = m.config;
    rmsNormRows(x, L.attnNormGamma, c.normEps, h);
    product(h, L.Wq, Q);
    product(h, L.Wk, K);
    product(h, L.Wv, V);
    if (L.bq.size() > 0) {
        Q.rowwise() += L.bq.transpose();
        K.rowwise() += L.bk.transpose();
        V.rowwise() += L.bv.transpose();
    }
    rope(c, Q, c.heads, pos0, period);
    rope(c, K, c.kvHeads, pos0, period);
}

void llamaAfterAttention(const DecoderModel& m, const DecoderLayer& L, const Matrix& attnOut, const Matrix& x,
                         BlockScratch& s, Matrix& out)
{
    out = x + attnOut;
    rmsNormRows(out, L.ffnNormGamma, m.config.normEps, s.normed);
    product(s.normed, L.Wgate, s.ffnA);
    product(s.normed, L.Wup, s.ffnB);
    // SwiGLU: SiLU(gate) ⊙ up.
    s.ffnA.array() = s.ffnA.array() / (1.0f + (-s.ffnA.array()).exp()) * s.ffnB.array();
    product(s.ffnA, L.Wdown, s.ffnB);
    out += s.ffnB;
}

} // namespace attn::detail
