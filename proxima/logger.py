"""Run logging: one JSON line per update in ``metrics.jsonl``, the same values as TensorBoard scalars, and
one JSON line per finished episode in ``episodes.jsonl`` (for per-episode curves and "last 20 episodes" means).

TensorBoard tags follow CleanRL's grouping (``charts/`` and ``losses/``) with ``global_step`` on the x-axis.
"""

from __future__ import annotations

import json
import math
import os

from proxima.errors import UserError

# metrics.jsonl key -> TensorBoard tag (detail #12's debug variables, plus episode statistics)
TB_TAGS = {
    "learning_rate": "charts/learning_rate",
    "value_loss": "losses/value_loss",
    "policy_loss": "losses/policy_loss",
    "entropy": "losses/entropy",
    "old_approx_kl": "losses/old_approx_kl",
    "approx_kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac",
    "explained_variance": "losses/explained_variance",
    "sps": "charts/SPS",
    "episodic_return": "charts/episodic_return",
    "episodic_length": "charts/episodic_length",
    "eval_return": "charts/eval_return",
    "grad_norm": "losses/grad_norm",
}


NOT_SCALARS = {"global_step", "time_s"}  # the x-axis, and a time TensorBoard records itself


def _json_number(x):
    """NaN and inf are not JSON; write them as null."""
    return None if isinstance(x, float) and not math.isfinite(x) else x


class RunLogger:
    """Writes a run's logs; ``resume_from`` (from ``offsets()`` at a checkpoint) continues them from there."""

    def __init__(self, run_dir: str, config: dict, tensorboard: bool = True, resume_from: dict | None = None):
        self.run_dir = run_dir
        for name in ("metrics.jsonl", "episodes.jsonl") if resume_from is not None else ():
            path = os.path.join(run_dir, name)  # both checked before either is cut back
            if not os.path.exists(path) or os.path.getsize(path) < resume_from[name]:
                raise UserError(
                    f"{path} is shorter than its checkpoint says; the run directory was changed after it"
                )
        self._metrics = self._open("metrics.jsonl", resume_from)
        self._episodes = self._open("episodes.jsonl", resume_from)
        self._writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            if resume_from is None:
                self._writer = SummaryWriter(run_dir)
                rows = "\n".join(f"|{k}|{v}|" for k, v in config.items())
                self._writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
            else:  # TensorBoard hides what the interrupted process logged after the checkpoint
                self._writer = SummaryWriter(run_dir, purge_step=resume_from["global_step"] + 1)

    def _open(self, name: str, resume_from: dict | None):
        path = os.path.join(self.run_dir, name)
        if resume_from is None:
            return open(path, "w")
        # Lines written after the checkpoint (and a line cut off by a kill) belong to the lost future.
        os.truncate(path, resume_from[name])
        return open(path, "a")

    def offsets(self, global_step: int) -> dict:
        """Where the logs end now, for a checkpoint taken at ``global_step``; the logs are on disk up to there
        before the checkpoint that records it can be."""
        for f in (self._metrics, self._episodes):
            f.flush()
            os.fsync(f.fileno())
        return {
            "global_step": global_step,
            "metrics.jsonl": self._metrics.tell(),
            "episodes.jsonl": self._episodes.tell(),
        }

    def text(self, tag: str, text: str, global_step: int) -> None:
        if self._writer is not None:
            self._writer.add_text(tag, text, global_step)

    def log_update(self, record: dict) -> None:
        """Write one update's record (which must hold ``global_step``) to every sink."""
        record = {k: _json_number(v) for k, v in record.items()}
        self._metrics.write(json.dumps(record) + "\n")
        self._metrics.flush()
        if self._writer is not None:
            step = record["global_step"]
            for key, value in record.items():
                # the seed's debug variables under CleanRL's tags; a callback's own numbers under charts/
                tag = TB_TAGS.get(key, None if key in NOT_SCALARS else f"charts/{key}")
                if tag is not None and isinstance(value, int | float) and not isinstance(value, bool):
                    self._writer.add_scalar(tag, value, step)

    def log_episodes(self, global_step: int, returns: list[float], lengths: list[int]) -> None:
        for ret, length in zip(returns, lengths, strict=True):
            self._episodes.write(
                json.dumps({"global_step": global_step, "return": ret, "length": length}) + "\n"
            )
        self._episodes.flush()

    def close(self) -> None:
        self._metrics.close()
        self._episodes.close()
        if self._writer is not None:
            self._writer.close()
