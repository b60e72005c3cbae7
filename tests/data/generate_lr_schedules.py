#!/usr/bin/env python3
"""Writes lr_schedules_reference.json: learning rates (and OneCycle's betas) computed by DeepSpeed's
own deepspeed/runtime/lr_schedules.py, which tests/nn/test_lr_schedules.cpp compares Fathom against.

DeepSpeed's file is loaded by path, without installing DeepSpeed or torch: at module level it only
needs `torch.optim.Optimizer` (an isinstance check) and `deepspeed.utils.logger`, so both are
stubbed in sys.modules. Only the Python standard library is needed.

To rerun (from the repository root):
    pip download deepspeed==0.16.0 --no-deps -d /tmp/ds      # the sdist; PyPI only
    tar xzf /tmp/ds/deepspeed-0.16.0.tar.gz -C /tmp/ds
    python3 tests/data/generate_lr_schedules.py --deepspeed-src /tmp/ds/deepspeed-0.16.0
The output is deterministic: rerunning with the same DeepSpeed version gives identical bytes.
"""

import argparse
import hashlib
import importlib.util
import json
import logging
import os
import sys
import types


def load_deepspeed_lr_schedules(src):
    """Imports <src>/deepspeed/runtime/lr_schedules.py with torch and deepspeed.utils stubbed."""

    class Optimizer:  # the real one's only role here: get_torch_optimizer's isinstance check
        pass

    torch = types.ModuleType("torch")
    torch.optim = types.ModuleType("torch.optim")
    torch.optim.Optimizer = Optimizer
    deepspeed = types.ModuleType("deepspeed")
    deepspeed.utils = types.ModuleType("deepspeed.utils")
    logger = logging.getLogger("deepspeed-stub")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False  # DeepSpeed warns on tiny warmups and early get_lr(); not needed here
    deepspeed.utils.logger = logger
    sys.modules.update({"torch": torch, "torch.optim": torch.optim, "deepspeed": deepspeed,
                        "deepspeed.utils": deepspeed.utils})

    path = os.path.join(src, "deepspeed", "runtime", "lr_schedules.py")
    spec = importlib.util.spec_from_file_location("ds_lr_schedules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return module, Optimizer, digest


def deepspeed_version(src):
    with open(os.path.join(src, "version.txt")) as f:
        return f.read().strip()


# (name, schedule type, params, base lrs, iterations to record). The scheduler is stepped one
# batch at a time up to the largest recorded iteration; "initial" is the state right after
# construction (before the first step()).
CASES = [
    ("WarmupLR defaults", "WarmupLR", {}, [0.1],
     list(range(0, 21)) + [100, 500, 998, 999, 1000, 1001, 2000]),
    ("WarmupLR linear", "WarmupLR",
     {"warmup_min_lr": 0.01, "warmup_max_lr": 0.2, "warmup_num_steps": 10, "warmup_type": "linear"}, [0.1],
     list(range(0, 16)) + [50]),
    ("WarmupLR log, warmup_num_steps 0 (clamped to 2)", "WarmupLR",
     {"warmup_max_lr": 0.5, "warmup_num_steps": 0, "warmup_type": "log"}, [0.1], list(range(0, 6))),
    ("WarmupLR linear, warmup_num_steps 1 (clamped to 2)", "WarmupLR",
     {"warmup_max_lr": 0.5, "warmup_num_steps": 1, "warmup_type": "linear"}, [0.1], list(range(0, 6))),
    ("WarmupLR two groups", "WarmupLR",
     {"warmup_min_lr": 1e-5, "warmup_max_lr": 3e-4, "warmup_num_steps": 5}, [0.1, 0.5], list(range(0, 9))),
    ("WarmupLR resumed at last_batch_iteration 9", "WarmupLR",
     {"warmup_max_lr": 0.02, "warmup_num_steps": 20, "warmup_type": "linear", "last_batch_iteration": 9}, [0.1],
     list(range(10, 26))),
    ("WarmupDecayLR defaults, total below warmup", "WarmupDecayLR", {"total_num_steps": 100}, [0.1],
     list(range(0, 6)) + [98, 99, 100, 101, 999, 1000, 1001, 1100]),
    ("WarmupDecayLR linear", "WarmupDecayLR",
     {"total_num_steps": 200, "warmup_min_lr": 1e-5, "warmup_max_lr": 3e-4, "warmup_num_steps": 20,
      "warmup_type": "linear"}, [0.1],
     list(range(0, 26)) + list(range(30, 231, 10))),
    ("WarmupDecayLR log", "WarmupDecayLR",
     {"total_num_steps": 50, "warmup_max_lr": 0.01, "warmup_num_steps": 10, "warmup_type": "log"}, [0.1],
     list(range(0, 61))),
    ("WarmupDecayLR warmup_num_steps 1 (clamped to 2)", "WarmupDecayLR",
     {"total_num_steps": 10, "warmup_max_lr": 0.01, "warmup_num_steps": 1, "warmup_type": "linear"}, [0.1],
     list(range(0, 16))),
    ("WarmupDecayLR total 5 below warmup 10", "WarmupDecayLR",
     {"total_num_steps": 5, "warmup_max_lr": 0.01, "warmup_num_steps": 10}, [0.1], list(range(0, 16))),
    ("WarmupCosineLR defaults", "WarmupCosineLR", {"total_num_steps": 2000}, [0.001],
     list(range(0, 11)) + [998, 999, 1000, 1001, 1002, 1500, 1999, 2000, 2001, 2500]),
    ("WarmupCosineLR linear with ratios", "WarmupCosineLR",
     {"total_num_steps": 100, "warmup_num_steps": 10, "warmup_type": "linear", "warmup_min_ratio": 0.1,
      "cos_min_ratio": 0.05}, [0.003], list(range(0, 111))),
    ("WarmupCosineLR log", "WarmupCosineLR",
     {"total_num_steps": 100, "warmup_num_steps": 10, "warmup_type": "log"}, [0.003], list(range(0, 106))),
    ("WarmupCosineLR warmup_num_steps 0 (clamped to 2)", "WarmupCosineLR",
     {"total_num_steps": 20, "warmup_num_steps": 0, "warmup_type": "linear"}, [0.01], list(range(0, 26))),
    ("WarmupCosineLR warmup_num_steps 1 (clamped to 2)", "WarmupCosineLR",
     {"total_num_steps": 20, "warmup_num_steps": 1, "warmup_type": "log"}, [0.01], list(range(0, 26))),
    ("WarmupCosineLR two groups", "WarmupCosineLR",
     {"total_num_steps": 30, "warmup_num_steps": 5, "warmup_min_ratio": 0.2}, [0.001, 0.003], list(range(0, 36))),
    ("WarmupCosineLR total 5 below warmup 10", "WarmupCosineLR",
     {"total_num_steps": 5, "warmup_num_steps": 10, "warmup_type": "linear"}, [0.01], list(range(0, 16))),
    ("OneCycle defaults", "OneCycle", {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3}, [0.1],
     list(range(0, 6)) + [1998, 1999, 2000, 2001, 3998, 3999, 4000, 4001, 5000]),
    ("OneCycle asymmetric with lr and momentum decay", "OneCycle",
     {"cycle_min_lr": 0.01, "cycle_max_lr": 0.1, "cycle_first_step_size": 10, "cycle_second_step_size": 20,
      "decay_step_size": 5, "decay_lr_rate": 0.5, "decay_mom_rate": 0.01, "cycle_min_mom": 0.85,
      "cycle_max_mom": 0.95}, [0.1], list(range(0, 51))),
    ("OneCycle without momentum cycling", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.006, "cycle_first_step_size": 7, "cycle_momentum": False}, [0.1],
     list(range(0, 21))),
    ("OneCycle second step size 0", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.006, "cycle_first_step_size": 5, "cycle_second_step_size": 0}, [0.1],
     list(range(0, 13))),
    ("OneCycle decay_lr_rate 0 skips lr decay, momentum decays", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.004, "cycle_first_step_size": 4, "decay_step_size": 3,
      "decay_mom_rate": 0.1}, [0.1], list(range(0, 21))),
    ("OneCycle stair counts (accepted, unused)", "OneCycle",
     {"cycle_min_lr": 0.002, "cycle_max_lr": 0.02, "cycle_first_step_size": 4, "cycle_first_stair_count": 2,
      "cycle_second_stair_count": 3}, [0.1, 0.2], list(range(0, 11))),
]


class FakeOptimizerFactory:
    def __init__(self, base):
        self.base = base

    def __call__(self, lrs):
        optimizer = self.base()
        # Adam-like: 'betas' in defaults is what lets OneCycle cycle the momentum.
        optimizer.defaults = {"lr": lrs[0], "betas": (0.9, 0.999)}
        optimizer.param_groups = [{"lr": lr, "betas": (0.9, 0.999)} for lr in lrs]
        return optimizer


def snapshot(optimizer, scheduler):
    state = {"lrs": [group["lr"] for group in optimizer.param_groups]}
    if getattr(scheduler, "cycle_momentum", False):
        state["betas"] = list(optimizer.param_groups[0]["betas"])
    return state


def run_case(module, make_optimizer, case):
    name, kind, params, base_lrs, record = case
    optimizer = make_optimizer(base_lrs)
    scheduler = getattr(module, kind)(optimizer, **params)
    out = {"name": name, "type": kind, "params": params, "base_lrs": base_lrs,
           "initial": snapshot(optimizer, scheduler), "steps": []}
    wanted = set(record)
    while scheduler.last_batch_iteration < max(record):
        scheduler.step()
        if scheduler.last_batch_iteration in wanted:
            entry = {"last_batch_iteration": scheduler.last_batch_iteration}
            entry.update(snapshot(optimizer, scheduler))
            out["steps"].append(entry)
    assert len(out["steps"]) == len(wanted), name
    return out


def format_reference(reference):
    """Indented JSON with one line per recorded step: small, and readable in a diff."""
    compact = lambda value: json.dumps(value, separators=(", ", ": "))
    lines = ["{"]
    for key, value in reference.items():
        if key != "cases":
            lines.append(f" {json.dumps(key)}: {compact(value)},")
    lines.append(' "cases": [')
    for i, case in enumerate(reference["cases"]):
        lines.append("  {")
        for key in ("name", "type", "params", "base_lrs", "initial"):
            lines.append(f"   {json.dumps(key)}: {compact(case[key])},")
        lines.append('   "steps": [')
        steps = case["steps"]
        lines += [f"    {compact(step)}" + ("," if j + 1 < len(steps) else "") for j, step in enumerate(steps)]
        lines.append("   ]")
        lines.append("  }" + ("," if i + 1 < len(reference["cases"]) else ""))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deepspeed-src", required=True, help="unpacked DeepSpeed sdist (holds version.txt)")
    parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "lr_schedules_reference.json"))
    args = parser.parse_args()

    module, optimizer_base, digest = load_deepspeed_lr_schedules(args.deepspeed_src)
    make_optimizer = FakeOptimizerFactory(optimizer_base)
    reference = {
        "deepspeed_version": deepspeed_version(args.deepspeed_src),
        "source": "deepspeed/runtime/lr_schedules.py",
        "source_sha256": digest,
        "generator": "tests/data/generate_lr_schedules.py",
        "note": "lrs: optimizer.param_groups[i]['lr'] after construction ('initial') and after each step(); "
                "betas: param_groups[0]['betas'] when OneCycle cycles momentum",
        "cases": [run_case(module, make_optimizer, case) for case in CASES],
    }
    with open(args.output, "w") as f:
        f.write(format_reference(reference))
    print(f"wrote {args.output}: {len(CASES)} cases from DeepSpeed {reference['deepspeed_version']}")


if __name__ == "__main__":
    main()
