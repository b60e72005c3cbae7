"""The PyTorch peer of fathom_train_gpt_bench: the same GPT shapes and training step
(forward + backward + AdamW, CPU), timed the same way (median of N steps after the warm-up
steps). A benchmark-only peer: Fathom itself never uses Python.

Modes: eager (f32), compile (torch.compile of the model, f32; compiling happens in the warm-up
steps), bf16 (eager under torch.autocast("cpu", dtype=torch.bfloat16), f32 weights and AdamW:
PyTorch's mixed-precision CPU training).

usage: python torch_gpt.py --model NAME --batch B --seq T --threads N [--mode M] [--steps N]
Prints one JSON line: {"model", "mode", "threads", "ms_per_step", "tokens_per_second", "torch"}.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {  # n_layer, n_head, n_embd, vocab: the names of fathom_train_gpt_bench --list
    "small": (4, 4, 256, 512),
    "gpt-10M": (4, 3, 192, 50257),
    "gpt-30M": (6, 6, 384, 50257),
    "gpt2-124M": (12, 12, 768, 50257),
    "gpt2-350M": (24, 16, 1024, 50257),
}


class Block(nn.Module):
    def __init__(self, n_head, n_embd):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, vocab, block):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList(Block(n_head, n_embd) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as Fathom's GPT

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=SHAPES, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--mode", choices=["eager", "compile", "bf16"], default="eager")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n_layer, n_head, n_embd, vocab = SHAPES[args.model]
    batch, seq = args.batch, args.seq
    model = GPT(n_layer, n_head, n_embd, vocab, seq)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    forward = torch.compile(model) if args.mode == "compile" else model
    tokens = torch.randint(0, vocab, (batch, seq + 1))
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    times = []
    for step in range(args.steps + args.warmup):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.mode == "bf16"):
            loss = forward(inputs, targets)
        loss.backward()
        optimizer.step()
        if step >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    ms = sorted(times)[len(times) // 2]
    print(json.dumps({"model": args.model, "mode": args.mode, "threads": args.threads, "ms_per_step": ms,
                      "tokens_per_second": batch * seq / (ms / 1e3), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
