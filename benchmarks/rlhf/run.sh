#!/usr/bin/env bash
# Fathom's RLHF against Hugging Face TRL on the CPU, everything measured in this run.
#   1. One PPO iteration at the small preset's shape (4 layers, 4 heads, 256 wide; byte
#      vocabulary 256, block 128), 16 prompts of 10 tokens, 16 generated tokens each, 1 PPO
#      epoch, advantages whitened on both sides (TRL 0.11 always whitens): generation and
#      training seconds, generated tokens/s with and without the KV cache. Fathom:
#      fathom_rlhf_bench (DeepSpeed-Chat's four engines, hybrid engine) in f32 and in bf16 (fp32
#      master weights); TRL 0.11.4 (pinned, scratch venv: trl_venv.sh) in f32 at its best of 1
#      and 2 threads. Three interleaved rounds; each peer's best.
#   2. The one-command pipeline: fathom-chat on the built-in task at 1 and 2 ranks, wall time
#      and the true metric (sortedness) after each step.
#   benchmarks/rlhf/run.sh [build-dir]       FATHOM_BENCH_OUT=DIR keeps the results there
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${FATHOM_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
bench=$build/benchmarks/rlhf/fathom_rlhf_bench chat=$build/bin/fathom-chat
[[ -x $bench && -x $chat ]] || { echo "run.sh: build first (scripts/build)" >&2; exit 1; }
venv=${FATHOM_RLHF_VENV:-$build/rlhf-venv}
benchmarks/rlhf/trl_venv.sh "$venv"

shape=(--n-layer 4 --n-head 4 --n-embd 256 --vocab 256 --block-size 128 --batch 16 --prompt-len 10 --response-len 16
       --ppo-epochs 1 --iterations 5 --warmup 1)
# The VM's speed drifts over minutes, so the peers take turns, three rounds, and each keeps its
# best round.
for round in 1 2 3; do
  [[ -s $out/fathom_f32_r$round.json ]] ||
    "$bench" "${shape[@]}" --whiten --threads 2 --json > "$out/fathom_f32_r$round.json" 2>/dev/null
  [[ -s $out/fathom_bf16_r$round.json ]] ||
    "$bench" "${shape[@]}" --whiten --threads 2 --bf16 --json > "$out/fathom_bf16_r$round.json" 2>/dev/null
  for threads in 1 2; do
    [[ -s $out/trl_t${threads}_r$round.json ]] ||
      "$venv/bin/python" benchmarks/rlhf/trl_ppo.py "${shape[@]}" --threads "$threads" --json 2>/dev/null |
      tail -1 > "$out/trl_t${threads}_r$round.json"
  done
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 1 2; do
  if [[ ! -s $out/chat_np$np/summary.json ]]; then
    start=$(date +%s%N)
    mpirun --oversubscribe -np "$np" "$chat" --out "$out/chat_np$np" > "$out/chat_np$np.log" 2>&1
    echo $((($(date +%s%N) - start) / 1000000)) > "$out/chat_np$np.ms"
  fi
done
python3 benchmarks/rlhf/tables.py "$out"
echo "(results in $out)"
