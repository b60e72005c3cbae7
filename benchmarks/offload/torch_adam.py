"""PyTorch's CPU AdamW on one flat tensor, the peer of Fathom's CPU Adam (benchmarks/offload/run.sh).

Prints one line "RESULT {json}": the median step time and GB/s at 28 bytes per element (read
param, grad, exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq — no 16-bit copy, which
Fathom's kernel writes as well and counts as 2 more bytes).
"""
import argparse
import json
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--elements", type=int, default=32 << 20)
parser.add_argument("--repeats", type=int, default=10)
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--impl", choices=["default", "foreach", "fused"], default="default")
args = parser.parse_args()
torch.set_num_threads(args.threads)

param = torch.nn.Parameter(torch.full((args.elements,), 0.5))
param.grad = torch.full((args.elements,), 1e-3)
options = {"foreach": {"foreach": True}, "fused": {"fused": True}}.get(args.impl, {"foreach": False})
optimizer = torch.optim.AdamW([param], lr=1e-4, weight_decay=0.01, **options)
times = []
for r in range(args.repeats + 1):
    start = time.perf_counter()
    optimizer.step()
    if r > 0:
        times.append(time.perf_counter() - start)
times.sort()
median = times[len(times) // 2]
print("RESULT " + json.dumps({"mode": "torch_adam", "impl": args.impl, "threads": args.threads,
                              "version": torch.__version__, "adam_ms": median * 1e3,
                              "adam_gbs": 28 * args.elements / median / 1e9}))
