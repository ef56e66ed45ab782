"""Diagnose a training log: fit the success-probability distribution and answer section 13.

``read_log`` (:mod:`.io`) -> ``diagnose`` (:mod:`.report`) -> ``plot_diagnosis`` (:mod:`.plot`).
"""

from __future__ import annotations

from .fit import BetaFit, MixtureFit, beta_active_fraction, fit_beta_binomial, fit_npmle
from .io import parse_columns, read_log, read_table, to_groups
from .report import COLUMNS, DEFAULT_GAMMA, DEFAULT_RHO, diagnose

__all__ = [
    "BetaFit",
    "MixtureFit",
    "fit_beta_binomial",
    "fit_npmle",
    "beta_active_fraction",
    "read_log",
    "read_table",
    "to_groups",
    "parse_columns",
    "diagnose",
    "COLUMNS",
    "DEFAULT_RHO",
    "DEFAULT_GAMMA",
]
