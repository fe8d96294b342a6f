// The vocabulary table of the two BPE tokenizers. See vocab_table.h.
#include "vocab_table.h"

#include "attnscope/bpe_tokenizer.h"  // firstInvalidUtf8
#include "attnscope/preset_io.h"      // checkJsonDepth, clipForMessage

#include <nlohmann/json.hpp>
#include <unicode/utf8.h>

#include <algorithm>

namespace attn::detail {
using json = nlohmann::json;

std::string lossyUtf8(const std::string& s)
{
    if (firstInvalidUtf8(s) == std::string::npos) return s;
    std::string out;
    const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
    const std::int32_t n = static_cast<std::int32_t>(s.size());
    for (std::int32_t i = 0; i < n;) {
        const std::int32_t at = i;
        UChar32 c;
        U8_NEXT(p, i, n, c);  // past the maximal ill-formed subpart when c < 0
        if (c < 0) out += "\xEF\xBF\xBD";
        else out.append(s, static_cast<std::size_t>(at), static_cast<std::size_t>(i - at));
    }
    return out;
}

std::uint64_t pairKey(int a, int b)
{
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

bool splitMerge(const std::string& m, std::pair<std::string, std::string>& out)
{
    const std::size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= m.size() || m.find(' ', sp + 1) != std::string::npos) return false;
    out = {m.substr(0, sp), m.substr(sp + 1)};
    return true;
}

Status VocabTable::setTokens(std::vector<std::string> pieces, const std::string& where, bool unique)
{
    if (pieces.empty()) return invalidArgument(where + ": the vocabulary is empty");
    tokens = std::move(pieces);
    vocab.clear();
    vocab.reserve(tokens.size());
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        const std::string& t = tokens[id];
        const std::string at = where + "[" + std::to_string(id) + "]: ";
        if (t.empty()) return invalidArgument(at + "the token is empty");
        if (t.size() > kMaxTokenBytes)
            return invalidArgument(at + std::to_string(t.size()) + " bytes long (limit " + std::to_string(kMaxTokenBytes) + ")");
        if (firstInvalidUtf8(t) != std::string::npos) return invalidArgument(at + "not valid UTF-8");
        auto [it, fresh] = vocab.emplace(std::string_view(t), static_cast<int>(id));
        if (!fresh && unique)
            return invalidArgument(at + "\"" + clipForMessage(t) + "\" duplicates token " + std::to_string(it->second));
    }
    return Status::success();
}

void VocabTable::setBytes(std::vector<std::string> decoded, const std::function<bool(int)>& preferred)
{
    bytes = std::move(decoded);
    const std::size_t n = bytes.size();
    display.resize(n);
    for (std::size_t id = 0; id < n; ++id) display[id] = lossyUtf8(bytes[id]);
    byDecoded.clear();
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t id = 0; id < n; ++id)
            if (preferred(static_cast<int>(id)) == (pass == 0)) byDecoded.emplace(bytes[id], static_cast<int>(id));
}

Status VocabTable::setMerges(const std::vector<std::pair<std::string, std::string>>& list, const std::string& where)
{
    merges.clear();
    merges.reserve(list.size());
    for (std::size_t r = 0; r < list.size(); ++r) {
        const auto& [l, rt] = list[r];
        auto li = vocab.find(l), ri = vocab.find(rt), mi = vocab.find(l + rt);
        const char* missing = li == vocab.end() ? "its left token" : ri == vocab.end() ? "its right token"
                            : mi == vocab.end() ? "the merged token" : nullptr;
        if (missing)
            return invalidArgument(where + "[" + std::to_string(r) + "] \"" + clipForMessage(l) + " " + clipForMessage(rt) +
                                   "\": " + missing + " is not in the vocabulary");
        merges.emplace(pairKey(li->second, ri->second), std::make_pair(static_cast<int>(r), mi->second));
    }
    return Status::success();
}

std::string VocabTable::tokenText(int id) const
{
    if (id < 0 || id >= size()) return {};
    return display[static_cast<std::size_t>(id)];
}

std::optional<int> VocabTable::idOf(const std::string& decodedText) const
{
    auto it = byDecoded.find(decodedText);
    if (it == byDecoded.end()) return std::nullopt;
    return it->second;
}

Status VocabTable::checkBosEos(int bos, int eos) const
{
    for (int id : {bos, eos})
        if (id < -1 || id >= size())
            return invalidArgument("BOS/EOS id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                   std::to_string(size() - 1) + ", or -1 for none)");
    return Status::success();
}

void VocabTable::finishEncoding(Encoding& enc) const
{
    enc.tokens.clear();
    enc.tokens.reserve(enc.ids.size());
    for (int id : enc.ids) enc.tokens.push_back(display[static_cast<std::size_t>(id)]);
    enc.typeIds.assign(enc.ids.size(), 0);
}

Status parseJsonBpe(const std::string& text, json& file)
{
    ATTNSCOPE_RETURN_IF_ERROR(checkJsonDepth(text, kMaxJsonDepth, "tokenizer.json"));
    file = json::parse(text, nullptr, false);
    auto bad = [](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + m); };
    auto unsupported = [](const std::string& m) { return makeError(StatusCode::Unsupported, "tokenizer.json: " + m); };
    if (file.is_discarded() || !file.is_object()) return bad("not a JSON object");
    auto model = file.find("model");
    if (model == file.end() || !model->is_object()) return bad("no \"model\" object");
    auto typeIt = model->find("type");
    const std::string type = typeIt != model->end() && typeIt->is_string() ? typeIt->get<std::string>() : std::string();
    if (type != "BPE") return unsupported("model.type \"" + clipForMessage(type) + "\" is not supported here (supported: BPE)");
    // Model options that change the result and that neither kind of model sets.
    for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
        auto it = model->find(key);
        if (it != model->end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
            return unsupported(std::string("model.") + key + " " + clipForMessage(it->dump()) + " is not supported (expected null)");
    }
    for (const char* key : {"byte_fallback", "ignore_merges", "fuse_unk"}) {
        auto it = model->find(key);
        if (it != model->end() && !it->is_null() && !it->is_boolean())
            return bad(std::string("model.") + key + ": expected true or false, got " + clipForMessage(it->dump()));
    }
    return Status::success();
}

Expected<JsonVocab> readJsonVocab(const json& file, const json& model, std::size_t maxMerges)
{
    auto bad = [](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + m); };
    auto vocab = model.find("vocab");
    if (vocab == model.end() || !vocab->is_object()) return bad("model.vocab missing or not an object");
    auto added = file.find("added_tokens");
    if (added != file.end() && !added->is_null() && !added->is_array()) return bad("added_tokens is not an array");
    const std::size_t nAdded = added != file.end() && added->is_array() ? added->size() : 0;
    if (vocab->size() > kMaxVocabTokens || nAdded > kMaxVocabTokens)
        return bad("model.vocab has " + std::to_string(vocab->size()) + " entries and added_tokens " + std::to_string(nAdded) +
                   ", over the limit of " + std::to_string(kMaxVocabTokens));
    if (vocab->empty()) return bad("model.vocab is empty");
    // Ids: the vocabulary's, then the added tokens' own (which may extend it).
    std::size_t size = 0;
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        if (!it->is_number_unsigned() || it->get<std::uint64_t>() >= kMaxVocabTokens)
            return bad("model.vocab[\"" + clipForMessage(it.key()) + "\"]: expected an id in 0.." +
                       std::to_string(kMaxVocabTokens - 1) + ", got " + clipForMessage(it->dump()));
        size = std::max<std::size_t>(size, it->get<std::uint64_t>() + 1);
    }
    JsonVocab v;
    std::vector<std::string> contents;
    for (std::size_t i = 0; i < nAdded; ++i) {
        const json& a = (*added)[i];
        auto content = a.is_object() ? a.find("content") : a.end();
        auto id = a.is_object() ? a.find("id") : a.end();
        if (!a.is_object() || content == a.end() || !content->is_string() || content->get<std::string>().empty() ||
            id == a.end() || !id->is_number_unsigned() || id->get<std::uint64_t>() >= kMaxVocabTokens)
            return bad("added_tokens[" + std::to_string(i) + "]: expected an object with an \"id\" below " +
                       std::to_string(kMaxVocabTokens) + " and a non-empty \"content\" string");
        auto sp = a.find("special");
        v.added.push_back({static_cast<int>(id->get<std::uint64_t>()), sp != a.end() && sp->is_boolean() && sp->get<bool>()});
        contents.push_back(content->get<std::string>());
        size = std::max<std::size_t>(size, static_cast<std::size_t>(v.added.back().id) + 1);
    }
    if (size > vocab->size() + nAdded)
        return bad("token ids reach " + std::to_string(size - 1) + " but there are only " + std::to_string(vocab->size() + nAdded) +
                   " tokens (ids must have no gaps)");
    v.tokens.assign(size, std::string());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        std::string& slot = v.tokens[static_cast<std::size_t>(it->get<std::uint64_t>())];
        if (!slot.empty()) return bad("model.vocab: id " + it->dump() + " is used twice");
        slot = it.key();
    }
    for (std::size_t i = 0; i < v.added.size(); ++i) {
        std::string& slot = v.tokens[static_cast<std::size_t>(v.added[i].id)];
        if (!slot.empty() && slot != contents[i])
            return bad("added_tokens[" + std::to_string(i) + "]: id " + std::to_string(v.added[i].id) + " is already token \"" +
                       clipForMessage(slot) + "\"");
        slot = contents[i];
    }
    for (std::size_t id = 0; id < v.tokens.size(); ++id)
        if (v.tokens[id].empty()) return bad("no token has id " + std::to_string(id) + " (ids must have no gaps)");

    auto merges = model.find("merges");
    if (merges == model.end() || !merges->is_array()) return bad("model.merges missing or not an array");
    if (merges->size() > maxMerges)
        return bad("model.merges has " + std::to_string(merges->size()) + " entries, over the limit of " + std::to_string(maxMerges));
    v.merges.reserve(merges->size());
    for (std::size_t r = 0; r < merges->size(); ++r) {
        const json& m = (*merges)[r];
        std::pair<std::string, std::string> pr;
        if (m.is_string() && splitMerge(m.get<std::string>(), pr)) v.merges.push_back(std::move(pr));
        else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
            v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        else
            return bad("model.merges[" + std::to_string(r) + "]: expected \"a b\" or [\"a\", \"b\"], got " + clipForMessage(m.dump()));
    }
    if (auto u = model.find("unk_token"); u != model.end() && !u->is_null()) {
        if (!u->is_string()) return bad("model.unk_token: expected a string or null");
        auto it = std::find(v.tokens.begin(), v.tokens.end(), u->get<std::string>());
        if (it == v.tokens.end()) return bad("model.unk_token \"" + clipForMessage(u->get<std::string>()) + "\" is not in the vocabulary");
        v.unk = static_cast<int>(it - v.tokens.begin());
    }
    return v;
}

Status readJsonTemplate(const json& j, const std::string& path, const std::unordered_map<std::string, int>& ids,
                        std::size_t vocabSize, std::vector<int>& before, std::vector<int>& after, int depth)
{
    auto bad = [&](const std::string& m) { return makeError(StatusCode::ParseError, "tokenizer.json: " + path + m); };
    if (!j.is_object()) return bad(": expected an object");
    const std::string type = j.value("type", std::string());
    if (type == "ByteLevel") return Status::success();  // offsets only
    if (type == "Sequence") {
        if (depth > 4) return bad(": Sequence nested too deep");
        auto list = j.find("processors");
        if (list == j.end() || !list->is_array()) return bad(".processors: expected an array");
        for (std::size_t i = 0; i < list->size(); ++i)
            ATTNSCOPE_RETURN_IF_ERROR(readJsonTemplate((*list)[i], path + ".processors[" + std::to_string(i) + "]", ids, vocabSize, before, after, depth + 1));
        return Status::success();
    }
    if (type != "TemplateProcessing")
        return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + ".type \"" + clipForMessage(type) +
                                                      "\" is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
    auto single = j.find("single");
    if (single == j.end() || !single->is_array()) return bad(".single: expected an array");
    auto specials = j.find("special_tokens");
    bool seenA = false;
    for (std::size_t i = 0; i < single->size(); ++i) {
        const json& item = (*single)[i];
        const std::string at = ".single[" + std::to_string(i) + "]";
        if (item.is_object() && item.contains("Sequence")) {
            if (seenA) return makeError(StatusCode::Unsupported, "tokenizer.json: " + path + at + ": a second sequence is not supported");
            seenA = true;
            continue;
        }
        auto st = item.is_object() ? item.find("SpecialToken") : item.end();
        if (st == item.end() || !st->is_object() || !st->contains("id") || !(*st)["id"].is_string())
            return bad(at + ": expected {\"SpecialToken\": {\"id\": …}} or {\"Sequence\": …}");
        const std::string name = (*st)["id"].get<std::string>();
        std::vector<int> tokIds;
        const json* def = nullptr;
        if (specials != j.end() && specials->is_object())
            if (auto d = specials->find(name); d != specials->end() && d->is_object() && d->contains("ids")) def = &*d;
        if (def) {
            const json& list = (*def)["ids"];
            if (!list.is_array()) return bad(".special_tokens[\"" + clipForMessage(name) + "\"].ids: expected an array");
            for (const json& v : list) {
                if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= vocabSize)
                    return bad(".special_tokens[\"" + clipForMessage(name) + "\"].ids: expected ids in 0.." +
                               std::to_string(vocabSize - 1) + ", got " + clipForMessage(v.dump()));
                tokIds.push_back(static_cast<int>(v.get<std::uint64_t>()));
            }
        } else if (auto it = ids.find(name); it != ids.end()) {
            tokIds.push_back(it->second);
        } else {
            return bad(at + ": special token \"" + clipForMessage(name) + "\" is neither in special_tokens nor in the vocabulary");
        }
        (seenA ? after : before).insert((seenA ? after : before).end(), tokIds.begin(), tokIds.end());
    }
    return Status::success();
}

} // namespace attn::detail
