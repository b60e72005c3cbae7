#!/bin/sh
# fathom-chat on the built-in task at NP ranks, its three steps at their default lengths: after
# step 3 the reward model's mean score and the true metric (sortedness) on the held-out prompts
# are higher than after step 1, by a margin; step 3 resumed from its checkpoint ends with the
# uninterrupted run's weights, bit for bit; and a JSON Lines file of prompts of two lengths runs
# through all three steps.
#   chat_end_to_end.sh FATHOM_CHAT MPIEXEC NP WORK_DIR
set -eu
chat=$1 mpiexec=$2 np=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
run() { "$mpiexec" --oversubscribe -np "$np" "$chat" --out "$work/out" "$@"; }
quiet() { grep -v '\[info\]' "$1"; }

run >"$work/all.log" || { cat "$work/all.log"; exit 1; }
quiet "$work/all.log"
figure() { sed -n "s/^ *\"$1\": \([-0-9.e+]*\).*/\1/p" "$work/out/summary.json"; }
rises() {  # rises NAME BEFORE AFTER MARGIN
  awk -v a="$3" -v b="$2" -v m="$4" 'BEGIN { exit !(a != "" && b != "" && a > b + m) }' ||
    { echo "the $1 went from $2 (after step 1) to $3 (after step 3); expected a rise of more than $4"; exit 1; }
  echo "the $1 rose from $2 to $3"
}
rises "true metric (sortedness)" "$(figure step1.sortedness)" "$(figure step3.sortedness)" 0.1
rises "reward model's mean score" "$(figure step2.sft_score)" "$(figure step3.score)" 1.0
awk -v a="$(figure step2.accuracy)" 'BEGIN { exit !(a >= 0.8) }' ||
  { echo "the reward model's held-out accuracy is $(figure step2.accuracy), expected >= 0.8"; exit 1; }

run --step 3 --ppo-iterations 6 >"$work/uninterrupted.log"
cp "$work/out/step3/actor/model.safetensors" "$work/uninterrupted.safetensors"
run --step 3 --ppo-iterations 3 >"$work/first_half.log"
run --step 3 --ppo-iterations 6 --resume >"$work/resumed.log"
grep -q "step 3 resumes after iteration 3" "$work/resumed.log" || { cat "$work/resumed.log"; exit 1; }
cmp "$work/uninterrupted.safetensors" "$work/out/step3/actor/model.safetensors" ||
  { echo "step 3 resumed at iteration 3 of 6 ends with other weights than the uninterrupted run"; exit 1; }
echo "step 3 resumed at iteration 3: the uninterrupted run's weights"

# ZeRO-3 actor and critic, the hybrid engine gathering once per generation or per forward: the
# same held-out figures as stage 0.
done_line() { grep "step 3 done" "$1" | sed 's/; wrote.*//'; }
for pin in true false; do
  for role in actor critic; do
    printf '{"train_micro_batch_size_per_gpu": 16, "gradient_clipping": 1.0, "steps_per_print": 1000,
      "optimizer": {"type": "AdamW", "params": {"lr": %s, "weight_decay": 0.0}},
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
      "hybrid_engine": {"enabled": true, "pin_parameters": %s}}\n' "$([ $role = actor ] && echo 5e-4 || echo 1e-3)" \
      $pin >"$work/$role-zero3.json"
  done
  run --step 3 --ppo-iterations 6 --actor-config "$work/actor-zero3.json" --critic-config "$work/critic-zero3.json" \
    >"$work/zero3-$pin.log"
  [ "$(done_line "$work/zero3-$pin.log")" = "$(done_line "$work/uninterrupted.log")" ] ||
    { echo "ZeRO-3 (pin_parameters $pin): $(done_line "$work/zero3-$pin.log")"; echo "stage 0: $(done_line "$work/uninterrupted.log")"; exit 1; }
  echo "ZeRO-3, pin_parameters $pin: $(done_line "$work/zero3-$pin.log"), as at stage 0"
done

# bf16 actor and critic (fp32 master weights): the losses run in f32 on 16-bit outputs.
for role in actor critic; do
  sed 's/"hybrid_engine"/"bf16": {"enabled": true}, "hybrid_engine"/' "$work/$role-zero3.json" >"$work/$role-bf16.json"
done
run --step 3 --ppo-iterations 2 --actor-config "$work/actor-bf16.json" --critic-config "$work/critic-bf16.json" \
  >"$work/bf16.log" || { cat "$work/bf16.log"; exit 1; }
grep -q "step 3 done" "$work/bf16.log" || { cat "$work/bf16.log"; exit 1; }
echo "bf16 at ZeRO-3: step 3 ran"

# User data: prompts of two lengths, batched by length for generation.
i=0
while [ $i -lt 160 ]; do
  if [ $((i % 2)) -eq 0 ]; then p="Q: $((i % 10)) plus one?"; else p="Q: $((i % 10)) plus one, please?"; fi
  printf '{"prompt": "%s", "chosen": " A: %d.", "rejected": " A: no."}\n' "$p" $(((i % 10) + 1)) >>"$work/pairs.jsonl"
  i=$((i + 1))
done
"$mpiexec" --oversubscribe -np "$np" "$chat" --out "$work/user" --data "$work/pairs.jsonl" --sft-steps 4 \
  --reward-steps 4 --ppo-iterations 2 --max-new-tokens 8 >"$work/user.log" || { cat "$work/user.log"; exit 1; }
grep -q "step 3 done" "$work/user.log" || { cat "$work/user.log"; exit 1; }
# The same pairs tokenized beforehand: ids beyond a byte, a 512-id vocabulary (511 pads).
i=0
while [ $i -lt 160 ]; do
  if [ $((i % 2)) -eq 0 ]; then p="300, $((301 + i % 10))"; else p="300, $((301 + i % 10)), 450"; fi
  printf '{"prompt": [%s], "chosen": [%d, 500], "rejected": [%d, 499]}\n' "$p" $((400 + i % 10)) $((410 + i % 10)) \
    >>"$work/pairs_ids.jsonl"
  i=$((i + 1))
done
"$mpiexec" --oversubscribe -np "$np" "$chat" --out "$work/user_ids" --data "$work/pairs_ids.jsonl" --vocab-size 512 \
  --sft-steps 4 --reward-steps 4 --ppo-iterations 2 --max-new-tokens 4 >"$work/user_ids.log" ||
  { cat "$work/user_ids.log"; exit 1; }
grep -q "step 3 done" "$work/user_ids.log" || { cat "$work/user_ids.log"; exit 1; }
echo "user data: three steps ran, on text and on token ids"
