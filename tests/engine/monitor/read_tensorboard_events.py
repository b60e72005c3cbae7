"""Reads the TensorBoard files fathom-train wrote with TensorBoard's own EventAccumulator and
checks the curves: skipped (with a notice) when the `tensorboard` package is missing; the C++
reader test (tests/engine/monitor/test_monitor.cpp) runs everywhere.

    read_tensorboard_events.py LOGDIR STEPS GLOBAL_BATCH
"""
import glob
import os
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("SKIPPED: the tensorboard Python package is not installed (pip install tensorboard)")
    sys.exit(0)

logdir, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = glob.glob(os.path.join(logdir, "**", "events.out.tfevents.*"), recursive=True)
assert len(files) == 1, f"expected one event file under {logdir}, found {files}"
events = EventAccumulator(files[0], size_guidance={"scalars": 0})
events.Reload()
losses = events.Scalars("Train/Samples/train_loss")
assert [e.step for e in losses] == [batch * (i + 1) for i in range(steps)], [e.step for e in losses]
assert all(0 < e.value < 10 for e in losses), [e.value for e in losses]
assert len(events.Scalars("Train/Samples/lr")) == steps
print(f"tensorboard reads {len(losses)} train_loss scalars at steps {[e.step for e in losses]}")
