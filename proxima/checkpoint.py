"""Checkpoint files: weights as safetensors, everything else as JSON. Nothing is ever unpickled.

Every file is written atomically (a temporary file in the same directory, then a rename), so a reader
sees either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from proxima.errors import UserError

WEIGHTS = "model.safetensors"
AGENT_JSON = "agent.json"


def _atomic(path: str, write) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path: str, data: dict) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, allow_nan=False)
            f.write("\n")

    _atomic(path, write)


def write_tensors(path: str, tensors: dict[str, torch.Tensor]) -> None:
    _atomic(path, lambda tmp: save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, tmp))


def read_json(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path} is missing; give a run directory written by `proxima train`") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object; the checkpoint is corrupt")
    return data


def read_tensors(path: str) -> dict[str, torch.Tensor]:
    if not os.path.isfile(path):
        raise UserError(f"{path} is missing; give a run directory written by `proxima train`")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(
            f"{path} is not a readable safetensors file ({reason}); the checkpoint is corrupt"
        ) from None
