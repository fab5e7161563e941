#!/usr/bin/env python3
"""Trains the demo's tokenizer (needs `pip install tokenizers`; the demo does
not): byte-level BPE in the form Qwen2/Qwen3 ship it (NFC, the Qwen2 split
regex, ByteLevel, an <|endoftext|> special token), 512 ids, on the bundled
text examples/data/shard-tales.txt. Writes tokenizer.json and
tokenizer_config.json here (EOS <|endoftext|> separates documents).

  python3 examples/tokenizer/generate.py
"""
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "data", "shard-tales.txt")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")

tok = Tokenizer(models.BPE())
tok.normalizer = normalizers.NFC()
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
])
tok.decoder = decoders.ByteLevel()
tok.train([CORPUS], trainers.BpeTrainer(vocab_size=512, show_progress=False,
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                        special_tokens=["<|endoftext|>"]))
with open(os.path.join(HERE, "tokenizer.json"), "w", encoding="utf-8") as f:
    f.write(tok.to_str(pretty=True))
with open(os.path.join(HERE, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump({"tokenizer_class": "Qwen2Tokenizer", "bos_token": None,
               "eos_token": "<|endoftext|>", "add_bos_token": False}, f, indent=2)
    f.write("\n")
print(f"tokenizer.json: {tok.get_vocab_size()} ids")
