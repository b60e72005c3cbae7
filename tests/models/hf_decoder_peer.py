"""transformers as the peer of Fathom's decoder (tests/models/test_hf_models.cpp).

  hf_decoder_peer.py make KIND DIR   a random tiny KIND (llama, qwen2, mistral, gpt2) saved with
                                     save_pretrained into DIR, and DIR/reference.safetensors:
                                     the logits of fixed ids, the next-token loss and every
                                     parameter's gradient of it, and 100 greedily generated tokens
  hf_decoder_peer.py logits DIR OUT  loads DIR (a folder Fathom wrote) with AutoModelForCausalLM
                                     and writes the logits of the same ids to OUT (safetensors)
"""
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, MistralConfig, Qwen2Config

IDS = torch.tensor([[3, 17, 42, 5, 99, 7, 200, 1, 64, 33, 12, 250],
                    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 255, 128]])
PROMPT = torch.tensor([[5, 6, 7, 8]])
NEW_TOKENS = 100


def config_of(kind):
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=128, attention_dropout=0.0)
    if kind == "llama":  # GQA 4:2, untied, Llama 3.1's rope scaling
        return LlamaConfig(num_key_value_heads=2, tie_word_embeddings=False, rope_theta=500000.0,
                           rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
                           **common)
    if kind == "qwen2":  # q/k/v biases, tied
        return Qwen2Config(num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1e6, **common)
    if kind == "mistral":  # a window shorter than the sequence
        return MistralConfig(num_key_value_heads=1, sliding_window=5, tie_word_embeddings=False, **common)
    if kind == "gpt2":  # GPT-2 on the same decoder: LayerNorm, learned positions, GELU, tied
        return GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=128, resid_pdrop=0.0,
                          embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_new")
    raise SystemExit(f"unknown kind {kind}")


def make(kind, folder):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config_of(kind), attn_implementation="eager").float()
    # Biases start at zero and norms at one: move them so a wrong reading shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    out = model(IDS, labels=IDS)
    out.loss.backward()
    reference = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        reference["grad." + name] = p.grad.contiguous()
    model.eval()
    # No end-of-sequence token: every step is the argmax (min_new_tokens would forbid eos instead).
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        generated = model.generate(PROMPT, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    reference["generated"] = generated[0, PROMPT.shape[1]:].contiguous()
    save_file(reference, f"{folder}/reference.safetensors")


def logits(folder, out):
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        save_file({"logits": model(IDS).logits.contiguous()}, out)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    else:
        logits(sys.argv[2], sys.argv[3])
