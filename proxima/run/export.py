"""The trained policy as one file that runs without proxima: ONNX (onnxruntime, in any language) or TorchScript.

The file holds what ``Agent.predict(obs, deterministic=True)`` computes, end to end: the observation
normalization with the statistics saved at the end of training, the encoder, the actor, the most probable
action, and that action in the form the env receives it (``proxima.envs.env_actions``: a Box action clipped to
its bounds, a Discrete's start added, MultiBinary as int8). Tracing ``agent.model`` by hand gives none of this:
its ``forward`` takes observations already normalized and returns logits. A JSON beside the file
(``FILE.json``) names the inputs and outputs with their dtypes and shapes, and the spaces (docs/EXPORT.md).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from proxima.base.errors import UserError
from proxima.base.files import output_directory, replacing, write_json
from proxima.base.spaces import MASK_KEY, space_to_json
from proxima.policy.distributions import make_head
from proxima.policy.networks import ActorCritic, make_policy
from proxima.run.agent import Agent
from proxima.version import __version__

FORMAT = "proxima-policy"
VERSION = 1
FORMATS = {"onnx": ".onnx", "torchscript": ".pt"}
OPSET = 17  # ONNX's opset of 2022 (LayerNormalization is in it); the export extra's onnxruntime runs it
BATCH = "batch"  # the name of the batch axis in the JSON and in the ONNX file's dynamic shapes


@dataclasses.dataclass(frozen=True)
class Port:
    """One input or output of the exported policy: its name, dtype (numpy's name) and shape per observation
    (the batch axis comes first in the file, or second for the LSTM's state)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    batch_axis: int = 0

    def to_json(self) -> dict:
        shape: list[int | str] = list(self.shape)
        shape.insert(self.batch_axis, BATCH)
        return {"name": self.name, "dtype": self.dtype, "shape": shape}


class EnvActions(nn.Module):
    """The heads' actions as the env receives them: ``proxima.envs.env_actions`` in torch, so that it goes into
    the exported graph (tests/test_export.py holds the two equal for every action space)."""

    # buffers of the spaces that have them, declared for the type checker
    low: Tensor
    high: Tensor
    start: Tensor | None

    def __init__(self, action_space: gym.Space):
        super().__init__()
        self.kind = type(action_space).__name__
        self.dtype = torch.from_numpy(np.zeros((), dtype=action_space.dtype)).dtype
        if isinstance(action_space, gym.spaces.Box):
            self.register_buffer("low", torch.as_tensor(action_space.low))
            self.register_buffer("high", torch.as_tensor(action_space.high))
        if isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            start = np.asarray(action_space.start)
            self.register_buffer("start", torch.as_tensor(start, dtype=torch.int64) if start.any() else None)

    def forward(self, actions: Tensor) -> Tensor:
        if self.kind == "Box":  # np.clip in the space's dtype, as env_actions computes it
            return torch.maximum(torch.minimum(actions.to(self.dtype), self.high), self.low)
        if self.kind in ("Discrete", "MultiDiscrete"):
            return actions if self.start is None else actions + self.start
        return actions.to(self.dtype)


class ExportedPolicy(nn.Module):
    """``Agent.predict(obs, deterministic=True)`` as a module of tensors, the graph that goes into the file.

    Inputs, in order (``input_ports``): the observation, as one tensor per leaf of a Dict or Tuple space
    (``obs`` for a space that is not one, ``obs/KEY/...`` for a leaf) in the space's own dtype with a batch
    axis first; ``action_mask`` (bool, ``(B, n)``) for an agent trained with masks; and for a recurrent agent
    the LSTM's state ``h`` and ``c`` (``(layers, B, hidden)``) and ``episode_start`` (bool, ``(B,)``: True
    zeroes that env's state first, as ``predict``'s ``episode_start``). Outputs: ``action`` in the env's form,
    and for a recurrent agent the state after the step, ``h_next`` and ``c_next``.

    The leaves are packed into the one vector the network takes (``proxima.base.spaces.ObsLayout.pack``), then
    the model's own ``predict`` (or ``predict_recurrent``) computes the action: the network's math is the
    model's, not a copy of it.
    """

    def __init__(self, model: ActorCritic, observation_space: gym.Space, action_space: gym.Space):
        super().__init__()
        self.model = model
        self.layout = model.spec.layout()
        self.recurrent = model.lstm is not None
        self.env_actions = EnvActions(action_space)
        inputs: list[Port] = []
        self.sources: list[int | None] = []  # for each part of the packed vector, which input holds it
        if not self.layout.packed:
            assert isinstance(observation_space, gym.spaces.Box)  # what an unpacked layout is
            inputs.append(Port("obs", np.dtype(observation_space.dtype).name, tuple(observation_space.shape)))
        for part in self.layout.parts:
            if model.spec.agents is not None and part.path == ("state",):
                # the shared actor of many agents acts on what each agent observes: the file takes no global state
                self.sources.append(None)
                continue
            if part.kind == "mask":
                port = Port(MASK_KEY, "bool", (part.size,))
            else:
                leaf: Any = observation_space  # a Dict's or Tuple's, indexed by the part's path
                for key in part.path:
                    leaf = leaf[key]
                port = Port("/".join(["obs", *map(str, part.path)]), np.dtype(leaf.dtype).name, part.shape)
            self.sources.append(len(inputs))
            inputs.append(port)
        self.mask_input = next((i for i, p in enumerate(inputs) if p.name == MASK_KEY), None)
        self.n_obs_inputs = len(inputs)
        outputs = [Port("action", np.dtype(action_space.dtype).name, tuple(model.head.action_shape))]
        if self.recurrent:  # the batch axis goes between
            state = (model.spec.network.lstm_layers, model.spec.network.lstm_hidden_size)
            inputs += [Port("h", "float32", state, 1), Port("c", "float32", state, 1)]
            inputs.append(Port("episode_start", "bool", ()))
            outputs += [Port("h_next", "float32", state, 1), Port("c_next", "float32", state, 1)]
        self.input_ports, self.output_ports = tuple(inputs), tuple(outputs)

    def _pack(self, leaves: tuple[Tensor, ...]) -> Tensor:
        """The observation as the network takes it: a Box's own tensor, or the packed vector of the leaves."""
        if not self.layout.packed:
            return leaves[0]
        batch = leaves[0].shape[0]
        # as ObsLayout.pack: each leaf flattened after its batch axis, side by side, in the packed dtype
        return torch.cat(
            [
                leaves[i].reshape(batch, -1).to(self.layout.dtype)
                if i is not None
                else leaves[0].new_zeros((batch, part.size), dtype=self.layout.dtype)
                for i, part in zip(self.sources, self.layout.parts, strict=True)
            ],
            dim=-1,
        )

    def forward(self, *inputs: Tensor):
        obs = self._pack(inputs[: self.n_obs_inputs])
        if not self.recurrent:
            return self.env_actions(self.model.predict(obs, deterministic=True))
        h, c, episode_start = inputs[self.n_obs_inputs :]
        starts = episode_start.to(torch.float32)
        actions, (h, c) = self.model.predict_recurrent(obs, starts, (h, c), deterministic=True)
        return self.env_actions(actions), h, c

    def example_inputs(self, batch: int = 2, seed: int | None = None) -> tuple[Tensor, ...]:
        """Inputs of each dtype and shape, all actions valid: zeros to trace the graph with, or with a ``seed``
        small random values (an episode's start here and there) to check the traced graph on others."""
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        out = []
        for port in self.input_ports:
            shape = list(port.shape)
            shape.insert(port.batch_axis, batch)
            dtype = torch.from_numpy(np.zeros((), dtype=port.dtype)).dtype
            if port.name == MASK_KEY:
                out.append(torch.ones(shape, dtype=dtype))
            elif generator is None:
                out.append(torch.zeros(shape, dtype=dtype))
            elif dtype.is_floating_point:
                out.append(torch.randn(shape, generator=generator).to(dtype))
            else:
                out.append(torch.randint(0, 2, shape, generator=generator).to(dtype))
        return tuple(out)


def policy_of(agent: Agent) -> ExportedPolicy:
    """The exported policy of ``agent``, on the CPU in float32, whatever device and ``--precision`` it trained
    with: a bfloat16 CNN's convolutions then compute in float32 (an ONNX runtime's CPU kernels have no bf16)."""
    spec = agent.model.spec
    spec = dataclasses.replace(spec, network=dataclasses.replace(spec.network, precision="float32"))
    model = make_policy(spec, make_head(agent.action_space, spec.network.action_dist), agent.env_spaces())
    model.load_state_dict({k: v.detach().cpu() for k, v in agent.model.state_dict().items()})
    model.requires_grad_(False)  # a user's call of the TorchScript file returns plain tensors
    return ExportedPolicy(model.eval(), agent.observation_space, agent.action_space).eval()


def export(
    agent_or_run_dir: Agent | str,
    format: str = "onnx",
    output: str | None = None,
    *,
    encoder=None,
    actor_critic=None,
    trust_code: bool = False,
) -> str:
    """Write the deterministic policy of an agent (or of the run directory ``proxima train`` wrote) as one file
    in ``format`` (``"onnx"`` or ``"torchscript"``), and ``OUTPUT.json`` beside it; returns the file's path.

    ``output`` defaults to ``RUN_DIR/policy.onnx`` (``policy.pt`` for TorchScript), or ``policy.onnx`` here
    for an ``Agent``. Both files are written whole or not at all. docs/EXPORT.md shows how to run them.
    ``encoder``, ``actor_critic``, ``trust_code``: as ``proxima.load``'s, for a run directory whose agent.json
    names an encoder or an actor-critic class (docs/SECURITY.md).
    """
    if format not in FORMATS:
        raise UserError(f"unknown export format {format!r}; accepted: {', '.join(FORMATS)}")
    if format == "onnx" and importlib.util.find_spec("onnx") is None:
        raise UserError("ONNX export needs the onnx package: pip install 'proxima[export]'")
    if isinstance(agent_or_run_dir, Agent):
        agent, default_dir = agent_or_run_dir, "."
    else:
        default_dir = os.fspath(agent_or_run_dir)
        agent = Agent.load(default_dir, encoder=encoder, actor_critic=actor_critic, trust_code=trust_code)
    path = output if output is not None else os.path.join(default_dir, "policy" + FORMATS[format])
    other = next((f for f, ext in FORMATS.items() if f != format and path.endswith(ext)), None)
    if other is not None:  # an ONNX file named .pt would not load where the name says it should
        raise UserError(
            f"cannot write {path}: its name ends in {FORMATS[other]}, the name of a {other} file; give format {other!r} "
            f"(--format {other}), or a name ending in {FORMATS[format]}"
        )
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: it is a directory; give a file name in it")
    output_directory(path)
    policy = policy_of(agent)
    with replacing(path) as (fd, tmp):
        os.close(fd)  # the exporters write to a path
        detail = _write_onnx(policy, tmp) if format == "onnx" else _write_torchscript(policy, tmp)
        _check_file(policy, tmp, format)
    try:
        write_json(path + ".json", describe(agent, policy, format, detail))
    except BaseException:
        os.remove(path)  # the file without its JSON would be half an export
        raise
    return path


def _quiet_tracing() -> None:
    """Silence what tracing says of code that is right for this graph (tests/test_export.py runs each kind of
    agent's file against ``predict`` at other batch sizes than the traced one): a one-step LSTM's sequence has
    no cuts to find, nn.LSTM checks the shapes it is given, a MultiDiscrete observation's starts are constants,
    and the LSTM's initial state is an input. PyTorch also deprecates TorchScript and its ONNX exporter."""
    warnings.simplefilter("ignore", torch.jit.TracerWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.filterwarnings("ignore", "Exporting a model to ONNX with a batch_size other than 1", UserWarning)


def _write_onnx(policy: ExportedPolicy, path: str) -> dict:
    import onnx

    names = [p.name for p in policy.input_ports], [p.name for p in policy.output_ports]
    axes = {p.name: {p.batch_axis: BATCH} for p in (*policy.input_ports, *policy.output_ports)}
    with torch.no_grad(), warnings.catch_warnings():
        _quiet_tracing()
        try:  # the TorchScript-based exporter (dynamo=False): it needs no onnxscript, its batch axis stays dynamic
            torch.onnx.export(
                policy,
                policy.example_inputs(),
                path,
                input_names=names[0],
                output_names=names[1],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        except torch.onnx.errors.OnnxExporterError as e:  # an operator ONNX has no translation for (a user's)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UserError(
                f"the policy cannot be written as ONNX ({first}); --format torchscript can"
            ) from e
    onnx.checker.check_model(path)
    return {"opset": OPSET}


def _write_torchscript(policy: ExportedPolicy, path: str) -> dict:
    with torch.no_grad(), warnings.catch_warnings():
        _quiet_tracing()
        traced = torch.jit.trace(policy, policy.example_inputs(), check_trace=False)
        with open(path, "wb") as f:  # a file object: torch names the archive inside it from a path's own name
            torch.jit.save(traced, f)
    return {"torch": torch.__version__.split("+")[0]}


def _check_file(policy: ExportedPolicy, path: str, format: str) -> None:
    """Run the written file on other inputs, at another batch size, than it was traced on, and compare it with
    the module it was traced from: a trace keeps one path through Python's control flow, so an encoder that branches on its
    input's values, or bakes in a shape, is refused here rather than written. ONNX is checked where
    onnxruntime is installed (the export extra has it)."""
    inputs = policy.example_inputs(batch=3, seed=0)
    with torch.no_grad():
        expected = _as_tuple(policy(*inputs))
    if format == "torchscript":
        with warnings.catch_warnings():
            _quiet_tracing()
            got = [t.numpy() for t in _as_tuple(torch.jit.load(path)(*inputs))]
    elif importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = session.run(None, {p.name: x.numpy() for p, x in zip(policy.input_ports, inputs, strict=True)})
    else:
        return
    for port, want, have in zip(policy.output_ports, expected, got, strict=True):
        want = want.numpy()
        atol = 1e-4 if np.issubdtype(want.dtype, np.floating) else 0  # integers exactly
        if (have.shape, have.dtype) != (want.shape, want.dtype) or not np.allclose(
            have, want, rtol=0, atol=atol
        ):
            raise UserError(
                f"the exported {format} file's {port.name!r} differs from the policy's on 3 observations other than the "
                "traced ones; an encoder whose forward branches on its input's values cannot be traced"
            )


def _as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def describe(agent: Agent, policy: ExportedPolicy, format: str, detail: dict) -> dict:
    """The JSON beside the file: what a program that runs it needs to know."""
    net = agent.model.spec.network
    recurrent = (
        {
            "type": net.recurrent,
            "layers": net.lstm_layers,
            "hidden_size": net.lstm_hidden_size,
            "state": ["h", "c"],
            "initial_state": "zeros",
        }
        if policy.recurrent
        else None
    )
    return {
        "format": FORMAT,
        "version": VERSION,
        "file_format": format,
        **detail,
        "proxima_version": __version__,
        "env_id": agent.env_id,
        "policy": "deterministic",
        "observation_space": space_to_json(agent.observation_space),
        "action_space": space_to_json(agent.action_space),
        "inputs": [p.to_json() for p in policy.input_ports],
        "outputs": [p.to_json() for p in policy.output_ports],
        "action_mask": policy.mask_input is not None,
        "recurrent": recurrent,
        "norm_obs": net.norm_obs,
    }
