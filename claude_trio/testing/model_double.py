"""The Messages API double, under the testing kit's name.

It lives in the product, :mod:`claude_trio.offline.model_double` (the offline model that
``claude-trio serve --offline`` runs is built on it); this module re-exports it, with the
error its ``check()`` raises, for tests that import it from here.
"""

from claude_trio.errors import ModelDoubleRunaway as ModelDoubleRunaway
from claude_trio.offline.model_double import *  # noqa: F403
from claude_trio.offline.model_double import __all__ as _names

__all__ = [*_names, "ModelDoubleRunaway"]
