"""``PPOArgs``: every setting of a PPO run, one typed dataclass whose field docs become ``--help``.

Names and defaults of the seed's fields follow seed 000 (and CleanRL's ppo.py); the fields after them are
proxima's additions. Derived sizes are properties, never written back into the object.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from proxima.errors import UserError


@dataclass
class PPOArgs:
    exp_name: str = "ppo"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True` and torch picks deterministic algorithms"""
    cuda: bool = True
    """if toggled, cuda will be used when a GPU is present (the CPU otherwise)"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "mlab2_ppo"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (into the run directory's `videos` folder)"""
    env_id: str = "CartPole-v1"
    """the id of the environment: any registered Gymnasium id, or module:EnvName-v0 to import module first"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 4
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""

    # proxima's additions
    run_dir: str | None = None
    """where to write the run (default: runs/{env_id}__{exp_name}__{seed}__{unix time})"""
    norm_adv: bool = True
    """toggles per-minibatch advantage normalization"""
    clip_vloss: bool = False
    """toggles the clipped value loss of the PPO paper"""
    anneal_lr: bool = True
    """toggles linear learning-rate annealing to 0 over the run"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL exceeds this (off by default)"""
    async_envs: bool = False
    """run each environment in its own process (Gymnasium's AsyncVectorEnv) instead of in-process"""
    shared_network: bool = False
    """let the actor and critic share one hidden trunk instead of two separate networks"""
    torch_threads: int = 0
    """torch's CPU threads; 0 picks 1 for minibatches under 4096 samples (where threads cost more than they
    save) and torch's default otherwise"""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> PPOArgs:
        """Raise a ``UserError`` naming the first bad value and what is accepted; return self if all is well."""
        positive_ints = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs")
        if self.torch_threads < 0:
            raise UserError(
                f"torch_threads must be 0 (automatic) or a positive integer, got {self.torch_threads}"
            )
        for name in positive_ints:
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be a positive integer, got {getattr(self, name)}")
        for name in ("learning_rate", "clip_coef", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise UserError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("gamma", "gae_lambda"):
            if not 0 < getattr(self, name) <= 1:
                raise UserError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("ent_coef", "vf_coef"):
            if getattr(self, name) < 0:
                raise UserError(f"{name} must be non-negative, got {getattr(self, name)}")
        if self.target_kl is not None and not self.target_kl > 0:
            raise UserError(f"target_kl must be positive when given, got {self.target_kl}")
        if self.batch_size % self.num_minibatches:
            raise UserError(
                f"num_minibatches={self.num_minibatches} does not divide the batch of num_envs x num_steps = "
                f"{self.batch_size}; pick a divisor of {self.batch_size}"
            )
        if self.num_updates < 1:
            raise UserError(
                f"total_timesteps={self.total_timesteps} is less than one batch of num_envs x num_steps = "
                f"{self.batch_size}; give at least {self.batch_size}"
            )
        return self
