"""Writes tests/data/tensorboard_reference.tfevents with TensorBoard's own event writer, for the
C++ reader test (tests/engine/monitor/test_monitor.cpp): a reader written beside Fathom's writer would
share its mistakes. Needs the `tensorboard` package (pip install tensorboard); run once:

    python3 tests/data/make_tensorboard_events.py tests/data/tensorboard_reference.tfevents
"""
import os
import shutil
import sys
import tempfile

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def scalar(step, tag, value):
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=1700000000.0 + step, step=step, summary=summary)


def main(out):
    folder = tempfile.mkdtemp()
    writer = EventFileWriter(folder)
    writer.add_event(scalar(8, "Train/Samples/train_loss", 4.5))
    writer.add_event(scalar(8, "Train/Samples/lr", 0.001))
    writer.add_event(scalar(16, "Train/Samples/train_loss", 4.25))
    writer.close()
    (name,) = os.listdir(folder)
    shutil.copyfile(os.path.join(folder, name), out)
    shutil.rmtree(folder)


if __name__ == "__main__":
    main(sys.argv[1])
