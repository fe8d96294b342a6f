// Named session/result arrays for export, and importing a matrix into one session slot.
#include "io/session_arrays.h"

#include <attnscope/attention.h>
#include <attnscope/matrix_names.h>

#include <cassert>

namespace app::io {

namespace {

using attn::InputMatrix;
// The name of an input array in exported files and in imports (matrix_names.h).
const char* arrayName(InputMatrix m) { return attn::matrixNames(m).arrayName; }

struct MatrixSlot {
    InputMatrix id;
    attn::Matrix attn::AttentionInput::*field;
};
constexpr MatrixSlot kMatrixSlots[] = {
    {InputMatrix::X, &attn::AttentionInput::X},   {InputMatrix::Xkv, &attn::AttentionInput::Xkv},
    {InputMatrix::Wq, &attn::AttentionInput::Wq}, {InputMatrix::Wk, &attn::AttentionInput::Wk},
    {InputMatrix::Wv, &attn::AttentionInput::Wv}, {InputMatrix::Wo, &attn::AttentionInput::Wo},
    {InputMatrix::Q, &attn::AttentionInput::Q},   {InputMatrix::K, &attn::AttentionInput::K},
    {InputMatrix::V, &attn::AttentionInput::V},
};
struct VectorSlot {
    InputMatrix id;
    attn::Vector attn::AttentionInput::*field;
};
constexpr VectorSlot kVectorSlots[] = {
    {InputMatrix::Bq, &attn::AttentionInput::bq},
    {InputMatrix::Bk, &attn::AttentionInput::bk},
    {InputMatrix::Bv, &attn::AttentionInput::bv},
    {InputMatrix::Bo, &attn::AttentionInput::bo},
};

NamedArray ofMatrix(std::string name, const attn::Matrix& m) { return NamedArray{std::move(name), &m, nullptr, nullptr, {}}; }
NamedArray ofVector(std::string name, const attn::Vector& v) { return NamedArray{std::move(name), nullptr, &v, nullptr, {}}; }
NamedArray ofMask(std::string name, const attn::MaskMatrix& m) { return NamedArray{std::move(name), nullptr, nullptr, &m, {}}; }

} // namespace

const std::vector<std::string>& slotNames()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const MatrixSlot& s : kMatrixSlots) n.push_back(arrayName(s.id));
        for (const VectorSlot& s : kVectorSlots) n.push_back(arrayName(s.id));
        for (InputMatrix a : {InputMatrix::Aq, InputMatrix::Ak, InputMatrix::Wv_additive}) n.push_back(arrayName(a));
        n.push_back("mask_custom");
        return n;
    }();
    return names;
}

std::vector<NamedArray> sessionArrays(const attn::Session& s, const attn::AttentionResult* result)
{
    // Every head's maps are written: a result whose maps stayed on the device must have them back first
    // (attn::fetchDeviceMaps). The window's exports compute their own CPU result (state/export_actions.h).
    assert(!result || !result->mapsOnDevice);
    std::vector<NamedArray> out;
    const attn::AttentionInput& in = s.input;
    for (const MatrixSlot& slot : kMatrixSlots)
        if ((in.*slot.field).size() > 0) out.push_back(ofMatrix(arrayName(slot.id), in.*slot.field));
    for (const VectorSlot& slot : kVectorSlots)
        if ((in.*slot.field).size() > 0) out.push_back(ofVector(arrayName(slot.id), in.*slot.field));
    if (in.additive.Aq.size() > 0) out.push_back(ofMatrix(arrayName(InputMatrix::Aq), in.additive.Aq));
    if (in.additive.Ak.size() > 0) out.push_back(ofMatrix(arrayName(InputMatrix::Ak), in.additive.Ak));
    if (in.additive.wv.size() > 0) out.push_back(ofVector(arrayName(InputMatrix::Wv_additive), in.additive.wv));
    if (in.mask.custom.size() > 0) out.push_back(ofMask("mask_custom", in.mask.custom));
    if (!in.mask.keyPadding.empty()) {
        NamedArray a{"mask_key_padding", nullptr, nullptr, nullptr, {}};
        a.ints.assign(in.mask.keyPadding.begin(), in.mask.keyPadding.end());
        out.push_back(std::move(a));
    }
    if (!in.mask.validLens.empty()) {
        NamedArray a{"mask_valid_lens", nullptr, nullptr, nullptr, {}};
        a.ints.assign(in.mask.validLens.begin(), in.mask.validLens.end());
        out.push_back(std::move(a));
    }
    if (!result) return out;
    for (std::size_t h = 0; h < result->heads.size(); ++h) {
        const attn::HeadResult& hr = result->heads[h];
        const std::string p = "h" + std::to_string(h) + "_";
        out.push_back(ofMatrix(p + "Q", hr.Q));
        out.push_back(ofMatrix(p + "K", hr.K));
        out.push_back(ofMatrix(p + "V", hr.V));
        out.push_back(ofMatrix(p + "scores", hr.scores));
        out.push_back(ofMask(p + "masked", hr.masked));
        out.push_back(ofMatrix(p + "weights", hr.weights));
        out.push_back(ofMatrix(p + "output", hr.output));
    }
    out.push_back(ofMatrix("concat", result->concat));
    out.push_back(ofMatrix("output", result->output));
    return out;
}

attn::Status setSlot(attn::Session& s, const std::string& slot, const attn::Matrix& m)
{
    attn::AttentionInput in = s.input;
    auto asVector = [&](attn::Vector& v) -> attn::Status {
        if (m.rows() != 1 && m.cols() != 1)
            return attn::invalidArgument(slot + ": expected a vector (1×n or n×1), got " + std::to_string(m.rows()) + "×" +
                                         std::to_string(m.cols()));
        v = Eigen::Map<const attn::Vector>(m.data(), m.size());
        return {};
    };
    bool found = false;
    attn::Status st;
    for (const MatrixSlot& ms : kMatrixSlots)
        if (slot == arrayName(ms.id)) {
            in.*ms.field = m;
            found = true;
        }
    for (const VectorSlot& vs : kVectorSlots)
        if (slot == arrayName(vs.id)) {
            st = asVector(in.*vs.field);
            found = true;
        }
    if (slot == arrayName(InputMatrix::Aq)) in.additive.Aq = m, found = true;
    if (slot == arrayName(InputMatrix::Ak)) in.additive.Ak = m, found = true;
    if (slot == arrayName(InputMatrix::Wv_additive)) st = asVector(in.additive.wv), found = true;
    if (slot == "mask_custom") {
        found = true;
        for (Eigen::Index i = 0; i < m.size() && st.ok(); ++i)
            if (m.data()[i] != 0.0f && m.data()[i] != 1.0f)
                st = attn::invalidArgument("mask_custom: expected 0/1 values, got " + std::to_string(m.data()[i]));
        if (st.ok()) in.mask.custom = (m.array() != 0.0f).cast<std::uint8_t>();
    }
    if (!found) {
        std::string list;
        for (const std::string& n : slotNames()) list += (list.empty() ? "" : ", ") + n;
        return attn::invalidArgument("unknown slot '" + attn::clipForMessage(slot) + "' (expected one of: " + list + ")");
    }
    if (!st.ok()) return st;
    attn::Expected<attn::Dims> d = attn::validate(in, s.config);
    if (!d) return attn::invalidArgument("after importing " + slot + " (" + std::to_string(m.rows()) + "×" +
                                         std::to_string(m.cols()) + "): " + d.status().message);
    s.input = std::move(in);
    return {};
}

} // namespace app::io
