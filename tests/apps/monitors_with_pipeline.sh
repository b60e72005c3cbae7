#!/bin/sh
# Every monitor and profiler at once under pipeline.stages 2 (mpirun -np 2): TensorBoard, CSV,
# wall_clock_breakdown, memory_breakdown, the flops profiler, the comms logger and the trace. A
# collective that only some stages reach (the trace's start-of-step barrier once waited in stage
# 0's first forward while stage 1 waited for stage 0's activations) would hang: the job runs
# with a short communication timeout, so such a bug ends it with a message instead.
#   monitors_with_pipeline.sh FATHOM_TRAIN MPIEXEC WORK_DIR
set -eu
train=$1 mpiexec=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cat >"$work/monitors.json" <<JSON
{"train_batch_size": 16, "gradient_accumulation_steps": 4, "pipeline": {"stages": 2},
 "steps_per_print": 1, "wall_clock_breakdown": true, "memory_breakdown": true,
 "tensorboard": {"enabled": true, "output_path": "$work/tb", "job_name": "pipe"},
 "csv_monitor": {"enabled": true, "output_path": "$work/csv", "job_name": "pipe"},
 "flops_profiler": {"enabled": true, "profile_step": 1, "output_file": "$work/flops.txt"},
 "comms_logger": {"enabled": true},
 "trace": {"enabled": true, "output_path": "$work/trace", "steps": [2, 3]}}
JSON
FATHOM_COMM_TIMEOUT=60 "$mpiexec" --oversubscribe -np 2 "$train" --preset tiny --steps 3 --eval-interval 0 \
  --config "$work/monitors.json" --out "$work/run" >"$work/run.log" 2>&1 ||
  { cat "$work/run.log"; echo "fathom-train with every monitor at pipeline 2 failed"; exit 1; }
fail() { cat "$work/run.log"; echo "$1"; exit 1; }
grep -q "2 ranks (pipeline 2 x data 1" "$work/run.log" || fail "the job did not run at pipeline 2"
grep -q "^step 3/3 | loss" "$work/run.log" || fail "no progress line for step 3"
grep -q "^time (ms) | fwd: " "$work/run.log" || fail "no wall_clock_breakdown line"
grep -q "^memory after " "$work/run.log" || fail "no memory_breakdown line"
grep -q "^op  *group (ranks)" "$work/run.log" || fail "no comms logger table"
ls "$work"/tb/pipe/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard event file"
ls "$work"/csv/pipe/*.csv >/dev/null 2>&1 || fail "no CSV monitor file"
grep -q "Fathom flops profiler" "$work/flops.txt" || fail "no flops profile in $work/flops.txt"
# The profiled module is stage 0; the model's parameters are both stages' (the tiny preset's 120.58 K).
grep -Eq "^params of model = params of all stages \* mp_size: +120\.58 K$" "$work/flops.txt" ||
  { cat "$work/flops.txt"; fail "the flops profile does not count both stages' parameters"; }
# The trace holds both ranks' events (one process per rank).
for rank in 0 1; do
  grep -q "\"pid\": *$rank[,}]" "$work/trace/trace.json" || fail "the trace has no events of rank $rank"
done
echo "pipeline 2 with every monitor: 3 steps, trace of both ranks, TensorBoard, CSV, flops profile, comms table"
