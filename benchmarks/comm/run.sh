#!/usr/bin/env bash
# Fathom's MPI collectives beside raw MPI at 2 and 4 ranks (nccl-tests-style tables).
# Builds nothing: pass the built binary, or build build/benchmarks/comm/fathom_comm_bench first.
#   benchmarks/comm/run.sh [path/to/fathom_comm_bench] [benchmark options, e.g. --max-bytes 16M]
# Writes comm_bench_np2.json and comm_bench_np4.json beside the binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${1:-build/benchmarks/comm/fathom_comm_bench}
shift || true
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_comm_bench target)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online;" \
     "$(mpirun --version | head -1); $(date '+%Y-%m-%d %H:%M %Z')"
for np in 2 4; do
  echo
  echo "\$ mpirun --oversubscribe -np $np $bench $* --json $(dirname "$bench")/comm_bench_np$np.json"
  mpirun --oversubscribe -np "$np" "$bench" "$@" --json "$(dirname "$bench")/comm_bench_np$np.json"
done

# Data-parallel training step at 1 and 2 ranks, overlapped vs after-backward all-reduce.
# --bind-to none: Open MPI would otherwise pin each rank (and its progress thread) to one core.
dp_bench="$(dirname "$bench")/fathom_dp_step_bench"
if [[ -x "$dp_bench" ]]; then
  for np in 1 2; do
    echo
    echo "\$ mpirun --bind-to none -np $np $dp_bench"
    mpirun --bind-to none -np "$np" "$dp_bench"
  done
fi

# 1-bit Adam: bytes per step and step time beside AdamW, after the freeze, at 2 ranks.
onebit_bench="$(dirname "$bench")/fathom_onebit_bench"
if [[ -x "$onebit_bench" ]]; then
  echo
  echo "\$ mpirun --bind-to none -np 2 $onebit_bench"
  mpirun --bind-to none -np 2 "$onebit_bench"
fi
