#!/usr/bin/env bash
# Fathom vs PyTorch on the CPU: one GPT training step, everything measured in this run.
#   1. f32: the small model (8 x 128), GPT-2 124M (4 x 64 and 16 x 256) and the Llama-style
#      llama-100M and llama-350M (GQA, RoPE, SwiGLU, untied; 4 x 64): Fathom, its limit
#      (GEMM FLOPs at the measured GEMM rate + AdamW's bytes at the measured copy bandwidth),
#      PyTorch eager at its best thread setting and torch.compile.
#   2. bf16: the same models, Fathom f32 vs bf16, and PyTorch's autocast bf16 training.
#   3. scaling: ~10M to ~350M parameters x micro-batch 1, 4, 16 at 128 tokens: Fathom f32 and
#      bf16 tokens/s and MFU beside PyTorch eager f32.
# Installs a current PyTorch from PyPI into a scratch virtual environment (a benchmark-only
# peer). Results are kept per run in the output folder, so an interrupted run resumes.
#   benchmarks/train_gpt/run.sh [build-dir] [--quick] [--llama]
#     --quick: tables 1-2 without 16 x 256; --llama: only the Llama rows of tables 1-2
#   FATHOM_BENCH_OUT=DIR keeps the results there (default: a new temporary folder)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build quick=0 llama=0
for arg in "$@"; do
  if [[ $arg == --quick ]]; then quick=1; elif [[ $arg == --llama ]]; then llama=1 quick=1; else build=$arg; fi
done
venv=${FATHOM_BENCH_VENV:-$build/bench-venv}
out=${FATHOM_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
bench=$build/benchmarks/train_gpt/fathom_train_gpt_bench
[[ -x $bench ]] || { echo "run.sh: $bench is missing; build first (scripts/build)" >&2; exit 1; }

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "installing PyTorch (CPU peer) into $venv ..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi

fathom() {  # model batch seq precision steps warmup
  local file="$out/fathom_$1_$2x$3_$4.json"
  [[ -s $file ]] || "$bench" --model "$1" --batch "$2" --seq "$3" --precision "$4" --steps "$5" --warmup "$6" \
    --threads 2 --json "$file" >&2
}
peer() {  # model batch seq mode threads passive(0/1) steps warmup
  local file="$out/torch_$1_$2x$3_$4_t$5_p$6.json"
  [[ -s $file ]] && return
  echo "PyTorch $4: $1 $2 x $3, $5 thread(s)$([[ $6 == 1 ]] && echo ', OMP_WAIT_POLICY=PASSIVE')" >&2
  env $([[ $6 == 1 ]] && echo OMP_WAIT_POLICY=PASSIVE) "$venv/bin/python" benchmarks/train_gpt/torch_gpt.py \
    --model "$1" --batch "$2" --seq "$3" --mode "$4" --threads "$5" --steps "$7" --warmup "$8" > "$file.part"
  mv "$file.part" "$file"
}

# Tables 1 and 2. PyTorch eager tries 1 and 2 threads, with and without passive waiting, where a
# step is short enough for the setting to matter; torch.compile compiles in its warm-up steps.
main_cases=("small 8 128" "gpt2-124M 4 64")
((quick)) || main_cases+=("gpt2-124M 16 256")
main_cases+=("llama-100M 4 64" "llama-350M 4 64")
((llama)) && main_cases=("llama-100M 4 64" "llama-350M 4 64")
for case in "${main_cases[@]}"; do
  read -r model batch seq <<< "$case"
  steps=5
  [[ $batch == 16 || $model == llama-350M ]] && steps=3
  fathom "$model" "$batch" "$seq" f32 "$steps" 2
  fathom "$model" "$batch" "$seq" bf16 "$steps" 2
  for threads in 1 2; do
    [[ $batch == 16 && $threads == 1 ]] && continue
    for passive in 0 1; do peer "$model" "$batch" "$seq" eager "$threads" "$passive" "$steps" 2; done
  done
  peer "$model" "$batch" "$seq" compile 2 0 "$steps" 3
  peer "$model" "$batch" "$seq" bf16 2 0 "$steps" 2
done

# Table 3.
if ((!quick)); then
  for model in gpt-10M gpt-30M gpt2-124M gpt2-350M; do
    for batch in 1 4 16; do
      fathom "$model" "$batch" 128 f32 2 1
      fathom "$model" "$batch" 128 bf16 2 1
      peer "$model" "$batch" 128 eager 2 0 2 1
    done
  done
fi

echo
python3 benchmarks/train_gpt/tables.py "$out" "$build/bin/fathom-report"
echo
echo "results: $out"
