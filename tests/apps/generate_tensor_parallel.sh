#!/bin/sh
# fathom-generate under mpirun -np 2 (the model tensor parallel over the ranks, each with its
# heads' key/value cache) prints the tokens one process prints: greedy, and sampled with a seed
# past the block size (the context slides and the cache refills); at 3 ranks the 2 heads do not
# split, and every rank stops with the error.
#   generate_tensor_parallel.sh FATHOM_TRAIN FATHOM_GENERATE MPIEXEC WORK_DIR
set -eu
train=$1 generate=$2 mpiexec=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$train" --preset tiny --steps 2 --eval-interval 0 --out "$work/model" >/dev/null
model="$work/model/model.safetensors"
for args in "--temperature 0 --max-tokens 40" "--temperature 0.8 --top-k 20 --seed 5 --max-tokens 90"; do
  # shellcheck disable=SC2086  # the flags are meant to split
  "$generate" --model "$model" --prompt "int main(" $args >"$work/one.txt"
  # shellcheck disable=SC2086
  "$mpiexec" --oversubscribe -np 2 "$generate" --model "$model" --prompt "int main(" $args >"$work/two.txt"
  cmp "$work/one.txt" "$work/two.txt" ||
    { echo "with $args, 2 ranks printed:"; cat "$work/two.txt"; echo "one process printed:"; cat "$work/one.txt"; exit 1; }
done
# 3 ranks cannot split the tiny model's 2 heads: an error naming both, and the job ends.
if "$mpiexec" --oversubscribe -np 3 "$generate" --model "$model" --max-tokens 4 >/dev/null 2>"$work/three.err"; then
  echo "3 ranks generated from a 2-head model"; exit 1
fi
grep -q "2 query heads and 2 key/value heads do not split over 3 tensor-parallel ranks" "$work/three.err" ||
  { echo "3 ranks failed without naming the heads:"; cat "$work/three.err"; exit 1; }
echo "tensor parallel generation at 2 ranks prints what one process prints ($(wc -c <"$work/one.txt") bytes)"
