#!/usr/bin/env python3
"""Writes loss_scaler_reference.json: fp16 loss-scale trajectories computed by DeepSpeed's own
DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py), which
tests/engine/test_loss_scaler.cpp replays against fathom::LossScaler step by step.

DeepSpeed's file is loaded by path, without installing DeepSpeed. At import it needs `torch`
(only for `torch.half`, the default dtype that selects the fp16 log text), `deepspeed.comm`
(`get_rank()` for rank-0 logging) and `deepspeed.utils.logger`. The two deepspeed modules are
always stubbed (a real one would need the whole package and a process group); torch is the real
one when it imports (e.g. /tmp/torchenv/bin/python), else a stub carrying `half` — the scaler's
arithmetic never touches torch, so both give identical bytes.

To rerun (from the repository root):
    pip download deepspeed==0.16.0 --no-deps -d /tmp/ds      # the sdist; PyPI only
    tar xzf /tmp/ds/deepspeed-0.16.0.tar.gz -C /tmp/ds
    python3 tests/data/generate_loss_scaler.py --deepspeed-src /tmp/ds/deepspeed-0.16.0
The output is deterministic: rerunning with the same DeepSpeed version gives identical bytes.
"""

import argparse
import hashlib
import importlib.util
import json
import logging
import os
import random
import sys
import types

SOURCE = os.path.join("deepspeed", "runtime", "fp16", "loss_scaler.py")


def load_deepspeed_loss_scaler(src):
    """Imports <src>/deepspeed/runtime/fp16/loss_scaler.py with deepspeed.comm/utils stubbed."""
    try:
        import torch  # noqa: F401  (the real one, when this python has it)
    except ImportError:
        torch = types.ModuleType("torch")
        torch.half = "torch.float16"  # only compared by identity against the dtype argument
        sys.modules["torch"] = torch

    deepspeed = types.ModuleType("deepspeed")
    deepspeed.comm = types.ModuleType("deepspeed.comm")
    deepspeed.comm.get_rank = lambda: 0  # rank 0: the overflow log lines are formatted too
    deepspeed.utils = types.ModuleType("deepspeed.utils")
    logger = logging.getLogger("deepspeed-stub")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False  # DeepSpeed logs every overflow; not wanted on the console here
    deepspeed.utils.logger = logger
    sys.modules.update({"deepspeed": deepspeed, "deepspeed.comm": deepspeed.comm,
                        "deepspeed.utils": deepspeed.utils})

    path = os.path.join(src, SOURCE)
    spec = importlib.util.spec_from_file_location("ds_loss_scaler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return module, digest


def deepspeed_version(src):
    with open(os.path.join(src, "version.txt")) as f:
        return f.read().strip()


def options(loss_scale=0, initial_scale_power=16, loss_scale_window=1000, hysteresis=2,
            consecutive_hysteresis=False, min_loss_scale=1):
    """The fp16 config keys, with DeepSpeed's defaults."""
    return {"loss_scale": loss_scale, "initial_scale_power": initial_scale_power,
            "loss_scale_window": loss_scale_window, "hysteresis": hysteresis,
            "consecutive_hysteresis": consecutive_hysteresis, "min_loss_scale": min_loss_scale}


def random_pattern(seed, steps, p):
    rng = random.Random(seed)  # Mersenne Twister with an int seed: stable across Python versions
    return "".join("1" if rng.random() < p else "0" for _ in range(steps))


def both_hysteresis_modes(name, opts, pattern):
    return [(f"{name}, consecutive_hysteresis {str(c).lower()}", {**opts, "consecutive_hysteresis": c}, pattern)
            for c in (False, True)]


# (name, fp16 options, overflow pattern: one character per optimizer step, "1" = overflow).
CASES = [
    ("defaults, no overflow (grows at steps 999 and 1999)", options(), "0" * 2001),
    ("defaults, one overflow then clean", options(), "1" + "0" * 1001),
    ("defaults, overflow every step until the minimum", options(), "1" * 20),
    ("hysteresis 1, overflow every step until the minimum", options(initial_scale_power=4, hysteresis=1), "1" * 8),
    ("hysteresis 2, overflow every step until the minimum", options(initial_scale_power=4), "1" * 8),
    ("hysteresis 3, window 3, overflow every step", options(initial_scale_power=6, loss_scale_window=3, hysteresis=3),
     "1" * 12),
    ("window 3, no overflow", options(loss_scale_window=3), "0" * 13),
    ("window 1, no overflow (doubles every step)", options(loss_scale_window=1), "0" * 40),
    ("window 5, overflows inside the window restart the count",
     options(loss_scale_window=5, hysteresis=1), "0001" + "0" * 4 + "1" + "0" * 11),
    *both_hysteresis_modes("alternating, window 3", options(initial_scale_power=10, loss_scale_window=3), "10" * 20),
    *both_hysteresis_modes("alternating, window 1000", options(initial_scale_power=10), "10" * 30),
    *both_hysteresis_modes("bursts of 1, 2 and 3 overflows, hysteresis 2, window 5",
                           options(initial_scale_power=12, loss_scale_window=5),
                           "1" + "0" * 6 + "11" + "0" * 6 + "111" + "0" * 6 + "1" + "0" + "11" + "0" * 12),
    *both_hysteresis_modes("bursts of 1, 2 and 3 overflows, hysteresis 2, window 1000",
                           options(initial_scale_power=12), "1000" + "1100" + "1110" + "0" * 4 + "111" + "0" * 3),
    *both_hysteresis_modes("bursts of 2, 3 and 4 overflows, hysteresis 3, window 4",
                           options(initial_scale_power=12, loss_scale_window=4, hysteresis=3),
                           "11" + "0" * 5 + "111" + "0" * 5 + "1111" + "0" * 9),
    *both_hysteresis_modes("overflow, clean, overflow (hysteresis refill)",
                           options(initial_scale_power=8, loss_scale_window=100), "1010110101100"),
    ("minimum 1 reached, then growth lifts it (window 2)",
     options(initial_scale_power=2, loss_scale_window=2, hysteresis=1), "11" + "00" + "1" + "0000" + "111"),
    ("minimum 3 (not a power of two) reached by clamping",
     options(initial_scale_power=5, hysteresis=1, min_loss_scale=3), "1" * 8),
    ("minimum 0.25 below 1", options(initial_scale_power=1, hysteresis=2, min_loss_scale=0.25), "1" * 8),
    ("initial scale already at the minimum (power 0)", options(initial_scale_power=0), "0111"),
    ("at the minimum, consecutive hysteresis refills before the error",
     options(initial_scale_power=1, hysteresis=2, consecutive_hysteresis=True), "11" + "0" + "1" + "0" + "11"),
    ("at the minimum, window growth refills hysteresis",
     options(initial_scale_power=1, loss_scale_window=2, hysteresis=2), "11" + "00" + "111"),
    ("at the minimum, a clean step without growth does not refill hysteresis",
     options(initial_scale_power=1, loss_scale_window=5, hysteresis=2), "11" + "0" + "1"),
    *[case for seed, hysteresis, window in ((1, 2, 4), (2, 3, 6), (3, 1, 3))
      for case in both_hysteresis_modes(
          f"random (seed {seed}, p 0.3), hysteresis {hysteresis}, window {window}",
          options(initial_scale_power=20, loss_scale_window=window, hysteresis=hysteresis, min_loss_scale=1),
          random_pattern(seed, 300, 0.3))],
    ("random (seed 4, p 0.003), defaults", options(), random_pattern(4, 3000, 0.003)),
    ("static scale 128", options(loss_scale=128), "0110100000111" + "0" * 10),
    ("static scale 1 (never raises)", options(loss_scale=1), "1" * 10),
]


def run_case(module, opts, pattern):
    """Steps DeepSpeed's scaler through `pattern`; returns the recorded trajectory."""
    if opts["loss_scale"] > 0:
        # What CreateLossScaler builds for fp16 with dynamic_scaling False: update_scale is a no-op.
        scaler = module.CreateLossScaler(module.torch.half, opts["loss_scale"], False, None)
        assert not scaler.dynamic
    else:
        # The dict DeepSpeed's config builds (runtime/config.py get_dynamic_loss_scale_args).
        args = {module.INITIAL_LOSS_SCALE: 2**opts["initial_scale_power"],
                module.SCALE_WINDOW: opts["loss_scale_window"],
                module.DELAYED_SHIFT: opts["hysteresis"],
                module.CONSECUTIVE_HYSTERESIS: opts["consecutive_hysteresis"],
                module.MIN_LOSS_SCALE: opts["min_loss_scale"]}
        scaler = module.CreateLossScaler(module.torch.half, 0, True, args)
        assert scaler.dynamic
    out = {"scale": [], "raises_at": None, "deepspeed_error": None}
    if scaler.dynamic:
        out.update({"hysteresis": [], "cur_iter": [], "last_overflow_iter": []})
    for step, flag in enumerate(pattern):
        try:
            scaler.update_scale(flag == "1")
        except Exception as error:  # DeepSpeed raises a bare Exception at the minimum scale
            out["raises_at"] = step
            out["deepspeed_error"] = str(error)
            break
        out["scale"].append(float(scaler.cur_scale))  # int until the first division; JSON as float
        if scaler.dynamic:
            out["hysteresis"].append(scaler.cur_hysteresis)
            out["cur_iter"].append(scaler.cur_iter)
            out["last_overflow_iter"].append(scaler.last_overflow_iter)
    return out


def render(header, cases):
    # One line per array keeps the file reviewable and diffs small.
    compact = lambda value: json.dumps(value, separators=(",", ":"))
    lines = ["{"]
    for key, value in header.items():
        lines.append(f" {json.dumps(key)}: {compact(value)},")
    lines.append(' "cases": [')
    for i, case in enumerate(cases):
        lines.append("  {")
        keys = list(case)
        for j, key in enumerate(keys):
            sep = "," if j + 1 < len(keys) else ""
            lines.append(f"   {json.dumps(key)}: {compact(case[key])}{sep}")
        lines.append("  }" + ("," if i + 1 < len(cases) else ""))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deepspeed-src", required=True, help="unpacked DeepSpeed sdist (holds version.txt)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "loss_scaler_reference.json"))
    args = parser.parse_args()

    module, digest = load_deepspeed_loss_scaler(args.deepspeed_src)
    names = [name for name, _, _ in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    cases = []
    for name, opts, pattern in CASES:
        cases.append({"name": name, "options": opts, "overflows": pattern, **run_case(module, opts, pattern)})

    header = {
        "deepspeed_version": deepspeed_version(args.deepspeed_src),
        "source": SOURCE.replace(os.sep, "/"),
        "source_sha256": digest,
        "generator": "tests/data/generate_loss_scaler.py",
        "rerun": "pip download deepspeed==0.16.0 --no-deps -d /tmp/ds && tar xzf /tmp/ds/deepspeed-0.16.0.tar.gz"
                 " -C /tmp/ds && python3 tests/data/generate_loss_scaler.py --deepspeed-src /tmp/ds/deepspeed-0.16.0",
        "note": "overflows: one char per update_scale call ('1' = overflow); after each call: scale = cur_scale,"
                " hysteresis = cur_hysteresis, cur_iter, last_overflow_iter (dynamic only); raises_at = index of"
                " the call that raised (nothing recorded from it on), deepspeed_error = its message",
    }
    with open(args.out, "w") as f:
        f.write(render(header, cases))
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
