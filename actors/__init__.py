"""trio actors: one module per actor, wired together by :mod:`.session`."""
