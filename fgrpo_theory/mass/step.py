"""One update of one group: the validated step specification, the logit step and its effects.

:class:`StepSpec` is the one place where the update rule, step size, focal exponent, rewards and
advantage convention are checked; :func:`logit_step`, :func:`one_step`,
:func:`~fgrpo_theory.mass.expected_change` and :func:`~fgrpo_theory.mass.expected_logprob_drift`
each build one and pass it on. The rules (each step optionally multiplied by the focal weight
g = (1 - X/N)^gamma of the group, P-12, X the number of correct draws):

``"theory"``
    The linear surrogate of section 2.3 on the DISTINCT sampled actions (P-5), unsampled actions
    having reward 0: ``dz_i = (lr/N) p_i (R_i - S_R)``. The first-order formulas P-17 (total
    correct mass) and P-10 (Proposition 3.2, unsampled correct mass) describe THIS rule only.
``"linear"``
    The paper's simulation surrogate (appendix J): every draw j gets an advantage ``adv_j``
    (default convention ``"dr-grpo"``, ``adv_j = R_j - mean R``) and the objective is
    ``(1/N) sum_j adv_j p(a_j)``, whose gradient is
    ``dz_k = (lr/N) p_k (n_k adv(k) - sum_i n_i adv(i) p_i)`` (n_k = count of action k).
``"logprob"``
    The policy gradient of ``(1/N) sum_j A_j log p(a_j)`` with any advantage convention (default
    ``"grpo"``, P-3): ``dz_k = (lr/N) n_k A(k)``; unsampled logits do not move.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import check_rewards, check_scalar, fail
from ..advantages import PRESETS, AdvantageConvention, get_convention
from ._engine import dense_atoms, evaluate, statistics, step
from .groups import Group
from .softmax import (
    exact_prob_change,
    exact_subset_change,
    prob_change_first_order,
    subset_change_first_order,
)
from .statistics import GroupStatistics

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RULES",
    "QUANTITIES",
    "REFERENCES",
    "StepSpec",
    "logit_step",
    "OneStepResult",
    "one_step",
]

#: Names of the update rules of :func:`logit_step`.
RULES = ("theory", "linear", "logprob")

#: Default advantage convention of each rule that uses one.
DEFAULT_ADVANTAGE = {"linear": "dr-grpo", "logprob": "grpo"}

#: Where each quantity comes from: equation and meaning (for tables).
REFERENCES: dict[str, str] = {
    "X": "number of correct draws",
    "n_distinct": "number of distinct sampled actions",
    "g": "focal weight (1 - X/N)^gamma (P-12)",
    "Q_pos": "correct mass sum_C p (P-2)",
    "Q_neg": "incorrect mass 1 - Q_pos",
    "P_pos": "sampled correct mass sum_A p",
    "P_neg": "sampled incorrect mass sum_B p",
    "Q_u": "unsampled correct mass Q_pos - P_pos (P-9)",
    "A2": "sum_A p^2",
    "B2": "sum_B p^2",
    "U_pos2": "sum of p^2 over unsampled correct",
    "U_neg2": "sum of p^2 over unsampled incorrect",
    "U2": "sum of p^2 over unsampled",
    "S_R": "batch baseline R_c P_pos + R_w P_neg",
    "dq_pos_first_order": "first-order dQ_pos (theory: P-17; other rules: P-19 on C)",
    "dq_pos_sampled_correct": "dQ_pos term from A: Q_neg sum_A p dz = (lr/N)(R_c-S_R) Q_neg A2",
    "dq_pos_sampled_incorrect": "dQ_pos term from B: -Q_pos sum_B p dz = (lr/N)(S_R-R_w) Q_pos B2",
    "dq_pos_unsampled": "dQ_pos term from U: (lr/N) S_R (Q_pos U_neg2 - Q_neg U_pos2)",
    "dq_pos_exact": "exact dQ_pos after the softmax is recomputed",
    "dq_unsampled_correct_first_order": "first-order dQ_u (theory: P-10; other rules: P-19)",
    "direct_drift": "dQ_u direct drift sum_U+ p dz = -(lr/N) S_R U_pos2 (P-10)",
    "coupling": "dQ_u normalization coupling -Q_u sum p dz (P-10)",
    "dq_unsampled_correct_exact": "exact dQ_u after the softmax is recomputed",
    "dq_sampled_correct_first_order": "first-order dP_pos (P-19 on A)",
    "dq_sampled_correct_exact": "exact dP_pos after the softmax is recomputed",
}

#: Per-group quantities that :func:`~fgrpo_theory.mass.expected_change` can average (fields of
#: :class:`GroupStatistics` and :class:`OneStepResult`), in the order of :data:`REFERENCES`.
QUANTITIES = tuple(REFERENCES)


@dataclass(frozen=True)
class StepSpec:
    """One update, validated once: rule, step size, focal exponent, rewards, advantage.

    Parameters
    ----------
    rule : {"theory", "linear", "logprob"}
        Update rule (see the module docstring).
    lr : float
        Step size lr (eta in the paper), > 0.
    gamma : float
        Focal exponent >= 0; the step is multiplied by g = (1 - X/N)^gamma (P-12).
    r_correct, r_incorrect : float
        Rewards R_c > R_w (default +1, -1 as in the categorical simulation).
    advantage : str or AdvantageConvention, optional
        Advantage convention (a preset name of :data:`fgrpo_theory.advantages.PRESETS` or a
        convention object) for "linear" (default "dr-grpo": A = R - mean R) and "logprob"
        (default "grpo"); must be None for "theory". After construction it holds the resolved
        :class:`~fgrpo_theory.advantages.AdvantageConvention` (None for "theory").

    Raises
    ------
    ValueError
        Naming the first bad argument and its value.
    """

    rule: str = "theory"
    lr: float = 1e-2
    gamma: float = 0.0
    r_correct: float = 1.0
    r_incorrect: float = -1.0
    advantage: str | AdvantageConvention | None = None

    def __post_init__(self) -> None:
        rule = self.rule
        if not isinstance(rule, str) or rule not in RULES:
            fail("rule", rule, "one of " + ", ".join(repr(r) for r in RULES))
        adv = self.advantage
        if rule == "theory":
            if adv is not None:
                fail(
                    "advantage",
                    adv if isinstance(adv, str) else getattr(adv, "name", adv),
                    "None for rule 'theory' (it uses raw rewards and the batch baseline S_R)",
                )
            conv = None
        else:
            if isinstance(adv, str) and adv not in PRESETS:
                fail("advantage", adv, "one of " + ", ".join(repr(k) for k in PRESETS))
            if not (adv is None or isinstance(adv, (str, AdvantageConvention))):
                fail("advantage", type(adv).__name__, "a preset name or an AdvantageConvention")
            conv = get_convention(DEFAULT_ADVANTAGE[rule] if adv is None else adv)
        set_ = object.__setattr__
        set_(self, "lr", check_scalar("lr", self.lr, lo=0.0, lo_open=True))
        set_(self, "gamma", check_scalar("gamma", self.gamma, lo=0.0))
        rc, rw = check_rewards(self.r_correct, self.r_incorrect)
        set_(self, "r_correct", rc)
        set_(self, "r_incorrect", rw)
        set_(self, "advantage", conv)

    @property
    def advantage_name(self) -> str | None:
        """Name of the advantage convention (None for the theory rule)."""
        return None if self.advantage is None else self.advantage.name


def logit_step(
    logits: ArrayLike,
    correct: ArrayLike,
    group: Group,
    lr: float,
    rule: str = "theory",
    *,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    gamma: float = 0.0,
    advantage: str | AdvantageConvention | None = None,
) -> np.ndarray:
    """Logit change ``dz`` of one update on one group (P-5 for the theory rule).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    group : Group
    lr : float
        Step size lr (eta in the paper), > 0.
    rule, r_correct, r_incorrect, gamma, advantage
        See :class:`StepSpec`.

    Returns
    -------
    numpy.ndarray, shape (K,)
    """
    spec = StepSpec(rule, lr, gamma, r_correct, r_incorrect, advantage)
    p, w, n, corr = dense_atoms(logits, correct, group)
    stats = statistics(p, w, n, corr, group.N, spec.r_correct, spec.r_incorrect)
    return step(p, w, n, corr, stats, spec)[0]


@dataclass(frozen=True)
class OneStepResult:
    """Decomposition of one update on one group: first-order and exact changes.

    Attributes
    ----------
    rule : str
        Update rule.
    lr, gamma : float
        Step size lr (eta in the paper) and focal exponent.
    advantage : str or None
        Name of the advantage convention (None for the theory rule).
    g : float
        Focal weight of the group (1 for gamma = 0).
    stats : GroupStatistics
        Section 5 statistics of the group.
    first_order_source : str
        "P-17/P-10" for the theory rule (closed forms), "P-19" for the others (from their dz).
    dq_pos_first_order, dq_pos_exact : float
        Change of the total correct mass Q_pos, first order and exact.
    dq_pos_sampled_correct, dq_pos_sampled_incorrect, dq_pos_unsampled : float
        The three terms of dq_pos_first_order (P-17's terms for the theory rule).
    dq_unsampled_correct_first_order, dq_unsampled_correct_exact : float
        Change of the unsampled correct mass Q_u (P-10 for the theory rule), first order and exact.
    direct_drift, coupling : float
        The two terms of dq_unsampled_correct_first_order.
    dq_sampled_correct_first_order, dq_sampled_correct_exact : float
        Change of the sampled correct mass P_pos.
    dz : numpy.ndarray, shape (K,)
        The rule's logit change.
    probs : numpy.ndarray, shape (K,)
        Probabilities before the update. Methods :meth:`dp_first_order` (P-18),
        :meth:`dp_exact` and :meth:`subset_change` (P-19 and exact) use both.
    """

    rule: str
    lr: float
    gamma: float
    advantage: str | None
    g: float
    stats: GroupStatistics
    first_order_source: str
    dq_pos_first_order: float
    dq_pos_sampled_correct: float
    dq_pos_sampled_incorrect: float
    dq_pos_unsampled: float
    dq_pos_exact: float
    dq_unsampled_correct_first_order: float
    direct_drift: float
    coupling: float
    dq_unsampled_correct_exact: float
    dq_sampled_correct_first_order: float
    dq_sampled_correct_exact: float
    dz: np.ndarray = field(repr=False, compare=False)
    probs: np.ndarray = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Scalar fields and the statistics, flattened into one dict (arrays left out)."""
        d: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "stats":
                d.update(self.stats.as_dict())
            elif f.name not in ("dz", "probs"):
                d[f.name] = getattr(self, f.name)
        return d

    def dp_first_order(self) -> np.ndarray:
        """First-order change of every probability (P-18), shape (K,)."""
        return prob_change_first_order(self.probs, self.dz)

    def dp_exact(self) -> np.ndarray:
        """Exact change of every probability after the softmax is recomputed, shape (K,)."""
        return exact_prob_change(self.probs, self.dz)

    def subset_change(self, mask: ArrayLike) -> tuple[float, float]:
        """First-order (P-19) and exact change of the mass of any subset of actions.

        Parameters
        ----------
        mask : array_like of bool, shape (K,)

        Returns
        -------
        first_order, exact : float
        """
        return (
            float(subset_change_first_order(self.probs, self.dz, mask)),
            float(exact_subset_change(self.probs, self.dz, mask)),
        )

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame of :meth:`as_dict`."""
        import pandas as pd

        return pd.DataFrame([self.as_dict()])


def one_step(
    logits: ArrayLike,
    correct: ArrayLike,
    group: Group,
    lr: float,
    rule: str = "theory",
    *,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    gamma: float = 0.0,
    advantage: str | AdvantageConvention | None = None,
) -> OneStepResult:
    """First-order and exact changes of Q_pos, Q_u and P_pos after one update on one group.

    For the theory rule the first-order changes are the closed forms P-17 and P-10 (Proposition
    3.2); for "linear" and "logprob" they are P-19 applied to the rule's ``dz``, split into the
    same terms. Exact changes recompute the softmax. Works for K = 128,000 actions (O(K) memory).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    group : Group
        The sampled group, e.g. from :func:`~fgrpo_theory.mass.sample_group` or
        :func:`~fgrpo_theory.mass.make_group`.
    lr : float
        Step size lr (eta in the paper), > 0.
    rule, r_correct, r_incorrect, gamma, advantage
        See :class:`StepSpec`.

    Returns
    -------
    OneStepResult

    Examples
    --------
    >>> from fgrpo_theory.policy import paper_policy
    >>> from fgrpo_theory.mass import sample_group
    >>> z, c = paper_policy()
    >>> r = one_step(z, c, sample_group(z, 8, seed=0), lr=1e-2)
    >>> abs(r.dq_pos_first_order - r.dq_pos_exact) < 1e-15
    True
    """
    spec = StepSpec(rule, lr, gamma, r_correct, r_incorrect, advantage)
    p, w, n, corr = dense_atoms(logits, correct, group)
    values, stats, dz = evaluate(p, w, n, corr, group.N, spec)
    scalars = {k: float(v) for k, v in values.items()}
    stat_names = {f.name for f in fields(GroupStatistics)}
    return OneStepResult(
        rule=spec.rule,
        lr=spec.lr,
        gamma=spec.gamma,
        advantage=spec.advantage_name,
        g=scalars["g"],
        stats=GroupStatistics(**stats.as_dict()),
        first_order_source="P-17/P-10" if spec.rule == "theory" else "P-19",
        dz=dz,
        probs=p,
        **{k: scalars[k] for k in QUANTITIES if k not in stat_names and k != "g"},
    )
