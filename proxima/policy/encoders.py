"""Observation encoders: the one place that knows what an observation looks like (docs/ARCHITECTURE.md).

An encoder turns a batch of raw observations, in the observation space's own dtype, into float features;
the actor's and critic's layers sit on top of it. ``--encoder auto`` lets the observation space pick a
built-in encoder (``encoder_for``); ``--encoder NAME`` picks a registered one and ``module:ClassName`` a user's
class (``choose_encoder``). The name or path is saved in ``agent.json`` (``NetworkSpec.encoder``), and the
training loop never asks what an observation is. Adding an observation kind (images, dicts) means registering an encoder
here, not a branch in the loop.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from proxima.base import trust
from proxima.base.errors import UserError, raised
from proxima.base.spaces import ACCEPTED, ObsLayout, channels_last, is_image
from proxima.policy.distributions import make_head


class FlattenEncoder(nn.Module):
    """``flatten-mlp``: the observation as one float vector; the MLPs of ``ActorCritic`` sit on top."""

    def __init__(self, obs_shape: tuple[int, ...]):
        super().__init__()
        self.features_dim = int(np.prod(obs_shape))

    def forward(self, obs: Tensor) -> Tensor:
        # both are no-ops (the same tensor) for the flat float32 batches of classic control
        return obs.flatten(1).to(torch.float32)


# --precision: the dtype CNN encoders compute in, as autocast takes it (None: plain float32)
PRECISIONS: dict[str, torch.dtype | None] = {"float32": None, "bfloat16": torch.bfloat16}
CPUINFO = "/proc/cpuinfo"


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` multiplies bf16 in hardware: a CUDA GPU of compute capability 8.0 or later (Ampere,
    Hopper), or a CPU with AVX512-BF16 or AMX (Linux's /proc/cpuinfo; elsewhere the answer is no). Without
    it bf16 is emulated, and slower than float32."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 8
    try:
        with open(CPUINFO) as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto``: bfloat16 where the hardware computes it natively, float32 elsewhere."""
    if requested != "auto":
        return requested
    return "bfloat16" if native_bfloat16(device) else "float32"


def hardware_notes(precision: str, device: torch.device, images: bool) -> list[str]:
    """Lines for the start of a run whose hardware works against it.

    bf16 where the hardware emulates it: a 256-sample Atari minibatch stepped 9x slower than in float32 on an
    AVX2 CPU (docs/journal/benchmarks.md). An agent without images on a GPU: its MLP's small matrix products
    leave the GPU idle between kernel launches and the per-step syncs with the envs, so the CPU often trains
    it faster (docs/RESULTS.md, many seeds, compares both on one machine); SB3 warns the same way."""
    notes = []
    if precision == "bfloat16" and not native_bfloat16(device):
        hardware = (
            "GPU (bf16 needs compute capability 8.0+)"
            if device.type == "cuda"
            else "CPU (no AVX512-BF16 or AMX)"
        )
        notes.append(
            f"note: --precision bfloat16 on a {hardware} is emulated: its products run several times slower than "
            "in float32; --precision float32 or auto avoids it"
        )
    if device.type == "cuda" and not images:
        notes.append(
            "note: this agent has no images to convolve, and its MLP is too small to keep a GPU busy: it often "
            "trains faster on the CPU (--no-cuda)"
        )
    return notes


_Layer = TypeVar("_Layer", nn.Linear, nn.Conv2d)


def layer_init(layer: _Layer, row_norm: float = math.sqrt(2), bias_const: float = 0.0) -> _Layer:
    """Orthogonal weights whose rows have norm ``row_norm``, constant bias (detail 2, docs/SEEDS.md).

    √2 suits hidden tanh/ReLU layers and convolutions; 1 the critic's output; 0.01 the actor's output, so that
    the initial policy is close to uniform and its value estimates do not depend on the actor's random start.
    """
    nn.init.orthogonal_(layer.weight, row_norm)
    assert layer.bias is not None  # every layer here is made with a bias
    nn.init.constant_(layer.bias, bias_const)
    return layer


class NatureCNN(nn.Module):
    """``nature-cnn``: the DQN paper's network (Mnih et al. 2015), as PPO uses it on Atari: conv 32 8x8 stride 4,
    conv 64 4x4 stride 2, conv 64 3x3 stride 1, then 512 ReLU units; actor and critic heads sit on top.

    Takes images channels-first ``(C, H, W)`` (a stack of frames) or channels-last ``(H, W, C)`` with C <= 4
    (an RGB or RGBA render), at least 36x36. ``uint8`` pixels are divided by 255 here, inside the network,
    so that the buffer keeps them as bytes.
    """

    features_dim = 512

    def __init__(self, obs_shape: tuple[int, ...], precision: str = "float32"):
        super().__init__()
        # "bfloat16": the convolutions compute in bf16 (bf16 products, float32 weights and gradients);
        # the 512-unit layer, the heads, the losses and Adam stay float32 (--precision)
        if precision not in PRECISIONS:
            raise UserError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        self.autocast = PRECISIONS[precision]
        self.channels_last = channels_last(obs_shape)
        channels = obs_shape[-1] if self.channels_last else obs_shape[0]
        self.convs = nn.Sequential(
            layer_init(nn.Conv2d(channels, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
        )
        # Channels-last memory (NHWC) for the convolutions: the same numbers, in the layout oneDNN's CPU kernels
        # are fastest in (benchmarks/atari_throughput.py minibatch times a minibatch's forward and backward).
        # torch's stubs for Module.to leave out memory_format, which it takes (torch.nn.Module.to's docstring)
        self.convs.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        # of the images too; StackedModels sets it to contiguous (vmap, --num-seeds, takes those only)
        self.memory_format = torch.channels_last
        with torch.no_grad():
            flat = self.convs(self._as_images(torch.zeros(1, *obs_shape)).float()).shape[1]
        self.linear = nn.Sequential(layer_init(nn.Linear(flat, self.features_dim)), nn.ReLU())

    def _half(self, device: torch.device) -> torch.dtype | None:
        """The dtype the convolutions compute in on ``device``, None for float32: bf16 needs autocast there."""
        if self.autocast is not None and torch.amp.is_autocast_available(device.type):
            return self.autocast
        return None

    def _as_images(self, obs: Tensor) -> Tensor:
        # Laid out channels-last while still bytes (a quarter of float32's memory traffic), then converted
        # once, straight to the dtype the first convolution takes: 10-15% of a minibatch step went to copies
        x = obs.permute(0, 3, 1, 2) if self.channels_last else obs
        x = x.contiguous(memory_format=self.memory_format).to(self._half(obs.device) or torch.float32)
        return x.div_(255.0) if obs.dtype == torch.uint8 else x  # a new tensor: the division is in place

    def forward(self, obs: Tensor) -> Tensor:
        x = self._as_images(obs)
        half = self._half(obs.device)
        if half is None:
            return self.linear(self.convs(x))
        # bf16 products with float32 weights and gradients: each convolution's weights cast as it runs, as autocast
        # would cast them, but explicitly, since autocast does not reach into torch.func.vmap (--num-seeds)
        for layer in self.convs:
            if isinstance(layer, nn.Conv2d):
                bias = None if layer.bias is None else layer.bias.to(half)
                x = nn.functional.conv2d(x, layer.weight.to(half), bias, layer.stride, layer.padding)
            else:
                x = layer(x)
        return self.linear(x.to(torch.float32))  # the 512 units in float32: the critic's values need the bits


def _is_board(part) -> bool:
    return part.kind == "box" and len(part.shape) == 3


def _has_board(layout: ObsLayout) -> bool:
    return layout.packed and any(_is_board(p) for p in layout.parts)


def _same_convs(planes: int, channels: int, layers: int) -> list[nn.Module]:
    """``layers`` 3x3 same-padding convolutions of ``channels`` with ReLU, the first on ``planes`` planes: the
    board keeps its size, so every feature sees a cell's neighbourhood, as a board game's tactics need."""
    convs: list[nn.Module] = []
    for i in range(layers):
        convs += [layer_init(nn.Conv2d(channels if i else planes, channels, 3, padding=1)), nn.ReLU()]
    return convs


class BoardConvs(nn.Module):
    """A board's cells through three same-padding convolutions (``_same_convs``), flattened."""

    channels = 32

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        height, width, planes = shape  # planes last, as PettingZoo's classic games give them
        self.convs = nn.Sequential(*_same_convs(planes, self.channels, 3), nn.Flatten())
        self.features_dim = self.channels * height * width

    def forward(self, board: Tensor) -> Tensor:
        return self.convs(board.to(torch.float32).permute(0, 3, 1, 2))


class DropColumnConvs(nn.Module):
    """A board of a game whose move drops a piece into a column, where it lands on the lowest empty cell
    (Connect Four; the planes hold pieces as 0/1, row 0 at the top, as PettingZoo gives them): the cells
    through four 3x3 same-padding convolutions of ``channels`` with ReLU, beside the board's planes a plane of
    ones, so that the board's edge (zero padding) differs from an empty cell. The features: for each column,
    the channels at the cell a piece dropped there lands on, then each channel's mean and max over the board.
    A move's tactics (the line of four it makes or blocks) are in its own landing cell's features, which the
    9x9 cells the four layers see cover, so the same weights read every column and the actor's layer weighs
    each move by what that move does."""

    channels = 32

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.height, width, planes = shape
        self.convs = nn.Sequential(*_same_convs(planes + 1, self.channels, 4))
        self.features_dim = self.channels * (width + 2)

    def forward(self, board: Tensor) -> Tensor:
        x = board.to(torch.float32).permute(0, 3, 1, 2)  # (B, planes, H, W)
        cells = self.convs(torch.cat([x, torch.ones_like(x[:, :1])], 1))  # (B, k, H, W)
        landing = (self.height - 1 - x.sum((1, 2))).clamp(min=0).long()  # (B, W); a full column: its top cell
        columns = cells.gather(2, landing[:, None, None, :].expand(-1, cells.shape[1], 1, -1)).squeeze(2)
        return torch.cat([columns.flatten(1), cells.mean((2, 3)), cells.amax((2, 3))], 1)


class MultiInputEncoder(nn.Module):
    """``multi-input``: any observation that is not a single Box (Dict, Tuple, Discrete, MultiDiscrete,
    MultiBinary), packed into one vector at the env (``proxima.base.spaces``). Each part is cut back out of the
    vector: a vector part as it is, discrete values one-hot encoded, binary values as 0/1, each image part
    through its own Nature CNN, and each board through its own ``board`` network where a subclass names one.
    Their features are concatenated; the action mask is not a feature."""

    board: type[BoardConvs] | type[DropColumnConvs] | None = None

    def __init__(self, layout: ObsLayout, precision: str = "float32"):
        super().__init__()
        self.parts = [p for p in layout.parts if p.kind != "mask"]
        # keyed by position: a Dict key may hold a "." or name a ModuleDict attribute ("keys", "training")
        nets: dict[str, NatureCNN | BoardConvs | DropColumnConvs] = {
            f"part{i}": NatureCNN(p.shape, precision) for i, p in enumerate(self.parts) if p.kind == "image"
        }
        board = self.board
        if board is not None:
            nets.update({f"part{i}": board(p.shape) for i, p in enumerate(self.parts) if _is_board(p)})
        self.cnns = nn.ModuleDict(nets)
        sizes = [sum(p.n) if p.kind == "discrete" else p.size for p in self.parts]
        self.features_dim = sum(
            nets[f"part{i}"].features_dim if f"part{i}" in nets else n for i, n in enumerate(sizes)
        )

    def forward(self, obs: Tensor) -> Tensor:
        features = []
        for i, part in enumerate(self.parts):
            x = obs[:, part.span]
            if f"part{i}" in self.cnns:
                # packed as float32 next to other parts, pixels are still whole numbers 0-255: back to bytes,
                # so that the CNN divides them by 255 as it does a uint8 image
                x = x.to(torch.uint8) if part.pixels else x
                features.append(self.cnns[f"part{i}"](x.reshape(-1, *part.shape)))
            elif part.kind == "discrete":
                index = x.long() - torch.tensor(part.start, device=x.device)
                features += [
                    nn.functional.one_hot(index[:, k].clamp(0, n - 1), n).to(torch.float32)
                    for k, n in enumerate(part.n)
                ]
            else:
                features.append(x.to(torch.float32))
        return torch.cat(features, dim=-1)


class BoardCNN(MultiInputEncoder):
    """``board-cnn``: observations with a board, a part of shape ``(H, W, planes)`` that is not an image
    (Connect Four's ``(6, 7, 2)``, Chess's ``(8, 8, 111)``): each board through ``BoardConvs``, the other parts
    as ``multi-input`` takes them. The Nature CNN's strides of 4 and 2 would not fit a board of a few cells."""

    board: type[BoardConvs] | type[DropColumnConvs] | None = BoardConvs


class DropColumns(BoardCNN):
    """``drop-columns``: ``board-cnn`` with each board through ``DropColumnConvs``, for games whose move drops a
    piece into a column (Connect Four)."""

    board = DropColumnConvs


@dataclass(frozen=True)
class EncoderType:
    name: str
    make: Callable[..., nn.Module]  # (layout) -> a module with ``features_dim``; (layout, precision) with:
    supports: Callable[[ObsLayout], bool]
    accepts: str  # for the error when no encoder supports a layout
    takes_precision: bool = False  # make takes --precision as a second argument (the CNNs do)


# The built-ins, in the order that --encoder auto tries them (encoder_for)
ENCODERS: dict[str, EncoderType] = {
    e.name: e
    for e in (
        EncoderType(
            "flatten-mlp",
            lambda layout: FlattenEncoder(layout.shape),
            lambda layout: not layout.packed and len(layout.shape) >= 1 and not is_image(layout.space),
            "Box observations of 1 or more dimensions",
        ),
        EncoderType(
            "nature-cnn",
            lambda layout, precision: NatureCNN(layout.shape, precision),
            lambda layout: not layout.packed and is_image(layout.space),
            "images (C, H, W) or (H, W, C<=4) of at least 36x36",
            takes_precision=True,
        ),
        EncoderType(
            "multi-input",
            MultiInputEncoder,
            lambda layout: layout.packed,
            f"{ACCEPTED} observations",
            takes_precision=True,
        ),
        EncoderType(
            "board-cnn",
            BoardCNN,
            _has_board,
            "Dict observations with a board, a part of shape (H, W, planes) that is not an image",
            takes_precision=True,
        ),
        EncoderType(
            "drop-columns",
            DropColumns,
            _has_board,
            "Dict observations with the board of a game whose moves drop pieces into columns (H, W, planes)",
            takes_precision=True,
        ),
    )
}


def register_encoder(encoder: EncoderType) -> None:
    ENCODERS[encoder.name] = encoder


def encoder_for(layout: ObsLayout) -> str:
    """The name of the first registered encoder that supports the observations, or a ``UserError``.

    This is ``--encoder auto``: the built-ins are registered first, so it picks one of them wherever one
    applies; an encoder registered later is picked by its name (``choose_encoder``)."""
    for encoder in ENCODERS.values():
        if encoder.supports(layout):
            return encoder.name
    accepted = ", ".join(e.accepts for e in ENCODERS.values())
    raise UserError(f"observation space {layout.space} is not supported; proxima accepts {accepted}")


# Encoder classes given as objects whose import path does not lead back to them (defined in __main__ or in a
# function): this process can still build them; another one cannot (encoder_note says so at the start).
_UNIMPORTABLE: dict[str, type[nn.Module]] = {}


# The settings that name an nn.Module class by its import path (``NetworkSettings``' fields): what each takes
_NOT_A_CLASS = {
    "encoder": "an nn.Module class or an encoder's name",
    "actor_critic": "an nn.Module class with actor and critic attributes, or its module:ClassName",
}


def class_path(cls: type, setting: str = "encoder") -> str:
    """``cls``'s import path, ``package.module:ClassName``, which config.json and agent.json record as
    ``setting`` (``encoder`` or ``actor_critic``); a class that importing the path would not give back is kept here, so that
    this process can still build it."""
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise UserError(f"{setting} must be {_NOT_A_CLASS[setting]}, got {cls!r}")
    path = f"{cls.__module__}:{cls.__qualname__}"
    trust.remember(setting, path)  # given by the user: a run's files may name it in this process
    try:
        found = import_class(path, setting)
    except UserError:
        found = None
    if found is not cls:
        _UNIMPORTABLE[path] = cls
    return path


def encoder_note(name: str | None, setting: str = "encoder") -> list[str]:
    """A line for a run whose encoder class (or other ``setting``'s class) another process cannot import, said
    at the start."""
    if name not in _UNIMPORTABLE:
        return []
    return [
        f"note: the {setting} {name} cannot be imported by its path (it is defined in the script "
        "run as __main__ or inside a function): this process uses it, but proxima.load elsewhere, proxima eval "
        "and --resume cannot re-create it; define it in a module on PYTHONPATH to make the agent loadable "
        "(docs/NETWORKS.md)"
    ]


def import_class(path: str, setting: str = "encoder") -> type[nn.Module]:
    """The class at ``module:Qual.Name`` that ``setting`` names, or a one-line ``UserError`` saying how to make it
    importable."""
    module_name, _, qualname = path.partition(":")
    if module_name == "__main__" or "<locals>" in qualname:
        raise UserError(
            f"{setting} {path} was defined in the script run as __main__ or inside a function, so no other process "
            "can import it: move the class into a module on PYTHONPATH and put that module:Class in agent.json's "
            f'"network" -> "network" -> "{setting}" (and config.json\'s "network" -> "{setting}")'
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            raise UserError(
                f"{setting} {path}: module {module_name!r} cannot be imported; put the directory that holds it on "
                f"PYTHONPATH (PYTHONPATH=DIR proxima ...) or install the package that has it"
            ) from None
        raise UserError(f"{setting} {path}: importing module {module_name!r} failed: {e}") from None
    found: object = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if not (isinstance(found, type) and issubclass(found, nn.Module)):
        raise UserError(f"{setting} {path}: module {module_name!r} has no nn.Module class {qualname!r}")
    return found


def user_class(path: str, setting: str = "encoder") -> type[nn.Module]:
    """The class ``path`` names: one this process was given (``class_path``), else imported."""
    return _UNIMPORTABLE.get(path) or import_class(path, setting)


def choose_encoder(requested: str, layout: ObsLayout) -> str:
    """The encoder a run uses, as ``NetworkSpec.encoder`` records it: ``auto`` is ``encoder_for``'s choice; a
    registered name must support the observations; ``module:Class`` is a user's class (imported here, so that a
    bad path fails before the run starts)."""
    if requested == "auto":
        return encoder_for(layout)
    if ":" in requested:  # module:ClassName, a user's class (a registered name has no colon)
        user_class(requested)
        return requested
    if requested not in ENCODERS:
        raise UserError(
            f"unknown encoder {requested!r}; accepted: auto, {', '.join(ENCODERS)} (register_encoder adds one), "
            "or an nn.Module class as module:ClassName"
        )
    if not ENCODERS[requested].supports(layout):
        space = layout.space  # in a few words: a Box's printed bounds would fill the line
        words = (
            f"Box{space.shape} {space.dtype}" if isinstance(space, gym.spaces.Box) else type(space).__name__
        )
        usable = [name for name, e in ENCODERS.items() if e.supports(layout)]
        raise UserError(
            f"encoder {requested!r} does not support {words} observations (it takes "
            f"{ENCODERS[requested].accepts}); accepted for this env: auto, {', '.join(usable)}"
        )
    return requested


def make_encoder(name: str, layout: ObsLayout, precision: str = "float32") -> nn.Module:
    """Build the encoder ``name``: a registered one, or a user's class ``module:ClassName``, built as
    ``cls(layout)`` (``cls(layout, precision)`` if its ``__init__`` takes a ``precision``)."""
    if ":" in name:
        cls = user_class(name)
        takes_precision = "precision" in inspect.signature(cls).parameters
        encoder = cls(layout, precision) if takes_precision else cls(layout)
        features = getattr(encoder, "features_dim", None)
        if not isinstance(features, int | np.integer) or isinstance(features, bool) or features < 1:
            raise UserError(
                f"encoder {name} has no features_dim (got {features!r}): set self.features_dim to the size of "
                "the features its forward returns, a positive int"
            )
        _try_forward(encoder, name, layout, int(features))
        return encoder
    if name not in ENCODERS:
        raise UserError(f"unknown encoder {name!r}; accepted: {', '.join(ENCODERS)}")
    registered = ENCODERS[name]
    return registered.make(layout, precision) if registered.takes_precision else registered.make(layout)


def _try_forward(encoder: nn.Module, name: str, layout: ObsLayout, features: int) -> None:
    """A ``UserError`` in one line, before any training, where a user's encoder does not take a batch of the
    env's observations or does not return ``(batch, features_dim)`` (torch would say so at the first step,
    as a shape error deep in the actor). In eval mode: dropout draws nothing, batch norm keeps its statistics."""
    obs = torch.zeros((2, *layout.shape), dtype=layout.dtype)
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            out = encoder(obs)
    except Exception as e:
        raise UserError(
            f"encoder {name} fails on a batch of observations of shape {tuple(obs.shape)} ({raised(e)}); its "
            "forward takes (batch, *observation shape) and returns (batch, features_dim)"
        ) from None
    finally:
        encoder.train(was_training)
    shape = tuple(getattr(out, "shape", ()))
    if shape != (2, features):
        raise UserError(
            f"encoder {name} returned shape {shape} for a batch of 2 observations; with features_dim {features} "
            f"it must return (2, {features})"
        )


def check_spaces(layout: ObsLayout, action_space: gym.Space, encoder: str = "auto") -> None:
    """Raise a ``UserError`` for spaces proxima cannot train on: no encoder or no policy head."""
    choose_encoder(encoder, layout)
    make_head(action_space)
