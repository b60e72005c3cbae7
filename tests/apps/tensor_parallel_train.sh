#!/bin/sh
# fathom-train with tensor_parallel.autotp_size 2 under mpirun -np 2, with sequence parallelism
# off and on, trains the run one process trains (final train and val losses within 2e-3 as
# printed; the engine's tests check every step and weight within 1e-5), its checkpoint resumes at
# tensor 1 on one process and ends as the one-process run does, and fathom-export assembles the
# tensor-parallel checkpoint; its model.safetensors is whole (fathom-generate loads it).
#   tensor_parallel_train.sh FATHOM_TRAIN FATHOM_EXPORT FATHOM_GENERATE MPIEXEC WORK_DIR
set -eu
train=$1 export=$2 generate=$3 mpiexec=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
for tp in 1 2; do
  printf '{"train_batch_size": 8, "tensor_parallel": {"autotp_size": %s}}\n' "$tp" >"$work/tp$tp.json"
done
printf '{"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}, "sequence_parallel": true}\n' >"$work/sp.json"
"$mpiexec" --oversubscribe -np 2 "$train" --preset tiny --steps 4 --save-every 2 --config "$work/tp2.json" \
  --out "$work/tp2" >"$work/tp2.log"
"$mpiexec" --oversubscribe -np 2 "$train" --preset tiny --steps 4 --config "$work/sp.json" --out "$work/sp" \
  >"$work/sp.log"
"$train" --preset tiny --steps 4 --config "$work/tp1.json" --out "$work/tp1" >"$work/tp1.log"
"$train" --resume "$work/tp2/checkpoints" --tag global_step2 --config "$work/tp1.json" --out "$work/resumed" \
  >"$work/resumed.log"
"$export" "$work/tp2/checkpoints" --out "$work/export.safetensors" >"$work/export.log"
# The tensor-parallel run's model.safetensors is the whole, unpadded GPT-2 layout: it loads.
"$generate" --model "$work/tp2/model.safetensors" --prompt "int " --max-tokens 8 --temperature 0 >"$work/generated.txt"
cat "$work/tp2.log" "$work/resumed.log" "$work/export.log"
grep -q "2 ranks (tensor 2 x data 1)" "$work/tp2.log" || { echo "the job did not run at tensor 2 x data 1"; exit 1; }
# fathom-export of the last checkpoint writes what fathom-train wrote (GPT-2's Conv1D layout and
# metadata: fathom-generate and transformers load it), byte for byte.
cmp "$work/tp2/model.safetensors" "$work/export.safetensors" ||
  { echo "fathom-export's file differs from fathom-train's model.safetensors"; exit 1; }
"$generate" --model "$work/export.safetensors" --prompt "int " --max-tokens 8 --temperature 0 >/dev/null
if python3 -c 'import transformers, torch, safetensors' >/dev/null 2>&1; then
  python3 "$(dirname "$0")/../models/hf_gpt2_logits.py" "$work/export.safetensors" "$work/hf_logits.txt" ||
    { echo "transformers' GPT2LMHeadModel does not load fathom-export's file"; exit 1; }
else
  echo "notice: python3 with transformers, torch and safetensors is missing: the export's load in transformers is skipped"
fi
# The resume line names the checkpoint's whole layout, not only its data-parallel size.
grep -q "resuming $work/tp2/checkpoints/global_step2 (step 2, 2 ranks: tensor 2 x data 1)" "$work/resumed.log" ||
  { echo "the resume line does not name the checkpoint's layout"; exit 1; }
final() { sed -n 's/^fathom-train: done in [0-9:]*: train loss \([0-9.]*\), val loss \([0-9.]*\).*/\1 \2/p' "$1"; }
close() { echo "$1 $2" | awk 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 < 4e-6 && d2 * d2 < 4e-6 } END { exit !ok }'; }
for run in tp2 sp resumed; do
  close "$(final "$work/tp1.log")" "$(final "$work/$run.log")" ||
    { echo "$run ends with losses $(final "$work/$run.log"), one process with $(final "$work/tp1.log")"; exit 1; }
done
echo "tensor 2, with sequence parallelism, and resumed at tensor 1 end as one process does: train and val loss $(final "$work/tp1.log")"
