#!/usr/bin/env python3
"""PyTorch reference for issue 6's numbers, same shapes as baton's CUDA encoder.

Preset large: x [B*1024, 588] -> Linear(588, 1024) -> GELU(tanh) -> Linear(1024, 2048),
fp32 (TF32 off) and bf16, batch 1 and 32, CUDA events around the forward on
device-resident input, median of 100 after 20 warm-ups; and a 256 MiB
device-to-device copy (bandwidth counted in bytes copied). Prints a Markdown table.
"""
import statistics

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
P, IN, HID, OUT = 1024, 588, 1024, 2048


def timed(fn, warmup=20, reps=100):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(warmup + reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        if i >= warmup:
            out.append(s.elapsed_time(e))
    return statistics.median(out)


print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cuBLAS via torch\n")
print("| shape | dtype | batch | PyTorch ms (median) | issue-6 figure ms |")
print("|---|---|---|---|---|")
ref = {("float32", 1): 0.142, ("bfloat16", 1): 0.071, ("float32", 32): 3.72, ("bfloat16", 32): 0.49}
g = torch.Generator(device=dev).manual_seed(0)
for dtype in (torch.float32, torch.bfloat16):
    w1 = (torch.randn(IN, HID, device=dev, generator=g) / IN**0.5).to(dtype)
    b1 = (torch.randn(HID, device=dev, generator=g) * 0.02).to(dtype)
    w2 = (torch.randn(HID, OUT, device=dev, generator=g) / HID**0.5).to(dtype)
    b2 = (torch.randn(OUT, device=dev, generator=g) * 0.02).to(dtype)
    for batch in (1, 32):
        x = torch.randn(batch * P, IN, device=dev, generator=g).to(dtype)

        def fwd():
            return torch.addmm(b2, F.gelu(torch.addmm(b1, x, w1), approximate="tanh"), w2)

        name = str(dtype).removeprefix("torch.")
        print(f"| large {batch}x{P}x{IN}->{HID}->{OUT} | {name} | {batch} | {timed(fwd):.4f} | {ref[(name, batch)]} |")

n = 256 << 20
src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(1)
dst = torch.empty_like(src)
ms = timed(lambda: dst.copy_(src), 3, 20)
print(f"\n256 MiB device-to-device copy: {ms:.4f} ms, {n / (ms / 1e3) / 1e12:.3f} TB/s (bytes copied); issue-6 figure 2.07 TB/s")
