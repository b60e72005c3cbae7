#!/bin/sh
# Automatic restart: a rank killed (SIGKILL) after step 5 of an 8-step job at 2 ranks; with
# `fathom --max_restarts 2` the job is relaunched, resumes from its step-4 checkpoint and ends with
# the weights of an uninterrupted run, bit for bit. Without restarts the job fails, without hanging.
#   restart.sh FATHOM_TRAIN FATHOM_LAUNCHER WORK_DIR
set -u
train=$1 launcher=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAILED: $*"; exit 1; }
# run OUT [launcher options...]
run() {
  out=$1
  shift
  "$launcher" --num_procs 2 "$@" "$train" --preset tiny --steps 8 --save-every 2 --eval-interval 0 --out "$out"
}

FATHOM_TEST_KILL_AT_STEP=5 run "$work/restarted" --max_restarts 2 >"$work/restarted.log" 2>&1
status=$?
cat "$work/restarted.log"
[ "$status" -eq 0 ] || fail "the restarted job exited with $status"
grep -q "^fathom: the job failed (exit status [0-9]*); restart 1 of 2" "$work/restarted.log" || fail "no restart line"
grep -q "restart 1 (FATHOM_RESTART_COUNT): resuming $work/restarted" "$work/restarted.log" || fail "no resume"

run "$work/straight" >"$work/straight.log" 2>&1 || { cat "$work/straight.log"; fail "the uninterrupted run failed"; }
cmp "$work/restarted/model.safetensors" "$work/straight/model.safetensors" || fail "the weights differ"

FATHOM_TEST_KILL_AT_STEP=5 run "$work/unrestarted" >"$work/unrestarted.log" 2>&1
status=$?
[ "$status" -ne 0 ] || fail "a job with a killed rank and no restarts succeeded"
echo "restart: the relaunched job equals the uninterrupted one; without restarts the job fails (status $status)"
