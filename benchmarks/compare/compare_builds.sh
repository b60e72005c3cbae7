#!/usr/bin/env bash
# Before/after speed of a change: runs the same benchmarks from two builds, alternating
# before and after on this machine, and prints each one's median and the ratio.
#
#   benchmarks/compare/compare_builds.sh BEFORE_DIR AFTER_DIR [RUNS]
#
# BEFORE_DIR and AFTER_DIR each hold fathom_train_gpt_bench, fathom_zero_bench and the
# libfathom.so.0 they were built with (copy them out of build/ before the change). RUNS
# (default 5) pairs are run; the figures are the medians of each benchmark's own timing.
# Cases: the small GPT's f32 step (no engine: autograd, nn and kernels) and the ZeRO benchmark's
# stage 0-3 step at 2 ranks on a ~5M-parameter GPT (the engine and its training states).
set -euo pipefail
before=${1:?usage: compare_builds.sh BEFORE_DIR AFTER_DIR [RUNS]}
after=${2:?usage: compare_builds.sh BEFORE_DIR AFTER_DIR [RUNS]}
runs=${3:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)

run_one() {  # dir label run
  local dir=$1 label=$2 i=$3
  LD_LIBRARY_PATH=$dir "$dir/fathom_train_gpt_bench" --model small --batch 8 --seq 128 --steps 10 --json "$out/train_${label}_$i.json" >/dev/null
  LD_LIBRARY_PATH=$dir mpirun --oversubscribe -np 2 -x LD_LIBRARY_PATH "$dir/fathom_zero_bench" --steps 5 \
    --layers 4 --width 256 --heads 4 --vocab 4096 --block 128 --json "$out/zero_${label}_$i.json" >/dev/null
}
for ((i = 0; i < runs; ++i)); do
  run_one "$before" before "$i"
  run_one "$after" after "$i"
done
python3 - "$out" "$runs" <<'PY'
import json, os, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def load(kind, label):
    return [json.load(open(os.path.join(out, f"{kind}_{label}_{i}.json"))) for i in range(runs)]
rows = []
def add(name, before, after):
    b, a = statistics.median(before), statistics.median(after)
    rows.append((name, b, a, b / a))
tb, ta = load("train", "before"), load("train", "after")
def train_ms(results):
    return results["ms_per_step"]
add("small GPT f32 step (ms)", [train_ms(r) for r in tb], [train_ms(r) for r in ta])
zb, za = load("zero", "before"), load("zero", "after")
def stages(results):
    return {c["stage"]: c["step_ms"] for c in results["stages"]}
for stage in sorted(stages(zb[0])):
    add(f"ZeRO stage {stage} step, 2 ranks (ms)", [stages(r)[stage] for r in zb], [stages(r)[stage] for r in za])
print(f"| case | before (median of {runs}) | after (median of {runs}) | before / after |")
print("|---|---|---|---|")
for name, b, a, ratio in rows:
    print(f"| {name} | {b:.1f} | {a:.1f} | {ratio:.3f} |")
PY
