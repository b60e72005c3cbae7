#!/usr/bin/env python3
"""Prints tests/data/deepspeed_memory_estimates.tsv: DeepSpeed's own ZeRO model-state memory
estimates, from calling its functions

    deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs
    deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs

(the arithmetic behind estimate_zero{2,3}_model_states_mem_needs_all_cold) for a few model sizes
and GPU layouts. tests/zero/test_memory_estimate.cpp compares them with
fathom::zero::estimate_model_states; docs/zero_memory.md explains each difference.

DeepSpeed's estimators assume fp16 mixed precision with Adam. Columns: the estimator (zero2 or
zero3), total params, gpus_per_node, num_nodes, cpu_offload (offload_optimizer), the other
arguments as key=value, and the returned GPU bytes (per GPU) and CPU bytes (per node).

To rerun (from the repository root; DeepSpeed needs torch to install and import, but no GPU, and
no ops are built):
    python3 -m venv /tmp/dsenv && /tmp/dsenv/bin/pip install torch wheel setuptools
    DS_BUILD_OPS=0 /tmp/dsenv/bin/pip install --no-build-isolation deepspeed==0.19.8
    /tmp/dsenv/bin/python scripts/reference/deepspeed_memory_estimates.py > tests/data/deepspeed_memory_estimates.tsv
"""

import contextlib
import io
import sys

with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed prints accelerator notes on import
    import deepspeed
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

BUFFER_FACTOR = 1.5  # additional_buffer_factor, DeepSpeed's default

# (total params, largest layer's params). GPT-2 124M as models::GPT builds it (tied head; its
# largest layer is the 50257 x 768 token embedding); an uneven count so shards need padding; and
# a Llama-2-7B-sized model (largest layer: the 32000 x 4096 embedding).
MODELS = [(124_439_808, 50_257 * 768), (1_000_003, 250_000), (6_738_415_616, 32_000 * 4_096)]
LAYOUTS = [(1, 1), (2, 1), (3, 1), (4, 1), (8, 1), (8, 2)]  # (gpus_per_node, num_nodes)


def rows():
    for params, largest_layer in MODELS:
        for gpus, nodes in LAYOUTS:
            for offload in (False, True):
                cpu, gpu = estimate_zero2_model_states_mem_needs(
                    params, num_gpus_per_node=gpus, num_nodes=nodes, cpu_offload=offload,
                    additional_buffer_factor=BUFFER_FACTOR)
                yield "zero2", params, gpus, nodes, offload, f"additional_buffer_factor={BUFFER_FACTOR}", gpu, cpu
            # Fathom has no parameter offload yet, so offload_param stays off; zero_init=1 is
            # DeepSpeed's default and only changes the CPU column.
            for offload in (False, True):
                cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
                    params, largest_layer, num_gpus_per_node=gpus, num_nodes=nodes, cpu_offload=offload,
                    cpu_offload_params=False, zero_init=True, additional_buffer_factor=BUFFER_FACTOR)
                flags = (f"largest_layer_params={largest_layer},offload_param=0,zero_init=1,"
                         f"additional_buffer_factor={BUFFER_FACTOR}")
                yield "zero3", params, gpus, nodes, offload, flags, gpu, cpu


def main():
    out = sys.stdout
    out.write(f"# DeepSpeed {deepspeed.__version__}: estimate_zero2/3_model_states_mem_needs "
              "(scripts/reference/deepspeed_memory_estimates.py)\n")
    out.write("estimator\tparams\tgpus_per_node\tnum_nodes\tcpu_offload\tflags\tgpu_bytes\tcpu_bytes\n")
    for estimator, params, gpus, nodes, offload, flags, gpu, cpu in rows():
        out.write(f"{estimator}\t{params}\t{gpus}\t{nodes}\t{int(offload)}\t{flags}\t{gpu}\t{cpu}\n")


if __name__ == "__main__":
    main()
