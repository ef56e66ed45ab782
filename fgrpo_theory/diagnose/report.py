"""The diagnosis of a training log: fits, intervals and the answers (theory.md sections 12, 13).

:func:`diagnose` takes groups (``prompt, step, n, n_correct``, see :mod:`.io`) and returns a long
table, one row per quantity (and parameter, and step window):

- ``groups``, ``prompts``, ``N`` (the most common group size, "the user's N");
- ``beta_a``, ``beta_b``: beta-binomial maximum likelihood, with bootstrap intervals over prompts;
- ``loglik_beta``, ``loglik_npmle``, ``preferred_fit`` (by AIC: 2 parameters for the Beta,
  2 * atoms - 1 for the grid mixture; the note names the winner);
- ``active_fraction_observed`` (share of groups with 0 < X < n) and ``active_fraction_predicted``
  (the Beta fit, each group at its own n: 1 - B(a+n, b)/B(a, b) - B(a, b+n)/B(a, b)), also
  ``active_fraction_predicted_npmle``;
- for each rho: ``p_tail_miss`` = E[Pr(B)] (Lemma 3.1 with tau = rho mu, averaged over the
  fitted distribution at N: the share of updates that are active and miss a rare subset of
  relative mass rho, no dynamic sampling) and ``p_tail_miss_given_active`` = E[Pr(B)] / E[Pr(A)]
  (the share of the updates kept by dynamic sampling that miss it, section 12);
  ``N_min_share`` (the N in 2..compute minimising E[Pr(B)]/E[Pr(A)] at a fixed number of rollouts
  per step, compute; E[Pr(B)]/E[Pr(A)] falls with N for each mu (section 12), so this is often
  the bound itself) and ``N_peak_miss`` (the N maximising E[Pr_N(B)], the population version of
  Lemma 3.1's peak: the worst group size without dynamic sampling);
- for each gamma: ``lr_multiplier_focal`` (:func:`~fgrpo_theory.advantages.effective_lr_multiplier`
  on the fitted distribution at N) and, given ``lr``, ``control_lr`` = lr * multiplier, the
  learning rate of the matched vanilla control (section 11).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._validate import check_int_array, check_scalar, check_seed, fail
from ..advantages import effective_lr_multiplier
from ..tail_miss import active_probability, tail_miss_probability
from .fit import (
    beta_active_fraction,
    beta_atoms,
    check_groups,
    fit_beta_binomial,
    fit_beta_counts,
    fit_npmle,
    group_pairs,
)

__all__ = ["diagnose", "DEFAULT_RHO", "DEFAULT_GAMMA", "COLUMNS"]

DEFAULT_RHO = (0.01, 0.05, 0.1, 0.25, 0.5)
DEFAULT_GAMMA = (0.5, 1.0, 2.0)
COLUMNS = ("window", "quantity", "parameter", "value", "ci_low", "ci_high", "note")
#: Largest N considered for N_min_share / N_max_missed (and the largest --compute).
MAX_COMPUTE = 4096
#: Smallest relative mass rho accepted (tau = rho * mu stays > 0 for every fitted mu).
MIN_RHO = 1e-200


def _population_miss(
    mu: np.ndarray, w: np.ndarray, N: np.ndarray, rho: float
) -> tuple[np.ndarray, np.ndarray]:
    """E[Pr_N(B)] and E[Pr_N(A)] over atoms (mu, w), for each N (theory.md sections 2, 12)."""
    mu = np.clip(mu, 1e-300, 1 - 1e-16)
    Nc = np.asarray(N, dtype=float)[:, None]
    pb = np.asarray(tail_miss_probability(Nc, mu[None, :], rho * mu[None, :]))
    pa = np.asarray(active_probability(Nc, mu[None, :]))
    # explicit sums, not pb @ w: BLAS sums in an order that depends on its thread count
    return (pb * w).sum(axis=1), (pa * w).sum(axis=1)


def _analyse(
    n: np.ndarray,
    x: np.ndarray,
    prompts: np.ndarray,
    *,
    rho: np.ndarray,
    gamma: np.ndarray,
    lr: float | None,
    compute: int | None,
    bootstrap: int,
    seed: int,
    window: str,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(
        q: str, value: Any, param: str = "", lo: float = np.nan, hi: float = np.nan, note: str = ""
    ) -> None:
        rows.append(
            dict(
                window=window,
                quantity=q,
                parameter=param,
                value=value,
                ci_low=lo,
                ci_high=hi,
                note=note,
            )
        )

    beta = fit_beta_binomial(n, x, prompts)
    mix = fit_npmle(n, x, prompts)
    sizes, counts = np.unique(n, return_counts=True)
    N = int(sizes[np.argmax(counts)])
    comp = int(compute) if compute is not None else min(MAX_COMPUTE, max(64, 8 * N))

    # Bootstrap over prompts: resample prompts with replacement, refit the Beta on the groups.
    # A replicate's weight of each (n, x) pair is the sum, over its groups, of how often the
    # group's prompt was drawn: O(groups) work and memory, no prompts x pairs matrix.
    nn, xx, _, pair_of_group = group_pairs(n, x)
    pid, p_inv = np.unique(prompts, return_inverse=True)
    rng = np.random.default_rng(check_seed(seed))
    boot = []
    for _ in range(bootstrap):
        pick = np.bincount(rng.integers(0, pid.size, pid.size), minlength=pid.size)
        wts = np.bincount(pair_of_group, weights=pick[p_inv].astype(float), minlength=nn.size)
        keep = wts > 0
        f = fit_beta_counts(nn[keep], xx[keep], wts[keep], start=(beta.a, beta.b))
        boot.append((f.a, f.b))
    boot_ab = np.array(boot) if boot else np.empty((0, 2))

    def ci(values: np.ndarray) -> tuple[float, float]:
        if values.size < 2:
            return np.nan, np.nan
        lo, hi = np.quantile(values, [0.025, 0.975])
        return float(lo), float(hi)

    boot_atoms = [beta_atoms(a, b, 100) for a, b in boot_ab]

    def over_boot(fn) -> tuple[float, float]:
        """Interval of fn(atoms, weights) over the bootstrap fits (100-node quadrature each)."""
        return ci(np.array([fn(*at) for at in boot_atoms])) if boot_atoms else (np.nan, np.nan)

    add("groups", float(n.size))
    add("prompts", float(pid.size))
    add("N", float(N), note="most common group size")
    add(
        "beta_a",
        beta.a,
        lo=ci(boot_ab[:, 0])[0],
        hi=ci(boot_ab[:, 0])[1],
        note="" if beta.converged else "optimiser did not report convergence",
    )
    add("beta_b", beta.b, lo=ci(boot_ab[:, 1])[0], hi=ci(boot_ab[:, 1])[1])
    add("loglik_beta", beta.loglik)
    add("loglik_npmle", mix.loglik, note=f"{mix.support_size} atoms on a 201-point grid")
    aic_beta = 4 - 2 * beta.loglik
    aic_mix = 2 * (2 * mix.support_size - 1) - 2 * mix.loglik
    better = "beta" if aic_beta <= aic_mix else "npmle"
    add("preferred_fit", aic_mix - aic_beta, note=f"{better} (AIC difference npmle - beta)")

    observed = float(np.mean((x > 0) & (x < n)))
    add("active_fraction_observed", observed)
    pred = float(np.mean(beta_active_fraction(beta.a, beta.b, n)))
    lo, hi = ci(np.array([np.mean(beta_active_fraction(a, b, n)) for a, b in boot_ab]))
    add("active_fraction_predicted", pred, lo=lo, hi=hi, note="beta-binomial fit")
    mu_m, w_m = mix.mu, mix.weights
    pa_n = [float(np.sum(w_m * (1 - mu_m**s - (1 - mu_m) ** s))) for s in sizes]
    add("active_fraction_predicted_npmle", float(np.sum(counts * np.asarray(pa_n))) / n.size)

    Ns = np.arange(2, comp + 1)
    atoms = beta_atoms(beta.a, beta.b)
    for r in rho:
        par = f"rho={r:g}"
        pb, pa = _population_miss(*atoms, np.array([N]), float(r))

        def share(mu, w, r=r):
            qb, qa = _population_miss(mu, w, np.array([N]), float(r))
            return float(qb[0] / qa[0])

        def miss(mu, w, r=r):
            qb, _ = _population_miss(mu, w, np.array([N]), float(r))
            return float(qb[0])

        lo, hi = over_boot(miss)
        add("p_tail_miss", float(pb[0]), par, lo, hi, note=f"at N={N}, no dynamic sampling")
        lo, hi = over_boot(share)
        add(
            "p_tail_miss_given_active",
            float(pb[0] / pa[0]),
            par,
            lo,
            hi,
            note=f"at N={N}, dynamic sampling",
        )
        pbs, pas = _population_miss(*atoms, Ns, float(r))
        add(
            "N_min_share",
            float(Ns[np.argmin(pbs / pas)]),
            par,
            note=f"argmin over N in 2..{comp} of E[Pr(B)]/E[Pr(A)]",
        )
        add(
            "N_peak_miss",
            float(Ns[np.argmax(pbs)]),
            par,
            note=f"argmax over N in 2..{comp} of E[Pr(B)] (worst N without dynamic sampling)",
        )
    for g in gamma:
        par = f"gamma={g:g}"
        m = float(effective_lr_multiplier(atoms[0], N, g, weights=atoms[1]))
        lo, hi = over_boot(lambda mu, w, g=g: float(effective_lr_multiplier(mu, N, g, weights=w)))
        add("lr_multiplier_focal", m, par, lo, hi, note=f"E[g|A|]/E[|A|] at N={N}, grpo")
        if lr is not None:
            add("control_lr", lr * m, par, lr * lo, lr * hi, note=f"lr={lr:g} times the multiplier")
    return rows


def diagnose(
    groups: pd.DataFrame,
    *,
    rho: Any = DEFAULT_RHO,
    gamma: Any = DEFAULT_GAMMA,
    lr: float | None = None,
    compute: int | None = None,
    by_step: int | None = None,
    bootstrap: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """Fit the success-probability distribution of a log's groups and answer section 13's questions.

    Parameters
    ----------
    groups : pandas.DataFrame
        Columns ``prompt, step, n, n_correct`` (:func:`~fgrpo_theory.diagnose.io.read_log`).
    rho : float or sequence of float
        Relative masses of the rare subset, in (0, 1).
    gamma : float or sequence of float
        Focal exponents for the learning-rate multiplier, >= 0.
    lr : float, optional
        The focal run's learning rate; adds ``control_lr`` rows.
    compute : int, optional
        Rollouts per prompt-step budget bounding the group sizes searched (default max(64, 8 N)),
        2 <= compute <= 4096.
    by_step : int, optional
        Window width in steps: the analysis per window ``[k W, (k+1) W)`` as well as overall.
    bootstrap : int
        Bootstrap replicates over prompts (0 for none; default 200).
    seed : int
        Seed of the bootstrap.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`; ``window`` is ``"all"`` or ``"A-B"`` (steps, inclusive).
    """
    rho_a = np.atleast_1d(np.asarray(rho, dtype=float))
    for r in rho_a:
        check_scalar("rho", r, lo=0, hi=1, lo_open=True, hi_open=True)
        if r < MIN_RHO:  # tau = rho * mu would underflow to 0 for small fitted mu
            fail("rho", r, f">= {MIN_RHO:g} (tau = rho * mu must not underflow to 0)")
    gam = np.atleast_1d(np.asarray(gamma, dtype=float))
    for g in gam:
        check_scalar("gamma", g, lo=0)
    if lr is not None:
        lr = check_scalar("lr", lr, lo=0, lo_open=True)
    if compute is not None:
        compute = int(check_int_array("compute", compute, lo=2, hi=MAX_COMPUTE))
    bootstrap = int(check_int_array("bootstrap", bootstrap, lo=0, hi=100_000))
    seed = int(check_int_array("seed", seed, lo=0))
    if not isinstance(groups, pd.DataFrame):
        fail("groups", type(groups).__name__, "a DataFrame with columns prompt, step, n, n_correct")
    missing = [c for c in ("prompt", "step", "n", "n_correct") if c not in groups.columns]
    if missing:
        fail("groups", "columns " + ",".join(map(str, groups.columns)),
             "a DataFrame with columns prompt, step, n, n_correct (missing "
             + ", ".join(missing) + ")")  # fmt: skip
    if len(groups) == 0:
        fail("LOG", "no groups", "a log with at least one group")
    n, x = check_groups(groups["n"].to_numpy(), groups["n_correct"].to_numpy())
    if n.max() > 100_000:
        fail("n", int(n.max()), "<= 100000 (group size)")
    if groups["prompt"].isna().any():
        fail("prompt", "a missing value", "a prompt id in every group")
    prompts = groups["prompt"].astype(str).to_numpy()
    steps = check_int_array("step", groups["step"].to_numpy(), lo=0)
    kw = dict(rho=rho_a, gamma=gam, lr=lr, compute=compute, bootstrap=bootstrap, seed=seed)
    rows = _analyse(n, x, prompts, window="all", **kw)
    if by_step is not None:
        w = int(check_int_array("by_step", by_step, lo=1))
        win = (steps - steps.min()) // w
        if np.unique(win).size > 1000:
            fail("by_step", w, "wide enough for at most 1000 windows")
        for k in np.unique(win):
            sel = win == k
            lo = int(steps.min() + k * w)
            label = f"{lo}-{lo + w - 1}"
            try:
                rows += _analyse(n[sel], x[sel], prompts[sel], window=label, **kw)
            except ValueError as e:
                rows.append(
                    dict(
                        window=label,
                        quantity="skipped",
                        parameter="",
                        value=np.nan,
                        ci_low=np.nan,
                        ci_high=np.nan,
                        note=str(e),
                    )
                )
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    # No NaN in any output: a quantity without an interval (or a skipped window) has None there.
    for col in ("value", "ci_low", "ci_high"):
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    return df
