"""A try, not a feature: a small CNN over a packed board (an observation part of shape (H, W, C)), for Connect
Four self-play (issue 35's aim against the one-step lookahead player), given to proxima as a user's encoder class:

    PYTHONPATH=benchmarks .venv/bin/proxima train --config connect4-selfplay --encoder board_cnn:BoardCNN \\
        --total-timesteps 2000000 --torch-threads 1 --run-dir runs/c4-cnn
    PYTHONPATH=benchmarks .venv/bin/proxima eval runs/c4-cnn --opponent lookahead --episodes 1000 --deterministic

Three 3x3 same-padding convolutions of 32 channels with ReLU, flattened (32 * H * W features) for the preset's
MLP heads. The journal has what it learned against the MLP the preset uses.
"""

from __future__ import annotations

from torch import Tensor, nn


class BoardCNN(nn.Module):
    channels = 32

    def __init__(self, layout):
        super().__init__()
        part = next(p for p in layout.parts if p.kind == "box" and len(p.shape) == 3)
        self.offset, self.size, self.board = part.offset, part.size, part.shape  # (H, W, C)
        height, width, depth = part.shape
        k = self.channels
        self.net = nn.Sequential(
            nn.Conv2d(depth, k, 3, padding=1), nn.ReLU(),
            nn.Conv2d(k, k, 3, padding=1), nn.ReLU(),
            nn.Conv2d(k, k, 3, padding=1), nn.ReLU(),
            nn.Flatten(),
        )  # fmt: skip
        self.features_dim = k * height * width

    def forward(self, obs: Tensor) -> Tensor:
        board = obs[..., self.offset : self.offset + self.size].float().reshape(-1, *self.board)
        return self.net(board.permute(0, 3, 1, 2))
