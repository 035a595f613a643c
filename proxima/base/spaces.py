"""Spaces beyond a flat Box: their JSON form, and the one tensor per env that an observation of them becomes.

The loop, the buffer and every vector env move an observation as one tensor per env. A Box observation is its
own array, exactly as before. Any other observation space (Discrete, MultiDiscrete, MultiBinary, Dict, Tuple,
nested, and a Box of shape (), one number) and any observation that comes with an action mask is *packed*
where it leaves the env: the elements of its parts, in the space's own order, side by side in one flat vector. ``ObsLayout`` records where each part
lies, so that the multi-input encoder (``proxima.policy.encoders``) can cut the vector back into parts: vectors are
used as they are, discrete values are one-hot encoded there, and images go through the CNN.

The packed vector is ``uint8`` when every part fits in a byte (images, binary values, masks), so a Dict of an
image and a mask stores as compactly as the image alone; otherwise ``float32``, which holds integers exactly
up to 2**24. The action mask (docs/SPACES.md) is one more part: it is stored in the buffer with the
observation it came with, so the update evaluates log-probs under the mask the action was sampled under.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import cast

import gymnasium as gym
import numpy as np
import torch

from proxima.base.errors import UserError

MASK_KEY = "action_mask"  # in a Dict observation, or in the info of every reset and step
MIN_IMAGE_SIDE = 36  # the Nature CNN's receptive field
ACCEPTED = "Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of them"


def is_image(space: gym.Space) -> bool:
    """A 3-D Box, channels-first ``(C, H, W)`` or channels-last ``(H, W, C<=4)``, at least 36x36."""
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
        return False
    height, width = space.shape[:2] if channels_last(space.shape) else space.shape[1:]
    return min(height, width) >= MIN_IMAGE_SIDE


def channels_last(shape: tuple[int, ...]) -> bool:
    return shape[-1] <= 4 < shape[0]


def action_count(space: gym.Space) -> int | None:
    """How many booleans an action mask for ``space`` holds (per-dimension masks side by side for a
    MultiDiscrete); None for spaces that cannot be masked."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return int(space.nvec.sum())
    return None


def mask_count(label: str, actions: gym.Space, size: int | None = None) -> int:
    """``action_count(actions)`` for the action mask that ``label`` gives, of ``size`` values where known; a
    one-line ``UserError`` where those actions cannot be masked, or the mask does not fit them."""
    count = action_count(actions)
    if count is None:
        raise UserError(
            f"{label} gives an {MASK_KEY}, but its action space {actions} cannot be masked; masks are for "
            "Discrete and MultiDiscrete actions"
        )
    if size is not None and size != count:
        raise UserError(
            f"{label}'s {MASK_KEY} has {size} values, but its action space {actions} needs {count} "
            "(one boolean per action; per dimension, side by side, for a MultiDiscrete)"
        )
    return count


def row_actions(spaces: list[gym.Space], label: str) -> tuple[gym.Space, tuple[int, ...] | None]:
    """The one action space of every row of agents acting in ``spaces``, and ``AgentSpec.action_dims``: the
    agents' own space where they share it; else ``Discrete(max n)`` (a kind's missing actions are to be masked
    off) or ``Box(max dim)``, bounds taken over the agents that have each dim, each agent's actions its first
    dims, and its dims where they differ."""
    first = spaces[0]
    if all(s == first for s in spaces):
        return first, None
    if all(isinstance(s, gym.spaces.Discrete) for s in spaces):
        return gym.spaces.Discrete(max(int(cast(gym.spaces.Discrete, s).n) for s in spaces)), None
    if not all(isinstance(s, gym.spaces.Box) for s in spaces):
        kinds = ", ".join(sorted({type(s).__name__ for s in spaces}))
        raise UserError(
            f"{label}'s agents have action spaces of different types ({kinds}); agents of different kinds need "
            "all Discrete or all Box actions"
        )
    sizes = [int(np.prod(cast(tuple[int, ...], s.shape))) for s in spaces]
    low, high = np.full(max(sizes), np.inf), np.full(max(sizes), -np.inf)
    for s, n in zip(cast(list[gym.spaces.Box], spaces), sizes, strict=True):
        low[:n], high[:n] = np.minimum(low[:n], s.low.reshape(-1)), np.maximum(high[:n], s.high.reshape(-1))
    box = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
    return box, tuple(sizes) if len(set(sizes)) > 1 else None


@dataclass(frozen=True)
class Part:
    """One leaf of an observation space, at ``offset`` in the packed vector, ``size`` elements long."""

    path: tuple  # dict keys and tuple indices from the top; () for the whole space
    kind: str  # "box", "image", "discrete" (one-hot in the encoder), "binary" or "mask"
    shape: tuple[int, ...]  # the part's own shape, as the env gives it
    offset: int
    size: int
    n: tuple[int, ...] = ()  # "discrete": the number of values of each element
    start: tuple[int, ...] = ()  # "discrete": the smallest value of each element
    pixels: bool = False  # a uint8 image, divided by 255 in the encoder

    @property
    def name(self) -> str:
        return "/".join(map(str, self.path)) or "obs"

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.start), np.asarray(self.start) + np.asarray(self.n)

    def check_indices(self, value: np.ndarray) -> None:
        """A ``UserError`` unless every element of ``value`` (a "discrete" part's, one or a batch) is one of
        its values: the encoder's one-hot would otherwise clamp a wrong index onto a valid one, silently (an
        env that forgets its space's ``start`` would train on one constant observation)."""
        if value.size % len(self.n):
            raise UserError(
                f"the observation's {self.name!r} has {value.size} values; its space has {len(self.n)} per observation"
            )
        value = value.reshape(-1, len(self.n))
        low, end = self._bounds
        bad = (value < low) | (value >= end)
        if value.dtype.kind not in "biu":  # floats: whole numbers only
            bad |= value != np.floor(value)
        if bad.any():
            row, k = np.argwhere(bad)[0]
            element = np.unravel_index(k, self.shape) if len(self.n) > 1 else ()
            where = f"{self.name!r}" + (f" element {tuple(map(int, element))}" if element else "")
            raise UserError(
                f"the observation's {where} is {value[row, k].item()}, not one of its space's values, the "
                f"integers {low[k]} to {end[k] - 1}"
            )

    @property
    def span(self) -> slice:
        return slice(self.offset, self.offset + self.size)


class ObsLayout:
    """What one env's observation tensor holds. ``mask``: where the action mask comes from: None, ``"info"``
    (``info["action_mask"]``, appended as a last part) or a Dict key."""

    def __init__(self, space: gym.Space, mask: str | None = None, mask_size: int | None = None):
        self.space, self.mask, self.mask_size = space, mask, mask_size
        # a scalar Box (shape ()) is packed too: one number, as a vector of one
        self.packed = True
        if isinstance(space, gym.spaces.Box) and space.shape != () and mask is None:  # a Box: its own array
            self.packed = False
            self.parts: tuple[Part, ...] = ()
            self.shape = tuple(space.shape)
            self.dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
            return
        parts, offset = [], 0
        for path, leaf in _leaves(space):
            kind = "mask" if mask is not None and path == (mask,) else None
            part = _part(path, leaf, offset, kind)
            parts.append(part)
            offset += part.size
        if mask == "info":
            assert mask_size is not None  # an info mask comes with its size (find_obs_layout)
            parts.append(Part(("info", MASK_KEY), "mask", (mask_size,), offset, mask_size))
            offset += mask_size
        self.parts = tuple(parts)
        self.shape = (offset,)
        small = all(p.kind in ("binary", "mask") or p.pixels for p in parts)
        self.dtype = torch.uint8 if small else torch.float32
        self._np_dtype = np.uint8 if small else np.float32

    @property
    def mask_part(self) -> Part | None:
        return next((p for p in self.parts if p.kind == "mask"), None)

    @property
    def has_images(self) -> bool:
        return any(p.kind == "image" for p in self.parts) if self.packed else is_image(self.space)

    def packed_space(self) -> gym.spaces.Box:
        """The Box that a packed observation is a sample of (what a Gymnasium vector env batches)."""
        dtype = self._np_dtype
        low, high = (0, 255) if dtype == np.uint8 else (-np.inf, np.inf)
        return gym.spaces.Box(low, high, shape=self.shape, dtype=dtype)

    def norm_elements(self) -> torch.Tensor | None:
        """Which packed elements observation normalization applies to: those of vector parts (not one-hot
        indices, images or masks). None: all of them (a Box observation)."""
        if not self.packed:
            return None
        keep = torch.zeros(self.shape, dtype=torch.bool)
        for part in self.parts:
            keep[part.span] = part.kind == "box"
        return keep

    def pack(self, obs, info_mask=None, batch: bool = False) -> np.ndarray:
        """One observation of the space (``batch``: a batch of them, each leaf with a leading batch axis) as
        its packed vector(s). ``info_mask``: the mask from the info, for ``mask="info"`` (None: all valid)."""
        chunks: list[np.ndarray] = []
        for part in self.parts:
            if part.path == ("info", MASK_KEY):
                shape = (len(chunks[0]), part.size) if batch else (part.size,)
                value = np.ones(shape, dtype=bool) if info_mask is None else info_mask
            else:
                value = obs
                for key in part.path:
                    value = value[key]
            value = np.asarray(value)
            if part.kind == "mask" and value.size != (part.size * (len(value) if batch else 1)):
                raise UserError(
                    f"the action mask has {value.size} values; the action space needs {part.size} per observation"
                )
            if part.kind == "discrete":
                part.check_indices(value)
            chunks.append(value.reshape(len(value), -1) if batch else value.reshape(-1))
        return np.concatenate(chunks, axis=-1).astype(self._np_dtype, copy=False)

    def is_batch(self, obs) -> bool:
        if not self.packed:
            return np.ndim(obs) > len(self.shape)
        part = next(p for p in self.parts if p.path[:1] != ("info",))
        value = obs
        for key in part.path:
            value = value[key]
        return np.ndim(value) > len(part.shape)

    def select(self, keys: tuple[str, ...]) -> tuple[ObsLayout, torch.Tensor]:
        """The layout of a packed Dict observation's top-level ``keys`` alone (in the space's order), and the
        indices that cut such observations out of this layout's vectors (``obs[..., index]``): what a
        network that may see only some parts takes (a multi-agent actor never sees the global state)."""
        assert isinstance(self.space, gym.spaces.Dict)  # only a Dict observation has top-level keys
        kept = [(k, sub) for k, sub in self.space.spaces.items() if k in keys]
        layout = ObsLayout(gym.spaces.Dict(kept), self.mask if self.mask in keys else None)
        index = [i for p in self.parts if p.path[0] in keys for i in range(p.offset, p.offset + p.size)]
        return layout, torch.tensor(index, dtype=torch.long)

    def to_json(self) -> dict:
        return {"space": space_to_json(self.space), "mask": self.mask, "mask_size": self.mask_size}

    @classmethod
    def from_json(cls, data: dict) -> ObsLayout:
        return cls(space_from_json(data["space"]), data.get("mask"), data.get("mask_size"))

    def describe(self) -> dict:
        """What must match between the env an agent was trained on and one it plays: a Box's shape (a scalar
        Box's too, packed or not); for other spaces, the space and the mask."""
        if isinstance(self.space, gym.spaces.Box) and self.mask is None:
            return {"shape": list(self.space.shape)}
        return self.to_json()


def _leaves(space: gym.Space, path: tuple = ()):
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from _leaves(sub, (*path, key))
    elif isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            yield from _leaves(sub, (*path, i))
    else:
        yield path, space


def _part(path: tuple, space: gym.Space, offset: int, kind: str | None) -> Part:
    shape = tuple(space.shape or ())
    size = int(np.prod(shape))
    if kind == "mask":
        if not isinstance(space, (gym.spaces.MultiBinary, gym.spaces.Box)):
            raise UserError(f"the observation's {MASK_KEY!r} is {space}; give a MultiBinary(n) of booleans")
        return Part(path, "mask", shape, offset, size)
    if isinstance(space, gym.spaces.Box):
        if is_image(space):
            return Part(path, "image", shape, offset, size, pixels=space.dtype == np.uint8)
        return Part(path, "box", shape, offset, size)
    if isinstance(space, gym.spaces.Discrete):
        return Part(path, "discrete", (), offset, 1, (int(space.n),), (int(space.start),))
    if isinstance(space, gym.spaces.MultiDiscrete):
        n, start = space.nvec.reshape(-1).tolist(), np.broadcast_to(space.start, shape).reshape(-1).tolist()
        return Part(path, "discrete", shape, offset, size, tuple(n), tuple(start))
    if isinstance(space, gym.spaces.MultiBinary):
        return Part(path, "binary", shape, offset, size)
    where = f" (at {'/'.join(map(str, path))})" if path else ""
    raise UserError(f"observation space {space}{where} is not supported; proxima accepts {ACCEPTED}")


# JSON for spaces (agent.json, checkpoints): no pickling, and readable.


def space_to_json(space: gym.Space) -> dict:
    if isinstance(space, gym.spaces.Discrete):
        data = {"type": "Discrete", "n": int(space.n)}
        return {**data, "start": int(space.start)} if int(space.start) else data
    if isinstance(space, gym.spaces.Box):
        # JSON has no infinity: an unbounded side is written as null
        bound = lambda a: [float(x) if np.isfinite(x) else None for x in a.reshape(-1)]  # noqa: E731
        return {
            "type": "Box",
            "shape": list(space.shape),
            "low": bound(space.low),
            "high": bound(space.high),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": [[k, space_to_json(s)] for k, s in space.spaces.items()]}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise UserError(f"space {space} is not supported; proxima accepts {ACCEPTED}")


def space_from_json(data: dict) -> gym.Space:
    kind = data["type"]
    if kind == "Discrete":
        return gym.spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "Box":
        shape, dtype = tuple(data["shape"]), np.dtype(data["dtype"])
        low = np.array([-np.inf if x is None else x for x in data["low"]], dtype=np.float64).reshape(shape)
        high = np.array([np.inf if x is None else x for x in data["high"]], dtype=np.float64).reshape(shape)
        return gym.spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(data["nvec"], start=data.get("start"))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return gym.spaces.Dict([(k, space_from_json(s)) for k, s in data["spaces"]])  # in order
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(s) for s in data["spaces"]])
    raise ValueError(f"space type {kind!r}")
