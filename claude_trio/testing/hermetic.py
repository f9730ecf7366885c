"""The environment that runs the real ``claude`` CLI with no key and no network, under the
testing kit's name: it lives in the product, :mod:`claude_trio.offline.hermetic`."""

from claude_trio.offline.hermetic import *  # noqa: F403
from claude_trio.offline.hermetic import __all__ as __all__
