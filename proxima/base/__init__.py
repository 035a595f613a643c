"""What every layer stands on: user errors, a run directory's files, the trust boundary, spaces as JSON, the random streams' seeds."""
