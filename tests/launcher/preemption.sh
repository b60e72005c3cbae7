#!/bin/sh
# Preemption: SIGTERM to a training job makes every rank finish its step, save a checkpoint and
# exit with 143 (128 + SIGTERM, the shell's convention); the checkpoint then resumes. As one
# process, and at 2 ranks through the fathom launcher, which turns its SIGTERM into SIGUSR1 for
# the ranks (mpirun forwards that at once) and exits with 143 itself.
#   preemption.sh FATHOM_TRAIN FATHOM_LAUNCHER WORK_DIR
set -u
train=$1 launcher=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAILED: $*"; exit 1; }

# preempt NAME SIGNAL_THE_RANKS_SEE COMMAND...: starts a long run in the background, waits for
# its 10th step, sends SIGTERM, and checks the stop.
preempt() {
  name=$1 seen=$2
  shift 2
  "$@" --preset tiny --steps 100000 --save-every 1000 --eval-interval 0 --out "$work/$name" >"$work/$name.log" 2>&1 &
  pid=$!
  tries=0
  until grep -q '^step 10/' "$work/$name.log"; do
    tries=$((tries + 1))
    [ "$tries" -le 600 ] || { kill -9 "$pid"; fail "$name: no step 10 after 120 s"; }
    sleep 0.2
  done
  kill -TERM "$pid"
  wait "$pid"
  status=$?
  cat "$work/$name.log"
  [ "$status" -eq 143 ] || fail "$name: exit status $status, expected 143"
  grep -q "^fathom-train: stopped by $seen after step [0-9]*/100000; continue with --resume $work/$name" \
    "$work/$name.log" || fail "$name: no stop message"
  [ -f "$work/$name/checkpoints/latest" ] || fail "$name: no checkpoint"
  echo "$name: stopped at $(cat "$work/$name/checkpoints/latest") with status 143"
}

preempt one SIGTERM "$train"
step=$(sed -n 's/^fathom-train: stopped by SIGTERM after step \([0-9]*\)\/.*/\1/p' "$work/one.log")
"$train" --resume "$work/one" --steps $((step + 2)) --eval-interval 0 --out "$work/resumed" >"$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; fail "the resume failed"; }
grep -q "resumed from $work/one/checkpoints/global_step$step at step $step" "$work/resume.log" || fail "resume: wrong step"
echo "one: resumed at step $step and finished"

preempt two SIGUSR1 "$launcher" --num_procs 2 "$train"
echo "preemption: every run stopped after a step, saved and resumed"
