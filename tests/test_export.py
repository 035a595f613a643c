"""proxima.run.export: the file must act as ``Agent.predict(obs, deterministic=True)`` does, after
``env_actions``, for every kind of agent: exact for discrete actions, within 1e-5 for continuous ones."""

import importlib
import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import proxima
from proxima.base.errors import UserError
from proxima.commands import main
from proxima.envs import env_actions
from proxima.run.export import EnvActions
from tests.fixtures import space_envs  # noqa: F401  (registers the envs)

export_module = importlib.import_module("proxima.run.export")
PREFIX = "tests.fixtures.space_envs:"
TINY = dict(total_timesteps=1024, num_envs=4, num_steps=64, seed=1, plot=False, report=False, quiet=True,
            torch_threads=1)  # fmt: skip
N = 1000
# PyTorch deprecates TorchScript; the format is still what the issue asks for, and runs in any libtorch
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

# Each agent kind, with norm_obs wherever the encoder takes it, so that the file must hold the statistics.
KINDS = {
    "discrete": dict(env_id="CartPole-v1", norm_obs=True),
    "discrete-start": dict(env_id=PREFIX + "DiscreteObs-v0", norm_obs=True),  # Discrete(3, start=1) actions
    "multidiscrete": dict(env_id=PREFIX + "MultiDiscreteAction-v0", norm_obs=True),  # float64 observations
    "multibinary": dict(env_id=PREFIX + "MultiBinaryAction-v0", norm_obs=True),
    "gaussian": dict(env_id="Pendulum-v1", norm_obs=True),
    "beta": dict(env_id="Pendulum-v1", norm_obs=True, action_dist="beta"),
    "tanh-gaussian": dict(env_id="Pendulum-v1", norm_obs=True, action_dist="tanh-gaussian"),
    "mask-info": dict(env_id=PREFIX + "MaskInfo-v0", norm_obs=True),
    "mask-dict": dict(env_id=PREFIX + "MaskDict-v0", norm_obs=True),
    "mask-multidiscrete": dict(env_id=PREFIX + "MaskMultiDiscrete-v0", norm_obs=True),
    "dict": dict(env_id=PREFIX + "DictObs-v0", norm_obs=True),
    "tuple": dict(env_id=PREFIX + "TupleObs-v0", norm_obs=True),
    "image": dict(env_id="proxima/ProbeImagePolicy-v0"),  # uint8 pixels, divided by 255 in the file
    "dict-image": dict(env_id=PREFIX + "DictImage-v0", norm_obs=True),
    "lstm": dict(env_id="CartPole-v1", norm_obs=True, recurrent="lstm", lstm_hidden_size=16),
}


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    """Each kind's run directory and agent, trained once for the module, when a test first asks for it."""
    cache = {}

    def get(kind):
        if kind not in cache:
            run_dir = tmp_path_factory.mktemp(kind)
            cache[kind] = str(run_dir), proxima.train(run_dir=str(run_dir), **TINY, **KINDS[kind])
        return cache[kind]

    return get


def _runner(path: str, format: str):
    """A function of the inputs (numpy, in the JSON's order) that runs the exported file."""
    if format == "onnx":
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return lambda *inputs: session.run(None, dict(zip(names, inputs, strict=True)))
    module = torch.jit.load(path)
    return lambda *inputs: [
        t.numpy() for t in _as_tuple(module(*(torch.as_tensor(np.ascontiguousarray(x)) for x in inputs)))
    ]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _env_observations(env_id: str, n: int, seed: int = 0) -> np.ndarray:
    """``n`` observations of the env under random actions: CartPole's space has unbounded velocities, whose
    samples would all be clipped by the normalization."""
    env, out = gym.make(env_id), []
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(out)


def _random_mask(rng, nvec, n):
    """A mask per observation with at least one valid action in each of a MultiDiscrete's dimensions."""
    masks = []
    for k in nvec:
        m = rng.random((n, k)) < 0.5
        m[np.arange(n), rng.integers(0, k, n)] = True
        masks.append(m)
    return np.concatenate(masks, axis=1)


def _batch(space: gym.Space, n: int, seed: int = 0):
    """``n`` samples of ``space``, each leaf with a leading batch axis (as ``predict`` takes a batch)."""
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]
    if isinstance(space, gym.spaces.Dict):
        return {k: np.stack([s[k] for s in samples]) for k in space.spaces}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(np.stack([s[i] for s in samples]) for i in range(len(space.spaces)))
    return np.stack(samples)


def _leaves(obs, path=()):
    if isinstance(obs, dict):
        for k, v in obs.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obs, tuple):
        for i, v in enumerate(obs):
            yield from _leaves(v, (*path, i))
    else:
        yield "/".join(["obs", *map(str, path)]), obs


def _inputs(meta: dict, obs, mask) -> list[np.ndarray]:
    """The file's inputs for a batch of observations, by the names and dtypes its JSON gives."""
    by_name = dict(_leaves(obs))
    if mask is not None:
        by_name["action_mask"] = mask
    return [np.asarray(by_name.pop(i["name"])).astype(i["dtype"]) for i in meta["inputs"]]


def _check(kind: str, actions: np.ndarray, expected: np.ndarray, continuous: bool):
    assert actions.shape == expected.shape and actions.dtype == expected.dtype, kind
    if continuous:
        np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-5)
    else:
        assert np.array_equal(actions, expected), f"{kind}: {np.sum(actions != expected)} actions differ"


@pytest.mark.parametrize("format", ["onnx", "torchscript"])
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "lstm"])
def test_the_file_acts_as_predict_on_1000_observations(kind, format, agents):
    run_dir, agent = agents(kind)
    path = proxima.export(run_dir, format)
    assert path.endswith("policy.onnx" if format == "onnx" else "policy.pt")
    meta = json.loads(open(path + ".json").read())
    rng = np.random.default_rng(0)
    layout = agent.layout
    if kind == "discrete":
        obs = _env_observations("CartPole-v1", N)
    else:
        obs = _batch(agent.observation_space, N)
    mask = None
    if layout.mask is not None:
        nvec = getattr(agent.action_space, "nvec", [getattr(agent.action_space, "n", 0)])
        mask = _random_mask(rng, [int(k) for k in nvec], N)
        if layout.mask != "info":
            obs["action_mask"] = mask.astype(np.int8)  # the Dict's own mask, which predict reads
    assert meta["action_mask"] == (mask is not None) and meta["recurrent"] is None
    expected = agent.predict(obs, deterministic=True, action_mask=mask if layout.mask == "info" else None)
    run = _runner(path, format)
    actions = run(*_inputs(meta, obs, mask))[0]
    _check(kind, actions, expected, continuous=isinstance(agent.action_space, gym.spaces.Box))
    if mask is not None:  # the mask is an input: no masked action comes out
        if isinstance(agent.action_space, gym.spaces.Discrete):
            assert mask[np.arange(N), actions].all()
        else:
            assert mask[np.arange(N), actions[:, 0]].all() and mask[np.arange(N), 3 + actions[:, 1]].all()
    # one observation at a time too: the batch axis is dynamic
    one = run(*(x[:1] for x in _inputs(meta, obs, mask)))[0]
    _check(kind, one, expected[:1], continuous=isinstance(agent.action_space, gym.spaces.Box))


def test_the_files_run_where_proxima_cannot_be_imported(agents, tmp_path):
    pytest.importorskip("onnxruntime")
    run_dir, agent = agents("discrete")
    onnx_path, ts_path = proxima.export(run_dir, "onnx"), proxima.export(run_dir, "torchscript")
    obs = _env_observations("CartPole-v1", 50, seed=3)
    np.save(tmp_path / "obs.npy", obs)
    script = f"""
import sys, warnings
sys.modules["proxima"] = None  # any import of proxima now fails
import numpy as np, onnxruntime, torch
warnings.simplefilter("ignore")
obs = np.load({str(tmp_path / "obs.npy")!r})
a = onnxruntime.InferenceSession({onnx_path!r}).run(["action"], {{"obs": obs}})[0]
b = torch.jit.load({ts_path!r})(torch.from_numpy(obs)).numpy()
print(" ".join(map(str, a)), "|", " ".join(map(str, b)))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    expected = " ".join(map(str, agent.predict(obs, deterministic=True)))
    assert out.strip() == f"{expected} | {expected}"


def test_the_normalization_is_inside_the_file(agents):
    """An agent whose statistics are non-trivial; the file's actions follow them, not the raw observations."""
    run_dir, agent = agents("gaussian")
    rms = agent.model.normalization.obs_rms
    assert agent.model.spec.network.norm_obs and not torch.allclose(
        rms.var, torch.ones_like(rms.var), atol=0.05
    )
    path = proxima.export(run_dir, "torchscript")
    obs = _batch(agent.observation_space, 200)
    exported = torch.jit.load(path)(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(exported, agent.predict(obs, deterministic=True), rtol=0, atol=1e-5)
    # the trap the docs warn of: the model's forward skips the normalization and returns the raw mean
    with torch.no_grad():
        raw = agent.model(torch.as_tensor(obs))[0].numpy()
    assert np.abs(np.clip(raw, -2, 2) - exported).max() > 1e-3


@pytest.mark.parametrize("format", ["onnx", "torchscript"])
def test_a_recurrent_file_carries_its_state_as_predict_does(format, agents):
    run_dir, agent = agents("lstm")
    path = proxima.export(run_dir, format)
    meta = json.loads(open(path + ".json").read())
    assert [i["name"] for i in meta["inputs"]] == ["obs", "h", "c", "episode_start"]
    assert [o["name"] for o in meta["outputs"]] == ["action", "h_next", "c_next"]
    assert meta["inputs"][1]["shape"] == [1, "batch", 16] and meta["recurrent"]["hidden_size"] == 16
    run = _runner(path, format)
    # 4 envs, 250 steps each (1,000 observations), random actions; episodes start and end along the way
    envs = [gym.make("CartPole-v1") for _ in range(4)]
    obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)])
    starts = np.ones(4, dtype=bool)
    h = c = np.zeros((1, 4, 16), dtype=np.float32)
    state = None
    resets = 0
    for t in range(250):
        expected, state = agent.predict(obs, state, episode_start=starts, deterministic=True)
        actions, h, c = run(obs, h, c, starts)
        assert np.array_equal(actions, expected), f"step {t}"
        np.testing.assert_allclose(h, state[0], rtol=0, atol=1e-5)
        np.testing.assert_allclose(c, state[1], rtol=0, atol=1e-5)
        h, c = state  # both go on from predict's state, so that float differences do not accumulate
        for i, env in enumerate(envs):
            o, _, terminated, truncated, _ = env.step(int(np.random.default_rng(t * 4 + i).integers(2)))
            starts[i] = terminated or truncated
            obs[i] = env.reset()[0] if starts[i] else o
        resets += starts.sum()
    assert resets > 10  # episode starts were exercised


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(-1.0, 2.0, shape=(3,), dtype=np.float32),
        gym.spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float64),
        gym.spaces.Discrete(4, start=-2),
        gym.spaces.Discrete(4),
        gym.spaces.MultiDiscrete([3, 2], start=[1, -1]),
        gym.spaces.MultiBinary(3),
    ],
)
def test_env_actions_in_torch_equal_env_actions(space):
    """The file's last step is env_actions in torch: the same numbers and dtype, out-of-bounds actions clipped."""
    if isinstance(space, gym.spaces.Box):
        actions = torch.randn(100, *space.shape, dtype=torch.float32) * 3
    elif isinstance(space, gym.spaces.MultiBinary):
        actions = torch.randint(0, 2, (100, 3)).float()
    else:
        n = space.nvec if isinstance(space, gym.spaces.MultiDiscrete) else [space.n]
        actions = torch.stack([torch.randint(0, int(k), (100,)) for k in n], -1).squeeze(-1)
    expected = env_actions(actions.numpy(), space)
    got = EnvActions(space)(actions).numpy()
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_the_json_names_spaces_inputs_and_version(agents, tmp_path):
    run_dir, agent = agents("mask-dict")
    path = proxima.export(agent, "torchscript", output=str(tmp_path / "p.pt"))
    meta = json.loads((tmp_path / "p.pt.json").read_text())
    assert (
        meta["format"] == "proxima-policy" and meta["version"] == 1 and meta["file_format"] == "torchscript"
    )
    assert meta["proxima_version"] == proxima.__version__
    assert meta["observation_space"]["type"] == "Dict" and meta["action_space"] == {
        "type": "Discrete",
        "n": 3,
    }
    assert meta["inputs"] == [
        {"name": "action_mask", "dtype": "bool", "shape": ["batch", 3]},
        {"name": "obs/obs", "dtype": "float32", "shape": ["batch", 1]},
    ]
    assert meta["outputs"] == [{"name": "action", "dtype": "int64", "shape": ["batch"]}]
    assert meta["action_mask"] is True and path == str(tmp_path / "p.pt")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_files_get_the_mode_of_a_plain_file(umask, agents, tmp_path):
    """The file and its JSON get 0666 less the umask, as a file written plainly does: not the 0600 of the
    temporary file (tempfile.mkstemp's) they are written through, which no one else could read."""
    run_dir, agent = agents("discrete")
    old = os.umask(umask)
    try:
        paths = [proxima.export(agent, format, output=str(tmp_path / f"p{ext}")) for format, ext in
                 (("torchscript", ".pt"), ("onnx", ".onnx"))]  # fmt: skip
    finally:
        os.umask(old)
    modes = {name: os.stat(name).st_mode & 0o777 for path in paths for name in (path, path + ".json")}
    assert modes == dict.fromkeys(modes, 0o666 & ~umask) and len(modes) == 4
    assert sorted(os.listdir(tmp_path)) == ["p.onnx", "p.onnx.json", "p.pt", "p.pt.json"]


def test_bad_input_is_refused_in_one_line(agents, tmp_path):
    run_dir, agent = agents("discrete")
    with pytest.raises(UserError, match="unknown export format 'tflite'; accepted: onnx, torchscript"):
        proxima.export(run_dir, "tflite")
    with pytest.raises(UserError, match="does not exist"):
        proxima.export(str(tmp_path / "nothing"), "onnx")
    with pytest.raises(UserError, match="does not exist"):
        proxima.export(agent, "onnx", output=str(tmp_path / "no" / "p.onnx"))
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def _policy_class(monkeypatch, cls):
    """Export through ``cls``, a subclass of ExportedPolicy, instead of ExportedPolicy itself."""
    real = export_module.policy_of
    monkeypatch.setattr(
        export_module, "policy_of", lambda a: cls(real(a).model, a.observation_space, a.action_space)
    )


@pytest.mark.parametrize("format", ["onnx", "torchscript"])
def test_a_policy_that_branches_on_its_input_is_refused_not_written(format, agents, tmp_path, monkeypatch):
    """A trace keeps the branch its example took; the written file is checked on other observations."""
    if format == "onnx":
        pytest.importorskip("onnxruntime")
    _, agent = agents("discrete")

    class Branchy(export_module.ExportedPolicy):
        def forward(self, *inputs):
            action = super().forward(*inputs)
            return action + 1 if bool(inputs[0].abs().sum() > 0) else action  # zeros while tracing

    _policy_class(monkeypatch, Branchy)
    with pytest.raises(UserError, match="'action' differs from the policy's"):
        proxima.export(agent, format, output=str(tmp_path / "p"))
    assert list(tmp_path.iterdir()) == []


def test_an_operator_onnx_lacks_is_one_line_that_names_torchscript(agents, tmp_path, monkeypatch):
    _, agent = agents("discrete")

    class WithLgamma(export_module.ExportedPolicy):
        def forward(self, *inputs):  # lgamma has no ONNX operator (opset 17); it adds 0 here
            return super().forward(*inputs) + (torch.lgamma(inputs[0].abs() + 1).sum() * 0).long()

    _policy_class(monkeypatch, WithLgamma)
    with pytest.raises(
        UserError, match=r"cannot be written as ONNX \(.*lgamma.*\); --format torchscript can"
    ):
        proxima.export(agent, "onnx", output=str(tmp_path / "p.onnx"))
    assert list(tmp_path.iterdir()) == []
    assert proxima.export(agent, "torchscript", output=str(tmp_path / "p.pt")).endswith("p.pt")


def test_onnx_without_the_extra_says_what_to_install(agents, tmp_path, monkeypatch):
    import importlib.util

    run_dir, _ = agents("discrete")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a)
    )
    with pytest.raises(UserError, match=r"pip install 'proxima\[export\]'"):
        proxima.export(run_dir, "onnx", output=str(tmp_path / "p.onnx"))
    assert list(tmp_path.iterdir()) == []


def test_the_cli_writes_the_file_and_its_json_and_refuses_a_bad_format(agents, tmp_path, capsys):
    run_dir, agent = agents("discrete")
    out = tmp_path / "cartpole.onnx"
    assert main(["export", run_dir, "--format", "onnx", "--output", str(out)]) == 0
    assert out.exists() and json.loads((tmp_path / "cartpole.onnx.json").read_text())["file_format"] == "onnx"
    assert str(out) in capsys.readouterr().out
    assert main(["export", run_dir, "--format", "tflite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown export format 'tflite'" in err
    assert main(["export", str(tmp_path / "missing"), "--format", "onnx"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
