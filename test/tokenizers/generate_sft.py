#!/usr/bin/env python3
"""Generates the prompt-completion fixtures of test/tokenizers/sft (needs the
Hugging Face `tokenizers` library; the tests themselves do not).

For each pair of sft/pairs.jsonl and two fixture tokenizers (bytelevel-qwen2:
no BOS, EOS <|endoftext|>; sentencepiece-llama2: BOS <s>, EOS </s>), records
the ids and prompt length that TRL's SFTTrainer gives a prompt-completion
example (standard, not conversational): the completion gets the EOS token's
text appended unless it already ends with it; input_ids are the tokenizer's
ids of prompt + completion, prompt ids those of the prompt alone, both with
the tokenizer's special tokens (BOS first where tokenizer_config.json says
add_bos_token); the prompt length (no loss) is len(prompt ids).

  python3 test/tokenizers/generate_sft.py      # rewrites test/tokenizers/sft/*.json
"""
import json
import os

import tokenizers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))

PAIRS = [
    {"prompt": "Q: What does the lighthouse keeper write?\nA:", "completion": " The ledger of ships."},
    {"id": 2, "prompt": "Translate: caf\u00e9", "completion": " coffee shop"},
    {"prompt": "Answer: ", "completion": "yes"},
    {"prompt": "", "completion": "Just a completion."},
    {"prompt": "Count:", "completion": " 1 2 3<|endoftext|>"},
    {"prompt": "\u65e5\u672c\u8a9e", "completion": "\u306e\u30c6\u30ad\u30b9\u30c8", "extra": [1, 2]},
]


def trl_example(tok, config, prompt, completion):
    eos = config["eos_token"]
    if not completion.endswith(eos):
        completion += eos
    bos = [tok.token_to_id(config["bos_token"])] if config.get("add_bos_token") else []
    prompt_ids = bos + tok.encode(prompt, add_special_tokens=False).ids
    ids = bos + tok.encode(prompt + completion, add_special_tokens=False).ids
    return {"ids": ids, "prompt": len(prompt_ids), "prefix": ids[:len(prompt_ids)] == prompt_ids}


def main():
    out = os.path.join(HERE, "sft")
    with open(os.path.join(out, "pairs.jsonl"), "w", encoding="utf-8") as f:
        for p in PAIRS:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    for name in ["bytelevel-qwen2", "sentencepiece-llama2"]:
        tok = Tokenizer.from_file(os.path.join(HERE, name, "tokenizer.json"))
        with open(os.path.join(HERE, name, "tokenizer_config.json")) as f:
            config = json.load(f)
        docs = [trl_example(tok, config, p["prompt"], p["completion"]) for p in PAIRS]
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"tokenizers": tokenizers.__version__, "documents": docs}, f)
            f.write("\n")


if __name__ == "__main__":
    main()
