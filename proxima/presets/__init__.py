"""Shipped presets: JSON objects of ``PPOArgs`` fields (plus a ``description``), selected by ``--config NAME``."""
