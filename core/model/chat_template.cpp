// applyChatTemplate: one user turn and the assistant's generation prompt, for the chat-template families of the
// decoder models attnscope opens (ChatML: SmolLM2, Qwen2; Llama 3; Gemma; Llama 2 / Mistral's [INST]; Phi-3 to
// Phi-4-mini; OLMo 2's Tülu turns). A template is a Jinja program; rather than run Jinja, we recognise the family by
// its special tokens and read the one literal that changes between models of a family (ChatML's default system
// prompt, Llama 3.1's default date). The goldens in
// tests/model/goldens/bpe_goldens.json are Hugging Face's apply_chat_template renderings of real templates.
#include "attnscope/bpe_tokenizer.h"

#include <ctime>

namespace attn {

namespace {

// Jinja string-literal escapes in the extracted text (\n, \', \", \\).
std::string unescapeJinja(const std::string& s)
{
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            const char c = s[++i];
            out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
        } else out += s[i];
    }
    return out;
}

// The text a template writes as a literal right after `opener` up to `closer`, where that text is a plain string
// literal (no quote, no expression, no template tag): e.g. ChatML's default system prompt in
// '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n'. The first such occurrence, or nullopt.
std::optional<std::string> literalAfter(const std::string& tpl, const std::string& opener, const std::string& closer)
{
    for (std::size_t at = tpl.find(opener); at != std::string::npos; at = tpl.find(opener, at + 1)) {
        std::size_t from = at + opener.size();
        if (tpl.compare(from, 2, "\\n") == 0) from += 2;        // "\n" written as an escape in the literal
        else if (tpl.compare(from, 1, "\n") == 0) from += 1;    // or as a real newline
        else continue;
        const std::size_t end = tpl.find(closer, from);
        if (end == std::string::npos) continue;
        const std::string body = tpl.substr(from, end - from);
        if (body.find_first_of("'\"{}%+") != std::string::npos) continue;  // not a plain literal
        return unescapeJinja(body);
    }
    return std::nullopt;
}

// Jinja's trim (Python's str.strip()): ASCII whitespace at both ends (enough for the user's text here).
std::string trim(const std::string& s)
{
    const char* ws = " \t\n\r\f\v";
    const std::size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

} // namespace

Expected<std::string> applyChatTemplate(const std::string& templateText, const std::string& userText, const std::string& bosText)
{
    if (templateText.empty()) return invalidArgument("chat template: the model has no chat template (it is empty)");
    if (templateText.find("<|im_start|>") != std::string::npos) {
        std::string out;
        if (auto sys = literalAfter(templateText, "<|im_start|>system", "<|im_end|>"))
            out += "<|im_start|>system\n" + *sys + "<|im_end|>\n";
        out += "<|im_start|>user\n" + userText + "<|im_end|>\n<|im_start|>assistant\n";
        return out;
    }
    if (templateText.find("<|start_header_id|>") != std::string::npos) {
        std::string out;
        if (templateText.find("bos_token") != std::string::npos) out += "<|begin_of_text|>";
        // Llama 3.1 and later always open with a system turn that carries the knowledge cut-off and a date:
        // the template's default date_string, or (Llama 3.2, strftime_now) today's date, as Hugging Face renders it.
        if (templateText.find("Cutting Knowledge Date: December 2023") != std::string::npos) {
            std::string date;
            const std::string key = "date_string = \"";
            if (std::size_t at = templateText.find(key); at != std::string::npos) {
                const std::size_t end = templateText.find('"', at + key.size());
                if (end != std::string::npos) date = templateText.substr(at + key.size(), end - at - key.size());
            }
            if (date.empty()) {
                const std::time_t now = std::time(nullptr);
                std::tm tm{};
                localtime_r(&now, &tm);
                char buf[32];
                std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
                date = buf;
            }
            out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " +
                   date + "\n\n<|eot_id|>";
        }
        out += "<|start_header_id|>user<|end_header_id|>\n\n" + trim(userText) +
               "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
        return out;
    }
    if (templateText.find("<start_of_turn>") != std::string::npos) {
        // Gemma 1–3: "<bos>" from bos_token, the trimmed text in a user turn, then the model's turn opened.
        std::string out;
        if (templateText.find("bos_token") != std::string::npos) out += "<bos>";
        return out + "<start_of_turn>user\n" + trim(userText) + "<end_of_turn>\n<start_of_turn>model\n";
    }
    if (templateText.find("[INST]") != std::string::npos) {
        // Llama 2 and Mistral v0.1–0.3: "<s>[INST] {text} [/INST]"; Llama 2 strips the text, Mistral does not.
        std::string out;
        if (templateText.find("bos_token") != std::string::npos) out += "<s>";
        const bool strips = templateText.find("| trim") != std::string::npos || templateText.find("|trim") != std::string::npos ||
                            templateText.find(".strip()") != std::string::npos;
        return out + "[INST] " + (strips ? trim(userText) : userText) + " [/INST]";
    }
    if (templateText.find("<|end|>") != std::string::npos && templateText.find("<|assistant|>") != std::string::npos) {
        // Phi-3, Phi-3.5, Phi-4-mini: "<|user|>" + text + "<|end|>", then "<|assistant|>"; Phi-3 and 3.5 put a newline
        // after each tag and each <|end|>, Phi-4-mini none (its tags are '<|' + role + '|>'). Phi-3-mini's first
        // template opens with its BOS, <s>.
        const bool newlines = templateText.find("<|user|>\\n") != std::string::npos ||
                              templateText.find("'<|user|>' + '\\n'") != std::string::npos ||
                              templateText.find("'|>' + '\\n'") != std::string::npos;
        const bool strips = templateText.find(".strip()") != std::string::npos || templateText.find("| trim") != std::string::npos ||
                            templateText.find("|trim") != std::string::npos;
        const std::string nl = newlines ? "\n" : "";
        std::string out;
        if (templateText.find("bos_token") != std::string::npos) out += "<s>";
        return out + "<|user|>" + nl + (strips ? trim(userText) : userText) + "<|end|>" + nl + "<|assistant|>" + nl;
    }
    if (templateText.find("<|user|>") != std::string::npos && templateText.find("<|assistant|>") != std::string::npos) {
        // Tülu (OLMo 2): "<|user|>\n" + text + "\n", then "<|assistant|>\n"; its BOS is the model's own.
        std::string out;
        if (templateText.find("bos_token") != std::string::npos) out += bosText;
        return out + "<|user|>\n" + userText + "\n<|assistant|>\n";
    }
    return makeError(StatusCode::Unsupported,
                     "chat template: not a ChatML (<|im_start|>), Llama 3 (<|start_header_id|>), Gemma (<start_of_turn>), "
                     "Llama 2 ([INST]), Phi (<|user|> … <|end|>) or Tülu (<|user|> … <|assistant|>) template; only these are "
                     "supported (run without --chat to use the text as it is)");
}

} // namespace attn
