"""User callbacks: ``proxima.train(..., callbacks=[...])`` can stop training and log metrics of its own."""

import json
import os

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import proxima
from proxima.run.callbacks import Callback

RUN = {"env_id": "CartPole-v1", "total_timesteps": 512 * 8, "plot": False, "quiet": True}


class StopAt(Callback):
    def __init__(self, update: int):
        self.update = update
        self.calls = []

    def on_update_end(self, run, result):
        self.calls.append(run.updates_done)
        return run.updates_done == self.update


class LogsActionMean(Callback):
    """A custom metric: the mean action of the update's rollout."""

    def on_update_end(self, run, result):
        result.record["mean_action"] = float(run.collector.buffer.actions.float().mean())


def _metrics(run_dir):
    return [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]


def test_a_callback_stops_training_at_the_update_it_chooses(tmp_path):
    run_dir = str(tmp_path / "run")
    stop = StopAt(3)
    agent = proxima.train(**RUN, run_dir=run_dir, callbacks=[stop])
    assert stop.calls == [1, 2, 3]
    assert [m["global_step"] for m in _metrics(run_dir)] == [512, 1024, 1536]
    # stopped, not failed: the final agent is saved and the checkpoint says there is nothing to resume
    assert proxima.load(run_dir).predict([0.0, 0.0, 0.0, 0.0]) in (0, 1)
    assert agent is not None
    from proxima.run import checkpoint

    meta, _ = checkpoint.read(os.path.join(run_dir, "checkpoint.safetensors"))
    assert meta["finished"] and meta["update"] == 3


def test_a_callback_logs_a_custom_metric_to_metrics_jsonl_and_tensorboard(tmp_path):
    run_dir = str(tmp_path / "run")
    proxima.train(**RUN, run_dir=run_dir, callbacks=[LogsActionMean()])
    metrics = _metrics(run_dir)
    values = [m["mean_action"] for m in metrics]
    assert len(values) == 8 and all(0.0 <= v <= 1.0 for v in values)
    events = EventAccumulator(run_dir)
    events.Reload()
    scalars = events.Scalars("charts/mean_action")
    assert [s.step for s in scalars] == [m["global_step"] for m in metrics]
    assert [s.value for s in scalars] == [float(v) for v in np.float32(values)]
