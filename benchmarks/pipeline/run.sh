#!/usr/bin/env bash
# Pipeline schedules at 2 stages (one core each) and replayed at 2 and 4 (docs/pipeline_parallel.md,
# "Benchmark"). Builds nothing: pass the built binary, or build
# build/benchmarks/pipeline/fathom_pipeline_bench first.
#   benchmarks/pipeline/run.sh [path/to/fathom_pipeline_bench] [options, e.g. --steps 5]
# --bind-to none: Open MPI would otherwise pin each rank (and its progress thread) to one core.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${1:-build/benchmarks/pipeline/fathom_pipeline_bench}
shift || true
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_pipeline_bench target)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online," \
     "$(grep -o -w -E 'avx2|avx512f|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ');" \
     "$(mpirun --version | head -1); $(date '+%Y-%m-%d %H:%M %Z')"
echo "\$ mpirun --bind-to none -np 2 $bench $*"
mpirun --oversubscribe --bind-to none -np 2 "$bench" "$@"
# ZeRO 1 against ZeRO 2 with a pipeline needs a data axis: pipe 2 x data 2 on 4 ranks, oversubscribed
# (bytes and memory, not times).
echo "\$ mpirun --oversubscribe --bind-to none -np 4 $bench --zero-traffic 1 $*"
mpirun --oversubscribe --bind-to none -np 4 "$bench" --zero-traffic 1 "$@"
