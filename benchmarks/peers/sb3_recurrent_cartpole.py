"""sb3-contrib's RecurrentPPO on CartPole without velocities, with the rl-baselines3-zoo's settings for
CartPoleNoVel-v1, timed the way benchmarks/recurrent.py times proxima: process wall time to the first evaluation
(20 deterministic episodes every 12,800 steps) whose mean reaches 475, or the budget.

Runs in the peers' venv (benchmarks/peers/sb3_contrib.sh), never in proxima's. Prints one JSON line.

    PEERS/sb3/venv/bin/python benchmarks/peers/sb3_recurrent_cartpole.py --seed 1 [--budget 500000]
"""

import argparse
import json
import time

START = time.perf_counter()

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sb3_contrib import RecurrentPPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402


class Positions(gym.ObservationWrapper):
    """CartPole-v1 observed through x and theta only (the zoo's CartPoleNoVel-v1)."""

    def __init__(self, env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[[0, 2]], space.high[[0, 2]], dtype=np.float32)

    def observation(self, observation):
        return observation[[0, 2]]


def linear(start):
    return lambda progress: progress * start


class StopWhenSolved(BaseCallback):
    def __init__(self, every, episodes=20, threshold=475.0):
        super().__init__()
        self.every, self.episodes, self.threshold = every, episodes, threshold
        self.solved_at, self.evals = None, []

    def _on_step(self) -> bool:
        if self.num_timesteps % self.every >= self.training_env.num_envs:
            return True
        score = evaluate(self.model, self.training_env, self.episodes)
        self.evals.append([self.num_timesteps, score])
        if score >= self.threshold:
            self.solved_at = self.num_timesteps
            return False
        return True


def evaluate(model, train_env, episodes):
    env = Positions(gym.make("CartPole-v1"))
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=10_000 + i)
        state, start, total, done = None, np.ones((1,), dtype=bool), 0.0, False
        while not done:
            norm = train_env.normalize_obs(obs[None])
            action, state = model.predict(norm, state=state, episode_start=start, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action[0]))
            start = np.zeros((1,), dtype=bool)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=int, default=500_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=8, seed=args.seed, wrapper_class=Positions))
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8,
        ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2), seed=args.seed, device="cpu",
        policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
                           enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])),
    )  # fmt: skip
    callback = StopWhenSolved(every=12_800)
    model.learn(args.budget, callback=callback)
    print(json.dumps({"peer": "sb3-contrib RecurrentPPO", "seed": args.seed, "solved_at": callback.solved_at,
                      "wall_s": round(time.perf_counter() - START, 1), "evals": callback.evals}))  # fmt: skip


if __name__ == "__main__":
    main()
