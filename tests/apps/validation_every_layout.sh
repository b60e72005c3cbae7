#!/bin/sh
# The validation loss is the same number at every layout: with the learning rate 0 the weights
# stay the initial ones, and fathom-train prints the same val loss at 1 rank, at 2 and 4 ranks
# (micro-batches of 4 and 2, accumulation 2) and at pipeline 2 (it once evaluated --eval-batches
# micro-batches of the per-rank size: 4.643, 4.660 and 4.696 for the same weights).
#   validation_every_layout.sh FATHOM_TRAIN MPIEXEC WORK_DIR
set -eu
train=$1 mpiexec=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
printf '{"train_batch_size": 16, "gradient_accumulation_steps": 2, "optimizer": {"type": "SGD", "params": {"lr": 0}}%s}\n' \
  "" >"$work/flat.json"
printf '{"train_batch_size": 16, "gradient_accumulation_steps": 2, "optimizer": {"type": "SGD", "params": {"lr": 0}}%s}\n' \
  ', "pipeline": {"stages": 2}' >"$work/pipe.json"
val() { sed -n 's/^step 1\/1 | val loss \([0-9.]*\)$/\1/p' "$1"; }
"$train" --preset tiny --steps 1 --eval-batches 2 --config "$work/flat.json" --out "$work/np1" >"$work/np1.log" 2>&1
for np in 2 4; do
  "$mpiexec" --oversubscribe -np $np "$train" --preset tiny --steps 1 --eval-batches 2 --config "$work/flat.json" \
    --out "$work/np$np" >"$work/np$np.log" 2>&1
done
"$mpiexec" --oversubscribe -np 2 "$train" --preset tiny --steps 1 --eval-batches 2 --config "$work/pipe.json" \
  --out "$work/pipe" >"$work/pipe.log" 2>&1
expected=$(val "$work/np1.log")
[ -n "$expected" ] || { cat "$work/np1.log"; echo "no val loss at 1 rank"; exit 1; }
for run in np2 np4 pipe; do
  [ "$(val "$work/$run.log")" = "$expected" ] ||
    { cat "$work/$run.log"; echo "$run: val loss $(val "$work/$run.log"), one rank $expected"; exit 1; }
done
echo "val loss $expected at 1, 2 and 4 ranks and at pipeline 2"
