#!/usr/bin/env python3
"""Generates the tokenizer fixtures of test/tokenizers (needs the Hugging Face
`tokenizers` library; the tests themselves do not).

Trains four small BPE tokenizers on the bundled text, each in the form a real
checkpoint family ships, and records, for every fixture text, the ids the
library produces (`encode(text, add_special_tokens=False)`) and its decode of
them (`skip_special_tokens=False`):

  bytelevel-qwen2     NFC, Split(Qwen2 regex, Isolated), ByteLevel (Qwen2/Qwen3)
  bytelevel-llama3    Split(Llama 3 regex), ByteLevel, ignore_merges (Llama 3)
  sentencepiece-llama2  Prepend+Replace normalizers, byte_fallback, fuse_unk,
                      <unk> (Llama 2, Gemma)
  metaspace           Metaspace(prepend_scheme=first, split) pre-tokenizer,
                      byte_fallback (newer SentencePiece conversions)

  python3 test/tokenizers/generate.py      # rewrites test/tokenizers/*/
"""
import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "examples", "data", "shard-tales.txt")

QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Texts that break naive tokenizers: accents (composed and decomposed), CJK,
# emoji sequences (ZWJ families, flags, skin tones), digit runs, tabs, CR LF,
# leading and trailing spaces, the empty string, special-token strings.
TEXTS = [
    "",
    " ",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "café naïve résumé Ångström",
    "cafe\u0301 (decomposed e + U+0301) and caf\u00e9",
    "日本語のテキストと中文字符和한국어",
    "emoji: 👩\u200d👩\u200d👧\u200d👦 🇫🇷🇯🇵 👍🏽 ❤️",
    "digits 1234567890 3.14159 2026-12-02 007",
    "tabs\there\t\tand\ttabs",
    "windows\r\nline\r\nendings\r\n",
    "many\n\n\nnewlines\n",
    "I'm sure you'll see: DON'T, they've, we'd, it's",
    "multiple     spaces    between",
    "<|endoftext|>special<|im_start|>user\nhi<|im_end|>",
    "<s>bos in text</s> and <unk> too",
    "non-breaking\u00a0space and ideographic\u3000space",
    "Arabic مرحبا and Hindi नमस्ते and Thai สวัสดี",
    "zero\u200bwidth and soft\u00adhyphen",
    "a_very_long_identifier_without_spaces_ThatKeepsGoing_1234",
    "<0x41> literal byte token text",
    "\u2581already has the metaspace mark",
    "end with a space ",
    "\n",
    "call  <tool>  now and <tool>x then x<tool>",
    "shard shards _shard shard! the_shard shard",
]


def byte_level(pattern, ignore_merges, normalizer):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return tok, trainer


BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def sentencepiece(metaspace):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                     split=True)
        tok.decoder = decoders.Sequence([
            decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=True),
            decoders.ByteFallback(), decoders.Fuse()])
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                               normalizers.Replace(" ", "\u2581")])
        # SentencePiece trains on whitespace-split words; the saved file has
        # no pre-tokenizer (write() drops this one), as Llama 2's.
        tok.pre_tokenizer = pre_tokenizers.Split("\u2581", behavior="merged_with_next")
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    # The byte tokens go in the model's vocabulary (as in Llama 2's file),
    # not among the added tokens: they are trained as specials, then the
    # added-token entries are dropped from the saved JSON below.
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False, limit_alphabet=80,
                                  special_tokens=["<unk>", "<s>", "</s>"] + BYTE_TOKENS)
    return tok, trainer


def write(name, tok, trainer, config, texts, extra_tokens=()):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    tok.train([CORPUS], trainer)
    for t in extra_tokens:
        tok.add_tokens([t])
    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in BYTE_TOKENS]
    if name == "sentencepiece-llama2":
        data["pre_tokenizer"] = None
    tok = Tokenizer.from_str(json.dumps(data))
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tok.to_str(pretty=True))
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizers": tokenizers.__version__, "cases": cases}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")
    # The whole bundled text as one document: the ids a training run sees.
    with open(CORPUS, encoding="utf-8") as f:
        corpus = f.read()
    with open(os.path.join(out, "shard-tales.ids"), "w") as f:
        f.write(" ".join(map(str, tok.encode(corpus, add_special_tokens=False).ids)) + "\n")
    print(f"{name}: vocabulary {tok.get_vocab_size()}, {len(cases)} cases", file=sys.stderr)


def main():
    tok, trainer = byte_level(QWEN2, False, normalizers.NFC())
    write("bytelevel-qwen2", tok, trainer,
          {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|endoftext|>",
           "add_bos_token": False}, TEXTS)
    # Added tokens with lstrip/rstrip, and a normalized single_word one.
    extra = [AddedToken("<tool>", lstrip=True, rstrip=True, special=True, normalized=False),
             AddedToken("shard", single_word=True, normalized=True, special=False)]
    tok, trainer = byte_level(LLAMA3, True, None)
    write("bytelevel-llama3", tok, trainer,
          {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|im_start|>",
           "eos_token": {"content": "<|im_end|>", "special": True}}, TEXTS, extra)
    tok, trainer = sentencepiece(False)
    write("sentencepiece-llama2", tok, trainer,
          {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
           "add_bos_token": True, "add_eos_token": False}, TEXTS)
    tok, trainer = sentencepiece(True)
    write("metaspace", tok, trainer,
          {"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
           "add_bos_token": True}, TEXTS)


if __name__ == "__main__":
    main()
