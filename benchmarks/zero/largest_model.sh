#!/usr/bin/env bash
# The largest GPT that trains at each ZeRO stage and world size under a fixed per-rank memory cap.
#   benchmarks/zero/largest_model.sh [path/to/fathom_zero_bench] [--cap MiB (default 512)]
#                                    [--stages "0 1 2 3"] [--ranks "1 2 4"]
# Builds nothing: pass the built binary (default build/benchmarks/zero/fathom_zero_bench).
#
# The cap is FATHOM_CPU_MEMORY_LIMIT_MB: every rank's CPU allocator refuses an allocation that
# would take its live bytes (all tags: model states, activations, communication buffers) past
# it, and the out-of-memory error ends the job through MPI_Abort. An attempt is one mpirun of
# fathom_zero_bench on one stage that must complete 2 training steps (1 warm-up + 1 timed), bf16
# mixed precision + AdamW, micro-batch 1 x 64 tokens per rank; it passes when mpirun exits 0.
# The models: GPT, 512 wide, 8 heads, vocab 8192, 64 positions, n_layer on the ladder below;
# reduce / all-gather buckets and stage3_prefetch_bucket_size of 1e6 elements (the defaults,
# 5e8 and 5e7, would make the buffers larger than the cap), DeepSpeed's default
# stage3_param_persistence_threshold (1e5).
#
# The walk: each (stage, N) starts at the largest rung that trained for the previous stage at the
# same N or for the same stage at the previous N (ZeRO only removes memory along both), walks up
# until the first failure, and, should the start itself fail, down until the first success. The
# answer is a rung that trained with the next one failing. Logs go to largest_model/ beside the
# binary; the table (markdown) is printed at the end. About 5-10 minutes on 2 cores at 512 MiB.
set -uo pipefail
cd "$(dirname "$0")/../.."
bench=build/benchmarks/zero/fathom_zero_bench
cap=512
stages=(0 1 2 3)
ranks=(1 2 4)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cap) cap=$2; shift 2 ;;
    --stages) read -ra stages <<<"$2"; shift 2 ;;
    --ranks) read -ra ranks <<<"$2"; shift 2 ;;
    -*) sed -n '2,4p' "$0" >&2; exit 2 ;;
    *) bench=$1; shift ;;
  esac
done
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_zero_bench target)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

width=512 heads=8 vocab=8192 block=64 buckets=1e6
ladder=(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 18 20 22 24 26 28 30 32 34 36 38 40 44 48 56 64)
logs="$(dirname "$bench")/largest_model"
mkdir -p "$logs"

# GPT parameters (tied head, biases): embeddings V·d + T·d, per layer 12d² + 13d, final LayerNorm 2d.
parameters() { echo $((vocab * width + block * width + $1 * (12 * width * width + 13 * width) + 2 * width)); }
millions() { awk -v p="$1" 'BEGIN { printf "%.1fM", p / 1e6 }'; }

declare -A outcome peak  # "stage,np,rung" -> pass/fail; peak live MiB of a pass
attempt() {  # stage np rung -> status 0 when 2 steps trained under the cap
  local stage=$1 np=$2 rung=$3 key="$1,$2,$3" layers=${ladder[$3]}
  if [[ -z "${outcome[$key]:-}" ]]; then
    local log="$logs/stage${stage}_np${np}_layers${layers}.log" start=$SECONDS
    if FATHOM_CPU_MEMORY_LIMIT_MB=$cap timeout 600 mpirun -x FATHOM_CPU_MEMORY_LIMIT_MB --oversubscribe \
        --bind-to none -np "$np" "$bench" --stages "$stage" --steps 1 --layers "$layers" --width $width \
        --heads $heads --vocab $vocab --block $block --bucket $buckets --prefetch $buckets >"$log" 2>&1; then
      outcome[$key]=pass
      # The row of the stage: column 10 is the peak of live bytes over the run (MiB).
      peak[$key]=$(awk -v s="$stage" '$1 == s && NF >= 16 { print $10 }' "$log")
      local psi; psi=$(sed -n 's/.*GPT \([0-9]*\) parameters.*/\1/p' "$log")
      [[ "$psi" == "$(parameters "$layers")" ]] || echo "warning: $log reports $psi parameters, expected $(parameters "$layers")"
      printf '  stage %d, N=%d, %2d layers (%s): trained, peak live %s MiB (%ds)\n' "$stage" "$np" "$layers" \
        "$(millions "$(parameters "$layers")")" "${peak[$key]}" $((SECONDS - start))
    else
      outcome[$key]=fail
      local why; why=$(grep -m1 -o 'out of host memory: allocating [0-9]* bytes for [a-z_]*' "$log" || true)
      printf '  stage %d, N=%d, %2d layers (%s): failed: %s (%ds)\n' "$stage" "$np" "$layers" \
        "$(millions "$(parameters "$layers")")" "${why:-see $log}" $((SECONDS - start))
    fi
  fi
  [[ "${outcome[$key]}" == pass ]]
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online;" \
     "$(mpirun --version | head -1); $(date '+%Y-%m-%d %H:%M %Z')"
echo "cap: FATHOM_CPU_MEMORY_LIMIT_MB=$cap per rank; GPT ${width} wide, $heads heads, vocab $vocab, $block positions," \
     "n_layer in {${ladder[*]}}; bf16 + AdamW, 1 x $block tokens per rank, 2 steps; buckets and prefetch $buckets"
declare -A largest  # "stage,np" -> rung index (-1: not even the first rung)
begin=$SECONDS
for np in "${ranks[@]}"; do
  previous_np=""
  for candidate in "${ranks[@]}"; do [[ $candidate -lt $np ]] && previous_np=$candidate; done
  for stage in "${stages[@]}"; do
    start=0
    for hint in "$((stage - 1)),$np" "$stage,$previous_np"; do
      [[ -n "${largest[$hint]:-}" && ${largest[$hint]} -gt $start ]] && start=${largest[$hint]}
    done
    rung=$start
    if attempt "$stage" "$np" "$rung"; then
      while ((rung + 1 < ${#ladder[@]})) && attempt "$stage" "$np" $((rung + 1)); do rung=$((rung + 1)); done
    else
      rung=$((rung - 1))
      while ((rung >= 0)) && ! attempt "$stage" "$np" "$rung"; do rung=$((rung - 1)); done
    fi
    largest[$stage,$np]=$rung
  done
done
echo "($((SECONDS - begin)) s in all)"

echo
echo "Largest GPT that trained 2 steps under $cap MiB per rank (parameters; n_layer; peak live MiB of the largest rank)"
echo
header="| stage |" rule="|---:|"
for np in "${ranks[@]}"; do header+=" N=$np |"; rule+="---:|"; done
echo "$header"
echo "$rule"
for stage in "${stages[@]}"; do
  row="| $stage |"
  for np in "${ranks[@]}"; do
    rung=${largest[$stage,$np]}
    if ((rung < 0)); then
      row+=" none (${ladder[0]} layer failed) |"
    else
      layers=${ladder[$rung]} cell="$(millions "$(parameters "${ladder[$rung]}")") ($layers layers; ${peak[$stage,$np,$rung]} MiB)"
      ((rung + 1 == ${#ladder[@]})) && cell+=" (top of the ladder)"
      row+=" $cell |"
    fi
  done
  echo "$row"
done
