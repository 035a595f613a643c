"""The checkpoint: the whole training state in one file, ``RUN_DIR/checkpoint.safetensors``.

One safetensors file holds every tensor, and its header holds a JSON object with the rest, written
atomically, so the tensors and the counters that go with them can never come from two different moments.
Nothing is pickled.

The schema (version 4): each component of a run contributes its own ``state_dict()``, a tree of dicts
whose leaves are tensors or JSON values. The run's components are the model (weights and normalization
statistics), the optimizer, the settings that change during training (``proxima.algo.schedules``: the learning
rate's schedule, and any other), the collector (the envs mid-episode, when they can be captured), and the RNGs; each stateful callback (health, logging's offsets, evaluation's best return, a
user's own) is one more, under its ``state_key``. Tensor leaves are stored as ``COMPONENT/path/to/leaf``;
the rest of each tree goes to the header under ``components``. Beside them the header holds the counters,
the spaces and the schema version. A file of any other version is refused in one line.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator

import torch
from torch import Tensor

from proxima.base.errors import UserError, raised
from proxima.base.files import (
    CHECKPOINT,
    SEEDS_JSON,
    check_finite,
    check_shapes,
    read_checkpoint_meta,
    read_tensors,
    shapes_of,
    write_checkpoint,
)
from proxima.policy.networks import NetworkSpec, network_shapes

FORMAT, VERSION = "proxima-checkpoint", 4
GROUP_FORMAT = "proxima-seeds-checkpoint"  # save_group's


def _split(tree, path: str, tensors: dict[str, Tensor]):
    """``tree`` without its tensor leaves, which go into ``tensors`` under their paths."""
    if isinstance(tree, Tensor):
        tensors[path] = tree
        return None
    if isinstance(tree, dict):
        kept = {}
        for key, value in tree.items():
            rest = _split(value, f"{path}/{key}", tensors)
            if rest is not None or not isinstance(value, Tensor):
                kept[str(key)] = rest
        return kept
    if isinstance(tree, list | tuple) and any(isinstance(v, Tensor) for v in tree):
        raise TypeError(f"{path}: a state_dict may hold tensors in dicts, not in lists")
    return tree


def _join(tree, tensors: dict[str, Tensor], component: str):
    """The inverse of ``_split`` for one component."""
    prefix = component + "/"
    mine = {key: tensor for key, tensor in tensors.items() if key.startswith(prefix)}
    if tree is None and not mine:
        return None
    tree = {} if tree is None else tree
    for key, tensor in mine.items():
        *parents, leaf = key[len(prefix) :].split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = tensor
    return tree


def snapshot(header: dict, states: dict) -> tuple[dict[str, Tensor], dict]:
    """A run's state as a checkpoint file holds it, ``(tensors, meta)``, of ``Run.checkpoint_state``'s ``header``
    (the counters of ``COUNTERS`` and the spaces) and its components' ``states`` by name."""
    tensors: dict[str, Tensor] = {}
    parts = {name: _split(state, name, tensors) for name, state in states.items()}
    return tensors, {"format": FORMAT, "version": VERSION, **header, "components": parts}


# read_group's (meta, states) of a batched run's seed that had finished (whose state no longer changes and whose
# callbacks do not start again) as its snapshot was: meta holds the format and version that snapshot puts first
kept = snapshot


def save_group(path: str, snapshots: dict[str, tuple[dict[str, Tensor], dict]]) -> None:
    """Several runs' ``snapshot``s in one file (a batched run's seeds, by name), so that they are always of one
    moment: a process killed between two seeds' own checkpoints leaves them of two updates."""
    tensors = {f"{name}/{key}": t.clone() for name, (part, _) in snapshots.items() for key, t in part.items()}
    runs = {name: meta for name, (_, meta) in snapshots.items()}
    write_checkpoint(path, tensors, {"format": GROUP_FORMAT, "version": VERSION, "runs": runs})


# What every run's header holds beside its format: the counters and their types, and the components of a
# run's own state (each stateful callback's is one more, under its state_key, checked by it)
COUNTERS = {"update": int, "global_step": int, "elapsed_s": float, "torch_threads": int, "finished": bool}
RUN_COMPONENTS = ("model", "optimizer", "settings", "collector", "rng")


def check_header(meta: dict, path: str) -> None:
    """A one-line ``UserError`` unless ``meta``, one run's header, holds each counter of its type, the spaces
    and every component of a run: what a resume reads of it, before it reads any."""
    for key, kind in COUNTERS.items():
        value = meta.get(key)
        fits = (
            isinstance(value, bool)
            if kind is bool
            else (isinstance(value, int | float if kind is float else int) and not isinstance(value, bool))
        )
        if not fits:
            said = "missing" if key not in meta else f"{value!r}"
            raise UserError(
                f"{path}'s header has {key} {said}, not {'True or False' if kind is bool else 'a number'}; the "
                "checkpoint is corrupt"
            )
    spaces, parts = meta.get("spaces"), meta.get("components")
    if not (isinstance(spaces, dict) and {"observation_space", "action_space"} == set(spaces)):
        raise UserError(f"{path}'s header lacks its spaces; the checkpoint is corrupt")
    parts = parts if isinstance(parts, dict) else {}  # then every component is missing
    missing = [c for c in RUN_COMPONENTS if c not in parts]
    if missing or any(part is not None and not isinstance(part, dict) for part in parts.values()):
        what = f"its {missing[0]} component" if missing else "components of the form a checkpoint has"
        raise UserError(f"{path}'s header lacks {what}; the checkpoint is corrupt")


def check_counters(meta: dict, args, path: str) -> None:
    """A one-line ``UserError`` unless the counters of ``meta`` (checked by ``check_header``) lie within the run
    of ``args`` (its config.json): 0 to ``num_updates`` updates, each of ``batch_size`` steps. A negative update
    would train past the total; one past it would save an undertrained agent as final."""
    update, step, elapsed = meta["update"], meta["global_step"], meta["elapsed_s"]
    if not 0 <= update <= args.num_updates or step != update * args.batch_size:
        raise UserError(
            f"{path} says update {update} at step {step}; the run of its config.json has {args.num_updates} updates "
            f"of {args.batch_size} steps: the checkpoint is corrupt, or not this run's"
        )
    if not (math.isfinite(elapsed) and elapsed >= 0) or meta["torch_threads"] < 1:
        raise UserError(
            f"{path} says {elapsed} s elapsed on {meta['torch_threads']} threads; the checkpoint is corrupt"
        )


def check_model(states: dict, spec: NetworkSpec, action_space, path: str, source: str) -> None:
    """A one-line ``UserError`` unless the model component of ``states`` (``read``'s) holds the network that
    ``spec`` (made from ``source``, the run's config.json) describes, checked before that network is built (a
    config.json edited to ask for 40 GB costs nothing), and it and the optimizer's moments are finite (a NaN
    in either is a NaN loss at the next update)."""
    model = states.get("model")
    if not isinstance(model, dict) or not all(isinstance(t, Tensor) for t in model.values()):
        raise UserError(f"{path}'s model component is not a network's weights; the checkpoint is corrupt")
    expected = network_shapes(spec, action_space)
    if expected is not None:  # else the run's network is built, and load_state_dict's strict check judges it
        check_shapes(shapes_of(model), expected, path, source)
    check_finite(model, path)
    moments: dict[str, Tensor] = {}
    _split(states.get("optimizer"), "optimizer", moments)
    check_finite(moments, path)


def read_group(path: str) -> dict[str, tuple[dict, dict]]:
    """``save_group``'s file as each run's ``(meta, states)``, as ``read`` gives them for one run."""
    metas = read_group_header(path)
    tensors = read_tensors(path)
    runs = {}
    for name, own in metas.items():
        prefix = name + "/"
        part = {key[len(prefix) :]: t for key, t in tensors.items() if key.startswith(prefix)}
        runs[name] = own, _states(own, part, path)
    return runs


def read(path: str) -> tuple[dict, dict]:
    """``(meta, states)`` of a checkpoint file; a ``UserError`` for one that this proxima cannot read."""
    meta = read_header(path)
    return meta, _states(meta, read_tensors(path), path)


def _states(meta: dict, tensors: dict[str, Tensor], path: str) -> dict:
    """Each component's state: its tree in ``meta`` with its tensors put back in their places."""
    try:
        return {name: _join(part, tensors, name) for name, part in meta["components"].items()}
    except (TypeError, AttributeError) as e:  # a header whose parts are not where the tensors go
        raise UserError(
            f"{path}'s header does not fit its tensors ({raised(e)}); the checkpoint is corrupt"
        ) from None


def read_header(path: str) -> dict:
    """``read``'s ``meta`` alone, checked (``check_header``), from the file's header: no tensor is read."""
    meta = _versioned(path, FORMAT, "a proxima checkpoint")
    check_header(meta, path)
    return meta


def read_group_header(path: str) -> dict[str, dict]:
    """``read_group``'s metas alone, by seed's name, checked, from the file's header: no tensor is read."""
    runs = _versioned(path, GROUP_FORMAT, "a batched run's checkpoint").get("runs")
    if not isinstance(runs, dict) or not runs or not all(isinstance(own, dict) for own in runs.values()):
        raise UserError(f"{path}'s header lacks its seeds' runs; the checkpoint is corrupt")
    for name, own in runs.items():
        check_header(own, f"{path} (run {name})")
    return runs


def _versioned(path: str, kind: str, what: str) -> dict:
    """The header of ``path``, a file of format ``kind`` (``what``, in words) and of this proxima's version."""
    meta = read_checkpoint_meta(path)
    if meta.get("format") != kind or not isinstance(meta.get("version"), int):
        raise UserError(f"{path} is not {what}")
    if meta["version"] != VERSION:
        # Before 1.0 a checkpoint of another version is refused, not converted.
        who = (
            "a newer proxima wrote it: upgrade proxima"
            if meta["version"] > VERSION
            else "an older proxima wrote it: finish the run with that version, or train it again"
        )
        raise UserError(
            f"{path} has checkpoint version {meta['version']}; this proxima reads version {VERSION} only ({who})"
        )
    return meta


def finished(run_dir: str) -> bool:
    """Whether the run in ``run_dir`` finished training, as its checkpoint's header says (a batched run's: every
    seed's); False where it has no checkpoint. The one answer that ``--resume`` (which refuses a finished run),
    ``--resume-if-exists`` (which loads its agent instead), ``eval`` (whose message for a run without its agent
    says how to finish it) and a sweep's or search's trials give. The agent is saved before the checkpoint
    that says so, so a finished run has its agent unless the files were changed since."""
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.exists(path):
        return False
    if os.path.exists(os.path.join(run_dir, SEEDS_JSON)):
        return all(meta["finished"] for meta in read_group_header(path).values())
    return read_header(path)["finished"]


def check_fits(path: str, meta: dict, states: dict, spaces: dict, own: dict, env_id: str) -> None:
    """A one-line ``UserError`` unless ``read``'s ``(meta, states)`` of ``path`` fit a run of ``spaces`` on
    ``env_id`` whose state now is ``own``: each tensor where the run holds one of its own is of its shape and
    dtype, checked before any is put in its place."""
    for key, saved in meta["spaces"].items():
        if spaces[key] != saved:
            raise UserError(
                f"{path} was written for another env: its {key} is {saved}, {env_id}'s is {spaces[key]}"
            )
    _check_like(states, own, path, "")


@contextlib.contextmanager
def fitting(path: str) -> Iterator[None]:
    """Loading ``path``'s states into a run and its callbacks: a state that does not fit raises one line."""
    try:
        yield
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, OverflowError, RuntimeError) as e:
        raise UserError(
            f"{path} has state that does not fit this run ({raised(e)}); the checkpoint is corrupt"
        ) from None


def _check_like(saved, own, path: str, where: str) -> None:
    """A ``UserError`` where a tensor in ``saved`` differs in shape or dtype from the one at the same place in
    ``own`` (a fresh run's state), or holds a NaN or an infinity; parts that only one of them has are the
    components' own to check."""
    if isinstance(saved, torch.Tensor) and isinstance(own, torch.Tensor):
        if saved.shape != own.shape or saved.dtype != own.dtype:
            raise UserError(
                f"{path} holds {where} of shape {tuple(saved.shape)} and dtype {saved.dtype}, where this run holds "
                f"{tuple(own.shape)} {own.dtype}; the checkpoint is corrupt"
            )
        # a run never saves one outside a random generator's state (Python's holds no Gaussian as a NaN)
        if saved.is_floating_point() and "rng" not in where and not bool(torch.isfinite(saved).all()):
            raise UserError(f"{path} holds a NaN or an infinity in {where}; the checkpoint is corrupt")
    elif isinstance(saved, dict) and isinstance(own, dict):
        for key in saved.keys() & own.keys():
            _check_like(saved[key], own[key], path, f"{where}/{key}" if where else str(key))
    elif isinstance(saved, (list, tuple)) and isinstance(own, (list, tuple)) and len(saved) == len(own):
        for i, (a, b) in enumerate(zip(saved, own, strict=True)):
            _check_like(a, b, path, f"{where}/{i}")


def last_checkpoint_note(run_dir: str, resumable: bool = True, how: str = "continue with") -> str:
    """What survives of a failed run, in words; with ``resumable``, how to continue it (``how``, the command)."""
    path = os.path.join(run_dir, CHECKPOINT)
    try:
        meta = read_header(path)
    except UserError:
        return "no checkpoint had been written yet" + (", so it cannot be resumed" if resumable else "")
    if meta["finished"]:  # the end's own work failed after it: --resume would refuse the run, rightly
        return f"the run had finished: its agent and its final checkpoint, {path}, are saved"
    note = f"the last good checkpoint, from update {meta['update']}, is {path}"
    return note + (f"; {how}: proxima train --resume {run_dir}" if resumable else "")
