#!/bin/sh
# fathom-train refuses at start, naming the flag, what would otherwise fail late or silently:
# an --out it cannot create, an --out holding another run's checkpoints (--overwrite replaces
# them), --vocab-size for a text file, and a token file not named .bin (--data-format tokens
# reads it).
#   train_inputs.sh FATHOM_TRAIN WORK_DIR
set -u
train=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "$1"; exit 1; }
# expect NAME TEXT COMMAND...: the command exits non-zero before step 1 and prints TEXT.
expect() {
  name=$1 text=$2
  shift 2
  "$@" >"$work/$name.log" 2>&1 && { cat "$work/$name.log"; fail "$name: fathom-train did not refuse"; }
  grep -qF -- "$text" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: no \"$text\""; }
  ! grep -q "^step 1/" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: refused only after training"; }
}
run() { "$train" --preset tiny --steps 2 --eval-interval 0 "$@"; }

expect unwritable_out "--out /proc/fathom_runs: cannot create the folder" run --out /proc/fathom_runs

run --steps 2 --save-every 2 --out "$work/first" >"$work/first.log" 2>&1 || { cat "$work/first.log"; fail "first run failed"; }
expect reused_out "--out $work/first already holds another run's checkpoints (latest: global_step2)" \
  run --preset small --n-layer 1 --out "$work/first"
run --out "$work/first" --overwrite >"$work/overwrite.log" 2>&1 || { cat "$work/overwrite.log"; fail "--overwrite failed"; }
[ ! -e "$work/first/checkpoints" ] || fail "--overwrite left the old checkpoints"

printf 'plain text, read as bytes\n%.0s' $(seq 200) >"$work/text.txt"
expect vocab_for_text "--vocab-size 512 cannot apply: --data $work/text.txt is read as text" \
  run --data "$work/text.txt" --vocab-size 512 --out "$work/text"

# 4096 uint16 tokens (all 0) named .u16: NUL bytes, so not text.
head -c 8192 /dev/zero >"$work/train.u16"
expect tokens_not_bin "--data $work/train.u16 is not text (it holds NUL bytes) and is not named .bin" \
  run --data "$work/train.u16" --vocab-size 512 --out "$work/u16"
run --data "$work/train.u16" --data-format tokens --vocab-size 512 --out "$work/u16" >"$work/u16.log" 2>&1 ||
  { cat "$work/u16.log"; fail "--data-format tokens failed"; }
grep -q "vocab 512" "$work/u16.log" || { cat "$work/u16.log"; fail "--data-format tokens did not read tokens"; }
echo "refused at start: unwritable --out, another run's --out, --vocab-size for text, a token file not named .bin"
