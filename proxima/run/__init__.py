"""One training run: the loop, rollout, callbacks, checkpoints, health checks, logging, evaluation, the settings and the saved agent."""
