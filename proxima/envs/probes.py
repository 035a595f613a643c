"""Probe environments 1-5 (Andy Jones, "Debugging RL, Without the Agonizing Pain"; the
tolerances are the PPO tutorial's, docs/SEEDS.md).

Each isolates one part of an agent, and has an exact answer:

1. One action, obs 0, reward 1, one step: V(0) = 1. Tests the value loss and optimizer.
2. One action, obs ±1, reward = obs, one step: V(±1) = ±1. Tests that the value network uses the observation.
3. One action, two steps: obs 0 with reward 0, then obs 1 with reward 1: V(0) = gamma, V(1) = 1. Tests discounting.
4. Two actions, obs 0, reward +1 for action 1 and -1 for action 0: pi(1|0) = 1, V(0) = 1. Tests the policy
   loss and advantages.
5. Two actions, obs 0 or 1, reward +1 when the action equals the obs, else -1: pi(a=obs) = 1, V = 1. Tests
   that the policy uses the observation, and that observations and actions stay aligned in batches.

ProbeMemory (for recurrent agents): observation ±1 at the first step only, then 0; the action at the fourth step
is paid +1 when it names the first observation's sign, else -1. Without memory the best is chance (0 on
average); with it, pi(right | cue, 0, 0, 0) = 1 and V = 1 there. Tests the LSTM, its state and its replay.

ProbeContinuous: one step, obs 0, a 1-D action in [-2, 2], reward -(a - 0.5)^2: the Gaussian's mean must
converge to 0.5 and V(0) to minus its variance. Tests the continuous head (log-probs, log-std) end to end.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete


class _Probe(gym.Env):
    metadata = {"render_modes": []}
    n_actions = 1

    def __init__(self, render_mode: str | None = None):
        self.observation_space = Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = Discrete(self.n_actions)
        self.render_mode = render_mode
        self._obs = 0.0

    def _observe(self) -> np.ndarray:
        return np.array([self._obs], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._obs = self._first_obs()
        return self._observe(), {}

    def _first_obs(self) -> float:
        return 0.0


class Probe1(_Probe):
    """Constant observation 0, one action, reward 1, episode of one step."""

    def step(self, action):
        return self._observe(), 1.0, True, False, {}


class Probe2(_Probe):
    """Observation ±1 at random, one action, reward equal to the observation, episode of one step."""

    def _first_obs(self) -> float:
        return float(self.np_random.choice([-1.0, 1.0]))

    def step(self, action):
        return self._observe(), self._obs, True, False, {}


class Probe3(_Probe):
    """Two steps: observation 0 with reward 0, then observation 1 with reward 1."""

    def step(self, action):
        if self._obs == 0.0:
            self._obs = 1.0
            return self._observe(), 0.0, False, False, {}
        return self._observe(), 1.0, True, False, {}


class Probe4(_Probe):
    """Observation 0, two actions: reward +1 for action 1, -1 for action 0, episode of one step."""

    n_actions = 2

    def step(self, action):
        return self._observe(), 1.0 if int(action) == 1 else -1.0, True, False, {}


class Probe5(_Probe):
    """Observation 0 or 1 at random, two actions: reward +1 when the action equals the observation, else -1."""

    n_actions = 2

    def _first_obs(self) -> float:
        return float(self.np_random.integers(2))

    def step(self, action):
        return self._observe(), 1.0 if int(action) == int(self._obs) else -1.0, True, False, {}


class ProbeMemory(_Probe):
    """Memory: observation ±1 at the first of four steps only, then 0; the action at the fourth is paid +1 when it
    is 1 for a first observation of +1 (0 for -1), else -1; nothing is paid before."""

    n_actions = 2
    length = 4

    def _first_obs(self) -> float:
        self.cue, self.t = float(self.np_random.choice([-1.0, 1.0])), 0
        return self.cue

    def step(self, action):
        self.t += 1
        if self.t < self.length:
            self._obs = 0.0
            return self._observe(), 0.0, False, False, {}
        return self._observe(), 1.0 if int(action) == int(self.cue > 0) else -1.0, True, False, {}


class ProbeContinuous(_Probe):
    """Observation 0, one continuous action in [-2, 2], reward -(action - 0.5)^2, episode of one step."""

    target = 0.5

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode)
        self.action_space = Box(-2.0, 2.0, shape=(1,), dtype=np.float32)

    def step(self, action):
        return (
            self._observe(),
            -float((np.asarray(action).reshape(-1)[0] - self.target) ** 2),
            True,
            False,
            {},
        )


class _ImageProbe(gym.Env):
    """A 1x36x36 uint8 image, one half bright (255) and the other dark, at random; one step. The smallest image
    the Nature CNN takes, so that the pixel path trains in seconds."""

    metadata = {"render_modes": []}
    size = 36

    def __init__(self, render_mode: str | None = None):
        self.observation_space = Box(0, 255, shape=(1, self.size, self.size), dtype=np.uint8)
        self.action_space = Discrete(self.n_actions)
        self.render_mode = render_mode
        self.side = 0

    def _image(self) -> np.ndarray:
        image = np.zeros((1, self.size, self.size), dtype=np.uint8)
        half = self.size // 2
        image[:, :, self.side * half : (self.side + 1) * half] = 255
        return image

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.side = int(self.np_random.integers(2))  # 0: the left half is bright, 1: the right half
        return self._image(), {}


class ProbeImageValue(_ImageProbe):
    """One action; reward +1 when the left half is bright, -1 when the right half is: V = +1 or -1 by the image.
    Tests that the value reaches through the CNN to the pixels."""

    n_actions = 1

    def step(self, action):
        return self._image(), 1.0 if self.side == 0 else -1.0, True, False, {}


class ProbeImagePolicy(_ImageProbe):
    """Two actions; reward +1 for the action that names the bright half (0: left, 1: right), else -1.
    Tests that the policy reads the image: pi(side | image) = 1, V = 1."""

    n_actions = 2

    def step(self, action):
        return self._image(), 1.0 if int(action) == self.side else -1.0, True, False, {}


def probe_images() -> np.ndarray:
    """The image probes' two observations, ``(2, 1, 36, 36)`` uint8: left half bright, then right half."""
    env = ProbeImageValue()
    images = []
    for side in (0, 1):
        env.side = side
        images.append(env._image())
    return np.stack(images)


IMAGE_PROBES = {
    "proxima/ProbeImageValue-v0": ProbeImageValue,
    "proxima/ProbeImagePolicy-v0": ProbeImagePolicy,
}

PROBES = {
    f"proxima/Probe{i}-v0": cls for i, cls in enumerate([Probe1, Probe2, Probe3, Probe4, Probe5], start=1)
}
PROBES["proxima/ProbeContinuous-v0"] = ProbeContinuous
PROBES["proxima/ProbeMemory-v0"] = ProbeMemory

for _env_id, _cls in {**PROBES, **IMAGE_PROBES}.items():
    if _env_id not in gym.registry:
        gym.register(_env_id, entry_point=f"{__name__}:{_cls.__name__}")
