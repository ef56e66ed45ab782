"""Group-relative advantages, their trainer conventions, and the focal weight of F-GRPO.

A group of N rollouts of one prompt gets rewards R_1..R_N; every group-relative method turns them
into advantages by subtracting a group baseline and (optionally) dividing by a group scale. The
paper's GRPO advantage is (P-3)

    A_i = (R_i - mean R) / (std R + eps),     a group with equal rewards gets A = 0,

and it does not say whether "std" is the population or the sample (Bessel) standard deviation.
Public trainers differ in exactly these details, so each detail is a named option of
:class:`AdvantageConvention`, and :data:`PRESETS` holds the combinations that reproduce them
(theory.md section 3):

============  ==========  =====================  ===================  =====================
preset        std         eps                    zero-variance group  group of one
============  ==========  =====================  ===================  =====================
grpo          population  0                      A = 0                A = 0
grpo-bessel   Bessel      0                      A = 0                A = 0
trl           Bessel      std + 1e-4             A = 0                A = 0
verl          Bessel      std + 1e-6             A = 0                A = r / (1 + 1e-6)
openrlhf      Bessel      std + 1e-9             A = 0                refused (ValueError)
dr-grpo       none        -                      A = 0                A = 0
rloo          none        -                      A = 0                refused (ValueError)
paper-sim     none        -                      A = 0                A = 0
============  ==========  =====================  ===================  =====================

"dr-grpo" and "paper-sim" (the paper's categorical simulation, appendix J) both use the
mean-centred advantage A = R - mean R; "rloo" uses the leave-one-out baseline,
A_i = R_i - mean_{j != i} R_j = N/(N-1) (R_i - mean R).

The focal variant (section 4) multiplies the finished advantage of a whole group by
g = (1 - mu_hat)^gamma (P-12), mu_hat = X/N the group's empirical success rate (P-11), giving
A_F = g * A (P-13).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.special import betaln

from ._validate import check_array, check_int_array, check_scalar, fail

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
]

StdKind = Literal["population", "bessel", "none"]
EpsMode = Literal["add", "floor"]
Baseline = Literal["mean", "loo"]
ZeroVariance = Literal["zero", "formula"]
GroupOfOne = Literal["zero", "raw", "raise"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "std": ("population", "bessel", "none"),
    "eps_mode": ("add", "floor"),
    "baseline": ("mean", "loo"),
    "zero_variance": ("zero", "formula"),
    "group_of_one": ("zero", "raw", "raise"),
}


@dataclass(frozen=True)
class AdvantageConvention:
    """How a group of rewards becomes advantages (every detail the paper leaves open).

    The advantage of rollout i in a group of N >= 2 is

        A_i = s_b * (R_i - mean R) / D,

    with s_b = 1 for ``baseline="mean"`` and s_b = N/(N-1) for ``baseline="loo"`` (RLOO), and the
    scale D = 1 for ``std="none"``, D = std + eps for ``eps_mode="add"`` or D = max(std, eps) for
    ``eps_mode="floor"``, std being the population (divide by N) or Bessel (divide by N-1)
    standard deviation of the group's rewards.

    Attributes
    ----------
    name : str
        Label for tables and error messages.
    std : {"population", "bessel", "none"}
        Which standard deviation divides the centred reward; ``"none"`` divides by 1 (``eps`` is
        then ignored). The paper's (P-3) leaves population vs Bessel unstated.
    eps : float
        Non-negative stabilizer of the divisor.
    eps_mode : {"add", "floor"}
        ``"add"``: divide by std + eps (TRL, verl, OpenRLHF); ``"floor"``: by max(std, eps).
    baseline : {"mean", "loo"}
        Group mean, or leave-one-out mean of the other N-1 rewards (RLOO).
    zero_variance : {"zero", "formula"}
        A group whose rewards are all equal has centred rewards exactly 0. ``"zero"``: its
        advantages are 0 (0/0 is taken as 0). ``"formula"``: the formula as written, 0 / D, which
        is 0 when D > 0 and a ValueError when D = 0 (a std convention with eps = 0) instead of a
        silent NaN; a strict mode for checking that no 0/0 occurs.
    group_of_one : {"zero", "raw", "raise"}
        A group of size 1: A = 0; or, as verl does, mean 0 and std 1, so A = R / D with std := 1
        (``"raw"``); or refuse with a ValueError, as OpenRLHF does (``"raise"``).
    """

    name: str = "custom"
    std: StdKind = "population"
    eps: float = 0.0
    eps_mode: EpsMode = "add"
    baseline: Baseline = "mean"
    zero_variance: ZeroVariance = "zero"
    group_of_one: GroupOfOne = "zero"

    def __post_init__(self) -> None:
        for field, choices in _CHOICES.items():
            value = getattr(self, field)
            if value not in choices:
                fail(field, value, "one of " + ", ".join(repr(c) for c in choices))
        check_scalar("eps", self.eps, lo=0)

    def divisor(self, std: np.ndarray | float) -> np.ndarray | float:
        """The scale D that divides the centred rewards, given the groups' std."""
        if self.std == "none":
            return np.ones_like(std) if isinstance(std, np.ndarray) else 1.0
        if self.eps_mode == "add":
            return std + self.eps
        return np.maximum(std, self.eps)


#: The conventions of theory.md section 3, by name.
PRESETS: dict[str, AdvantageConvention] = {
    c.name: c
    for c in [
        # The paper's (P-3) read with the population std, eps = 0.
        AdvantageConvention("grpo", std="population", eps=0.0),
        AdvantageConvention("grpo-bessel", std="bessel", eps=0.0),
        # TRL GRPOTrainer: (R - mean) / (std(unbiased) + 1e-4).
        AdvantageConvention("trl", std="bessel", eps=1e-4),
        # verl compute_grpo_outcome_advantage: group of one -> mean 0, std 1.
        AdvantageConvention("verl", std="bessel", eps=1e-6, group_of_one="raw"),
        # OpenRLHF advantage_estimator group_norm: requires n_samples_per_prompt > 1.
        AdvantageConvention("openrlhf", std="bessel", eps=1e-9, group_of_one="raise"),
        AdvantageConvention("dr-grpo", std="none"),
        AdvantageConvention("rloo", std="none", baseline="loo", group_of_one="raise"),
        # The paper's categorical simulation (appendix J): advantage = R - mean(R), no std.
        AdvantageConvention("paper-sim", std="none"),
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
        fail("convention", name_or_convention, "one of " + ", ".join(repr(k) for k in PRESETS))
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


def _out(arr: np.ndarray) -> np.ndarray | float:
    """Python float for a 0-d result, the array otherwise."""
    return float(arr) if arr.ndim == 0 else arr


def _refuse_group_of_one(conv: AdvantageConvention) -> None:
    fail("N", 1, f">= 2 for convention {conv.name!r} (it refuses groups of one)")


def _zero_divisor(conv: AdvantageConvention) -> None:
    fail(
        "eps",
        conv.eps,
        f"> 0 for convention {conv.name!r}: zero_variance='formula' divides a zero-variance "
        "group by std + eps = 0",
    )


def group_advantages(
    rewards: Any, convention: str | AdvantageConvention = "grpo", **overrides: Any
) -> np.ndarray:
    """Group-relative advantages of every rollout (P-3 and the trainer variants).

    Parameters
    ----------
    rewards : array_like, shape (..., N)
        Rewards of groups of N rollouts; the last axis is the group.
    convention : str or AdvantageConvention
        A preset name (see :data:`PRESETS`; default ``"grpo"``: population std, eps 0) or a
        convention object.
    **overrides
        Fields of :class:`AdvantageConvention` to replace, see :func:`get_convention`.

    Returns
    -------
    numpy.ndarray, shape (..., N)
        Advantages. With a mean baseline they sum to zero within each group; they are
        permutation-equivariant along the last axis.

    Raises
    ------
    ValueError
        Non-finite rewards, a 0-d or empty group, a refused group of one, or a zero-variance group
        whose divisor is 0 under ``zero_variance="formula"``.

    Examples
    --------
    >>> group_advantages([1.0, 0.0, 0.0, 1.0], "trl")  # Bessel std 0.57735 + 1e-4
    array([ 0.86587,  -0.86587, -0.86587,  0.86587])  # doctest: +SKIP
    """
    conv = get_convention(convention, **overrides)
    r = check_array("rewards", rewards)
    if r.ndim == 0:
        fail("rewards", r.item(), "an array of shape (..., N), the last axis a group")
    n = r.shape[-1]
    if n == 1:
        if conv.group_of_one == "raise":
            _refuse_group_of_one(conv)
        if conv.group_of_one == "zero":
            return np.zeros_like(r)
        return r / conv.divisor(1.0)
    flat = r.max(axis=-1, keepdims=True) == r.min(axis=-1, keepdims=True)
    if conv.zero_variance == "formula" and conv.std != "none" and flat.any():
        if conv.divisor(0.0) == 0:
            _zero_divisor(conv)
    # A flat group's centred rewards are 0 exactly (not the rounding noise of its float mean).
    centred = np.where(flat, 0.0, r - r.mean(axis=-1, keepdims=True))
    if conv.baseline == "loo":
        centred = centred * (n / (n - 1))
    if conv.std == "none":
        adv = centred
    else:
        std = r.std(axis=-1, ddof=1 if conv.std == "bessel" else 0, keepdims=True)
        if not np.isfinite(std).all():
            bad = r[np.broadcast_to(~np.isfinite(std), r.shape)].flat[0]
            fail("rewards", bad, "small enough in magnitude for a finite group std")
        div = np.where(flat, conv.divisor(0.0), conv.divisor(std))
        if ((div == 0) & ~flat).any():
            bad = r[np.broadcast_to((div == 0) & ~flat, r.shape)].flat[0]
            fail("rewards", bad, "spread enough within a group for a non-zero std (underflow)")
        adv = np.divide(centred, div, out=np.zeros_like(centred), where=div != 0)
    if conv.zero_variance == "zero":
        adv = np.where(flat, 0.0, adv)
    if not np.isfinite(adv).all():
        bad = r[~np.isfinite(adv)].flat[0]
        fail("rewards", bad, "small enough in magnitude for finite centred rewards")
    return adv


def _mixed_binary(
    x: np.ndarray, y: np.ndarray, n: np.ndarray | None, conv: AdvantageConvention, d: float
) -> tuple[np.ndarray, np.ndarray]:
    """A+ and A- of a mixed binary group with success fraction x = X/N, y = 1 - x, 0 < x < 1.

    Centred rewards d y and -d x (times N/(N-1) for RLOO), population std d sqrt(x y) (times
    sqrt(N/(N-1)) for Bessel); ``n`` is only used by the RLOO and Bessel conventions.
    """
    loo = conv.baseline == "loo"
    bessel = conv.std == "bessel"
    factor = n / (n - 1.0) if (loo or bessel) else 1.0
    scale = factor if loo else 1.0
    num_pos, num_neg = d * y * scale, -d * x * scale
    if conv.std == "none":
        return num_pos, num_neg
    std = d * np.sqrt(x * y * factor) if bessel else d * np.sqrt(x * y)
    div = conv.divisor(std)
    return num_pos / div, num_neg / div


def binary_advantages(
    X: Any,
    N: Any,
    convention: str | AdvantageConvention = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
    **overrides: Any,
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Advantage of a correct and of an incorrect rollout in a binary group, in closed form.

    A group of N rollouts with X correct (reward ``r_correct``) and N - X incorrect (reward
    ``r_incorrect``). With d = r_correct - r_incorrect and x = X/N the centred rewards are
    d (1 - x) and -d x, and the population std is d sqrt(x (1 - x)); so for the population
    convention with eps = 0 (theory.md section 3)

        A+ = sqrt((1 - x) / x),    A- = -sqrt(x / (1 - x)),

    Bessel divides by sqrt(N/(N-1)) more, ``eps`` enters the divisor, RLOO multiplies the centred
    rewards by N/(N-1). These are the numbers :func:`group_advantages` gives the corresponding
    group (to rounding), at O(1) cost per (X, N), so per-X tables for N = 131,072 are cheap.

    Parameters
    ----------
    X : int or array_like of int
        Number of correct rollouts, 0 <= X <= N.
    N : int or array_like of int
        Group size, >= 1; broadcast against ``X``.
    convention : str or AdvantageConvention
        Preset name or convention (default ``"grpo"``).
    r_correct, r_incorrect : float
        Rewards of a correct and an incorrect rollout, ``r_correct > r_incorrect``.
    **overrides
        Fields of :class:`AdvantageConvention` to replace.

    Returns
    -------
    adv_correct, adv_incorrect : float or numpy.ndarray
        Advantages of a correct and of an incorrect rollout. Where the group has no such rollout
        (X = 0 for ``adv_correct``, X = N for ``adv_incorrect``) the value is 0.

    Raises
    ------
    ValueError
        Bad X, N or rewards, a refused group of one, or a zero divisor under
        ``zero_variance="formula"``.
    """
    conv = get_convention(convention, **overrides)
    x_arr = check_int_array("X", X, lo=0)
    n_arr = check_int_array("N", N, lo=1)
    rc = check_scalar("r_correct", r_correct)
    rw = check_scalar("r_incorrect", r_incorrect)
    if not rc > rw:
        fail("r_correct", rc, f"> r_incorrect = {rw!r}")
    if not np.isfinite(rc - rw):
        fail("r_correct", rc, f"such that r_correct - r_incorrect is finite (r_incorrect = {rw!r})")
    x_arr, n_arr = np.broadcast_arrays(x_arr, n_arr)
    if (x_arr > n_arr).any():
        bad = x_arr > n_arr
        fail("X", x_arr[bad].flat[0], f"<= N = {n_arr[bad].flat[0]}")
    d = rc - rw
    xf = x_arr.astype(float)
    nf = n_arr.astype(float)
    pos = np.zeros(x_arr.shape)
    neg = np.zeros(x_arr.shape)

    one = n_arr == 1
    if one.any():
        if conv.group_of_one == "raise":
            _refuse_group_of_one(conv)
        if conv.group_of_one == "raw":
            div1 = conv.divisor(1.0)
            pos = np.where(one & (x_arr == 1), rc / div1, pos)
            neg = np.where(one & (x_arr == 0), rw / div1, neg)

    many = ~one
    mixed = many & (x_arr > 0) & (x_arr < n_arr)
    flat = many & ~mixed
    if flat.any() and conv.zero_variance == "formula" and conv.std != "none":
        if conv.divisor(0.0) == 0:
            _zero_divisor(conv)
    # Zero-variance groups: the existing rollouts have centred reward exactly 0, so both
    # policies give 0 (and the missing side is 0 by definition).
    if mixed.any():
        n_m = np.where(mixed, nf, 2.0)  # placeholders keep the arithmetic finite elsewhere
        x_m = np.where(mixed, xf, 1.0)
        num_pos, num_neg = _mixed_binary(x_m / n_m, (n_m - x_m) / n_m, n_m, conv, d)
        pos = np.where(mixed, num_pos, pos)
        neg = np.where(mixed, num_neg, neg)
    return _out(pos), _out(neg)


def focal_weight(mu_hat: Any, gamma: Any) -> np.ndarray | float:
    """Focal weight g = (1 - mu_hat)^gamma of a group (P-12).

    Parameters
    ----------
    mu_hat : float or array_like
        Empirical success rate X/N of the group (P-11), in [0, 1].
    gamma : float or array_like
        Focusing exponent, >= 0; broadcast against ``mu_hat``. ``gamma = 0`` gives g = 1 exactly
        (also at mu_hat = 1, with the convention 0^0 = 1), i.e. the vanilla method.

    Returns
    -------
    float or numpy.ndarray
        g in [0, 1]: 1 for a group with no correct rollout, 0 for an all-correct group (gamma > 0).
    """
    m = check_array("mu_hat", mu_hat, lo=0, hi=1)
    g = check_array("gamma", gamma, lo=0)
    return _out(np.power(1.0 - m, g))


def focal_advantages(
    rewards: Any,
    gamma: Any,
    convention: str | AdvantageConvention = "grpo",
    correct: Any = None,
    **overrides: Any,
) -> np.ndarray:
    """Focal-weighted advantages A_F = g * A (P-13) of groups of rollouts.

    Parameters
    ----------
    rewards : array_like, shape (..., N)
        Rewards of groups of N rollouts (last axis = group).
    gamma : float or array_like
        Focusing exponent >= 0; an array must broadcast against the batch shape ``(...)``.
    convention : str or AdvantageConvention
        Convention of the underlying advantage (see :func:`group_advantages`).
    correct : array_like of bool, shape (..., N), optional
        Which rollouts are correct, for mu_hat = X/N (P-11). Default: ``rewards > 0``, which is
        right for both reward encodings of the paper (1/0 for the LLM runs, +1/-1 for the
        categorical simulation); pass it explicitly for any other reward scheme.
    **overrides
        Fields of :class:`AdvantageConvention` to replace.

    Returns
    -------
    numpy.ndarray, shape ``broadcast((...), gamma.shape) + (N,)``
        ``g[..., None] * A``; with gamma = 0 exactly :func:`group_advantages`.
    """
    adv = group_advantages(rewards, convention, **overrides)
    r = np.asarray(rewards, dtype=float)
    if correct is None:
        mask = r > 0
    else:
        mask = np.asarray(correct)
        if mask.dtype != bool:
            fail("correct", mask.dtype, "a boolean array")
        if mask.shape != r.shape:
            fail("correct", mask.shape, f"of the same shape as rewards {r.shape}")
    mu_hat = mask.mean(axis=-1)
    g = np.asarray(focal_weight(mu_hat, gamma))
    return g[..., None] * adv


def weighted_magnitudes(mu: Any, gamma: Any) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Focal-weighted advantage magnitudes g(mu)|A+(mu)| and g(mu)|A-(mu)| (Fig. 4).

    Population convention, eps = 0, evaluated at mu_hat = mu:
    g|A+| = (1 - mu)^gamma sqrt((1 - mu)/mu) and g|A-| = (1 - mu)^gamma sqrt(mu/(1 - mu)).

    Parameters
    ----------
    mu : float or array_like
        Success rate in (0, 1).
    gamma : float or array_like
        Focusing exponent >= 0, broadcast against ``mu``.

    Returns
    -------
    pos, neg : float or numpy.ndarray
        g|A+| and g|A-|.
    """
    m = check_array("mu", mu, lo=0, hi=1, lo_open=True, hi_open=True)
    g = np.asarray(focal_weight(m, gamma))
    pos, neg = _mixed_binary(m, 1.0 - m, None, PRESETS["grpo"], 1.0)
    return _out(g * pos), _out(-g * neg)


def lr_multiplier(gamma: Any) -> np.ndarray | float:
    """Learning-rate multiplier m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) (appendix N).

    The mean absolute population-std advantage of a binary group at success rate mu is
    2 sqrt(mu (1 - mu)); focal weighting multiplies it by (1 - mu)^gamma. Averaged over
    mu ~ Uniform(0, 1) and divided by the vanilla average, this is m_gamma: the factor by which
    F-GRPO shrinks the average update. The paper trains a vanilla control with learning rate
    base LR * m_gamma (m_0.5 = 32 / (15 pi) ~ 0.679) to show that the focal gain is not merely a
    smaller step.

    Parameters
    ----------
    gamma : float or array_like
        Focusing exponent >= 0.

    Returns
    -------
    float or numpy.ndarray
        m_gamma in (0, 1]; exactly 1 at gamma = 0.
    """
    g = check_array("gamma", gamma, lo=0)
    return _out(np.exp(betaln(1.5, g + 1.5) - betaln(1.5, 1.5)))
