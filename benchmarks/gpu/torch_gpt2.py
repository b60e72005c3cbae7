#!/usr/bin/env python3
"""PyTorch peer of fathom_gpt2_bench: the same GPT-2 124M training step on the same GPU.

A minimal GPT-2 written for this comparison (pre-LayerNorm blocks, fused causal attention
through scaled_dot_product_attention, tanh GELU, lm_head tied to wte, N(0, 0.02) init with
the residual projections scaled by 1/sqrt(2 L)), trained on one batch of random tokens with
fp32 weights under bf16 autocast and AdamW (fused where this torch has it; lr 6e-4, betas
0.9/0.95, eps 1e-8, weight decay 0.1 on every parameter, no clipping, as the Fathom side).
Run eager and under torch.compile; each mode does warm-up steps (compilation happens in the
first) and then timed steps, each timed by the wall clock between two device synchronizations.

FLOPs per token = 6N + 6*L*C*T with N every parameter once (tied wte counted once, position
embeddings included), as fathom_gpt2_bench counts them; MFU against --peak-tflops (989:
dense bf16 of an H100/H200 SXM). Peak memory is torch.cuda.max_memory_allocated per mode.

A benchmark-only peer: Fathom never uses Python, and torch is not a project dependency.
Without torch or without a GPU it prints "skipped: ..." and exits 0.

usage: torch_gpt2.py [--out DIR] [--device cuda|cpu] [--tiny] [--batch 16] [--seq 1024]
                     [--budget-seconds 100] [--modes eager,compile] [--warmup 2]
                     [--max-steps 20] [--peak-tflops 989]
--device cpu --tiny is the smoke test of this script on a machine without a GPU.
"""
import argparse
import gc
import math
import os
import statistics
import sys
import time

PRESETS = {  # n_layer, n_head, n_embd, vocab, block
    "gpt2-124M": (12, 12, 768, 50257, 1024),
    "tiny": (2, 2, 64, 256, 64),
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="the tiny preset (2 layers, 64 wide, vocab 256, block 64)")
    p.add_argument("--batch", type=int, default=0, help="default 16 (4 with --tiny)")
    p.add_argument("--seq", type=int, default=0, help="default 1024 (64 with --tiny)")
    p.add_argument("--budget-seconds", type=float, default=100.0)
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--peak-tflops", type=float, default=-1.0, help="default 989 on cuda, none on cpu")
    a = p.parse_args(argv)
    a.preset = "tiny" if a.tiny else "gpt2-124M"
    a.batch = a.batch or (4 if a.tiny else 16)
    a.seq = a.seq or (64 if a.tiny else 1024)
    if a.peak_tflops < 0:
        a.peak_tflops = 989.0 if a.device == "cuda" else 0.0
    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in ("eager", "compile"):
            p.error(f"--modes: unknown mode {m!r} (eager, compile)")
    if a.seq > PRESETS[a.preset][4]:
        p.error(f"--seq {a.seq} is longer than the block size {PRESETS[a.preset][4]}")
    return a


def build_model_class(torch):
    nn = torch.nn
    F = torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self, n_head, n_embd):
            super().__init__()
            self.n_head = n_head
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            qkv = self.c_attn(x).view(B, T, 3, self.n_head, C // self.n_head)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, head size)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    class MLP(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, n_head, n_embd):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = SelfAttention(n_head, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        def __init__(self, n_layer, n_head, n_embd, vocab, block):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block(n_head, n_embd) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.lm_head.weight = self.wte.weight
            residual_std = 0.02 / math.sqrt(2 * n_layer)
            for name, p in self.named_parameters():
                if name.endswith(".bias"):
                    nn.init.zeros_(p)
                elif ".ln_" in name or name.startswith("ln_f"):
                    nn.init.ones_(p)
                else:
                    nn.init.normal_(p, 0.0, residual_std if name.endswith("c_proj.weight") else 0.02)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT2


def make_optimizer(torch, model, device):
    kwargs = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if device == "cuda":
        try:
            return torch.optim.AdamW(model.parameters(), fused=True, **kwargs), "AdamW (fused)"
        except (TypeError, RuntimeError, ValueError):
            pass
    return torch.optim.AdamW(model.parameters(), **kwargs), "AdamW"


def is_oom(torch, e):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e).lower()


def run_mode(torch, args, mode, batch, allot_s, tokens_host, flops_per_token):
    """One mode at one batch size; allot_s: seconds it may spend, setup and compilation included."""
    dev = torch.device(args.device)
    start = time.perf_counter()
    if args.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(1)
    model = build_model_class(torch)(*PRESETS[args.preset]).to(dev)
    optimizer, optimizer_name = make_optimizer(torch, model, args.device)
    step_model = torch.compile(model) if mode == "compile" else model
    tokens = tokens_host[:batch].to(dev)
    inputs = tokens[:, : args.seq].contiguous()
    targets = tokens[:, 1 : args.seq + 1].contiguous()

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def step():
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16):
            loss = step_model(inputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        return time.perf_counter() - t0, loss

    warm = []
    for _ in range(args.warmup):
        dt, loss = step()
        warm.append(dt)
        if time.perf_counter() - start + 2 * dt > allot_s:
            break
    times = []
    while len(times) < args.max_steps:
        dt, loss = step()
        times.append(dt)
        if time.perf_counter() - start + statistics.median(times) > allot_s:
            break
    ms = statistics.median(times) * 1e3
    tps = batch * args.seq / (ms / 1e3)
    row = {
        "mode": "torch.compile" if mode == "compile" else "eager",
        "batch": batch,
        "warmup": len(warm),
        "timed": len(times),
        "ms": ms,
        "tokens_per_s": tps,
        "mfu": tps * flops_per_token / (args.peak_tflops * 1e12) if args.peak_tflops > 0 else None,
        "peak_bytes": torch.cuda.max_memory_allocated() if args.device == "cuda" else None,
        "first_step_s": warm[0] if warm else times[0],
        "loss": float(loss.item()),
        "optimizer": optimizer_name,
        "note": "",
    }
    del step_model, model, optimizer
    return row


def fmt_bytes(b):
    return "-" if b is None else f"{b / 2**30:.2f} GiB"


def markdown(args, torch, header, rows):
    lines = [f"# PyTorch peer of fathom_gpt2_bench (torch_gpt2.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
    lines += header
    lines += ["", "| mode | batch | warm-up + timed steps | ms/step (median) | tokens/s | MFU | peak memory | first step (s) | last loss | note |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("ms") is None:
            lines.append(f"| {r['mode']} | {r['batch']} | - | - | - | - | - | - | - | {r['note']} |")
            continue
        mfu = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        lines.append(f"| {r['mode']} | {r['batch']} | {r['warmup']} + {r['timed']} | {r['ms']:.1f} | {r['tokens_per_s']:.0f} | "
                     f"{mfu} | {fmt_bytes(r['peak_bytes'])} | {r['first_step_s']:.1f} | {r['loss']:.3f} | {r['note']} |")
    return "\n".join(lines) + "\n"


def tsv(args, rows, parameters, flops_per_token):
    out = ["mode\tbatch\tseq\twarmup\ttimed\tms_per_step\ttokens_per_s\tmfu\tpeak_bytes\tfirst_step_s\tloss\tparameters\tflops_per_token\tnote"]
    for r in rows:
        def v(key, f="{}"):
            return "-" if r.get(key) is None else f.format(r[key])
        out.append("\t".join([r["mode"].replace("torch.compile", "compile"), str(r["batch"]), str(args.seq), v("warmup"), v("timed"),
                              v("ms", "{:.3f}"), v("tokens_per_s", "{:.1f}"), v("mfu", "{:.5f}"), v("peak_bytes"),
                              v("first_step_s", "{:.2f}"), v("loss", "{:.4f}"), str(parameters), f"{flops_per_token:.0f}",
                              r["note"].replace("\t", " ")]))
    return "\n".join(out) + "\n"


def main(argv):
    args = parse_args(argv)
    start = time.perf_counter()
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install raising something else
        print(f"skipped: no torch ({type(e).__name__}: {e})")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"skipped: no CUDA (torch {torch.__version__} sees no GPU)")
        return 0
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    L, H, C, V, block = PRESETS[args.preset]
    probe = build_model_class(torch)(L, H, C, V, block)
    parameters = sum(p.numel() for p in probe.parameters())  # tied weights are yielded once
    del probe
    flops_per_token = 6 * parameters + 6 * L * C * args.seq
    g = torch.Generator().manual_seed(1234)
    tokens_host = torch.randint(0, V, (args.batch, args.seq + 1), generator=g, dtype=torch.int64)
    if args.device == "cuda":
        p = torch.cuda.get_device_properties(0)
        device = f"device: cuda:0 {p.name}, {p.total_memory / 2**30:.1f} GiB; torch {torch.__version__}, CUDA {torch.version.cuda}"
    else:
        device = f"device: cpu, {torch.get_num_threads()} threads; torch {torch.__version__}"
    header = [
        device,
        f"model: {args.preset}, {L} layers, {H} heads, {C} wide, vocab {V}, block {block}; N = {parameters} parameters "
        "(all, tied wte/lm_head once, position embeddings included)",
        f"step: fp32 weights under bf16 autocast, AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1, no clipping), batch "
        f"{args.batch} x {args.seq} tokens requested (random, one batch reused), wall clock between device synchronizations",
        f"flops: 6N + 6*L*C*T = {flops_per_token / 1e6:.1f} MFLOP per token; MFU against "
        + (f"{args.peak_tflops:.0f} TFLOP/s (dense bf16, H100/H200 SXM)" if args.peak_tflops > 0 else "no peak (cpu)"),
    ]
    print("\n".join("- " + line for line in header), flush=True)  # progress; the table at the end repeats it
    os.makedirs(args.out, exist_ok=True)

    rows = []
    batch = args.batch
    # torch.compile's first step compiles (tens of seconds): it gets twice eager's share.
    weights = {"eager": 1.0, "compile": 2.0}
    failed = False
    for i, mode in enumerate(args.modes):
        left = args.budget_seconds - (time.perf_counter() - start)
        allot = left * weights[mode] / sum(weights[m] for m in args.modes[i:])
        halved = []
        while True:
            try:
                row = run_mode(torch, args, mode, batch, allot, tokens_host, flops_per_token)
                break
            except Exception as e:  # noqa: BLE001 - report any failure as a row, keep the other mode
                oom = is_oom(torch, e)
                msg = " ".join(f"{type(e).__name__}: {e}".split())[:300].replace("|", "/")
            # Out of the except block the traceback (and the tensors its frames hold) is gone.
            gc.collect()
            if args.device == "cuda":
                torch.cuda.empty_cache()
            if oom and batch > 1:
                print(f"- {mode}: out of memory at batch {batch}, halving the batch", flush=True)
                halved.append(batch)
                batch //= 2
                continue
            row = {"mode": "torch.compile" if mode == "compile" else "eager", "batch": batch, "ms": None, "note": f"error: {msg}"}
            failed = True
            break
        if halved:
            row["note"] = (f"out of memory at batch {', '.join(map(str, halved))}, halved to {batch}"
                           + ("; " + row["note"] if row["note"] else ""))
        if row.get("ms") is not None:
            print(f"- {row['mode']}: {row['ms']:.1f} ms/step, {row['tokens_per_s']:.0f} tokens/s (first step {row['first_step_s']:.1f} s)", flush=True)
        rows.append(row)
        with open(os.path.join(args.out, "torch_gpt2.md"), "w") as f:
            f.write(markdown(args, torch, header, rows))
        with open(os.path.join(args.out, "torch_gpt2.tsv"), "w") as f:
            f.write(tsv(args, rows, parameters, flops_per_token))
    print()
    print(markdown(args, torch, header, rows), end="")
    print(f"\nwrote {args.out}/torch_gpt2.md and torch_gpt2.tsv in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
