"""Group-relative advantages, their trainer conventions, and the focal weight of F-GRPO.

The focal variant (section 4) multiplies the finished advantage of a whole group by
g = (1 - mu_hat)^gamma (P-12), mu_hat the group's success rate (P-11), giving A_F = g * A (P-13).

Modules: :mod:`.conventions` (the presets table and :class:`AdvantageConvention`), :mod:`.group`
(array-API functions: NumPy arrays or torch tensors of shape [groups, N] in, the same type out),
:mod:`.closed_form` (binary-group closed forms and learning-rate multipliers). Every public name is
importable from ``fgrpo_theory.advantages``.
"""

from __future__ import annotations

from . import closed_form, conventions, group
from .closed_form import *  # noqa: F403
from .conventions import *  # noqa: F403
from .group import *  # noqa: F403

# Every module's public names, each written once (in its module's ``__all__``).
__all__: list[str] = []
__all__ += conventions.__all__
__all__ += group.__all__
__all__ += closed_form.__all__
