#!/usr/bin/env python3
"""Golden values from Hugging Face transformers for the compiled training step.

    /tmp/torchenv/bin/python test/golden/generate.py [CASE...]  # any python with
                                                    # torch, transformers, safetensors

For each case (qwen2, qwen3, llama and gemma3, and llama-pad and gemma3-pad
with a pad token in the batch; CASES below) this builds a tiny random model
(fp32, eager attention, fixed seed) from the e2e config
test/e2e/configs/tiny-<arch>.json and writes under test/golden/<case>/:

  config.json          the e2e config with OVERRIDES applied (smaller vocabulary
                       and MLP, so that each model's files stay well under 1 MB;
                       the structure -- GQA ratio, head_dim, biases, q/k norms,
                       tied embeddings, llama3 rope scaling, Gemma's embedding
                       scale, (1 + w) norms and sliding window -- is unchanged)
  model.safetensors    the initial parameters, fp32, Hugging Face names
  batch.safetensors    input_ids and labels, I64 [BATCH, SEQ]; some labels -100
  expected.safetensors what one training step computes, under the names the
                       training driver's --dump writes:
                         loss [1]        shifted causal-LM cross-entropy, mean
                                         over labels != -100 (HF's ForCausalLM
                                         loss with labels=...)
                         logits          [BATCH, SEQ, vocab] (all of them: 32 KB)
                         logits.checksum [3]: sum, sum |x|, sqrt(sum x^2) (fp64)
                         grad_norm [1]   total L2 norm before clipping
                                         (torch.nn.utils.clip_grad_norm_)
                         grad_norm.<p>   each parameter's gradient L2 norm
                                         before clipping
                         <p>             every parameter after one clipped
                                         torch.optim.AdamW step
  step.env             the hyper-parameters and shapes (sourced by check.sh)

and test/golden/versions.txt (python, torch, transformers, safetensors).
Everything under test/golden/<arch>/ is written by this script only.

Parameters are not Hugging Face's initialisation (normal(0, 0.02), zero biases,
unit norms), which would leave biases and norm weights untested and attention
almost uniform: every matrix is normal(0, STD), every bias normal(0, STD),
every norm weight 1 + normal(0, NORM_STD) (Gemma's (1 + w) norms: normal(0,
NORM_STD)).
"""
import json
import math
import os
import platform
import sys

import torch
import transformers
import safetensors
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ARCHS = ["qwen2", "qwen3", "llama", "gemma3"]
PLANS = {"qwen2": "qwen2", "qwen3": "qwen3", "llama": "llama", "gemma3": "gemma3"}
# Cases: a directory under test/golden -> its architecture, config keys set
# on top of the e2e config, and the pad id planted in the batch (None:
# none). The -pad cases check nn.Embedding's padding_idx (issue 15): the pad
# row gets no gradient from its lookups (Gemma3's tied lm_head still gives it
# one). Llama with an explicit pad_token_id; Gemma3 with its class default
# (Gemma3TextConfig.pad_token_id = 0, absent from the config).
CASES = {arch: (arch, {}, None) for arch in ARCHS}
CASES["llama-pad"] = ("llama", {"pad_token_id": 3}, 3)
CASES["gemma3-pad"] = ("gemma3", {}, 0)
OVERRIDES = {"vocab_size": 128, "intermediate_size": 32}
BATCH, SEQ = 2, 32
SEED = 20240808
STD, NORM_STD = 0.1, 0.1
# One AdamW step (torch.optim.AdamW names) after clipping to MAX_GRAD_NORM.
LR, BETAS, EPS, WEIGHT_DECAY, MAX_GRAD_NORM = 1e-2, (0.9, 0.999), 1e-6, 0.1, 1.0
MAX_BYTES = 600 * 1024  # per model, all files together


def build_config(arch):
    with open(os.path.join(ROOT, "test", "e2e", "configs", f"tiny-{arch}.json")) as f:
        cfg = json.load(f)
    cfg.update(OVERRIDES)
    return cfg


def check_interpretation(arch, cfg, model):
    """Asserts that transformers reads the config the way shard-import does."""
    c = model.config
    inner = model.model
    layer0 = inner.layers[0].self_attn
    assert c.vocab_size == cfg["vocab_size"] and c.hidden_size == cfg["hidden_size"]
    assert c.num_attention_heads == cfg["num_attention_heads"]
    assert c.num_key_value_heads == cfg["num_key_value_heads"]
    # Tied embeddings: lm_head is the embedding (one parameter, no lm_head.weight).
    tied = cfg.get("tie_word_embeddings", arch == "gemma3")
    assert c.tie_word_embeddings == tied, (c.tie_word_embeddings, tied)
    assert (model.lm_head.weight is inner.embed_tokens.weight) == tied
    has_bias = arch == "qwen2"  # Qwen2: q/k/v biases, no o_proj bias
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert (getattr(layer0, proj).bias is not None) == has_bias, (arch, proj)
    assert layer0.o_proj.bias is None
    assert hasattr(layer0, "q_norm") == (arch in ("qwen3", "gemma3")), arch
    assert hasattr(layer0, "k_norm") == (arch in ("qwen3", "gemma3")), arch
    if arch == "llama":
        rp = c.rope_parameters
        assert rp["rope_type"] == "llama3" and rp["factor"] == 32.0, rp
        assert rp["low_freq_factor"] == 1.0 and rp["high_freq_factor"] == 4.0, rp
        assert rp["original_max_position_embeddings"] == 8192, rp
        # The scaling changes some frequencies of this head_dim.
        hd = cfg["head_dim"]
        plain = 1.0 / (rp["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        inv = inner.rotary_emb.inv_freq.double()
        assert not torch.allclose(inv, plain), "llama3 rope scaling has no effect"
    if arch == "gemma3":
        assert list(c.layer_types) == ["sliding_attention", "full_attention"], c.layer_types
        assert c.sliding_window == cfg["sliding_window"] < SEQ, (c.sliding_window, SEQ)
        assert c.query_pre_attn_scalar == cfg["query_pre_attn_scalar"]
        rp = c.rope_parameters
        assert rp["sliding_attention"]["rope_theta"] == cfg["rope_local_base_freq"], rp
        assert rp["full_attention"]["rope_theta"] == cfg["rope_theta"], rp
        scale = float(inner.embed_tokens.embed_scale)
        assert abs(scale - math.sqrt(cfg["hidden_size"])) < 1e-6, scale
        assert c.final_logit_softcapping is None and c.attn_logit_softcapping is None
    else:
        assert all(t == "full_attention" for t in getattr(c, "layer_types", None) or []), arch


def randomize(arch, model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "norm" in name:
                base = 0.0 if arch == "gemma3" else 1.0  # Gemma computes x * (1 + w)
                p.copy_(base + NORM_STD * noise)
            else:
                p.copy_(STD * noise)


def make_batch(vocab, gen, pad):
    ids = torch.randint(0, vocab, (BATCH, SEQ), generator=gen, dtype=torch.int64)
    labels = ids.clone()
    drop = torch.rand((BATCH, SEQ), generator=gen) < 0.2
    drop[1, :5] = True  # a prompt-like masked prefix
    labels[drop] = -100
    if pad is not None:
        ids[ids == pad] = (pad + 1) % vocab  # only the planted pads below
        ids[0, :4] = pad  # left padding, not scored
        labels[0, :4] = -100
        ids[1, 9] = ids[1, 20] = pad  # pads between packed documents, scored
        labels[1, 9] = labels[1, 20] = pad
    assert (labels[:, 1:] != -100).sum() > SEQ
    return ids, labels


def file_size(path):
    return os.path.getsize(path)


def generate(case):
    arch, extra, pad = CASES[case]
    out = os.path.join(HERE, case)
    os.makedirs(out, exist_ok=True)
    cfg = build_config(arch)
    cfg.update(extra)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    config = transformers.AutoConfig.for_model(
        cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    config._attn_implementation = "eager"
    index = ARCHS.index(case) if case in ARCHS else 100 + list(CASES).index(case)
    gen = torch.Generator().manual_seed(SEED + index)
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                          attn_implementation="eager")
    model.train()  # no dropout in these configs; train() as the driver does
    check_interpretation(arch, cfg, model)
    # The embedding's padding_idx is what shard-import makes of pad_token_id.
    want_pad = cfg.get("pad_token_id", 0 if arch == "gemma3" else None)
    assert model.model.embed_tokens.padding_idx == want_pad, model.model.embed_tokens.padding_idx
    randomize(arch, model, gen)
    params = dict(model.named_parameters())  # tied lm_head appears once, as the embedding
    save_file({n: p.detach().clone().contiguous() for n, p in params.items()},
              os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    ids, labels = make_batch(cfg["vocab_size"], gen, pad)
    if pad is not None:
        assert (ids == pad).sum() == 6, ids
    save_file({"input_ids": ids, "labels": labels}, os.path.join(out, "batch.safetensors"),
              metadata={"format": "pt"})

    result = model(input_ids=ids, labels=labels)
    logits = result.logits.detach().float()
    # Our convention, recomputed: shifted, mean over labels != -100.
    manual = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).double(),
        labels[:, 1:].reshape(-1), ignore_index=-100)
    assert abs(manual.item() - result.loss.item()) < 1e-5 * manual.item(), (manual, result.loss)
    result.loss.backward()
    norms = {n: p.grad.double().norm().item() for n, p in params.items()}
    total = torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_GRAD_NORM)
    assert total.item() > MAX_GRAD_NORM, f"{arch}: norm {total.item()} does not clip"
    opt = torch.optim.AdamW(list(params.values()), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)
    opt.step()

    ld = logits.double()
    expected = {
        "loss": result.loss.detach().float().reshape(1),
        "grad_norm": total.detach().float().reshape(1),
        "logits": logits.contiguous(),
        "logits.checksum": torch.tensor([ld.sum().item(), ld.abs().sum().item(),
                                         ld.pow(2).sum().sqrt().item()], dtype=torch.float32),
    }
    for n, p in params.items():
        expected["grad_norm." + n] = torch.tensor([norms[n]], dtype=torch.float32)
        expected[n] = p.detach().clone().contiguous()
    save_file(expected, os.path.join(out, "expected.safetensors"), metadata={"format": "pt"})

    with open(os.path.join(out, "step.env"), "w") as f:
        f.write("# written by test/golden/generate.py; sourced by test/golden/check.sh\n")
        f.write(f"PLAN={PLANS[arch]}\nBATCH={BATCH}\nSEQ={SEQ}\nLR={LR!r}\n")
        f.write(f"BETAS={BETAS[0]!r},{BETAS[1]!r}\nEPS={EPS!r}\nWEIGHT_DECAY={WEIGHT_DECAY!r}\n")
        f.write(f"MAX_GRAD_NORM={MAX_GRAD_NORM!r}\n")
    size = sum(file_size(os.path.join(out, f)) for f in os.listdir(out))
    assert size < MAX_BYTES, f"{arch}: {size} bytes"
    print(f"{case}: loss {result.loss.item():.7f} grad_norm {total.item():.6f} "
          f"{len(params)} parameters, {size / 1024:.0f} KiB in {os.path.relpath(out, ROOT)}")


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for case in sys.argv[1:] or CASES:
        generate(case)
    with open(os.path.join(HERE, "versions.txt"), "w") as f:
        f.write("# the golden files were generated by test/golden/generate.py with\n")
        f.write(f"python {platform.python_version()}\ntorch {torch.__version__}\n")
        f.write(f"transformers {transformers.__version__}\n")
        f.write(f"safetensors {safetensors.__version__}\n")


if __name__ == "__main__":
    main()
