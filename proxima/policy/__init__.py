"""The networks: actor-critic, encoders, action distributions, normalization."""
