#!/usr/bin/env bash
# Fathom vs PyTorch on the CPU: one GPT training step of the small model and GPT-2 124M, f32.
# Installs a current PyTorch from PyPI into a scratch virtual environment (benchmark-only peer),
# runs it at 1 and 2 intra-op threads with and without OMP_WAIT_POLICY=PASSIVE, keeps its best,
# runs Fathom at 2 threads, and prints the table with the ratio.
#   benchmarks/train_gpt/run.sh [build-dir]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
venv=${FATHOM_BENCH_VENV:-$build/bench-venv}
steps=${FATHOM_BENCH_STEPS:-5}

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "installing PyTorch (CPU peer) into $venv ..."
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi

fathom_json=$(mktemp)
"$build/benchmarks/train_gpt/fathom_train_gpt_bench" --threads 2 --steps "$steps" --json "$fathom_json"

echo
echo "| model | Fathom ms/step (2 thr) | PyTorch best ms/step | PyTorch setting | Fathom speed-up |"
echo "|---|---|---|---|---|"
for model in small gpt2-124M; do
  best=""; setting=""
  for threads in 1 2; do
    for policy in "" PASSIVE; do
      line=$(env ${policy:+OMP_WAIT_POLICY=$policy} "$venv/bin/python" benchmarks/train_gpt/torch_gpt.py \
               --model "$model" --threads "$threads" --steps "$steps")
      ms=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['ms_per_step'])" "$line")
      version=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['torch'])" "$line")
      if [[ -z "$best" ]] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$ms" "$best"; then
        best=$ms; setting="torch $version, $threads thread(s)${policy:+, OMP_WAIT_POLICY=$policy}"
      fi
    done
  done
  ours=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([m['ms_per_step'] for m in d['models'] if m['model']==sys.argv[2]][0])" "$fathom_json" "$model")
  python3 -c "import sys; o,b=float(sys.argv[2]),float(sys.argv[3]); print(f'| {sys.argv[1]} | {o:.1f} | {b:.1f} | {sys.argv[4]} | {b/o:.2f}x |')" \
    "$model" "$ours" "$best" "$setting"
done
rm -f "$fathom_json"
