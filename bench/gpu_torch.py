"""The training step of bench/gpu.sh in PyTorch eager with Hugging Face
transformers on one GPU: a randomly initialised model from the config with
fp32 master weights under bf16 autocast (the mixed-precision policy of the
cuda backend), SDPA attention, clipping by total norm and AdamW, batch x seq
random tokens. Prints tokens/s (the mean of the steps after the first two)
and the peak GPU memory allocated, in GiB.
Usage: gpu_torch.py CONFIG BATCH SEQ STEPS"""
import sys
import time

import torch
import transformers

config_path, batch, seq, steps = sys.argv[1], *map(int, sys.argv[2:5])
config = transformers.AutoConfig.from_pretrained(config_path)
config._attn_implementation = "sdpa"
model = transformers.AutoModelForCausalLM.from_config(config).float().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
times = []
for _ in range(steps):
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
rate = batch * seq / (sum(times[2:]) / len(times[2:]))
print(f"{rate:.0f} {torch.cuda.max_memory_allocated() / 2**30:.1f}")
