#!/bin/sh
# fathom-chat --arch llama: SFT, reward model and PPO on a tiny Llama at 2 ranks, the actor and
# critic at ZeRO-3 (persistence threshold 0, so stage 3 shards every parameter) with the hybrid
# engine generating through the decoder's own forward; the actor is written as a llama folder
# that fathom-generate reads, the reward model under the decoder's names.
#   chat_llama.sh FATHOM_CHAT FATHOM_GENERATE MPIEXEC WORK_DIR
set -eu
chat=$1 generate=$2 mpiexec=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
for role in actor critic; do
  printf '{"train_micro_batch_size_per_gpu": 8, "steps_per_print": 1000,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.0}},
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
    "hybrid_engine": {"enabled": true}}\n' >"$work/$role.json"
done
"$mpiexec" --oversubscribe -np 2 "$chat" --arch llama --preset tiny --out "$work/out" --sft-steps 4 \
  --reward-steps 4 --ppo-iterations 2 --eval-prompts 16 --actor-config "$work/actor.json" \
  --critic-config "$work/critic.json" | grep -v '\[info\]'
grep -q '"model_type": "llama"' "$work/out/step3/actor/config.json" ||
  { echo "step3/actor/config.json is not a llama config"; cat "$work/out/step3/actor/config.json"; exit 1; }
"$generate" --model "$work/out/step3/actor" --prompt "31+" --max-tokens 4 --temperature 0 >"$work/generated.txt"
echo "the llama actor folder read by fathom-generate: $(cat "$work/generated.txt" | od -c | head -1)"
grep -q 'model.layers.1.self_attn.k_proj.weight' "$work/out/step2/reward_model.safetensors" &&
  grep -q 'v_head.weight' "$work/out/step2/reward_model.safetensors" ||
  { echo "step2/reward_model.safetensors lacks the decoder's names or v_head"; exit 1; }
echo "the reward model under the decoder's names, with v_head"
