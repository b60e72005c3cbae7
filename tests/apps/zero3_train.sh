#!/bin/sh
# fathom-train at ZeRO stage 3 with every parameter partitioned (stage3_param_persistence_threshold
# 0; the default keeps all of the tiny preset's parameters whole) trains what one process trains at
# stage 0 — final train and val losses within 2e-3 as printed (1e-2 in bf16; the train loss only
# at data 2, whose validation micro-batches are smaller) — at tensor 2 x data 2
# (mpirun -np 4) and on one process with activation checkpointing, each in f32, in bf16 and with
# parameters and optimizer offloaded to the CPU. Both once crashed in step 1 as soon as parameters
# were partitioned. Each run must say that stage 3 partitioned all 36 parameters.
#   zero3_train.sh FATHOM_TRAIN MPIEXEC WORK_DIR
set -eu
train=$1 mpiexec=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
config() {  # NAME STAGE PRECISION EXTRA
  bf16=false; [ "$3" = bf16 ] && bf16=true
  printf '{"train_batch_size": 8, "bf16": {"enabled": %s}, "zero_optimization": {"stage": %s, "stage3_param_persistence_threshold": 0%s}%s}\n' \
    "$bf16" "$2" "$4" "$5" >"$work/$1.json"
}
offload=', "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}'
tp=', "tensor_parallel": {"autotp_size": 2}'
ac=', "activation_checkpointing": {}'
config one_f32 0 f32 "" ""
config one_bf16 0 bf16 "" ""
config tp_f32 3 f32 "" "$tp"
config tp_bf16 3 bf16 "" "$tp"
config tp_offload 3 f32 "$offload" "$tp"
config ac_f32 3 f32 "" "$ac"
config ac_bf16 3 bf16 "" "$ac"
config ac_offload 3 f32 "$offload" "$ac"
run() {  # NAME RANKS
  if [ "$2" = 1 ]; then set -- "$1" "$train"; else set -- "$1" "$mpiexec" --oversubscribe -np "$2" "$train"; fi
  name=$1; shift
  "$@" --preset tiny --steps 4 --eval-interval 4 --config "$work/$name.json" --out "$work/$name" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; echo "$name failed"; exit 1; }
}
for name in one_f32 one_bf16 ac_f32 ac_bf16 ac_offload; do run $name 1; done
for name in tp_f32 tp_bf16 tp_offload; do run $name 4; done
final() { sed -n 's/^fathom-train: done in [0-9:]*: train loss \([0-9.]*\), val loss \([0-9.]*\).*/\1 \2/p' "$1"; }
close() {  # BOUND "TRAIN VAL" "TRAIN VAL"
  echo "$2 $3" | awk -v b="$1" 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 <= b * b && d2 * d2 <= b * b } END { exit !ok }'
}
for name in tp_f32 tp_bf16 tp_offload ac_f32 ac_bf16 ac_offload; do
  ranks="over 1 data-parallel rank "; case $name in tp_*) ranks="over 2 data-parallel ranks " ;; esac
  grep -q "ZeRO stage 3: 36 of 36 parameters partitioned $ranks" "$work/$name.log" ||
    { cat "$work/$name.log"; echo "$name: stage 3 did not partition every parameter $ranks"; exit 1; }
  case $name in *bf16) one=one_bf16 bound=1e-2 ;; *) one=one_f32 bound=2e-3 ;; esac
  mine=$(final "$work/$name.log") alone=$(final "$work/$one.log")
  case $name in tp_*) mine="${mine% *} 0" alone="${alone% *} 0" ;; esac
  close $bound "$alone" "$mine" ||
    { echo "$name ends with losses $(final "$work/$name.log"), one process at stage 0 with $(final "$work/$one.log")"; exit 1; }
done
grep -q "4 ranks (tensor 2 x data 2)" "$work/tp_f32.log" || { echo "the job did not run at tensor 2 x data 2"; exit 1; }
echo "ZeRO-3 partitioned, at tensor 2 x data 2 and with activation checkpointing, in f32, bf16 and with cpu offload, ends as one process does: $(final "$work/one_f32.log") (f32), $(final "$work/one_bf16.log") (bf16)"
