"""The TRL peer of Fathom's PPO iteration benchmark: how long Hugging Face TRL takes, on the CPU,
for one PPO iteration of a randomly initialised GPT-2 of the shape given on the command line.

One iteration = generation (sampling exactly --response-len new tokens per prompt with the KV
cache), then "training": the reward model scores each prompt + response, and
PPOTrainer.step(queries, responses, scores) runs the experience forwards (actor, reference,
values), KL-shaped rewards, GAE, and --ppo-epochs epochs of one optimizer step each
(mini_batch_size = batch). Reported: the means over --iterations timed iterations (after
--warmup untimed ones) of the generation, scoring, training and whole-iteration seconds, and the
generated tokens/s with the KV cache; plus the tokens/s of one extra generation of the same batch
without the cache (not part of any iteration).

Why pinned (benchmarks/rlhf/trl_venv.sh): TRL 0.11.x is the last line with this classic
PPOTrainer(config, model, ref_model, tokenizer).step(...) API, the one DeepSpeed-Chat-style
loops resemble; later releases removed it. Its dependencies are pinned to the same time.

Differences from Fathom / DeepSpeed-Chat that the numbers carry (all TRL's own design):
- the critic is a value head on the actor's trunk (AutoModelForCausalLMWithValueHead), not a
  separate model; one Adam optimizer trains both with loss = policy + vf_coef * value (vf_coef
  = 1 here), at --lr-actor: --lr-critic is accepted for a common command line and ignored;
- TRL 0.11 always whitens the advantages (compute_advantages calls masked_whiten
  unconditionally; whiten_rewards only adds reward whitening);
- the reward model's score is not clipped (TRL's score_clip = None).
No dropout anywhere (GPT-2 resid/embd/attn and the value head's). The tokenizer is a local
256-entry word-level one (id 0 = pad) that PPOTrainer requires; nothing is downloaded
(HF_HUB_OFFLINE=1). A benchmark-only peer: Fathom itself never uses Python.

usage: python trl_ppo.py --n-layer 2 --n-head 2 --n-embd 64 --block-size 32 --batch 16
         --prompt-len 10 --response-len 5 --ppo-epochs 2 --iterations 3 --warmup 1 --threads 2 --json
"""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import sys
import time
import warnings

import torch
import transformers
import trl
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import AutoModelForCausalLMWithValueHead, PPOConfig, PPOTrainer, create_reference_model

VF_COEF = 1.0
# TRL 0.11's notices that PPOConfig/PPOTrainer are deprecated (the reason for the pin) and that
# no dataset is given (the batches are passed to step()): expected, so kept off the table.
warnings.filterwarnings("ignore", message=".*(PPOConfig|PPOTrainer). is deprecated")
warnings.filterwarnings("ignore", message="No dataset is provided")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in [("n-layer", 2), ("n-head", 2), ("n-embd", 64), ("vocab", 256), ("block-size", 32),
                          ("batch", 16), ("prompt-len", 10), ("response-len", 5), ("ppo-epochs", 2),
                          ("iterations", 3), ("warmup", 1), ("threads", 1), ("seed", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr-actor", type=float, default=5e-4)
    p.add_argument("--lr-critic", type=float, default=1e-3, help="ignored: TRL trains the value head with the actor's optimizer")
    p.add_argument("--json", action="store_true", help="print one JSON object on the last line of stdout")
    a = p.parse_args()
    if a.prompt_len + a.response_len > a.block_size:
        p.error("prompt-len + response-len exceeds block-size")
    return a


def byte_tokenizer(vocab):
    # PPOTrainer insists on a transformers tokenizer (it pads with it); the ids are all it uses.
    words = {"<pad>": 0, **{f"<{i}>": i for i in range(1, vocab)}}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(words, unk_token="<pad>")), pad_token="<pad>")


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    # No EOS token: every row samples exactly response-len tokens from all `vocab` ids.
    shape = dict(vocab_size=a.vocab, n_positions=a.block_size, n_embd=a.n_embd, n_layer=a.n_layer, n_head=a.n_head,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None)
    config = GPT2Config(**shape, pad_token_id=0)
    model = AutoModelForCausalLMWithValueHead.from_pretrained(GPT2LMHeadModel(config), summary_dropout_prob=0.0)
    ref_model = create_reference_model(model)
    # The reward model scores at the token before the first pad id; an id outside the vocabulary
    # never occurs, so every sequence is scored at its last token (as Fathom's is).
    reward_config = GPT2Config(**shape, num_labels=1, pad_token_id=a.vocab)
    reward_model = GPT2ForSequenceClassification(reward_config).eval().requires_grad_(False)

    ppo_config = PPOConfig(batch_size=a.batch, mini_batch_size=a.batch, gradient_accumulation_steps=1,
                           ppo_epochs=a.ppo_epochs, learning_rate=a.lr_actor, init_kl_coef=0.1, adap_kl_ctrl=False,
                           cliprange=0.2, cliprange_value=0.2, gamma=1.0, lam=0.95, vf_coef=VF_COEF, seed=a.seed,
                           accelerator_kwargs={"cpu": True})
    trainer = PPOTrainer(ppo_config, model, ref_model, byte_tokenizer(a.vocab))
    if a.lr_critic != a.lr_actor:
        print(f"note: --lr-critic {a.lr_critic:g} ignored; TRL's one optimizer (lr {a.lr_actor:g}) trains the value head too",
              file=sys.stderr)

    sampling = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=a.response_len,
                    min_new_tokens=a.response_len, pad_token_id=0)
    prompts_rng = torch.Generator().manual_seed(a.seed + 1)
    times = {"generation": 0.0, "scoring": 0.0, "training": 0.0, "iteration": 0.0}
    for it in range(a.warmup + a.iterations):
        prompts = torch.randint(1, a.vocab, (a.batch, a.prompt_len), generator=prompts_rng)
        mask = torch.ones_like(prompts)
        t0 = time.perf_counter()
        sequences = model.generate(input_ids=prompts, attention_mask=mask, use_cache=True, **sampling)
        t1 = time.perf_counter()
        responses = sequences[:, a.prompt_len:]
        assert responses.shape[1] == a.response_len, responses.shape
        with torch.no_grad():
            scores = reward_model(input_ids=sequences, attention_mask=torch.ones_like(sequences)).logits[:, 0]
        t2 = time.perf_counter()
        trainer.step(list(prompts), list(responses), list(scores))
        t3 = time.perf_counter()
        if it >= a.warmup:
            for key, seconds in [("generation", t1 - t0), ("scoring", t2 - t1), ("training", t3 - t1), ("iteration", t3 - t0)]:
                times[key] += seconds / a.iterations

    t0 = time.perf_counter()
    model.generate(input_ids=prompts, attention_mask=mask, use_cache=False, **sampling)
    no_cache_s = time.perf_counter() - t0

    tokens = a.batch * a.response_len
    result = {
        "peer": "trl", "trl_version": trl.__version__, "torch_version": torch.__version__,
        "transformers_version": transformers.__version__, "threads": a.threads, "batch": a.batch,
        "prompt_len": a.prompt_len, "response_len": a.response_len, "ppo_epochs": a.ppo_epochs,
        "whiten": "always (TRL 0.11 whitens advantages)", "iterations": a.iterations,
        "generation_s": times["generation"], "training_s": times["training"], "scoring_s": times["scoring"],
        "iteration_s": times["iteration"], "tokens_per_s_cache": tokens / times["generation"],
        "tokens_per_s_no_cache": tokens / no_cache_s,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vf_coef": VF_COEF, "critic": "value head on the actor's trunk",
    }
    print(f"TRL {trl.__version__} PPO, GPT-2 {a.n_layer}L {a.n_head}H {a.n_embd}E vocab {a.vocab}, "
          f"{result['parameters']} parameters (actor + value head), {a.threads} threads, batch {a.batch}, "
          f"prompt {a.prompt_len}, response {a.response_len}, {a.ppo_epochs} epochs, mean of {a.iterations} "
          f"after {a.warmup} warm-up", file=sys.stderr)
    for label, value in [("generation (s)", times["generation"]), ("  scoring (s)", times["scoring"]),
                         ("training incl. scoring (s)", times["training"]), ("iteration (s)", times["iteration"]),
                         ("tokens/s, KV cache", result["tokens_per_s_cache"]),
                         ("tokens/s, no cache", result["tokens_per_s_no_cache"])]:
        print(f"  {label:<28} {value:>12.4f}", file=sys.stderr)
    if a.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
