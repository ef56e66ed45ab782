"""Group-relative advantages, their trainer conventions, and the focal weight of F-GRPO.

The focal variant (section 4) multiplies the finished advantage of a whole group by
g = (1 - mu_hat)^gamma (P-12), mu_hat the group's success rate (P-11), giving A_F = g * A (P-13).

Modules: :mod:`.conventions` (the presets table and :class:`AdvantageConvention`), :mod:`.group`
(array-API functions: NumPy arrays or torch tensors of shape [groups, N] in, the same type out),
:mod:`.closed_form` (binary-group closed forms and learning-rate multipliers). Every public name is
importable from ``fgrpo_theory.advantages``.
"""

from __future__ import annotations

from .closed_form import (
    MAX_ENUMERATION,
    MAX_GAMMA,
    binary_advantages,
    effective_lr_multiplier,
    lr_multiplier,
    weighted_magnitudes,
)
from .conventions import PRESETS, AdvantageConvention, get_convention
from .group import focal_advantages, focal_weight, group_advantages

__all__ = [
    "AdvantageConvention",
    "PRESETS",
    "get_convention",
    "group_advantages",
    "binary_advantages",
    "focal_weight",
    "focal_advantages",
    "weighted_magnitudes",
    "lr_multiplier",
    "effective_lr_multiplier",
    "MAX_GAMMA",
    "MAX_ENUMERATION",
]
