#!/usr/bin/env bash
# Creates (or repairs) the Python venv of the TRL peer of Fathom's PPO benchmark (trl_ppo.py).
#
# usage: benchmarks/rlhf/trl_venv.sh VENV_DIR
#
# TRL is pinned to 0.11.4, the last release with the classic
# PPOTrainer(config, model, ref_model, tokenizer).step(queries, responses, scores) API (0.12 removed
# it in favour of PPOv2Trainer/PPOTrainer-with-datasets); everything it needs is pinned to versions
# of the same time (autumn 2024) so that the peer's numbers stay reproducible. Idempotent: a venv
# whose trl already imports at the pinned version is left alone.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 VENV_DIR" >&2
  exit 2
fi
venv=$1

TRL=0.11.4
TRANSFORMERS=4.45.2
TOKENIZERS=0.20.3
HF_HUB=0.26.2
ACCELERATE=1.0.1
DATASETS=3.0.2
TORCH=2.5.1
NUMPY=1.26.4
PYARROW=17.0.0     # newer pyarrow needs NumPy 2
PANDAS=2.2.3
SAFETENSORS=0.4.5
TYRO=0.8.14

py="$venv/bin/python"
# "imports" means the whole PPO stack (trl imports lazily: torch, transformers, datasets load here).
if [[ -x $py ]] && HF_HUB_OFFLINE=1 "$py" -c "import sys, trl; from trl import PPOTrainer
sys.exit(trl.__version__ != '$TRL')" 2>/dev/null; then
  exit 0
fi

echo "creating the TRL $TRL venv in $venv ..." >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip

# PyPI's torch (its CUDA libraries are simply not used on the CPU).
"$venv/bin/pip" install -q "numpy==$NUMPY" "trl==$TRL" "transformers==$TRANSFORMERS" \
  "tokenizers==$TOKENIZERS" "huggingface-hub==$HF_HUB" "accelerate==$ACCELERATE" \
  "datasets==$DATASETS" "pyarrow==$PYARROW" "pandas==$PANDAS" "safetensors==$SAFETENSORS" \
  "tyro==$TYRO" "torch==$TORCH"

HF_HUB_OFFLINE=1 "$py" - <<'EOF' >&2
import accelerate, datasets, numpy, pandas, pyarrow, safetensors, tokenizers, torch, transformers, trl
import huggingface_hub, tyro
for m in (trl, transformers, tokenizers, huggingface_hub, accelerate, datasets, torch, numpy, pyarrow,
          pandas, safetensors, tyro):
    print(f"  {m.__name__}=={m.__version__}")
EOF
