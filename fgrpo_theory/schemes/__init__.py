"""Training schemes: every remedy in one registry (theory.md section 15).

A scheme says how a group of rollouts becomes the update: an advantage term (every convention
preset of :mod:`fgrpo_theory.advantages`, MaxRL, W-REINFORCE / PSR / NSR, PKPO, ...), an
optional focal weight (F-GRPO, P-12/P-13) and optional regularizers (entropy bonus, KL penalty).
One spec grammar names a scheme everywhere (library, ``--scheme``, config files)::

    >>> from fgrpo_theory.schemes import parse_scheme
    >>> s = parse_scheme("trl+focal:gamma=0.5")
    >>> s.tables(4, 1.0, 0.0)[0]            # a_c(X), X = 0..4     # doctest: +SKIP
    >>> s.advantages(rewards_tensor)        # [groups, N] torch or NumPy in, same type out

Modules: :mod:`.base` (the spec grammar, :class:`Scheme`), :mod:`.catalog` (the registry
``SCHEMES``), :mod:`.tables` (per-X tables of the binary group schemes), :mod:`.arrays` (the
array-API advantages), :mod:`.regularizers` (exact entropy and KL terms on a softmax, the k3
estimator), :mod:`.theory` (section 15: difficulty profile H, implied objective F, pass@k
weights, learning-rate multiplier), :mod:`.report` (their tidy tables, ``scheme list``).
"""

from __future__ import annotations

from .base import MAX_SPEC_CHARS, Param, Scheme, SchemeDef, Term, parse_scheme, scheme_from_fields
from .catalog import SCHEMES
from .regularizers import entropy_term, k3_estimate, k3_logp_gradient, kl_term
from .report import scheme_catalog, scheme_profile_table
from .theory import (
    Beta,
    difficulty_profile,
    implied_objective,
    passk_weights,
    scheme_lr_multiplier,
)

__all__ = [
    "SCHEMES",
    "MAX_SPEC_CHARS",
    "Param",
    "Scheme",
    "SchemeDef",
    "Term",
    "parse_scheme",
    "scheme_from_fields",
    "entropy_term",
    "kl_term",
    "k3_estimate",
    "k3_logp_gradient",
    "Beta",
    "difficulty_profile",
    "implied_objective",
    "passk_weights",
    "scheme_lr_multiplier",
    "scheme_catalog",
    "scheme_profile_table",
]
