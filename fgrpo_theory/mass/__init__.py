"""Mass redistribution inside the correct set of a softmax policy (package being split)."""

from .expectation import *  # noqa: F403
from .expectation import MAX_ENUMERATION, __all__  # noqa: F401
