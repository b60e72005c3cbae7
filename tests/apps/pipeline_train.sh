#!/bin/sh
# fathom-train with pipeline.stages 2 under mpirun -np 2 (1F1B and zero bubble, 4 micro-batches),
# and with tensor_parallel.autotp_size 2 too under -np 4, trains the run one process trains (final train and val losses within 2e-3 as printed; the
# engine's tests check every step and weight within 1e-5), writes the whole model (fathom-generate
# loads it), its checkpoint resumes on one process and ends the same, fathom-export assembles
# the stages' checkpoint, and stages that do not divide the ranks are refused by name.
#   pipeline_train.sh FATHOM_TRAIN FATHOM_EXPORT FATHOM_GENERATE MPIEXEC WORK_DIR
set -eu
train=$1 export=$2 generate=$3 mpiexec=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
printf '{"train_batch_size": 8, "gradient_accumulation_steps": 4}\n' >"$work/one.json"
for schedule in 1f1b zero_bubble; do
  printf '{"train_batch_size": 8, "gradient_accumulation_steps": 4, "pipeline": {"stages": 2, "schedule": "%s"}}\n' \
    "$schedule" >"$work/$schedule.json"
  "$mpiexec" --oversubscribe -np 2 "$train" --preset tiny --steps 4 --eval-interval 2 --save-every 2 \
    --config "$work/$schedule.json" --out "$work/$schedule" >"$work/$schedule.log"
done
# 3D: pipe 2 x tensor 2 at 4 ranks (oversubscribed).
printf '{"train_batch_size": 8, "gradient_accumulation_steps": 4, "pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2}}\n' \
  >"$work/3d.json"
"$mpiexec" --oversubscribe -np 4 "$train" --preset tiny --steps 4 --eval-interval 2 --config "$work/3d.json" \
  --out "$work/3d" >"$work/3d.log"
"$train" --preset tiny --steps 4 --eval-interval 2 --config "$work/one.json" --out "$work/one" >"$work/one.log"
"$train" --resume "$work/1f1b/checkpoints" --tag global_step2 --config "$work/one.json" --eval-interval 2 \
  --out "$work/resumed" >"$work/resumed.log"
"$export" "$work/1f1b/checkpoints" --out "$work/export.safetensors" >"$work/export.log"
# The pipelined run's model.safetensors holds every stage's parameters: it loads and generates.
"$generate" --model "$work/1f1b/model.safetensors" --prompt "int " --max-tokens 8 --temperature 0 >"$work/generated.txt"
printf '{"train_batch_size": 8, "pipeline": {"stages": 3}}\n' >"$work/three.json"
if "$mpiexec" --oversubscribe -np 2 "$train" --preset tiny --steps 1 --config "$work/three.json" --out "$work/three" \
  >"$work/three.log" 2>&1; then
  echo "pipeline.stages 3 at 2 ranks was not refused"; exit 1
fi
grep -q "pipeline.stages is 3 but the job has 2 ranks, which 3 does not divide" "$work/three.log" ||
  { cat "$work/three.log"; echo "the refusal does not name pipeline.stages"; exit 1; }
cat "$work/1f1b.log" "$work/resumed.log" "$work/export.log"
grep -q "2 ranks (pipeline 2 x data 1, 1f1b)" "$work/1f1b.log" || { echo "the job did not run at pipeline 2"; exit 1; }
final() { sed -n 's/^fathom-train: done in [0-9:]*: train loss \([0-9.]*\), val loss \([0-9.]*\).*/\1 \2/p' "$1"; }
close() { echo "$1 $2" | awk 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 < 4e-6 && d2 * d2 < 4e-6 } END { exit !ok }'; }
grep -q "4 ranks (pipeline 2 x tensor 2 x data 1, 1f1b)" "$work/3d.log" || { echo "the 3D job did not run"; exit 1; }
for run in 1f1b zero_bubble resumed 3d; do
  close "$(final "$work/one.log")" "$(final "$work/$run.log")" ||
    { echo "$run ends with losses $(final "$work/$run.log"), one process with $(final "$work/one.log")"; exit 1; }
done
echo "pipeline 2 (1f1b, zero bubble, resumed on one process, x tensor 2) ends as one process does: train and val loss $(final "$work/one.log")"
