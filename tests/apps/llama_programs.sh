#!/bin/sh
# The Llama family through the programs: fathom-train --arch llama writes a Hugging Face folder
# (the model's config.json, model.safetensors, ds_config.json); fathom-train --model fine-tunes
# that folder at ZeRO-3 over 2 ranks, built shard by shard with every parameter partitioned;
# --resume takes the model from the checkpoint; fathom-export writes a folder that
# fathom-generate decodes to the same tokens as the run's own folder; transformers loads the
# folder when python3 has it (skipped with a notice otherwise); tensor parallelism, with and
# without sequence parallelism, trains what one process trains and its checkpoint resumes on one
# process; indivisible key/value heads, a missing folder and a folder without config.json are
# refused by name.
# fathom-estimate-memory and fathom-config read the folder's config.json too.
#   llama_programs.sh FATHOM_TRAIN FATHOM_EXPORT FATHOM_GENERATE FATHOM_ESTIMATE_MEMORY FATHOM_CONFIG MPIEXEC WORK_DIR
set -eu
train=$1 export=$2 generate=$3 estimate=$4 check=$5 mpiexec=$6 work=$7
rm -rf "$work" && mkdir -p "$work"
fail() { cat "$work/$1.log"; echo "$2"; exit 1; }
printf '{"train_batch_size": 8}\n' >"$work/one.json"
"$train" --arch llama --preset tiny --steps 4 --eval-interval 0 --save-every 4 --config "$work/one.json" \
  --out "$work/pretrained" >"$work/pretrained.log" 2>&1 || fail pretrained "fathom-train --arch llama failed"
for file in config.json model.safetensors ds_config.json; do
  [ -f "$work/pretrained/$file" ] || fail pretrained "the run folder has no $file"
done
grep -q '"model_type": "llama"' "$work/pretrained/config.json" || fail pretrained "config.json is not the model's"
grep -q '"train_batch_size"' "$work/pretrained/ds_config.json" || fail pretrained "ds_config.json is not the DeepSpeed config"

printf '{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}\n' >"$work/z3.json"
"$mpiexec" --oversubscribe -np 2 "$train" --model "$work/pretrained" --steps 2 --eval-interval 0 --block-size 64 \
  --config "$work/z3.json" --out "$work/finetuned" >"$work/finetuned.log" 2>&1 || fail finetuned "fathom-train --model failed"
grep -q "building the model shard by shard" "$work/finetuned.log" || fail finetuned "ZeRO-3 did not build shard by shard"
grep -q "ZeRO stage 3: 21 of 21 parameters partitioned over 2 data-parallel ranks" "$work/finetuned.log" ||
  fail finetuned "ZeRO-3 did not partition every parameter"
grep -q "llama: 2 layers, 4 heads (2 kv), 64 wide, vocab 256, 128 positions ($work/pretrained)" "$work/finetuned.log" ||
  fail finetuned "the fine-tuned model is not the folder's"

"$train" --resume "$work/pretrained" --steps 6 --eval-interval 0 --out "$work/pretrained" >"$work/resumed.log" 2>&1 ||
  fail resumed "--resume of a llama run failed"
grep -q "took the model (llama: 2 layers, 4 heads (2 kv), 64 wide, 128 positions)" "$work/resumed.log" ||
  fail resumed "--resume did not take the model from the checkpoint"

"$export" "$work/pretrained/checkpoints" --tag global_step4 --out "$work/exported" >"$work/export.log" 2>&1 ||
  fail export "fathom-export failed"
[ -f "$work/exported/config.json" ] || fail export "the exported folder has no config.json"
"$generate" --model "$work/exported" --prompt "int " --max-tokens 24 --temperature 0 >"$work/exported.txt"
# The run folder now holds step 6 (the resumed run wrote it): its export decodes the same tokens.
"$export" "$work/pretrained/checkpoints" --tag global_step6 --out "$work/exported6" >/dev/null
"$generate" --model "$work/exported6" --prompt "int " --max-tokens 24 --temperature 0 >"$work/exported6.txt"
"$generate" --model "$work/pretrained" --prompt "int " --max-tokens 24 --temperature 0 >"$work/run.txt"
cmp -s "$work/exported6.txt" "$work/run.txt" || { cat "$work/exported6.txt" "$work/run.txt"; echo "the export decodes otherwise than the run's folder"; exit 1; }

"$estimate" --model "$work/pretrained" --world-size 2 --stage 3 >"$work/estimate.log" 2>&1 || fail estimate "fathom-estimate-memory --model failed"
grep -q "for 125248 parameters ($work/pretrained; llama: 2 layers, 4 heads (2 kv), 64 wide, vocab 256, 128 positions)" "$work/estimate.log" ||
  fail estimate "fathom-estimate-memory did not count the folder's model"
"$check" check "$work/pretrained/ds_config.json" --model "$work/pretrained" >"$work/check.log" 2>&1 ||
  fail check "fathom-config check --model failed"

if python3 -c 'import transformers, torch' >/dev/null 2>&1; then
  python3 -c "import sys, torch; from transformers import AutoModelForCausalLM as M; m = M.from_pretrained(sys.argv[1]); print(type(m).__name__, m(torch.tensor([[1, 2]])).logits.shape[-1])" \
    "$work/finetuned" >"$work/transformers.txt" 2>/dev/null || { echo "transformers cannot load the run folder"; exit 1; }
  grep -q "LlamaForCausalLM 256" "$work/transformers.txt" || { cat "$work/transformers.txt"; exit 1; }
  echo "transformers loads the fine-tuned folder as LlamaForCausalLM"
else
  echo "notice: python3 without transformers and torch: from_pretrained on the run folder not checked"
fi

# Tensor parallelism: the same decoder split over 2 ranks trains what one process trains (final
# train and val losses within 2e-3 as printed; tests/models/test_decoder_parallel.cpp checks every
# step and weight), with sequence parallelism too; key/value heads that do not divide are refused.
printf '{"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}}\n' >"$work/tp.json"
"$mpiexec" --oversubscribe -np 2 "$train" --arch llama --preset tiny --steps 4 --eval-interval 0 --save-every 2 \
  --config "$work/tp.json" --out "$work/tp" >"$work/tp.log" 2>&1 || fail tp "fathom-train --arch llama at tensor 2 failed"
grep -q "2 ranks (tensor 2 x data 1)" "$work/tp.log" || fail tp "the job did not run at tensor 2"
final() { sed -n 's/^fathom-train: done in [0-9:]*: train loss \([0-9.]*\), val loss \([0-9.]*\).*/\1 \2/p' "$1"; }
echo "$(final "$work/pretrained.log") $(final "$work/tp.log")" |
  awk 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 <= 4e-6 && d2 * d2 <= 4e-6 } END { exit !ok }' ||
  { echo "tensor 2 ends with $(final "$work/tp.log"), one process with $(final "$work/pretrained.log")"; exit 1; }
# Its step-2 checkpoint resumes on one process (tensor 1) and ends as the one-process run does.
"$train" --resume "$work/tp/checkpoints" --tag global_step2 --steps 4 --eval-interval 0 --config "$work/one.json" \
  --out "$work/tp_resumed" >"$work/tp_resumed.log" 2>&1 || fail tp_resumed "the tensor-parallel checkpoint did not resume"
grep -q "resuming $work/tp/checkpoints/global_step2 (step 2, 2 ranks: tensor 2 x data 1)" "$work/tp_resumed.log" ||
  fail tp_resumed "the resume line does not name the checkpoint's layout"
echo "$(final "$work/pretrained.log") $(final "$work/tp_resumed.log")" |
  awk 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 <= 4e-6 && d2 * d2 <= 4e-6 } END { exit !ok }' ||
  { echo "resumed at tensor 1: $(final "$work/tp_resumed.log"), one process: $(final "$work/pretrained.log")"; exit 1; }
printf '{"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}, "sequence_parallel": true}\n' >"$work/sp.json"
"$mpiexec" --oversubscribe -np 2 "$train" --arch llama --preset tiny --steps 4 --eval-interval 0 --config "$work/sp.json" \
  --out "$work/sp" >"$work/sp.log" 2>&1 || fail sp "fathom-train --arch llama with sequence parallelism failed"
echo "$(final "$work/pretrained.log") $(final "$work/sp.log")" |
  awk 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 <= 4e-6 && d2 * d2 <= 4e-6 } END { exit !ok }' ||
  { echo "sequence parallel: $(final "$work/sp.log"), one process: $(final "$work/pretrained.log")"; exit 1; }
# One key/value head at tensor 2: replicated on both ranks (Megatron's way), the one process's run.
"$train" --arch llama --preset tiny --n-kv-head 1 --steps 4 --eval-interval 0 --config "$work/one.json" \
  --out "$work/mqa_one" >"$work/mqa_one.log" 2>&1 || fail mqa_one "fathom-train --n-kv-head 1 failed"
"$mpiexec" --oversubscribe -np 2 "$train" --arch llama --preset tiny --n-kv-head 1 --steps 4 --eval-interval 0 \
  --config "$work/tp.json" --out "$work/mqa_tp" >"$work/mqa_tp.log" 2>&1 || fail mqa_tp "one key/value head at tensor 2 failed"
echo "$(final "$work/mqa_one.log") $(final "$work/mqa_tp.log")" |
  awk 'NF == 4 { d1 = $1 - $3; d2 = $2 - $4; ok = d1 * d1 <= 4e-6 && d2 * d2 <= 4e-6 } END { exit !ok }' ||
  { echo "one key/value head at tensor 2: $(final "$work/mqa_tp.log"), one process: $(final "$work/mqa_one.log")"; exit 1; }
# 3 key/value heads neither split over 2 ranks nor replicate onto them: refused, naming the heads.
if "$mpiexec" --oversubscribe -np 2 "$train" --arch llama --preset tiny --n-head 6 --n-kv-head 3 --n-embd 96 --steps 1 \
  --config "$work/tp.json" --out "$work/kv" >"$work/kv.log" 2>&1; then fail kv "3 key/value heads at tensor 2 were not refused"; fi
grep -q "6 query heads and 3 key/value heads do not split over 2 tensor-parallel ranks" "$work/kv.log" ||
  fail kv "the refusal does not name the heads"
if "$train" --model "$work/nowhere" --out "$work/x" >"$work/missing.log" 2>&1; then fail missing "a missing folder was accepted"; fi
grep -q "model folder $work/nowhere does not exist" "$work/missing.log" || fail missing "the error does not name the folder"
mkdir -p "$work/empty"
if "$train" --model "$work/empty" --out "$work/x" >"$work/empty.log" 2>&1; then fail empty "a folder without config.json was accepted"; fi
grep -q "no config.json in $work/empty" "$work/empty.log" || fail empty "the error does not name config.json"
echo "llama through the programs: trained, at tensor 2 (one key/value head replicated too), fine-tuned at ZeRO-3 shard by shard, resumed, exported and decoded the same"
