"""The same training step as bench/train_cpu.sh in PyTorch eager with
Hugging Face transformers: a randomly initialised model from the config,
AdamW with clipping, batch x seq random tokens. Prints tokens/s (the mean of
the steps after the first). DTYPE bf16 runs the forward and the loss under
torch.autocast("cpu", dtype=torch.bfloat16) (fp32 weights, gradients and
AdamW state: mixed precision as --param-dtype bf16); default f32.
Usage: train_torch.py CONFIG BATCH SEQ STEPS THREADS [DTYPE]"""
import sys
import time

import torch
import transformers

config_path, batch, seq, steps, threads = sys.argv[1], *map(int, sys.argv[2:6])
bf16 = len(sys.argv) > 6 and sys.argv[6] == "bf16"
torch.set_num_threads(threads)
config = transformers.AutoConfig.from_pretrained(config_path)
model = transformers.AutoModelForCausalLM.from_config(config).float()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, config.vocab_size, (batch, seq))
times = []
for _ in range(steps):
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    times.append(time.perf_counter() - start)
rate = batch * seq / (sum(times[1:]) / len(times[1:]))
print(f"{rate:.0f}")
