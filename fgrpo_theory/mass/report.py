"""The tidy table of the ``mass`` command: one group's decomposition and its expectations.

:func:`mass_report` is what ``fgrpo-theory mass`` prints, as a DataFrame with columns
``scope, quantity, value, stderr, method, n`` (scope "policy", "group" or "expected"), so that a
notebook gets the same numbers as the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import check_int_array, fail
from ..advantages import AdvantageConvention
from ..policy import check_policy
from ._checks import check_N
from .closed_forms import expected_logprob_drift, expected_unsampled_square_mass
from .expectation import expected_change, resolve_method
from .groups import Group, make_group, sample_group
from .step import QUANTITIES, StepSpec, one_step

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REPORT_QUANTITIES", "mass_report"]

#: The one-step changes the group rows show, in row order, with their source for the theory
#: rule (the other rules' first-order rows come from P-19 of their own step).
_CHANGES = (
    ("dq_pos_sampled_correct", "P-17"),
    ("dq_pos_sampled_incorrect", "P-17"),
    ("dq_pos_unsampled", "P-17"),
    ("dq_pos_first_order", "P-17"),
    ("dq_pos_exact", "exact"),
    ("direct_drift", "P-10"),
    ("coupling", "P-10"),
    ("dq_unsampled_correct_first_order", "P-10"),
    ("dq_unsampled_correct_exact", "exact"),
)

#: Group-level quantities whose expectation :func:`mass_report` reports: the changes its group
#: rows show (in the order of :data:`~fgrpo_theory.mass.QUANTITIES`), then S_R and U2.
REPORT_QUANTITIES = (*(q for q in QUANTITIES if q in dict(_CHANGES)), "S_R", "U2")


def mass_report(
    logits: ArrayLike,
    correct: ArrayLike,
    *,
    N: int | None = None,
    group: Group | tuple[ArrayLike, ArrayLike] | None = None,
    lr: float = 1e-2,
    rule: str = "theory",
    gamma: float = 0.0,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    advantage: str | AdvantageConvention | None = None,
    method: str = "auto",
    samples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Decompose one update on one group and its expectation over the group draw, as a table.

    Rows: the policy (K, n_correct, mu); the group's section-5 statistics and focal weight g; the
    first-order change of Q_pos in its three terms and of Q_u in direct drift and coupling (P-17
    and P-10 for the theory rule, P-19 of the rule's step otherwise) next to the exact changes;
    the expectations of :data:`REPORT_QUANTITIES` over the group draw
    (:func:`~fgrpo_theory.mass.expected_change`), the closed-form E[U2]; for the logprob rule
    the section-6 drift (h, E[dQ_pos], threshold, number of correct actions losing mass).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
        Mask of the correct actions.
    N : int, optional
        Group size in [1, 2**20] (default 8, or the size of ``group``).
    group : Group or (actions, counts), optional
        The group to decompose (distinct 0-based actions and their counts); default: sampled.
    lr, rule, gamma, r_correct, r_incorrect, advantage
        See :class:`~fgrpo_theory.mass.StepSpec`.
    method, samples
        See :func:`~fgrpo_theory.mass.expected_change` (work bounded before it starts).
    seed : int
        Seed >= 0; ``numpy.random.SeedSequence(seed).spawn(2)`` seeds the sampled group and the
        Monte Carlo expectation.

    Returns
    -------
    pandas.DataFrame
        Columns ``scope, quantity, value, stderr, method, n``; ``attrs`` holds the resolved
        ``rule, advantage, N, lr, gamma, r_correct, r_incorrect``.
    """
    import pandas as pd

    spec = StepSpec(rule, lr, gamma, r_correct, r_incorrect, advantage)
    n_given = None if N is None else check_N(N)
    samples = int(check_int_array("samples", samples, lo=2))
    seed = int(check_int_array("seed", seed, lo=0))
    z, c = check_policy(logits, correct)
    if group is not None:
        if not isinstance(group, Group):
            if not isinstance(group, tuple) or len(group) != 2:
                fail("group", type(group).__name__, "a Group or a pair (actions, counts)")
            group = make_group(group[0], group[1], n_actions=z.size, name="group")
        if n_given is not None and n_given != group.N:
            fail("N", n_given, f"equal to the size of group ({group.N}) or left out")
        n_size = check_N(group.N, name="group size")
    else:
        n_size = 8 if n_given is None else n_given
    resolve_method(z.size, n_size, method, samples)  # refuse too much work before any
    seeds = np.random.SeedSequence(seed).spawn(2)
    if group is None:
        group = sample_group(z, n_size, seed=np.random.default_rng(seeds[0]))
    kw: dict[str, Any] = dict(
        rule=spec.rule,
        r_correct=spec.r_correct,
        r_incorrect=spec.r_incorrect,
        gamma=spec.gamma,
        advantage=spec.advantage,
    )
    res = one_step(z, c, group, spec.lr, **kw)
    exp = expected_change(
        z,
        c,
        n_size,
        spec.lr,
        REPORT_QUANTITIES,
        method=method,
        samples=samples,
        seed=np.random.default_rng(seeds[1]),
        **kw,
    )
    rows: list[dict[str, Any]] = []

    def add(scope: str, quantity: str, value: float, how: str, count: int, se: float = 0.0) -> None:
        rows.append(
            {
                "scope": scope,
                "quantity": quantity,
                "value": float(value),
                "stderr": float(se),
                "method": how,
                "n": int(count),
            }
        )

    add("policy", "K", z.size, "input", 0)
    add("policy", "n_correct", int(c.sum()), "input", 0)
    add("policy", "mu", res.stats.Q_pos, "input", 0)
    stats = res.stats.as_dict()
    for key in ("N", "X", "n_distinct"):
        add("group", key, stats[key], "statistic", 1)
    add("group", "g", res.g, "statistic", 1)
    for key in ("P_pos", "P_neg", "Q_u", "A2", "B2", "U_pos2", "U_neg2", "U2", "S_R"):
        add("group", key, stats[key], "statistic", 1)
    theory = spec.rule == "theory"
    values = res.as_dict()
    for key, how in _CHANGES:
        add("group", key, values[key], how if theory or how == "exact" else "P-19", 1)
    count = exp.n_outcomes if exp.method == "enumeration" else exp.n_samples
    for key in REPORT_QUANTITIES:
        add("expected", key, exp.mean[key], exp.method, count, exp.stderr[key])
    add("expected", "U2", expected_unsampled_square_mass(z, n_size), "closed form", 0)
    if spec.rule == "logprob" and not c.all():
        drift = expected_logprob_drift(
            z,
            c,
            n_size,
            spec.lr,
            spec.gamma,
            spec.advantage,
            r_correct=spec.r_correct,
            r_incorrect=spec.r_incorrect,
        )
        add("expected", "h", drift.h, "section 6", 0)
        add("expected", "dq_pos_first_order", drift.expected_dmu, "section 6", 0)
        if drift.threshold_prob is not None:
            add("expected", "loss_threshold_p", drift.threshold_prob, "section 6", 0)
        add("expected", "n_correct_losing", drift.n_correct_losing, "section 6", 0)
    df = pd.DataFrame(rows)
    df.attrs.update(
        rule=spec.rule,
        advantage=spec.advantage_name,
        N=n_size,
        lr=spec.lr,
        gamma=spec.gamma,
        r_correct=spec.r_correct,
        r_incorrect=spec.r_incorrect,
    )
    return df
