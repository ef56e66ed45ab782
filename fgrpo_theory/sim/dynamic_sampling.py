"""Dynamic sampling: which groups a trainer's filter keeps, by the number of correct rewards.

The filters of DAPO, verl (``filter_groups``) and OpenRLHF on binary rewards, as one table
``keep[X]`` for ``X = 0..N`` correct draws (:func:`ds_keep_table`) that the simulator, the
population model and the planner all read, and the validation of a config's
``dynamic_sampling`` / ``ds_range`` fields. Split from :mod:`fgrpo_theory.sim.config`, which
re-exports these names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import check_scalar, fail

__all__ = ["DS_FILTERS", "DS_RANGE_DEFAULT", "ds_keep_table", "check_dynamic_sampling"]

#: Dynamic-sampling filters (which groups are kept; see ``SimConfig.dynamic_sampling``).
DS_FILTERS = ("off", "dapo", "verl", "openrlhf")
#: OpenRLHF's default ``--algo.dynamic_filtering_range`` (on the success rate X/N).
DS_RANGE_DEFAULT = (0.0, 1.0)


def ds_keep_table(
    dynamic_sampling: str, N: int, ds_range: tuple[float, float] | None = None
) -> np.ndarray:
    """``keep[X]`` for ``X = 0..N`` correct draws: 1 if the dynamic-sampling filter keeps a
    group with ``X`` correct rewards (all ones when ``dynamic_sampling = "off"``).

    The trainers' rules on a binary reward vector (theory.md section 12 for DAPO's): DAPO
    keeps a group whose rewards are not all equal, verl (``filter_groups``) one whose
    population std is > 0 or that has one member, OpenRLHF one whose mean 0/1 reward lies
    strictly inside its range (``ds_range``, default :data:`DS_RANGE_DEFAULT`). The simulator
    and the population model both read this table."""
    X = np.arange(N + 1)
    f = dynamic_sampling
    if f == "off":
        keep = np.ones(N + 1, dtype=bool)
    elif f == "dapo":  # the rewards are not all equal
        keep = (X > 0) & (X < N)
    elif f == "verl":  # population std > 0 (binary rewards: not all equal) or one member
        keep = ((X > 0) & (X < N)) | (N == 1)
    elif f == "openrlhf":  # lo < mean reward < hi, the mean of 0/1 rewards being X/N
        lo, hi = DS_RANGE_DEFAULT if ds_range is None else ds_range
        rate = X / N
        keep = (lo < rate) & (rate < hi)
    else:
        fail("dynamic_sampling", f, "one of " + ", ".join(DS_FILTERS))
    return keep.astype(np.uint8)


def check_dynamic_sampling(value: Any, ds_range: Any) -> tuple[str, tuple[float, float] | None]:
    """Validate a ``dynamic_sampling`` filter name (``True`` / ``False`` map to ``"dapo"`` /
    ``"off"``) and its ``ds_range`` (OpenRLHF only); the pair as stored in a config."""
    ds = "dapo" if value is True or value is np.True_ else value
    ds = "off" if ds is False or ds is np.False_ else ds
    from .config import _as_choice  # config imports this module

    ds = _as_choice("dynamic_sampling", ds, DS_FILTERS)
    if ds_range is not None:
        ds_range = _ds_range(ds_range)
        if ds != "openrlhf":
            fail("ds_range", list(ds_range), "None unless dynamic_sampling = 'openrlhf'")
    return ds, ds_range


def _ds_range(value: Any) -> tuple[float, float]:
    """Validate ``ds_range``: two finite numbers ``lo < hi`` with ``lo < 1`` and ``hi > 0``."""
    if (
        isinstance(value, str)
        or not isinstance(value, list | tuple | np.ndarray)
        or len(value) != 2
    ):
        fail("ds_range", value, "a pair [lo, hi] such as [0.0, 1.0]")
    lo = check_scalar("ds_range", value[0])
    hi = check_scalar("ds_range", value[1])
    if not lo < hi:
        fail("ds_range", [lo, hi], "a pair [lo, hi] with lo < hi")
    if not (lo < 1.0 and hi > 0.0):
        fail("ds_range", [lo, hi], "a range that meets the success rates [0, 1]")
    return (lo, hi)
