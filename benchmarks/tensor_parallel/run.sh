#!/usr/bin/env bash
# Tensor parallelism against data parallelism and one rank on the same global batch, at 2 ranks:
# the tensor group's bytes per rank and step beside the closed form, step time and peak memory
# (docs/tensor_parallel.md, "Benchmark"). Builds nothing: pass the built binary, or build
# build/benchmarks/tensor_parallel/fathom_tensor_parallel_bench first.
#   benchmarks/tensor_parallel/run.sh [path/to/fathom_tensor_parallel_bench] [options, e.g. --steps 5]
# --bind-to none: Open MPI would otherwise pin each rank (and its progress thread) to one core.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${1:-build/benchmarks/tensor_parallel/fathom_tensor_parallel_bench}
shift || true
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_tensor_parallel_bench target)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online;" \
     "$(mpirun --version | head -1); $(date '+%Y-%m-%d %H:%M %Z')"
echo "\$ mpirun --oversubscribe --bind-to none -np 2 $bench $*"
mpirun --oversubscribe --bind-to none -np 2 "$bench" "$@"
