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

The documents cases (issue 41; DOCUMENTS below) -- qwen2-packed,
llama-packed, gemma3-packed, qwen2-leftpad and nemotron_h-packed (whose
expected step is the second reference itself) -- also write position_ids
(packed) or attention_mask (leftpad) into batch.safetensors and
DOCUMENTS=packed|leftpad into step.env, and are checked here against a
second reference before anything is written: each document run alone, the
per-document summed losses divided by the batch's kept labels, one
backward (loss, every gradient and the logits within DOC_TOL); the
left-padded case also against transformers' own padding queries (see
left_padded_batch and zero_padding_queries).
Everything under test/golden/<arch>/ is written by this script only.

Parameters are not Hugging Face's initialisation (normal(0, 0.02), zero biases,
unit norms), which would leave biases and norm weights untested and attention
almost uniform: every matrix is normal(0, STD), every bias normal(0, STD),
every norm weight 1 + normal(0, NORM_STD) (Gemma's (1 + w) norms: normal(0,
NORM_STD)).
"""
import copy
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
ARCHS = ["qwen2", "qwen3", "llama", "gemma3", "nemotron_h"]
PLANS = {"qwen2": "qwen2", "qwen3": "qwen3", "llama": "llama", "gemma3": "gemma3",
         "nemotron_h": "nemotron_h"}
# Cases: a directory under test/golden -> its architecture, config keys set
# on top of the e2e config, and the pad id planted in the batch (None:
# none). The -pad cases check nn.Embedding's padding_idx (issue 15): the pad
# row gets no gradient from its lookups (Gemma3's tied lm_head still gives it
# one). Llama with an explicit pad_token_id; Gemma3 with its class default
# (Gemma3TextConfig.pad_token_id = 0, absent from the config).
CASES = {arch: (arch, {}, None) for arch in ARCHS}
CASES["llama-pad"] = ("llama", {"pad_token_id": 3}, 3)
# NemotronH (issue 17): Mamba2 ("M"), attention ("*") and MLP ("-") blocks,
# four B/C groups of two heads, chunks of 8 over the 32 tokens;
# time_step_min 0.6 puts transformers' dt clamp (time_step_min, inf) on about
# a third of the steps.
CASES["nemotron_h"] = ("nemotron_h", {"time_step_min": 0.6}, None)
# Parameter names as checkpoints store them, where the module tree differs:
# transformers 5 names NemotronH's stack `model` in memory and saves it as
# `backbone` (its checkpoint conversion), the name shard-import reads.
STORED_PREFIX = {"nemotron_h": ("model.", "backbone.")}
CASES["gemma3-pad"] = ("gemma3", {}, 0)
# Checkpoints as transformers writes them (issue 15), each its own layout:
#   gemma3-cg: Gemma3ForConditionalGeneration with a tiny vision tower, config
#     and weights by save_pretrained (text under language_model.model.*, the
#     tower and projector beside it); check.sh also saves after the step and
#     requires every non-text tensor back byte for byte.
#   gemma3-sparse: the same model class from a sparse text_config (the keys
#     published Gemma 3 configs leave to Gemma3TextConfig's defaults).
#   llama-bf16-sharded: bf16 weights over several shards with
#     model.safetensors.index.json, loaded as a model directory (--load DIR).
CASES["gemma3-cg"] = ("gemma3", {}, None)
CASES["gemma3-sparse"] = ("gemma3", {}, None)
CASES["llama-bf16-sharded"] = ("llama", {}, None)
KINDS = {"gemma3-cg": "conditional", "gemma3-sparse": "sparse",
         "llama-bf16-sharded": "bf16-sharded"}
# The text_config keys the sparse case keeps (the rest come from defaults),
# and what it writes as published Gemma 3 4B/12B/27B configs do: 4.x
# rope_scaling, linear with factor 8 (the full-attention layers), and a
# window; sliding_window_pattern 2 puts a full-attention layer in 2 layers.
SPARSE_KEEP = ["model_type", "vocab_size", "hidden_size", "intermediate_size",
               "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim"]
SPARSE_ADD = {"sliding_window": 8, "sliding_window_pattern": 2,
              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}
TINY_VISION = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                   num_attention_heads=2, image_size=28, patch_size=14)
# Documents (issue 41): batches as Hugging Face's padding-free collator
# (DataCollatorWithFlattening) writes them -- position_ids restarting at 0
# at each document, each document's first label -100 -- two rows of packed
# documents, row 1 starting inside a split document (positions continue
# from 5). The step is transformers' with no attention mask, so that
# masking_utils derives the per-document mask from the positions; Gemma3's
# documents are longer than its sliding window of 8. The -leftpad case is a
# left-padded batch with an attention_mask (no position_ids: transformers'
# default 0..S-1). batch.safetensors then also holds position_ids or
# attention_mask (I64 [BATCH, SEQ]).
# nemotron_h-packed: transformers' torch path of NemotronH isolates the
# documents in its attention layers but not in its Mamba2 mixers (no
# seq_idx), so its expected step is the second reference itself (each
# document alone); its document edges fall inside chunks (13, 12, 21) and on
# one (24).
DOCUMENTS = {"qwen2-packed": "packed", "llama-packed": "packed", "gemma3-packed": "packed",
             "qwen2-leftpad": "leftpad", "nemotron_h-packed": "packed"}
for _case in DOCUMENTS:
    CASES[_case] = (_case.split("-")[0], {}, None)
CASES["nemotron_h-packed"] = ("nemotron_h", {"time_step_min": 0.6}, None)
# Each row's documents: (first position, tokens); the tokens of a row add up
# to SEQ.
PACKED_ROWS = [[(0, 13), (0, 11), (0, 8)], [(5, 12), (0, 9), (0, 11)]]
LEFT_PAD = [6, 0]  # padding tokens at the start of each row
DOC_TOL = 1e-5     # the two references' agreement (see check_references)
# Mixed precision (issue 43): llama-autocast is transformers' step with the
# forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16)
# (fp32 weights, gradients and AdamW state), which check.sh compares with
# the --param-dtype bf16 program (PARAM_DTYPE in step.env).
CASES["llama-autocast"] = ("llama", {}, None)
AUTOCAST = {"llama-autocast"}
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


def text_model(model):
    """The decoder stack: model.model, or a conditional model's language model."""
    return getattr(model.model, "language_model", model.model)


def check_interpretation(arch, cfg, model):
    """Asserts that transformers reads the config the way shard-import does."""
    c = model.config.get_text_config()
    inner = text_model(model)
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


def check_nemotron_h(cfg, model):
    """Asserts that transformers reads the NemotronH config as shard-import does."""
    c = model.config
    kinds = {"M": "linear_attention", "*": "full_attention", "-": "mlp"}
    assert c.layers_block_type == [kinds[k] for k in cfg["hybrid_override_pattern"]], c
    m = model.model.layers[0].mixer
    assert m.n_groups == cfg["n_groups"] > 1 and m.chunk_size == cfg["chunk_size"] < SEQ
    assert m.num_heads == cfg["mamba_num_heads"] and m.head_dim == cfg["mamba_head_dim"]
    assert m.time_step_limit == (cfg["time_step_min"], float("inf")), m.time_step_limit
    assert m.norm.group_size == m.intermediate_size // cfg["n_groups"]
    assert m.in_proj.bias is None and m.conv1d.bias is not None


def stored_name(arch, name):
    old, new = STORED_PREFIX.get(arch, ("", ""))
    return new + name[len(old):] if old and name.startswith(old) else name


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


def packed_batch(vocab, gen):
    """input_ids, labels, position_ids [BATCH, SEQ] of PACKED_ROWS, each row
    built by DataCollatorWithFlattening from its documents, and the
    documents as (row, start, end) spans. Labels: the ids, about 15% of them
    -100 (completion-only losses), the first four of one document too (a
    prompt), and the collator's -100 on each document's first token."""
    collate = transformers.DataCollatorWithFlattening(return_tensors="pt")
    ids, labels, positions, spans = [], [], [], []
    for b, row in enumerate(PACKED_ROWS):
        features, start = [], 0
        for d, (first, n) in enumerate(row):
            doc = torch.randint(0, vocab, (n,), generator=gen, dtype=torch.int64)
            lab = doc.clone()
            lab[torch.rand(n, generator=gen) < 0.15] = -100
            if (b, d) == (1, 1):
                lab[:4] = -100
            features.append({"input_ids": doc.tolist(), "labels": lab.tolist()})
            spans.append((b, start, start + n))
            start += n
        assert start == SEQ, row
        out = collate(features)
        pos = out["position_ids"][0].clone()
        pos[:row[0][1]] += row[0][0]  # a split document continues at its position
        ids.append(out["input_ids"][0])
        labels.append(out["labels"][0])
        positions.append(pos)
    ids, labels, positions = torch.stack(ids), torch.stack(labels), torch.stack(positions)
    assert ids.dtype == labels.dtype == positions.dtype == torch.int64
    for b, s, e in spans:
        assert labels[b, s] == -100 and positions[b, s] == (PACKED_ROWS[b][0][0] if s == 0 else 0)
    return ids, labels, {"position_ids": positions}, spans


def left_padded_batch(vocab, gen, pad):
    """input_ids, labels, attention_mask [BATCH, SEQ]: LEFT_PAD[b] pad
    tokens (mask 0, label -100) before each row's one document. The label of
    a row's first real token is -100 too: the logits that predict it are
    those of a padding query, which attends to no key (transformers gives it
    a uniform average over the row; this project: output 0), so no loss may
    read them."""
    ids = torch.randint(0, vocab, (BATCH, SEQ), generator=gen, dtype=torch.int64)
    ids[ids == pad] = (pad + 1) % vocab
    labels = ids.clone()
    labels[torch.rand((BATCH, SEQ), generator=gen) < 0.15] = -100
    mask = torch.ones((BATCH, SEQ), dtype=torch.int64)
    spans = []
    for b, n in enumerate(LEFT_PAD):
        ids[b, :n] = pad
        labels[b, :n + 1] = -100
        mask[b, :n] = 0
        spans.append((b, n, SEQ))
    return ids, labels, {"attention_mask": mask}, spans


def alone_forward(ref, ids, labels, inputs, spans):
    """Each document run alone through `ref` (its own positions, no mask):
    the summed cross-entropy of its shifted labels over all documents divided
    by the batch's kept labels (a loss to backward), and the logits at the
    documents' tokens (zero elsewhere)."""
    positions = inputs.get("position_ids",
                           torch.arange(SEQ, dtype=torch.int64).expand(BATCH, SEQ))
    kept = (labels[:, 1:] != -100).sum()
    total = 0.0
    logits = None
    for b, s, e in spans:
        out = ref(input_ids=ids[b:b + 1, s:e], position_ids=positions[b:b + 1, s:e],
                  use_cache=False)
        lg = out.logits[0].float()
        if logits is None:
            logits = torch.zeros(BATCH, SEQ, lg.shape[-1])
        logits[b, s:e] = lg.detach()
        total = total + torch.nn.functional.cross_entropy(
            lg[:-1], labels[b, s + 1:e], ignore_index=-100, reduction="sum")
    return total / kept, logits


def documents_alone(model, ids, labels, inputs, spans):
    """The second reference (alone_forward on a copy of `model`, one
    backward): the loss, the gradients by parameter name and the logits."""
    ref = copy.deepcopy(model)
    loss, logits = alone_forward(ref, ids, labels, inputs, spans)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in ref.named_parameters()}
    return loss.detach(), grads, logits


class AloneResult:
    """alone_forward's loss and logits as a model output holds them."""

    def __init__(self, loss, logits):
        self.loss, self.logits = loss, logits


def nemotron_h_documents_step(model, ids, labels, inputs, spans):
    """NemotronH's step on packed documents: each document alone on `model`
    (backward done). Transformers' packed run, whose Mamba2 mixers carry
    their state across documents, must differ from it."""
    with torch.no_grad():
        mixed = model(input_ids=ids, labels=labels, use_cache=False, **inputs).loss.item()
    loss, logits = alone_forward(model, ids, labels, inputs, spans)
    loss.backward()
    assert abs(mixed - loss.item()) > 1e-3 * loss.item(), (mixed, loss)
    print(f"  nemotron_h-packed: each document alone {loss.item():.7f}, "
          f"transformers' packed run (states carried over) {mixed:.7f}")
    return AloneResult(loss, logits)


def zero_padding_queries(model, mask):
    """Forward hooks making each attention's output 0 at padding queries
    (attention_mask 0): the documents contract's padding query, which
    attends to nothing (o_proj has no bias in these models)."""
    keep = mask.to(torch.float32)[:, :, None]

    def hook(module, args, output):
        return (output[0] * keep,) + tuple(output[1:])

    return [layer.self_attn.register_forward_hook(hook) for layer in text_model(model).layers]


def check_references(case, result, params, refs):
    """Fails unless each second reference (name, loss, grads, logits, where:
    the [BATCH, SEQ] tokens its logits cover) agrees with the step within
    DOC_TOL: the loss relatively, every gradient relative to its tensor's
    largest magnitude (at least 1e-3 of the largest of all: gradients that
    vanish analytically, such as a k_proj bias's, are rounding noise), the
    logits relative to their largest magnitude."""
    logits = result.logits.detach().float()
    top = max(p.grad.abs().max().item() for p in params.values())
    for name, loss, grads, ref_logits, where in refs:
        dl = abs(loss.item() - result.loss.item()) / abs(result.loss.item())
        dg = max((grads[n] - p.grad).abs().max().item()
                 / max(p.grad.abs().max().item(), 1e-3 * top) for n, p in params.items())
        dx = ((ref_logits - logits).abs()[where].max() / logits[where].abs().max()).item()
        print(f"  {case} vs {name}: loss {dl:.1e} grads {dg:.1e} logits {dx:.1e}")
        assert max(dl, dg, dx) <= DOC_TOL, f"{case}: {name} differs ({dl}, {dg}, {dx})"


def documents_step(case, model, ids, labels, inputs, spans, params):
    """Transformers' step on a documents batch (see DOCUMENTS), checked
    against the second references; returns its output (loss backward done)."""
    refs = []
    covered = torch.zeros(BATCH, SEQ, dtype=torch.bool)
    for b, s, e in spans:
        covered[b, s:e] = True
    loss, grads, lg = documents_alone(model, ids, labels, inputs, spans)
    refs.append(("each document alone", loss, grads, lg, covered))
    hooks = []
    if "attention_mask" in inputs:  # transformers without the padding-query hooks
        plain = copy.deepcopy(model)
        out = plain(input_ids=ids, labels=labels, use_cache=False, **inputs)
        out.loss.backward()
        refs.append(("transformers' padding queries", out.loss.detach(),
                     {n: p.grad.detach().clone() for n, p in plain.named_parameters()},
                     out.logits.detach().float(), covered))
        hooks = zero_padding_queries(model, inputs["attention_mask"])
    else:  # the documents must matter: without their mask the loss differs
        with torch.no_grad():
            mixed = model(input_ids=ids, labels=labels, use_cache=False).loss.item()
    result = model(input_ids=ids, labels=labels, use_cache=False, **inputs)
    for h in hooks:
        h.remove()
    if not hooks:
        assert abs(mixed - result.loss.item()) > 1e-3 * result.loss.item(), (mixed, result.loss)
    result.loss.backward()
    check_references(case, result, params, refs)
    return result


def file_size(path):
    return os.path.getsize(path)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def conditional_config(cfg):
    """A Gemma3Config around the tiny text config, with a tiny vision tower."""
    text = {k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")}
    v = cfg["vocab_size"]
    return transformers.Gemma3Config(text_config=text, vision_config=TINY_VISION,
                                     mm_tokens_per_image=4, image_token_index=v - 1,
                                     boi_token_index=v - 3, eoi_token_index=v - 2)


def sparse_config(out, cfg):
    """Writes the conditional config with a sparse text_config; returns it as
    transformers reads it back."""
    conditional_config(cfg).save_pretrained(out)
    path = os.path.join(out, "config.json")
    with open(path) as f:
        full = json.load(f)
    full["text_config"] = {k: full["text_config"][k] for k in SPARSE_KEEP}
    full["text_config"].update(SPARSE_ADD)
    write_json(path, full)
    config = transformers.AutoConfig.from_pretrained(out)
    text = config.get_text_config()
    assert text.layer_types == ["sliding_attention", "full_attention"], text.layer_types
    assert text.rope_parameters["full_attention"]["rope_type"] == "linear", text.rope_parameters
    assert text.query_pre_attn_scalar == 256 and text.sliding_window == 8, text
    return config


def build_model(case, out, cfg):
    """The model in float32 and, for the plain cases, its config.json."""
    kind = KINDS.get(case, "causal")
    if kind == "causal" or kind == "bf16-sharded":
        write_json(os.path.join(out, "config.json"), cfg)
        config = transformers.AutoConfig.for_model(
            cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
        cls = transformers.AutoModelForCausalLM
    else:
        config = conditional_config(cfg) if kind == "conditional" else sparse_config(out, cfg)
        cls = transformers.Gemma3ForConditionalGeneration
    config._attn_implementation = "eager"
    make = cls.from_config if cls is transformers.AutoModelForCausalLM else cls._from_config
    return make(config, dtype=torch.float32, attn_implementation="eager")


def save_weights(case, out, model, params):
    """The checkpoint of `case` in its own layout (see CASES)."""
    kind = KINDS.get(case, "causal")
    if kind == "causal":
        arch = CASES[case][0]
        save_file({stored_name(arch, n): p.detach().clone().contiguous()
                   for n, p in params.items()},
                  os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    elif kind == "conditional":
        model.save_pretrained(out)  # config.json and model.safetensors as published
    elif kind == "sparse":  # the weights only: the sparse config.json stays
        tmp = os.path.join(out, "tmp")
        model.save_pretrained(tmp)
        os.replace(os.path.join(tmp, "model.safetensors"), os.path.join(out, "model.safetensors"))
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)
    else:  # bf16 over several shards, with the index
        # A bf16 copy of the state only: model.to(bfloat16) would round the
        # rotary inv_freq buffer of the reference step too.
        # The tied lm_head is the embedding: not written twice (as transformers).
        state = {n: t.detach().to(torch.bfloat16) for n, t in model.state_dict().items()
                 if not (n == "lm_head.weight" and model.config.tie_word_embeddings)}
        model.save_pretrained(out, state_dict=state, max_shard_size="40KB")
        # What a bf16 model's save writes (save_pretrained takes the dtype
        # from the float32 model here).
        path = os.path.join(out, "config.json")
        with open(path) as f:
            written = json.load(f)
        written["dtype"] = "bfloat16"
        write_json(path, written)
        assert os.path.exists(os.path.join(out, "model.safetensors.index.json"))
        shards = [f for f in os.listdir(out) if f.startswith("model-")]
        assert len(shards) >= 3, shards
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))


def reference_step(case, out, cfg, seed):
    """Draws the weights and the batch, writes them, and runs transformers'
    step on them."""
    arch, _, pad = CASES[case]
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(SEED)
    model = build_model(case, out, cfg)
    model.train()  # no dropout in these configs; train() as the driver does
    if arch == "nemotron_h":
        check_nemotron_h(cfg, model)
    elif KINDS.get(case) != "sparse":
        check_interpretation(arch, cfg, model)
    inner = text_model(model)
    # The embedding's padding_idx is what shard-import makes of pad_token_id.
    want_pad = cfg.get("pad_token_id", 0 if arch == "gemma3" else None)
    embed = inner.embeddings if arch == "nemotron_h" else inner.embed_tokens
    assert embed.padding_idx == want_pad, embed.padding_idx
    randomize(arch, model, gen)
    if KINDS.get(case) == "bf16-sharded":  # weights exactly representable in bf16
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    # What the compiled step trains: the text model (a tied lm_head appears
    # once, as the embedding); a vision tower is carried, not trained.
    params = {n: p for n, p in model.named_parameters()
              if "vision_tower" not in n and "multi_modal_projector" not in n}
    save_weights(case, out, model, params)

    # A conditional model's image, begin- and end-of-image ids (the last
    # three) stay out of a text batch.
    text_vocab = cfg["vocab_size"] - (3 if case in KINDS and arch == "gemma3" else 0)
    inputs, spans = {}, None
    if DOCUMENTS.get(case) == "packed":
        ids, labels, inputs, spans = packed_batch(text_vocab, gen)
    elif DOCUMENTS.get(case) == "leftpad":
        ids, labels, inputs, spans = left_padded_batch(text_vocab, gen, want_pad or 0)
    else:
        ids, labels = make_batch(text_vocab, gen, pad)
    if pad is not None:
        assert (ids == pad).sum() == 6, ids
    if arch == "gemma3" and spans:  # the window slides inside documents
        assert sum(e - s > cfg["sliding_window"] for _, s, e in spans) >= 4, spans
    save_file({"input_ids": ids, "labels": labels, **inputs},
              os.path.join(out, "batch.safetensors"), metadata={"format": "pt"})

    if spans and arch == "nemotron_h":
        result = nemotron_h_documents_step(model, ids, labels, inputs, spans)
    elif spans:
        result = documents_step(case, model, ids, labels, inputs, spans, params)
    else:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=case in AUTOCAST):
            result = model(input_ids=ids, labels=labels)
    logits = result.logits.detach().float()
    # Our convention, recomputed: shifted, mean over labels != -100.
    manual = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).double(),
        labels[:, 1:].reshape(-1), ignore_index=-100)
    assert abs(manual.item() - result.loss.item()) < 1e-5 * manual.item(), (manual, result.loss)
    if not spans:  # documents_step did its backward
        result.loss.backward()
    norms = {n: p.grad.double().norm().item() for n, p in params.items()}
    total = torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_GRAD_NORM)
    assert total.item() > MAX_GRAD_NORM, f"{arch}: norm {total.item()} does not clip"
    opt = torch.optim.AdamW(list(params.values()), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)
    opt.step()
    return params, result, logits, norms, total


def generate(case):
    arch, extra, pad = CASES[case]
    out = os.path.join(HERE, case)
    if os.path.isdir(out):
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
    os.makedirs(out, exist_ok=True)
    cfg = build_config(arch)
    cfg.update(extra)
    index = ARCHS.index(case) if case in ARCHS else 100 + list(CASES).index(case)
    params, result, logits, norms, total = reference_step(case, out, cfg, SEED + index)

    ld = logits.double()
    expected = {
        "loss": result.loss.detach().float().reshape(1),
        "grad_norm": total.detach().float().reshape(1),
        "logits": logits.contiguous(),
        "logits.checksum": torch.tensor([ld.sum().item(), ld.abs().sum().item(),
                                         ld.pow(2).sum().sqrt().item()], dtype=torch.float32),
    }
    for n, p in params.items():
        stored = stored_name(arch, n)
        expected["grad_norm." + stored] = torch.tensor([norms[n]], dtype=torch.float32)
        expected[stored] = p.detach().clone().contiguous()
    save_file(expected, os.path.join(out, "expected.safetensors"), metadata={"format": "pt"})

    with open(os.path.join(out, "step.env"), "w") as f:
        f.write("# written by test/golden/generate.py; sourced by test/golden/check.sh\n")
        f.write(f"PLAN={PLANS[arch]}\nBATCH={BATCH}\nSEQ={SEQ}\nLR={LR!r}\n")
        f.write(f"BETAS={BETAS[0]!r},{BETAS[1]!r}\nEPS={EPS!r}\nWEIGHT_DECAY={WEIGHT_DECAY!r}\n")
        f.write(f"MAX_GRAD_NORM={MAX_GRAD_NORM!r}\n")
        if case in KINDS:  # a model directory, loaded as transformers would
            f.write("WEIGHTS=.\n")
        if KINDS.get(case) == "conditional":  # saved back: these bytes unchanged
            f.write("CARRIED='vision_tower. multi_modal_projector.'\n")
        if case in AUTOCAST:  # check.sh compiles --param-dtype bf16
            f.write("PARAM_DTYPE=bf16\n")
        if case in DOCUMENTS:  # check.sh adds the dp meshes
            f.write(f"DOCUMENTS={DOCUMENTS[case]}\n")
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
