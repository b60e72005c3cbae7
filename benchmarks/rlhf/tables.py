"""Prints benchmarks/rlhf/run.sh's tables from the results folder it names."""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
def best(pattern):
    """The run with the shortest iteration among the files matching `pattern` (rounds, threads)."""
    runs = [json.loads(p.read_text()) for p in sorted(out.glob(pattern)) if p.read_text().strip()]
    return min(runs, key=lambda r: r["iteration_s"])


fathom, fathom_bf16, trl = best("fathom_f32_r*.json"), best("fathom_bf16_r*.json"), best("trl_t*_r*.json")

print(f"PPO iteration, small preset's shape ({fathom['parameters']:,} parameters per model), batch {fathom['batch']}, "
      f"{fathom['prompt_len']} + {fathom['response_len']} tokens, {fathom['ppo_epochs']} epoch, whitened advantages")
print(f"(TRL {trl['trl_version']}, PyTorch {trl['torch_version']}, transformers {trl['transformers_version']}, "
      f"its best at {trl['threads']} thread(s); Fathom at {fathom['threads']} threads; each peer's best of 3 "
      "interleaved rounds)\n")
print("| | Fathom f32 | Fathom bf16 | TRL f32 | TRL / Fathom f32 | TRL / Fathom bf16 |")
print("|---|---|---|---|---|---|")
rows = [("generation (ms)", "generation_s", 1e3, False), ("training (ms)", "training_s", 1e3, False),
        ("whole iteration (ms)", "iteration_s", 1e3, False),
        ("generated tokens/s, KV cache", "tokens_per_s_cache", 1, True),
        ("generated tokens/s, no cache", "tokens_per_s_no_cache", 1, True)]
for label, key, scale, higher_is_better in rows:
    f, b, t = fathom[key] * scale, fathom_bf16[key] * scale, trl[key] * scale
    ratio = (lambda x: x / t) if higher_is_better else (lambda x: t / x)
    print(f"| {label} | {f:.1f} | {b:.1f} | {t:.1f} | {ratio(f):.2f}x | {ratio(b):.2f}x |")
print("\nTRL's critic is a value head on the actor's trunk (one forward and backward for both); "
      "Fathom runs DeepSpeed-Chat's separate critic model.\n")

print("fathom-chat, the one command on the built-in task (true metric: sortedness of held-out answers)\n")
print("| ranks | wall time (s) | after step 1 | after step 3 | reward model accuracy | "
      "RM score after step 1 -> 3 | PPO generation / training per iteration (ms) |")
print("|---|---|---|---|---|---|---|")
for run in sorted(out.glob("chat_np*/summary.json")):
    s = json.loads(run.read_text())
    np = run.parent.name.removeprefix("chat_np")
    seconds = float((out / f"chat_np{np}.ms").read_text()) / 1e3
    print(f"| {np} | {seconds:.1f} | {s['step1.sortedness']:.3f} | {s['step3.sortedness']:.3f} | "
          f"{s['step2.accuracy']:.3f} | {s['step2.sft_score']:.2f} -> {s['step3.score']:.2f} | "
          f"{s['step3.generation_s'] * 1e3:.1f} / {s['step3.training_s'] * 1e3:.1f} |")
