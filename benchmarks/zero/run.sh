#!/usr/bin/env bash
# Per-rank model-state memory and step time of ZeRO stages 0-3 at 1, 2 and 4 ranks, beside the
# formulas (docs/zero_memory.md), with each case's peak of live bytes and stage 3's peak of
# gathered parameter elements. Builds nothing: pass the built binary, or build
# build/benchmarks/zero/fathom_zero_bench first. The largest model that trains under a memory
# cap per stage: benchmarks/zero/largest_model.sh.
#   benchmarks/zero/run.sh [path/to/fathom_zero_bench] [benchmark options, e.g. --f32 --steps 5]
# Writes zero_bench_np{1,2,4}.json beside the binary.
# --bind-to none: Open MPI would otherwise pin each rank (and its progress thread) to one core;
# at 4 ranks on a 2-core machine --oversubscribe lets the ranks share the cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${1:-build/benchmarks/zero/fathom_zero_bench}
shift || true
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_zero_bench target)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online;" \
     "$(mpirun --version | head -1); $(date '+%Y-%m-%d %H:%M %Z')"
for np in 1 2 4; do
  json="$(dirname "$bench")/zero_bench_np$np.json"
  echo
  echo "\$ mpirun --oversubscribe --bind-to none -np $np $bench $* --json $json"
  mpirun --oversubscribe --bind-to none -np "$np" "$bench" "$@" --json "$json"
done
