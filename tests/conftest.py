import os

# Before torch loads OpenMP, which reads it once: see the Makefile's TEST_ENV (a busy suite's spinning threads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import shutil  # noqa: E402

import gymnasium as gym
import numpy as np
import pytest
import torch

from proxima.envs import Step
from proxima.policy.distributions import CategoricalHead
from proxima.policy.normalization import Normalization


class ScriptedVecEnv:
    """A VecEnv that replays a fixed script of steps, for hand-computed boundary tests."""

    def __init__(self, first_obs, steps, n_actions=2):
        self.num_envs = len(first_obs)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(n_actions)
        self.device = torch.device("cpu")
        self._first = torch.tensor(first_obs, dtype=torch.float32).reshape(-1, 1)
        self._steps = list(steps)
        self.actions_seen = []

    def reset(self, seed=None):
        return self._first.clone()

    def step(self, actions):
        self.actions_seen.append(actions.clone())
        obs, reward, terminated, truncated, final_obs = self._steps.pop(0)
        col = lambda x: torch.tensor(x, dtype=torch.float32).reshape(-1, 1)  # noqa: E731
        return Step(
            col(obs),
            torch.tensor(reward, dtype=torch.float32),
            torch.tensor(terminated),
            torch.tensor(truncated),
            col(final_obs),
        )

    def close(self):
        pass


class IdentityCritic:
    """A stand-in model with V(s) = s[0] and action 0 always: values are known exactly."""

    normalization = Normalization((1,))  # off: the rollout sees raw observations and rewards
    head = CategoricalHead(2)

    def act(self, obs, noise=None):  # noise: the collector's generator, unused by a fixed action
        n = obs.shape[0]
        return torch.zeros(n, dtype=torch.int64), torch.zeros(n), obs[:, 0].clone()

    def value(self, obs):
        return obs[:, 0].clone()


@pytest.fixture
def scripted_env():
    return ScriptedVecEnv


@pytest.fixture
def identity_critic():
    return IdentityCritic()


@pytest.fixture
def one_thread():
    """torch on one thread for this test only: the count changes float sums, and the process keeps it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven by Playwright, for the browser tests (the report page, the docs site)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="the browser tests need Playwright: pip install playwright (the dev extra)",
    )
    executable = chromium()
    if executable is None:
        pytest.skip(
            "no Chromium on PATH: install Debian's with `apt-get install -y chromium` (make test does, as root)"
        )
    with sync_api.sync_playwright() as p:
        # Playwright's own browser builds cannot be downloaded here; Debian's Chromium speaks the same protocol
        launched = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()
