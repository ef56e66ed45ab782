"""Scheme specs until :mod:`fgrpo_theory.schemes` (issue 21) is on this branch.

``get_scheme(spec)`` returns :func:`fgrpo_theory.schemes.parse_scheme` when the registry is
installed, else a small stand-in that knows the convention presets and the focal modifier:
``C``, ``focal:gamma=G`` (on "grpo") and ``C+focal:gamma=G``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import fail

__all__ = ["get_scheme"]


@dataclass(frozen=True)
class _Scheme:
    spec: str
    convention: str
    gamma: float

    binary: bool = False
    needs_logprobs: bool = False

    def advantages(self, rewards: Any, logprobs: Any = None, correct: Any = None) -> Any:
        from .advantages import focal_advantages, group_advantages

        if self.gamma == 0 and correct is None:
            return group_advantages(rewards, self.convention)
        return focal_advantages(
            rewards, self.gamma, self.convention, correct=correct, r_correct=1.0, r_incorrect=0.0
        )

    def tables(
        self, N: int, r_correct: float = 1.0, r_incorrect: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        from .advantages import binary_advantages

        x = np.arange(N + 1)
        a_c, a_w = binary_advantages(x, N, self.convention, r_correct, r_incorrect)
        g = (1.0 - x / N) ** self.gamma
        return np.asarray(g * a_c, dtype=float), np.asarray(g * a_w, dtype=float)


def _fallback(spec: str) -> _Scheme:
    from .advantages import PRESETS

    if not isinstance(spec, str):
        fail("scheme", spec, "a scheme spec such as 'trl+focal:gamma=1'")
    parts = spec.strip().split("+")
    conv, gamma = "grpo", 0.0
    for i, p in enumerate(parts):
        if p in PRESETS and i == 0:
            conv = p
        elif p.startswith("focal") and (i == len(parts) - 1):
            name, _, args = p.partition(":")
            key, _, val = args.partition("=")
            try:
                gamma = float(val) if name == "focal" and key == "gamma" else -1.0
            except ValueError:
                gamma = -1.0
            if not gamma >= 0 or not np.isfinite(gamma):
                fail("scheme", spec, "focal:gamma=G with G >= 0")
        else:
            fail("scheme", spec, "a convention preset, focal:gamma=G or C+focal:gamma=G")
    return _Scheme(spec.strip(), conv, gamma)


def get_scheme(spec: str) -> Any:
    """The scheme object of ``spec`` (the registry's when installed)."""
    try:
        from .schemes import parse_scheme
    except ImportError:
        return _fallback(spec)
    return parse_scheme(spec)
