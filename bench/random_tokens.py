"""Writes 2M uniformly random token ids (seed 0) in the SRTTOKS v1 format
(docs/data.md), 4 bytes per token, for the GPU benchmarks.
Usage: random_tokens.py VOCAB FILE"""
import array
import random
import struct
import sys

vocab, path = int(sys.argv[1]), sys.argv[2]
n = 2 << 20
random.seed(0)
with open(path, "wb") as f:
    f.write(b"SRTTOKS\0" + struct.pack("<HHIQQ", 1, 4, 0, n, vocab))
    array.array("I", (random.randrange(vocab) for _ in range(n))).tofile(f)
