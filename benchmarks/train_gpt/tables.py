"""Prints the tables of benchmarks/train_gpt/run.sh from the JSON results it kept.

usage: python3 tables.py RESULTS_DIR [FATHOM_REPORT]
"""
import glob
import json
import os
import subprocess
import sys


def load(folder):
    """Fathom's results by (model, batch, seq, precision); PyTorch's lists of runs (one per
    thread setting) by (model, batch, seq, mode). PyTorch files: torch_MODEL_BxT_MODE_tN_pK.json."""
    fathom, torch = {}, {}
    for path in glob.glob(os.path.join(folder, "*.json")):
        with open(path) as f:
            result = json.load(f)
        parts = os.path.basename(path)[:-len(".json")].split("_")
        if parts[0] == "fathom":
            fathom[(result["model"], result["batch"], result["seq"], result["precision"])] = result
        else:
            batch, seq = (int(v) for v in parts[2].split("x"))
            result["passive"] = parts[5] == "p1"
            torch.setdefault((result["model"], batch, seq, result["mode"]), []).append(result)
    return fathom, torch


def cpu_line(report):
    if not report or not os.access(report, os.X_OK):
        return "CPU: (fathom-report not built)"
    text = subprocess.run([report], capture_output=True, text=True).stdout
    fields = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0] in ("model", "features"):
            fields.setdefault(parts[0], parts[1].strip())
    return f"CPU: {fields.get('model', '?')} ({fields.get('features', '?')})"


def best(runs):
    if not runs:
        return None
    return min(runs, key=lambda r: r["ms_per_step"])


def setting(run):
    return f"{run['threads']} thr" + (", passive" if run.get("passive") else "")


def ms(value):
    return f"{value:.1f}" if value is not None else "-"


def main():
    folder = sys.argv[1]
    report = sys.argv[2] if len(sys.argv) > 2 else None
    fathom, torch = load(folder)
    versions = {r["torch"] for runs in torch.values() for r in runs}
    print(cpu_line(report) + "; Fathom at 2 threads; PyTorch " + ", ".join(sorted(versions)))
    main_cases = [k[:3] for k in sorted(fathom) if k[3] == "f32" and (k[0], k[1], k[2]) in
                  {("small", 8, 128), ("gpt2-124M", 4, 64), ("gpt2-124M", 16, 256), ("llama-100M", 4, 64),
                   ("llama-350M", 4, 64)}]
    main_cases = sorted(set(main_cases), key=lambda c: (c[0] != "small", c[0].startswith("llama"), c[0], c[1]))

    print("\n### f32 training step\n")
    print("| model | batch x seq | Fathom ms | MFU (GEMM GFLOP/s) | limit ms | limit / Fathom | "
          "PyTorch eager ms (setting) | torch.compile ms | Fathom vs best PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, batch, seq in main_cases:
        f = fathom[(model, batch, seq, "f32")]
        eager, compiled = best(torch.get((model, batch, seq, "eager"))), best(torch.get((model, batch, seq, "compile")))
        peers = [r["ms_per_step"] for r in (eager, compiled) if r]
        ratio = f"{min(peers) / f['ms_per_step']:.2f}x" if peers else "-"
        print(f"| {model} | {batch} x {seq} | {f['ms_per_step']:.1f} | {100 * f['mfu']:.1f}% ({f['gemm_gflops']:.0f}) | "
              f"{f['limit_ms']:.1f} | {f['limit_ms'] / f['ms_per_step']:.2f} | "
              f"{ms(eager and eager['ms_per_step'])}{f' ({setting(eager)})' if eager else ''} | "
              f"{ms(compiled and compiled['ms_per_step'])} | {ratio} |")

    print("\n### bf16 training step (fp32 master weights and AdamW)\n")
    print("| model | batch x seq | Fathom f32 ms | Fathom bf16 ms | bf16 speed-up | bf16 MFU (bf16 GEMM GFLOP/s) | "
          "PyTorch autocast bf16 ms | Fathom bf16 vs PyTorch bf16 |")
    print("|---|---|---|---|---|---|---|---|")
    for model, batch, seq in main_cases:
        f32, bf16 = fathom.get((model, batch, seq, "f32")), fathom.get((model, batch, seq, "bf16"))
        if not (f32 and bf16):
            continue
        peer = best(torch.get((model, batch, seq, "bf16")))
        vs = f"{peer['ms_per_step'] / bf16['ms_per_step']:.2f}x" if peer else "-"
        print(f"| {model} | {batch} x {seq} | {f32['ms_per_step']:.1f} | {bf16['ms_per_step']:.1f} | "
              f"{f32['ms_per_step'] / bf16['ms_per_step']:.2f}x | {100 * bf16['mfu']:.1f}% ({bf16['gemm_gflops']:.0f}) | "
              f"{ms(peer and peer['ms_per_step'])} | {vs} |")

    scaling = sorted({k[:3] for k in fathom if k[2] == 128 and k[3] == "f32" and k[0] != "small"},
                     key=lambda c: (fathom[c + ("f32",)]["parameters"], c[1]))
    if scaling:
        print("\n### Scaling: tokens/s at 128 tokens per sequence\n")
        print("| model | params | micro-batch | Fathom f32 tokens/s | f32 MFU | Fathom bf16 tokens/s | bf16 MFU | "
              "PyTorch eager f32 tokens/s | Fathom f32 vs PyTorch | peak RSS GiB (f32) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for case in scaling:
            f32, bf16 = fathom[case + ("f32",)], fathom.get(case + ("bf16",))
            peer = best(torch.get(case + ("eager",)))
            bf16_cells = f"{bf16['tokens_per_second']:.0f} | {100 * bf16['mfu']:.1f}%" if bf16 else "- | -"
            peer_cells = (f"{peer['tokens_per_second']:.0f} | "
                          f"{f32['tokens_per_second'] / peer['tokens_per_second']:.2f}x") if peer else "- | -"
            print(f"| {case[0]} | {f32['parameters'] / 1e6:.1f}M | {case[1]} | {f32['tokens_per_second']:.0f} | "
                  f"{100 * f32['mfu']:.1f}% | {bf16_cells} | {peer_cells} | {f32['peak_rss_gib']:.2f} |")
    rates = [(r["gemm_gflops"], r["copy_gbps"]) for k, r in fathom.items() if k[3] == "f32"]
    if rates:
        print(f"\nMeasured in each Fathom process: f32 GEMM {min(g for g, _ in rates):.0f}-{max(g for g, _ in rates):.0f}"
              f" GFLOP/s, copy {min(c for _, c in rates):.1f}-{max(c for _, c in rates):.1f} GB/s (2 threads). "
              "MFU = model FLOPs (6N + 6LCT per token) / step time / that run's GEMM rate.")


if __name__ == "__main__":
    main()
