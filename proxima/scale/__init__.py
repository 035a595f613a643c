"""Many runs and many processes: seed groups, rollout workers, sweeps, tuning, executors, train()."""
