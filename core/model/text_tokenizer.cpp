// TextTokenizer: one of the two decoder tokenizers. See attnscope/text_tokenizer.h.
#include "attnscope/text_tokenizer.h"

namespace attn {

const char* toString(TokenizerKind k)
{
    switch (k) {
    case TokenizerKind::ByteLevelBpe: return "byte-level BPE";
    case TokenizerKind::SentencePiece: return "SentencePiece BPE";
    }
    return "?";
}

TokenizerKind TextTokenizer::kind() const
{
    return std::holds_alternative<SpmTokenizer>(m_tok) ? TokenizerKind::SentencePiece : TokenizerKind::ByteLevelBpe;
}

Expected<Encoding> TextTokenizer::encode(const std::string& text, bool addSpecial) const
{
    return std::visit([&](const auto& t) { return t.encode(text, addSpecial); }, m_tok);
}

std::string TextTokenizer::decode(const std::vector<int>& ids) const
{
    return std::visit([&](const auto& t) { return t.decode(ids); }, m_tok);
}

std::string TextTokenizer::tokenText(int id) const
{
    return std::visit([&](const auto& t) { return t.tokenText(id); }, m_tok);
}

std::optional<int> TextTokenizer::idOf(const std::string& decodedText) const
{
    return std::visit([&](const auto& t) { return t.idOf(decodedText); }, m_tok);
}

int TextTokenizer::vocabSize() const
{
    return std::visit([](const auto& t) { return t.vocabSize(); }, m_tok);
}

int TextTokenizer::bos() const
{
    return std::visit([](const auto& t) { return t.bos(); }, m_tok);
}

int TextTokenizer::eos() const
{
    return std::visit([](const auto& t) { return t.eos(); }, m_tok);
}

Status TextTokenizer::setBosEos(int bos, int eos)
{
    return std::visit([&](auto& t) { return t.setBosEos(bos, eos); }, m_tok);
}

} // namespace attn
