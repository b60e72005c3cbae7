"""The PyTorch peer of fathom_train_gpt_bench: the same GPT and Llama shapes and training step
(forward + backward + AdamW, CPU), timed the same way (median of N steps after the warm-up
steps). The Llama is written in plain PyTorch as transformers' LlamaForCausalLM computes it
(RMSNorm, rotate-half RoPE, grouped-query attention through scaled_dot_product_attention with
enable_gqa, SwiGLU, untied head). A benchmark-only peer: Fathom itself never uses Python.

Modes: eager (f32), compile (torch.compile of the model, f32; compiling happens in the warm-up
steps), bf16 (eager under torch.autocast("cpu", dtype=torch.bfloat16), f32 weights and AdamW:
PyTorch's mixed-precision CPU training).

usage: python torch_gpt.py --model NAME --batch B --seq T --threads N [--mode M] [--steps N]
Prints one JSON line: {"model", "mode", "threads", "ms_per_step", "tokens_per_second", "torch"}.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {  # n_layer, n_head, n_embd, vocab: the names of fathom_train_gpt_bench --list
    "small": (4, 4, 256, 512),
    "gpt-10M": (4, 3, 192, 50257),
    "gpt-30M": (6, 6, 384, 50257),
    "gpt2-124M": (12, 12, 768, 50257),
    "gpt2-350M": (24, 16, 1024, 50257),
}
LLAMA_SHAPES = {  # n_layer, n_head, n_kv_head, hidden, intermediate, vocab
    "llama-100M": (12, 12, 4, 768, 2048, 32000),
    "llama-350M": (24, 16, 4, 1024, 2816, 32000),
}


class LlamaBlock(nn.Module):
    def __init__(self, n_head, n_kv_head, hidden, intermediate):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, hidden // n_head
        self.input_layernorm = nn.RMSNorm(hidden, eps=1e-6)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(hidden, eps=1e-6)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.input_layernorm(x)
        heads = lambda t, n: t.view(B, T, n, self.head_dim).transpose(1, 2)
        q, k = heads(self.q_proj(h), self.n_head), heads(self.k_proj(h), self.n_kv_head)
        rotate = lambda t: torch.cat((-t[..., self.head_dim // 2:], t[..., :self.head_dim // 2]), dim=-1)
        q, k = q * cos + rotate(q) * sin, k * cos + rotate(k) * sin
        y = F.scaled_dot_product_attention(q, k, heads(self.v_proj(h), self.n_kv_head), is_causal=True,
                                           enable_gqa=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, C))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, n_layer, n_head, n_kv_head, hidden, intermediate, vocab, theta=10000.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaBlock(n_head, n_kv_head, hidden, intermediate) for _ in range(n_layer))
        self.norm = nn.RMSNorm(hidden, eps=1e-6)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        d = hidden // n_head
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, d, 2).float() / d), persistent=False)

    def forward(self, idx, targets):
        angles = torch.outer(torch.arange(idx.shape[1]).float(), self.inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class Block(nn.Module):
    def __init__(self, n_head, n_embd):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, vocab, block):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList(Block(n_head, n_embd) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as Fathom's GPT

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=list(SHAPES) + list(LLAMA_SHAPES), required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--mode", choices=["eager", "compile", "bf16"], default="eager")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch, seq = args.batch, args.seq
    if args.model in LLAMA_SHAPES:
        model = Llama(*LLAMA_SHAPES[args.model])
        vocab = LLAMA_SHAPES[args.model][-1]
    else:
        n_layer, n_head, n_embd, vocab = SHAPES[args.model]
        model = GPT(n_layer, n_head, n_embd, vocab, seq)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    forward = torch.compile(model) if args.mode == "compile" else model
    tokens = torch.randint(0, vocab, (batch, seq + 1))
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    times = []
    for step in range(args.steps + args.warmup):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.mode == "bf16"):
            loss = forward(inputs, targets)
        loss.backward()
        optimizer.step()
        if step >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    ms = sorted(times)[len(times) // 2]
    print(json.dumps({"model": args.model, "mode": args.mode, "threads": args.threads, "ms_per_step": ms,
                      "tokens_per_second": batch * seq / (ms / 1e3), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
