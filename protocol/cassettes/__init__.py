"""Cassettes: the format, the player and scrubbing (pure)."""
