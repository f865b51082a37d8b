"""Reads a run's TensorBoard event files with tensorboard's own
EventAccumulator and checks them against the run's JSON-lines metrics file
(tests/scripts/test_tensorboard.sh).

    check_tensorboard.py LOGDIR METRICS.jsonl SAMPLE.txt

Every numeric key of every metrics line (but step and elapsed_s) is a scalar
of its tag (train/loss, train/learning_rate, eval/loss, ...) at its step,
equal to float32 rounding, and no tag has a step twice or a step the metrics
file lacks; the texts "config" (the resolved INI) and "sample" (SAMPLE.txt)
are there (SAMPLE.txt "-": a model without one, only "config").
"""
import json
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def tag_of(key):
    if key == "lr":
        return "train/learning_rate"
    if key == "val_loss":
        return "eval/loss"
    if key.startswith("val_"):
        return "eval/" + key[4:]
    return "train/" + key


def main(logdir, metrics_file, sample_file):
    acc = EventAccumulator(logdir, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    expected = {}
    for line in open(metrics_file):
        record = json.loads(line)
        for key, value in record.items():
            if key in ("step", "elapsed_s"):
                continue
            expected.setdefault(tag_of(key), {})[record["step"]] = value
    scalar_tags = set(acc.Tags()["scalars"])
    assert set(expected) <= scalar_tags, (sorted(expected), sorted(scalar_tags))
    for tag, by_step in expected.items():
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), f"{tag}: a step twice: {steps}"
        assert sorted(steps) == sorted(by_step), f"{tag}: steps {steps}, metrics file {sorted(by_step)}"
        for e in events:
            want = np.float32(by_step[e.step])
            assert e.value == want or abs(e.value - want) <= 1e-6 * abs(want), (tag, e.step, e.value, want)
    texts = {tag: acc.Tensors(tag) for tag in acc.Tags()["tensors"]}
    assert "config" in texts and ("sample" in texts or sample_file == "-"), sorted(texts)
    config = texts["config"][-1].tensor_proto.string_val[0].decode()
    assert "[train]" in config and "report_to = " in config and "tensorboard" in config, config[:300]
    if sample_file != "-":
        sample = texts["sample"][-1].tensor_proto.string_val[0].decode()
        assert sample == open(sample_file).read(), (sample, open(sample_file).read())
    print(f"tensorboard read {len(expected)} scalar tags, {sum(map(len, expected.values()))} values, "
          f"equal to {metrics_file}; texts config and sample")


if __name__ == "__main__":
    main(*sys.argv[1:])
