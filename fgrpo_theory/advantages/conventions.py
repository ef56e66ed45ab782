"""Advantage conventions: every detail of (P-3) the paper leaves open, and the trainers' presets.

A group of N rollouts of one prompt gets rewards R_1..R_N; every group-relative method turns them
into advantages by subtracting a group baseline and (optionally) dividing by a scale. The paper's
GRPO advantage is (P-3)

    A_i = (R_i - mean R) / (std R + eps),     a group with equal rewards gets A = 0,

without saying whether "std" is the population or the sample (Bessel) standard deviation. Public
trainers differ in exactly these details, so each is a field of :class:`AdvantageConvention` and
:data:`PRESETS` holds the combinations that reproduce them (theory.md section 3; the trainers'
source read for this table: TRL ``GRPOTrainer._generate_and_score_completions`` and
``RLOOTrainer`` at v0.24-v0.26, verl ``verl/trainer/ppo/core_algos.py`` at v0.6-v0.7 (main,
2025-11), OpenRLHF ``experience_maker.py`` at v0.8):

===============  ==========  ======  ========================  ==========  ====================
preset           std         scope   divisor D                 flat group  group of one
===============  ==========  ======  ========================  ==========  ====================
grpo             population  group   std                       A = 0       A = 0
grpo-bessel      Bessel      group   std                       A = 0       A = 0
trl              Bessel      group   std + 1e-4                A = 0       A = 0
trl-batch        Bessel      batch   std(batch) + 1e-4         A = 0       A = 0
verl             Bessel      group   std + 1e-6                A = 0       A = r / (1 + 1e-6)
verl-vectorized  Bessel      group   sqrt(max(var, 1e-6))      A = 0       A = r / (1 + 1e-6)
                                     + 1e-6
openrlhf         Bessel      group   std + 1e-9                A = 0       refused (ValueError)
dr-grpo          none        -       1                         A = 0       A = 0
verl-dr-grpo     none        -       1                         A = 0       A = r
rloo             none (LOO)  -       1                         A = 0       refused (ValueError)
verl-rloo        none (LOO)  -       1                         A = 0       A = r
trl-rloo         none (LOO)  -       1                         A = 0       A = 0
===============  ==========  ======  ========================  ==========  ====================

- "dr-grpo" is the mean-centred advantage A = R - mean R; it is also the paper's categorical
  simulation (appendix J), formerly the separate preset "paper-sim" (removed: identical).
- "rloo" uses the leave-one-out baseline A_i = R_i - mean_{j != i} R_j = N/(N-1) (R_i - mean R).
- "trl-batch" is TRL's ``scale_rewards="batch"``: group mean, but the Bessel std of every reward
  in the batch (here: of the whole input array) + 1e-4.
- "verl-vectorized" is verl's ``grpo_vectorized`` estimator: the Bessel variance is floored at
  1e-6 before the square root, then 1e-6 is added (``var_floor=1e-6, eps=1e-6``).
- Groups of one: verl (Dr.GRPO mode ``norm_adv_by_std_in_grpo=False`` and RLOO) sets the baseline
  of a lone rollout to 0, so A = r; TRL's RLOO gives 0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from .._validate import check_scalar, fail

__all__ = ["AdvantageConvention", "PRESETS", "get_convention"]

StdKind = Literal["population", "bessel", "none"]
EpsMode = Literal["add", "floor"]
Baseline = Literal["mean", "loo"]
Scope = Literal["group", "batch"]
ZeroVariance = Literal["zero", "formula"]
GroupOfOne = Literal["zero", "raw", "raise"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "std": ("population", "bessel", "none"),
    "eps_mode": ("add", "floor"),
    "baseline": ("mean", "loo"),
    "scale_scope": ("group", "batch"),
    "zero_variance": ("zero", "formula"),
    "group_of_one": ("zero", "raw", "raise"),
}


@dataclass(frozen=True)
class AdvantageConvention:
    """How a group of rewards becomes advantages (every detail the paper leaves open).

    The advantage of rollout i in a group of N >= 2 is

        A_i = s_b * (R_i - mean R) / D,

    with s_b = 1 for ``baseline="mean"`` and s_b = N/(N-1) for ``baseline="loo"`` (RLOO), and the
    scale D = 1 for ``std="none"``, otherwise D = s + eps (``eps_mode="add"``) or max(s, eps)
    (``eps_mode="floor"``), where s = sqrt(max(var, var_floor)) and var is the population (divide
    by N) or Bessel (divide by N-1) variance of the group's rewards (``scale_scope="group"``) or
    of every reward of the batch (``scale_scope="batch"``, TRL's ``scale_rewards="batch"``).

    Attributes
    ----------
    name : str
        Label for tables and error messages.
    std : {"population", "bessel", "none"}
        Which standard deviation divides the centred reward; ``"none"`` divides by 1.
    eps : float
        Non-negative stabilizer of the divisor.
    eps_mode : {"add", "floor"}
        ``"add"``: divide by s + eps (TRL, verl, OpenRLHF); ``"floor"``: by max(s, eps).
    baseline : {"mean", "loo"}
        Group mean, or leave-one-out mean of the other N-1 rewards (RLOO).
    var_floor : float
        Non-negative floor of the variance before the square root (verl ``grpo_vectorized``).
    scale_scope : {"group", "batch"}
        Whether the std is the group's or the whole batch's (the baseline is always the group's).
    zero_variance : {"zero", "formula"}
        A group whose rewards are all equal has centred rewards exactly 0. ``"zero"``: its
        advantages are 0. ``"formula"``: 0 / D, a ValueError when D = 0 instead of a silent NaN.
    group_of_one : {"zero", "raw", "raise"}
        A group of size 1: A = 0; or, as verl does, mean 0 and std 1, so A = R / D with s := 1
        (``"raw"``; A = R when ``std="none"``); or refuse with a ValueError (OpenRLHF).
    """

    name: str = "custom"
    std: StdKind = "population"
    eps: float = 0.0
    eps_mode: EpsMode = "add"
    baseline: Baseline = "mean"
    zero_variance: ZeroVariance = "zero"
    group_of_one: GroupOfOne = "zero"
    var_floor: float = 0.0
    scale_scope: Scope = "group"

    def __post_init__(self) -> None:
        for field, choices in _CHOICES.items():
            value = getattr(self, field)
            if value not in choices:
                fail(field, value, "one of " + ", ".join(repr(c) for c in choices))
        check_scalar("eps", self.eps, lo=0)
        check_scalar("var_floor", self.var_floor, lo=0)

    def divisor(self, std: Any, xp: Any = None) -> Any:
        """The scale D that divides the centred rewards, given the (unfloored) std s.

        ``std`` is a float or an array of namespace ``xp`` (NumPy when omitted); the variance
        floor is applied as s := sqrt(max(s^2, var_floor)).
        """
        if xp is None:
            import numpy as xp  # noqa: N813
        scalar = isinstance(std, int | float)
        if self.std == "none":
            return 1.0 if scalar else xp.ones_like(std)
        if self.var_floor > 0:
            if scalar:
                std = max(std * std, self.var_floor) ** 0.5
            else:
                std = xp.sqrt(xp.maximum(std * std, xp.full_like(std, self.var_floor)))
        if self.eps_mode == "add":
            return std + self.eps
        if scalar:
            return max(std, self.eps)
        return xp.maximum(std, xp.full_like(std, self.eps))


#: The conventions of theory.md section 3, by name (see the module docstring).
PRESETS: dict[str, AdvantageConvention] = {
    c.name: c
    for c in [
        # The paper's (P-3) read with the population std, eps = 0.
        AdvantageConvention("grpo", std="population", eps=0.0),
        AdvantageConvention("grpo-bessel", std="bessel", eps=0.0),
        # TRL GRPOTrainer, scale_rewards="group": (R - mean) / (std(unbiased) + 1e-4).
        AdvantageConvention("trl", std="bessel", eps=1e-4),
        # TRL GRPOTrainer, scale_rewards="batch": group mean, batch std(unbiased) + 1e-4.
        AdvantageConvention("trl-batch", std="bessel", eps=1e-4, scale_scope="batch"),
        # verl compute_grpo_outcome_advantage: group of one -> mean 0, std 1.
        AdvantageConvention("verl", std="bessel", eps=1e-6, group_of_one="raw"),
        # verl grpo_vectorized: std = sqrt(max(var(unbiased), 1e-6)), then + 1e-6.
        AdvantageConvention(
            "verl-vectorized", std="bessel", eps=1e-6, var_floor=1e-6, group_of_one="raw"
        ),
        # OpenRLHF advantage_estimator group_norm: requires n_samples_per_prompt > 1.
        AdvantageConvention("openrlhf", std="bessel", eps=1e-9, group_of_one="raise"),
        # Dr.GRPO and the paper's categorical simulation (appendix J): A = R - mean R.
        AdvantageConvention("dr-grpo", std="none"),
        # verl with norm_adv_by_std_in_grpo=False: a group of one has mean 0, so A = r.
        AdvantageConvention("verl-dr-grpo", std="none", group_of_one="raw"),
        AdvantageConvention("rloo", std="none", baseline="loo", group_of_one="raise"),
        # verl compute_rloo_outcome_advantage: a group of one keeps A = r.
        AdvantageConvention("verl-rloo", std="none", baseline="loo", group_of_one="raw"),
        # TRL RLOOTrainer: a group of one gets A = 0.
        AdvantageConvention("trl-rloo", std="none", baseline="loo", group_of_one="zero"),
    ]
}


def get_convention(
    name_or_convention: str | AdvantageConvention = "grpo", **overrides: Any
) -> AdvantageConvention:
    """Return a preset (by name) or a given convention, with some fields replaced.

    Parameters
    ----------
    name_or_convention : str or AdvantageConvention
        A key of :data:`PRESETS` or a convention object.
    **overrides
        Fields of :class:`AdvantageConvention` to replace (e.g. ``eps=1e-3``). The result's name
        records them, e.g. ``"trl(eps=0.001)"``.

    Returns
    -------
    AdvantageConvention

    Examples
    --------
    >>> get_convention("trl", std="population").name
    "trl(std='population')"
    """
    if isinstance(name_or_convention, AdvantageConvention):
        conv = name_or_convention
    elif isinstance(name_or_convention, str) and name_or_convention in PRESETS:
        conv = PRESETS[name_or_convention]
    else:
        fail("advantage", name_or_convention, "one of " + ", ".join(repr(k) for k in PRESETS))
    if not overrides:
        return conv
    fields = {f.name for f in dataclasses.fields(AdvantageConvention)}
    for key in overrides:
        if key not in fields:
            fail("override", key, "a field of AdvantageConvention: " + ", ".join(sorted(fields)))
    if "name" not in overrides:
        detail = ",".join(f"{k}={v!r}" for k, v in overrides.items())
        overrides = {**overrides, "name": f"{conv.name}({detail})"}
    return dataclasses.replace(conv, **overrides)
