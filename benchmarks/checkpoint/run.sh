#!/usr/bin/env bash
# Checkpoint save / load time and bytes per rank of ZeRO stages 0-3 at 1, 2 and 4 ranks, beside
# the disk's raw write speed (dd with fdatasync) in the same run and directory. Builds nothing:
# pass the built binary, or build build/benchmarks/checkpoint/fathom_checkpoint_bench first.
#   benchmarks/checkpoint/run.sh [path/to/fathom_checkpoint_bench] [benchmark options, e.g. --repeats 5]
# FATHOM_CKPT_DIR: where to write (default /tmp/fathom_ckpt_bench; removed at the end).
# --bind-to none: Open MPI would otherwise pin each rank to one core; at 4 ranks on a 2-core
# machine --oversubscribe lets the ranks share the cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${1:-build/benchmarks/checkpoint/fathom_checkpoint_bench}
shift || true
[[ -x "$bench" ]] || { echo "no benchmark binary at $bench (build the fathom_checkpoint_bench target)" >&2; exit 1; }
dir=${FATHOM_CKPT_DIR:-/tmp/fathom_ckpt_bench}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online;" \
     "$(df -hT "$(dirname "$dir")" | awk 'NR==2 {print $1 " (" $2 ")"}');" \
     "$(mpirun --version | head -1); $(date '+%Y-%m-%d %H:%M %Z')"
mkdir -p "$dir"
echo
echo "\$ dd if=/dev/zero of=$dir/dd.bin bs=1M count=512 conv=fdatasync"
dd if=/dev/zero of="$dir/dd.bin" bs=1M count=512 conv=fdatasync 2>&1 | tail -1
rm -f "$dir/dd.bin"
for np in 1 2 4; do
  echo
  echo "\$ mpirun --oversubscribe --bind-to none -np $np $bench --dir $dir $*"
  mpirun --oversubscribe --bind-to none -np "$np" "$bench" --dir "$dir" "$@"
done
rm -rf "$dir"
