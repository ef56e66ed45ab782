"""Independent checks of every closed form of the toolkit (``fgrpo-theory validate``).

Each check compares a closed form with an oracle that does not share its code:

- ``monte_carlo``: sampling groups with NumPy's generator (fixed seeds). The row gives the Monte
  Carlo estimate, its standard error ``stderr`` (for a probability p0: sqrt(p0 (1 - p0) / n) under
  the closed form; for a mean: the sample standard deviation over sqrt(n)) and
  ``z = (estimate - closed_form) / stderr``; the
  check passes when ``|z| <= Z_CRIT`` (= 4). With a few dozen such checks, the chance that a correct
  closed form fails any of them is below 0.3 % (two-sided normal tail 6.3e-5 per check); seeds are
  fixed, so the table is the same on every run. If the estimate has zero variance (a probability
  estimated as exactly 0 or 1), the check passes only when the closed form equals it to 1e-12.
- ``enumeration`` / ``quadrature`` / ``scan`` / ``mpmath``: deterministic oracles (exact sums over
  all outcomes, ``scipy.integrate.quad``, brute-force argmax, 50-digit arithmetic). ``stderr`` is 0
  and the check passes when ``|estimate - closed_form| <= tolerance`` (stated per row, a relative
  tolerance times ``max(1, |closed_form|)``); ``z`` is the error in units of that tolerance.

:func:`run_validation` returns one row per check; ``quick=True`` uses fewer Monte Carlo samples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._closed import _checks_advantages, _checks_modes, _checks_passk, _checks_tail_miss
from ._mass import _checks_mass
from ._rows import (  # noqa: F401  (the row helpers are part of the tests' interface)
    BASE_SEED,
    Z_CRIT,
    CheckRow,
    _exact_row,
    _mc_prop_row,
    _mc_row,
    monte_carlo_region_counts,
    monte_carlo_tail_miss,
)
from ._schemes import _checks_schemes

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Z_CRIT",
    "CheckRow",
    "monte_carlo_region_counts",
    "monte_carlo_tail_miss",
    "run_validation",
]


#: Check groups in run order: (name, function of the Monte Carlo sample count).
CHECKS: list[tuple[str, Callable[[int], list[CheckRow]]]] = [
    ("tail_miss", _checks_tail_miss),
    ("modes", _checks_modes),
    ("advantages", _checks_advantages),
    ("passk", _checks_passk),
    ("mass", _checks_mass),
    ("schemes", _checks_schemes),
]


def run_validation(quick: bool = False) -> pd.DataFrame:
    """Run every check; return a DataFrame with one row per check.

    Parameters
    ----------
    quick : bool
        Fewer Monte Carlo samples (20,000 per check instead of 400,000).

    Returns
    -------
    pandas.DataFrame
        Columns ``group, quantity, parameters, method, closed_form, estimate, stderr, z,
        tolerance, passed`` (see the module docstring for the pass rules).
    """
    import pandas as pd

    reps = 20_000 if quick else 400_000
    records = []
    for group, fn in CHECKS:
        for row in fn(reps):
            records.append({"group": group, **row.__dict__})
    return pd.DataFrame.from_records(records)
