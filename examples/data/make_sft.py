#!/usr/bin/env python3
"""Writes sft-tales.jsonl: prompt/completion pairs (TRL's prompt-completion
form) from the bundled tales, for the README's SFT run:

    python3 examples/data/make_sft.py   # rewrites examples/data/sft-tales.jsonl

Each pair asks for the sentence that follows one sentence of a paragraph
(the prompt names the tale); the completion is that next sentence. Only the
completion carries loss once shard-tokens has tokenized the file."""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
paras, title = [], None
with open(os.path.join(HERE, "shard-tales.txt"), encoding="utf-8") as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        if not re.search(r"[.!?\"]$", line):  # a title line
            title = line
            continue
        paras.append((title, re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", line)))
with open(os.path.join(HERE, "sft-tales.jsonl"), "w", encoding="utf-8") as out:
    for title, sentences in paras:
        for a, b in zip(sentences, sentences[1:]):
            prompt = f"In \"{title}\", what comes after: {a}\nAnswer:"
            out.write(json.dumps({"prompt": prompt, "completion": " " + b},
                                 ensure_ascii=False) + "\n")
