"""The algorithm: advantages, losses, the rollout buffer, the update, the optimizer, schedules, the algorithm table."""
