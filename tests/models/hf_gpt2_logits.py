"""Loads a Fathom-written GPT-2 safetensors file with transformers' GPT2LMHeadModel and writes the
logits for the tokens [1, 2, 3, 4] (one per line). Used by tests/models/test_gpt.cpp; the model
config comes from the file's metadata."""
import sys

import torch
from safetensors import safe_open
from transformers import GPT2Config, GPT2LMHeadModel

path, out = sys.argv[1], sys.argv[2]
with safe_open(path, "pt") as f:
    meta = f.metadata()
    state = {name: f.get_tensor(name) for name in f.keys()}
config = GPT2Config(n_layer=int(meta["n_layer"]), n_head=int(meta["n_head"]), n_embd=int(meta["n_embd"]),
                    vocab_size=int(meta["vocab_size"]), n_positions=int(meta["block_size"]),
                    activation_function="gelu_new", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                    bos_token_id=int(meta["vocab_size"]) - 1, eos_token_id=int(meta["vocab_size"]) - 1)
model = GPT2LMHeadModel(config)
missing, unexpected = model.load_state_dict(state, strict=False)
assert not unexpected, unexpected
assert all(name.endswith("attn.bias") or name.endswith("masked_bias") or name == "lm_head.weight"
           for name in missing), missing
model.tie_weights()
model.eval()
with torch.no_grad():
    logits = model(torch.tensor([[1, 2, 3, 4]])).logits
with open(out, "w") as f:
    f.write("\n".join(repr(float(v)) for v in logits.flatten()))
