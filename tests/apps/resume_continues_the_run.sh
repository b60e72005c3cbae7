#!/bin/sh
# fathom-train --resume with no other flag continues the run its checkpoint belongs to: resumed
# at step 4 of a 6-step run on the same world size, it ends with the uninterrupted run's loss and
# weights, bit for bit; at another world size it keeps the global batch.
#   resume_continues_the_run.sh FATHOM_TRAIN MPIEXEC WORK_DIR
set -eu
train=$1 mpiexec=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$train" --preset tiny --steps 6 --save-every 4 --eval-interval 0 --out "$work/a" >"$work/a.log"
# --tag with the run's --out folder (not only its checkpoints/ folder).
"$train" --resume "$work/a" --tag global_step4 --eval-interval 0 --out "$work/b" >"$work/b.log"
"$mpiexec" --oversubscribe -np 2 "$train" --resume "$work/a/checkpoints" --tag global_step4 --eval-interval 0 \
  --out "$work/c" >"$work/c.log"
cat "$work/b.log" "$work/c.log"
final_loss() { sed -n 's/^fathom-train: done in [0-9:]*: \(train loss [0-9.]*\).*/\1/p' "$1"; }
[ -n "$(final_loss "$work/a.log")" ] && [ "$(final_loss "$work/a.log")" = "$(final_loss "$work/b.log")" ] ||
  { echo "the resumed run ends with $(final_loss "$work/b.log"), the uninterrupted one with $(final_loss "$work/a.log")"; exit 1; }
cmp "$work/a/model.safetensors" "$work/b/model.safetensors" ||
  { echo "the resumed run's weights differ from the uninterrupted run's"; exit 1; }
# The resumed run keeps saving every 4 steps: its last checkpoint is the end of the run.
[ "$(cat "$work/b/checkpoints/latest" 2>/dev/null)" = global_step6 ] ||
  { echo "the resumed run forgot --save-every: its latest checkpoint is $(cat "$work/b/checkpoints/latest" 2>/dev/null)"; exit 1; }
echo "resumed at the same world size: the uninterrupted run's $(final_loss "$work/a.log") and weights, saving as it did"
